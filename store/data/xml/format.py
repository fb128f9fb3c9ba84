"""Artemis's XML export format (``artemis-import-export.xsd``, reference §6): the names, the
property types, and the base64 used for bodies and ``bytes`` properties.

The document::

    <activemq-journal>
      <bindings>
        <address-binding routing-types="ANYCAST,MULTICAST" name=".." id=".."/>
        <queue-binding address=".." filter-string=".." name=".." id=".." routing-type=".."/>
      </bindings>
      <messages>
        <message id priority expiration timestamp type [user-id]>
          <properties><property name=".." value=".." type=".."/>…</properties>
          <queues><queue name=".."/>…</queues>
          <body [isLarge="true"]><![CDATA[base64]]></body>
        </message>
      </messages>
    </activemq-journal>

Property values (:func:`encode_property` / :func:`decode_property`), as Artemis writes them
(``XmlDataExporterUtil``: the value's ``toString()``) and as we map them to the storage
manager's Python values. Each property keeps its Java type through import, store and export
(``Message.property_types``, :mod:`store.messaging.values`); a value without one has the type
its Python value implies:

====================================  ==========================  ==========================
``type``                              ``value`` (export)          Python value (import)
====================================  ==========================  ==========================
``boolean``                           ``true`` | ``false``        ``bool``
``byte``, ``short``, ``integer``,     decimal                     ``int`` (in the type's
``long`` (implied by an ``int``)                                  range)
``float``                             ``Float.toString``          ``float``: the 32-bit
                                                                  float Artemis holds
``double`` (implied by a ``float``)   ``Double.toString``         ``float``
``string`` (implied by a ``str``),    the text                    ``str``
``simple-string``
``bytes``                             URL-safe base64, padded     ``bytes`` (either
                                                                  alphabet)
any (``bytes`` implied by ``None``)   ``_AMQ_NULL``               ``None``
====================================  ==========================  ==========================

``Float.toString`` / ``Double.toString`` are Java's spelling (:mod:`store.data.xml.numbers`:
``1.0E20``, ``0.001``, ``NaN``, ``-Infinity``), so an export is what Artemis writes; on import
a ``float`` is rounded once to 32 bits, as ``Float.parseFloat`` does.

``_AMQ_NULL`` stands for null whatever the type, as in Artemis: a ``str`` property whose value
is the text ``_AMQ_NULL`` comes back as ``None`` (the format cannot tell them apart). A
message's ``scheduled_delivery`` travels as Artemis's ``_AMQ_SCHED_DELIVERY`` (``long``)
property and comes back as ``scheduled_delivery``, never as a property; the name is the
format's, so a message's own property of that name does not survive an export and import
(Artemis has the same rule).

Artemis 1.x wrote ``<binding address=".." filter-string=".." queue-name=".." id=".."/>``
in ``<bindings>`` instead of the address and queue bindings; its importer still reads it,
and so do we (:mod:`store.data.xml.document`).

Base64: Artemis writes the URL-safe alphabet with padding (``Base64.URL_SAFE``); we write the
same and read both alphabets. A body is a series of padded base64 pieces (one per CDATA
section), so padding may occur inside a body's text: :class:`Base64Decoder` decodes it quantum
by quantum, streaming.

Thread-safety: constants and pure functions; a :class:`Base64Decoder` belongs to one thread.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Final

from store.data.xml.numbers import java_double, java_float, parse_float32
from store.messaging.values import (
    DEFAULT_MESSAGE_TYPE,
    PROPERTY_TYPES,
    PropertyValue,
    check_property_types,
    implied_type,
)

__all__ = [
    "BODY_CHUNK",
    "NULL",
    "SCHEDULED_DELIVERY",
    "Base64Decoder",
    "decode_b64",
    "decode_property",
    "encode_b64",
    "encode_property",
    "format_double",
    "is_strict_b64",
]

ROOT: Final = "activemq-journal"
BINDINGS: Final = "bindings"
ADDRESS_BINDING: Final = "address-binding"
QUEUE_BINDING: Final = "queue-binding"
#: Artemis 1.x's binding element and its attributes (XmlDataConstants.OLD_*).
OLD_BINDING: Final = "binding"
OLD_ADDRESS: Final = "address"
OLD_QUEUE: Final = "queue-name"
OLD_FILTER: Final = "filter-string"
#: 1.x's JMS prefixes: an address or queue name with one loses it (Artemis's default,
#: without ``--legacy-prefixes``); the address prefix also gives the routing type.
OLD_QUEUE_PREFIX: Final = "jms.queue."
OLD_TOPIC_PREFIX: Final = "jms.topic."
#: The filter of 1.x's placeholder queue of a JMS topic: no queue is made for it.
IGNORED_FILTER: Final = "__AMQX=-1"
MESSAGES: Final = "messages"
MESSAGE: Final = "message"
PROPERTIES: Final = "properties"
PROPERTY: Final = "property"
QUEUES: Final = "queues"
QUEUE: Final = "queue"
BODY: Final = "body"
IS_LARGE: Final = "isLarge"

#: The value Artemis writes for a null property.
NULL: Final = "_AMQ_NULL"
#: Artemis's property for a message's scheduled delivery time (ms since the epoch).
SCHEDULED_DELIVERY: Final = "_AMQ_SCHED_DELIVERY"
#: Raw bytes per CDATA section of a large body (Artemis's LARGE_MESSAGE_CHUNK_SIZE).
BODY_CHUNK: Final = 1000
#: Message types Artemis writes (``Message.message_type``).
MESSAGE_TYPES: Final = ("default", "bytes", "map", "object", "stream", "text")
DEFAULT_TYPE: Final = DEFAULT_MESSAGE_TYPE
TEXT_TYPE: Final = "text"
#: The message attribute holding Artemis's user id.
USER_ID: Final = "user-id"

_INT_RANGES: Final = {
    "byte": (-(2**7), 2**7 - 1),
    "short": (-(2**15), 2**15 - 1),
    "integer": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
}
_STRINGS: Final = ("string", "simple-string")
assert set(PROPERTY_TYPES) == {"boolean", "float", "double", "bytes", *_INT_RANGES, *_STRINGS}

_TO_STANDARD: Final = bytes.maketrans(b"-_", b"+/")
_SPACE: Final = re.compile(r"[ \t\r\n]+")
_B64_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/")


def encode_b64(data: bytes | memoryview) -> str:
    """``data`` as URL-safe base64 with padding (Artemis's). Raises nothing."""
    return base64.urlsafe_b64encode(data).decode("ascii")


def decode_b64(text: str) -> bytes:
    """The bytes of base64 ``text`` in either alphabet; whitespace is ignored and missing
    padding at the end is tolerated. Returns them. Raises ValueError for anything else."""
    decoder = Base64Decoder()
    out = decoder.feed(text)
    return out + decoder.finish()


def is_strict_b64(text: str) -> bool:
    """True when ``text`` is complete, padded base64 of either alphabet (whitespace aside).
    Raises nothing."""
    compact = "".join(text.split())
    if len(compact) % 4:
        return False
    body = compact.rstrip("=")
    if len(compact) - len(body) > 2 or not set(body) <= _B64_CHARS:
        return False
    try:
        decode_b64(compact)
    except ValueError:
        return False
    return True


class Base64Decoder:
    """Decodes base64 fed in pieces of any size, holding at most three characters between
    calls. Padding ends a quantum, and may be followed by more base64 (a body is a series of
    separately padded pieces). Whitespace is ignored; either alphabet is accepted.

    ``feed`` returns the bytes decoded so far; ``finish`` the rest (tolerating a missing
    final padding); both raise ValueError for characters outside the alphabet or padding in
    the wrong place. Not thread-safe: one body, one thread.
    """

    __slots__ = ("_rest", "decoded")

    def __init__(self) -> None:
        self._rest = ""
        #: Bytes decoded so far.
        self.decoded = 0

    def feed(self, text: str) -> bytes:
        """Decode what ``text`` completes; returns those bytes. Raises ValueError."""
        if not text:
            return b""
        data = self._rest + (_SPACE.sub("", text) if _has_space(text) else text)
        whole = len(data) - len(data) % 4
        self._rest = data[whole:]
        out = _decode_quanta(data[:whole])
        self.decoded += len(out)
        return out

    @property
    def complete(self) -> bool:
        """True when what was fed so far is whole quanta (nothing waits for more). Raises
        nothing."""
        return not self._rest

    def finish(self) -> bytes:
        """The bytes of what was left (padding it if needed); returns them. Raises
        ValueError when a single character is left (no base64 ends so)."""
        rest, self._rest = self._rest, ""
        if not rest:
            return b""
        if len(rest) == 1:
            raise ValueError("base64 text ends in a single character")
        out = _decode_quanta(rest + "=" * (4 - len(rest)))
        self.decoded += len(out)
        return out


def _has_space(text: str) -> bool:
    # str.__contains__ is a memchr: far faster than a regex search on 64 KiB of base64
    return " " in text or "\n" in text or "\r" in text or "\t" in text


def _decode_quanta(data: str) -> bytes:
    """Decode whole quanta, some of which may end in padding (a padded piece followed by
    another piece)."""
    try:
        raw = data.encode("ascii").translate(_TO_STANDARD)
    except UnicodeEncodeError:
        raise ValueError("base64 text holds a character outside its alphabet") from None
    if b"=" not in raw:
        return _decode_piece(raw)
    parts = []
    start = 0
    while start < len(raw):
        pad = raw.find(b"=", start)
        if pad < 0:
            parts.append(_decode_piece(raw[start:]))
            break
        end = (pad // 4 + 1) * 4  # the quantum that holds the padding ends the piece
        parts.append(_decode_piece(raw[start:end]))
        start = end
    return b"".join(parts)


def _decode_piece(piece: bytes) -> bytes:
    try:
        return binascii.a2b_base64(piece, strict_mode=True)
    except binascii.Error as exc:
        raise ValueError(f"bad base64: {exc}") from None


def format_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it (which Java's ``Double.parseDouble``
    and Python's ``float`` both read back exactly). Raises nothing."""
    return java_double(value)


def encode_property(value: PropertyValue, kind: str | None = None) -> tuple[str, str]:
    """The ``(value, type)`` attributes of a property value whose Java type is ``kind``
    (None: the type the value implies); see the module docstring. Raises TypeError for a
    value of another type, ValueError for a ``kind`` the value cannot have."""
    try:
        implied = implied_type(value)
    except ValueError:
        raise TypeError(f"a property value cannot be {type(value).__name__}") from None
    kind = kind or implied
    if kind != implied:  # a type the value can have: in range, a float exactly 32-bit
        check_property_types({"value": value}, {"value": kind})
    if value is None:
        return NULL, kind
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        text = java_float(value) if kind == "float" else java_double(value)
    elif isinstance(value, str):
        text = value
    else:
        text = encode_b64(value)
    return text, kind


def _parse_boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"a boolean is true or false, not {text!r}")
    return lowered == "true"


def _clean_float(text: str) -> str:
    cleaned = text.strip()
    if cleaned[-1:] in ("f", "F", "d", "D"):  # Java's literal suffixes
        cleaned = cleaned[:-1]
    return cleaned


def _parse_float(text: str) -> float:
    return float(_clean_float(text))


def decode_property(kind: str, text: str) -> PropertyValue:
    """The Python value of a property of type ``kind`` written as ``text`` (see the module
    docstring). Returns it. Raises ValueError for an unknown type or a value the type does
    not allow (an integer out of its type's range, say)."""
    if kind not in PROPERTY_TYPES:
        raise ValueError(f"unknown property type {kind!r} (one of {', '.join(PROPERTY_TYPES)})")
    if text == NULL:
        return None
    parse: Callable[[str], PropertyValue]
    if kind == "boolean":
        parse = _parse_boolean
    elif kind in _INT_RANGES:
        low, high = _INT_RANGES[kind]
        value = int(text.strip())
        if not low <= value <= high:
            raise ValueError(f"{value} is outside the range of a {kind} ({low}..{high})")
        return value
    elif kind == "float":
        return parse_float32(_clean_float(text))
    elif kind == "double":
        parse = _parse_float
    elif kind in _STRINGS:
        return text
    else:
        parse = decode_b64
    return parse(text)
