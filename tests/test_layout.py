"""The shape of the package a newcomer sees: its public surface, the size of its modules and
functions, and the documents its comments cite (docs/architecture.md, "Invariants the tests
protect")."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
import types
from pathlib import Path

import store
import store.errors

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------------------------------------
# The public surface: exactly these names, as httpx's test_exported_members keeps its own.

EXPORTED = [
    "AddressFullError",
    "AddressSettings",
    "ChecksumError",
    "ConfigError",
    "CorruptionError",
    "DatabaseStoreConfig",
    "DuplicateIdError",
    "Journal",
    "JournalClosedError",
    "JournalStateError",
    "JournalStats",
    "LargeMessageStore",
    "LargeMessageWriter",
    "LoadResult",
    "LockLostError",
    "LostDataError",
    "NodeManager",
    "PagePosition",
    "PageStore",
    "PagingManager",
    "PreparedTransaction",
    "RecordInfo",
    "RecordTooLargeError",
    "RecordType",
    "ReportError",
    "RetentionConfig",
    "SchemaError",
    "StorageManager",
    "Store",
    "StoreConfig",
    "StoreError",
    "StoreIOError",
    "StoreLockedError",
    "StoreUnavailableError",
    "TornTailError",
    "UnknownMessageError",
    "UnknownQueueError",
    "UnknownRecordError",
    "UnknownTransactionError",
    "load_config",
    "open_store",
]


def test_store_exports_exactly_the_stated_names() -> None:
    assert store.__all__ == EXPORTED


def test_every_public_member_of_store_is_exported_and_every_export_resolves() -> None:
    # Submodules become attributes of the package when imported; they are not its surface.
    public = {
        name
        for name, value in vars(store).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public <= set(store.__all__), public - set(store.__all__)
    for name in store.__all__:
        assert getattr(store, name) is not None, name
    assert set(store.__all__) <= set(dir(store))


def test_the_storage_manager_node_manager_and_errors_are_the_libraries_own_objects() -> None:
    from store.ha import NodeManager
    from store.messaging import StorageManager

    assert store.StorageManager is StorageManager
    assert store.NodeManager is NodeManager
    for name in store.errors.__all__:
        if name in store.__all__:
            assert getattr(store, name) is getattr(store.errors, name), name
    assert "LostDataError" in store.__all__


def test_import_store_does_not_import_the_storage_manager_or_the_node_manager() -> None:
    """The two are exported lazily (store/__init__.py says why: import time, no cycle)."""
    code = (
        "import sys, store\n"
        "assert 'store.messaging' not in sys.modules, 'store.messaging'\n"
        "assert 'store.ha' not in sys.modules, 'store.ha'\n"
        "from store import StorageManager, NodeManager\n"
        "assert 'store.messaging' in sys.modules and 'store.ha' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_an_unknown_name_of_store_is_an_attribute_error() -> None:
    try:
        store.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("store.NoSuchThing resolved")


# ---------------------------------------------------------------------------------------------
# Sizes: modules of store/ at most MAX_MODULE_LINES lines, functions at most MAX_FUNCTION_LINES
# (docs/conventions.md#13). Longer ones are listed here with the reason; an entry that is no
# longer too long must go (the list only shrinks).

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80

LONG_MODULES = {
    "store/db/migrate.py": "every alembic entry point and the implicit-create checks of open",
    "store/db/writer.py": "the group-commit writer thread and the one batch builder it calls",
    "store/file/journal.py": "file-list markers appended under the append lock (its docstring)",
    "store/large/database.py": "the database body store: streamed chunk writes, reads, sweeps",
    "store/paging/database.py": "the page table backend's crash-ordered create/append/delete",
}

LONG_FUNCTIONS = {
    "store/cli/perf.py:register": "argparse declarations of two commands, one option a line",
    "store/data/xml/reader.py:read_events": "expat's handlers are closures over one state",
    "store/file/journal.py:_append": "the hot path, kept in one frame on purpose (perf)",
    "store/file/reader.py:replay_file": "the per-record loop of the load, one frame (perf)",
    "store/reporting/report.py:_jobs": "the report's steps in order; issue 26: split it",
}


def _modules() -> list[Path]:
    return sorted(p for p in (ROOT / "store").rglob("*.py") if ".venv" not in p.parts)


@functools.cache
def _sizes() -> tuple[dict[str, int], dict[str, int]]:
    modules: dict[str, int] = {}
    functions: dict[str, int] = {}
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT).as_posix()
        modules[rel] = text.count("\n")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                length = node.end_lineno - node.lineno + 1
                key = f"{rel}:{node.name}"
                functions[key] = max(length, functions.get(key, 0))
    return modules, functions


def _over(
    sizes: dict[str, int], limit: int, allowed: dict[str, str]
) -> tuple[list[str], list[str]]:
    """The names over ``limit`` that ``allowed`` does not list, and the listed ones not over it."""
    too_long = [f"{name} ({n})" for name, n in sizes.items() if n > limit and name not in allowed]
    stale = [name for name in allowed if sizes.get(name, 0) <= limit]
    return sorted(too_long), sorted(stale)


def test_modules_stay_under_the_stated_size() -> None:
    modules, _ = _sizes()
    assert len(modules) > 100  # the walk found the package
    too_long, stale = _over(modules, MAX_MODULE_LINES, LONG_MODULES)
    assert not too_long, f"modules past {MAX_MODULE_LINES} lines: split or list them: {too_long}"
    assert not stale, f"no longer too long (or gone): remove from LONG_MODULES: {stale}"


def test_functions_stay_under_the_stated_size() -> None:
    _, functions = _sizes()
    too_long, stale = _over(functions, MAX_FUNCTION_LINES, LONG_FUNCTIONS)
    assert not too_long, f"functions past {MAX_FUNCTION_LINES} lines: {too_long}"
    assert not stale, f"no longer too long (or gone): remove from LONG_FUNCTIONS: {stale}"


def test_each_allow_list_reason_is_one_short_line() -> None:
    for reason in (*LONG_MODULES.values(), *LONG_FUNCTIONS.values()):
        assert reason and "\n" not in reason and len(reason) <= 80, reason


# ---------------------------------------------------------------------------------------------
# Citations: comments cite the documents in docs/, never the project's private design notes.

# Spelt in two halves so this file does not cite them itself.
_PRIVATE = re.compile(r"\b(?:DESIG" + r"N\s*§|CONVENTION" + r"S\b)")
_CITATION = re.compile(r"\bdocs/([\w.-]+\.md)(#[\w-]+)?")
_ANCHOR = re.compile(r'<a id="([\w-]+)"></a>')


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces -> '-'."""
    text = re.sub(r"[`*_<>\[\]()]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    text = doc.read_text(encoding="utf-8")
    found = set(_ANCHOR.findall(text))
    for line in text.splitlines():
        if line.startswith("#"):
            found.add(_slug(_ANCHOR.sub("", line.lstrip("#"))))
    return found


def _sources() -> list[Path]:
    return [*_modules(), *sorted((ROOT / "tests").rglob("*.py"))]


def test_no_comment_cites_the_private_design_notes() -> None:
    cited = []
    for path in _sources():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _PRIVATE.search(line):
                cited.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not cited, "cite docs/ instead:\n" + "\n".join(cited)


def test_every_docs_citation_names_a_document_and_an_anchor_that_exist() -> None:
    anchors = {doc.name: _anchors(doc) for doc in (ROOT / "docs").glob("*.md")}
    assert "architecture.md" in anchors
    broken = []
    count = 0
    for path in _sources():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for doc, anchor in _CITATION.findall(line):
                count += 1
                if doc not in anchors or (anchor and anchor[1:] not in anchors[doc]):
                    broken.append(f"{path.relative_to(ROOT)}:{number}: docs/{doc}{anchor}")
    assert count > 50  # the comments do cite docs/
    assert not broken, "citations of missing documents or anchors:\n" + "\n".join(broken)


_LINK = re.compile(r"\]\(([^)#\s]*)(#[\w-]+)?\)")


def test_every_link_in_docs_names_a_file_and_an_anchor_that_exist() -> None:
    """The format tables the docs point at are in the modules they name (and moves break this)."""
    anchors = {doc.name: _anchors(doc) for doc in (ROOT / "docs").glob("*.md")}
    broken = []
    links = 0
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for target, anchor in _LINK.findall(doc.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://")):
                continue
            links += 1
            path = (doc.parent / target).resolve() if target else doc
            if not path.exists():
                broken.append(f"{doc.name}: {target}")
            elif anchor and path.suffix == ".md" and anchor[1:] not in anchors.get(path.name, ()):
                broken.append(f"{doc.name}: {target}{anchor}")
    assert links > 40  # the docs do link the modules and each other
    assert not broken, broken


def test_the_readme_links_the_architecture_document() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/architecture.md)" in readme
