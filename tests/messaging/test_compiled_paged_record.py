"""The compiled encode of a paged message (``paged_record`` in ``store/_speedups_pages.c``, what
``PagedMessage.encode`` packs every paged send with) against its Python reference,
``PagedMessage.write_packed``, called directly: the same bytes for every message whose fields
fit their slots; None, for the Python path to raise naming the field, wherever a field does
not fit or is not of the type expected; ``encode`` the same, errors and all, with the compiled
encode and without it; and records that decode back to the message."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.messaging import message_records as mr
from store.messaging.codec import VERSION
from store.messaging.message_records import PagedMessage
from store.speedups import SPEEDUPS
from tests.file.test_reader import require_speedups
from tests.support.profile import examples

I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def compiled(m: PagedMessage, version: int = VERSION) -> bytes | None:
    result: bytes | None = SPEEDUPS.paged_record(
        version, m.message_id, m.tx_id, m.record_type, m.record, m.queue_ids
    )
    return result


def outcome(call: Any) -> object:
    """What ``call()`` returns, or the type and message of what it raises."""
    try:
        return call()
    except Exception as exc:
        return type(exc), str(exc)


def encoded(m: PagedMessage, *, with_compiled: bool) -> object:
    """``m.encode()``'s outcome with the compiled encode, or with the Python path alone."""
    with pytest.MonkeyPatch.context() as mp:
        if not with_compiled:
            mp.setattr(mr, "COMPILED_PAGED_RECORD", None)
        return outcome(m.encode)


P = PagedMessage
PACKED = [
    pytest.param(P(1, 0, 45, b"body", ()), id="a message record, no queue"),
    pytest.param(P(2, 0, 30, b"large header", (7,)), id="a large-message record, one queue"),
    pytest.param(P(3, 99, 45, b"in a tx", (1, 2, 3)), id="a transaction, three queues"),
    pytest.param(P(I64_MIN, I64_MAX, 45, b"x", (I64_MIN, -1, 0, I64_MAX)),
                 id="ids at the 64-bit edges"),
    pytest.param(P(4, 0, 45, b"", ()), id="an empty record"),
    pytest.param(P(5, 0, 45, bytes(range(256)) * 300, tuple(range(100))),
                 id="a 76,800-byte record, 100 queues"),
    pytest.param(P(True, False, 45, b"b", (True,)), id="bools as ints"),
]  # fmt: skip


@pytest.mark.parametrize("m", PACKED)
def test_the_compiled_encode_packs_what_write_packed_packs(m: PagedMessage) -> None:
    require_speedups()
    got = compiled(m)
    assert type(got) is bytes
    assert got == m.write_packed() == m.write_fields()
    assert encoded(m, with_compiled=True) == encoded(m, with_compiled=False) == got
    assert PagedMessage.decode(got) == m


def test_a_record_type_is_packed_as_given_the_caller_checks_it() -> None:
    """``encode`` refuses a type other than 45 or 30 before either path; the packing itself
    takes any byte, in both."""
    require_speedups()
    m = P(1, 0, 7, b"r", (2,))
    assert compiled(m) == m.write_packed()
    refused = encoded(m, with_compiled=True)
    assert refused == encoded(m, with_compiled=False)
    assert refused == (ValueError, "a paged message wraps a 45 or 30 record, not 7")


# Fields the compiled encode leaves to the Python path (None), which refuses them, naming the
# field (or, for a record that is not bytes-like, as bytes.join does).
REFUSED = [
    pytest.param(P(2**63, 0, 45, b"r", ()), ValueError, id="message id past i64"),
    pytest.param(P(I64_MIN - 1, 0, 45, b"r", ()), ValueError, id="message id below i64"),
    pytest.param(P(1, 2**64, 45, b"r", ()), ValueError, id="tx id past i64"),
    pytest.param(P(1, 0, 45, b"r", (1, 2**63)), ValueError, id="a queue id past i64"),
    pytest.param(P(1, 0, 45, b"r", (1, "2")), ValueError, id="a queue id that is a str"),  # type: ignore[arg-type]
    pytest.param(P(1, 0, 45, b"r", (None,)), ValueError, id="a queue id that is None"),  # type: ignore[arg-type]
    pytest.param(P(1.0, 0, 45, b"r", ()), ValueError, id="a float message id"),  # type: ignore[arg-type]
    pytest.param(P(1, 0, 45, "text", ()), TypeError, id="a str record"),  # type: ignore[arg-type]
]  # fmt: skip


@pytest.mark.parametrize(("m", "error"), REFUSED)
def test_what_does_not_fit_is_left_to_the_python_path_which_refuses_it(
    m: PagedMessage, error: type[Exception]
) -> None:
    require_speedups()
    assert compiled(m) is None
    with pytest.raises(error):
        m.write_packed()
    refused = encoded(m, with_compiled=True)
    assert refused == encoded(m, with_compiled=False)
    assert isinstance(refused, tuple) and refused[0] is error


@pytest.mark.parametrize(
    "m",
    [
        pytest.param(P(1, 0, 45, bytearray(b"r"), (2,)), id="a bytearray record"),  # type: ignore[arg-type]
        pytest.param(P(1, 0, 45, memoryview(b"r"), (2,)), id="a memoryview record"),  # type: ignore[arg-type]
        pytest.param(P(1, 0, 45, b"r", [2, 3]), id="queue ids in a list"),  # type: ignore[arg-type]
    ],
)  # fmt: skip
def test_what_only_the_python_path_packs_is_left_to_it(m: PagedMessage) -> None:
    """Not the exact types the compiled encode takes (bytes, a tuple): None, and ``encode``
    gives the Python path's bytes with the compiled encode as without it."""
    require_speedups()
    assert compiled(m) is None
    packed = m.write_packed()
    assert encoded(m, with_compiled=True) == encoded(m, with_compiled=False) == packed


@pytest.mark.parametrize("version", [256, -1, 2**70], ids=["256", "-1", "past 64 bits"])
def test_a_version_past_a_byte_is_left_to_the_python_path(version: int) -> None:
    require_speedups()
    assert compiled(P(1, 0, 45, b"r", ()), version) is None


def test_the_wrong_number_of_arguments_is_a_type_error() -> None:
    require_speedups()
    with pytest.raises(TypeError, match="paged_record takes 6 arguments"):
        SPEEDUPS.paged_record(VERSION, 1, 0, 45, b"r")


_i64 = st.integers(I64_MIN, I64_MAX)
_any_int = st.one_of(_i64, _i64, st.integers(-(2**65), 2**65))


@settings(max_examples=examples(500), deadline=None)
@given(
    mid=_any_int,
    tx=_any_int,
    kind=st.sampled_from([45, 30]),
    record=st.binary(max_size=300),
    qids=st.lists(_any_int, max_size=6).map(tuple),
)
def test_any_message_encodes_as_the_python_path_encodes_it(
    mid: int, tx: int, kind: int, record: bytes, qids: tuple[int, ...]
) -> None:
    """Fields in and out of 64 bits: the compiled encode gives the Python path's bytes, or
    None exactly where a field does not fit (the Python path then raises); ``encode`` is the
    same either way, and what it packs decodes back."""
    require_speedups()
    m = P(mid, tx, kind, record, qids)
    fits = all(I64_MIN <= v <= I64_MAX for v in (mid, tx, *qids))
    got, want = compiled(m), outcome(m.write_packed)
    if fits:
        assert got is not None and got == want
        assert PagedMessage.decode(got) == m
    else:
        assert got is None and isinstance(want, tuple) and want[0] is ValueError
    assert encoded(m, with_compiled=True) == encoded(m, with_compiled=False) == want
