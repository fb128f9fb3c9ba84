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
    assert "scripts/perf      #" in readme and "scripts/test      #" in readme  # Quick start
    assert ".venv/bin/store" in readme and ". .venv/bin/activate" in readme
    assert re.search(r"takes about \d+\u2013\d+ minutes on a machine with 2 cores", readme)
