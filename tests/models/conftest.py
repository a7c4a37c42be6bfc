"""Shared fixtures and jitted entry points (one compile per shape for the whole session)."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from models import create_model, get_config

# Most tests run the tiny model on this batch shape, so its forward compiles once.
BATCH, SEQ = 3, 20


@pytest.fixture(scope="session")
def tiny_config():
  return get_config("tiny")


@pytest.fixture(scope="session")
def tiny_model(tiny_config):
  return create_model(tiny_config, seed=0)


@nnx.jit
def forward(model, tokens, segment_ids=None, positions=None):
  return model.forward(tokens, segment_ids_bt=segment_ids, positions_bt=positions)


def random_tokens(shape, vocab_size, seed=0):
  """Made with numpy: an eager jax.random call would compile a kernel per shape."""
  return jnp.asarray(np.random.default_rng(seed).integers(0, vocab_size, shape), jnp.int32)


def paired_word_forms(vocab_size, words=None):
  """Word-form tables (plain [V], spaced [V]) for `models.copy_head.set_word_forms` in which
  tokens 2k and 2k + 1 are one word, 2k its plain form and 2k + 1 its spaced one, for the first
  ``words`` pairs (default: every whole pair of the vocabulary); every other token its own."""
  plain, spaced = np.arange(vocab_size), np.arange(vocab_size)
  n = 2 * (vocab_size // 2 if words is None else words)
  plain[:n], spaced[:n] = np.arange(n) // 2 * 2, np.arange(n) // 2 * 2 + 1
  return plain, spaced
