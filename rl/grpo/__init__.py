"""GRPO: rollouts with the environment in the loop, rubric rewards and the policy update.

- ``trainer``: ``train(config, workdir)``, tasks, the initial policy and the loop.
- ``batches``: the tasks a step draws, rewards and group advantages, the padded batch.
- ``update``: log-probabilities at the loss tokens, the optimizer, the jitted update step.
- ``loss``: the GRPO policy loss (eq. 7, 8) on plain arrays.
- ``rewards``: rubric rewards and group-relative advantages (eq. 5, 6).
- ``rollout``, ``turn``, ``sampling``: the batched multi-turn rollout engine, one turn of its
  batch on the device, and its samplers.
- ``bench``, ``rollout_bench``: one GRPO step, and the rollout engine, timed.
"""

from rl.grpo.trainer import train

__all__ = ["train"]
