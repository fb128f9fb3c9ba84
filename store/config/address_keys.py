"""The address-setting keys: how each one is read from a text and checked (docs/config.md).

:mod:`store.config.addresses` models, matches and merges the settings; this module holds the
rules of the keys themselves, the paging keys (``max-size-bytes``, ``page-size-bytes``, …) and
the delivery policies (``dead-letter-address``, ``max-delivery-attempts``, ``expiry-address``,
``redelivery-delay``, …), Artemis's names, defaults and ranges:

=======================================  ===============  ====================================
key                                      default          allowed
=======================================  ===============  ====================================
``dead-letter-address``                  none             an address name (empty: none)
``max-delivery-attempts``                10               -1 (never) or an integer of 0 or more
``auto-create-dead-letter-resources``    false            true or false
``dead-letter-queue-prefix``             ``DLQ.``         a text (empty allowed)
``dead-letter-queue-suffix``             empty            a text
``expiry-address``                       none             an address name (empty: none)
``expiry-delay``                         -1 (keep own)    -1 or milliseconds of 0 or more
``min-expiry-delay``                     -1 (none)        -1 or milliseconds of 0 or more
``max-expiry-delay``                     -1 (none)        -1 or milliseconds of 0 or more
``auto-create-expiry-resources``         false            true or false
``expiry-queue-prefix``                  ``EXP.``         a text (empty allowed)
``expiry-queue-suffix``                  empty            a text
``redelivery-delay``                     0 ms             milliseconds of 0 or more
``redelivery-delay-multiplier``          1.0              a number of at least 1.0
``max-redelivery-delay``                 10 x the delay   milliseconds of 0 or more
=======================================  ===============  ====================================

As in Artemis, ``max-delivery-attempts`` of 0 means the same as -1 (Artemis only counts a
limit above 0). What each key does is :mod:`store.messaging.policies`' docstring.

Thread-safety: immutable tables and pure functions; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from store.config.values import (
    INT32_MAX,
    INT64_MAX,
    SIZE_ALLOWED,
    check_int,
    invalid,
    parse_bool,
    parse_int,
    parse_size,
    parse_text,
)

__all__ = ["ADDRESS_FULL_POLICIES", "ADDRESS_RULES", "checked_value"]

ADDRESS_FULL_POLICIES: Final = ("PAGE", "DROP", "FAIL", "BLOCK")
_MS: Final = "milliseconds: an integer of 0 or more"


def _check_range(low: int, high: int, allowed: str, also: tuple[int, ...] = ()) -> Any:
    def check(key: str, value: object) -> object:
        check_int(key, value, low, high, allowed, also=also)
        return value

    return check


def _check_policy(key: str, value: object) -> object:
    policy = value.strip().upper() if isinstance(value, str) else value
    if policy not in ADDRESS_FULL_POLICIES:
        raise invalid(key, value, "PAGE, DROP, FAIL or BLOCK")
    return policy


def _check_bool(key: str, value: object) -> object:
    if not isinstance(value, bool):
        raise invalid(key, value, "true or false")
    return value


def _check_text(key: str, value: object) -> object:
    if not isinstance(value, str) or "\x00" in value:
        raise invalid(key, value, "a text")
    return value


def _check_address(key: str, value: object) -> object:
    """An address name, or None; a blank text means none (an empty XML element)."""
    if value is None:
        return None
    if not isinstance(value, str) or "\x00" in value:
        raise invalid(key, value, "an address name (empty: none)")
    return value.strip() or None


def _check_multiplier(key: str, value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 1.0:
        raise invalid(key, value, "a number of at least 1.0 (e.g. 2.0)")
    if value == float("inf"):
        raise invalid(key, value, "a finite number of at least 1.0")
    return float(value)


def _parse_float(value: object, *, key: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise invalid(key, value, "a number (e.g. 2.0)")


def _parse_address(value: object, *, key: str) -> str | None:
    return parse_text(value, key=key).strip() or None


@dataclass(frozen=True)
class Rule:
    """How one key's value is read from a text (``parse``) and checked and normalised
    (``check(key, value)``, raising ConfigError). Immutable; shareable."""

    parse: Callable[..., Any]
    check: Callable[[str, object], object]


_MS_RULE: Final = Rule(parse_int, _check_range(0, INT64_MAX, _MS))
_MS_OR_NONE: Final = Rule(parse_int, _check_range(0, INT64_MAX, f"-1 (none) or {_MS}", (-1,)))

#: Every address-setting field (snake_case), with its rule, in the order docs list them.
ADDRESS_RULES: Final[Mapping[str, Rule]] = {
    "max_size_bytes": Rule(
        parse_size, _check_range(0, INT64_MAX, f"-1 (no limit) or {SIZE_ALLOWED}", (-1,))
    ),
    "max_size_messages": Rule(
        parse_int, _check_range(0, INT64_MAX, "-1 (no limit) or an integer of 0 or more", (-1,))
    ),
    "page_size_bytes": Rule(
        parse_size, _check_range(1, INT32_MAX, "a positive size in bytes up to 2G - 1 (e.g. 10M)")
    ),
    "address_full_policy": Rule(parse_text, _check_policy),
    "max_read_page_bytes": Rule(
        parse_size,
        _check_range(
            1, INT32_MAX, "-1 (no limit) or a positive size in bytes up to 2G - 1 (e.g. 20M)", (-1,)
        ),
    ),
    "dead_letter_address": Rule(_parse_address, _check_address),
    "max_delivery_attempts": Rule(
        parse_int, _check_range(0, INT32_MAX, "-1 (never) or an integer of 0 or more", (-1,))
    ),
    "auto_create_dead_letter_resources": Rule(parse_bool, _check_bool),
    "dead_letter_queue_prefix": Rule(parse_text, _check_text),
    "dead_letter_queue_suffix": Rule(parse_text, _check_text),
    "expiry_address": Rule(_parse_address, _check_address),
    "expiry_delay": _MS_OR_NONE,
    "min_expiry_delay": _MS_OR_NONE,
    "max_expiry_delay": _MS_OR_NONE,
    "auto_create_expiry_resources": Rule(parse_bool, _check_bool),
    "expiry_queue_prefix": Rule(parse_text, _check_text),
    "expiry_queue_suffix": Rule(parse_text, _check_text),
    "redelivery_delay": _MS_RULE,
    "redelivery_delay_multiplier": Rule(_parse_float, _check_multiplier),
    "max_redelivery_delay": _MS_RULE,
}


def checked_value(name: str, value: object, key: str) -> object:
    """Check the typed value of field ``name`` (``key``: the name errors give). Returns it
    normalised (a policy in upper case, a blank address as None, a multiplier as float).
    Raises ConfigError naming ``key``."""
    return ADDRESS_RULES[name].check(key, value)
