"""A file page store opened ``read_only`` (what ``store data exp`` and ``store report`` open):
a torn tail on the page being written is read past and left on disk, a leftover of a crash
stays, and every write is refused; a normal open of the same folder cuts and removes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.errors import JournalStateError
from store.paging.files import FilePagingManager
from store.paging.format import page_file_name

PAGE = 300


def _manager(directory: Path, *, read_only: bool) -> FilePagingManager:
    return FilePagingManager(
        str(directory),
        page_size_of=lambda _address: PAGE,
        sync_timeout_ns=1_000_000,
        read_only=read_only,
    )


def _snapshot(directory: Path) -> dict[str, bytes | None]:
    """Every file's bytes and every folder (None) under ``directory``."""
    return {
        str(p.relative_to(directory)): p.read_bytes() if p.is_file() else None
        for p in sorted(directory.rglob("*"))
    }


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[Path, list[bytes], Path]:
    """A page folder whose current page ends in a torn record, beside the empty folder of a
    page store a crash left half made. Returns (folder, the valid records of that page, its
    path)."""
    directory = tmp_path / "paging"
    pm = _manager(directory, read_only=False)
    store = pm.store("orders")
    for i in range(20):
        store.append(b"%04d" % i + b"r" * 36)
    store.flush()
    current = store.current_page
    records = store.read_page(current)
    pm.close()
    (page,) = directory.rglob(page_file_name(current))
    with page.open("ab") as f:
        f.write(b"{\x00\x00\x00\x28torn")  # a record cut short by a crash
    (directory / "half-made").mkdir()
    return directory, records, page


def test_a_read_only_open_reads_past_the_torn_tail_and_changes_nothing(
    damaged: tuple[Path, list[bytes], Path],
) -> None:
    directory, records, _ = damaged
    before = _snapshot(directory)
    pm = _manager(directory, read_only=True)
    store = pm.store("orders")
    assert store.read_page(store.current_page) == records
    assert [p for p, _ in store.read_pages(store.pages())] == store.pages()
    with pytest.raises(JournalStateError, match="read-only"):
        store.append(b"more")
    with pytest.raises(JournalStateError, match="read-only"):
        store.delete_page(store.pages()[0])
    pm.close()
    assert _snapshot(directory) == before


def test_a_normal_open_cuts_the_torn_tail(damaged: tuple[Path, list[bytes], Path]) -> None:
    """What the read-only open refrains from: without ``read_only`` the same folder changes."""
    directory, records, page = damaged
    length = page.stat().st_size
    pm = _manager(directory, read_only=False)
    store = pm.store("orders")
    assert store.read_page(store.current_page) == records
    pm.close()
    assert page.stat().st_size < length
    assert not (directory / "half-made").exists()
