"""`store mask`: masks for configuration files, through the real entry point."""

from __future__ import annotations

import io

import pytest

from store.cli.main import main
from store.config import masking


def test_mask_prints_an_enc_value_for_a_config_file(capsys):
    assert main(["mask", "secret"]) == 0
    out = capsys.readouterr().out
    assert out == "ENC(-41e444c3ed07d6dd)\n"


def test_mask_with_a_key_uses_that_key(capsys):
    assert main(["mask", "--key", "helloworld", "secret"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == masking.wrap_enc(masking.mask("secret", key="helloworld"))
    assert out != "ENC(-41e444c3ed07d6dd)"


def test_mask_takes_the_key_from_the_environment(capsys, monkeypatch):
    monkeypatch.setenv(masking.KEY_ENV_VAR, "helloworld")
    assert main(["mask", "secret"]) == 0
    assert capsys.readouterr().out.strip() == masking.wrap_enc(
        masking.mask("secret", key="helloworld")
    )


@pytest.mark.parametrize(
    "masked",
    [
        pytest.param(["ENC(-5a2376c61c668aaf)"], id="with-enc"),
        pytest.param(["--", "-5a2376c61c668aaf"], id="bare-after-double-dash"),
    ],
)
def test_unmask_prints_the_plain_text(capsys, masked):
    assert main(["mask", "--unmask", *masked]) == 0
    assert capsys.readouterr().out == "keypass\n"


def test_mask_then_unmask_round_trips_unicode(capsys):
    assert main(["mask", "--key", "k3y", "pässwörd 密码"]) == 0
    masked = capsys.readouterr().out.strip()
    assert main(["mask", "--key", "k3y", "--unmask", masked]) == 0
    assert capsys.readouterr().out == "pässwörd 密码\n"


def test_dash_reads_the_value_from_stdin(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("secret\n"))
    assert main(["mask", "-"]) == 0
    assert capsys.readouterr().out == "ENC(-41e444c3ed07d6dd)\n"


@pytest.mark.parametrize(
    ("argv", "hidden"),
    [
        pytest.param(["mask", "--unmask", "ENC(zzzz)"], "zzzz", id="not-hex"),
        pytest.param(
            ["mask", "--unmask", "--key", "wrong-key", "--", "-41e444c3ed07d6dd"],
            "-41e444c3ed07d6dd",
            id="wrong-key",
        ),
    ],
)
def test_undecodable_value_exits_2_without_echoing_it(capsys, argv, hidden):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "cannot decode" in captured.err
    assert hidden not in captured.err
    assert "wrong-key" not in captured.err


def test_unusable_key_exits_2(capsys):
    assert main(["mask", "--key", "k" * 57, "secret"]) == 2
    assert "56 bytes" in capsys.readouterr().err
