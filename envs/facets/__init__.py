"""Facets of the hand-written services: what the procedural author knows about each one.

Every module of this package is imported, which registers its facets in
``compoworld.facets.facets``; a new service's facets are one new module here.
"""

import importlib
import pkgutil

__all__ = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))

for _name in __all__:
  importlib.import_module(f"{__name__}.{_name}")
