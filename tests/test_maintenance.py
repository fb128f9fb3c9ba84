"""store.maintenance: ``store data compact`` on a whole store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from store import StoreConfig, open_store
from store.errors import ConfigError
from store.journal.api import RecordInfo
from store.maintenance import compact_store

SIZE = 4096


def test_compact_store_compacts_both_journals_and_keeps_the_data(tmp_path: Path) -> None:
    config = StoreConfig.from_mapping(
        {
            "journal-directory": str(tmp_path / "j"),
            "bindings-directory": str(tmp_path / "b"),
            "journal-file-size": SIZE,
            "journal-type": "NIO",
            "journal-compact-min-files": 0,
        }
    )
    with open_store(config) as s:
        s.messages.load()
        s.bindings.load()
        s.bindings.append_add(1, 21, b"queue")
        for i in range(200):
            s.messages.append_add(i, 45, b"m" * 40)
        for i in range(200):
            if i % 10:
                s.messages.append_delete(i)
        expected = [RecordInfo(i, 45, b"m" * 40, False) for i in range(0, 200, 10)]
    steps: list[str] = []
    results = compact_store(config, on_step=steps.append)
    assert steps == [
        "loading bindings",
        "compacting bindings",
        "loading messages",
        "compacting messages",
    ]
    assert [r.journal for r in results] == ["bindings", "messages"]
    messages = results[1]
    assert messages.after.extra["data_files"] < messages.before.extra["data_files"]
    assert messages.after.bytes_live == messages.before.bytes_live
    with open_store(config) as s:
        assert s.messages.load().records == expected
        assert s.bindings.load().records == [RecordInfo(1, 21, b"queue", False)]


def test_compact_store_leaves_a_mostly_dead_store_smaller(tmp_path: Path) -> None:
    """Issue 7 item 6: with the default journal-pool-files (-1) `store data compact` grew a
    64-file store to 114 files (the output in new files, every old file kept in the pool).
    Fails on the old code: the file count grows by the size of the output."""
    journal = tmp_path / "j"
    config = StoreConfig.from_mapping(
        {
            "journal-directory": str(journal),
            "bindings-directory": str(tmp_path / "b"),
            "journal-file-size": 16 * 1024,
            "journal-type": "NIO",
            "journal-compact-min-files": 0,
        }
    )
    with open_store(config) as s:
        s.messages.load()
        s.bindings.load()
        for i in range(3000):
            s.messages.append_add(i, 45, b"m" * 200)
        for i in range(3000):
            if i % 10 >= 3:  # 30% of every file stays live
                s.messages.append_delete(i)
    before = sorted(journal.glob("*.jrn"))
    assert len(before) > 40
    (_bindings, messages) = compact_store(config)
    after = sorted(journal.glob("*.jrn"))
    assert len(after) < len(before) / 2, (len(before), len(after))
    # What the journal needs: its data files, the current one, and the pre-opened one.
    assert len(after) == messages.after.extra["data_files"] + 1
    assert messages.after.files == len(after)
    with open_store(config) as s:
        assert len(s.messages.load().records) == 900


def test_compact_store_never_creates_a_store(tmp_path: Path) -> None:
    """Issue 7 item 3: compacting a path without a journal created both directories and
    journal-min-files pre-allocated files (34 MB with the defaults) and reported success."""
    for exists in (False, True):
        journal, bindings = tmp_path / "j", tmp_path / "b"
        if exists:
            journal.mkdir()
            bindings.mkdir()
        config = StoreConfig.from_mapping(
            {
                "journal-directory": str(journal),
                "bindings-directory": str(bindings),
            }
        )
        with pytest.raises(ConfigError, match=re.escape(f"no journal in {journal}")):
            compact_store(config)
        assert sorted(p.name for p in tmp_path.rglob("*")) == (["b", "j"] if exists else [])
