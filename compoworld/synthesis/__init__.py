"""Synthesis: services written by a model, judged and run in a sandbox.

- ``synthesizer``: a model writes a service module and its tests; the sandbox judges it.
- ``sandbox``: the bubblewrap jail generated code runs in, and the one channel to it.
- ``sandbox_runner``: the child side of the jail (run as a script, never imported).
- ``sandboxed``: generated services seen from this process, ordinary ``Service``s.
"""
