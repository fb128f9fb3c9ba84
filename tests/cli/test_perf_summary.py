"""``store perf``'s summary: every figure has a label, and the figures add up (the totals of
sends and acks are their single and transactional parts, and the run's part plus what came
after it; the latency table counts the same calls; the clean restart checks the same totals)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from store.cli.main import main


def _n(text: str) -> int:
    return int(text.replace(",", ""))


def test_every_figure_of_the_summary_is_labelled_and_adds_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one line per row
    monkeypatch.chdir(tmp_path)
    code = main(["perf", "--seconds", "1", "--no-crash", "--seed", "3", "--large-ratio", "0.1"])
    out = capsys.readouterr().out
    assert code == 0, out
    num = r"([\d,]+)"
    run = re.search(
        rf"in the [\d.]+ s run: {num} sends \([\d,]+ messages/s sent\), {num} acks", out
    )
    sends = re.search(
        rf"sends +{num} = {num} single \+ {num} in transactions; {num} in the run \+ {num} "
        "finishing as it ended",
        out,
    )
    acks = re.search(
        rf"acks +{num} = {num} single \+ {num} in transactions; {num} in the run \+ {num} after",
        out,
    )
    restart = re.search(rf"clean restart +{num} acknowledged sends, {num} acknowledged acks", out)
    assert run and sends and acks and restart, out
    total, single, in_tx, in_run, after = map(_n, sends.groups())
    assert total == single + in_tx == in_run + after and in_run == _n(run.group(1))
    total_acks, single_acks, tx_acks, acks_in_run, acks_after = map(_n, acks.groups())
    assert total_acks == single_acks + tx_acks == acks_in_run + acks_after
    assert acks_in_run == _n(run.group(2))
    assert (_n(restart.group(1)), _n(restart.group(2))) == (total, total_acks)
    latency = dict(re.findall(rf"│ (send|ack) \(single \w+\) +│ +{num} ", out))
    assert _n(latency["send"]) == single and _n(latency["ack"]) == single_acks
    # the large messages' figure says what it is
    assert re.search(r"large messages 10% of sends, [\d,]+ B each \(1 KiB over min-large", out)
