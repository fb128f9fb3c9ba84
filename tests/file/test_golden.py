"""The golden journal of format version 1 (tests/testdata/journal-v1, written by
tests/file/make_golden.py): the current code loads it to the expected result, its bytes decode
with the documented field values, and the generator still produces exactly those bytes."""

from __future__ import annotations

import json
import os
import shutil
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from store import StoreConfig, open_store
from store.file import format as fmt
from store.journal.api import LoadResult
from tests.file import make_golden

GOLDEN = Path(make_golden.GOLDEN_DIR)
EXPECTED: dict[str, Any] = json.loads((GOLDEN / "expected.json").read_text())

# The version-1 layout, written out here on purpose: if the code's layout changes, these stay.
V1_HEADER = struct.Struct("<4sHHQQI")
V1_HEAD = struct.Struct("<IBBBBQQQqqI")
V1_TAIL = struct.Struct("<II")
HEAD_FIELDS = (
    "length",
    "type",
    "user_type",
    "compact_count",
    "flags",
    "file_id",
    "lsn",
    "durable_lsn",
    "id",
    "tx_id",
    "tx_count",
)
TYPES = {
    "EVENT": 10,
    "ADD": 11,
    "UPDATE": 12,
    "ADD_TX": 13,
    "UPDATE_TX": 14,
    "DELETE_TX": 15,
    "DELETE": 16,
    "PREPARE": 17,
    "COMMIT": 18,
    "ROLLBACK": 19,
}


def _as_json(result: LoadResult) -> dict[str, Any]:
    def rec(r: Any) -> list[Any]:
        return [r.id, r.user_record_type, r.data.hex(), r.is_update]

    return {
        "records": [rec(r) for r in result.records],
        "prepared": [
            {
                "tx_id": p.tx_id,
                "xid": p.xid.hex(),
                "records": [rec(r) for r in p.records],
                "deleted_ids": list(p.deleted_ids),
            }
            for p in result.prepared
        ],
        "failed": list(result.failed),
    }


@pytest.fixture
def golden_copy(tmp_path: Path) -> Path:
    """A copy of the golden set (opening a journal writes into its directory)."""
    target = tmp_path / "journal-v1"
    shutil.copytree(GOLDEN, target)
    return target


def _config(root: Path) -> StoreConfig:
    return StoreConfig.from_mapping(
        {
            "journal-directory": str(root / "journal"),
            "bindings-directory": str(root / "bindings"),
            "journal-file-size": EXPECTED["file_size"],
            "journal-type": "NIO",
        }
    )


def test_current_code_loads_the_golden_journal_to_the_expected_result(golden_copy: Path) -> None:
    with open_store(_config(golden_copy)) as store:
        messages = store.messages.load()
        bindings = store.bindings.load()
    assert _as_json(messages) == EXPECTED["loads"]["messages"]
    assert _as_json(bindings) == EXPECTED["loads"]["bindings"]


def test_the_golden_journal_loads_the_same_after_a_restart(golden_copy: Path) -> None:
    """The first open writes (a rollback for the failed transaction); the second still agrees,
    and the failed transaction is not reported again."""
    with open_store(_config(golden_copy)) as store:
        store.messages.load()
        store.bindings.load()
    with open_store(_config(golden_copy)) as store:
        messages = _as_json(store.messages.load())
        bindings = _as_json(store.bindings.load())
    expected = dict(EXPECTED["loads"]["messages"], failed=[])
    assert messages == expected
    assert bindings == EXPECTED["loads"]["bindings"]


@pytest.mark.parametrize("rel", sorted(EXPECTED["files"]))
def test_golden_bytes_decode_with_the_documented_fields(rel: str) -> None:
    doc = EXPECTED["files"][rel]
    data = (GOLDEN / rel).read_bytes()
    assert len(data) == doc["size"]
    magic, version, kind, file_id, created_ns, reserved = V1_HEADER.unpack_from(data, 0)
    (crc,) = struct.unpack_from("<I", data, 28)
    header = doc["header"]
    assert (magic, version, kind, file_id, created_ns, reserved) == (
        header["magic"].encode(),
        header["version"],
        header["kind"],
        header["file_id"],
        header["created_ns"],
        0,
    )
    assert crc == zlib.crc32(data[:28])
    for expected in doc["records"]:
        off = expected["offset"]
        fields = dict(zip(HEAD_FIELDS, V1_HEAD.unpack_from(data, off), strict=True))
        body = data[off + 52 : off + fields["length"] - 8]
        checksum, length_copy = V1_TAIL.unpack_from(data, off + fields["length"] - 8)
        want = dict(expected, type=TYPES[expected["type"]])
        assert fields == {k: want[k] for k in HEAD_FIELDS}
        assert body.hex() == expected["body"]
        assert length_copy == fields["length"]
        assert checksum == zlib.crc32(data[off : off + 52], zlib.crc32(body))
        # ... and the current decoder agrees with the documented values.
        rec = fmt.decode_record(data, off, header["file_id"])
        assert rec is not None
        assert (rec.lsn, rec.id, rec.tx_id, rec.body.hex()) == (
            expected["lsn"],
            expected["id"],
            expected["tx_id"],
            expected["body"],
        )


def test_the_generator_still_writes_exactly_the_committed_bytes() -> None:
    files, doc = make_golden.build()
    committed = {str(p.relative_to(GOLDEN)): p.read_bytes() for p in GOLDEN.rglob("*.jrn")}
    assert sorted(files) == sorted(committed)
    for rel, data in files.items():
        assert data == committed[rel], f"{rel} differs: the format changed (see make_golden.py)"
    assert json.loads(json.dumps(doc)) == EXPECTED


def test_the_golden_set_is_written_where_the_test_reads_it(tmp_path: Path) -> None:
    make_golden.write(str(tmp_path))
    for rel in EXPECTED["files"]:
        assert (tmp_path / rel).read_bytes() == (GOLDEN / rel).read_bytes()
    assert json.loads((tmp_path / "expected.json").read_text()) == EXPECTED
    assert os.path.exists(tmp_path / "expected.json")
