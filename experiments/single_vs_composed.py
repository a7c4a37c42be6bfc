"""Single vs composed (paper, section 5.3.2): the same budget of SFT trajectories from
single-service tasks and from composed tasks, both scored on held-out composed tasks.

``python -m experiments.single_vs_composed --seeds=0,1,2 --workdir=DIR
[--config=configs/experiments.py:single_vs_composed] [--config.budget=500]`` writes ``seed_<s>/``
per seed and, in ``DIR``, bar plots ``pass_rate.png``, ``rubric_score.png``, ``eval_loss.png``
(mean and 95% t-interval over seeds per arm) and ``summary.json``. The "single" arm is K = 1
(``--config.single_k``): every walk stays in one service, revisiting it with the service as its
own bridge where it can (``compoworld.tasks.walks.sample_single_walk``); composed is K = 2 (K = 4
at the ``:single_vs_composed_test`` size). The composed tasks are held out by service pair, each
a pair whose parts other pairs show (``compoworld.tasks.splits``), and both arms are scored on
them and on held-out single-service tasks; a seed whose ``seed_<s>/result.json`` is there with
the same config is reused.
"""

from experiments._experiment import run_experiment
from rl.pipeline.sft_experiments import single_vs_composed

if __name__ == "__main__":
  run_experiment(single_vs_composed, "single_vs_composed")
