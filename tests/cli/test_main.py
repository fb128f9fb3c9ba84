"""The `store` command's shell (store.cli.main): errors, hints, options, logging, help."""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.metadata
import re
from pathlib import Path

import pytest

import store
from store.cli.main import build_parser, main, package_version, parse_args
from store.errors import StoreLockedError
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
