"""SFT: supervised fine-tuning on verified trajectories.

- ``trainer``: ``train(config, workdir)``, the mesh, state, checkpoints and the loop.
- ``steps``: the masked token loss, the optimizer and the jitted train and eval steps.
- ``data``: the SFT set, the tokenizer and each process's batches.
- ``copying``: in-context copying rows, and a copy stage before SFT.
- ``bench``: train-step throughput and MFU on the reference shape.
"""

from rl.sft.trainer import train

__all__ = ["train"]
