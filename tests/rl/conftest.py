"""Shared fixtures: a few generated tasks, their oracle trajectories and a small tokenizer."""

import pytest

from compoworld.agents import OracleAgent
from compoworld.episode import run_episode
from compoworld.generate import generate_tasks
from rl.chat import SPECIAL_TOKENS, ChatRenderer
from rl.corpus import build_corpus
from rl.tokenizer import SentencePieceTokenizer


@pytest.fixture(scope="session")
def tasks():
  tasks, _ = generate_tasks(3, seed=0, progress=False)
  assert len(tasks) == 3
  return tasks


@pytest.fixture(scope="session")
def oracle_messages(tasks):
  return [run_episode(OracleAgent(), task)[0].messages for task in tasks]


@pytest.fixture(scope="session")
def tokenizer(tasks):
  return SentencePieceTokenizer.train(build_corpus(tasks, progress=False), 1024, SPECIAL_TOKENS)


@pytest.fixture(scope="session")
def renderer(tokenizer):
  return ChatRenderer(tokenizer)
