"""Specs: MCP tool specifications in, compiled and validated services out, and the library manifest.

- ``ingest``: MCP tool specs in, normalized ``ServiceSpec``s out.
- ``naming``: what a tool does, read from its name, annotations and schema alone.
- ``schema_values``: values drawn from a JSON Schema, valid examples and deliberate misfits.
- ``jsonschema_args``: an argument model for a tool declared by a JSON Schema.
- ``compiler``: a ``ServiceSpec`` in, an executable ``Service`` subclass out (no LLM).
- ``compiled``: the runtime of compiled services, plans and their deterministic transitions.
- ``compiled_facets``: facets for compiled services, so the author composes them into tasks.
- ``validator``, ``answers``: the adversarial validator, cases from the spec alone.
- ``world_model``: simulated transitions for quarantined and external-effect tools.
- ``build``: specs, then compiled services, then validation, then the manifest.
- ``library``: the service library as data, a manifest and its statistics.
"""
