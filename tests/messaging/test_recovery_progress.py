"""Recovery says what it is doing (issue 27), as KahaDB does: ``load()`` logs at INFO a line
when it starts, a progress line every ``_PROGRESS_EVERY`` records of the message journal
(records done of the total, messages found so far, seconds since the start), and a closing
line with the counts and the elapsed time; nothing is printed."""

from __future__ import annotations

import logging
import re

import pytest

from store.messaging import Message, recovery
from tests.messaging.support import Harness
from tests.support.backends import StoreFactory

N = 250


@pytest.fixture
def h(messaging_factory: StoreFactory) -> Harness:
    return Harness(messaging_factory)


def test_load_logs_progress_per_records_and_a_closing_line_with_counts_and_time(
    h: Harness,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    sm = h.open()
    sm.create_address("orders")
    sm.create_queue("orders", address="orders")
    for n in range(N):
        sm.send(Message("orders", b"m%d" % n), sync=False)
    sm.flush()
    h.sm = sm
    monkeypatch.setattr(recovery, "_PROGRESS_EVERY", 100)
    capsys.readouterr()
    with caplog.at_level(logging.INFO, logger="store.messaging"):
        h.restart()
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("store.messaging") and r.levelno == logging.INFO
    ]
    assert lines[0] == "messaging load: started"
    progress = [m for m in lines if m.startswith("messaging load: phase=messages")]
    # 2 records per message (ADD 45, UPDATE 32): a line per 100 records and one at the end.
    done = [int(re.search(r"done=(\d+)", m).group(1)) for m in progress]  # type: ignore[union-attr]
    assert done == [100, 200, 300, 400, 500], progress
    assert "messages=50 " in progress[0] and re.search(r"elapsed=\d+\.\d\ds$", progress[0])
    closing = lines[-1]
    assert re.fullmatch(
        rf"messaging load: done elapsed=\d+\.\d\ds addresses=1 queues=1 messages={N}"
        rf" in_memory={N} paged=0 prepared=0 cleaned=\{{\}}",
        closing,
    ), closing
    assert capsys.readouterr().out == ""  # logged, never printed
