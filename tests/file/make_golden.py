"""Writes the golden journal of format version 1 into ``tests/testdata/journal-v1/``.

REGENERATE ONLY ON PURPOSE. These bytes are the promise that a journal written by format
version 1 stays readable; ``tests/file/test_golden.py`` checks that the current code loads them
to ``expected.json`` and that this script still produces exactly the committed bytes. If a
change to ``store.file.format`` makes that last check fail, the change alters the format: bump
``FORMAT_VERSION``, keep the version-1 reader, and add a ``journal-v2`` golden set beside this
one instead of regenerating it. Run it with ``python -m tests.file.make_golden``.

The journal is built record by record with ``store.file.format``'s encoder (not through the
journal's writer, whose timing-dependent ``durable_lsn`` stamps and header times would change
the bytes on every run), laid out as the writer lays it out: a store's two journals with
fixed file ids, lsns and contents, covering adds, updates, deletes, a committed transaction,
a prepared transaction with an XID spanning two files, a rolled-back transaction, a transaction
that never completed, a retention event, zero padding to a ``PAD_UNIT`` boundary (as the
aligned ASYNCIO writer leaves it), stale records of an earlier use of a reused file after the
end of data, and a pre-allocated free file.

``expected.json`` holds, per journal, the load result written out by hand from the scenario
(not computed by the code under test), and per file the decoded header and every record with
its offset and field values.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from store.file import format as fmt
from store.journal.api import RecordType as T

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata", "journal-v1")
FILE_SIZE = 4096
CREATED_NS = 1_700_000_000_000_000_000  # header times: fixed, so the bytes are reproducible


@dataclass
class _File:
    name: str
    file_id: int
    kind: int
    data: bytearray
    pos: int = fmt.DATA_START
    records: list[dict[str, Any]] = field(default_factory=list)


class _Journal:
    """Places records in files the way the writer does; lsns run across the files."""

    def __init__(self, prefix: str, kind: int) -> None:
        self.prefix = prefix
        self.kind = kind
        self.files: list[_File] = []
        self.lsn = 0

    def new_file(self, file_id: int) -> None:
        data = bytearray(FILE_SIZE)
        created = CREATED_NS + len(self.files)
        data[: fmt.HEADER_SIZE] = fmt.encode_header(file_id, self.kind, created_ns=created)
        self.files.append(_File(f"{self.prefix}-{file_id:020d}.jrn", file_id, self.kind, data))

    def put(
        self,
        rtype: T,
        *,
        id: int = 0,
        tx_id: int = 0,
        user_type: int = 0,
        body: bytes = b"",
        tx_count: int = 0,
        durable: int | None = None,
    ) -> None:
        f = self.files[-1]
        self.lsn += 1
        durable_lsn = self.lsn - 1 if durable is None else durable
        raw = fmt.encode_record(
            int(rtype),
            file_id=f.file_id,
            lsn=self.lsn,
            durable_lsn=durable_lsn,
            id=id,
            tx_id=tx_id,
            user_type=user_type,
            tx_count=tx_count,
            body=body,
        )
        f.data[f.pos : f.pos + len(raw)] = raw
        f.records.append(
            {
                "offset": f.pos,
                "length": len(raw),
                "type": rtype.name,
                "user_type": user_type,
                "compact_count": 0,
                "flags": 0,
                "file_id": f.file_id,
                "lsn": self.lsn,
                "durable_lsn": durable_lsn,
                "id": id,
                "tx_id": tx_id,
                "tx_count": tx_count,
                "body": body.hex(),
            }
        )
        f.pos += len(raw)

    def pad(self) -> None:
        """Zero padding to the next PAD_UNIT boundary, as an aligned flush leaves it."""
        f = self.files[-1]
        f.pos = -(-f.pos // fmt.PAD_UNIT) * fmt.PAD_UNIT

    def stale(self, old_file_id: int, count: int) -> None:
        """Records of an earlier use of this (reused) file, after the end of data."""
        f = self.files[-1]
        pos = f.pos
        for i in range(count):
            raw = fmt.encode_record(
                int(T.ADD),
                file_id=old_file_id,
                lsn=900 + i,
                durable_lsn=899 + i,
                id=900 + i,
                user_type=45,
                body=b"an earlier use of this file",
            )
            f.data[pos : pos + len(raw)] = raw
            pos += len(raw)


def messages() -> _Journal:
    j = _Journal("data", fmt.KIND_MESSAGES)
    j.new_file(65536)
    j.put(T.ADD, id=1, user_type=45, body=b"message-1")
    j.put(T.ADD, id=2, user_type=45, body=b"message-2")
    j.put(T.UPDATE, id=1, user_type=46, body=b"message-1-v2")
    j.put(T.ADD, id=3, user_type=45, body=b"message-3", durable=2)
    j.put(T.ADD, id=4, user_type=45, body=b"message-4", durable=2)
    j.put(T.DELETE, id=2)
    j.put(T.ADD_TX, tx_id=100, id=10, user_type=45, body=b"tx-100-add-10")
    j.put(T.UPDATE_TX, tx_id=100, id=3, user_type=46, body=b"tx-100-update-3")
    j.put(T.DELETE_TX, tx_id=100, id=4)
    j.put(T.COMMIT, tx_id=100, tx_count=3)
    j.pad()
    j.put(T.ADD_TX, tx_id=200, id=20, user_type=45, body=b"tx-200-add-20")
    j.put(T.ADD_TX, tx_id=300, id=30, user_type=45, body=b"tx-300-add-30")
    j.put(T.EVENT, id=5000, user_type=49, body=b"retention event")
    j.new_file(131072)
    j.put(T.ADD_TX, tx_id=200, id=21, user_type=45, body=b"tx-200-add-21")
    j.put(T.DELETE_TX, tx_id=200, id=1)
    j.put(T.PREPARE, tx_id=200, tx_count=2, body=b"xid:golden-200")
    j.put(T.ROLLBACK, tx_id=300)
    j.put(T.ADD_TX, tx_id=400, id=40, user_type=45, body=b"tx-400-add-40")
    j.put(T.COMMIT, tx_id=400, tx_count=1)
    j.put(T.ADD, id=6, user_type=45, body=b"message-6")
    j.put(T.DELETE, id=3)
    j.put(T.ADD_TX, tx_id=500, id=50, user_type=45, body=b"tx-500-never-completed")
    j.stale(old_file_id=1234, count=3)
    j.new_file(196608)  # pre-allocated, never written: a free file
    return j


def bindings() -> _Journal:
    j = _Journal("bindings", fmt.KIND_BINDINGS)
    j.new_file(65536)
    j.put(T.ADD, id=1, user_type=21, body=b"queue:orders")
    j.put(T.ADD, id=2, user_type=21, body=b"queue:invoices")
    j.put(T.ADD, id=3, user_type=44, body=b"address:orders")
    j.put(T.UPDATE, id=1, user_type=21, body=b"queue:orders:v2")
    j.put(T.DELETE, id=2)
    j.put(T.ADD, id=100, user_type=22, body=b"id-counter:1000")
    return j


def _rec(id: int, user_type: int, data: bytes, is_update: bool) -> list[Any]:
    return [id, user_type, data.hex(), is_update]


# The load results, worked out by hand from the scenarios above.
EXPECTED_LOADS: dict[str, dict[str, Any]] = {
    "messages": {
        "records": [
            _rec(1, 45, b"message-1", False),
            _rec(1, 46, b"message-1-v2", True),
            _rec(10, 45, b"tx-100-add-10", False),
            _rec(40, 45, b"tx-400-add-40", False),
            _rec(6, 45, b"message-6", False),
        ],
        "prepared": [
            {
                "tx_id": 200,
                "xid": b"xid:golden-200".hex(),
                "records": [
                    _rec(20, 45, b"tx-200-add-20", False),
                    _rec(21, 45, b"tx-200-add-21", False),
                ],
                "deleted_ids": [1],
            }
        ],
        "failed": [500],
    },
    "bindings": {
        "records": [
            _rec(1, 21, b"queue:orders", False),
            _rec(3, 44, b"address:orders", False),
            _rec(1, 21, b"queue:orders:v2", True),
            _rec(100, 22, b"id-counter:1000", False),
        ],
        "prepared": [],
        "failed": [],
    },
}

SUBDIRS = {"messages": "journal", "bindings": "bindings"}


def build() -> tuple[dict[str, bytes], dict[str, Any]]:
    """The golden files (relative path -> bytes) and the expected.json document."""
    files: dict[str, bytes] = {}
    listing: dict[str, Any] = {}
    for name, journal in (("messages", messages()), ("bindings", bindings())):
        for f in journal.files:
            rel = f"{SUBDIRS[name]}/{f.name}"
            files[rel] = bytes(f.data)
            listing[rel] = {
                "header": {
                    "magic": "SJNL",
                    "version": 1,
                    "kind": f.kind,
                    "file_id": f.file_id,
                    "created_ns": CREATED_NS + journal.files.index(f),
                },
                "size": FILE_SIZE,
                "end_of_data": f.pos,
                "records": f.records,
            }
    doc = {"file_size": FILE_SIZE, "loads": EXPECTED_LOADS, "files": listing}
    return files, doc


def write(target: str = GOLDEN_DIR) -> None:
    """Write the golden set into ``target`` (replacing what is there)."""
    files, doc = build()
    for rel, data in files.items():
        path = os.path.join(target, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(data)
    with open(os.path.join(target, "expected.json"), "w") as out:
        json.dump(doc, out, indent=1, sort_keys=True)
        out.write("\n")


if __name__ == "__main__":
    if "--yes-i-mean-it" not in sys.argv:
        sys.exit(
            "This rewrites the committed golden files of format version 1. Read the module "
            "docstring first; then run again with --yes-i-mean-it."
        )
    write()
