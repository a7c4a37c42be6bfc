"""Service registry: every service findable by name and by domain.

Service libraries register their classes with ``@registry.register``. The registry imports its
provider packages (``envs`` by default) on first use, so ``registry.names()`` lists the whole
library without ``compoworld`` depending on it at import time.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable

from compoworld.runtime.service import Service


class UnknownService(KeyError):
  def __str__(self) -> str:
    return str(self.args[0])


class Registry:
  def __init__(self, providers: Iterable[str] = ("envs",)):
    self._providers = list(providers)
    self._loaded = False
    self._services: dict[str, type[Service]] = {}
    # Threads that play episodes at once may all reach the first lookup: the first loads the
    # providers, the others wait for it (they used to see an empty, half-loaded registry).
    self._lock = threading.RLock()

  def register(self, cls: type[Service]) -> type[Service]:
    """Class decorator: adds a service class under its ``name``."""
    name = cls.name
    existing = self._services.get(name)
    if existing is not None and existing is not cls:
      raise ValueError(f"service '{name}' is already registered by {existing.__module__}")
    self._services[name] = cls
    return cls

  def add_provider(self, module: str) -> None:
    """Another package whose import registers services (e.g. a compiled library)."""
    self._providers.append(module)
    self._loaded = False

  def _load(self) -> None:
    if self._loaded:
      return
    with self._lock:
      if self._loaded:  # loaded by another thread while this one waited
        return
      for module in self._providers:
        importlib.import_module(module)
      self._loaded = True

  def names(self) -> list[str]:
    self._load()
    return sorted(self._services)

  def get(self, name: str) -> type[Service]:
    self._load()
    try:
      return self._services[name]
    except KeyError:
      raise UnknownService(
        f"no service named {name!r}; registered: {', '.join(sorted(self._services))}"
      ) from None

  def by_domain(self, domain: str) -> list[str]:
    self._load()
    return sorted(n for n, c in self._services.items() if c.domain == domain)

  def __contains__(self, name: object) -> bool:
    self._load()
    return name in self._services

  def __len__(self) -> int:
    self._load()
    return len(self._services)


registry = Registry()
