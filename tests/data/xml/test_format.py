"""The codec parts of the XML export format: property values and base64."""

from __future__ import annotations

import base64
import math

import pytest

from store.data.xml import format as f


@pytest.mark.parametrize(
    ("value", "text", "kind"),
    [
        pytest.param(None, "_AMQ_NULL", "bytes", id="null-as-bytes"),
        pytest.param(True, "true", "boolean", id="true"),
        pytest.param(False, "false", "boolean", id="false"),
        pytest.param(2**63 - 1, "9223372036854775807", "long", id="int-as-long"),
        pytest.param(-5, "-5", "long", id="negative-int"),
        pytest.param(1.5, "1.5", "double", id="float-as-double"),
        pytest.param(math.inf, "Infinity", "double", id="java-infinity"),
        pytest.param(-math.inf, "-Infinity", "double", id="java-minus-infinity"),
        pytest.param("a<b", "a<b", "string", id="str"),
        pytest.param(b"\xfb\xff\xfe", "-__-", "bytes", id="bytes-url-safe"),
    ],
)
def test_encode_property_writes_artemis_types(value: object, text: str, kind: str) -> None:
    assert f.encode_property(value) == (text, kind)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "kind", "text"),
    [
        pytest.param(-128, "byte", "-128", id="byte"),
        pytest.param(32767, "short", "32767", id="short"),
        pytest.param(-(2**31), "integer", "-2147483648", id="integer"),
        pytest.param(1.100000023841858, "float", "1.1", id="float-as-Float.toString"),
        pytest.param(1e20, "double", "1.0E20", id="double-as-Double.toString"),
        pytest.param(1e20, None, "1.0E20", id="implied-double-as-Double.toString"),
        pytest.param("s", "simple-string", "s", id="simple-string"),
        pytest.param(None, "string", "_AMQ_NULL", id="typed-null"),
        pytest.param(None, "integer", "_AMQ_NULL", id="typed-null-integer"),
    ],
)
def test_encode_property_writes_the_exact_java_type(
    value: object, kind: str | None, text: str
) -> None:
    assert f.encode_property(value, kind) == (text, kind or "double")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "kind", "message"),
    [
        pytest.param(128, "byte", "outside the range of a byte", id="byte-out-of-range"),
        pytest.param(0.1, "float", "not exactly a float", id="float-not-32-bit"),
        pytest.param("s", "integer", "cannot be a 'integer'", id="str-as-integer"),
        pytest.param(1, "char", "cannot be a 'char'", id="unknown-type"),
    ],
)
def test_encode_property_refuses_a_type_the_value_cannot_have(
    value: object, kind: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        f.encode_property(value, kind)  # type: ignore[arg-type]


def test_nan_is_written_as_java_spells_it_and_read_back() -> None:
    text, kind = f.encode_property(math.nan)
    assert (text, kind) == ("NaN", "double")
    assert math.isnan(f.decode_property(kind, text))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -(2**63),
        2**63 - 1,
        0.1,
        -0.0,
        1e300,
        5e-324,
        "",
        "x\ny",
        b"",
        b"\x00" * 7,
    ],
)
def test_every_value_round_trips_exactly(value: object) -> None:
    text, kind = f.encode_property(value)  # type: ignore[arg-type]
    back = f.decode_property(kind, text)
    assert back == value and type(back) is type(value)
    if isinstance(value, float):
        assert math.copysign(1, back) == math.copysign(1, value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        pytest.param("byte", "-128", -128, id="byte"),
        pytest.param("short", "32767", 32767, id="short"),
        pytest.param("integer", "-2147483648", -(2**31), id="integer"),
        pytest.param("float", "1.5", 1.5, id="float"),
        pytest.param("float", "1.1", 1.100000023841858, id="float-is-the-32-bit-value"),
        pytest.param("double", "1.0E20", 1e20, id="double-java-exponent"),
        pytest.param("float", "2.5f", 2.5, id="java-float-suffix"),
        pytest.param("simple-string", "s", "s", id="simple-string"),
        pytest.param("boolean", "TRUE", True, id="boolean-any-case"),
        pytest.param("bytes", "+//+", b"\xfb\xff\xfe", id="standard-alphabet"),
        pytest.param("string", "_AMQ_NULL", None, id="null-of-any-type"),
        pytest.param("long", "_AMQ_NULL", None, id="null-long"),
    ],
)
def test_decode_property_reads_every_artemis_type(kind: str, text: str, expected: object) -> None:
    assert f.decode_property(kind, text) == expected


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        pytest.param("byte", "128", id="byte-out-of-range"),
        pytest.param("short", "-32769", id="short-out-of-range"),
        pytest.param("integer", "2147483648", id="integer-out-of-range"),
        pytest.param("long", "9223372036854775808", id="long-out-of-range"),
        pytest.param("long", "1.5", id="long-not-integer"),
        pytest.param("boolean", "yes", id="boolean-not-true-false"),
        pytest.param("double", "one", id="double-not-number"),
        pytest.param("bytes", "a*b=", id="bytes-not-base64"),
        pytest.param("char", "c", id="unknown-type"),
        pytest.param("float", "1e39", id="float-out-of-range"),
    ],
)
def test_decode_property_refuses_bad_values(kind: str, text: str) -> None:
    with pytest.raises(ValueError):
        f.decode_property(kind, text)


def test_decoder_reads_padded_pieces_in_any_split() -> None:
    chunks = [bytes(range(i, i + 10)) for i in range(0, 50, 10)] + [b"xy"]
    text = "\n   ".join(base64.urlsafe_b64encode(c).decode() for c in chunks)
    for size in (1, 3, 4, 7, 1000):
        decoder = f.Base64Decoder()
        out = b"".join(decoder.feed(text[i : i + size]) for i in range(0, len(text), size))
        assert out + decoder.finish() == b"".join(chunks)
        assert decoder.decoded == sum(len(c) for c in chunks)


@pytest.mark.parametrize(
    "text",
    ["QQ=A", "Q===", "QQ==Q", "é"],
    ids=["pad-mid-quantum", "three-pads", "single-char-tail", "non-ascii"],
)
def test_decoder_refuses_broken_base64(text: str) -> None:
    with pytest.raises(ValueError):
        f.decode_b64(text)


def test_strict_base64_needs_whole_padded_quanta() -> None:
    assert f.is_strict_b64("aGVsbG8=")
    assert f.is_strict_b64("abcd")  # a text that is valid base64 is read as base64
    assert not f.is_strict_b64("aGVsbG8")
    assert not f.is_strict_b64("hello world")
