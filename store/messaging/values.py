"""The values the storage manager takes and hands back (docs/messaging.md): :class:`Message`,
:class:`Delivery`, :class:`Xid`, :class:`AddressInfo`, :class:`QueueInfo`.

Times (``timestamp``, ``expiration``, ``scheduled_delivery``) are milliseconds since the epoch,
UTC; ``expiration`` 0 means never, ``scheduled_delivery`` 0 means at once. Priorities are 0..9
(4 by default, as JMS and Artemis). Property values are ``None | bool | int | float | str |
bytes``; ints must fit a signed 64-bit slot (they are stored as one).

Artemis's own headers, kept so that a message imported from Artemis's XML export goes back out
exactly (:mod:`store.data.xml.export`); a message made here needs none of them:

- ``message_type``: Artemis's message type (:data:`MESSAGE_TYPES`: ``default``, ``object``,
  ``text``, ``bytes``, ``map``, ``stream``), a label: the body is not interpreted.
- ``user_id``: Artemis's user id (a UUID's text in Artemis), an opaque string, or None.
- ``property_types``: a property's Java type where it is not the one its Python value
  implies (:data:`PROPERTY_TYPES`; an int is a ``long``, a float a ``double``, a str a
  ``string``, None ``bytes``): ``byte``, ``short``, ``integer`` (the int must fit), ``float``
  (the float must be exactly a 32-bit float), ``simple-string``, or any type for None (a typed
  null). :func:`check_property_types` checks them and drops the implied ones.

Thread-safety: :class:`Xid`, :class:`AddressInfo`, :class:`QueueInfo` and :class:`Delivery` are
immutable. A :class:`Message` is a plain value whose ``message_id`` is set by ``send``; do not
change a message while a ``send`` of it runs on another thread.
"""

from __future__ import annotations

import io
import math
import struct
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import BinaryIO, Final, TypeAlias

__all__ = [
    "ANYCAST",
    "DEFAULT_MESSAGE_TYPE",
    "MESSAGE_TYPES",
    "MULTICAST",
    "PROPERTY_TYPES",
    "ROUTING_TYPES",
    "AddressInfo",
    "Delivery",
    "Message",
    "PropertyValue",
    "QueueInfo",
    "Xid",
    "check_properties",
    "check_property_types",
    "implied_type",
    "dup_bytes",
]

ANYCAST: Final = "ANYCAST"
MULTICAST: Final = "MULTICAST"
#: The routing types an address or queue may have (Artemis's).
ROUTING_TYPES: Final = (ANYCAST, MULTICAST)

PropertyValue: TypeAlias = bool | int | float | str | bytes | None

#: Artemis's message types, each with the byte Artemis (and our message record) stores.
MESSAGE_TYPES: Final = {"default": 0, "object": 2, "text": 3, "bytes": 4, "map": 5, "stream": 6}
DEFAULT_MESSAGE_TYPE: Final = "default"
#: Artemis's property types (XmlDataConstants.PROPERTY_TYPE_*), in a fixed order.
PROPERTY_TYPES: Final = (
    "boolean",
    "byte",
    "short",
    "integer",
    "long",
    "float",
    "double",
    "string",
    "simple-string",
    "bytes",
)
#: The Java types a Python value may have, the implied one first.
_TYPES_OF: Final[dict[type, tuple[str, ...]]] = {
    bool: ("boolean",),
    int: ("long", "byte", "short", "integer"),
    float: ("double", "float"),
    str: ("string", "simple-string"),
    bytes: ("bytes",),
    type(None): ("bytes", *PROPERTY_TYPES),
}
_INT_RANGES: Final = {"byte": 8, "short": 16, "integer": 32, "long": 64}
_F32 = struct.Struct(">f")

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_XID_PART_MAX = 64  # XA: global transaction id and branch qualifier are at most 64 bytes


def check_properties(properties: Mapping[str, object]) -> dict[str, PropertyValue]:
    """Returns a copy of ``properties`` after checking every key and value.

    Raises ValueError for a key that is not a non-empty str, a value of another type, or an
    int outside the signed 64-bit range.
    """
    checked: dict[str, PropertyValue] = {}
    for key, value in properties.items():
        if type(value) is str and type(key) is str and key:  # most are (STOMP headers)
            checked[key] = value
            continue
        if not isinstance(key, str) or not key:
            raise ValueError(f"property names are non-empty strings, not {key!r}")
        if isinstance(value, int) and not isinstance(value, bool):
            if not _I64_MIN <= value <= _I64_MAX:
                raise ValueError(f"property {key!r}: int {value} is outside signed 64 bits")
        elif value is not None and not isinstance(value, bool | float | str | bytes):
            raise ValueError(
                f"property {key!r}: {type(value).__name__} is not one of"
                " None, bool, int, float, str, bytes"
            )
        checked[key] = value  # type: ignore[assignment]
    return checked


def implied_type(value: PropertyValue) -> str:
    """The Java type a property value has when nothing says otherwise (see the module
    docstring). Raises ValueError for a value of another type."""
    types = _TYPES_OF.get(type(value))
    if types is None:
        raise ValueError(f"{type(value).__name__} is not a property value")
    return types[0]


def check_property_types(
    properties: Mapping[str, PropertyValue], types: Mapping[str, str]
) -> dict[str, str]:
    """Returns ``types`` without the entries a value implies anyway, after checking that each
    names a property of ``properties`` and a Java type its value can have (see the module
    docstring). Raises ValueError otherwise."""
    kept: dict[str, str] = {}
    for name, kind in types.items():
        if name not in properties:
            raise ValueError(f"property_types names {name!r}, which is not a property")
        value = properties[name]
        allowed = _TYPES_OF.get(type(value), ())
        if kind not in allowed:
            raise ValueError(f"property {name!r}: a {type(value).__name__} cannot be a {kind!r}")
        if kind == allowed[0]:
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            bits = _INT_RANGES[kind]
            if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
                raise ValueError(f"property {name!r}: {value} is outside the range of a {kind}")
        elif isinstance(value, float) and not _is_float32(value):
            raise ValueError(f"property {name!r}: {value!r} is not exactly a float (32-bit)")
        kept[name] = kind
    return kept


def _is_float32(value: float) -> bool:
    if math.isnan(value):
        return True
    try:
        return bool(_F32.unpack(_F32.pack(value))[0] == value)
    except OverflowError:
        return False


def dup_bytes(dup_id: bytes | str | None) -> bytes | None:
    """A duplicate id as bytes (a str is UTF-8 encoded); None stays None. Raises ValueError
    for another type."""
    if dup_id is None or isinstance(dup_id, bytes):
        return dup_id
    if isinstance(dup_id, str):
        return dup_id.encode("utf-8")
    raise ValueError(f"dup_id is bytes or str, not {dup_id!r}")


@dataclass(eq=False)
class Message:
    """A message: an address, a body and its headers; ``message_id`` is set by ``send``.

    ``body`` is bytes, or a binary stream (an object with ``read``) that ``send`` reads once;
    a body over ``min-large-message-size`` is streamed to the large-message store. A received
    message's body is read with :meth:`open_body` (for a large one, ``body`` is ``b""`` and
    :attr:`is_large` is true); ``body`` holds it otherwise.
    Construction raises ValueError for an empty address, a priority outside 0..9, a negative
    time, or a property ``check_properties`` refuses.
    """

    address: str
    body: bytes | BinaryIO
    _: KW_ONLY
    durable: bool = True
    priority: int = 4
    expiration: int = 0
    timestamp: int = 0
    scheduled_delivery: int = 0
    properties: dict[str, PropertyValue] = field(default_factory=dict)
    message_type: str = DEFAULT_MESSAGE_TYPE
    user_id: str | None = None
    property_types: dict[str, str] = field(default_factory=dict)
    message_id: int | None = None
    #: Opens a stored body (large messages); None when ``body`` holds it.
    _opener: Callable[[], BinaryIO] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # A send checks every message twice (when made and when stored): the common cases
        # (a bytes body, three plain int times) are tested by exact type first.
        address = self.address
        if not isinstance(address, str) or not address:
            raise ValueError(f"a message needs a non-empty address, not {address!r}")
        body = self.body
        if type(body) is bytes:
            pass
        elif isinstance(body, bytearray | memoryview):
            self.body = bytes(body)
        elif not isinstance(body, bytes) and not hasattr(body, "read"):
            raise ValueError(f"a message body is bytes or a binary stream, not {body!r}")
        if isinstance(self.priority, bool) or not 0 <= self.priority <= 9:
            raise ValueError(f"priority is 0..9, not {self.priority!r}")
        # The three times at once; one by one only to name the bad one.
        e, t, d = self.expiration, self.timestamp, self.scheduled_delivery
        if not (
            type(e) is int
            and type(t) is int
            and type(d) is int
            and 0 <= e <= _I64_MAX
            and 0 <= t <= _I64_MAX
            and 0 <= d <= _I64_MAX
        ):
            for name in ("expiration", "timestamp", "scheduled_delivery"):
                value = getattr(self, name)
                if (
                    isinstance(value, bool)
                    or not isinstance(value, int)
                    or not 0 <= value <= _I64_MAX
                ):
                    raise ValueError(
                        f"{name} is milliseconds since the epoch (>= 0), not {value!r}"
                    )
        props = self.properties
        self.properties = {} if type(props) is dict and not props else check_properties(props)
        # Artemis's headers: absent on every message made here, so one test for all three.
        if self.property_types or self.user_id is not None or self.message_type != "default":
            self._check_artemis_headers()

    def _check_artemis_headers(self) -> None:
        if self.message_type not in MESSAGE_TYPES:
            raise ValueError(
                f"message_type is one of {', '.join(MESSAGE_TYPES)}, not {self.message_type!r}"
            )
        if self.user_id is not None and not isinstance(self.user_id, str):
            raise ValueError(f"user_id is a str or None, not {self.user_id!r}")
        self.property_types = check_property_types(self.properties, self.property_types)

    @property
    def is_large(self) -> bool:
        """True for a received message whose body is in the large-message store."""
        return self._opener is not None

    def open_body(self) -> BinaryIO:
        """Returns the body as a readable binary stream (close it when done).

        Raises whatever the large-message store raises for a stored body (UnknownRecordError,
        CorruptionError), ValueError for a stream body that ``send`` has not read yet.
        """
        if self._opener is not None:
            return self._opener()
        if isinstance(self.body, bytes):
            return io.BytesIO(self.body)
        raise ValueError("this message's body is a stream that has not been stored")

    def same_as(self, other: Message) -> bool:
        """True when both messages have equal headers, properties and inline bodies. Raises
        nothing."""
        return (
            self.address == other.address
            and self.body == other.body
            and self.durable == other.durable
            and self.priority == other.priority
            and self.expiration == other.expiration
            and self.timestamp == other.timestamp
            and self.scheduled_delivery == other.scheduled_delivery
            and self.properties == other.properties
            and self.message_type == other.message_type
            and self.user_id == other.user_id
            and self.property_types == other.property_types
        )


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message handed out by ``receive``: ``delivery_count`` is 0 the first time and
    counts the cancels (and rolled-back acks) before this delivery."""

    message: Message
    queue: str
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Xid:
    """An XA transaction branch id; hashable, compared field by field.

    Raises ValueError for a ``format_id`` outside signed 32 bits or a part longer than 64
    bytes (the XA limits).
    """

    format_id: int
    global_transaction_id: bytes
    branch_qualifier: bytes

    def __post_init__(self) -> None:
        if isinstance(self.format_id, bool) or not -(2**31) <= self.format_id < 2**31:
            raise ValueError(f"Xid format_id is a signed 32-bit int, not {self.format_id!r}")
        for name in ("global_transaction_id", "branch_qualifier"):
            value = getattr(self, name)
            if not isinstance(value, bytes) or len(value) > _XID_PART_MAX:
                raise ValueError(f"Xid {name} is at most {_XID_PART_MAX} bytes, not {value!r}")


@dataclass(frozen=True, slots=True)
class AddressInfo:
    """An address and the routing types it accepts."""

    name: str
    routing_types: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A durable queue: its id (from the id generator), name, address, routing type, and its
    filter as the opaque string it was created with (None: no filter)."""

    id: int
    name: str
    address: str
    routing_type: str
    filter: str | None
