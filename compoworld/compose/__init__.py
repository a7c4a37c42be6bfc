"""Composition: the composed environment E_C, its four meta-tools, and its speed.

- ``env``: ``ComposedEnv`` (the product of services, joint state, fork and hash) and the meta-tools.
- ``benchmark``: call latency, fork and hash of a joint state, in process and sandboxed.
"""
