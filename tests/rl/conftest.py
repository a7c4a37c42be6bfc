"""Shared fixtures: a few generated tasks, their oracle trajectories and a small tokenizer."""

import pytest

from compoworld.agents.agent import OracleAgent
from compoworld.agents.episode import run_episode
from compoworld.tasks.generate import generate_tasks
from rl.data.chat import SPECIAL_TOKENS, ChatRenderer
from rl.data.corpus import build_corpus
from rl.data.tokenizer import SentencePieceTokenizer


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
