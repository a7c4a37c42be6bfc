"""The house rules of the code's layout (issue 23), checked on the checkout itself: no import
circles between the library's modules, no module over 600 lines, no library folder with more
than 15 modules at its top level.

Circles are read from module-level imports (what runs when a module is imported); an import
inside a function or under ``if TYPE_CHECKING:`` does not run then, so it is left out.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("compoworld", "envs", "models", "rl")
MAX_LINES = 600
MAX_MODULES = 15


def modules(root: Path, packages=LIBRARY) -> dict[str, Path]:
  """Dotted module name -> file, for every ``.py`` file under ``packages``."""
  found = {}
  for package in packages:
    for path in sorted((root / package).rglob("*.py")):
      parts = list(path.relative_to(root).with_suffix("").parts)
      if parts[-1] == "__init__":
        parts.pop()
      found[".".join(parts)] = path
  return found


def _run_at_import(body):
  """The statements of a module body that run on import, ``try`` blocks opened (not ``if``s:
  ``if TYPE_CHECKING:`` never runs)."""
  for node in body:
    if isinstance(node, ast.Try):
      yield from _run_at_import(node.body)
      for handler in node.handlers:
        yield from _run_at_import(handler.body)
    else:
      yield node


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
  """Module -> the library modules its module-level imports run."""

  def known(name: str) -> str | None:  # the module itself, else the package it names a member of
    while name and name not in mods:
      name = name.rpartition(".")[0]
    return name or None

  graph: dict[str, set[str]] = {}
  for name, path in mods.items():
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets = set()
    for node in _run_at_import(ast.parse(path.read_text()).body):
      if isinstance(node, ast.Import):
        targets |= {known(alias.name) for alias in node.names}
      elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
          base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
        for alias in node.names:
          member = f"{base}.{alias.name}"
          targets.add(member if member in mods else known(base))
    graph[name] = {t for t in targets if t and t != name}
  return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
  """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
  index: dict[str, int] = {}
  low: dict[str, int] = {}
  stack: list[str] = []
  on_stack: set[str] = set()
  found = []
  for start in graph:
    if start in index:
      continue
    work = [(start, iter(sorted(graph[start])))]
    index[start] = low[start] = len(index)
    stack.append(start)
    on_stack.add(start)
    while work:
      node, edges = work[-1]
      nxt = next(edges, None)
      if nxt is not None:
        if nxt not in index:
          index[nxt] = low[nxt] = len(index)
          stack.append(nxt)
          on_stack.add(nxt)
          work.append((nxt, iter(sorted(graph.get(nxt, ())))))
        elif nxt in on_stack:
          low[node] = min(low[node], index[nxt])
        continue
      work.pop()
      if work:
        low[work[-1][0]] = min(low[work[-1][0]], low[node])
      if low[node] == index[node]:
        group = []
        while True:
          member = stack.pop()
          on_stack.discard(member)
          group.append(member)
          if member == node:
            break
        if len(group) > 1:
          found.append(sorted(group))
  return found


def test_the_circle_finder_finds_a_circle(tmp_path):
  pkg = tmp_path / "compoworld"
  (pkg / "sub").mkdir(parents=True)
  (pkg / "__init__.py").write_text("")
  (pkg / "sub" / "__init__.py").write_text("")
  (pkg / "a.py").write_text("from compoworld.sub import b\n")
  (pkg / "sub" / "b.py").write_text("from .. import c\n")
  (pkg / "c.py").write_text("try:\n  import compoworld.a\nexcept ImportError:\n  pass\n")
  (pkg / "d.py").write_text("def f():\n  import compoworld.a\n")  # runs later: no edge
  graph = import_graph(modules(tmp_path, ("compoworld",)))
  assert graph["compoworld.d"] == set()
  assert circles(graph) == [["compoworld.a", "compoworld.c", "compoworld.sub.b"]]


def test_no_import_circles():
  assert circles(import_graph(modules(ROOT))) == []


def test_no_module_over_600_lines():
  long = {
    str(path.relative_to(ROOT)): n
    for path in modules(ROOT).values()
    if (n := len(path.read_text().splitlines())) > MAX_LINES
  }
  assert long == {}


def test_no_library_folder_over_15_modules():
  folders = {path.parent for path in modules(ROOT).values()}
  crowded = {
    str(folder.relative_to(ROOT)): n
    for folder in folders
    if (n := sum(p.name != "__init__.py" for p in folder.glob("*.py"))) > MAX_MODULES
  }
  assert crowded == {}
