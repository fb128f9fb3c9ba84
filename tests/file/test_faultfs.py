"""The fault-injecting file system (tests/support/faultfs.py): the durability model, the crash
outcomes, the injected errors and the crash hooks. The crash tests are only as good as this."""

from __future__ import annotations

import errno
import os
import pickle
import random
from pathlib import Path

import pytest

from store.errors import StoreIOError
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.fs import FileHandle, FileSystem, OsFileSystem
from tests.support.faultfs import SECTOR, Call, FaultFileSystem, io_error_of

D = "/d"


def fresh() -> FaultFileSystem:
    fs = FaultFileSystem()
    fs.makedirs(D)
    return fs


def durable_file(fs: FaultFileSystem, name: str, data: bytes) -> FileHandle:
    """Creates ``name`` with ``data``, synced and with its directory entry synced."""
    h = fs.open(f"{D}/{name}", create=True)
    h.pwrite(data, 0)
    h.datasync()
    fs.fsync_dir(D)
    return h


def test_implements_the_seam_protocols_and_is_not_native() -> None:
    fs = fresh()
    assert isinstance(fs, FileSystem)
    assert isinstance(fs.open(f"{D}/a", create=True), FileHandle)
    assert fs.native is False


def test_reads_see_unsynced_writes_and_sizes() -> None:
    fs = fresh()
    h = fs.open(f"{D}/a", create=True)
    h.pwrite(b"hello", 0)
    h.pwrite(b"X", 10)  # past the end: the gap reads as zeros
    assert h.size() == 11
    assert h.pread(100, 0) == b"hello" + bytes(5) + b"X"
    assert h.pread(4, 20) == b""


def test_unsynced_write_is_lost_by_a_power_crash_and_kept_after_datasync() -> None:
    fs = fresh()
    h = durable_file(fs, "a", b"old!")
    h.pwrite(b"new!", 0)
    assert fs.crash(random.Random(0), "drop").read_file(f"{D}/a") == b"old!"
    assert fs.crash(random.Random(0), "process").read_file(f"{D}/a") == b"new!"
    h.datasync()
    assert fs.crash(random.Random(0), "drop").read_file(f"{D}/a") == b"new!"


def test_truncate_and_allocate_are_volatile_until_datasync() -> None:
    fs = fresh()
    h = durable_file(fs, "a", b"abcdef")
    h.truncate(2)
    h.allocate(8)
    assert h.pread(100, 0) == b"ab" + bytes(6)
    assert fs.crash(random.Random(0), "drop").read_file(f"{D}/a") == b"abcdef"
    h.datasync()
    assert fs.crash(random.Random(0), "drop").read_file(f"{D}/a") == b"ab" + bytes(6)


def test_a_created_file_disappears_unless_its_directory_was_synced() -> None:
    fs = fresh()
    h = fs.open(f"{D}/a", create=True)
    h.pwrite(b"data", 0)
    h.datasync()
    assert not fs.crash(random.Random(0), "drop").exists(f"{D}/a")
    fs.fsync_dir(D)
    assert fs.crash(random.Random(0), "drop").read_file(f"{D}/a") == b"data"


def test_rename_and_remove_are_volatile_until_fsync_dir() -> None:
    fs = fresh()
    durable_file(fs, "a", b"A")
    durable_file(fs, "c", b"C")
    fs.rename(f"{D}/a", f"{D}/b")
    fs.remove(f"{D}/c")
    assert fs.listdir(D) == ["b"]
    assert fs.crash(random.Random(0), "drop").listdir(D) == ["a", "c"]
    fs.fsync_dir(D)
    crashed = fs.crash(random.Random(0), "drop")
    assert crashed.listdir(D) == ["b"]
    assert crashed.read_file(f"{D}/b") == b"A"


def test_a_crash_keeps_a_prefix_of_the_directory_operations() -> None:
    """rename a->b then remove c: a crash never removes c while undoing the rename."""
    fs = fresh()
    durable_file(fs, "a", b"A")
    durable_file(fs, "c", b"C")
    fs.rename(f"{D}/a", f"{D}/b")
    fs.remove(f"{D}/c")
    seen = {tuple(fs.crash(random.Random(i), "random").listdir(D)) for i in range(200)}
    assert seen == {("a", "c"), ("b", "c"), ("b",)}


def test_a_reorder_crash_may_keep_a_later_directory_operation_without_an_earlier_one() -> None:
    fs = fresh()
    durable_file(fs, "a", b"A")
    durable_file(fs, "c", b"C")
    fs.rename(f"{D}/a", f"{D}/b")
    fs.remove(f"{D}/c")
    seen = {tuple(fs.crash(random.Random(i), "reorder").listdir(D)) for i in range(200)}
    assert seen == {("a", "c"), ("b", "c"), ("b",), ("a",)}


def test_fsync_dir_syncs_only_the_operations_touching_that_directory() -> None:
    fs = fresh()
    fs.makedirs("/e")
    fs.open(f"{D}/a", create=True)
    fs.open("/e/b", create=True)
    fs.fsync_dir("/e")
    crashed = fs.crash(random.Random(0), "drop")
    assert crashed.listdir(D) == [] and crashed.listdir("/e") == ["b"]


def test_rename_into_another_directory_is_durable_after_either_directory_sync() -> None:
    fs = fresh()
    fs.makedirs(f"{D}/attic")
    durable_file(fs, "a", b"A")
    fs.rename(f"{D}/a", f"{D}/attic/a")
    fs.fsync_dir(D)
    crashed = fs.crash(random.Random(0), "drop")
    assert crashed.listdir(f"{D}/attic") == ["a"] and "a" not in crashed.listdir(D)


def test_a_removed_file_stays_readable_through_an_open_handle() -> None:
    fs = fresh()
    h = durable_file(fs, "a", b"still here")
    fs.remove(f"{D}/a")
    assert not fs.exists(f"{D}/a")
    assert h.pread(10, 0) == b"still here"


def _tear_shape(content: bytes, new: bytes, offset: int) -> tuple[int, int]:
    """Returns (kept prefix length, garbage length) of a torn write of ``new`` over zeros."""
    assert content[:offset] == bytes(offset), "bytes before the write changed"
    region = content[offset : offset + len(new)]
    k = 0
    while k < len(new) and region[k] == new[k]:
        k += 1
    rest = region[k:]
    nonzero = [i for i, b in enumerate(rest) if b]
    garbage = nonzero[-1] + 1 if nonzero else 0
    return k, garbage


def test_torn_writes_keep_a_prefix_cut_anywhere_or_at_a_sector_with_optional_garbage() -> None:
    seen = {"byte": 0, "sector": 0, "garbage": 0}
    rng_data = random.Random(7)
    new = bytes(rng_data.randrange(1, 256) for _ in range(5 * SECTOR))  # no zero bytes
    offset = 100
    for i in range(300):
        fs = fresh()
        h = durable_file(fs, "a", bytes(offset + len(new) + SECTOR))
        h.pwrite(new, offset)
        content = fs.crash(random.Random(i), "tear-last").read_file(f"{D}/a")
        k, garbage = _tear_shape(content, new, offset)
        assert 0 < k < len(new) or garbage, f"seed {i}: the torn write was applied whole"
        end = offset + k
        if garbage:
            assert end % SECTOR == 0 or garbage <= SECTOR, f"seed {i}: garbage not at a sector"
            assert garbage <= SECTOR
            seen["garbage"] += 1
        elif end % SECTOR == 0:
            seen["sector"] += 1
        else:
            seen["byte"] += 1
        assert content[offset + len(new) :] == bytes(SECTOR), f"seed {i}: bytes after the write"
    assert all(seen.values()), seen


def test_tear_last_tears_only_the_last_unsynced_write() -> None:
    fs = fresh()
    h = durable_file(fs, "a", bytes(4096))
    h.pwrite(b"\x01" * 1000, 0)
    h.pwrite(b"\x02" * 1000, 1000)
    h.pwrite(b"\x03" * 1000, 2000)
    for i in range(50):
        content = fs.crash(random.Random(i), "tear-last").read_file(f"{D}/a")
        assert content[:2000] == b"\x01" * 1000 + b"\x02" * 1000
        assert content[2000:3000] != b"\x03" * 1000


def test_random_crashes_apply_drop_and_tear_writes_independently() -> None:
    fs = fresh()
    h = durable_file(fs, "a", bytes(3 * SECTOR))
    for n in range(3):
        h.pwrite(bytes([n + 1]) * SECTOR, n * SECTOR)
    outcomes = set()
    for i in range(400):
        content = fs.crash(random.Random(i), "random").read_file(f"{D}/a")
        outcomes.add(tuple(content[n * SECTOR] == n + 1 for n in range(3)))
    assert len(outcomes) == 8, outcomes  # the second kept without the first, and so on


def test_prefix_crashes_never_keep_a_later_write_without_an_earlier_one() -> None:
    fs = fresh()
    h = durable_file(fs, "a", bytes(3 * SECTOR))
    for n in range(3):
        h.pwrite(bytes([n + 1]) * SECTOR, n * SECTOR)
    for i in range(200):
        content = fs.crash(random.Random(i), "prefix").read_file(f"{D}/a")
        whole = [
            content[n * SECTOR : (n + 1) * SECTOR] == bytes([n + 1]) * SECTOR for n in range(3)
        ]
        first_missing = whole.index(False) if False in whole else 3
        assert not any(whole[first_missing:]), f"seed {i}: {whole}"


def test_the_same_rng_seed_gives_the_same_crash_image_and_snapshots_pickle() -> None:
    fs = fresh()
    h = durable_file(fs, "a", bytes(2048))
    h.pwrite(os.urandom(1500), 300)
    fs.open(f"{D}/b", create=True)
    snap = pickle.loads(pickle.dumps(fs.snapshot("here")))
    assert snap.label == "here" and snap.unsynced == 2
    for i in range(20):
        one = snap.crash(random.Random(i), "random")
        two = fs.crash(random.Random(i), "random")
        assert one.listdir(D) == two.listdir(D)
        assert one.read_file(f"{D}/a") == two.read_file(f"{D}/a")


def test_crash_image_is_fully_durable_and_independent_of_the_original() -> None:
    fs = fresh()
    h = durable_file(fs, "a", b"one")
    h.pwrite(b"two", 0)
    image = fs.crash(random.Random(0), "process")
    assert image.unsynced == 0
    image.open(f"{D}/a").pwrite(b"three", 0)
    assert fs.read_file(f"{D}/a") == b"two"


def test_snapshot_records_the_context_callable() -> None:
    acked = [3]
    fs = FaultFileSystem(context=lambda: acked[0])
    assert fs.snapshot().context == 3


# -- injected faults -------------------------------------------------------------------------


def test_fail_raises_enospc_on_the_nth_write_as_the_real_seam_would() -> None:
    fs = fresh()
    h = fs.open(f"{D}/a", create=True)
    fs.fail("pwrite", 2, err=errno.ENOSPC)
    h.pwrite(b"first", 0)
    with pytest.raises(StoreIOError) as info:
        h.pwrite(b"second", 5)
    assert info.value.path == f"{D}/a"
    assert io_error_of(info.value) == errno.ENOSPC
    assert info.value.hint is not None and "disk is full" in info.value.hint
    assert h.pread(100, 0) == b"first"  # the failed call changed nothing
    h.pwrite(b"third", 5)  # one failure only (times=1)
    assert h.pread(100, 0) == b"firstthird"


def test_fail_forever_and_by_path() -> None:
    fs = fresh()
    fs.fail("datasync", 1, times=None, match=lambda p: p.endswith(".jrn"))
    fs.open(f"{D}/x.txt", create=True).datasync()
    h = fs.open(f"{D}/x.jrn", create=True)
    for _ in range(3):
        with pytest.raises(StoreIOError) as info:
            h.datasync()
        assert io_error_of(info.value) == errno.EIO


def test_every_seam_call_can_fail() -> None:
    for kind, call in {
        "open": lambda fs: fs.open(f"{D}/a"),
        "pread": lambda fs: fs.open(f"{D}/a").pread(1, 0),
        "size": lambda fs: fs.open(f"{D}/a").size(),
        "allocate": lambda fs: fs.open(f"{D}/a").allocate(10),
        "truncate": lambda fs: fs.open(f"{D}/a").truncate(0),
        "rename": lambda fs: fs.rename(f"{D}/a", f"{D}/b"),
        "remove": lambda fs: fs.remove(f"{D}/a"),
        "fsync_dir": lambda fs: fs.fsync_dir(D),
        "listdir": lambda fs: fs.listdir(D),
        "makedirs": lambda fs: fs.makedirs(f"{D}/sub"),
    }.items():
        fs = fresh()
        durable_file(fs, "a", b"A")
        fs.fail(kind, err=errno.EIO)
        with pytest.raises(StoreIOError) as info:
            call(fs)
        assert io_error_of(info.value) == errno.EIO, kind


def test_natural_errors_match_the_real_seam(tmp_path: Path) -> None:
    """Missing files give the same StoreIOError message on both seams."""
    fault = FaultFileSystem()
    fault.makedirs(str(tmp_path))
    real = OsFileSystem()
    missing = str(tmp_path / "missing")
    for call in (
        lambda fs: fs.open(missing),
        lambda fs: fs.rename(missing, str(tmp_path / "other")),
    ):
        with pytest.raises(StoreIOError) as want:
            call(real)
        with pytest.raises(StoreIOError) as got:
            call(fault)
        assert str(got.value) == str(want.value)
        assert got.value.path == want.value.path
    real.remove(missing)  # a missing file is not an error on either
    fault.remove(missing)
    assert real.listdir(str(tmp_path / "nope")) == fault.listdir(str(tmp_path / "nope")) == []


def test_a_closed_handle_refuses_io() -> None:
    fs = fresh()
    h = fs.open(f"{D}/a", create=True)
    h.close()
    h.close()
    with pytest.raises(StoreIOError) as info:
        h.pwrite(b"x", 0)
    assert io_error_of(info.value) == errno.EBADF


def test_a_read_only_handle_refuses_writes_as_the_real_seam_does(tmp_path: Path) -> None:
    fault = FaultFileSystem()
    fault.makedirs(str(tmp_path))
    real = OsFileSystem()
    path = str(tmp_path / "a")
    for fs in (real, fault):
        fs.open(path, create=True).close()
        handle = fs.open(path, read_only=True)
        try:
            assert handle.pread(10, 0) == b""
            for write, refusal in (
                (lambda h: h.pwrite(b"x", 0), errno.EBADF),
                (lambda h: h.truncate(0), errno.EINVAL),
                (lambda h: h.allocate(10), errno.EBADF),
            ):
                with pytest.raises(StoreIOError) as info:
                    write(handle)
                assert io_error_of(info.value) == refusal
        finally:
            handle.close()
        with pytest.raises(ValueError):
            fs.open(path, create=True, read_only=True)


def test_a_read_only_mount_refuses_every_change_but_not_reading() -> None:
    fs = fresh()
    h = fs.open(f"{D}/a", create=True)
    h.pwrite(b"data", 0)
    h.datasync()
    h.close()
    fs.fsync_dir(D)
    fs.mount_read_only()
    for change in (
        lambda: fs.open(f"{D}/a"),
        lambda: fs.open(f"{D}/b", create=True),
        lambda: fs.rename(f"{D}/a", f"{D}/c"),
        lambda: fs.remove(f"{D}/a"),
        lambda: fs.makedirs(f"{D}/sub"),
    ):
        with pytest.raises(StoreIOError) as info:
            change()
        assert io_error_of(info.value) == errno.EROFS
    handle = fs.open(f"{D}/a", read_only=True)
    assert handle.pread(4, 0) == b"data"
    assert fs.listdir(D) == ["a"]


# -- crash hooks -----------------------------------------------------------------------------


def test_crash_before_a_datasync_snapshots_the_unsynced_write_and_stops() -> None:
    fs = fresh()
    h = durable_file(fs, "a", b"old")
    fs.crash_at("datasync", 1, when="before")
    h.pwrite(b"new", 0)
    with pytest.raises(StoreIOError):
        h.datasync()
    assert fs.dead
    (snap,) = fs.crash_points
    assert snap.crash(random.Random(0), "drop").read_file(f"{D}/a") == b"old"
    with pytest.raises(StoreIOError):  # a dead machine refuses everything
        h.pread(3, 0)
    h.close()


def test_crash_after_a_datasync_snapshots_the_synced_write() -> None:
    fs = fresh()
    h = durable_file(fs, "a", b"old")
    fs.crash_at("datasync", 1, when="after")
    h.pwrite(b"new", 0)
    h.datasync()  # the call itself completes; the machine dies right after
    (snap,) = fs.crash_points
    assert snap.crash(random.Random(0), "drop").read_file(f"{D}/a") == b"new"
    with pytest.raises(StoreIOError):
        h.pwrite(b"x", 0)


def test_crash_at_without_stop_lets_the_workload_continue() -> None:
    fs = fresh()
    fs.crash_at("rename", 2, when="before", stop=False, match=lambda p: p.endswith(".cmp"))
    durable_file(fs, "x.cmp", b"1")
    durable_file(fs, "y.cmp", b"2")
    fs.rename(f"{D}/x.cmp", f"{D}/x")
    fs.rename(f"{D}/y.cmp", f"{D}/y")
    fs.fsync_dir(D)
    assert not fs.dead
    (snap,) = fs.crash_points
    assert "y.cmp" in snap.label
    assert snap.crash(random.Random(0), "process").listdir(D) == ["x", "y.cmp"]


def test_crash_at_counts_several_kinds_together() -> None:
    fs = fresh()
    durable_file(fs, "a", b"A")
    durable_file(fs, "b", b"B")
    fs.crash_at(("remove", "rename"), 2, when="after", match=lambda p: p.startswith(f"{D}/"))
    fs.rename(f"{D}/a", f"{D}/c")
    fs.remove(f"{D}/b")
    assert fs.dead
    (snap,) = fs.crash_points
    assert snap.label.startswith("after remove #2")


def test_watch_sees_every_call_before_and_after_in_order() -> None:
    fs = fresh()
    seen: list[Call] = []
    fs.watch(seen.append)
    h = fs.open(f"{D}/a", create=True)
    h.pwrite(b"abc", 0)
    h.datasync()
    assert [(c.kind, c.phase) for c in seen] == [
        ("open", "before"), ("open", "after"),
        ("pwrite", "before"), ("pwrite", "after"),
        ("datasync", "before"), ("datasync", "after"),
    ]  # fmt: skip
    assert seen[2].length == 3 and seen[2].offset == 0
    assert [c.index for c in seen[::2]] == sorted({c.index for c in seen})


def test_unknown_kinds_and_modes_are_refused() -> None:
    fs = fresh()
    with pytest.raises(ValueError):
        fs.fail("fsync")
    with pytest.raises(ValueError):
        fs.crash_at("datasync", 0)
    with pytest.raises(ValueError):
        fs.crash(random.Random(0), "meteor")  # type: ignore[arg-type]


# -- the journal on it -----------------------------------------------------------------------


def test_a_journal_closed_cleanly_survives_a_power_crash_on_the_fault_fs() -> None:
    fs = fresh()
    opts = FileJournalOptions(directory=f"{D}/j", file_size=8192, fs=fs, buffer_timeout_ns=0)
    journal = FileJournal(opts)
    journal.load()
    for i in range(200):
        journal.append_add(i, 1, bytes([i % 256]) * (i % 97))
    journal.close()
    image = fs.crash(random.Random(0), "drop")
    reopened = FileJournal(FileJournalOptions(directory=f"{D}/j", file_size=8192, fs=image))
    try:
        records = reopened.load().records
    finally:
        reopened.close()
    assert [(r.id, r.data) for r in records] == [
        (i, bytes([i % 256]) * (i % 97)) for i in range(200)
    ]
