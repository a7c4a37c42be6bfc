"""Serving a policy: a checkpoint as a chat model, behind an OpenAI-compatible API or in process.

- ``policy``: a checkpoint, its tokenizer and the project's chat format.
- ``server``: ``/v1/models`` and ``/v1/chat/completions``.
- ``agent``: a checkpoint as an in-process agent (``make_agent("checkpoint", ...)``).
"""
