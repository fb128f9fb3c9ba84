"""A loopback TCP proxy a test controls, to cut the network between the store and its database
without touching the database (the shared servers stay up).

:class:`TcpProxy` listens on a free port of 127.0.0.1 and forwards every connection to
``target``. :meth:`cut` makes it a black hole: bytes in flight stay unread and unsent in both
directions and new connections get no answer (they are accepted, then left hanging), as a
network partition does: nothing is refused, everything waits. :meth:`heal` ends the cut:
with ``reset`` (the default) every connection made before is closed with a reset, as a
partition that outlived the peers' TCP state does; without it they carry on.

Thread-safety: the test thread calls :meth:`cut`, :meth:`heal` and :meth:`close`; one thread
accepts and one pumps each direction of each connection.
"""

from __future__ import annotations

import select
import socket
import struct
import threading

__all__ = ["TcpProxy"]


class TcpProxy:
    """A proxy to ``target`` (host, port); ``port`` is where it listens."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open = threading.Event()  # set: forwarding; clear: cut
        self._open.set()
        self._closed = False
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        threading.Thread(target=self._accept, daemon=True, name="tcp-proxy").start()

    def cut(self) -> None:
        """From now on nothing passes (module docstring)."""
        self._open.clear()

    def heal(self, *, reset: bool = True) -> None:
        """Forward again; with ``reset``, the connections made before are reset first."""
        if reset:
            with self._lock:
                pairs, self._pairs = self._pairs, []
            for pair in pairs:
                for sock in pair:
                    _reset(sock)
        self._open.set()

    def close(self) -> None:
        self._closed = True
        self._open.set()
        self._listener.close()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                _reset(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self._open.wait()  # a new connection during a cut hangs, unanswered
        try:
            server = socket.create_connection(self.target, timeout=10)
        except OSError:
            _reset(client)
            return
        server.settimeout(None)
        with self._lock:
            self._pairs.append((client, server))
        for src, dst in ((client, server), (server, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while not self._closed:
            self._open.wait()
            try:
                ready, _, _ = select.select([src], [], [], 0.05)
                if not ready or not self._open.is_set():
                    continue
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
            except (OSError, ValueError):  # ValueError: select on a socket another closed
                break
        _reset(dst)
        _reset(src)


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with a TCP reset (SO_LINGER 0). Raises nothing."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass
