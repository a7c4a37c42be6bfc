# One entry point for set-up, tests, the demo and benchmarks. Every target builds .venv from
# the requirements files first, and rebuilds it when they change.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The peers we compare against (Tunix) live in their own environment, never in .venv.
PEERS_VENV := .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed
WORKDIR ?= runs
PYTEST_ARGS ?= -n auto --dist worksteal

.PHONY: setup setup-peers test test-all lint format conformance demo demo-scenario bench bench-peers device-check clean

# pip byte-compiles what it installs one file at a time; the packages are compiled afterwards on
# every core instead (the same .pyc files, half the time on 2 cores).
$(STAMP): requirements.txt requirements-dev.txt
	@if [ -d $(VENV) ] && [ ! -f $(STAMP) ]; then rm -rf $(VENV); fi
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements.txt -r requirements-dev.txt
	$(BIN)/python -c "import compileall, sysconfig; compileall.compile_dir(sysconfig.get_paths()['purelib'], quiet=2, workers=0)"
	@touch $(STAMP)

setup: $(STAMP)

$(PEERS_STAMP): requirements-peers.txt
	@if [ -d $(PEERS_VENV) ] && [ ! -f $(PEERS_STAMP) ]; then rm -rf $(PEERS_VENV); fi
	@[ -x $(PEERS_VENV)/bin/python ] || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-peers.txt
	@touch $(PEERS_STAMP)

setup-peers: $(PEERS_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Everything but the few `heavy` tests (fake-device subprocesses, the whole pipeline), which
# `make test-all` (what CI runs) adds.
test: lint
	$(BIN)/python -m pytest -q -m "not heavy" $(PYTEST_ARGS)
	$(BIN)/python -m experiments.mcp_conformance --workdir=$(WORKDIR)/mcp_conformance --skip_if_unavailable

test-all: lint
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)
	$(BIN)/python -m experiments.mcp_conformance --workdir=$(WORKDIR)/mcp_conformance --skip_if_unavailable

# The official MCP conformance suite against a served task (10 s; needs npx, and fetches the suite
# and Node 22 from npm the first time): fails on any scenario outside
# experiments/mcp_conformance_expected_failures.yaml. `make test` skips it, saying why, without them.
conformance: $(STAMP)
	$(BIN)/python -m experiments.mcp_conformance --workdir=$(WORKDIR)/mcp_conformance

# The whole pipeline on the tiny default (configs/demo.py:tiny): runs/demo/report.md, summary.json.
demo: $(STAMP)
	$(BIN)/python -m experiments.demo --workdir=$(WORKDIR)/demo

# The foundation's demo: the Appendix D meetup task solved by the oracle.
demo-scenario: $(STAMP)
	$(BIN)/python -m experiments.demo --scenario --workdir=$(WORKDIR)/demo_scenario

bench: $(STAMP)
	$(BIN)/python -m experiments.bench_env --workdir=$(WORKDIR)/bench_env
	$(BIN)/python -m experiments.bench_tasks --workdir=$(WORKDIR)/bench_tasks

# Ours against Tunix 0.1.7 (.venv-peers) on the same shapes in one run, alternating, 3 repeats each:
# SFT tokens/s, sampler tokens/s, the GRPO step at beta 0.04 and 0 (~15 min on 2 cores, set-up
# included). Writes $(WORKDIR)/bench_peers/summary.json and prints the README's table;
# BENCH_PEERS_ARGS adds flags (--repeats, --steps, sizes, --tiny, --update_readme).
BENCH_PEERS_ARGS ?=
bench-peers: $(STAMP) $(PEERS_STAMP)
	$(BIN)/python -m experiments.bench_peers --workdir=$(WORKDIR)/bench_peers \
		--ours_python=$(BIN)/python --peer_python=$(PEERS_VENV)/bin/python $(BENCH_PEERS_ARGS)

# The prepared accelerator check (experiments/device_check.py; BUILD.md, "Accelerator check"):
# logits parity against the CPU, SFT and sampler throughput with MFU, the SFT step's memory and
# the faster MoE backend, at the `small` config on a GPU or TPU (<= 8 min), at test size on a CPU.
# Writes $(WORKDIR)/device_check/summary.json; DEVICE_CHECK_ARGS adds flags (--size, --dtype).
DEVICE_CHECK_ARGS ?=
device-check: $(STAMP)
	$(BIN)/python -m experiments.device_check --workdir=$(WORKDIR)/device_check $(DEVICE_CHECK_ARGS)

clean:
	rm -rf $(VENV) $(PEERS_VENV) $(WORKDIR) .pytest_cache .ruff_cache .cache
