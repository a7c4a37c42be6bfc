"""The demo pipeline's stage and policy names, read by the pipeline and by its report."""

#: The demo's stages, in the order they run.
STAGES = ("library", "tasks", "split", "trajectories", "sft", "grpo", "eval")
#: The policies evaluated, in order.
POLICIES = ("before_sft", "after_sft", "after_grpo")


def eval_name(policy: str, decoding: str) -> str:
  """The evaluation of ``policy`` under ``decoding``: its key in summaries and its folder."""
  return policy if decoding == "free" else f"{policy}+{decoding}"
