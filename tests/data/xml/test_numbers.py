"""Java's spelling of floats and doubles (store.data.xml.numbers): the outputs Java's
``Float.toString`` / ``Double.toString`` give (JDK 19+), read back exactly, and the 32-bit
parse rounding once."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.data.xml.numbers import float32, is_float32, java_double, java_float, parse_float32


def f32(value: float) -> float:
    result: float = struct.unpack(">f", struct.pack(">f", value))[0]
    return result


@pytest.mark.parametrize(
    ("value", "java"),
    [
        (1.25, "1.25"),
        (0.1, "0.1"),
        (100.0, "100.0"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),  # 10^7 and up: scientific
        (123456789.0, "1.23456789E8"),
        (0.001, "0.001"),  # down to 10^-3: plain
        (1e-4, "1.0E-4"),
        (-1.5e-5, "-1.5E-5"),
        (1e23, "1.0E23"),
        (1e16, "1.0E16"),
        (-0.0, "-0.0"),
        (0.0, "0.0"),
        (5e-324, "4.9E-324"),  # Double.MIN_VALUE: one digit would do, two are closer
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (math.nan, "NaN"),
    ],
    ids=str,
)
def test_doubles_are_spelt_as_java_spells_them(value: float, java: str) -> None:
    assert java_double(value) == java
    if not math.isnan(value):
        assert float(java) == value


@pytest.mark.parametrize(
    ("value", "java"),
    [
        (f32(1.1), "1.1"),
        (f32(0.1), "0.1"),
        (f32(3.3), "3.3"),
        (1.5, "1.5"),
        (f32(1e10), "1.0E10"),
        (16777216.0, "1.6777216E7"),
        (3.4028234663852886e38, "3.4028235E38"),  # Float.MAX_VALUE
        (1.401298464324817e-45, "1.4E-45"),  # Float.MIN_VALUE
        (1.1754943508222875e-38, "1.1754944E-38"),  # Float.MIN_NORMAL (JDK 19+: shortest)
        (-0.0, "-0.0"),
    ],
    ids=str,
)
def test_floats_are_spelt_as_java_spells_them(value: float, java: str) -> None:
    assert java_float(value) == java
    assert parse_float32(java) == value


@given(st.floats())
def test_every_double_reads_back_exactly(value: float) -> None:
    text = java_double(value)
    back = float(text)
    assert back == value or (math.isnan(back) and math.isnan(value))
    assert math.copysign(1, back) == math.copysign(1, value) or math.isnan(value)
    assert "e" not in text and "+" not in text  # Java's E, no plus sign


@given(st.floats(width=32))
def test_every_float_reads_back_exactly_and_no_shorter_decimal_would(value: float) -> None:
    text = java_float(value)
    back = parse_float32(text)
    assert back == value or (math.isnan(back) and math.isnan(value))
    mantissa = text.split("E")[0].lstrip("-").replace(".", "").strip("0")
    if math.isfinite(value) and value != 0 and len(mantissa) > 2:
        shorter = f"{value:.{len(mantissa) - 2}e}"  # the closest decimal one digit shorter
        assert f32(float(shorter)) != value


def test_a_float_is_parsed_with_one_rounding() -> None:
    """1 + 2^-24 is the midpoint between the 32-bit floats 1 and 1 + 2^-23: a decimal just
    above it rounds up. Through a double it would land on the midpoint and round (to even)
    down."""
    text = "1.00000005960464477539062500000001"
    assert f32(float(text)) == 1.0  # the double rounding
    assert parse_float32(text) == 1.0000001192092896


def test_float32_refuses_what_overflows_and_knows_its_values() -> None:
    assert float32(0.1) == f32(0.1)
    with pytest.raises(ValueError, match="outside the range of a float"):
        float32(1e39)
    with pytest.raises(ValueError, match="outside the range of a float"):
        parse_float32("1e39")
    assert is_float32(1.5) and is_float32(math.nan) and is_float32(math.inf)
    assert not is_float32(0.1) and not is_float32(1e39)
    with pytest.raises(ValueError, match="not a float"):
        java_float(0.1)
