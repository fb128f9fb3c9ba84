"""Helpers of the STOMP broker tests: a broker on a thread, stomp.py clients that record
what they get, and raw-socket frames.

Thread-safety: a :class:`Recorder` is fed by stomp.py's receiver thread and read by the test's
thread (a condition guards it); the rest belongs to the test's thread.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import stomp

from store import StoreConfig
from store.stomp.server import StompBroker, open_broker

WAIT = 10.0  # seconds any wait in these tests gives up after


@contextlib.contextmanager
def running_broker(config: StoreConfig, **options: Any) -> Iterator[StompBroker]:
    """A broker on ``config`` serving on an ephemeral loopback port, on a thread; shut down
    and closed (store included) on exit."""
    broker = open_broker(config, host="127.0.0.1", port=0, **options)
    thread = threading.Thread(target=broker.serve_forever, name="stomp-broker", daemon=True)
    thread.start()
    try:
        yield broker
    finally:
        broker.shutdown()
        thread.join(WAIT)
        broker.close()


class Recorder(stomp.ConnectionListener):  # type: ignore[misc]
    """Records MESSAGE frames, RECEIPT ids and ERROR frames as stomp.py hands them over."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.messages: list[Any] = []
        self.receipts: set[str] = set()
        self.errors: list[Any] = []
        self.disconnected = False

    def on_message(self, frame: Any) -> None:
        with self.cond:
            self.messages.append(frame)
            self.cond.notify_all()

    def on_receipt(self, frame: Any) -> None:
        with self.cond:
            self.receipts.add(frame.headers["receipt-id"])
            self.cond.notify_all()

    def on_error(self, frame: Any) -> None:
        with self.cond:
            self.errors.append(frame)
            self.cond.notify_all()

    def on_disconnected(self) -> None:
        with self.cond:
            self.disconnected = True
            self.cond.notify_all()

    def wait_messages(self, n: int, timeout: float = WAIT) -> list[Any]:
        """The first ``n`` messages; AssertionError when fewer came in ``timeout``."""
        with self.cond:
            ok = self.cond.wait_for(lambda: len(self.messages) >= n, timeout)
            assert ok, f"{len(self.messages)} of {n} messages in {timeout} s"
            return list(self.messages[:n])

    def wait_receipts(self, ids: set[str], timeout: float = WAIT) -> None:
        with self.cond:
            ok = self.cond.wait_for(lambda: ids <= self.receipts, timeout)
            assert ok, f"receipts missing: {sorted(ids - self.receipts)[:5]}"

    def quiet(self, seconds: float = 0.5) -> list[Any]:
        """Every message after ``seconds`` with nothing new."""
        while True:
            with self.cond:
                n = len(self.messages)
                self.cond.wait(seconds)
                if len(self.messages) == n:
                    return list(self.messages)


def client(
    port: int, *, binary: bool = False, client_id: str | None = None
) -> tuple[Any, Recorder]:
    """A connected STOMP 1.1 stomp.py connection to the loopback broker and its recorder
    (bodies as str, or bytes with ``binary``; ``client_id`` as CONNECT's ``client-id``)."""
    conn = stomp.Connection11(
        [("127.0.0.1", port)],
        heartbeats=(0, 0),
        auto_content_length=True,
        auto_decode=not binary,
    )
    rec = Recorder()
    conn.set_listener("rec", rec)
    conn.connect(wait=True, headers={"client-id": client_id} if client_id else {})
    return conn, rec


def bye(conn: Any, rec: Recorder) -> None:
    """DISCONNECT with a receipt and wait for it: every frame sent before it was handled."""
    receipt = f"bye-{time.monotonic_ns()}"
    conn.disconnect(receipt=receipt)
    rec.wait_receipts({receipt})


def send_all(conn: Any, rec: Recorder, destination: str, bodies: list[str]) -> None:
    """SEND each body with a receipt; returns once every receipt came."""
    ids = set()
    for i, body in enumerate(bodies):
        receipt = f"s-{destination}-{i}-{time.monotonic_ns()}"
        ids.add(receipt)
        conn.send(destination, body, headers={"receipt": receipt, "n": str(i)})
    rec.wait_receipts(ids)


def raw_connect(port: int) -> socket.socket:
    """A raw socket to the broker (timeout ``WAIT``)."""
    return socket.create_connection(("127.0.0.1", port), timeout=WAIT)


Received = tuple[str, dict[str, str], bytes]


def read_frames(sock: socket.socket, n: int, timeout: float = WAIT) -> list[Received]:
    """Read ``n`` frames (command, headers, body) from ``sock``; fewer when it closes."""
    from store.stomp.frames import FrameReader

    reader = FrameReader()
    out: list[Received] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            break
        if not data:
            break
        reader.append(data)
        out.extend((f.cmd, dict(f.headers), f.body) for f in reader)
    return out


def write_toml(path: Path, mapping: dict[str, Any]) -> Path:
    """Write a store configuration mapping (flat keys, one level of tables) as TOML."""

    def value(v: Any) -> str:
        return (
            str(v).lower()
            if isinstance(v, bool)
            else repr(v)
            if isinstance(v, int)
            else ('"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"')
        )

    lines = [f"{k} = {value(v)}" for k, v in mapping.items() if not isinstance(v, dict)]
    for k, table in mapping.items():
        if isinstance(table, dict):
            lines.append(f"[{k}]")
            lines += [f"{tk} = {value(tv)}" for tk, tv in table.items() if not isinstance(tv, dict)]
    path.write_text("\n".join(lines) + "\n")
    return path


class BrokerProcess:
    """``store broker --config PATH --port PORT EXTRA…`` in a subprocess of this interpreter
        (``port`` 0: any free port). With ``wait`` the constructor returns once it listens
        (``port``); otherwise call :meth:`wait_listening` (a backup of an HA pair listens only
        once live). Without ``security`` it runs with ``--no-security``; ``port`` None: no
    ``--port`` (the configuration's acceptors)."""

    def __init__(
        self,
        config_path: Path,
        *extra: str,
        wait: bool = True,
        port: int | None = 0,
        security: bool = False,
    ) -> None:
        from tests.support.cli import ROOT

        if not security:  # the tests of logins and permissions ask for them
            extra = ("--no-security", *extra)

        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "store.cli.main", "-q", "broker", "--config",
             str(config_path), *(["--port", str(port)] if port is not None else []), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": path},
        )  # fmt: skip
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.port = 0
        if wait:
            self.wait_listening(60)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put("")

    def wait_listening(self, timeout: float) -> int:
        """The port, once the broker printed ``listening on``; AssertionError after
        ``timeout`` seconds or when it exits first."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"broker not listening after {timeout} s") from None
        if not line.startswith("listening on "):
            self.proc.kill()
            assert self.proc.stderr is not None
            raise AssertionError(f"broker did not start: {line!r} {self.proc.stderr.read()!r}")
        self.port = int(line.rsplit(":", 1)[1])
        return self.port

    def listening_within(self, timeout: float) -> bool:
        """True when the broker printed ``listening on`` within ``timeout`` seconds."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return False
        self._lines.put(line)  # wait_listening reads it again
        return True

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(WAIT)

    def terminate(self) -> int:
        """SIGTERM; returns the exit status."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(WAIT)


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports free at the time of the call (bound, then released)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class FailoverClient(Recorder):
    """A stomp.py connection given several loopback ports (tried in that order, as stomp.py
    does), that reconnects whenever it loses its connection and subscribes again on each
    CONNECTED (``subscribe``: destination, client-individual acks, id ``s``).

    stomp.py 9 does not reconnect by itself: its receiver thread ends and calls
    ``on_disconnected``. A reconnecting thread here then waits for that thread (and the
    heart-beat thread) to end, calls ``connect`` again (stomp.py walks the port list until one
    accepts) and gives a connection that sends no CONNECTED in ``connect_timeout`` seconds up
    (a SIGSTOPped broker still completes TCP handshakes), so the next attempt starts over.
    ``ports`` lists the port of each CONNECTED, in order (``attempt_errors`` the attempts
    that failed before sending CONNECT); the constructor returns after the first
    (AssertionError after 30 s).

    Thread-safety: stomp.py's threads and the reconnecting thread update the record under
    ``cond``; the test's thread reads it (the :class:`Recorder` waits) and sends.
    """

    def __init__(
        self,
        ports: list[int],
        *,
        subscribe: str | None = None,
        heartbeats: tuple[int, int] = (0, 0),
        connect_timeout: float = 5.0,
    ) -> None:
        super().__init__()
        self.conn = stomp.Connection11(
            [("127.0.0.1", p) for p in ports], heartbeats=heartbeats,
            heart_beat_receive_scale=2.5, auto_content_length=True,
            reconnect_sleep_initial=0.1, reconnect_sleep_increase=0.5,
            reconnect_sleep_max=0.5, reconnect_attempts_max=200,
        )  # fmt: skip
        self.conn.set_listener("rec", self)
        self.destination = subscribe
        self.connect_timeout = connect_timeout
        self.ports: list[int] = []
        self.attempt_errors: list[Exception] = []
        self._closing = False
        self._lost = threading.Event()
        self._lost.set()  # the first connection is made as any other
        threading.Thread(target=self._reconnect, name="failover", daemon=True).start()
        self.wait_connections(1)

    def on_connected(self, frame: Any) -> None:
        with self.cond:
            self.ports.append(self.conn.transport.current_host_and_port[1])
            self.cond.notify_all()
        if self.destination:
            self.conn.subscribe(self.destination, id="s", ack="client-individual")

    def on_disconnected(self) -> None:
        super().on_disconnected()
        if not self._closing:
            self._lost.set()

    def wait_connections(self, n: int, timeout: float = 30.0) -> list[int]:
        """The ports of the first ``n`` connections; AssertionError when fewer came in
        ``timeout`` seconds."""
        with self.cond:
            ok = self.cond.wait_for(lambda: len(self.ports) >= n, timeout)
            assert ok, f"{len(self.ports)} of {n} connections in {timeout} s: {self.ports}"
            return list(self.ports[:n])

    def close(self) -> None:
        """DISCONNECT (with a receipt, waited for) when connected; no reconnection after."""
        self._closing = True
        self._lost.set()
        if self.conn.is_connected():
            bye(self.conn, self)
        else:
            self.conn.transport.disconnect_socket()

    def abandon(self) -> None:
        """Stop reconnecting and drop the connection without a DISCONNECT (clean-up)."""
        self._closing = True
        self._lost.set()
        self.conn.transport.disconnect_socket()

    def _reconnect(self) -> None:
        transport = self.conn.transport
        while True:
            self._lost.wait()
            if self._closing:
                return
            for thread in (transport.io_thread, self.conn.heartbeat_thread):
                if thread is not None:  # stomp.py's threads use the transport's socket
                    thread.join(WAIT)
            self._lost.clear()  # after the join: the old connection's own notice too
            try:
                self.conn.connect(wait=False)
            except (stomp.exception.StompException, OSError) as exc:
                # no port accepted, or the connection was reset before the CONNECT frame
                # went out (a port of a dying broker accepts, then resets)
                self.attempt_errors.append(exc)
                transport.disconnect_socket()
                self._lost.set()
                continue
            with self.cond:
                if self.cond.wait_for(self.conn.is_connected, self.connect_timeout):
                    continue
            transport.disconnect_socket()  # notifies on_disconnected: one more attempt
