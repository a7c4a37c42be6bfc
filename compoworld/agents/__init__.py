"""Agents: who plays a task through the meta-tools, and what is measured of them.

- ``agent``: agents behind one interface, looked up by name (oracle, any OpenAI-compatible model).
- ``prompts``: the prompts every meta-tool agent shares.
- ``episode``: one agent on one task, then the verifier.
- ``evaluation``: any agent on a task file, k samples per task, the paper's metrics.
- ``divergence``: where failed episodes leave the oracle's path, by kind.
- ``trajectories``: an agent plays each task; the verified successes are the SFT set.
- ``detours``: a wrong read that finds nothing, for the oracle to play (untrained) before the right one.
- ``llm_author``: the LLM task author (explore, design, probe, submit), an agent that authors.
- ``demo``: gate a task, solve it with the oracle, verify, report.
"""
