"""The ports the broker listens on: Artemis's acceptors.

broker.xml's ``<acceptors><acceptor name="stomp">tcp://0.0.0.0:61613?protocols=STOMP;
sslEnabled=true;keyStorePath=broker.pem</acceptor>…``, or in TOML the ``[broker.acceptors]``
table (``stomp = "tcp://0.0.0.0:61613?protocols=STOMP"``). Several acceptors are served at
once, each with its own limits, on one store. Without any, ``store broker`` listens on
``--host``/``--port`` (127.0.0.1:61613), plain; ``--host``/``--port`` given with exactly one
acceptor configured move that one.

The URL parameters served (Artemis's names and defaults):

================================  ============================================================
parameter                         meaning here
================================  ============================================================
``protocols``                     the acceptor is served when it lists STOMP (or has no list:
                                  Artemis's "every protocol"); one without STOMP is a WARNING
``sslEnabled``                    TLS (default false)
``keyStorePath``                  ``keyStoreType`` ``PEM``: one file with the private key and
                                  the certificate chain; ``PKCS12``: a PKCS#12 file
``keyStoreType``                  ``PEM`` or ``PKCS12`` (default: by the file's suffix,
                                  ``.p12``/``.pfx`` PKCS12, else PEM); JKS is not read
``keyStorePassword``              the key's (PEM) or the file's (PKCS12) password; ``ENC()``
                                  masked values are decoded (:mod:`store.config.masking`)
``needClientAuth``                a client must present a certificate the trust store signed
``trustStorePath`` / ``…Type`` /  the CAs client certificates are checked against (PEM or
``trustStorePassword``            PKCS12)
``connectionsAllowed``            open connections at most (-1, the default: no bound); one
                                  more gets an ERROR frame and is closed
``stompMaxFramePayloadLength``    the largest frame body (default ``--max-frame-size``)
``heartBeatToConnectionTtlModifier``  a client silent for this many times its heart-beat
                                  interval is closed (default 2.0)
``tcpSendBufferSize`` /           the socket's buffer sizes (``SO_SNDBUF`` / ``SO_RCVBUF``)
``tcpReceiveBufferSize``
``tcpNoDelay``                    ``TCP_NODELAY`` (default true)
``useEpoll`` / ``useKQueue``      accepted and without effect (Python picks its poller)
================================  ============================================================

Any other parameter, a scheme other than ``tcp``, and an acceptor without STOMP are WARNINGs
naming them, never silently dropped; a bad value of a served parameter is a ConfigError
naming the acceptor and the parameter.

Thread-safety: pure functions; :class:`Acceptor` is immutable.
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final
from urllib.parse import urlsplit

from store.config.broker_xml import core_children, local_name, read_core
from store.config.masking import decode_value
from store.config.values import invalid, parse_size
from store.errors import ConfigError

__all__ = ["Acceptor", "load_acceptors", "parse_acceptor", "with_address"]

log = logging.getLogger("store.stomp")

_SERVED: Final = frozenset(
    {
        "protocols", "sslEnabled", "keyStorePath", "keyStoreType", "keyStorePassword",
        "needClientAuth", "trustStorePath", "trustStoreType", "trustStorePassword",
        "connectionsAllowed", "stompMaxFramePayloadLength", "heartBeatToConnectionTtlModifier",
        "tcpSendBufferSize", "tcpReceiveBufferSize", "tcpNoDelay", "useEpoll", "useKQueue",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Acceptor:
    """One port the broker listens on, and its settings (the module docstring)."""

    name: str
    host: str
    port: int
    tls: bool = False
    key_store: str | None = None
    key_store_type: str = "PEM"
    key_store_password: str | None = None
    need_client_auth: bool = False
    trust_store: str | None = None
    trust_store_type: str = "PEM"
    trust_store_password: str | None = None
    connections_allowed: int = -1
    max_frame_size: int | None = None
    ttl_modifier: float = 2.0
    send_buffer: int | None = None
    receive_buffer: int | None = None
    no_delay: bool = True


def _bool(name: str, key: str, text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise invalid(f"acceptor {name!r} {key}", text, "true or false")
    return text.lower() == "true"


def _int(name: str, key: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise invalid(f"acceptor {name!r} {key}", text, "an integer") from None


def _float(name: str, key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise invalid(f"acceptor {name!r} {key}", text, "a number above 0")
    return value


def _store_type(name: str, key: str, text: str | None, path: str | None) -> str:
    if text is None:
        suffix = os.path.splitext(path or "")[1].lower()
        return "PKCS12" if suffix in (".p12", ".pfx") else "PEM"
    kind = text.upper()
    if kind not in ("PEM", "PKCS12"):
        raise invalid(f"acceptor {name!r} {key}", text, "PEM or PKCS12 (JKS is not read)")
    return kind


def parse_acceptor(name: str, url: str, *, base_dir: str = ".") -> Acceptor | None:
    """The acceptor of ``url`` (the module docstring), or None (with a WARNING) when it does
    not serve STOMP or is not ``tcp://``. Relative key and trust store paths are resolved
    against ``base_dir``. Raises ConfigError naming the acceptor for a bad value."""
    split = urlsplit(url.strip())
    if split.scheme != "tcp":
        log.warning("acceptor %r: %s:// is not served (only tcp://)", name, split.scheme)
        return None
    try:
        host, port = split.hostname or "0.0.0.0", 61613 if split.port is None else split.port
    except ValueError:
        raise invalid(f"acceptor {name!r}", url, "tcp://HOST:PORT?params") from None
    params: dict[str, str] = {}
    for part in filter(None, split.query.split(";")):
        key, _, value = part.partition("=")
        params[key.strip()] = value.strip()
    protocols = params.get("protocols")
    if protocols is not None and "STOMP" not in {p.strip().upper() for p in protocols.split(",")}:
        log.warning("acceptor %r serves %s, not STOMP: not served", name, protocols)
        return None
    for key in sorted(set(params) - _SERVED):
        log.warning("acceptor %r: parameter %s is not served by this broker; ignored", name, key)

    def path(key: str) -> str | None:
        value = params.get(key)
        return None if value is None else os.path.join(base_dir, value)

    def secret(key: str) -> str | None:
        value = params.get(key)
        return None if value is None else decode_value(value, setting=f"acceptor {name} {key}")

    frame = params.get("stompMaxFramePayloadLength")
    send, receive = params.get("tcpSendBufferSize"), params.get("tcpReceiveBufferSize")
    acceptor = Acceptor(
        name=name,
        host=host,
        port=port,
        tls=_bool(name, "sslEnabled", params.get("sslEnabled", "false")),
        key_store=path("keyStorePath"),
        key_store_type=_store_type(
            name, "keyStoreType", params.get("keyStoreType"), params.get("keyStorePath")
        ),
        key_store_password=secret("keyStorePassword"),
        need_client_auth=_bool(name, "needClientAuth", params.get("needClientAuth", "false")),
        trust_store=path("trustStorePath"),
        trust_store_type=_store_type(
            name, "trustStoreType", params.get("trustStoreType"), params.get("trustStorePath")
        ),
        trust_store_password=secret("trustStorePassword"),
        connections_allowed=_int(
            name, "connectionsAllowed", params.get("connectionsAllowed", "-1")
        ),
        max_frame_size=None
        if frame is None
        else parse_size(frame, key=f"acceptor {name} stompMaxFramePayloadLength"),
        ttl_modifier=_float(
            name,
            "heartBeatToConnectionTtlModifier",
            params.get("heartBeatToConnectionTtlModifier", "2.0"),
        ),
        send_buffer=None if send is None else _int(name, "tcpSendBufferSize", send),
        receive_buffer=None if receive is None else _int(name, "tcpReceiveBufferSize", receive),
        no_delay=_bool(name, "tcpNoDelay", params.get("tcpNoDelay", "true")),
    )
    if acceptor.tls and acceptor.key_store is None:
        raise ConfigError(
            f"acceptor {name!r} has sslEnabled=true and no keyStorePath",
            key=f"acceptor {name} keyStorePath", value=None,
            hint="keyStorePath=broker.pem (the key and certificate in one PEM file) or a .p12",
        )  # fmt: skip
    if acceptor.need_client_auth and acceptor.trust_store is None:
        raise ConfigError(
            f"acceptor {name!r} has needClientAuth=true and no trustStorePath",
            key=f"acceptor {name} trustStorePath", value=None,
            hint="trustStorePath=clients-ca.pem: the CA that signs client certificates",
        )  # fmt: skip
    return acceptor


def _xml_acceptors(path: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for child in core_children(read_core(path)):
        if local_name(child) == "acceptors":
            for acceptor in core_children(child):
                if local_name(acceptor) == "acceptor":
                    name = acceptor.get("name") or f"acceptor-{len(found) + 1}"
                    found[name] = (acceptor.text or "").strip()
    return found


def _toml_acceptors(path: str) -> dict[str, str]:
    with open(path, "rb") as f:
        table = tomllib.load(f).get("broker", {}).get("acceptors", {})
    if not isinstance(table, Mapping) or not all(isinstance(v, str) for v in table.values()):
        raise invalid("broker.acceptors", table, 'a table of name = "tcp://HOST:PORT?params"')
    return dict(table)


def load_acceptors(path: str | os.PathLike[str]) -> list[Acceptor]:
    """The STOMP acceptors the configuration file at ``path`` names, in order (empty when it
    names none: the caller's ``--host``/``--port`` then). Raises ConfigError for a bad
    value."""
    file = os.path.abspath(os.fspath(path))
    urls = _toml_acceptors(file) if file.lower().endswith(".toml") else _xml_acceptors(file)
    parsed = (parse_acceptor(n, u, base_dir=os.path.dirname(file)) for n, u in urls.items())
    return [a for a in parsed if a is not None]


def with_address(acceptor: Acceptor, host: str | None, port: int | None) -> Acceptor:
    """``acceptor`` moved to ``host`` / ``port`` where they are given."""
    return replace(
        acceptor, host=host or acceptor.host, port=acceptor.port if port is None else port
    )
