"""Artemis's address settings by match: paging limits, delivery policies (docs/config.md).

A configuration holds address settings by *match*, each giving some of the keys::

    [address-settings."#"]
    page-size-bytes = "1M"

    [address-settings."orders.#"]
    max-size-bytes = "100M"
    address-full-policy = "BLOCK"

and :func:`settings_for` (behind :meth:`store.config.StoreConfig.address_settings_for`) gives
one address its merged :class:`AddressSettings`: every match that matches the address, most
specific first, contributes the keys that no more specific match gave; keys nobody gave take
Artemis's defaults; ``max-read-page-bytes``, when nobody gave it, is twice the merged
``page-size-bytes``.

Keys (Artemis's names and defaults):

=========================  =====================  =============================================
key                        default                allowed
=========================  =====================  =============================================
``max-size-bytes``         -1 (no limit)          -1 or a size of 0 bytes or more (``10Mb``)
``max-size-messages``      -1 (no limit)          -1 or an integer of 0 or more
``page-size-bytes``        10 MiB                 a size from 1 byte to 2 GiB - 1
``address-full-policy``    ``PAGE``               PAGE, DROP, FAIL or BLOCK (any case in input)
``max-read-page-bytes``    2 x page-size-bytes    -1 (no limit) or a size from 1 byte to 2 GiB - 1
=========================  =====================  =============================================

and the delivery policies (``dead-letter-address``, ``max-delivery-attempts``, ``expiry-address``,
``redelivery-delay``, …), whose table is :mod:`store.config.address_keys`'; the keys derived when
not given are ``max-read-page-bytes`` and ``max-redelivery-delay`` (10 x ``redelivery-delay``).

**Matches** use Artemis's default wildcard syntax: ``.`` separates words, ``*`` stands for
exactly one word (more precisely, as in Artemis, for one or more characters other than ``.``,
so ``ord*`` matches ``orders``), and a ``#`` at the end stands for any number of further words,
zero included: ``orders.#`` matches ``orders``, ``orders.eu`` and ``orders.eu.de``. ``#`` alone
matches every address. As in Artemis, ``#`` may only be the last character, and ``orders#``
means the same as ``orders.#``. A match without ``*`` or ``#`` is *literal*: it matches only the
address equal to it. (Artemis's ``<wildcard-addresses>`` can change these characters; this
library always uses ``.``, ``*`` and ``#``.)

**Precedence** (most specific first), the order of Artemis's
``HierarchicalObjectRepository.MatchComparator``, with ties Artemis leaves to hash-map order
broken so that the result never depends on the order of the configuration:

1. a literal match first;
2. then matches with ``*`` but no ``#``; among them, at the first word where one has ``*`` and
   the other a word, the one with the word (a longer literal prefix) is more specific;
3. then matches with ``#``; among them the longer match text is more specific (Artemis
   compares lengths in characters); at equal length, the rule of 2 decides, then the text.

=====================================  ===============  =====================================
matches configured                     address          merge order (most specific first)
=====================================  ===============  =====================================
``#``, ``orders.#``, ``orders``        ``orders``       ``orders``, ``orders.#``, ``#``
``orders.*``, ``*.eu``, ``orders.eu``  ``orders.eu``    ``orders.eu``, ``orders.*``, ``*.eu``
``orders.*``, ``orders.#``, ``#``      ``orders.eu``    ``orders.*``, ``orders.#``, ``#``
``#``, ``orders.#``, ``orders.eu.#``   ``orders.eu.x``  ``orders.eu.#``, ``orders.#``, ``#``
``*.*.*``, ``orders.*.#``              ``orders.a.b``   ``*.*.*`` (no ``#``), ``orders.*.#``
``*.b.#``, ``a.*.#`` (same length)     ``a.b``          ``a.*.#``, ``*.b.#``
``orders.#``, ``*.#``                  ``orders.x``     ``orders.#`` (longer), ``*.#``
=====================================  ===============  =====================================

**A limit that can never be met is refused.** ``max-size-bytes`` or ``max-size-messages`` of
0 makes an address full before its first message: under PAGE every durable message is paged,
under DROP every message dropped, under FAIL every send refused — each a defined, if unusual,
behaviour — but under BLOCK the first send would wait forever for room no ack can make. So a
limit of 0 that merges with BLOCK is a :class:`~store.errors.ConfigError` naming the key, the
match that gave it and the match that gave BLOCK. The configuration checks each match as the
address written like it (``orders.#`` stands for the addresses it matches, ``#`` for all), so
the usual cases (one match giving both, ``#`` giving BLOCK and ``orders`` giving 0) fail when
the configuration is built; two wildcard matches that only meet on some concrete address fail
when that address's settings are first merged (:func:`settings_for`, at its first send).

**Sources.** In TOML and :meth:`~store.config.StoreConfig.from_mapping` an unknown key inside an
address setting is a :class:`~store.errors.ConfigError` naming the key and the match (with the
closest known key); ``broker.xml`` carries many address-setting keys this library does not use
(``auto-create-queues``, ``slow-consumer-policy``, …), which :mod:`store.config.broker_xml` skips. A
bad value is a ``ConfigError`` whose key reads ``address-settings."<match>".<key>``; a bad
match (``#`` before the end, empty) one whose key is ``address-settings``.

Representation: the configured matches are a :class:`~store.config.values.FrozenMap` from match to a
``FrozenMap`` of the snake_case names of :class:`AddressSettings` fields that match gives, so a
configuration holding them stays immutable, hashable and comparable.

Thread-safety: :class:`AddressSettings` and the configured mappings are immutable; the
functions are pure (the compiled-pattern cache is thread-safe); safe from any thread.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from store.config.address_keys import ADDRESS_FULL_POLICIES, ADDRESS_RULES, checked_value
from store.config.values import FrozenMap, invalid, unknown_key
from store.errors import ConfigError

__all__ = [
    "ADDRESS_FULL_POLICIES",
    "ADDRESS_SETTING_KEYS",
    "DEFAULT_PAGE_SIZE_BYTES",
    "AddressSettings",
    "check_match",
    "freeze_address_settings",
    "match_precedence",
    "matches",
    "read_address_settings",
    "settings_for",
]

DEFAULT_PAGE_SIZE_BYTES: Final = 10 * 1024 * 1024  # Artemis's AddressSettings.DEFAULT_PAGE_SIZE
SECTION: Final = "address-settings"

_ANY_WORDS: Final = "#"
_ONE_WORD: Final = "*"
_DELIMITER: Final = "."


class _Derived(int):
    """Marks a derived field (max_read_page_bytes, max_redelivery_delay) that was not given
    (immutable; shareable)."""


# Identity-compared: "derive from another field"; never visible on a built object.
_DERIVE: Final = _Derived(-2)
_DERIVED_FROM: Final = {
    # field: (the field it follows, the factor): Artemis's defaults
    "max_read_page_bytes": ("page_size_bytes", 2),
    "max_redelivery_delay": ("redelivery_delay", 10),
}
#: The Artemis (kebab-case) names of the address-setting keys this library reads.
ADDRESS_SETTING_KEYS: Final = tuple(name.replace("_", "-") for name in ADDRESS_RULES)


@dataclass(frozen=True, kw_only=True)
class AddressSettings:
    """The settings one address gets once its matches are merged (Artemis's defaults otherwise).

    Thread-safety: immutable; safe to share.
    """

    #: Default -1 (no limit), bytes. Above this much held in memory the address applies its
    #: ``address_full_policy``; a limit bounds memory, -1 leaves it to the global limit.
    max_size_bytes: int = -1
    #: Default -1 (no limit). The same as ``max_size_bytes``, counted in messages.
    max_size_messages: int = -1
    #: Default 10485760 bytes (10 MiB). A page file (or database page) is closed once it would
    #: grow past this: bigger pages mean fewer files, but more to read to depage one message.
    page_size_bytes: int = DEFAULT_PAGE_SIZE_BYTES
    #: Default "PAGE"; PAGE, DROP, FAIL or BLOCK (any case in input). What happens to new
    #: messages when the address is full: paged to disk, dropped, refused, or senders blocked.
    address_full_policy: str = "PAGE"
    #: Default 2 x ``page_size_bytes`` (derived when not given); -1 = no limit. How much paged
    #: data is read into memory at once while depaging: more is faster but holds more memory.
    max_read_page_bytes: int = _DERIVE
    # -- delivery policies (what each does: store.messaging.policies) --------------------
    #: Default None. Where a message goes once ``max_delivery_attempts`` deliveries failed;
    #: None: it is removed, with a WARNING naming it.
    dead_letter_address: str | None = None
    #: Default 10; -1 (or 0) never. The cancel (or rollback) that brings a message's delivery
    #: count to this moves it to ``dead_letter_address``.
    max_delivery_attempts: int = 10
    #: Default False. Create the dead-letter address and a queue
    #: ``<prefix><address><suffix>`` on it, filtered on the original address, when needed.
    auto_create_dead_letter_resources: bool = False
    #: Default "DLQ.". The start of an auto-created dead-letter queue's name.
    dead_letter_queue_prefix: str = "DLQ."
    #: Default "". The end of an auto-created dead-letter queue's name.
    dead_letter_queue_suffix: str = ""
    #: Default None. Where an expired message goes; None: it is removed.
    expiry_address: str | None = None
    #: Default -1 (keep the message's own). Milliseconds after its send at which a message
    #: without an expiration expires; when given, the min/max bounds are not applied.
    expiry_delay: int = -1
    #: Default -1 (none). No message expires sooner than this many ms after its send.
    min_expiry_delay: int = -1
    #: Default -1 (none). No message lives longer than this many ms after its send (one
    #: without an expiration gets it).
    max_expiry_delay: int = -1
    #: Default False. As ``auto_create_dead_letter_resources``, for the expiry address.
    auto_create_expiry_resources: bool = False
    #: Default "EXP.". The start of an auto-created expiry queue's name.
    expiry_queue_prefix: str = "EXP."
    #: Default "". The end of an auto-created expiry queue's name.
    expiry_queue_suffix: str = ""
    #: Default 0 ms. A cancelled message is delivered again no sooner than this.
    redelivery_delay: int = 0
    #: Default 1.0. The delay is multiplied by this once per earlier delivery.
    redelivery_delay_multiplier: float = 1.0
    #: Default 10 x ``redelivery_delay`` (derived when not given). The delay's cap.
    max_redelivery_delay: int = _DERIVE

    def __post_init__(self) -> None:
        derive = {name for name in _DERIVED_FROM if getattr(self, name) is _DERIVE}
        for name in ADDRESS_RULES:
            if name not in derive:
                value = checked_value(name, getattr(self, name), name.replace("_", "-"))
                object.__setattr__(self, name, value)
        for name in derive:
            # max_read_page_bytes may exceed 2G - 1 for a page size near 2G: still the
            # meaning Artemis gives it.
            source, factor = _DERIVED_FROM[name]
            object.__setattr__(self, name, factor * getattr(self, source))


def _value_key(match: str, key: str) -> str:
    return f'{SECTION}."{match}".{key}'


def check_match(match: object) -> str:
    """Check one match (see the module docstring).

    Returns the match. Raises :class:`ConfigError` (key ``address-settings``) when it is not a
    non-empty text or has ``#`` anywhere but at its end, as Artemis refuses.
    """
    allowed = "a match: words separated by '.', '*' for one word, '#' only at the end"
    if not isinstance(match, str) or not match.strip():
        raise invalid(SECTION, match, allowed)
    if _ANY_WORDS in match[:-1]:
        raise invalid(SECTION, match, allowed, hint="'#' may only be the last character")
    return match


def freeze_address_settings(value: object) -> FrozenMap:
    """Check configured address settings given by snake_case field names and typed values.

    ``value`` maps each match to a mapping of :class:`AddressSettings` field names to values
    (ints, a policy text). Returns them as a :class:`FrozenMap` of ``FrozenMap`` (policies in
    upper case). Raises :class:`ConfigError` for a bad match, an unknown field (naming the
    closest), a bad value, or a limit of 0 merged with BLOCK (module docstring).
    """
    if not isinstance(value, Mapping):
        raise invalid(SECTION, value, "a mapping of match to settings")
    frozen: dict[str, FrozenMap] = {}
    for match, partial in value.items():
        check_match(match)
        where = f'{SECTION}."{match}"'
        if not isinstance(partial, Mapping):
            raise invalid(where, partial, "a mapping of address-setting names to values")
        checked: dict[str, object] = {}
        for name, item in partial.items():
            if name not in ADDRESS_RULES:
                raise unknown_key(str(name), ADDRESS_RULES, where)
            checked[name] = checked_value(name, item, _value_key(match, name.replace("_", "-")))
        frozen[match] = FrozenMap(checked)
    result = FrozenMap(frozen)
    for match in result:  # the settings an address written as the match itself would get
        literal = _ANY_WORDS not in match and _ONE_WORD not in match
        where = f"address {match!r}" if literal else f"an address matching {match!r}"
        _check_satisfiable(*_merge(result, match), where)
    return result


def read_address_settings(section: object) -> dict[str, dict[str, Any]]:
    """Read an ``address-settings`` table of Artemis (kebab-case) keys, as TOML or a dict give it.

    Values may be typed or Artemis texts (``"10Mb"``, ``"-1"``, ``"page"``). Returns the match
    → field name → value mapping :func:`freeze_address_settings` takes. Raises
    :class:`ConfigError` for a bad match, an unknown key (naming the key, the match and the
    closest known key) or a value that does not parse.
    """
    if not isinstance(section, Mapping):
        raise invalid(SECTION, section, 'a table of match = settings, e.g. [address-settings."#"]')
    result: dict[str, dict[str, Any]] = {}
    for match, table in section.items():
        check_match(match)
        where = f'{SECTION}."{match}"'
        if not isinstance(table, Mapping):
            raise invalid(where, table, "a table of address-setting keys")
        values: dict[str, Any] = {}
        for key, value in table.items():
            if not isinstance(key, str) or key not in ADDRESS_SETTING_KEYS:
                raise unknown_key(str(key), ADDRESS_SETTING_KEYS, where)
            name = key.replace("-", "_")
            values[name] = ADDRESS_RULES[name].parse(value, key=_value_key(match, key))
        result[match] = values
    return result


@functools.lru_cache(maxsize=256)
def _pattern(match: str) -> re.Pattern[str]:
    if match == _ANY_WORDS:
        return re.compile(r".*", re.DOTALL)
    head, tail = match, ""
    if match.endswith(_ANY_WORDS):
        head = match[:-1].removesuffix(_DELIMITER)
        tail = r"(?:\..+)?"  # zero or more further words ('.+' may hold more dots)
    words = (re.escape(part) for part in head.split(_ONE_WORD))
    return re.compile(r"[^.]+".join(words) + tail, re.DOTALL)


def matches(match: str, address: str) -> bool:
    """Tell whether ``match`` (see the module docstring) matches the whole of ``address``.

    Returns ``True`` or ``False``. Raises nothing for a checked match.
    """
    return _pattern(match).fullmatch(address) is not None


def match_precedence(match: str) -> tuple[Any, ...]:
    """Give the sort key that puts more specific matches first (module docstring, Precedence).

    Returns a tuple to sort ascending. Raises nothing.
    """
    wildcard_words = tuple(word == _ONE_WORD for word in match.split(_DELIMITER))
    if _ANY_WORDS in match:
        return (2, -len(match), wildcard_words, match)
    if _ONE_WORD in match:
        return (1, 0, wildcard_words, match)
    return (0, 0, (), match)


def settings_for(configured: Mapping[str, Mapping[str, Any]], address: str) -> AddressSettings:
    """Merge the configured settings of every match of ``address``, most specific first.

    ``configured`` is what :func:`freeze_address_settings` returns. Returns the merged
    :class:`AddressSettings` (defaults where no match gives a key). Raises :class:`TypeError`
    when ``address`` is not a text, :class:`ConfigError` when the merged settings can never
    admit a message (a limit of 0 under BLOCK: see the module docstring), naming the key
    and the match that gave it.
    """
    if not isinstance(address, str):
        raise TypeError(f"address must be a str, not {type(address).__name__}")
    merged, given_by = _merge(configured, address)
    _check_satisfiable(merged, given_by, f"address {address!r}")
    return AddressSettings(**merged)


def _merge(
    configured: Mapping[str, Mapping[str, Any]], address: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """The keys the matches of ``address`` give, most specific first, and which match gave
    each."""
    merged: dict[str, Any] = {}
    given_by: dict[str, str] = {}
    for match in sorted((m for m in configured if matches(m, address)), key=match_precedence):
        for name, value in configured[match].items():
            if name not in merged:
                merged[name] = value
                given_by[name] = match
    return merged, given_by


def _check_satisfiable(merged: Mapping[str, Any], given_by: Mapping[str, str], where: str) -> None:
    """Refuse a limit of 0 under BLOCK (see the module docstring), naming the key and match."""
    if merged.get("address_full_policy") != "BLOCK":
        return
    for name in ("max_size_bytes", "max_size_messages"):
        if merged.get(name) == 0:
            key = name.replace("_", "-")
            policy_from = given_by["address_full_policy"]
            raise ConfigError(
                f"{_value_key(given_by[name], key)} is 0 and address-full-policy is BLOCK"
                f' (from match "{policy_from}"), so a send to {where} would wait forever'
                " for room that never comes; allowed: a limit above 0, -1 (no limit), or"
                " the PAGE, DROP or FAIL policy",
                key=_value_key(given_by[name], key),
                value=0,
                allowed="above 0 or -1 under BLOCK",
                hint="a limit of 0 pages (PAGE), drops (DROP) or refuses (FAIL) every message",
            )
