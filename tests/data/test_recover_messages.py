"""store.data.recover_messages: every message ever added, rebuilt from a file journal's
retention history (the default of ``store data recover``): acked, deleted and rolled-back
messages come back once each, with each queue they were ever routed to and the page
transactions; refs that do not decode and large messages whose body is gone are left out and
reported. The command itself, over a store the storage manager wrote:
tests/cli/test_data_recover.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.data.recover_messages import recover_messages_from_history
from store.errors import ConfigError
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions, RetentionOptions
from store.journal.api import RecordInfo
from store.messaging.page_records import PAGE_TRANSACTION
from store.messaging.records import (
    ACKNOWLEDGE_REF,
    ADD_LARGE_MESSAGE,
    ADD_MESSAGE_PROTOCOL,
    ADD_REF,
    AckRecord,
    RefRecord,
)
from tests.file.handbuilt import SIZE, load

REF_10, REF_11 = RefRecord(10).encode(), RefRecord(11).encode()


def _journal(tmp_path: Path) -> tuple[FileJournal, Path]:
    history = tmp_path / "history"
    opts = FileJournalOptions(
        directory=str(tmp_path / "j"),
        file_size=SIZE,
        compact_min_files=0,
        retention=RetentionOptions(directory=str(history)),
    )
    return FileJournal(opts), history


def test_every_message_ever_added_comes_back_once_with_each_queue_it_was_routed_to(
    tmp_path: Path,
) -> None:
    j, history = _journal(tmp_path)
    with j:
        j.load()
        for i in range(1, 101):
            j.append_add(i, ADD_MESSAGE_PROTOCOL, b"message-%d" % i)
            j.append_update(i, ADD_REF, REF_10)
        j.append_update(7, ADD_REF, REF_11)
        j.append_update(7, ADD_REF, REF_10)  # the same ref again: written once
        for i in range(1, 61):
            j.append_update(i, ACKNOWLEDGE_REF, AckRecord(10).encode())
            j.append_delete(i)  # whole files become dead and are reclaimed
        j.append_add_tx(500, 200, ADD_MESSAGE_PROTOCOL, b"rolled back")
        j.append_update_tx(500, 200, ADD_REF, REF_11)
        j.append_rollback(500)
        j.append_add(300, PAGE_TRANSACTION, b"a page transaction")
        j.flush()
        j.reclaim()
    report = recover_messages_from_history(
        str(history), str(tmp_path / "t"), journal=str(tmp_path / "j")
    )
    assert {s.origin for s in report.sources} == {"history", "journal"}
    assert (report.messages, report.large_messages, report.refs) == (101, 0, 102)
    assert (report.page_transactions, report.bad_refs, report.missing_bodies) == (1, 0, [])
    got = load(tmp_path / "t")
    messages = [RecordInfo(i, 45, b"message-%d" % i, False) for i in range(1, 101)]
    messages.append(RecordInfo(200, 45, b"rolled back", False))
    page_tx = [RecordInfo(300, PAGE_TRANSACTION, b"a page transaction", False)]
    refs = [RecordInfo(i, ADD_REF, REF_10, True) for i in range(1, 101)]  # in the order seen
    refs += [RecordInfo(7, ADD_REF, REF_11, True), RecordInfo(200, ADD_REF, REF_11, True)]
    assert got.records == messages + page_tx + refs
    assert got.prepared == [] and got.failed == []


def test_refs_that_do_not_decode_are_left_out_and_counted(tmp_path: Path) -> None:
    """A ref the storage manager's decoder refuses (too short, or of an unknown version) would
    make the recovered journal fail its load: it is left out and counted instead."""
    j, history = _journal(tmp_path)
    with j:
        j.load()
        j.append_add(1, ADD_MESSAGE_PROTOCOL, b"one")
        j.append_update(1, ADD_REF, b"\x01short")
        j.append_update(1, ADD_REF, b"\x07" + REF_10[1:])
        j.append_update(1, ADD_REF, REF_11)
    report = recover_messages_from_history(
        str(history), str(tmp_path / "t"), journal=str(tmp_path / "j")
    )
    assert (report.messages, report.refs, report.bad_refs) == (1, 1, 2)
    assert load(tmp_path / "t").records == [
        RecordInfo(1, ADD_MESSAGE_PROTOCOL, b"one", False),
        RecordInfo(1, ADD_REF, REF_11, True),
    ]


def test_a_large_message_whose_body_is_gone_is_left_out_with_its_refs(tmp_path: Path) -> None:
    j, history = _journal(tmp_path)
    large = tmp_path / "large"
    large.mkdir()
    (large / "6.msg").write_bytes(b"a body file")
    with j:
        j.load()
        for mid in (5, 6):
            j.append_add(mid, ADD_LARGE_MESSAGE, b"large-%d" % mid)
            j.append_update(mid, ADD_REF, REF_10)
    report = recover_messages_from_history(
        str(history), str(tmp_path / "t"), journal=str(tmp_path / "j"), large_messages=str(large)
    )
    assert (report.messages, report.large_messages, report.refs) == (1, 1, 1)
    assert (report.missing_bodies, report.refs_left_out) == ([5], 1)
    assert [r.id for r in load(tmp_path / "t").records] == [6, 6]
    without = recover_messages_from_history(
        str(history), str(tmp_path / "t2"), journal=str(tmp_path / "j")
    )
    assert without.missing_bodies == [5, 6] and without.messages == 0


def test_the_checks_of_every_recovery_come_first(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "something").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        recover_messages_from_history(None, str(tmp_path / "t"), journal=str(tmp_path / "j"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no journal files"):
        recover_messages_from_history(str(tmp_path / "empty"), str(tmp_path / "t2"))
    assert not (tmp_path / "t2").exists()
