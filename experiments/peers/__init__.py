"""Peer benchmarks (`experiments.bench_peers`): our worker, Tunix's worker (run in .venv-peers,
never imported from here) and the summary they produce."""
