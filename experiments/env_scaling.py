"""Environment scaling (paper, section 5.3.1): the held-out score against the number of distinct
environments trained on, with the same recipe.

``python -m experiments.env_scaling --seeds=0,1,2 --workdir=DIR
[--config=configs/experiments.py:env_scaling] [--config.budget=epochs]`` writes, per seed,
``seed_<s>/`` (data, one SFT run and evaluation per size), and in ``DIR`` the plots
``pass_rate.png``, ``rubric_score.png``, ``eval_loss.png``, ``eval_turn_match.png`` (mean and 95%
t-interval over seeds against the size) and ``summary.json``. CPU defaults: K = 1 tasks, the
tasks of 3 / 10 / 30 services, 600 steps each (``--config.budget=epochs``: one epoch each);
``--config.tasks.num_services=3 --config.sizes=16,32,64,128`` is the paper's form, one
trajectory per distinct K = 3 composition.
"""

from experiments._experiment import run_experiment
from rl.pipeline.sft_experiments import env_scaling

if __name__ == "__main__":
  run_experiment(env_scaling, "env_scaling")
