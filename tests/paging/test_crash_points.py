"""The file page store at every crash point (docs/conventions.md#7): a seeded workload of synced
appends that roll pages, page deletes and store removals and creations runs on the fault-
injecting file system (tests/support/faultfs), which takes a snapshot around every sync,
rename and directory sync; every snapshot is crashed in several ways and reopened. Each crash
image must open (a crash never leaves what open refuses: store.paging.files, "What open may
delete"), and hold exactly the acknowledged records, with at most the one operation in flight
at the crash either done or not. New damage cases are one more operation or crash mode here,
not a new harness."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from store.paging.files import FilePagingManager
from tests.support.faultfs import Call, FaultFileSystem, Snapshot

PAGE = 200  # records of 20..60 bytes: a roll every few appends
ADDRESSES = ("a", "b", "c")
MODES = ("process", "drop", "random", "prefix", "tear-last", "reorder")


@dataclass
class Model:
    """What was acknowledged: per address, its records by page (in order); and the one
    operation in flight, if any: ("append", address, page, record) / ("delete", address,
    page) / ("remove", address) / ("create", address)."""

    pages: dict[str, dict[int, list[bytes]]] = field(default_factory=dict)
    pending: tuple | None = None

    def copy(self) -> Model:
        return Model({a: {p: list(r) for p, r in ps.items()} for a, ps in self.pages.items()},
                     self.pending)  # fmt: skip


def _open(directory: str, fs: FaultFileSystem) -> FilePagingManager:
    return FilePagingManager(directory, page_size_of=lambda a: PAGE, sync_timeout_ns=50_000, fs=fs)


def _record(rng: random.Random, n: int) -> bytes:
    return (b"%06d:" % n) * rng.randint(3, 9)


def _run(seed: int, directory: str) -> list[Snapshot]:
    rng = random.Random(seed)
    sched = random.Random(seed ^ 0x5EED)  # the hook runs on the flusher's thread too
    fs = FaultFileSystem()
    model = Model()
    snapshots: list[Snapshot] = []

    def hook(call: Call) -> None:
        if call.kind in ("datasync", "rename", "fsync_dir", "remove") or (
            call.kind == "pwrite" and call.phase == "after" and sched.random() < 0.2
        ):
            snapshots.append(fs.snapshot(f"{call.phase} {call.kind} {call.path}"))

    pm = _open(directory, fs)
    fs.context = model.copy
    fs.watch(hook)
    n = 0
    for _ in range(60):
        address = rng.choice(ADDRESSES)
        roll = rng.random()
        stored = model.pages.get(address)
        if stored is not None and roll < 0.08:
            model.pending = ("remove", address)
            pm.remove(address)
            del model.pages[address]
        elif stored is not None and len(stored) > 1 and roll < 0.25:
            page = min(stored)
            model.pending = ("delete", address, page)
            pm.store(address).delete_page(page)
            del stored[page]
        else:
            record = _record(rng, n)
            n += 1
            if stored is None:
                model.pending = ("create", address)
                ps = pm.store(address)
                model.pages[address] = stored = {}
            ps = pm.store(address)
            model.pending = ("append", address, None, record)
            position = ps.append(record, sync=True)
            stored.setdefault(position.page, []).append(record)
        model.pending = None
    fs.clear_faults()
    pm.close()
    snapshots.append(fs.snapshot("closed"))
    return snapshots


def _check(directory: str, crashed: FaultFileSystem, acked: Model) -> None:
    pm = _open(directory, crashed)  # never refused: a crash leaves nothing open must keep
    try:
        pending = acked.pending
        for address in sorted(set(pm.addresses()) | set(acked.pages)):
            expected = acked.pages.get(address)
            if expected is None:
                # Only an address whose creation (or first append) was in flight may appear,
                # or one whose removal was: never anything else.
                assert pending is not None and pending[1] == address, f"{address} came back"
                continue
            if address not in pm.addresses():
                assert pending == ("remove", address), f"{address} is gone"
                continue
            ps = pm.store(address)
            stored = {page: ps.read_page(page) for page in ps.pages()}
            stored = {p: r for p, r in stored.items() if r}
            want = {p: r for p, r in expected.items() if r}
            if pending is not None and pending[0] == "delete" and pending[1] == address:
                stored.pop(pending[2], None)  # deleted or not: either way
                want.pop(pending[2], None)
            if pending is not None and pending[0] == "append" and pending[1] == address:
                extra = [r for p in sorted(stored) for r in stored[p]]
                base = [r for p in sorted(want) for r in want[p]]
                assert extra[: len(base)] == base, f"{address}: acknowledged records lost"
                assert extra[len(base) :] in ([], [pending[3]]), f"{address}: foreign records"
                continue
            assert stored == want, f"{address}: {crashed.crash_report}"
    finally:
        pm.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_crash_point_of_the_file_page_store_recovers_what_was_acknowledged(
    tmp_path: Path, seed: int
) -> None:
    directory = str(tmp_path / "paging")
    snapshots = _run(seed, directory)
    assert len(snapshots) > 100
    rng = random.Random(seed)
    chosen = rng.sample(snapshots, min(len(snapshots), 120)) + snapshots[-1:]
    for snapshot in chosen:
        for mode in rng.sample(MODES, 2):
            crashed = snapshot.crash(random.Random(rng.random()), mode)  # type: ignore[arg-type]
            acked = snapshot.context
            assert isinstance(acked, Model)
            try:
                _check(directory, crashed, acked)
            except Exception as exc:
                raise AssertionError(
                    f"seed {seed}, crash at {snapshot.label} ({mode}): {exc}; "
                    f"{crashed.crash_report}"
                ) from exc
