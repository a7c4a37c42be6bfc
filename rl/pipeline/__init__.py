"""The demo pipeline and the paper's experiments on top of it.

- ``run``: the whole pipeline on one machine, stage by stage, as ``make demo`` runs it.
- ``stages``: the stage and policy names the pipeline and its report read.
- ``report``: the pipeline's ``report.md``.
- ``plots``: line plots with optional 95% bands, as PNG.
- ``experiments``: what the paper's experiments share, seeds, means and intervals.
- ``sft_experiments``: the SFT-data experiments (section 5.3).
- ``arm_data``: their arms' tasks, held-out sets and oracle trajectories.
- ``reweighting``: reward reweighting (appendix A), GRPO arms from one SFT policy.
- ``diagnose``: where a policy loses, a teacher-forced breakdown of its held-out turns.
"""
