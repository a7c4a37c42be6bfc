"""The service runtime: typed state, ``@tool``, the envelope, and the registry every service joins.

- ``domains``: the fixed domain taxonomy every service is labelled with.
- ``envelope``: the one response envelope every tool call returns, and the errors tools raise.
- ``fields``: annotated argument and field types, with JSON Schema constraints.
- ``ports``: port tags, the kinds of values tools produce and consume.
- ``state``: typed service state, immutable records in copy-on-write tables.
- ``tools``: the ``@tool`` decorator (one typed, documented method is one tool).
- ``service``: a service, its state, its tools and the call contract.
- ``registry``: every service findable by name and by domain.
- ``query``: the declarative filter / sort / page query that list and search tools share.
"""
