"""The copy probe's rows (experiments.copy_probe): the loss falls on a span copied from earlier."""

import numpy as np
import pytest

from experiments.copy_probe import copy_batch


def test_every_target_under_the_mask_is_the_token_written_at_the_first_copy():
  rows = copy_batch(np.random.default_rng(0), batch=8, length=64, repeat=8, vocab=512)
  assert rows["tokens"].shape == rows["targets"].shape == (8, 64)
  for b in range(8):
    tokens, targets, mask = rows["tokens"][b], rows["targets"][b], rows["loss_mask"][b]
    masked = np.flatnonzero(mask)
    assert len(masked) == 7  # the repeat less its first token
    # Each masked target appears earlier in the row, followed by what comes before it here:
    # predicting it needs only a look back at the first copy.
    for t in masked:
      earlier = [i for i in range(t - 1) if tokens[i] == tokens[t] and tokens[i + 1] == targets[t]]
      assert earlier, (b, t)
  with pytest.raises(ValueError, match="cannot hold a span"):
    copy_batch(np.random.default_rng(0), batch=1, length=16, repeat=8, vocab=512)
