"""The layers docs/architecture.md draws, held true on every import: no package of ``store``
imports a package of a layer above its own, and the imports between packages form no cycle.
Also: every sub-package of ``store`` is named in README's package table and in
docs/architecture.md (as the docs-citation tests of tests/test_layout.py do for code names).

The layer table is read from docs/architecture.md itself (its "Layers" section), so the page
and the code cannot drift apart: a new package must be given a layer there first."""

from __future__ import annotations

import ast
import functools
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "store"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: Modules that are not Python files, and the unit they belong to: the compiled part
#: (``store/_speedups*.c``, built by setup.py) is the speedups layer's.
COMPILED = {"_speedups": "speedups"}

#: The one module allowed to name packages above its layer: the public surface
#: (``store/__init__.py``) exports the storage manager and the node manager, imported on first
#: use (PEP 562), so that ``import store`` loads neither.
PUBLIC_SURFACE = PACKAGE / "__init__.py"


@functools.cache
def layers() -> dict[str, int]:
    """The architecture page's layer table: package or top-level module → layer number."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    found: dict[str, int] = {}
    for number, names in re.findall(r"^\| (\d+) \| (.+) \|$", section, flags=re.M):
        for name in re.findall(r"`([A-Za-z_]+)`", names.split("(", 1)[0]):
            assert name not in found, f"{name} is in two layers of docs/architecture.md"
            found[name] = int(number)
    assert found, "docs/architecture.md has no layer table in its Layers section"
    return found


def units() -> set[str]:
    """What the layers are made of: each sub-package and each top-level module of store/
    (``store/store.py`` and ``store/__init__.py`` are the unit ``store``)."""
    names = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    names |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return names


def unit_of(module: str) -> str:
    """``store.file.reader`` → ``file``; ``store`` and ``store.store`` → ``store``."""
    parts = module.split(".")
    return "store" if len(parts) == 1 else COMPILED.get(parts[1], parts[1])


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported module) of every import of ``store`` in the file: at module level, in
    functions, under ``if TYPE_CHECKING`` alike. ``from store import X`` counts as an import of
    ``store.X`` when X is a sub-package or module, of ``store`` otherwise."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "store":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "store":
                for alias in node.names:
                    own = alias.name in units() | set(COMPILED) and alias.name != "store"
                    yield node.lineno, f"store.{alias.name}" if own else "store"
            elif node.module.split(".")[0] == "store":
                yield node.lineno, node.module


def edges() -> list[tuple[str, str, str]]:
    """(importing unit, imported unit, "path:line") of every import between two units."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = unit_of(module_of(path))
        for line, target in imports(path):
            if unit_of(target) != source:
                found.append((source, unit_of(target), f"{path.relative_to(ROOT)}:{line}"))
    return found


def test_every_package_and_top_level_module_has_exactly_one_layer() -> None:
    table = layers()
    missing = sorted(units() - set(table))
    unknown = sorted(set(table) - units())
    assert not missing, f"give these a layer in docs/architecture.md's Layers table: {missing}"
    assert not unknown, f"docs/architecture.md's Layers table names what store/ lacks: {unknown}"


def test_no_package_imports_a_package_of_a_layer_above_its_own() -> None:
    table = layers()
    upward = [
        f"{where}: {source} (layer {table[source]}) imports {target} (layer {table[target]})"
        for source, target, where in edges()
        if table.get(target, -1) > table.get(source, -1)
        and not where.startswith(str(PUBLIC_SURFACE.relative_to(ROOT)) + ":")
    ]
    assert not upward, "imports against docs/architecture.md's layers:\n" + "\n".join(upward)


def test_the_imports_between_packages_form_no_cycle() -> None:
    graph: dict[str, set[str]] = {}
    where: dict[tuple[str, str], str] = {}
    for source, target, at in edges():
        if PUBLIC_SURFACE.relative_to(ROOT).as_posix() in at:
            continue
        graph.setdefault(source, set()).add(target)
        where.setdefault((source, target), at)
    cycle = _find_cycle(graph) or []
    steps = [where[pair] for pair in itertools.pairwise(cycle)]
    assert not cycle, f"import cycle between packages: {' -> '.join(cycle)}\n" + "\n".join(steps)


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as a path that ends where it starts, or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for target in sorted(graph.get(node, ())):
            found = visit(target, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return None


def test_the_cycle_finder_finds_a_cycle_and_passes_a_tree() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_an_upward_import_is_found_where_it_is_written(tmp_path: Path) -> None:
    """The reader of imports sees the three places an upward import hides: a function's body,
    an ``if TYPE_CHECKING`` block and ``from store import <package>``."""
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from store.messaging import StorageManager\n"
        "def f():\n    import store.cli.main\n"
        "from store import reporting, open_store\n",
        encoding="utf-8",
    )
    assert sorted(imports(module)) == [
        (3, "store.messaging"),
        (5, "store.cli.main"),
        (6, "store"),
        (6, "store.reporting"),
    ]


def _readme_package_table() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("| folder / module | concern |", 1)[1].split("\n\n", 1)[0]


def test_every_sub_package_is_in_the_readmes_package_table_and_in_the_architecture_page() -> None:
    packages = sorted(
        p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    )
    table = _readme_package_table()
    architecture = ARCHITECTURE.read_text(encoding="utf-8")
    not_in_readme = [name for name in packages if f"`store/{name}/`" not in table]
    not_in_architecture = [name for name in packages if f"`store.{name}`" not in architecture]
    assert not not_in_readme, f"README's package table lacks store/{not_in_readme}"
    assert not not_in_architecture, f"docs/architecture.md never names store.{not_in_architecture}"
