"""`store data print` at message level, through the real command (its entry point in this
process; a subprocess where this process holds the store's lock), on stores the
StorageManager wrote: the file store and the database store (PostgreSQL, MariaDB, SQLite).

One store per test holds addresses, queues, messages with properties, an ack, a committed
transaction, a prepared one, a duplicate id, a large message and a paged address with pages,
a paging transaction and cursor acks; the node id comes from the node manager."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import store
from store import StoreConfig, open_store
from store.db.migrate import drop_schema
from store.file import survey
from store.ha import open_node_manager
from store.messaging import Message, StorageManager, Xid
from tests.cli.test_data import _read_only_mount
from tests.support.backends import unique_prefix
from tests.support.cli import run_store_here
from tests.support.db_backends import new_store_mapping

SECRET_BODY = b"SECRET-BODY-4711"
SECRET_PROPERTY = "eu-secret-0815"
DUP_ID = b"dup-id-secret"
JUNK = b"\x09junk"
LARGE_SIZE = 3000
SETTINGS = {
    "min-large-message-size": 1024,
    "address-settings": {
        "paged": {"max-size-messages": 2, "address-full-policy": "PAGE", "page-size-bytes": 512}
    },
}


@dataclass
class Case:
    """A store of one back-end: its configuration and the command-line options naming it."""

    name: str
    config: StoreConfig
    args: list[str]


def _file_case(tmp_path: Path) -> Case:
    dirs = {k: tmp_path / k for k in ("journal", "bindings", "paging", "large")}
    text = (
        f'journal-directory = "{dirs["journal"]}"\n'
        f'bindings-directory = "{dirs["bindings"]}"\n'
        f'paging-directory = "{dirs["paging"]}"\n'
        f'large-messages-directory = "{dirs["large"]}"\n'
        'journal-type = "NIO"\njournal-file-size = 65536\n'
    )
    path = tmp_path / "store.toml"
    path.write_text(text)
    mapping: dict[str, Any] = {
        "journal-directory": str(dirs["journal"]),
        "bindings-directory": str(dirs["bindings"]),
        "paging-directory": str(dirs["paging"]),
        "large-messages-directory": str(dirs["large"]),
        "journal-type": "NIO",
        "journal-file-size": 65536,
        **SETTINGS,
    }
    return Case("file", StoreConfig.from_mapping(mapping), ["--config", str(path)])


def _database_case(tmp_path: Path, which: str) -> Case:
    mapping = new_store_mapping(tmp_path, unique_prefix(), which)
    section = mapping["database-store"]
    args = ["--jdbc-connection-url", section["jdbc-connection-url"]]
    for key, option in (
        ("jdbc-user", "--jdbc-user"),
        ("jdbc-password", "--jdbc-password"),
        ("bindings-table-name", "--jdbc-bindings-table-name"),
        ("message-table-name", "--jdbc-message-table-name"),
        ("large-message-table-name", "--jdbc-large-message-table-name"),
        ("page-store-table-name", "--jdbc-page-store-table-name"),
        ("node-manager-store-table-name", "--jdbc-node-manager-table-name"),
    ):
        if section.get(key) is not None:
            args += [option, str(section[key])]
    return Case(which, StoreConfig.from_mapping({**mapping, **SETTINGS}), args)


def _make_case(tmp_path: Path, which: str) -> Iterator[Case]:
    case = _file_case(tmp_path) if which == "file" else _database_case(tmp_path, which)
    try:
        yield case
    finally:
        if which != "file":
            drop_schema(case.config)


@pytest.fixture(params=["file", "postgresql", "mariadb", "sqlite"])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    """An empty store of each back-end; its tables are dropped afterwards."""
    yield from _make_case(tmp_path, request.param)


@pytest.fixture(params=["file", "postgresql"])
def case2(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    """An empty store of the file store and PostgreSQL."""
    yield from _make_case(tmp_path, request.param)


@dataclass
class Written:
    """What :func:`_fill` wrote: ids to look for in the output."""

    node_id: str
    orders_queue: int
    paged_queue: int
    news_queue: int
    secret: int
    large: int


def _fill(config: StoreConfig) -> Written:
    nm = open_node_manager(config)  # sets the node id, as a broker's first start does
    node_id = nm.node_id
    nm.close()
    sm = StorageManager(open_store(config))
    try:
        sm.load()
        sm.create_address("orders", routing_types=("ANYCAST",))
        orders = sm.create_queue("orders.eu", address="orders", routing_type="ANYCAST")
        sm.create_address("paged", routing_types=("ANYCAST",))
        paged = sm.create_queue("paged.q", address="paged", routing_type="ANYCAST")
        properties = {
            "region": SECRET_PROPERTY,
            "n": 7,
            "flag": True,
            "none": None,
            "raw": b"\x01\x02",
        }
        secret = sm.send(Message("orders", SECRET_BODY, priority=7, properties=properties,
                                 timestamp=1_700_000_000_000), dup_id=DUP_ID)  # fmt: skip
        acked = sm.send(Message("orders", b"acked"))
        sm.receive("orders.eu", 5)
        assert acked is not None
        sm.ack("orders.eu", acked)  # deleted with its last reference
        sm.create_address("news", routing_types=("MULTICAST",))
        news = sm.create_queue("news.a", address="news", routing_type="MULTICAST")
        sm.create_queue("news.b", address="news", routing_type="MULTICAST")
        both = sm.send(Message("news", b"news"))
        assert both is not None and sm.receive("news.a", 1)
        sm.ack("news.a", both)  # news.b still holds it
        tx = sm.begin()
        tx.send(Message("orders", b"in-a-committed-tx"))
        tx.commit()
        large = sm.send(Message("orders", b"L" * LARGE_SIZE))
        for i in range(8):
            sm.send(Message("paged", b"paged-%d" % i + b"." * 100, properties={"i": i}))
        tx = sm.begin()
        tx.send(Message("paged", b"paged-in-tx" + b"." * 100))
        tx.commit()
        for d in sm.receive("paged.q", 5):
            sm.ack("paged.q", d.message.message_id)
        tx = sm.begin()
        tx.send(Message("orders", b"prepared"))
        tx.prepare(Xid(1, b"gtid", b"bq"))
    finally:
        sm.close()
    assert secret is not None and large is not None
    return Written(node_id, orders.id, paged.id, news.id, secret, large)


def _print(case: Case, *extra: str) -> subprocess.CompletedProcess[str]:
    """``store data print`` through ``store.cli.main.main`` in this process."""
    return run_store_here("data", "print", *case.args, *extra)


def _print_process(case: Case, *extra: str) -> subprocess.CompletedProcess[str]:
    """``store data print`` as another process: this one's lock on the store must refuse it."""
    root = str(Path(store.__file__).parent.parent)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "store.cli.main", "data", "print", *case.args, *extra],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path, "COLUMNS": "200"},
        timeout=120,
        check=False,
    )


def _json(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines()]


# -- the whole store ---------------------------------------------------------------------------


def test_print_decodes_every_part_of_a_store(case: Case) -> None:
    w = _fill(case.config)
    done = _print(case)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"node id: {w.node_id} (" in out
    # Bindings: addresses, queues, the id counter, by name and decoded.
    assert 'ADDRESS_BINDING_RECORD name="orders" routing_types=["ANYCAST"]' in out
    assert (
        'QUEUE_BINDING_RECORD name="orders.eu" address="orders" routing_type="ANYCAST" '
        "filter=None" in out
    )
    assert "ID_COUNTER_RECORD next_id=" in out
    # Messages: headers, properties and the body's first bytes; refs, acks, duplicate ids.
    assert (
        'ADD_MESSAGE_PROTOCOL address="orders" priority=7 durable=True timestamp=1700000000000 '
        f'expiration=0 scheduled_delivery=0 properties={{region: "{SECRET_PROPERTY}", n: 7, '
        f"flag: True, none: None, raw: 0x0102}} body_size={len(SECRET_BODY)} "
        f"body=0x{SECRET_BODY.hex()}"
    ) in out
    assert f"ADD_REF queue_id={w.orders_queue}" in out
    assert f"ACKNOWLEDGE_REF queue_id={w.news_queue}" in out
    assert f'DUPLICATE_ID address="orders" dup_id_size={len(DUP_ID)} dup_id=0x{DUP_ID.hex()}' in out
    assert 'ADD_LARGE_MESSAGE address="orders" priority=4' in out
    assert f"body_size={LARGE_SIZE} large=True" in out
    assert 'PAGE_TRANSACTION record="PageTransaction" transaction_id=' in out
    assert f'ACKNOWLEDGE_CURSOR record="CursorAck" queue_id={w.paged_queue} page=' in out
    assert "XID format_id=1 global_transaction_id=0x67746964 branch_qualifier=0x6271" in out
    # The summaries: counts per user record type, what a load returns.
    summaries = [line for line in out.splitlines() if line.startswith("  user record types:")]
    assert len(summaries) == 2
    assert "ADDRESS_BINDING_RECORD 3" in summaries[0] and "QUEUE_BINDING_RECORD 4" in summaries[0]
    assert "ADD_LARGE_MESSAGE 1" in summaries[1] and "DUPLICATE_ID 1" in summaries[1]
    assert "ACKNOWLEDGE_REF " in summaries[1] and "ADD_MESSAGE_PROTOCOL " in summaries[1]
    assert "a load returns 8 records, 0 prepared and 0 failed transactions" in out  # bindings
    assert ", 1 prepared and 0 failed transactions" in out  # messages
    # Pages: the paged address, its pages, their messages decoded.
    assert "paging address paged: " in out
    pages = [line for line in out.splitlines() if line.startswith("  page ")]
    assert pages and all(" messages, " in line and " bytes" in line for line in pages)
    assert "PAGED_MESSAGE message_id=" in out and f"queue_ids=[{w.paged_queue}]" in out
    assert "properties={i: 7}" in out and b"paged-7".hex() in out
    # Large messages.
    assert f"large message {w.large}: {LARGE_SIZE} bytes, complete" in out


def test_safe_json_and_max_pages(case: Case) -> None:
    w = _fill(case.config)
    safe = _print(case, "--safe")
    assert safe.returncode == 0, safe.stderr
    for secret in (SECRET_BODY.hex(), SECRET_PROPERTY, DUP_ID.hex(), b"paged-7".hex()):
        assert secret not in safe.stdout
    assert (
        'properties={region: "str", n: "int", flag: "bool", none: "null", raw: "bytes"}'
        in safe.stdout
    )
    assert f"body_size={len(SECRET_BODY)}" in safe.stdout

    done = _print(case, "--json")
    assert done.returncode == 0, done.stderr
    entries = _json(done)
    assert entries[0] == {"kind": "node_id", "node_id": w.node_id, "source": entries[0]["source"]}
    by_id = {
        e["id"]: e
        for e in entries
        if e["kind"] == "record" and e["user_type_name"] == "ADD_MESSAGE_PROTOCOL"
    }
    secret = by_id[w.secret]
    fields = secret["decoded"]["fields"]
    assert secret["op"] == "ADD" and secret["user_type"] == 45 and secret["tx_id"] == 0
    assert fields["properties"] == {
        "region": SECRET_PROPERTY, "n": 7, "flag": True, "none": None, "raw": "AQI="
    }  # fmt: skip
    assert fields["property_types"] == {
        "region": "str", "n": "int", "flag": "bool", "none": "null", "raw": "bytes"
    }  # fmt: skip
    assert base64.b64decode(fields["body"]) == SECRET_BODY and fields["priority"] == 7
    summaries = {e["journal"]: e for e in entries if e["kind"] == "summary"}
    assert summaries["bindings"]["load"] == {"records": 8, "prepared": 0, "failed": 0}
    assert summaries["messages"]["load"]["prepared"] == 1
    assert summaries["messages"]["by_user_type"]["DUPLICATE_ID"] == 1
    records = [e for e in entries if e["kind"] == "record" and e["journal"] == "messages"]
    counted = sum(summaries["messages"]["by_user_type"].values())
    assert counted == sum(1 for e in records if e["user_type_name"] is not None)
    pages = [e for e in entries if e["kind"] == "page"]
    paged = [e for e in entries if e["kind"] == "paged_message"]
    assert len(pages) >= 2 and sum(p["messages"] for p in pages) == len(paged)
    assert {e["decoded"]["fields"]["properties"]["i"] for e in paged if
            e["decoded"]["fields"]["properties"]} >= {6, 7}  # fmt: skip
    large = [e for e in entries if e["kind"] == "large_message"]
    assert [(e["message_id"], e["size"], e["complete"]) for e in large] == [
        (w.large, LARGE_SIZE, True)
    ]

    one = _json(_print(case, "--json", "--max-pages", "1"))
    assert len([e for e in one if e["kind"] == "page"]) == 1
    address = next(e for e in one if e["kind"] == "paging_address")
    assert address["pages"] == [p["page"] for p in pages]


# -- a live holder ---------------------------------------------------------------------------


def test_a_store_a_live_process_holds_is_refused_and_force_reads_it(case2: Case) -> None:
    _fill(case2.config)
    with open_store(case2.config):
        refused = _print_process(case2)
        assert refused.returncode == 3, refused.stderr
        assert refused.stdout == ""
        assert "pid" in refused.stderr and "--force" in refused.stderr
        forced = _print_process(case2, "--force")
        assert forced.returncode == 0, forced.stderr
        assert 'QUEUE_BINDING_RECORD name="orders.eu"' in forced.stdout
    again = _print_process(case2, "--skip-bindings")  # the lock was given back
    assert again.returncode == 0, again.stderr
    assert "bindings journal" not in again.stdout and "messages journal" in again.stdout


def test_a_store_on_a_read_only_file_system(tmp_path: Path) -> None:
    """Node id, journals, pages and large messages are read with read-only opens."""
    source = tmp_path / "store"
    source.mkdir()
    w = _fill(_file_case(source).config)
    with _read_only_mount(source, tmp_path / "ro") as ro:
        done = _print(_file_case_args(ro))
    assert (done.returncode, done.stderr) == (0, "")
    assert f"node id: {w.node_id} ({ro / 'journal' / 'server.lock'})" in done.stdout
    assert "ADD_MESSAGE_PROTOCOL" in done.stdout and "PAGED_MESSAGE" in done.stdout
    assert f"large message {w.large}: {LARGE_SIZE} bytes, complete" in done.stdout


def _file_case_args(root: Path) -> Case:
    """A case naming the file store under ``root`` by folder options, no configuration file."""
    args = ["--journal", str(root / "journal"), "--bindings", str(root / "bindings")]
    args += ["--paging", str(root / "paging"), "--large-messages", str(root / "large")]
    return Case("file", StoreConfig(), args)


def test_a_store_live_in_an_ha_pair_is_refused(case2: Case) -> None:
    _fill(case2.config)
    nm = open_node_manager(case2.config)
    try:
        nm.start_primary(timeout=30)
        refused = _print(case2)
        assert refused.returncode == 3, refused.stderr
        assert "live in an HA pair" in refused.stderr and nm.holder in refused.stderr
        assert "--force" in refused.stderr
        assert _print(case2, "--force").returncode == 0
    finally:
        nm.close()


# -- damage and records a load would not return -------------------------------------------------


def test_a_body_that_does_not_decode_is_shown_raw_with_its_error(case2: Case) -> None:
    with open_store(case2.config) as s:
        s.bindings.load()
        s.messages.load()
        s.bindings.append_add(5, 21, b"\x01not a queue", sync=True)
        s.messages.append_add(6, 45, JUNK, sync=True)
        s.messages.append_add(7, 99, b"what", sync=True)
    done = _print(case2)
    assert done.returncode == 0, done.stderr
    assert "QUEUE_BINDING_RECORD: UNDECODABLE: QUEUE_BINDING_RECORD: body ends in name" in (
        done.stdout
    )
    assert "ADD_MESSAGE_PROTOCOL: UNDECODABLE: ADD_MESSAGE_PROTOCOL: body has version 9" in (
        done.stdout
    )
    assert f"body={JUNK.hex()}" in done.stdout
    assert "USER_TYPE_99: UNDECODABLE: no decoder" in done.stdout
    entries = _json(_print(case2, "--json"))
    bad = next(e for e in entries if e["kind"] == "record" and e["id"] == 6)
    assert bad["decoded"]["error"].startswith("ADD_MESSAGE_PROTOCOL: body has version 9")
    assert base64.b64decode(bad["body"]) == JUNK


def test_reclaimed_file_records_are_printed_only_when_asked(tmp_path: Path) -> None:
    case = _file_case(tmp_path)
    config = case.config.replace(journal_file_size=4096, journal_min_files=2)
    (tmp_path / "store.toml").write_text(
        (tmp_path / "store.toml").read_text().replace("65536", "4096")
    )
    with open_store(config) as s:
        s.bindings.load()
        s.messages.load()
        for i in range(60):
            s.messages.append_add(i, 45, b"gone-%d" % i * 8, sync=True)
        for i in range(60):
            s.messages.append_delete(i, sync=True)
        for i in range(100, 140):
            s.messages.append_add(i, 45, b"kept-%d" % i * 8, sync=True)
    plain = _print(case, "--skip-bindings")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.startswith(f"node id: none ({tmp_path / 'journal' / 'server.lock'})\n")
    assert "RECLAIMED" not in plain.stdout and b"gone-".hex() not in plain.stdout
    shown = _print(case, "--skip-bindings", "--reclaimed")
    assert shown.returncode == 0, shown.stderr
    reclaimed = [line for line in shown.stdout.splitlines() if "RECLAIMED" in line]
    assert reclaimed and all("left over from an earlier use of the file" in x for x in reclaimed)
    assert b"gone-".hex() in shown.stdout
    summary = next(x for x in shown.stdout.splitlines() if x.startswith("  reclaimed: "))
    assert summary.startswith(f"  reclaimed: {len(reclaimed)} readable records")
    # The live records and what a load returns are the same either way.
    assert (
        "a load returns 40 records" in plain.stdout and "a load returns 40 records" in shown.stdout
    )


def test_a_damaged_page_is_shown_with_its_error_and_exits_5(tmp_path: Path) -> None:
    case = _file_case(tmp_path)
    _fill(case.config)
    (folder,) = (tmp_path / "paging").iterdir()
    first = sorted(folder.glob("*.page"))[0]  # not the page being written: no torn tail
    data = bytearray(first.read_bytes())
    data[20] ^= 0xFF  # inside the first record's payload
    first.write_bytes(bytes(data))
    (tmp_path / "large" / "99.tmp").write_bytes(b"\0" * 100)  # a writer that died
    done = _print(case, "--skip-bindings", "--skip-journal")
    assert done.returncode == 5, done.stderr
    assert "large message 99: ? bytes, INCOMPLETE (the next open removes it)" in done.stdout
    page = int(first.stem)
    assert f"  page {page}: 0 messages, {len(data)} bytes; DAMAGED: damaged page record: " in (
        done.stdout
    )
    assert "checksum mismatch at offset 0" in done.stdout
    assert "large message " in done.stdout  # what follows the damage is still printed
    entries = _json(_print(case, "--json", "--skip-bindings", "--skip-journal"))
    damaged = next(e for e in entries if e["kind"] == "page" and e["page"] == page)
    assert damaged["error"] == "damaged page record: checksum mismatch at offset 0"


def test_reclaimed_shows_a_torn_tail_marked(tmp_path: Path) -> None:
    case = _file_case(tmp_path)
    with open_store(case.config) as s:
        s.bindings.load()
        s.messages.load()
        for i in range(10):
            s.messages.append_add(i, 45, b"synced", sync=True)
        for i in range(10, 14):
            s.messages.append_add(i, 45, b"batch")  # one write, at close
    scans = survey.scan_journal(str(tmp_path / "journal"), keep_records=True).scans
    last = [x for x in scans if x.count][-1]
    victim = next(r for r in last.records if r.id == 10)
    path = Path(last.file.path)
    data = bytearray(path.read_bytes())
    data[victim.offset + 60] ^= 0xFF
    path.write_bytes(bytes(data))
    plain = _print(case, "--skip-bindings")
    assert plain.returncode == 0, plain.stderr  # a load ignores a torn tail
    assert "torn tail: 3 valid record(s) after the end" in plain.stdout
    assert "RECLAIMED" not in plain.stdout and "  reclaimed: 3 readable records" in plain.stdout
    shown = _print(case, "--skip-bindings", "--reclaimed")
    reclaimed = [line for line in shown.stdout.splitlines() if "RECLAIMED" in line]
    assert [line.split(" id=")[1].split()[0] for line in reclaimed] == ["11", "12", "13"]
    assert all(line.endswith("(after the end of data (a torn tail))") for line in reclaimed)
    assert "a load returns 10 records" in shown.stdout


@pytest.mark.parametrize("which", ["postgresql", "sqlite"])
def test_rows_no_load_needs_and_rows_of_unknown_kinds_on_the_database(
    tmp_path: Path, which: str
) -> None:
    for case in _make_case(tmp_path, which):
        with open_store(case.config) as s:
            s.bindings.load()
            s.messages.load()
            s.messages.append_add(1, 45, b"\x09live", sync=True)
        engine = sa.create_engine(_sqlalchemy_url(case.config))
        table = sa.Table(case.config.database_store.message_table_name.lower(), sa.MetaData(),
                         autoload_with=engine)  # fmt: skip
        try:
            with engine.begin() as conn:  # a commit row of no transaction: no load needs it
                conn.execute(table.insert().values(id=-1, recordtype=18, txid=424242,
                                                   userrecordtype=-1, variablesize=0,
                                                   record=b"", seq=1000))  # fmt: skip
            plain = _print(case, "--skip-bindings")
            assert plain.returncode == 0, plain.stderr
            assert "seq=1000" not in plain.stdout
            assert "  reclaimed: 1 readable records a load would not return" in plain.stdout
            assert "summary: 1 records in the table (ADD 1)" in plain.stdout
            assert "more records not printed" not in plain.stdout
            shown = _print(case, "--skip-bindings", "--reclaimed")
            assert "RECLAIMED seq=1000     COMMIT    id=-1" in shown.stdout
            assert "a row no load needs" in shown.stdout
            lm = case.config.database_store.large_message_table_name.lower()
            lm_table = sa.Table(lm, sa.MetaData(), autoload_with=engine)
            with engine.begin() as conn:  # a chunk of a body whose writer died
                conn.execute(lm_table.insert().values(filename="99.000000000.chunk",
                                                      extension="chunk", data=b"x"))  # fmt: skip
            chunks = _print(case, "--skip-bindings", "--skip-journal")
            assert "large message 99: ? bytes, INCOMPLETE" in chunks.stdout
            with engine.begin() as conn:  # a row of a kind no journal writes
                conn.execute(table.insert().values(id=5, recordtype=99, txid=0,
                                                   userrecordtype=45, variablesize=0,
                                                   record=b"", seq=1001))  # fmt: skip
            damaged = _print(case, "--skip-bindings")
            assert damaged.returncode == 5, damaged.stderr
            assert "DAMAGED: row seq 1001 has record type 99, not one of 10..19" in damaged.stdout
            assert "a load refuses this journal" in damaged.stdout
        finally:
            engine.dispose()


def _sqlalchemy_url(config: StoreConfig) -> Any:
    from store.db.urls import resolve_target

    assert config.database_store is not None
    return resolve_target(config.database_store).url


# -- a place without a store ------------------------------------------------------------------


@pytest.mark.parametrize("which", ["postgresql", "sqlite"])
def test_a_database_without_a_store_is_an_error_and_nothing_is_created(
    tmp_path: Path, which: str
) -> None:
    case = _database_case(tmp_path, which)
    done = _print(case)
    assert done.returncode == 2 and done.stdout == ""
    assert "no store in " in done.stderr and done.stderr.count("\n") == 1
    if which == "sqlite":
        assert list(tmp_path.iterdir()) == []
    else:
        engine = sa.create_engine(_sqlalchemy_url(case.config))
        try:
            names = set(sa.inspect(engine).get_table_names())
        finally:
            engine.dispose()
        assert not any(n.startswith(case.config.database_store.bindings_table_name.lower()[:9])
                       for n in names)  # fmt: skip
