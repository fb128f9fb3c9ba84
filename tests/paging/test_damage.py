"""Torn and damaged pages (store.paging.api rule 3, store.paging.format): a torn tail of the
page being written is tolerated and cut back before appending; a damaged record before it,
or on any other page, is a CorruptionError naming the page file (or the table and the page)
and the record's offset. Real files and real databases, damaged from outside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from store.errors import CorruptionError
from store.paging.api import PagePosition
from store.paging.files import FilePagingManager
from store.paging.format import FRAMING, encode_record, page_file_name
from store.paging.manifest import MANIFEST_NAME
from tests.paging.contract import PagingFactory
from tests.support.backends import StoreFactory, unique_prefix
from tests.support.db_backends import db_backend

P = PagePosition
# Records of 20 bytes: 30 encoded each, three per page of 90.
PAGE = 90


def _record(i: int) -> bytes:
    return b"%020d" % i


@pytest.fixture
def pages(tmp_path: Path) -> tuple[str, str]:
    """A file page store of address "orders" with pages 1 and 2 full (records 0..5) and
    page 3 holding records 6, 7, each record its own synced batch, left as a crash leaves it
    (page 3's manifest lists 30 bytes, record 6: what a crash can tear is record 7); returns
    (paging directory, its folder)."""
    directory = str(tmp_path / "paging")
    pm = _open(directory)
    ps = pm.store("orders")
    assert [ps.append(_record(i), sync=True) for i in range(8)][-1] == P(3, 1)
    (folder,) = [os.path.join(directory, n) for n in os.listdir(directory)]
    # The manifest a crash leaves: a clean close lists page 3 whole (60 bytes), and damage
    # inside what it lists is then lost data (tests/paging/test_kept.py), not a torn tail.
    manifest = Path(folder, MANIFEST_NAME)
    crashed = manifest.read_bytes()
    pm.close()
    manifest.write_bytes(crashed)
    return directory, folder


def _open(directory: str) -> FilePagingManager:
    return FilePagingManager(directory, page_size_of=lambda a: PAGE, sync_timeout_ns=100_000)


def _damage(path: str, offset: int, data: bytes | None = None, *, truncate: int | None = None):
    with open(path, "r+b") as f:
        if truncate is not None:
            f.truncate(truncate)
        if data is not None:
            f.seek(offset)
            f.write(data)


def _flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0x01]))


@pytest.mark.parametrize("cut", [1, 5, 15, 29], ids=lambda c: f"cut-{c}-bytes-into-record")
def test_current_page_truncated_mid_record_is_tolerated(pages, cut: int) -> None:
    directory, folder = pages
    page3 = os.path.join(folder, page_file_name(3))
    _damage(page3, 0, truncate=30 + cut)  # record 6 whole, record 7 cut
    pm = _open(directory)
    ps = pm.store("orders")
    assert ps.read_page(3) == [_record(6)]
    assert os.path.getsize(page3) == 30  # the torn tail was cut back before appending
    assert ps.append(_record(8)) == P(3, 1)
    assert ps.append(_record(9)) == P(3, 2)
    assert ps.append(_record(10)) == P(4, 0)
    pm.close()
    pm = _open(directory)
    assert pm.store("orders").read_page(3) == [_record(i) for i in (6, 8, 9)]
    pm.close()


def test_zeros_appended_to_the_current_page_are_tolerated(pages) -> None:
    directory, folder = pages
    page3 = os.path.join(folder, page_file_name(3))
    with open(page3, "ab") as f:
        f.write(bytes(4096))
    pm = _open(directory)
    ps = pm.store("orders")
    assert ps.read_page(3) == [_record(6), _record(7)]
    assert ps.append(_record(8)) == P(3, 2)
    ps.flush()
    assert ps.read_page(3) == [_record(6), _record(7), _record(8)]
    assert os.path.getsize(page3) == 90
    pm.close()


def test_flipped_byte_in_an_earlier_record_of_the_current_page_is_corruption(pages) -> None:
    directory, folder = pages
    page3 = os.path.join(folder, page_file_name(3))
    _flip(page3, 12)  # inside record 6's payload; record 7 after it is valid
    pm = _open(directory)
    ps = pm.store("orders")
    with pytest.raises(CorruptionError) as info:
        ps.read_page(3)
    assert (info.value.path, info.value.offset) == (page3, 0)
    # A damaged current page is never appended to: appends go to the next page.
    assert ps.append(_record(8)) == P(4, 0)
    assert ps.read_page(4) == [_record(8)]
    pm.close()


@pytest.mark.parametrize("record", [0, 1, 2])
def test_flipped_byte_on_a_page_that_is_not_current_is_corruption(pages, record: int) -> None:
    """Even in the last record: only the page being written can have a torn tail."""
    directory, folder = pages
    page2 = os.path.join(folder, page_file_name(2))
    _flip(page2, record * 30 + FRAMING)
    pm = _open(directory)
    ps = pm.store("orders")
    with pytest.raises(CorruptionError) as info:
        ps.read_page(2)
    assert (info.value.path, info.value.offset) == (page2, record * 30)
    assert ps.read_page(1) == [_record(i) for i in range(3)]
    assert ps.read_page(3) == [_record(6), _record(7)]
    pm.close()


def test_folder_without_address_file_is_removed_at_open(tmp_path: Path, caplog) -> None:
    directory = tmp_path / "paging"
    half = directory / "6c1f0f7e-0000-11ef-8000-000000000000"
    half.mkdir(parents=True)
    (half / "address.txt.tmp").write_bytes(b"orders\n")
    (directory / "gone.removed").mkdir()
    (directory / "gone.removed" / "000000001.page").write_bytes(b"x")
    pm = _open(str(directory))
    assert pm.addresses() == []
    assert os.listdir(directory) == []
    assert "no address.txt" in caplog.text
    pm.close()


def test_database_row_damage_is_corruption_naming_table_page_and_offset(
    db_name: str, tmp_path: Path
) -> None:
    spec = db_backend(db_name)
    factory = PagingFactory(StoreFactory(spec, tmp_path, unique_prefix()))
    try:
        ps = factory.open(page_size=1000).store("orders")
        for i in range(3):
            ps.append(_record(i), sync=True)  # three flushes: three rows of page 1
        factory.close()
        name = factory.page_tables()["orders"]
        table = factory.schema.page_table(int(name[len(factory.schema.names.page_store) :]))
        with factory.side_engine.begin() as conn:
            second = conn.execute(
                sa.select(table.c.id)
                .where(table.c.filename == page_file_name(1))
                .order_by(table.c.id)
            ).all()[1][0]
            damaged = bytearray(encode_record(_record(1)))
            damaged[12] ^= 0x01
            conn.execute(table.update().where(table.c.id == second).values(data=bytes(damaged)))
        ps = factory.open().store("orders")
        with pytest.raises(CorruptionError) as info:
            ps.read_page(1)
        assert info.value.path == name
        assert info.value.offset == 30
        assert "page 1" in str(info.value)
    finally:
        factory.teardown()
        spec.cleanup(factory.config)
