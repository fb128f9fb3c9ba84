"""The file store's large messages on the fault-injecting file system (tests/support/faultfs):
a refused write aborts the body and leaves nothing, and a crash at any step of completing a
body leaves either the whole body or no trace of it (docs/conventions.md#7)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from store import StoreConfig, open_store
from store.errors import StoreIOError
from tests.large.support import body_bytes
from tests.support.backends import file_config_mapping
from tests.support.faultfs import FaultFileSystem

CHUNK = 1 << 20


def _config(tmp_path: Path) -> StoreConfig:
    return StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))


def _large_dir(config: StoreConfig) -> str:
    return config.large_messages_directory


@pytest.mark.parametrize("nth", [1, 5, 6], ids=["first-chunk", "third-chunk", "third-payload"])
def test_a_chunk_write_the_disk_refuses_aborts_the_body(tmp_path: Path, nth: int) -> None:
    """EIO on the nth pwrite of the chunks (written in the background; a whole chunk of a
    ``bytes`` write is two, its checksum and its payload) reaches the writer as
    StoreIOError; the block aborts: nothing listed, no file left, the id can be written."""
    config = _config(tmp_path)
    fs = FaultFileSystem()
    with open_store(config, fs=fs) as store:
        lm = store.large_messages
        fs.fail("pwrite", nth, match=lambda p: p.endswith(".tmp"))
        with pytest.raises(StoreIOError), lm.create(1) as w:
            for _ in range(5):
                w.write(b"x" * CHUNK)
        assert lm.ids() == []
        assert fs.listdir(_large_dir(config)) == []
        with lm.create(1) as w:
            w.write(b"again")
        assert lm.ids() == [1]


@pytest.mark.parametrize("kind", ["pwrite", "datasync", "rename", "fsync_dir"])
@pytest.mark.parametrize("mode", ["drop", "random", "process"])
def test_crash_while_completing_leaves_all_or_nothing(tmp_path: Path, kind: str, mode: str) -> None:
    """A machine crash at the last pwrite, the sync, the rename or the directory sync of a
    completing body: after reopening, the body is either listed and whole or not there at
    all (no file left), and a body completed before it is intact."""
    config = _config(tmp_path)
    fs = FaultFileSystem()
    data = body_bytes(2, 2 * CHUNK + 99)
    with open_store(config, fs=fs) as store:
        lm = store.large_messages
        with lm.create(1) as w:
            w.write(b"before")
        writer = lm.create(2)
        writer.write(data)
        large = _large_dir(config)
        fs.crash_at(kind, 1, when="before", match=lambda p: p.startswith(large))
        with pytest.raises(StoreIOError):
            writer.complete()
        writer.abort()
    for seed in range(5):
        crashed = fs.crash_points[-1].crash(random.Random(seed), mode)  # type: ignore[arg-type]
        with open_store(config, fs=crashed) as store:
            lm = store.large_messages
            assert lm.ids() in ([1], [1, 2]), f"seed {seed}"
            with lm.open(1) as r:
                assert r.read() == b"before"
            if lm.ids() == [1, 2]:
                with lm.open(2) as r:
                    assert r.read() == data
            else:
                assert crashed.listdir(_large_dir(config)) == ["1.msg"]


@pytest.mark.parametrize("mode", ["drop", "random", "prefix", "reorder"])
def test_a_crash_right_after_delete_returns_never_brings_the_body_back(
    tmp_path: Path, mode: str
) -> None:
    """The contract of ``delete`` (store.large.api rule 3): once it returns the body is gone
    for good, so the directory entry's removal is synced before it returns. A machine crash
    the moment ``delete`` returned, whatever it does with what was not synced (every mode
    that can lose a directory operation), leaves the deleted body gone, no file of it, and
    the other body whole."""
    config = _config(tmp_path)
    fs = FaultFileSystem()
    with open_store(config, fs=fs) as store:
        lm = store.large_messages
        for mid in (1, 2):
            with lm.create(mid) as w:
                w.write(body_bytes(mid, CHUNK + 5))
        lm.delete(1)
        snapshot = fs.snapshot("delete returned")
    for seed in range(5):
        crashed = snapshot.crash(random.Random(seed), mode)  # type: ignore[arg-type]
        assert "1.msg" not in crashed.listdir(_large_dir(config)), f"seed {seed}"
        with open_store(config, fs=crashed) as store:
            lm = store.large_messages
            assert lm.ids() == [2], f"seed {seed}"
            with lm.open(2) as r:
                assert r.read() == body_bytes(2, CHUNK + 5)
