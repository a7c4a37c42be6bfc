"""Environment scaling (paper, section 5.3.1): the held-out score against the number of SFT
trajectories, each from a distinct composition, with the same recipe.

``python -m experiments.env_scaling --seeds=0,1,2 --workdir=DIR
[--config=configs/experiments.py:env_scaling] [--config.sizes=100,500,1000,3000]`` writes, per
seed, ``seed_<s>/`` (data, one SFT run and evaluation per size), and in ``DIR`` the plots
``pass_rate.png``, ``rubric_score.png``, ``eval_loss.png`` (mean and 95% t-interval over seeds
against the size) and ``summary.json``. CPU default sizes: 16, 32, 64, 128.
"""

from experiments._experiment import run_experiment
from rl.pipeline.sft_experiments import env_scaling

if __name__ == "__main__":
  run_experiment(env_scaling, "env_scaling")
