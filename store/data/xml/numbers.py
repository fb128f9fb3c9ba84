"""Java's spelling of floating-point numbers, for the XML export format
(:mod:`store.data.xml.format`).

Artemis writes a property's value with ``toString()``: a ``double`` with ``Double.toString``
and a ``float`` (32-bit) with ``Float.toString``, and reads them back with
``Double.parseDouble`` / ``Float.parseFloat``. An export that is to be byte-for-byte what
Artemis writes, and an import that gives the value Artemis holds, need both spellings exactly:

- :func:`java_double` / :func:`java_float`: ``Double.toString`` / ``Float.toString`` as JDK 19+
  specifies them (the shortest decimal that rounds to the value; among decimals of that length
  the closest, ties to the even digit; when the shortest is one digit, the closest of one or
  two digits, so ``Double.MIN_VALUE`` is ``4.9E-324``). Plain notation (at least one digit after
  the point) from 10^-3 up to 10^7, else ``d.dddE±n``; ``NaN``, ``Infinity``, ``-Infinity``,
  ``-0.0``. Older JDKs print a longer decimal for a few doubles; any of them reads ours back
  exactly.
- :func:`float32`, :func:`is_float32`: a Python float as the 32-bit float Artemis would hold;
  :func:`parse_float32`: decimal text to the nearest 32-bit float with one rounding (as
  ``Float.parseFloat``; going through a double first would round twice and be off by one unit
  for a few inputs).

Normal doubles take ``repr`` (Python's shortest round-trip decimal, the closest among the
shortest: the same digits); 32-bit floats and subnormal doubles, where the length-two rule or
the 32-bit grid matters, take the exact search over fractions (:func:`_exact_digits`).

Thread-safety: pure functions.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Final

__all__ = ["float32", "is_float32", "java_double", "java_float", "parse_float32"]

_F32: Final = struct.Struct(">f")
_U32: Final = struct.Struct(">I")
_F64: Final = struct.Struct(">d")
_U64: Final = struct.Struct(">Q")
_MIN_NORMAL: Final = 2.2250738585072014e-308


def float32(value: float) -> float:
    """``value`` rounded to the nearest 32-bit float (ties to even), as a Python float.
    Raises ValueError when that is beyond the 32-bit range (Java would make it Infinity)."""
    try:
        result: float = _F32.unpack(_F32.pack(value))[0]
    except OverflowError:
        raise ValueError(f"{value!r} is outside the range of a float (32-bit)") from None
    return result


def is_float32(value: float) -> bool:
    """True when ``value`` is exactly a 32-bit float (NaN and the infinities are). Raises
    nothing."""
    if math.isnan(value):
        return True
    try:
        return float32(value) == value
    except ValueError:
        return False


def parse_float32(text: str) -> float:
    """The 32-bit float nearest the decimal ``text`` (one rounding, ties to even), as a Python
    float; ``NaN``, ``Infinity``, ``-Infinity`` as Java spells them. Raises ValueError for text
    that is not a number or a value beyond the 32-bit range."""
    double = float(text)
    near = float32(double)
    if near == double or not math.isfinite(double):
        return near  # the text is within half a double unit of it: it rounds there directly
    try:
        exact = Fraction(Decimal(text.strip()))
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a decimal number") from None
    candidates = (near, _step32(near, -1), _step32(near, 1))
    finite = [c for c in candidates if math.isfinite(c)]
    return min(finite, key=lambda c: (abs(Fraction(c) - exact), _U32.unpack(_F32.pack(c))[0] & 1))


def _step32(value: float, direction: int) -> float:
    """The 32-bit float next to ``value`` towards +inf (1) or -inf (-1)."""
    if value == 0:
        bits = 1  # the smallest subnormal, with value's sign handled below
        tiny: float = _F32.unpack(_U32.pack(bits))[0]
        return tiny if direction > 0 else -tiny
    bits = _U32.unpack(_F32.pack(value))[0]
    bits += direction if value > 0 else -direction
    result: float = _F32.unpack(_U32.pack(bits))[0]
    return result


def java_double(value: float) -> str:
    """``Double.toString(value)`` (see the module docstring). Raises nothing."""
    special = _special(value)
    if special is not None:
        return special
    magnitude = abs(value)
    if magnitude >= _MIN_NORMAL:
        digits, exponent = _repr_digits(magnitude)
    else:
        digits, exponent = _exact_digits(magnitude, single=False)
    return _layout(value < 0, digits, exponent)


def java_float(value: float) -> str:
    """``Float.toString`` of the 32-bit float ``value`` (see the module docstring). Raises
    ValueError when ``value`` is not exactly a 32-bit float."""
    if not is_float32(value):
        raise ValueError(f"{value!r} is not a float (32-bit)")
    special = _special(value)
    if special is not None:
        return special
    digits, exponent = _exact_digits(abs(value), single=True)
    return _layout(value < 0, digits, exponent)


def _special(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    return None


def _repr_digits(magnitude: float) -> tuple[str, int]:
    """The significant digits of ``repr`` and the decimal exponent of the first one."""
    _sign, digits, exp = Decimal(repr(magnitude)).as_tuple()
    text = "".join(map(str, digits))
    assert isinstance(exp, int)  # a finite value
    return text.rstrip("0") or "0", exp + len(text) - 1


def _neighbours(value: float, single: bool) -> tuple[Fraction, Fraction, bool]:
    """The rounding interval of positive ``value`` in its format: (low, high, ends included)."""
    pack, bits_of = (_F32, _U32) if single else (_F64, _U64)
    bits = bits_of.unpack(pack.pack(value))[0]
    below = Fraction(pack.unpack(bits_of.pack(bits - 1))[0]) if bits > 0 else Fraction(0)
    above_value = pack.unpack(bits_of.pack(bits + 1))[0]
    exact = Fraction(value)
    # past the largest finite value, the gap above is the one below
    above = exact + (exact - below) if math.isinf(above_value) else Fraction(above_value)
    return (below + exact) / 2, (exact + above) / 2, bits % 2 == 0


def _exact_digits(magnitude: float, *, single: bool) -> tuple[str, int]:
    """Java's decimal for positive finite ``magnitude`` by exact search: the digits and the
    decimal exponent of the first one."""
    low, high, closed = _neighbours(magnitude, single)
    exact = Fraction(magnitude)

    def inside(candidate: Fraction) -> bool:
        return low < candidate < high or (closed and candidate in (low, high))

    top = _floor_log10(exact)
    for length in range(1, 20):
        if length == 1 and not _grid(exact, top, 1, inside):
            continue
        # the shortest length found; a single digit competes with two-digit decimals
        grid = _grid(exact, top, max(length, 2), inside)
        if grid:
            unit_exp = top - max(length, 2) + 1
            unit = Fraction(10) ** unit_exp
            best = min(grid, key=lambda c: (abs(c * unit - exact), c % 2))
            text = str(best)
            exponent = unit_exp + len(text) - 1
            return text.rstrip("0") or "0", exponent
    raise AssertionError(f"no decimal found for {magnitude!r}")  # pragma: no cover


def _grid(exact: Fraction, top: int, length: int, inside: Callable[[Fraction], bool]) -> list[int]:
    """The integers c (floor and ceiling of ``exact`` on the grid of ``length`` significant
    digits) whose c x 10^e rounds to the value."""
    unit = Fraction(10) ** (top - length + 1)
    low = math.floor(exact / unit)
    found = []
    for c in (low, low + 1):
        if inside(c * unit):
            found.append(c)
    return found


def _floor_log10(value: Fraction) -> int:
    guess = len(str(value.numerator)) - len(str(value.denominator))
    while Fraction(10) ** guess > value:
        guess -= 1
    while Fraction(10) ** (guess + 1) <= value:
        guess += 1
    return guess


def _layout(negative: bool, digits: str, exponent: int) -> str:
    """Java's layout of d.ddd x 10^exponent: plain from 10^-3 to below 10^7, else computerized
    scientific notation; at least one digit after the point."""
    sign = "-" if negative else ""
    if -3 <= exponent < 7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            fraction = digits[exponent + 1 :] or "0"
        else:
            whole, fraction = "0", "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{fraction}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"
