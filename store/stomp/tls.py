"""TLS for an acceptor: the server context from its key and trust stores, and a connection's
channel over it.

:func:`server_context` reads a PEM file (the private key and the certificate chain in one
file, as ``keyStoreType=PEM``) or a PKCS#12 file (through ``cryptography``; its key is handed
to the ``ssl`` module in a private temporary file, 0600, removed at once), and with
``needClientAuth`` requires a client certificate signed by a CA of the trust store (PEM or
PKCS#12 certificates). TLS 1.2 at least.

:class:`TlsChannel` is the socket a TLS connection's handler uses. An OpenSSL connection must
not be used by two threads at once, and a broker connection is: its own thread reads while
other connections' threads deliver to it. So the channel keeps the TLS state in memory
(``ssl.SSLObject`` over two ``MemoryBIO``) behind one lock, and only the plain socket is
shared: the reading thread waits on the socket without the lock, and every TLS step (reading
what came, writing a frame) takes it for as long as the step lasts.

Thread-safety: a channel's :meth:`~TlsChannel.recv` belongs to one thread;
:meth:`~TlsChannel.sendall` may be called from any thread.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import tempfile
import threading
import time

from store.errors import ConfigError
from store.stomp.acceptors import Acceptor

__all__ = ["TlsChannel", "server_context"]

#: How long a client has for the TLS handshake (seconds).
HANDSHAKE_TIMEOUT = 10.0
#: The most plain bytes one TLS record holds.
_RECORD = 16384


def _pkcs12(path: str, password: str | None) -> tuple[bytes, bytes, list[bytes]]:
    """(key PEM, certificate PEM, other certificates PEM) of a PKCS#12 file."""
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    with open(path, "rb") as f:
        key, cert, others = pkcs12.load_key_and_certificates(
            f.read(), password.encode() if password else None
        )
    key_pem = b"" if key is None else key.private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()
    )  # fmt: skip
    cert_pem = b"" if cert is None else cert.public_bytes(Encoding.PEM)
    return key_pem, cert_pem, [c.public_bytes(Encoding.PEM) for c in others]


def _fail(acceptor: Acceptor, key: str, path: str | None, exc: Exception) -> ConfigError:
    return ConfigError(
        f"acceptor {acceptor.name!r}: cannot use {key} {path!r}: {exc}",
        key=f"acceptor {acceptor.name} {key}", value=path,
        hint="a PEM file with the key and its certificate, or a PKCS#12 file with its password",
    )  # fmt: skip


def server_context(acceptor: Acceptor) -> ssl.SSLContext:
    """The server TLS context of ``acceptor`` (the module docstring). Raises ConfigError
    naming the acceptor and the store that cannot be read."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        if acceptor.key_store_type == "PKCS12":
            key, cert, chain = _pkcs12(str(acceptor.key_store), acceptor.key_store_password)
            with tempfile.TemporaryDirectory() as folder:
                pem = os.path.join(folder, "key.pem")
                fd = os.open(pem, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(key + cert + b"".join(chain))
                context.load_cert_chain(pem)
        else:
            context.load_cert_chain(str(acceptor.key_store), password=acceptor.key_store_password)
    except (OSError, ValueError, ssl.SSLError) as exc:
        raise _fail(acceptor, "keyStorePath", acceptor.key_store, exc) from None
    if acceptor.need_client_auth:
        context.verify_mode = ssl.CERT_REQUIRED
        try:
            if acceptor.trust_store_type == "PKCS12":
                _key, cert, chain = _pkcs12(
                    str(acceptor.trust_store), acceptor.trust_store_password
                )
                context.load_verify_locations(cadata=(cert + b"".join(chain)).decode())
            else:
                context.load_verify_locations(str(acceptor.trust_store))
        except (OSError, ValueError, ssl.SSLError) as exc:
            raise _fail(acceptor, "trustStorePath", acceptor.trust_store, exc) from None
    return context


class TlsChannel:
    """A TLS connection over ``sock`` (the module docstring): ``recv``, ``sendall``,
    ``shutdown``, ``close``, ``settimeout`` and ``getpeername`` as a socket's."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        self.sock = sock
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._in, self._out, server_side=True)
        self._lock = threading.Lock()
        self._closed = False

    def handshake(self, timeout: float = HANDSHAKE_TIMEOUT) -> None:
        """Complete the handshake within ``timeout`` seconds. Raises ssl.SSLError (a
        refused certificate included) or OSError (TimeoutError past the bound)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                try:
                    self._tls.do_handshake()
                    self._flush()
                    return
                except ssl.SSLWantReadError:
                    self._flush()
                except ssl.SSLError:
                    # A refusal (a client certificate its CA did not sign, say): the alert
                    # saying so goes out first, so the client learns why, not only an end.
                    with contextlib.suppress(OSError):
                        self._flush()
                    raise
            if time.monotonic() > deadline:
                raise TimeoutError("TLS handshake not done in time")
            try:
                if not self._feed():
                    raise ConnectionAbortedError("the client closed during the TLS handshake")
            except TimeoutError:
                continue  # the socket's poll timeout; the handshake's own bound is ``timeout``

    def _flush(self) -> None:
        data = self._out.read()
        if data:
            self.sock.sendall(data)

    def _feed(self) -> bool:
        """Read what the socket has into the TLS state; False at its end. Raises
        TimeoutError when nothing came within the socket's timeout."""
        data = self.sock.recv(65536)
        if not data:
            self._in.write_eof()
            return False
        self._in.write(data)
        return True

    def recv(self, n: int) -> bytes:
        """Up to ``n`` plain bytes; b"" at the end of the connection. Raises TimeoutError as
        the socket does, ssl.SSLError for a broken connection.

        Reads at most one TLS record's worth (16 KiB) at a time: ``SSLObject.read`` allocates
        the whole ``n`` first, and the caller asks again for the rest. Tries the TLS state
        first only when bytes wait in it, so a frame costs one read, not a failed one too."""
        n = min(n, _RECORD)
        while True:
            if self._in.pending or self._tls.pending():
                with self._lock:
                    try:
                        data = self._tls.read(n)
                        if self._out.pending:
                            self._flush()
                        return data
                    except ssl.SSLWantReadError:
                        if self._out.pending:
                            self._flush()
                    except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                        return b""
            if not self._feed():
                with self._lock:
                    try:
                        return self._tls.read(n)
                    except (ssl.SSLWantReadError, ssl.SSLZeroReturnError, ssl.SSLEOFError):
                        return b""

    def sendall(self, data: bytes) -> None:
        """Write ``data``. Raises OSError when the socket is gone or the channel sent its
        close_notify (nothing may follow it: a delivery from another connection's thread
        racing the close would reach the client as data after the end)."""
        with self._lock:
            if self._closed:
                raise BrokenPipeError("the TLS channel is closed (close_notify sent)")
            view = memoryview(data)
            while view:
                written = self._tls.write(view[: 1 << 20])
                view = view[written:]
                self._flush()

    def _close_notify(self) -> None:
        """Send TLS's close_notify once, so the client sees a clean end, not a truncation."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._tls.unwrap()
            except ssl.SSLError:  # SSLWantReadError: the client's close_notify is not awaited
                pass
            with contextlib.suppress(OSError):
                self._flush()

    def shutdown(self, how: int) -> None:
        if how != socket.SHUT_RD:
            self._close_notify()
        self.sock.shutdown(how)

    def close(self) -> None:
        self._close_notify()
        self.sock.close()

    def settimeout(self, value: float | None) -> None:
        self.sock.settimeout(value)

    def getpeername(self) -> object:
        return self.sock.getpeername()

    def fileno(self) -> int:
        return self.sock.fileno()
