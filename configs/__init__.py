"""ml_collections configs: one ``get_config(arg)`` per experiment."""
