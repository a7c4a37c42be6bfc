"""Decoding: how a policy's tool calls are decoded, free, grammar-constrained or grounded.

- ``symbols``: the grammar's symbols (bytes and the chat's special tokens) and byte-level rules.
- ``grammar``: ``ToolCallGrammar``, a pushdown automaton from the tools' JSON Schemas.
- ``constrained``: the grammar over a vocabulary, a per-sequence constraint for a sampler.
- ``scanner``: ``JsonScanner``, where in a tool call's JSON the text being written is.
- ``arguments``: the arguments ``call_tool`` passes on, typed and grounded in the conversation.
- ``token_kinds``: a vocabulary's tokens by kind, found once, for ``arguments``.
- ``narration``: a turn that names its call ("Now I'll call T on S.") makes that call.
- ``modes``: the decoding modes and each turn's constraints, shared by rollouts and the agent.
"""
