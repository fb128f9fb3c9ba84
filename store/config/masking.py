"""Artemis's password masking: ``ENC(...)`` values of the ``DefaultSensitiveStringCodec``.

A ``broker.xml`` may hold ``<jdbc-password>ENC(-5a2376c61c668aaf)</jdbc-password>``. This module
reads and writes such values so that one copied from a real Artemis configuration works here and
one made by ``store mask`` works in Artemis. Only the codec's default **two-way** algorithm
exists for this (the one-way PBKDF2 form is a hash and cannot be decoded).

The two-way algorithm, as Artemis implements it (reference §4.11):

1. the key is the bytes of ``"clusterpassword"``, unless a key is given: by argument here (by the
   codec parameter ``key=`` in Artemis; ``password-codec`` in a configuration file), else by the
   environment variable ``ARTEMIS_DEFAULT_SENSITIVE_STRING_CODEC_KEY`` (an empty value counts as
   unset here; Artemis would fail on it). Artemis also reads a Java system property, which a
   Python process does not have;
2. the plain text's bytes are encrypted with Blowfish, ECB mode, PKCS#5 padding (what JCE's
   ``Cipher.getInstance("Blowfish")`` means);
3. the cipher text is read as a signed big-endian integer (``new BigInteger(bytes)``) and written
   in lower-case hexadecimal, so it starts with ``-`` when the first bit is set;
4. decoding parses that number back to its shortest two's-complement bytes and pads them at the
   front to a multiple of 8 bytes before decrypting.

Where we depart from Artemis, and why:

- Text is encoded as UTF-8. Java's ``String.getBytes()`` uses the platform charset, which is
  UTF-8 on every current platform (Java 18+ always; Java 17 with a UTF-8 locale).
- Step 4: Artemis pads with zero bytes even when the number is negative. For about one value in
  512 (cipher text starting ``0xFF`` followed by a byte ``>= 0x80``) the shortest form drops that
  leading ``0xFF``, so Artemis cannot decode a value it produced itself. We pad with the sign
  (``0xFF`` for negatives), which gives the same bytes whenever Artemis succeeds and the right
  bytes when it does not.
- Java's Blowfish accepts keys of 1 to 56 bytes; the Blowfish key schedule repeats the key
  cyclically, so a key shorter than the 4 bytes pycryptodome insists on is repeated until it is
  long enough, which yields the very same cipher.
- A value that decrypts to bytes that are not UTF-8 is an error, where Java would silently
  produce replacement characters (usually the sign of a wrong key).

Errors never contain the masked value, the plain text, or the key: a value that cannot be decoded
raises :class:`~store.errors.ConfigError` naming only the configuration key it came from.

Thread-safety: every function is pure (it reads the environment once per call) and may be called
from any thread.
"""

from __future__ import annotations

import os
import re
from typing import Any

from Crypto.Cipher import Blowfish
from Crypto.Util.Padding import pad, unpad

from store.config.values import HIDDEN
from store.errors import ConfigError

__all__ = [
    "DEFAULT_KEY",
    "KEY_ENV_VAR",
    "decode_value",
    "is_enc",
    "mask",
    "resolve_key",
    "unmask",
    "unwrap_enc",
    "wrap_enc",
]

DEFAULT_KEY = "clusterpassword"
KEY_ENV_VAR = "ARTEMIS_DEFAULT_SENSITIVE_STRING_CODEC_KEY"

_BLOCK = 8
_MAX_KEY_BYTES = 56  # 448 bits: Blowfish's (and JCE's) upper bound
_MIN_CIPHER_KEY_BYTES = 4  # pycryptodome's lower bound; shorter keys are repeated (see above)
_SIGNED_HEX = re.compile(r"[+-]?[0-9a-fA-F]+")
_ENC_PREFIX = "ENC("
_ENC_SUFFIX = ")"


def resolve_key(key: str | None = None) -> str:
    """Pick the codec key the way Artemis does: the argument, else the env var, else the default.

    Returns the key text. Raises nothing.
    """
    if key is not None:
        return key
    from_env = os.environ.get(KEY_ENV_VAR)
    if from_env is not None and from_env.strip():
        return from_env
    return DEFAULT_KEY


def _cipher(key: str | None) -> Any:
    try:
        raw = resolve_key(key).encode("utf-8", errors="strict")
    except UnicodeEncodeError:
        raw = b""  # a lone surrogate: as unusable as an empty key
    if not 1 <= len(raw) <= _MAX_KEY_BYTES:
        source = "key" if key is not None else KEY_ENV_VAR
        raise ConfigError(
            f"invalid {source}: {HIDDEN!r}; allowed: a codec key of 1 to 56 bytes of UTF-8",
            key=source,
            value=HIDDEN,
            allowed="a codec key of 1 to 56 bytes of UTF-8",
        )
    # Blowfish cycles the key bytes through its P-array, so k and k+k schedule identically.
    while len(raw) < _MIN_CIPHER_KEY_BYTES:
        raw += raw
    return Blowfish.new(raw, Blowfish.MODE_ECB)


def mask(plain: str, *, key: str | None = None) -> str:
    """Mask ``plain`` as Artemis's two-way codec does.

    Returns the signed lower-case hex text (without ``ENC(...)``; see :func:`wrap_enc`).
    Raises :class:`ConfigError` when the key is empty or longer than 56 bytes, or when
    ``plain`` cannot be encoded as UTF-8 (a lone surrogate).
    """
    cipher = _cipher(key)
    try:
        data = plain.encode("utf-8", errors="strict")
    except UnicodeEncodeError:
        raise ConfigError(
            "the value to mask is not valid Unicode text",
            key="value",
            value=HIDDEN,
            allowed="text that can be encoded as UTF-8",
        ) from None
    encrypted: bytes = cipher.encrypt(pad(data, _BLOCK))
    number = int.from_bytes(encrypted, "big", signed=True)
    return f"-{-number:x}" if number < 0 else f"{number:x}"


def _undecodable(setting: str, why: str) -> ConfigError:
    allowed = "a value masked with the configured codec key (see `store mask`)"
    return ConfigError(
        f"cannot decode {setting}: {why}; allowed: {allowed}",
        key=setting,
        value=HIDDEN,
        allowed=allowed,
        hint="check the codec key (password-codec key=..., or " + KEY_ENV_VAR + ")",
    )


def unmask(masked: str, *, key: str | None = None, setting: str = "the masked value") -> str:
    """Decode a value produced by :func:`mask` or by Artemis (without ``ENC(...)``).

    ``setting`` is the configuration key the value came from; it is the only thing errors name.
    Returns the plain text. Raises :class:`ConfigError` naming ``setting`` when the text is not
    signed hex, does not decrypt with the key, or does not decode to UTF-8 text.
    """
    text = masked.strip()
    if not _SIGNED_HEX.fullmatch(text):
        raise _undecodable(setting, "it is not a hexadecimal number")
    number = int(text, 16)
    length = 1
    while not -(1 << (8 * length - 1)) <= number < (1 << (8 * length - 1)):
        length += 1
    length = -(-length // _BLOCK) * _BLOCK
    encrypted = number.to_bytes(length, "big", signed=True)  # sign-extends; see module doc
    cipher = _cipher(key)
    try:
        padded: bytes = cipher.decrypt(encrypted)
        plain = unpad(padded, _BLOCK).decode("utf-8", errors="strict")
    except (ValueError, UnicodeDecodeError):
        raise _undecodable(setting, "it does not decrypt with this codec key") from None
    return plain


def is_enc(value: str) -> bool:
    """Tell whether ``value`` is written ``ENC(...)`` (surrounding blanks ignored, case matters).

    Returns ``True`` for ``ENC(...)``. Raises nothing.
    """
    text = value.strip()
    return text.startswith(_ENC_PREFIX) and text.endswith(_ENC_SUFFIX)


def unwrap_enc(value: str) -> str:
    """Strip ``ENC(`` and ``)`` from ``value``.

    Returns the text inside, or ``value`` unchanged when it is not ``ENC(...)``. Raises nothing.
    """
    text = value.strip()
    return text[len(_ENC_PREFIX) : -len(_ENC_SUFFIX)] if is_enc(text) else value


def wrap_enc(masked: str) -> str:
    """Wrap a masked value for a configuration file.

    Returns ``ENC(<masked>)``. Raises nothing.
    """
    return f"{_ENC_PREFIX}{masked}{_ENC_SUFFIX}"


def decode_value(value: str, *, key: str | None = None, setting: str = "the masked value") -> str:
    """Decode ``value`` if it is ``ENC(...)``; return anything else unchanged.

    Returns the plain text. Raises :class:`ConfigError` naming ``setting`` (never the value) when
    an ``ENC(...)`` value cannot be decoded.
    """
    if not is_enc(value):
        return value
    return unmask(unwrap_enc(value), key=key, setting=setting)
