"""The JVM decoder (``store/reporting/jvm/*.java``) against the Python decode it replaces, in
a real Spark local session: every record of the table corpus (``jvm_corpus``) through
``TableRecordExpression`` equals :func:`store.reporting.decode.decode_body` column by column, with
an error on exactly the rows Python refuses (the sentinel carrying the record's bytes), and
every journal file written by the store through ``FileRecordsExpression`` equals
:func:`store.reporting.decode.file_records`."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from store.reporting import jvm
from store.reporting.decode import (
    ARROW_RECORDS,
    JVM_ERROR,
    decode_body,
    exact_error,
    file_records,
)
from tests.reporting.jvm_corpus import synthetic_files, table_rows

_DECODED = jvm.DECODED
_FILE_COLUMNS = tuple(f.name for f in ARROW_RECORDS)[1:]


@pytest.fixture
def jvm_spark(spark: Any) -> Any:
    """The reports' session, which decodes in the JVM (store.reporting.jvm built the jar from
    the sources and registered its functions); fails when it does not."""
    assert jvm.uses_jvm(spark), "the JVM decoder was not built or did not register"
    return spark


def _table_frame(spark: Any, rows: list[Any]) -> Any:
    from pyspark.sql.types import (
        BinaryType,
        LongType,
        ShortType,
        StringType,
        StructField,
        StructType,
    )

    schema = StructType(
        [
            StructField("journal", StringType()),
            StructField("recordtype", ShortType()),
            StructField("userrecordtype", ShortType()),
            StructField("id", LongType()),
            StructField("record", BinaryType()),
        ]
    )
    return spark.createDataFrame(rows, schema)


def jvm_table(spark: Any, rows: list[Any]) -> list[dict[str, Any]]:
    """The function's struct of each row, in row order, as dicts."""
    out = (
        _table_frame(spark, rows)
        .selectExpr(f"{jvm.TABLE_UDF}(journal, recordtype, userrecordtype, record) AS d")
        .collect()
    )
    return [row["d"].asDict() for row in out]


def _mismatches(rows: list[Any], got: list[dict[str, Any]]) -> list[str]:
    """What differs between the function's rows and decode_body's, one line per row."""
    bad = []
    for row, decoded in zip(rows, got, strict=True):
        journal, kind, urt, rid, record = row
        python = decode_body(journal, kind, urt, rid, record or b"")
        want = {c: python.get(c) for c in _DECODED}
        have = dict(decoded)
        if (want["error"] is None) != (have["error"] is None):
            bad.append(f"{row!r}: python {python!r}, jvm {have!r}")
            continue
        if have["error"] is not None:
            text = have["error"]
            if not text.startswith(JVM_ERROR) or base64.b64decode(text[len(JVM_ERROR) :]) != (
                record or b""
            ):
                bad.append(f"{row!r}: sentinel {text!r}")
            elif exact_error(journal, kind, urt, rid, text) != want["error"]:
                bad.append(f"{row!r}: exact_error differs from {want['error']!r}")
            want["error"] = have["error"] = "error"
        if want != have:
            bad.append(f"{row!r}: python {want!r}, jvm {have!r}")
    return bad


def test_table_udf_equals_decode_body_on_every_record_and_damage(jvm_spark: Any) -> None:
    rows = table_rows()
    got = jvm_table(jvm_spark, rows)
    assert len(got) == len(rows) > 10_000
    bad = _mismatches(rows, got)
    assert not bad, f"{len(bad)} rows differ, first: " + "\n".join(bad[:10])
    errors = sum(1 for d in got if d["error"] is not None)
    decoded = sum(1 for d in got if d["error"] is None and any(v is not None for v in d.values()))
    assert errors > 3000 and decoded > 1000  # both sides of every check were exercised


def _journal_files(config: Any) -> list[tuple[str, str, bytes]]:
    """(journal, path, content) of every journal file of a file store's ``config``."""
    out = []
    for journal, directory in (
        ("messages", config.journal_directory),
        ("bindings", config.bindings_directory),
    ):
        for path in sorted(Path(directory).iterdir()):
            if path.is_file():
                out.append((journal, str(path), path.read_bytes()))
    return out


def _stores(tmp_path: Path) -> list[tuple[str, str, bytes]]:
    """Journal files of three stores: fill() (sends, acks, a cancel, a committed, a
    rolled-back and an XA-prepared transaction, a deleted queue), fill_paging() (cursor acks,
    page completions, page transactions, large messages) and many plain appends (several
    files, so file-list markers)."""
    from store import StoreConfig, open_store
    from store.messaging import StorageManager
    from tests.reporting.support import fill, fill_paging, paging_store_config
    from tests.support.backends import file_config_mapping

    files = []
    config = StoreConfig.from_mapping(file_config_mapping(tmp_path / "a", "NIO"))
    sm = StorageManager(open_store(config))
    sm.load()
    fill(sm, messages=40)
    sm.close()
    files += _journal_files(config)
    config = paging_store_config(tmp_path / "b", "file-nio")
    sm = StorageManager(open_store(config))
    sm.load()
    fill_paging(sm)
    sm.close()
    files += _journal_files(config)
    config = StoreConfig.from_mapping(file_config_mapping(tmp_path / "c", "NIO"))
    with open_store(config) as s:
        s.bindings.load()
        s.messages.load()
        for i in range(1, 600):
            s.messages.append_add(i, 45, encode_plain(i))
            if i % 7 == 0:
                s.messages.append_update(i, 32, b"\x01" + bytes(8))
        s.messages.flush()
    files += _journal_files(config)
    return files


def encode_plain(i: int) -> bytes:
    """A message record of 200-odd bytes."""
    from store.messaging import Message
    from store.messaging.message_records import encode_message

    return encode_message(
        Message(address=f"q{i % 5}", body=b"m" * (i % 230), timestamp=i), b"m" * (i % 230)
    )


def _damaged_files(files: list[tuple[str, str, bytes]]) -> list[tuple[str, str, bytes]]:
    """Copies of the files with a torn tail (zeroed, cut), a flipped byte in a record, and
    headers of zeros."""
    out = []
    for journal, path, data in files:
        batch = file_records(journal, path, data)
        if batch is None or batch.num_rows < 3:
            continue
        pos = batch.column("pos").to_pylist()
        last, middle = pos[-1], pos[len(pos) // 2]
        out.append((journal, path + "#zeroed", data[: last + 10] + bytes(len(data) - last - 10)))
        out.append((journal, path + "#cut", data[: last + 30]))
        out.append((journal, path + "#cut-head", data[: last + 3]))
        flipped = bytearray(data)
        flipped[middle + 55] ^= 0x40
        out.append((journal, path + "#flipped", bytes(flipped)))
    out.append(("messages", "zeros", bytes(8192)))
    out.append(("messages", "short", b"SJNL"))
    out.append(("messages", "empty", b""))
    return out


def jvm_files(spark: Any, files: list[tuple[str, str, bytes]]) -> list[list[dict[str, Any]]]:
    """The function's rows of each file, in file order."""
    frame = spark.createDataFrame(files, "journal string, path string, content binary")
    got = frame.selectExpr(f"{jvm.FILE_UDF}(journal, path, content) AS r").collect()
    return [[row.asDict() for row in r["r"]] for r in got]


def python_files(files: list[tuple[str, str, bytes]]) -> list[list[dict[str, Any]]]:
    """file_records' rows of each file, without the journal column."""
    out = []
    for journal, path, data in files:
        batch = file_records(journal, path, data)
        rows = [] if batch is None else batch.to_pylist()
        out.append([{c: row[c] for c in _FILE_COLUMNS} for row in rows])
    return out


def _errors_named(rows: list[dict[str, Any]], data: bytes, *, from_jvm: bool) -> list[Any]:
    """``rows`` with each error replaced by "error" once checked: the JVM's is the sentinel of
    the record's body (read from ``data`` at its offset), Python's its own text."""
    out = []
    for row in rows:
        row = dict(row)
        if row["error"] is not None:
            start = row["pos"] + 52
            body = base64.b64encode(data[start : start + row["size"]]).decode()
            assert (
                row["error"] == JVM_ERROR + body if from_jvm else row["error"].startswith("record ")
            )
            row["error"] = "error"
        out.append(row)
    return out


def test_file_udf_equals_file_records_on_store_files_and_torn_ones(
    jvm_spark: Any, tmp_path: Path
) -> None:
    from store.file.format import decode_header
    from store.file.reader import Cursor, marker_of, scan

    assert [f.name for f in ARROW_RECORDS][1:] == list(_FILE_COLUMNS)
    files = _stores(tmp_path) + synthetic_files()
    files += _damaged_files(files)
    want = python_files(files)
    got = jvm_files(jvm_spark, files)
    for (_, path, data), w, g in zip(files, want, got, strict=True):
        assert _errors_named(g, data, from_jvm=True) == _errors_named(w, data, from_jvm=False), path
    rows = [row for rows in want for row in rows]
    assert len(rows) > 1000
    assert any(row["tx_count"] is not None and row["tx_seen"] == row["tx_count"] for row in rows)
    assert any(row["page_tx_id"] is not None for row in rows)
    assert any(row["page_index"] is not None for row in rows)
    assert any(row["error"] is None and row["address"] is not None for row in rows)
    markers = 0
    for _, path, data in files[: len(files)]:
        header = decode_header(data[:32], path)
        if header is not None:
            raws = scan(data, header.file_id, Cursor())
            markers += sum(1 for raw in raws if marker_of(data, raw) is not None)
    assert markers > 0  # the markers were left out on both sides


@pytest.mark.parametrize("damage", ["magic", "checksum", "version"])
def test_file_udf_names_the_file_of_a_damaged_header(jvm_spark: Any, damage: str) -> None:
    import struct
    import zlib

    from store.errors import CorruptionError
    from store.file.format import encode_header

    header = bytearray(encode_header(5, 0))
    if damage == "magic":
        header[0:4] = b"SJNX"
    elif damage == "checksum":
        header[28] ^= 1
    else:
        header[4:6] = struct.pack("<H", 2)
        header[28:32] = struct.pack("<I", zlib.crc32(bytes(header[:28])))
    path = f"/journal/damaged-{damage}.sjnl"
    data = bytes(header) + bytes(1024)
    with pytest.raises(CorruptionError):
        file_records("messages", path, data)
    with pytest.raises(Exception) as caught:
        jvm_files(jvm_spark, [("messages", path, data)])
    text = str(caught.value)
    assert path in text and {"magic": "not a journal file", "checksum": "checksum",
                             "version": "version 2"}[damage] in text  # fmt: skip


def test_the_reports_jvm_reads_give_the_python_decodes_rows(jvm_spark: Any, tmp_path: Path) -> None:
    """store.reporting.jvm's table_rows and file_rows (what a report reads through) give the
    RECORDS rows of decode.table_batch and decode.file_records."""
    import pyarrow as pa

    from store.reporting.decode import table_batch

    corpus = table_rows(fuzz=200)
    for journal in ("messages", "bindings"):
        rows = [
            (rid, kind, 7, urt, record, rid) for j, kind, urt, rid, record in corpus if j == journal
        ]
        table = (
            "id long, recordtype short, txid long, userrecordtype short, record binary, seq long"
        )
        frame = jvm_spark.createDataFrame(rows, table)
        got = [row.asDict() for row in jvm.table_rows(frame, journal).orderBy("seq").collect()]
        columns = list(zip(*rows, strict=True))
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(c, t)
                for c, t in zip(
                    columns,
                    (pa.int64(), pa.int16(), pa.int64(), pa.int16(), pa.binary(), pa.int64()),
                    strict=True,
                )
            ],
            names=["id", "recordtype", "txid", "userrecordtype", "record", "seq"],
        )
        want = table_batch(journal, batch).to_pylist()
        assert len(got) == len(want) > 500
        for g, w in zip(got, want, strict=True):
            if g["error"] is not None:
                g["error"] = exact_error(
                    journal, g["kind"], g["user_record_type"], g["id"], g["error"]
                )
            assert g == w
    files = _stores(tmp_path)  # three stores: their files share ids, so rows sort whole
    for journal in ("messages", "bindings"):
        paths = [path for j, path, _ in files if j == journal]
        frame = jvm_spark.read.format("binaryFile").load(paths)
        got = [row.asDict() for row in jvm.file_rows(frame, journal).collect()]
        for g in got:
            if g["error"] is not None:
                g["error"] = exact_error(
                    journal, g["kind"], g["user_record_type"], g["id"], g["error"]
                )
        want = []
        for j, path, data in files:
            batch = file_records(j, path, data) if j == journal else None
            want += [] if batch is None else batch.to_pylist()
        assert len(got) == len(want) > (100 if journal == "messages" else 10)
        assert sorted(got, key=repr) == sorted(want, key=repr)


def test_file_function_reads_the_file_itself_from_the_path_spark_names(
    jvm_spark: Any, tmp_path: Path
) -> None:
    """``store_decode_file(journal, path)`` reads the file in the JVM: from the ``file:`` path
    Spark's binaryFile source gives (not escaped: a folder name with a space and a '%'), and
    a plain local path; its rows are those of the bytes passed in."""
    import shutil

    folder = tmp_path / "a folder%20with space"
    folder.mkdir()
    # Journal files only: Spark's file sources make no rows of an empty file (journal.lock),
    # and how many data files a store holds varies with timing.
    files = [f for f in _stores(tmp_path) if f[0] == "messages" and f[1].endswith(".jrn")][:3]
    assert len(files) == 3
    copies = []
    for i, (journal, path, data) in enumerate(files):
        copy = folder / f"{i}-{Path(path).name}"
        shutil.copyfile(path, copy)
        copies.append((journal, str(copy), data))
    want = jvm_files(jvm_spark, copies)
    assert sum(len(rows) for rows in want) > 100
    listed = jvm_spark.read.format("binaryFile").load(str(folder)).select("path").collect()
    named = {Path(r["path"].removeprefix("file:")).name: r["path"] for r in listed}
    assert set(named) == {Path(path).name for _, path, _ in copies}, listed
    assert all(p.startswith("file:") and " " in p for p in named.values()), listed
    for form in ("spark", "local"):
        rows = [
            (journal, named[Path(path).name] if form == "spark" else path)
            for journal, path, _ in copies
        ]
        frame = jvm_spark.createDataFrame(rows, "journal string, path string")
        got = frame.selectExpr(f"{jvm.FILE_UDF}(journal, path) AS r").collect()
        assert [[row.asDict() for row in r["r"]] for r in got] == want, form


def test_file_function_names_a_file_it_cannot_read(jvm_spark: Any, tmp_path: Path) -> None:
    missing = str(tmp_path / "gone.sjnl")
    frame = jvm_spark.createDataFrame([("messages", missing)], "journal string, path string")
    with pytest.raises(Exception) as caught:
        frame.selectExpr(f"{jvm.FILE_UDF}(journal, path) AS r").collect()
    assert f"cannot read journal file {missing}" in str(caught.value)
    with pytest.raises(Exception) as wrong:
        frame.selectExpr(f"{jvm.FILE_UDF}(journal) AS r").collect()
    assert "takes [2, 3] arguments, not 1" in str(wrong.value)


def test_a_decoded_files_array_compares_as_its_decoded_rows(jvm_spark: Any, tmp_path: Path) -> None:
    """The array ``store_decode_file`` returns decodes its rows lazily, yet anything reading
    it whole (equals, hashCode, toString, copy) sees the decoded rows."""
    java = jvm_spark.sparkContext._jvm
    utf8 = java.org.apache.spark.unsafe.types.UTF8String.fromString
    _, path, data = next(f for f in _stores(tmp_path) if f[0] == "messages" and len(f[2]) > 64)
    rows = java.store.reporting.jvm.Decode.file(utf8("messages"), utf8(path), data)
    copy = rows.copy()
    assert rows.numElements() == copy.numElements() > 10
    assert rows.equals(copy) and copy.equals(rows)
    assert rows.hashCode() == copy.hashCode()
    assert rows.toString() == copy.toString()
    assert rows.toString().startswith("[[")  # rows, not the placeholder's nulls
