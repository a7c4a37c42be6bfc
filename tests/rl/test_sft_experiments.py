"""The single arm's data for single vs composed (section 5.3.2), without training anything."""

import json
import types
from pathlib import Path

import pytest

from compoworld.tasks.task import load_tasks, save_tasks
from configs.experiments import get_config
from rl.pipeline.arm_data import (
  prepare,
  prepare_instances,
  prepare_single,
  services_subset,
  spread_over_compositions,
)
from rl.pipeline.sft_experiments import budget_overrides


def test_single_vs_composed_defaults_to_single_service_tasks():
  for name in ("single_vs_composed", "single_vs_composed_test"):
    config = get_config(name)
    assert config.single_k == 1 and config.tasks.num_services > 1


def test_the_single_arm_spreads_its_trajectories_over_services():
  services = ["a", "b", "a", "a", "c", "b"]
  tasks = [types.SimpleNamespace(id=i, services=[s]) for i, s in enumerate(services)]
  order = [t.id for t in spread_over_compositions(tasks)]
  assert order == [0, 1, 4, 2, 5, 3]  # a, b, c in task order, then a, b, then a


def test_held_out_service_sets_need_two_services(tmp_path):
  with pytest.raises(ValueError, match="prepare_single"):
    prepare(get_config("single_vs_composed_test"), 0, 1, tmp_path)


def test_prepare_single_plays_k1_tasks_with_the_oracle(tmp_path):
  config = get_config("single_vs_composed_test")
  config.tasks.num_tasks, config.tasks.workers = 6, 1
  data = prepare_single(config, 0, tmp_path)
  assert data["k"] == 1 and data["tasks"] == data["verified_trajectories"] == 6
  tasks = load_tasks(data["train_tasks_file"])
  assert all(len(t.services) == 1 for t in tasks)
  assert len(Path(data["train_file"]).read_text().splitlines()) == 6
  assert prepare_single(config, 0, tmp_path) == data  # reused


def _k1_config(tmp_path):
  """env_scaling's K = 1 config at test size: a few tasks, a small tokenizer."""
  config = get_config("env_scaling")
  config.tasks.num_tasks, config.tasks.workers = 40, 1
  config.split.eval_fraction = 0.1
  config.eval.max_tasks = 3
  config.sft.tokenizer.vocab_size = 1024
  config.sizes = (1, 2)
  config.steps = 5
  return config


def test_env_scaling_defaults_to_services_at_equal_steps():
  config = get_config("env_scaling")
  assert config.tasks.num_services == 1 and config.split.mode == "instances"
  assert config.budget == "steps" and config.steps > 0 and max(config.sizes) <= 30
  assert config.sft.data.seq_len == config.eval.max_context == 2048


def test_k1_arms_take_the_first_services_and_share_one_tokenizer(tmp_path):
  config = _k1_config(tmp_path)
  data = prepare_instances(config, 0, tmp_path / "data")
  assert data["k"] == 1 and data["eval_tasks"] == 3
  held = {t.id for t in load_tasks(data["eval_tasks_file"])}
  train = load_tasks(data["train_tasks_file"])
  assert not held & {t.id for t in train}
  assert data["services"] == list(dict.fromkeys(t.services[0] for t in train))
  total = 0
  for n in (1, 2):
    path, count = services_subset(data, n, tmp_path / f"s{n}")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    service_of = {t.id: t.services[0] for t in train}
    assert len(rows) == count > total
    assert {service_of[r["task_id"]] for r in rows} == set(data["services"][:n])
    total = count
  with pytest.raises(ValueError, match="sizes must be"):
    services_subset(data, len(data["services"]) + 1, tmp_path / "too_many")
  assert prepare_instances(config, 0, tmp_path / "data") == data  # reused


def test_budgets_hold_steps_or_epochs_equal():
  config = get_config("env_scaling")
  steps = budget_overrides(config, 100, "TOK")
  assert steps["max_steps"] == config.steps and steps["tokenizer.path"] == "TOK"
  # enough passes over 100 trajectories for `steps` batches of rows of up to 4 of them
  assert steps["data.num_epochs"] * 100 >= 4 * config.steps * config.sft.data.batch_size
  config.budget = "epochs"
  assert budget_overrides(config, 100, "TOK") == {
    "tokenizer.path": "TOK",
    "max_steps": 0,
    "data.num_epochs": 1,
  }
  config.budget = "tokens"
  with pytest.raises(ValueError, match="unknown budget"):
    budget_overrides(config, 100, "TOK")


def fake_episodes(tasks, workdir) -> int:
  """An evaluation's ``results.jsonl`` in ``workdir``: the first task passed, the others left
  at the first call (no messages); returns how many tasks."""
  Path(workdir).mkdir(parents=True, exist_ok=True)
  rows = [
    {"task_id": t.id, "samples": [{"success": i == 0, "messages": []}]} for i, t in enumerate(tasks)
  ]
  (Path(workdir) / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  return len(tasks)


def test_service_scaling_trains_each_arm_with_its_budget(tmp_path, monkeypatch):
  import rl.pipeline.sft_experiments as sx

  config = _k1_config(tmp_path)
  seen = []

  def fake_sft(sft_config, train_file, workdir, eval_file):
    rows = Path(train_file).read_text().splitlines()
    seen.append((sft_config.max_steps, sft_config.tokenizer.path, len(rows), str(eval_file)))
    return {"eval_loss": 1.0 / len(rows), "eval_turn_match": 0.1, "steps": 5, "final_loss": 0.5}

  def fake_eval(policy_dir, tasks_file, workdir, cfg, decoding="free"):
    assert decoding == "constrained+grounded"
    fake_episodes(load_tasks(tasks_file), workdir)
    return {"pass_rate": 0.0, "rubric_score": 0.0}

  monkeypatch.setattr(sx, "run_sft", fake_sft)
  monkeypatch.setattr(sx, "evaluate_policy", fake_eval)
  monkeypatch.setattr(sx, "line_plot", lambda path, *a, **k: str(path))
  summary = sx.env_scaling(config, [0], tmp_path / "run")
  data = json.loads((tmp_path / "run" / "seed_0" / "data" / "prepared.json").read_text())
  tokenizer = tmp_path / "run" / "seed_0" / "data" / "tokenizer"
  assert (tokenizer / "tokenizer.model").is_file()
  assert [s[0] for s in seen] == [5, 5] and {s[1] for s in seen} == {str(tokenizer)}
  assert seen[0][2] < seen[1][2]  # two services hold more tasks than one
  assert all(s[3] == data["eval_trajectories_file"] for s in seen)
  assert summary["services"] == [1, 2]
  assert summary["stats"]["sft_eval_loss"][0]["mean"] == 1.0 / seen[0][2]


def test_single_vs_composed_scores_both_arms_on_both_held_out_sets(tmp_path, monkeypatch):
  import rl.pipeline.sft_experiments as sx

  config = get_config("single_vs_composed")
  assert config.held_out_single and config.single_k == 1 and config.tasks.num_services == 2
  config.tasks.num_tasks = config.single_tasks = 40
  config.tasks.workers = 1
  config.split.eval_fraction, config.single_eval_fraction = 0.2, 0.1
  config.eval.max_tasks = 3
  config.sft.tokenizer.vocab_size = 1024
  config.budget = 6
  trained, scored, evaluated = [], [], {}

  def fake_sft(sft_config, train_file, workdir, eval_file):
    rows = [json.loads(line) for line in Path(train_file).read_text().splitlines()]
    trained.append((Path(workdir).parent.name, sft_config.tokenizer.path, rows))
    return {"eval_loss": 1.0, "eval_turn_match": 0.1, "steps": 3, "final_loss": 0.5}

  def fake_eval(policy_dir, tasks_file, workdir, cfg, decoding="free"):
    tasks = load_tasks(tasks_file)
    scored.append((Path(workdir).parent.name, Path(workdir).name, {len(t.services) for t in tasks}))
    evaluated.setdefault(Path(workdir).name, fake_episodes(tasks, workdir))
    return {"pass_rate": 0.5 if Path(workdir).name == "eval" else 0.25, "rubric_score": 0.5}

  monkeypatch.setattr(sx, "run_sft", fake_sft)
  monkeypatch.setattr(sx, "evaluate_policy", fake_eval)
  monkeypatch.setattr(sx, "bar_plot", lambda path, *a, **k: str(path))
  summary = sx.single_vs_composed(config, [0], tmp_path / "run")
  assert [t[0] for t in trained] == ["single", "composed"]
  assert len({t[1] for t in trained}) == 1 and (Path(trained[0][1]) / "tokenizer.model").is_file()
  assert all(len(t[2]) == 6 for t in trained)
  # both arms: held-out composed (K = 2) tasks, then held-out single-service (K = 1) ones, then
  # new instances of the composed arm's pairs
  assert scored == [
    ("single", "eval", {2}),
    ("single", "eval_single_tasks", {1}),
    ("composed", "eval", {2}),
    ("composed", "eval_single_tasks", {1}),
    ("single", "eval_seen_pairs", {2}),
    ("composed", "eval_seen_pairs", {2}),
  ]
  seed = json.loads((tmp_path / "run" / "seed_0" / "result.json").read_text())
  seen = load_tasks(seed["data_seen_pairs"]["eval_tasks_file"])
  composed_train = {t.id: t for t in load_tasks(seed["data_composed"]["train_tasks_file"])}
  trained_sets = {tuple(sorted(composed_train[r["task_id"]].services)) for r in trained[1][2]}
  assert seen and {tuple(sorted(t.services)) for t in seen} <= trained_sets
  assert not {t.instruction for t in seen} & {t.instruction for t in composed_train.values()}
  assert all(t.id.startswith("t1000-") for t in seen)  # drawn with another seed
  assert seed["data_seen_pairs"]["oracle_eval_pass_rate"] == 1.0
  assert summary["stats"]["single_seen_pairs_pass_rate"][0]["mean"] == 0.25
  # the held-out composed tasks spread over the held-out service sets
  held = load_tasks(seed["data_composed"]["eval_tasks_file"])
  held_sets = seed["data_composed"]["split"]["eval_service_sets"]
  assert len({tuple(sorted(t.services)) for t in held}) == min(3, held_sets)
  composed_services = set(seed["data_composed"]["train_services"])
  single_tasks = {t.id: t for t in load_tasks(seed["data_single"]["train_tasks_file"])}
  assert all(set(single_tasks[r["task_id"]].services) <= composed_services for r in trained[0][2])
  assert summary["stats"]["composed_single_tasks_pass_rate"][0]["mean"] == 0.25
  assert summary["stats"]["composed_pass_rate"][0]["mean"] == 0.5
  # How far the episodes follow the oracle's path: all of the passed task's, none of the rest.
  path = {k: 1 / n for k, n in evaluated.items()}
  stats = summary["stats"]
  assert stats["composed_path_followed"][0]["mean"] == pytest.approx(path["eval"], abs=1e-4)
  assert stats["single_single_tasks_path_followed"][0]["mean"] == pytest.approx(
    path["eval_single_tasks"], abs=1e-4
  )
  # A seed saved before the path was measured gets it from its saved episodes when reused.
  result_file = tmp_path / "run" / "seed_0" / "result.json"
  old = {k: v for k, v in seed.items() if "path_followed" not in k}
  for arm in ("single", "composed"):
    old[arm] = {k: v for k, v in seed[arm].items() if "path_followed" not in k}
  result_file.write_text(json.dumps(old))
  again = sx.single_vs_composed(config, [0], tmp_path / "run")
  assert len(trained) == 2  # reused, not trained again
  assert again["stats"]["single_path_followed"] == stats["single_path_followed"]
  # A mixed arm is added to the saved seed (the share is not in its digest): half of the budget
  # the composed arm's first trajectories, half the single arm's, with the seed's tokenizer,
  # scored on all three sets; run again, it is reused.
  config.mixed_share = 0.5
  scored.clear()
  mixed = sx.single_vs_composed(config, [0], tmp_path / "run")
  assert [t[0] for t in trained] == ["single", "composed", "mixed"]
  assert trained[2][1] == trained[0][1]
  rows = trained[2][2]
  assert sorted(map(json.dumps, rows)) == sorted(
    map(json.dumps, trained[0][2][:3] + trained[1][2][:3])
  )
  assert scored == [
    ("mixed", "eval", {2}),
    ("mixed", "eval_single_tasks", {1}),
    ("mixed", "eval_seen_pairs", {2}),
  ]
  assert mixed["stats"]["mixed_seen_pairs_pass_rate"][0]["mean"] == 0.25
  assert mixed["stats"]["single_pass_rate"] == again["stats"]["single_pass_rate"]
  assert mixed["per_seed"][0]["mixed"]["train_services"] >= 2
  sx.single_vs_composed(config, [0], tmp_path / "run")
  assert len(trained) == 3
  config.mixed_share = 1.0
  with pytest.raises(ValueError, match="mixed_share"):
    sx.single_vs_composed(config, [0], tmp_path / "run")
  # A discovery arm is added too: the composed arm's tasks, in its order, played by the oracle
  # with one list_services call first (held-out trajectories for its loss likewise), with the
  # seed's tokenizer, scored on all three sets; run again, it is reused.
  config.mixed_share = 0.0
  config.discovery_arm = "services"
  scored.clear()
  found = sx.single_vs_composed(config, [0], tmp_path / "run")
  assert [t[0] for t in trained] == ["single", "composed", "mixed", "discovery"]
  assert trained[3][1] == trained[0][1]
  composed_rows, rows = trained[1][2], trained[3][2]
  assert [r["task_id"] for r in rows] == [r["task_id"] for r in composed_rows]

  def calls(row):
    return [c["function"]["name"] for m in row["messages"] for c in m.get("tool_calls") or []]

  for before, after in zip(composed_rows, rows, strict=True):
    assert calls(after) == ["list_services", *calls(before)]
  assert [s[:2] for s in scored] == [
    ("discovery", "eval"),
    ("discovery", "eval_single_tasks"),
    ("discovery", "eval_seen_pairs"),
  ]
  arm = found["per_seed"][0]["discovery"]
  assert arm["oracle_discovery"] == "services" and arm["trajectories"] == len(rows)
  assert found["stats"]["discovery_pass_rate"][0]["mean"] == 0.5
  assert found["stats"]["single_pass_rate"] == again["stats"]["single_pass_rate"]
  sx.single_vs_composed(config, [0], tmp_path / "run")
  assert len(trained) == 4
  config.discovery_arm = "none"  # the recipe's own: that arm is the composed one
  with pytest.raises(ValueError, match="is the recipe's own"):
    sx.single_vs_composed(config, [0], tmp_path / "run")
  # A quote arm: the same tasks played by an oracle quoting each sentence before its first
  # call. The saved seed's task files predate the recorded sentences (stripped here): the
  # tasks are generated again for them, checked to be the same, and the saved files kept.
  config.discovery_arm = ""
  config.quote_arm = "sentence"
  composed_files = [seed["data_composed"][f] for f in ("train_tasks_file", "eval_tasks_file")]
  for f in composed_files:
    bare = [t.model_copy(update={"meta": {**t.meta, "clauses": []}}) for t in load_tasks(f)]
    save_tasks(bare, f)
  before = [Path(f).read_bytes() for f in composed_files]
  scored.clear()
  quoting = sx.single_vs_composed(config, [0], tmp_path / "run")
  assert [t[0] for t in trained][-1] == "quote" and trained[-1][1] == trained[0][1]
  rows = trained[-1][2]
  assert [r["task_id"] for r in rows] == [r["task_id"] for r in composed_rows]
  for before_row, after in zip(composed_rows, rows, strict=True):
    assert calls(after) == calls(before_row)
    said = [m["content"] for m in after["messages"] if m.get("tool_calls")]
    plain = [m["content"] for m in before_row["messages"] if m.get("tool_calls")]
    quote, _, rest = said[0].partition('"\n')  # the first turn quotes its sentence first
    assert quote.startswith('Next step: "') and rest == plain[0]
    assert all(a == b or a.endswith(f'"\n{b}') for a, b in zip(said, plain, strict=True))
  assert [s[:2] for s in scored] == [
    ("quote", "eval"),
    ("quote", "eval_single_tasks"),
    ("quote", "eval_seen_pairs"),
  ]
  assert quoting["per_seed"][0]["quote"]["oracle_quote"] is True
  assert [Path(f).read_bytes() for f in composed_files] == before
  sx.single_vs_composed(config, [0], tmp_path / "run")
  assert [t[0] for t in trained].count("quote") == 1
  # Both quote forms: the saved "quote" arm is kept; "quote_bare" trains on the same turns,
  # each quote without its sentence's opening connective.
  config.quote_arm = "sentence,bare"
  both = sx.single_vs_composed(config, [0], tmp_path / "run")
  assert [t[0] for t in trained].count("quote") == 1 and trained[-1][0] == "quote_bare"
  bare_rows, quote_rows = trained[-1][2], rows
  for a, b in zip(quote_rows, bare_rows, strict=True):
    assert calls(a) == calls(b)
    for x, y in zip(a["messages"], b["messages"], strict=True):
      if x["content"] != y["content"]:
        assert x["content"].startswith('Next step: "') and len(y["content"]) < len(x["content"])
  assert both["per_seed"][0]["quote_bare"]["oracle_quote"] == "bare"
  assert "quote_bare_pass_rate" in both["stats"] and "quote_pass_rate" in both["stats"]
  config.quote_arm = "sentence,clause"
  with pytest.raises(ValueError, match="unknown"):
    sx.single_vs_composed(config, [0], tmp_path / "run")


def test_mix_trajectories_interleaves_the_first_of_each_part(tmp_path):
  from rl.pipeline.arm_data import mix_trajectories

  a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
  a.write_text("".join(f'{{"i": "a{i}"}}\n' for i in range(5)))
  b.write_text("".join(f'{{"i": "b{i}"}}\n' for i in range(5)))
  out = mix_trajectories([(a, 2), (b, 4)], tmp_path / "mix")
  assert [json.loads(line)["i"] for line in out.read_text().splitlines()] == [
    "b0",
    "a0",
    "b1",
    "b2",
    "a1",
    "b3",
  ]
  with pytest.raises(ValueError, match="holds 5 trajectories; the mix needs 6"):
    mix_trajectories([(a, 6)], tmp_path / "mix")


def test_with_clauses_takes_the_sentences_from_the_same_tasks_generated_again(tmp_path):
  """Tasks saved without their recorded sentences get them from the generator run again; a
  saved task the generator no longer makes (the library changed) is an error, not a guess."""
  from rl.pipeline.arm_data import with_clauses
  from rl.pipeline.run import make_tasks

  config = get_config("single_vs_composed")
  config.tasks.num_tasks, config.tasks.workers = 6, 1
  tasks, _ = make_tasks(config.tasks, 0, k=2)
  bare = [t.model_copy(update={"meta": {**t.meta, "clauses": []}}) for t in tasks[1:4]]
  save_tasks(bare, tmp_path / "saved" / "train.jsonl")
  save_tasks(tasks[:2], tmp_path / "saved" / "eval.jsonl")  # has them: kept as it is
  files = [tmp_path / "saved" / "train.jsonl", tmp_path / "saved" / "eval.jsonl"]
  out = with_clauses(config, 0, 2, files, tmp_path / "out")
  assert out == [tmp_path / "out" / "train.jsonl", files[1]]
  assert load_tasks(out[0]) == tasks[1:4]
  changed = bare[0].model_copy(update={"instruction": bare[0].instruction + " Now."})
  save_tasks([changed], tmp_path / "saved" / "other.jsonl")
  with pytest.raises(RuntimeError, match="not generated again the same"):
    with_clauses(config, 0, 2, [tmp_path / "saved" / "other.jsonl"], tmp_path / "out")
