"""The `store` command's shell (store.cli.main): errors, hints, options, logging, help."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.cli.main import main


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
