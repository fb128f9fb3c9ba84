"""The `store` command's shell (store.cli.main): errors, hints, options, logging, help."""

from __future__ import annotations

import argparse
import ast
import errno
import functools
import importlib.metadata
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import store
from store import fs
from store.cli import mask
from store.cli.main import build_parser, main, package_version, parse_args
from store.errors import StoreIOError, StoreLockedError
from store.file.lock import DirectoryLock


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_toml_typo_suggests_the_key_exactly_once(tmp_path: Path, capsys) -> None:
    config = tmp_path / "store.toml"
    config.write_text('journal-file-sise = "1M"\n')
    code, _out, err = _run(capsys, "db", "current", "--config", str(config))
    assert code == 2
    assert err.count("did you mean 'journal-file-size'?") == 1
    assert err.startswith("store: error: unknown key 'journal-file-sise'")


# -- hints name real commands ------------------------------------------------------------------

# A command in a message or hint: `store data verify` (single backticks; docstrings use two).
_COMMAND_IN_TEXT = re.compile(r"(?<!`)`store ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@functools.cache
def _command_tree() -> dict[str, frozenset[str]]:
    """Each command of `store` with its subcommands (empty when it has none)."""
    return {name: frozenset(_commands(p)) for name, p in _commands(build_parser()).items()}


def _named_commands_that_do_not_exist(text: str) -> list[str]:
    tree = _command_tree()
    missing = []
    for match in _COMMAND_IN_TEXT.finditer(text):
        name, sub = match.groups()
        if name not in tree or (tree[name] and sub is not None and sub not in tree[name]):
            missing.append(match.group(0))
    return missing


def test_the_lock_hint_names_no_missing_command(tmp_path: Path) -> None:
    first = DirectoryLock(str(tmp_path))
    first.acquire()
    try:
        with pytest.raises(StoreLockedError) as info:
            DirectoryLock(str(tmp_path)).acquire()
    finally:
        first.release()
    hint = info.value.hint or ""
    assert "stop the other process" in hint
    assert _named_commands_that_do_not_exist(hint) == []
    assert "store ha" not in hint  # the HA pair has no command yet


def test_no_message_in_the_library_names_a_missing_command() -> None:
    package = Path(store.__file__).parent
    missing = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found = _named_commands_that_do_not_exist(node.value)
                if found:
                    missing[f"{path.relative_to(package)}:{node.lineno}"] = found
    assert missing == {}


# -- options before and after the subcommand, --version ------------------------------------------

VERIFY = ["data", "verify", "--journal", "j"]


@pytest.mark.parametrize(
    ("argv", "verbose", "show_traceback"),
    [
        pytest.param(VERIFY, 0, False, id="none"),
        pytest.param([*VERIFY, "-v", "--traceback"], 1, True, id="after"),
        pytest.param(["-v", "--traceback", *VERIFY], 1, True, id="before"),
        pytest.param(["--traceback", "-v", *VERIFY, "-v"], 2, True, id="both"),
        pytest.param(["data", "-v", "verify", "--journal", "j", "-v"], 2, False, id="middle"),
        pytest.param(["-vv", "mask", "x"], 2, False, id="before-other-command"),
        pytest.param(["mask", "x", "--verbose", "--traceback"], 1, True, id="after-other"),
    ],
)
def test_traceback_and_verbose_are_accepted_before_and_after_the_subcommand(
    argv: list[str], verbose: int, show_traceback: bool
) -> None:
    args = parse_args(argv)
    assert args.verbose == verbose
    assert args.traceback is show_traceback


def test_traceback_after_the_subcommand_shows_the_traceback(capsys) -> None:
    code, _out, err = _run(capsys, "mask", "--unmask", "ENC(zz)", "--traceback")
    assert code == 2
    assert "Traceback (most recent call last)" in err and "ConfigError" in err


def test_version_prints_the_package_version(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out == f"store {package_version()}\n"
    assert package_version() == importlib.metadata.version("store")


# -- logging: one line per record, no traceback unless --traceback -------------------------------


def _disk_full(path: str) -> StoreIOError:
    return fs._io_error(OSError(errno.ENOSPC, "No space left on device"), "cannot allocate", path)


def _background_failure_then_error(args: object) -> int:
    """A command whose library logs a failure with its traceback, then raises (a full disk)."""
    try:
        raise _disk_full("/data/journal/data-1.jrn.tmp")
    except StoreIOError:
        logging.getLogger("store.file.segments").exception("cannot pre-open the next journal file")
    logging.getLogger("store.config.broker_xml").warning("broker.xml: <x> is not an element")
    raise _disk_full("/data/journal/data-2.jrn.tmp")


def test_a_logged_exception_is_one_line_and_the_error_one_line_plus_hint(
    capsys, monkeypatch
) -> None:
    monkeypatch.setattr(mask, "run", _background_failure_then_error)
    code, _out, err = _run(capsys, "mask", "x")
    assert code == 4
    assert err.splitlines() == [
        "ERROR store.file.segments: cannot pre-open the next journal file (StoreIOError: "
        "cannot allocate /data/journal/data-1.jrn.tmp: No space left on device)",
        "WARNING store.config.broker_xml: broker.xml: <x> is not an element",
        "store: error: cannot allocate /data/journal/data-2.jrn.tmp: No space left on device",
        "store: hint: the disk is full: free space or move the journal directory",
    ]


def test_traceback_shows_the_logged_and_the_raised_tracebacks(capsys, monkeypatch) -> None:
    monkeypatch.setattr(mask, "run", _background_failure_then_error)
    code, _out, err = _run(capsys, "mask", "x", "--traceback")
    assert code == 4
    assert err.count("Traceback (most recent call last)") == 2


# Runs `store` in a child process whose file system is full once the files of a fresh store are
# allocated (also for the file pre-opened in the background, which logs its failure).
_FULL_DISK_STORE = """
import errno, itertools, sys
from store.cli.main import main
from store import fs

allocations = itertools.count()
real_allocate = fs.OsFileHandle.allocate

def allocate(self, size):
    if next(allocations) >= 4:
        error = OSError(errno.ENOSPC, "No space left on device")
        raise fs._io_error(error, "cannot allocate", self.path)
    real_allocate(self, size)

fs.OsFileHandle.allocate = allocate
sys.exit(main(sys.argv[1:]))
"""


def _run_with_a_full_disk(*argv: str) -> subprocess.CompletedProcess[str]:
    root = str(Path(store.__file__).parent.parent)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-c", _FULL_DISK_STORE, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("show_traceback", [False, True], ids=["default", "traceback"])
def test_a_full_disk_is_one_error_line_plus_hint(tmp_path: Path, show_traceback: bool) -> None:
    config = tmp_path / "store.toml"
    config.write_text(
        'journal-directory = "journal"\nbindings-directory = "bindings"\n'
        'journal-file-size = "64K"\njournal-type = "NIO"\n'
    )
    argv = ["perf", "--journal", "--config", str(config), "--records", "50"]
    result = _run_with_a_full_disk(*argv, *(["--traceback"] if show_traceback else []))
    err = result.stderr
    assert result.returncode == 4, err
    if show_traceback:
        assert "Traceback (most recent call last)" in err
        return
    assert "Traceback" not in err
    assert "store: error: cannot allocate " in err and "No space left on device" in err
    assert err.count("store: hint: the disk is full") == 1
    for line in err.splitlines():  # progress lines, one-line log records, error and hint
        assert line.startswith(("store", "ERROR ", "WARNING ")), line


_ONE_COMMAND = """
import sys
from store.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(sorted(m for m in ("store.cli.data", "store.cli.report", "sqlalchemy") if m in sys.modules))
"""


@pytest.mark.parametrize(
    ("argv", "loaded"),
    [
        (["-q", "broker", "--help"], []),
        (["perf-journal", "--help"], []),
        (["data", "--help"], ["sqlalchemy", "store.cli.data"]),
        (["--help"], ["sqlalchemy", "store.cli.data", "store.cli.report"]),
        (["no-such-command"], ["sqlalchemy", "store.cli.data", "store.cli.report"]),
    ],
)
def test_a_command_line_imports_only_the_module_of_its_command(
    argv: list[str], loaded: list[str]
) -> None:
    """`store broker` starts without the other commands' imports (SQLAlchemy's alone took a
    second of a broker's start-up); help and a mistyped command still list every command."""
    result = subprocess.run(
        [sys.executable, "-c", _ONE_COMMAND, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip().splitlines()[-1] == repr(loaded), result.stderr
    if argv[-1] == "--help" and argv[0] == "--help":
        assert "broker" in result.stdout and "report" in result.stdout
