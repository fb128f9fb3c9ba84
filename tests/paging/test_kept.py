"""Open never deletes what it cannot prove is its own unfinished work, and pages that went
missing or shorter are LostDataError, never silently fewer records (store.paging.files,
store.paging.database: "What open may delete"; store.paging.manifest). Real folders and real
databases, damaged from outside the way an operator or a half-restored backup does."""

from __future__ import annotations

import filecmp
import os
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa

from store.errors import CorruptionError, LostDataError
from store.paging.base import SUMMARY_NAME
from store.paging.database import ADDRESS_ROW, DIRECTORY_ROW, TOMBSTONE_ROW
from store.paging.files import ADDRESS_FILE, FilePagingManager
from store.paging.format import page_file_name
from store.paging.manifest import MANIFEST_NAME, Manifest, decode_manifest, encode_manifest
from tests.paging.contract import PagingFactory

PAGE = 90  # records of 20 bytes are 30 encoded: three per page


def _record(i: int) -> bytes:
    return b"%020d" % i


def _fill(pm, address: str = "orders", count: int = 8) -> None:
    """Pages 1, 2 full and page 3 holding two records, each record its own synced batch."""
    ps = pm.store(address)
    for i in range(count):
        ps.append(_record(i), sync=True)


# -- the file store ---------------------------------------------------------------------------


def _open(directory: str) -> FilePagingManager:
    return FilePagingManager(directory, page_size_of=lambda a: PAGE, sync_timeout_ns=100_000)


@pytest.fixture
def folder(tmp_path: Path) -> tuple[str, str]:
    """(paging directory, the folder of address "orders" with pages 1..3)."""
    directory = str(tmp_path / "paging")
    pm = _open(directory)
    _fill(pm)
    pm.close()
    (name,) = os.listdir(directory)
    return directory, os.path.join(directory, name)


def _snapshot(path: str, into: Path) -> str:
    copy = str(into / "before")
    shutil.copytree(path, copy)
    return copy


def _same_tree(a: str, b: str) -> bool:
    cmp = filecmp.dircmp(a, b)
    names = sorted(os.listdir(a))
    _, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
    return not (cmp.left_only or cmp.right_only or mismatch or errors)


def test_a_folder_that_lost_address_txt_is_kept_and_reported(folder, tmp_path) -> None:
    directory, path = folder
    os.remove(os.path.join(path, ADDRESS_FILE))
    before = _snapshot(path, tmp_path)
    with pytest.raises(CorruptionError) as info:
        _open(directory)
    assert info.value.path == path
    assert "no address.txt" in str(info.value) and "kept" in str(info.value)
    assert _same_tree(before, path)  # every page is still there, byte for byte
    with pytest.raises(CorruptionError):
        _open(directory)  # and stays reported: a second open does not delete it either


def test_a_folder_a_crash_left_while_creating_it_is_removed(tmp_path) -> None:
    directory = str(tmp_path / "paging")
    pm = _open(directory)
    _fill(pm, "kept", 2)
    pm.close()
    half = os.path.join(directory, "half-made")
    os.makedirs(half)
    Path(half, ADDRESS_FILE + ".tmp").write_bytes(b"orders\n")
    Path(half, MANIFEST_NAME).write_bytes(encode_manifest(Manifest()))
    Path(half, page_file_name(1)).write_bytes(b"")  # created, never written
    pm = _open(directory)
    assert not os.path.exists(half)
    assert pm.addresses() == ["kept"]
    assert pm.store("kept").read_page(1) == [_record(0), _record(1)]
    pm.close()


@pytest.mark.parametrize("proof", ["manifest", "summary", "damaged manifest"])
def test_a_folder_that_lost_address_txt_and_its_pages_but_not_their_proof_is_kept(
    folder, tmp_path, proof: str
) -> None:
    """No address.txt and no page record, as a crash while a store is made leaves it, but a
    pages.txt listing pages (or a damaged one), or a page summary: pages existed, so the
    folder is not a crash's leftover; open raises LostDataError naming it and deletes
    nothing (DESIGN 7.2), this open and the next."""
    directory, path = folder
    os.remove(os.path.join(path, ADDRESS_FILE))
    for name in os.listdir(path):
        if name.endswith(".page"):
            os.remove(os.path.join(path, name))
    manifest = Path(path, MANIFEST_NAME)
    assert decode_manifest(manifest.read_bytes(), path=str(manifest)).listed() == {1, 2, 3}
    if proof == "summary":
        manifest.write_bytes(encode_manifest(Manifest()))  # as a crash while made leaves it
        Path(path, SUMMARY_NAME).write_bytes(b"a summary written at a clean close")
    elif proof == "damaged manifest":
        manifest.write_bytes(manifest.read_bytes()[:-3])
    before = _snapshot(path, tmp_path)
    for _ in range(2):
        with pytest.raises(LostDataError) as info:
            _open(directory)
        assert info.value.path == path
        assert "lost its address.txt and its pages" in str(info.value)
        assert "kept" in str(info.value)
        assert _same_tree(before, path)


@pytest.mark.parametrize("content", [b"", b"\n", b"\xff\xfe\n"], ids=["empty", "newline", "bad"])
def test_an_empty_or_undecodable_address_is_corruption(folder, content: bytes) -> None:
    directory, path = folder
    Path(path, ADDRESS_FILE).write_bytes(content)
    with pytest.raises(CorruptionError) as info:
        _open(directory)
    assert info.value.path == os.path.join(path, ADDRESS_FILE)
    assert os.path.exists(os.path.join(path, page_file_name(1)))


def test_two_folders_claiming_one_address_are_corruption(folder) -> None:
    directory, path = folder
    twin = os.path.join(directory, "twin")
    shutil.copytree(path, twin)
    with pytest.raises(CorruptionError, match="claims address 'orders'"):
        _open(directory)
    assert sorted(os.listdir(twin)) == sorted(os.listdir(path))


@pytest.mark.parametrize("page", [1, 2, 3], ids=["first", "middle", "current"])
def test_a_deleted_page_is_lost_data(folder, page: int) -> None:
    directory, path = folder
    os.remove(os.path.join(path, page_file_name(page)))
    pm = _open(directory)
    with pytest.raises(LostDataError) as info:
        pm.store("orders")
    assert info.value.path == os.path.join(path, page_file_name(page))
    assert f"page {page} is missing" in str(info.value)
    pm.close()


@pytest.mark.parametrize(("page", "length"), [(2, 0), (2, 45), (3, 0), (3, 29)])
def test_a_shortened_page_is_lost_data(folder, page: int, length: int) -> None:
    """A page below the current one shortened at all, the current one below what its
    manifest lists as durable (truncated to zero included)."""
    directory, path = folder
    os.truncate(os.path.join(path, page_file_name(page)), length)
    pm = _open(directory)
    with pytest.raises(LostDataError) as info:
        pm.store("orders")
    where = os.path.join(path, page_file_name(page))
    assert (info.value.path, info.value.offset) == (where, length)
    pm.close()


def test_a_page_deleted_while_open_is_lost_data_on_read(folder) -> None:
    directory, path = folder
    pm = _open(directory)
    ps = pm.store("orders")
    os.remove(os.path.join(path, page_file_name(2)))
    with pytest.raises(LostDataError):
        ps.read_page(2)
    pm.close()


def test_a_torn_tail_past_the_durable_length_is_still_cut(folder) -> None:
    """The state a crash leaves: the manifest lists page 3 at its first synced batch (30
    bytes: a clean close would have listed all 60), and a later write was torn."""
    directory, path = folder
    listed = Path(path, MANIFEST_NAME)
    manifest = decode_manifest(listed.read_bytes(), path=str(listed))
    listed.write_bytes(encode_manifest(Manifest(dict(manifest.pages), (3, 30))))
    page3 = os.path.join(path, page_file_name(3))
    os.truncate(page3, 45)  # record 7 (not in the manifest's durable 30 bytes) torn
    pm = _open(directory)
    assert pm.store("orders").read_page(3) == [_record(6)]
    pm.close()


@pytest.mark.parametrize("damage", ["flipped byte", "cut by 10 bytes", "cut a record off"])
def test_damage_to_the_last_page_after_a_clean_close_is_lost_data_not_a_torn_tail(
    folder, tmp_path, damage: str
) -> None:
    """Issue 40: a clean close lists the current page's final length in the manifest, so the
    end of the last page damaged afterwards (a flipped byte in its last record, a cut inside
    it or at its start) is LostDataError naming the page, and nothing is cut: a torn tail is
    only what lies past the last length the manifest lists."""
    directory, path = folder
    page3 = Path(path, page_file_name(3))
    size = page3.stat().st_size
    manifest = decode_manifest(Path(path, MANIFEST_NAME).read_bytes(), path="pages.txt")
    assert manifest.current == (3, size)  # the close recorded the whole page
    data = bytearray(page3.read_bytes())
    if damage == "flipped byte":
        data[-3] ^= 0xFF
    elif damage == "cut by 10 bytes":
        data = data[:-10]
    else:
        data = data[: size // 2]  # two records of 30 bytes: the second one gone
    page3.write_bytes(bytes(data))
    before = _snapshot(path, tmp_path)
    for _ in range(2):
        pm = _open(directory)
        try:
            with pytest.raises(LostDataError) as info:
                pm.store("orders").read_page(3)
        finally:
            pm.close()
        assert info.value.path == str(page3)
        assert _same_tree(before, path)  # nothing cut, nothing rewritten


def test_an_interrupted_page_delete_is_finished_at_open(folder) -> None:
    """The manifest was rewritten without page 1, the file not unlinked yet: a crash."""
    directory, path = folder
    manifest_path = os.path.join(path, MANIFEST_NAME)
    manifest = decode_manifest(Path(manifest_path).read_bytes(), path=manifest_path)
    Path(manifest_path).write_bytes(encode_manifest(manifest.without(1)))
    pm = _open(directory)
    assert pm.store("orders").pages() == [2, 3]
    assert not os.path.exists(os.path.join(path, page_file_name(1)))
    pm.close()


def test_a_roll_the_crash_interrupted_is_kept(tmp_path) -> None:
    """The new page synced, the manifest not yet replaced: the page above the manifest's
    current one is a roll in progress, kept with its records."""
    directory = str(tmp_path / "paging")
    pm = _open(directory)
    _fill(pm, count=6)  # pages 1 and 2
    pm.close()
    (name,) = os.listdir(directory)
    manifest_path = os.path.join(directory, name, MANIFEST_NAME)
    old = Path(manifest_path).read_bytes()
    pm = _open(directory)
    pm.store("orders").append(_record(6), sync=True)  # rolls to page 3
    pm.close()
    Path(manifest_path).write_bytes(old)
    pm = _open(directory)
    assert pm.store("orders").read_page(3) == [_record(6)]
    pm.close()


def test_a_store_without_a_manifest_loads_unchecked_until_its_next_roll(folder) -> None:
    directory, path = folder
    os.remove(os.path.join(path, MANIFEST_NAME))  # as a store written before manifests
    os.remove(os.path.join(path, page_file_name(1)))
    pm = _open(directory)
    ps = pm.store("orders")
    assert ps.pages() == [2, 3]
    ps.append(_record(8), sync=True)
    ps.append(_record(9), sync=True)  # page 4: the roll writes a manifest
    pm.close()
    os.remove(os.path.join(path, page_file_name(2)))
    with pytest.raises(LostDataError):
        _open(directory).store("orders")


def test_a_damaged_manifest_is_corruption(folder) -> None:
    directory, path = folder
    manifest_path = os.path.join(path, MANIFEST_NAME)
    data = bytearray(Path(manifest_path).read_bytes())
    data[10] ^= 0x01
    Path(manifest_path).write_bytes(bytes(data))
    with pytest.raises(CorruptionError) as info:
        _open(directory)
    assert info.value.path == manifest_path


def test_deleting_pages_keeps_the_manifest_true(folder) -> None:
    directory, _ = folder
    pm = _open(directory)
    ps = pm.store("orders")
    ps.delete_page(1)
    ps.delete_page(3)  # the current page: appends move on to page 4
    ps.append(_record(8), sync=True)
    pm.close()
    pm = _open(directory)
    ps = pm.store("orders")
    assert ps.pages() == [2, 4]
    assert ps.read_page(4) == [_record(8)]
    pm.close()


# -- the database store -----------------------------------------------------------------------


def _filled(paging: PagingFactory) -> sa.Table:
    """Address "orders" with pages 1..3 (one row per record); returns its table."""
    pm = paging.open(page_size=PAGE)
    _fill(pm)
    paging.close()
    return paging.schema.page_table(1)


def _rows(paging: PagingFactory, table: sa.Table) -> list[tuple]:
    with paging.side_engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.select(table).order_by(table.c.id)).all()]


def _set_directory(paging: PagingFactory, data: bytes | None, *, delete: bool = False) -> None:
    d = paging.schema.page_store
    with paging.side_engine.begin() as conn:
        where = d.c.filename == DIRECTORY_ROW
        if delete:
            conn.execute(d.delete().where(where))
        else:
            conn.execute(d.update().where(where).values(data=data))


@pytest.mark.parametrize("how", ["deleted", "emptied", "null", "garbage"])
def test_a_lost_directory_row_drops_no_page_table(paging: PagingFactory, how: str) -> None:
    table = _filled(paging)
    before = _rows(paging, table)
    if how == "deleted":
        _set_directory(paging, None, delete=True)
    else:
        _set_directory(paging, {"emptied": b"", "null": None, "garbage": b"1\nx\n"}[how])
    with pytest.raises(CorruptionError) as info:
        paging.open(page_size=PAGE)
    assert table.name in str(info.value) or paging.schema.page_store.name == info.value.path
    assert _rows(paging, table) == before  # nothing dropped, nothing changed


def test_unlisted_tables_with_a_tombstone_or_no_page_row_are_dropped(paging) -> None:
    _filled(paging)
    removed, half = paging.schema.page_table(5), paging.schema.page_table(6)
    with paging.side_engine.begin() as conn:
        for t in (removed, half):
            t.create(conn)
        conn.execute(removed.insert().values(filename=TOMBSTONE_ROW, extension="txt", data=b"x"))
        conn.execute(
            removed.insert().values(filename=page_file_name(1), extension="page", data=b"{")
        )
        conn.execute(half.insert().values(filename=ADDRESS_ROW, extension="txt", data=b"y"))
    pm = paging.open(page_size=PAGE)
    assert pm.addresses() == ["orders"]
    assert paging.existing_page_tables() == {paging.schema.page_table(1).name.lower()}


def test_a_listed_table_that_is_missing_is_lost_data(paging) -> None:
    table = _filled(paging)
    with paging.side_engine.begin() as conn:
        table.drop(conn)
    with pytest.raises(LostDataError) as info:
        paging.open(page_size=PAGE)
    assert info.value.path == table.name


@pytest.mark.parametrize("how", ["deleted", "null", "empty"])
def test_a_table_without_its_address_is_corruption(paging, how: str) -> None:
    table = _filled(paging)
    with paging.side_engine.begin() as conn:
        where = table.c.filename == ADDRESS_ROW
        if how == "deleted":
            conn.execute(table.delete().where(where))
        else:
            conn.execute(table.update().where(where).values(data=None if how == "null" else b""))
    with pytest.raises(CorruptionError) as info:
        paging.open(page_size=PAGE)
    assert info.value.path == table.name
    assert paging.existing_page_tables() == {table.name.lower()}


def _page_rows(paging, table, page: int) -> list[int]:
    with paging.side_engine.connect() as conn:
        return list(
            conn.execute(
                sa.select(table.c.id)
                .where(table.c.filename == page_file_name(page))
                .order_by(table.c.id)
            ).scalars()
        )


@pytest.mark.parametrize(
    ("page", "which"), [(2, "all"), (2, "first"), (3, "last"), (3, "all")],
    ids=["middle-page", "row-of-a-page", "last-row-of-the-current-page", "current-page"],
)  # fmt: skip
def test_deleted_page_rows_are_lost_data(paging, page: int, which: str) -> None:
    table = _filled(paging)
    ids = _page_rows(paging, table, page)
    doomed = {"all": ids, "first": ids[:1], "last": ids[-1:]}[which]
    with paging.side_engine.begin() as conn:
        conn.execute(table.delete().where(table.c.id.in_(doomed)))
    pm = paging.open(page_size=PAGE)
    with pytest.raises(LostDataError) as info:
        pm.store("orders")
    assert info.value.path == f"{table.name} page {page}"


@pytest.mark.parametrize("column", ["data", "filename"])
def test_a_null_in_a_page_row_is_corruption_naming_the_row(paging, column: str) -> None:
    table = _filled(paging)
    row = _page_rows(paging, table, 2)[0]
    with paging.side_engine.begin() as conn:
        conn.execute(table.update().where(table.c.id == row).values({column: None}))
    pm = paging.open(page_size=PAGE)
    with pytest.raises(CorruptionError) as info:
        pm.store("orders")
    assert (info.value.path, info.value.offset) == (table.name, row)
    assert f"row id {row}" in str(info.value)


def test_a_table_without_a_manifest_loads_unchecked_until_its_next_write(paging) -> None:
    table = _filled(paging)
    with paging.side_engine.begin() as conn:
        conn.execute(table.delete().where(table.c.filename == MANIFEST_NAME))
    pm = paging.open(page_size=PAGE)
    ps = pm.store("orders")
    assert ps.read_page(1) == [_record(i) for i in range(3)]
    ps.append(_record(8), sync=True)  # writes a manifest of every page present
    paging.close()
    with paging.side_engine.begin() as conn:
        conn.execute(table.delete().where(table.c.filename == page_file_name(1)))
    with pytest.raises(LostDataError):
        paging.open(page_size=PAGE).store("orders")


def test_page_deletes_and_removal_keep_the_manifest_and_tombstone_true(paging) -> None:
    _filled(paging)
    pm = paging.open(page_size=PAGE)
    ps = pm.store("orders")
    ps.delete_page(2)
    pm.store("other").append(b"x", sync=True)
    pm = paging.reopen()
    assert pm.store("orders").pages() == [1, 3]
    pm.remove("other")
    assert pm.addresses() == ["orders"]
    assert paging.reopen().addresses() == ["orders"]
