"""``store mask``: mask a password for a configuration file, or decode a masked one.

::

    store mask 's3cr3t'                 # prints ENC(-72437dbd04577c91a6af8b84ffb96ac2)-like text
    store mask --key helloworld 's3cr3t'
    store mask --unmask 'ENC(-5a2376c61c668aaf)'
    store mask --unmask -- -5a2376c61c668aaf   # '--' before a value starting with '-'
    echo 's3cr3t' | store mask -        # keeps the password out of the process list

The output pastes into a ``broker.xml`` (``<jdbc-password>ENC(…)</jdbc-password>``) or a TOML
file (``jdbc-password = "ENC(…)"``); Artemis's ``artemis mask`` produces and reads the same
values (:mod:`store.config.masking`). Without ``--key`` the key comes from
``ARTEMIS_DEFAULT_SENSITIVE_STRING_CODEC_KEY`` or Artemis's default.

Thread-safety: a command runs once per process; nothing is shared.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from store.config import masking

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``mask`` subcommand to the ``store`` parser. Returns nothing. Raises nothing."""
    parser = subparsers.add_parser(
        "mask",
        help="mask a password as ENC(...) for a configuration file (or --unmask one)",
        description=(
            "Mask a value with Artemis's default sensitive-string codec (two-way, Blowfish) and "
            "print it as ENC(...), ready for broker.xml or TOML; --unmask decodes one."
        ),
    )
    parser.add_argument(
        "value",
        help="the text to mask (or to decode with --unmask); - reads it from stdin; "
        "put -- before a value that starts with '-'",
    )
    parser.add_argument(
        "--key",
        help=f"codec key (default: ${masking.KEY_ENV_VAR}, else Artemis's default key)",
    )
    parser.add_argument(
        "--unmask",
        action="store_true",
        help="decode a masked value (with or without ENC(...)) and print the plain text",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Mask or unmask ``args.value`` and print the result.

    Returns exit code 0. Raises :class:`~store.errors.ConfigError` when the value cannot be
    decoded or the key is unusable (``store`` maps it to exit code 2).
    """
    value: str = args.value
    if value == "-":
        value = sys.stdin.readline().rstrip("\r\n")
    if args.unmask:
        print(masking.unmask(masking.unwrap_enc(value), key=args.key, setting="the value"))
    else:
        print(masking.wrap_enc(masking.mask(value, key=args.key)))
    return 0
