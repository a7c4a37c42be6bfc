"""SFT and GRPO as several processes (jax.distributed on one CPU host, gloo collectives): 2
processes of 4 fake devices train as 1 process of 8, and an SFT run that loses a process resumes
from its checkpoint.

Each run is `experiments.train_sft` / `train_grpo` in subprocesses, as a user launches it."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from tests.rl.test_sft import run_files  # noqa: F401 (the conversations and tokenizer)

ROOT = Path(__file__).resolve().parents[2]
STEPS = 4


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _launch(
  config: Path,
  workdir: Path,
  processes: int,
  extra: dict[int, list[str]] | None = None,
  script: str = "experiments.train_sft",
):
  """`processes` processes of 8 / `processes` CPU devices each running `script` with `config`
  in `workdir`."""
  env = {
    **os.environ,
    "JAX_PLATFORMS": "cpu",
    "XLA_FLAGS": f"--xla_force_host_platform_device_count={8 // processes}",
  }
  port = _free_port()
  procs = []
  for i in range(processes):
    args = [sys.executable, "-m", script, f"--config={config}"]
    args += [f"--workdir={workdir}", *(extra or {}).get(i, [])]
    if processes > 1:
      args += [f"--num_processes={processes}", f"--process_id={i}"]
      args += [f"--coordinator_address=127.0.0.1:{port}"]
    log = open(workdir.parent / f"{workdir.name}-{i}.log", "a")  # noqa: SIM115
    procs.append(subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
  return procs


def _wait(procs, timeout: float = 600) -> None:
  deadline = time.monotonic() + timeout
  for p in procs:
    p.wait(timeout=max(deadline - time.monotonic(), 1))
  for i, p in enumerate(procs):
    assert p.returncode == 0, f"process {i} exited with {p.returncode}"


def _metrics(workdir: Path, key: str) -> dict[int, float]:
  rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  return {r["step"]: r[key] for r in rows if key in r}


def _losses(workdir: Path) -> dict[int, float]:
  return _metrics(workdir, "loss")


def _params(workdir: Path) -> dict[str, np.ndarray]:
  import jax
  from flax import nnx

  from rl.serve.policy import load_policy_parts

  with nnx.use_eager_sharding(False):
    model, _, _ = load_policy_parts(workdir / "policy")
  leaves = jax.tree_util.tree_leaves_with_path(nnx.state(model, nnx.Param))
  return {jax.tree_util.keystr(k): np.asarray(v) for k, v in leaves}


@pytest.fixture(scope="module")
def setup(tmp_path_factory, run_files):  # noqa: F811
  root = tmp_path_factory.mktemp("multiprocess")
  config = root / "config.py"
  config.write_text(
    textwrap.dedent(f"""
    from configs.sft import get_config as sft_config

    def get_config():
      c = sft_config("tiny")
      c.model.overrides = {{"num_layers": 1, "full_attention_interval": 1, "moe_backend": "sort",
                            "d_model": 32, "expert_dim": 16, "shared_expert_dim": 16}}
      c.tokenizer.path = "{run_files / "tok"}"
      c.tokenizer.chat_system = "brief"
      c.data.trajectories = "{run_files / "sft.jsonl"}"
      c.data.seq_len = 256
      c.data.batch_size = 8
      c.data.num_shards = 2  # the same batches for 1 and 2 processes
      c.data.eval_fraction = 0.2
      c.data.num_epochs = 10
      c.max_steps = {STEPS}
      c.optim.lr = 1e-2
      c.optim.warmup_steps = 2
      c.eval_every = 2
      c.checkpoint.every = 2
      return c
    """)
  )
  one = root / "one"
  _wait(_launch(config, one, 1))
  return root, config, one


@pytest.mark.slow
@pytest.mark.heavy  # processes of fake devices: make test-all and CI run it
def test_two_processes_train_as_one(setup):
  root, config, one = setup
  two = root / "two"
  _wait(_launch(config, two, 2))
  losses_one, losses_two = _losses(one), _losses(two)
  assert sorted(losses_one) == list(range(1, STEPS + 1))
  np.testing.assert_allclose(
    [losses_two[s] for s in sorted(losses_one)], [losses_one[s] for s in sorted(losses_one)],
    atol=1e-5,
  )  # fmt: skip
  assert losses_one[STEPS] < losses_one[1]  # it trains
  evals = [
    [json.loads(line).get("eval_loss") for line in (w / "metrics.jsonl").read_text().splitlines()]
    for w in (one, two)
  ]
  np.testing.assert_allclose(
    [e for e in evals[1] if e is not None], [e for e in evals[0] if e is not None], atol=1e-5
  )
  p1, p2 = _params(one), _params(two)
  assert p1.keys() == p2.keys() and p1
  for name in p1:
    np.testing.assert_allclose(p2[name], p1[name], atol=1e-5, err_msg=name)
  # one summary and one metrics file, from process 0; the checkpoint is whole
  summary = json.loads((two / "summary.json").read_text())
  assert summary["steps"] == STEPS and summary["mesh"]["fsdp"] == 8
  assert sorted(int(p.name) for p in (two / "checkpoints").iterdir()) == [2, 4]


@pytest.mark.slow
@pytest.mark.heavy  # processes of fake devices: make test-all and CI run it
def test_processes_that_die_resume_from_the_last_checkpoint(setup):
  root, config, one = setup
  run = root / "killed"
  # Process 1 stops after step 3 without saving, and both are killed there (process 0 waits for
  # it in step 4): a run that lost a process. Both restarted resume from step 2's checkpoint.
  procs = _launch(config, run, 2, extra={1: ["--config.stop_after=3"]})
  log = root / "killed-1.log"
  deadline = time.monotonic() + 600
  while "stopped after step 3" not in log.read_text():
    assert procs[1].poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
    time.sleep(0.5)
  for p in procs:  # process 1 would wait for process 0 to shut down, process 0 for step 4
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
  assert sorted(int(p.name) for p in (run / "checkpoints").iterdir()) == [2]
  assert not (run / "policy").exists()
  _wait(_launch(config, run, 2))
  summary = json.loads((run / "summary.json").read_text())
  assert summary["start_step"] == 2 and summary["steps"] == STEPS
  np.testing.assert_allclose(summary["losses"], [_losses(one)[s] for s in (3, 4)], atol=1e-5)


@pytest.mark.slow
@pytest.mark.heavy  # processes of fake devices: make test-all and CI run it
def test_two_processes_run_grpo_as_one(tmp_path, tokenizer, tasks):
  """Each process plays its own groups (process 1 the second task's rollouts) on its own copy of
  the policy; the gathered batch, its update and the held-out evaluation are the one-process
  run's."""
  import models
  from compoworld.tasks.task import save_tasks
  from rl.serve.policy import save_policy
  from tests.rl.test_grpo import tiny_model

  with models.use_mesh(None):
    save_policy(tmp_path / "init", tiny_model(vocab=tokenizer.vocab_size), tokenizer, 0)
  save_tasks(tasks, tmp_path / "tasks.jsonl")
  config = tmp_path / "config.py"
  config.write_text(
    textwrap.dedent(f"""
    from configs.grpo import get_config as grpo_config

    def get_config():
      c = grpo_config("tiny")
      c.init, c.sft_config = "{tmp_path / "init"}", ""
      c.data.tasks = "{tmp_path / "tasks.jsonl"}"
      c.data.num_eval_tasks = 1
      c.num_steps = 2
      c.data.tasks_per_step = 2
      c.data.min_length = 64
      c.rollout.num_rollouts = 4
      c.optim.lr = 1e-2
      # every row's sampled tokens move the update, whatever the rewards of a random policy
      c.loss.entropy_coef = 0.01
      c.eval.every = 2
      c.checkpoint.every = 1
      return c
    """)
  )
  one, two = tmp_path / "one", tmp_path / "two"
  _wait(_launch(config, one, 1, script="experiments.train_grpo"))
  _wait(_launch(config, two, 2, script="experiments.train_grpo"))
  for key in ("loss", "entropy", "grad_norm", "response_length", "tool_calls", "mean_reward"):
    a, b = _metrics(one, key), _metrics(two, key)
    assert sorted(a) == [1, 2], key
    np.testing.assert_allclose(
      [b[s] for s in (1, 2)], [a[s] for s in (1, 2)], atol=1e-5, err_msg=key
    )
  assert _metrics(one, "grad_norm")[1] > 0
  assert _metrics(two, "eval_pass_rate") == _metrics(one, "eval_pass_rate")
  p1, p2 = _params(one), _params(two)
  assert p1.keys() == p2.keys() and p1
  for name in p1:
    np.testing.assert_allclose(p2[name], p1[name], atol=1e-5, err_msg=name)
