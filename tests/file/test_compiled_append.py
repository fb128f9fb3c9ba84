"""The compiled run of records without a body (``append_records_run`` in
``store/_speedups_journal.c``, what ``FileJournal.append_deletes_tx`` encodes a run of a
transaction's deletes with) against its Python reference: per id, the steps of
``FileJournal._append`` where the compiled encoder is not built (``_check_fields``, then
``RECORD_HEAD.pack``, ``zlib.crc32`` and ``RECORD_TAIL.pack`` of a record without a body). Both
must append the same bytes and refuse the same ids with the same error; the run's own rule
(every id checked before anything is appended) is checked too, and the records it writes read
back as written."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.file import format as fmt
from store.file import journal as file_journal
from store.file.reader import Cursor, python_scan
from store.journal.api import DELETE, DELETE_TX
from store.speedups import SPEEDUPS
from tests.file.test_reader import require_speedups
from tests.support.profile import examples

F = 65536  # the file id of the records under test
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
U64_MAX = 2**64 - 1


def python_run(
    buf: bytearray,
    rtype: int,
    flags: int,
    file_id: int,
    first_lsn: int,
    durable_lsn: int,
    ids: list[Any],
    start: int,
    stop: int,
    tx_id: Any,
) -> None:
    """The reference: ``FileJournal._append``'s Python path for each id of
    ``ids[start:stop]`` in turn (a record of type ``rtype``, user type 0, no body, lsns from
    ``first_lsn``), as ``Journal.append_deletes_tx`` appends them one ``append_delete_tx`` at
    a time where the compiled run is not built."""
    n = fmt.OVERHEAD
    for k, rid in enumerate(ids[start:stop]):
        file_journal._check_fields(rid, tx_id, 0)
        head = file_journal._pack_head(
            n, rtype, 0, 0, flags, file_id, first_lsn + k, durable_lsn, rid, tx_id, 0
        )
        buf += head  # (then the body, which these records have none of)
        buf += file_journal._pack_tail(file_journal._crc32(head, file_journal._crc32(b"")), n)


def both(
    before: bytes, *args: Any
) -> tuple[tuple[bytearray, BaseException | None], tuple[bytearray, BaseException | None]]:
    """(buffer, error or None) of the compiled run and of the reference, each from ``before``."""
    out = []
    for run in (SPEEDUPS.append_records_run, python_run):
        buf = bytearray(before)
        try:
            run(buf, *args)
        except Exception as exc:
            out.append((buf, exc))
        else:
            out.append((buf, None))
    return out[0], out[1]


# (rtype, flags, file_id, first_lsn, durable_lsn, ids, start, stop, tx_id)
RUNS = [
    pytest.param(DELETE_TX, fmt.FLAG_FLOOR, F, 1, 0, [7], 0, 1, 5, id="one id"),
    pytest.param(DELETE_TX, fmt.FLAG_FLOOR, F, 10, 9, [], 0, 0, 5, id="no ids"),
    pytest.param(DELETE_TX, fmt.FLAG_FLOOR, F, 10, 9, [1, 2, 3], 2, 2, 5, id="an empty run"),
    pytest.param(
        DELETE_TX, fmt.FLAG_FLOOR, F, 100, 42, list(range(1, 11)), 3, 8, 9, id="a run mid-list"
    ),
    pytest.param(
        DELETE_TX, 0, F, 1, 0, [I64_MIN, -1, 0, I64_MAX], 0, 4, 1, id="ids at the 64-bit edges"
    ),
    pytest.param(DELETE_TX, 0, F, 1, 0, [1, 2], 0, 2, I64_MIN, id="the lowest tx id"),
    pytest.param(DELETE_TX, 0, F, 1, 0, [1, 2], 0, 2, I64_MAX, id="the highest tx id"),
    pytest.param(
        DELETE_TX, 0, U64_MAX, U64_MAX - 2, U64_MAX, [1, 2, 3], 0, 3, 2, id="u64 fields at the top"
    ),
    pytest.param(DELETE, 0, F, 5, 4, [8, 8, 8], 0, 3, 0, id="another type, one id repeated"),
    pytest.param(DELETE_TX, 0, F, 1, 0, [True, False], 0, 2, 3, id="bools are ints"),
    pytest.param(DELETE_TX, 0, F, 1, 0, list(range(3000)), 0, 3000, 3, id="a long run"),
]


@pytest.mark.parametrize("before", [b"", b"already here"], ids=["empty buffer", "behind bytes"])
@pytest.mark.parametrize(
    ("rtype", "flags", "file_id", "first_lsn", "durable_lsn", "ids", "start", "stop", "tx_id"),
    RUNS,
)
def test_the_compiled_run_appends_the_bytes_of_the_python_path(
    before: bytes,
    rtype: int,
    flags: int,
    file_id: int,
    first_lsn: int,
    durable_lsn: int,
    ids: list[int],
    start: int,
    stop: int,
    tx_id: int,
) -> None:
    require_speedups()
    args = (rtype, flags, file_id, first_lsn, durable_lsn, ids, start, stop, tx_id)
    (got, got_error), (want, want_error) = both(before, *args)
    assert got_error is None and want_error is None
    assert got == want
    assert len(got) == len(before) + (stop - start) * fmt.OVERHEAD


# Ids and transaction ids both paths refuse, and the message they refuse them with.
REFUSED = [
    pytest.param([2**63], 5, "signed 64-bit integers: 9223372036854775808, 5", id="id past i64"),
    pytest.param(
        [1, 2, I64_MIN - 1, 4],
        5,
        "signed 64-bit integers: -9223372036854775809, 5",
        id="id below i64 mid-run",
    ),
    pytest.param([1, 2**70], 0, "signed 64-bit integers: 1180591620717411303424, 0", id="huge id"),
]


@pytest.mark.parametrize(("ids", "tx_id", "message"), REFUSED)
def test_an_id_past_64_bits_is_the_python_paths_error_and_nothing_is_appended(
    ids: list[int], tx_id: int, message: str
) -> None:
    """The same ValueError, message and all; the compiled run checks every id before it
    appends (the buffer is left as it was), where the Python path has appended the records
    before the refused id (``Journal.append_deletes_tx`` allows either)."""
    require_speedups()
    args = (DELETE_TX, fmt.FLAG_FLOOR, F, 1, 0, ids, 0, len(ids), tx_id)
    (got, got_error), (want, want_error) = both(b"kept", *args)
    assert type(got_error) is type(want_error) is ValueError
    assert str(got_error) == str(want_error)
    assert message in str(got_error)
    assert got == b"kept"
    good = ids[: next(i for i, rid in enumerate(ids) if not I64_MIN <= rid <= I64_MAX)]
    appended = bytearray(b"kept")
    python_run(appended, DELETE_TX, fmt.FLAG_FLOOR, F, 1, 0, good, 0, len(good), tx_id)
    assert want == appended


def test_a_transaction_id_past_64_bits_is_a_value_error_of_both() -> None:
    """Refused by both as ValueError naming it; the messages differ (the compiled run says
    "the transaction's is ...", the Python path names the first id with it)."""
    require_speedups()
    args = (DELETE_TX, 0, F, 1, 0, [1, 2], 0, 2, 2**63)
    (got, got_error), (want, want_error) = both(b"", *args)
    assert isinstance(got_error, ValueError) and isinstance(want_error, ValueError)
    assert str(2**63) in str(got_error) and str(2**63) in str(want_error)
    assert got == want == b""


@pytest.mark.parametrize("bad_id", ["7", None, [1]], ids=["a str id", "a None id", "a list id"])
def test_an_id_that_is_not_an_int_is_a_type_error_of_both(bad_id: object) -> None:
    require_speedups()
    args = (DELETE_TX, 0, F, 1, 0, [1, bad_id], 0, 2, 3)
    (got, got_error), (_want, want_error) = both(b"", *args)
    assert isinstance(got_error, TypeError) and isinstance(want_error, TypeError)
    assert got == b""


@pytest.mark.parametrize(
    ("args", "error"),
    [
        pytest.param((b"not a bytearray", DELETE_TX, 0, F, 1, 0, [1], 0, 1, 0), TypeError,
                     id="buf not a bytearray"),
        pytest.param((bytearray(), DELETE_TX, 0, F, 1, 0, (1,), 0, 1, 0), TypeError,
                     id="ids not a list"),
        pytest.param((bytearray(), 256, 0, F, 1, 0, [1], 0, 1, 0), OverflowError,
                     id="a type past a byte"),
        pytest.param((bytearray(), DELETE_TX, 0, F, 1, 0, [1], 0, 2, 0), IndexError,
                     id="stop past the ids"),
        pytest.param((bytearray(), DELETE_TX, 0, F, 1, 0, [1], 1, 0, 0), IndexError,
                     id="start after stop"),
        pytest.param((bytearray(), DELETE_TX, 0, F, 1, 0, [1]), TypeError, id="seven arguments"),
    ],
)  # fmt: skip
def test_the_compiled_run_refuses_what_its_caller_never_passes(
    args: tuple[Any, ...], error: type[Exception]
) -> None:
    """The run's own checks of what ``append_deletes_tx`` always passes right (the Python path
    has no such step: a slice clamps, a byte field is struct's): refused, nothing appended."""
    require_speedups()
    with pytest.raises(error):
        SPEEDUPS.append_records_run(*args)
    if isinstance(args[0], bytearray):
        assert args[0] == b""


_i64 = st.integers(I64_MIN, I64_MAX)


@settings(max_examples=examples(200), deadline=None)
@given(
    ids=st.lists(st.one_of(_i64, st.integers(0, 50)), max_size=60),
    data=st.data(),
    first_lsn=st.integers(1, 2**40),
    tx_id=_i64,
    flags=st.sampled_from([0, fmt.FLAG_FLOOR]),
)
def test_a_run_equals_the_python_path_and_reads_back_as_written(
    ids: list[int], data: st.DataObject, first_lsn: int, tx_id: int, flags: int
) -> None:
    """Any run of any ids: the compiled bytes equal the reference's, and a file of them
    scans (``python_scan``) to the same ids, in order, at consecutive lsns, of the one
    transaction, without a body."""
    require_speedups()
    start = data.draw(st.integers(0, len(ids)))
    stop = data.draw(st.integers(start, len(ids)))
    args = (DELETE_TX, flags, F, first_lsn, first_lsn - 1, ids, start, stop, tx_id)
    (got, got_error), (want, want_error) = both(b"", *args)
    assert got_error is None and want_error is None
    assert got == want
    page = fmt.encode_header(F, fmt.KIND_MESSAGES, created_ns=1) + bytes(got)
    page += bytes(-len(page) % fmt.PAD_UNIT + fmt.PAD_UNIT)
    cursor = Cursor()
    records = python_scan(page, F, cursor)
    assert [(r[2], r[6], r[7], r[5], r[9]) for r in records] == [
        (DELETE_TX, rid, tx_id, first_lsn + k, b"") for k, rid in enumerate(ids[start:stop])
    ]
    assert cursor.end == fmt.DATA_START + len(got)
