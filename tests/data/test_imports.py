"""The modules of store/data import one another without a cycle (store/data/__init__.py's
docstring), counting every import statement: at module level, in ``if TYPE_CHECKING:`` blocks
and inside functions (the lazy imports of a dispatcher close a cycle as surely as a module-level
one, only later).

An edge is ``a -> b`` when module ``a`` names module ``b`` in an import (``from pkg import mod``
names ``pkg.mod``); the import of a parent package's ``__init__`` that every import of a
submodule implies is not an edge (Python runs it first, whatever the order).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "store" / "data"


def _modules(package: Path) -> dict[str, Path]:
    """Dotted name -> path of every module of ``package`` (a package by its ``__init__``)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that the module ``name`` at ``path`` imports anywhere."""
    base = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base.split(".")[: len(base.split(".")) - node.level + 1]
                source = ".".join([*parent, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            subs = {f"{source}.{alias.name}" for alias in node.names} & modules.keys()
            named |= subs
            if len(subs) < len(node.names):
                named.add(source)
    return (named & modules.keys()) - {name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as the list of its modules (first one repeated last), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for target in sorted(graph[node]):
            found = visit(target)
            if found:
                return found
        path.pop()
        done.add(node)
        return None

    for node in sorted(graph):
        found = visit(node)
        if found:
            return found
    return None


def test_the_cycle_finder_finds_a_cycle_and_passes_a_tree() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_modules_of_store_data_import_one_another_without_a_cycle() -> None:
    modules = _modules(PACKAGE)
    assert {"store.data.describe.model", "store.data.xml.import_"} <= modules.keys()
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    assert "store.data.describe.model" in graph["store.data.describe.db"]  # the walk sees edges
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_describe_model_imports_no_other_module_of_store_data() -> None:
    modules = _modules(PACKAGE)
    model = "store.data.describe.model"
    assert _imported(model, modules[model], modules) == set()
