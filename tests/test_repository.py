"""What a newcomer reads first: the LICENSE and the README, checked against the code."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

import pytest

from store.cli.main import main

ROOT = Path(__file__).resolve().parent.parent

# SHA-256 of the Apache License 2.0 as the ASF publishes it
# (https://www.apache.org/licenses/LICENSE-2.0.txt; Debian's /usr/share/common-licenses/Apache-2.0).
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_license_file_is_the_unmodified_apache_license_pyproject_names() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["license"] in ("Apache-2.0", {"text": "Apache-2.0"})
    for table in (pyproject["project"], pyproject.get("tool", {}).get("setuptools", {})):
        assert "LICENSE" in table.get("license-files", ["LICENSE"])
    text = (ROOT / "LICENSE").read_text(encoding="utf-8").replace("\r\n", "\n")
    assert hashlib.sha256(text.encode()).hexdigest() == APACHE_2_SHA256


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_shows_the_real_store_help(capsys, monkeypatch) -> None:
    # argparse wraps to the terminal width: the README's block is the help at 100 columns.
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    real = capsys.readouterr().out
    block = re.search(r"`store --help`[^\n]*\n(?:[^\n]+\n)*\n```text\n(.*?)```\n", _readme(), re.S)
    assert block is not None, "README has no `store --help` block"
    assert block.group(1) == real


def test_readme_cites_no_design_section_that_is_not_in_the_repository() -> None:
    assert re.search(r"DESIGN\s*§", _readme()) is None


def test_readme_says_what_docker_compose_starts() -> None:
    compose = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    services = compose.split("\nservices:\n", 1)[1].split("\nvolumes:", 1)[0]
    names = re.findall(r"^  ([a-z][a-z0-9-]*):$", services, re.M)
    [row] = [line for line in _readme().splitlines() if line.startswith("| `docker-compose.yml`")]
    labels = {"postgresql": "PostgreSQL", "mysql": "MySQL"}
    assert names and all(labels.get(name, name) in row for name in names)
    assert ("Spark" in row) == any("spark" in name for name in names)


def test_readme_says_how_to_run_store_and_how_long_the_tests_take() -> None:
    readme = _readme()
    assert "\nscripts/perf " in readme and "\nscripts/test " in readme  # Quick start
    assert ".venv/bin/store" in readme and ". .venv/bin/activate" in readme
    assert re.search(r"takes about \d+\u2013\d+ minutes on a machine with 2 cores", readme)


def _leaf_commands() -> list[tuple[str, ...]]:
    """Every command a user can run, as its words after ``store`` (``("data", "print")``)."""
    import argparse

    from store.cli.main import build_parser

    found: list[tuple[str, ...]] = []

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            found.append(path)
            return
        for name, child in subs[0].choices.items():
            walk(child, (*path, name))

    walk(build_parser(), ())
    return found


def test_every_command_has_help_and_a_line_in_the_readmes_command_reference(
    capsys, monkeypatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    section = _readme().split("\n## Command line\n", 1)[1].split("\n## ", 1)[0]
    commands = _leaf_commands()
    assert ("data", "print") in commands and ("perf",) in commands  # the walk found the tree
    missing = []
    for words in commands:
        with pytest.raises(SystemExit) as info:
            main([*words, "--help"])
        assert info.value.code == 0, words
        out = capsys.readouterr().out
        assert out.startswith(f"usage: store {' '.join(words)}"), out[:200]
        if f"`store {' '.join(words)}" not in section:
            missing.append(" ".join(words))
    assert not missing, f"commands without an entry in the README's command reference: {missing}"


def _quick_start_commands() -> list[str]:
    """The commands of the README's Quick-start block, as written (comments cut)."""
    section = _readme().split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "the Quick start has no sh block"
    return [line.split("  #", 1)[0].rstrip() for line in block.group(1).splitlines() if line]


def test_ci_runs_the_readmes_first_command_verbatim_in_a_fresh_clone_then_the_tests() -> None:
    first, *rest = _quick_start_commands()
    assert first.startswith("scripts/perf") and rest == ["scripts/test"]
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    steps = [line for line in lines if line and not line.startswith(("#", "printf"))]
    clone = steps.index('git clone -q "$PWD" "$tmp"')
    run_first = steps.index(f'(cd "$tmp" && {first})')  # exactly the README's words
    assert clone < run_first < steps.index("exec scripts/test")
    assert "set -euo pipefail" in steps  # a failing first command fails CI
