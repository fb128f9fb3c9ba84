"""``store report`` end to end on PostgreSQL and on SQLite (the Debian jar, issue 28), through
``store.cli.main.main`` in this process on the worker's Spark session: the files exist and
their numbers are the store's, and the store is not changed. The command as a user runs it,
a process of its own starting its own JVM, is tests/reporting/test_cluster.py's (the file
store, the same checks, on a standalone cluster): a second and third cold JVM here added a
minute and a half of CPU to the suite and checked nothing more. A missing driver or Java is
one line and a non-zero exit (subprocesses: what they check is the process's own start)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.reporting.support import check_report, filled_store, python_live
from tests.support.backends import StoreFactory, backend_by_name, unique_prefix
from tests.support.cli import run_store_here
from tests.support.store_state import file_state, store_state

ROOT = Path(__file__).resolve().parents[2]
#: What a report test's folder holds beside the store: the report, its configuration.
_NOT_THE_STORE = ("report", "store.toml")


def _store(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "store.cli.main", *args],
        capture_output=True, text=True, env=environment, timeout=600, check=False,
    )  # fmt: skip


def _toml(path: Path, mapping: dict[str, Any]) -> Path:
    lines = []
    for section, values in mapping.items():
        if isinstance(values, dict):
            lines.append(f"[{section}]")
            lines += [f"{k} = {v!r}" if not isinstance(v, str) else f'{k} = "{v}"'
                      for k, v in values.items()]  # fmt: skip
        else:
            lines.insert(0, f'{section} = "{values}"' if isinstance(values, str) else
                         f"{section} = {values!r}")  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow  # a report in this process
@pytest.mark.parametrize("which", ["postgresql", "sqlite"])
def test_store_report_writes_the_store_s_numbers(which: str, tmp_path: Path, spark: Any) -> None:
    """``spark``: started (or reused) before the command asks for one, so that the command's
    ``build_session`` returns it."""
    from tests.support.db_backends import new_store_mapping

    factory = StoreFactory(backend_by_name(which), tmp_path, unique_prefix())
    try:
        expected = filled_store(factory)
        mapping: dict[str, Any] = new_store_mapping(tmp_path, factory.prefix, which)
        config = _toml(tmp_path / "store.toml", mapping)
        out = tmp_path / "report"
        before = store_state(factory.config, tmp_path, skip=_NOT_THE_STORE)
        argv = ("report", "--config", str(config), "--out", str(out), "--master", "local[2]")
        done = run_store_here(*argv)
        assert done.returncode == 0, done.stderr[-3000:]
        # Read-only: not a byte or a row of the store changed (issue 25).
        assert store_state(factory.config, tmp_path, skip=_NOT_THE_STORE) == before
        live = python_live(factory)
    finally:
        factory.teardown()
    check_report(out, done.stdout, expected, live)


def test_missing_jdbc_driver_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    done = _store(
        "report", "--jdbc-url", "jdbc:postgresql://127.0.0.1:5432/test", "--out",
        str(tmp_path / "r"),
        env={"STORE_REPORT_JAR_DIRECTORY": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 6
    assert done.stderr.strip().count("\n") == 0, done.stderr  # one line
    assert "no JDBC driver for jdbc:postgresql:" in done.stderr
    assert "libpostgresql-jdbc-java" in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_java_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    done = _store(
        "report", "--journal", str(tmp_path), "--out", str(tmp_path / "r"),
        env={"PATH": "/nonexistent", "JAVA_HOME": ""},
    )  # fmt: skip
    assert done.returncode == 6
    assert done.stderr.strip().count("\n") == 0, done.stderr  # one line
    assert "Java is not installed" in done.stderr
    assert "Traceback" not in done.stderr


def test_report_error_is_a_store_error_in_the_drawn_tree() -> None:
    import store
    import store.errors

    assert issubclass(store.ReportError, store.errors.StoreError)
    assert "ReportError" in store.__all__ and "ReportError" in store.errors.__all__
    assert "── ReportError " in (store.errors.__doc__ or "")


@pytest.mark.parametrize("held", ["a report", "other files", "a file"])
def test_an_out_folder_that_holds_something_is_refused_and_left_as_it_is(
    tmp_path: Path, held: str
) -> None:
    """Exit 2 before Spark starts, naming ``--out`` and ``--force``; not a byte of what was
    there changes (issue 44: a second report silently replaced the first)."""
    out = tmp_path / "report"
    if held == "a file":
        out.write_bytes(b"mine")
    else:
        out.mkdir()
        (out / ("index.html" if held == "a report" else "notes.txt")).write_bytes(b"mine")
    before = file_state(tmp_path)
    done = run_store_here("report", "--journal", str(tmp_path), "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert f"--out {out}" in done.stderr and "nothing was written" in done.stderr
    if held != "a file":
        assert "--force" in done.stderr
        assert ("a report" in done.stderr) == (held == "a report")
    assert file_state(tmp_path) == before


def test_force_lets_a_report_go_into_a_folder_that_holds_one(tmp_path: Path) -> None:
    from store.cli.report import check_out

    out = tmp_path / "report"
    out.mkdir()
    (out / "index.html").write_bytes(b"an earlier report")
    check_out(str(out), force=True)  # accepted: the report's own files are replaced
    check_out(str(tmp_path / "new"), force=False)  # a folder that does not exist yet
    (tmp_path / "empty").mkdir()
    check_out(str(tmp_path / "empty"), force=False)  # an empty one
