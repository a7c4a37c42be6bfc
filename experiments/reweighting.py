"""Reward reweighting (paper, appendix A; figures 5b and 6): GRPO from one SFT policy per seed with
the completion-focused, uniform and binary rewards.

``python -m experiments.reweighting --seeds=0,1,2 --workdir=DIR
[--config=configs/experiments.py:reweighting] [--config.grpo.num_steps=200]`` writes ``seed_<s>/``
per seed (data, the SFT run, one GRPO run per reward) and, in ``DIR``, the training curves
(``train_reward.png``, ``train_criteria_met.png``, ``train_pass_rate.png``), the held-out curves
(``eval_rubric_score.png``, ``eval_pass_rate.png``), each the mean and 95% t-interval over seeds,
and ``summary.json``.
"""

from experiments._experiment import run_experiment
from rl.pipeline.reweighting import reweighting

if __name__ == "__main__":
  run_experiment(reweighting, "reweighting")
