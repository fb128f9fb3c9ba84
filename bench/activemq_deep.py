"""ActiveMQ 5 with N messages waiting in one queue, for ``bench.deep_queues`` (issue 27, and
issue 29's "start-up of a broker holding 1,000,000 messages to the first MESSAGE frame").

:func:`restart_figures` configures one broker (``bench.activemq``: KahaDB, or its JDBC adapter
on the shared PostgreSQL), starts it, fills :data:`DESTINATION` with N persistent 100-byte
messages over STOMP, stops it with SIGTERM (a clean shutdown: KahaDB checkpoints its index),
starts it again on the same data and times, from launching the java process, when its STOMP
port answers and when a consumer (CONNECT, then SUBSCRIBE with ``ack:client-individual``,
retried until the port answers) receives the first MESSAGE frame. The restarted process's
peak RSS is its ``VmHWM`` in ``/proc/<pid>/status``, read after that frame and before it is
stopped. Its data (folder, JDBC tables) is removed afterwards.

The fill: :data:`PRODUCERS` connections, each sending its share in STOMP transactions of
:data:`BATCH` SENDs (``persistent:true``) closed by a COMMIT that carries a receipt, so each
batch is one store commit (KahaDB: one journal sync; JDBC: one database transaction) and
every message is stored once the last receipt arrives. One SEND with a receipt each is
what ``bench.stomp`` measures; here, at a few hundred per second on this machine, 1,000,000
would take most of an hour.

The STOMP client is a few lines over a socket (no stomp.py threads): frames are
command, headers, blank line, body, NUL; bodies here hold no NUL.

Thread-safety: one call at a time per process.
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench import activemq

DESTINATION = "/queue/deep.q"
PRODUCERS = 4
BATCH = 1000
FILL_SECONDS = 3600.0


class _Stomp:
    """A blocking STOMP 1.2 connection on loopback."""

    def __init__(self, port: int, timeout: float = 120.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout)
        self.buf = b""
        self.send_frame("CONNECT", {"accept-version": "1.2", "host": "localhost"})
        command, headers = self.read_frame()
        if command != "CONNECTED":
            raise RuntimeError(f"ActiveMQ answered CONNECT with {command} {headers}")

    @staticmethod
    def frame(command: str, headers: dict[str, str], body: bytes = b"") -> bytes:
        head = "".join(f"{k}:{v}\n" for k, v in headers.items())
        return f"{command}\n{head}\n".encode() + body + b"\0"

    def send_frame(self, command: str, headers: dict[str, str], body: bytes = b"") -> None:
        self.sock.sendall(self.frame(command, headers, body))

    def read_frame(self) -> tuple[str, dict[str, str]]:
        """The next frame's command and headers (heart-beat EOLs skipped). Raises
        ConnectionError when the broker closes the connection."""
        while b"\0" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("ActiveMQ closed the STOMP connection")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        head = raw.lstrip(b"\r\n").split(b"\n\n", 1)[0].decode()
        command, *lines = head.split("\n")
        return command, dict(line.split(":", 1) for line in lines if ":" in line)

    def close(self) -> None:
        try:
            self.send_frame("DISCONNECT", {})
        finally:
            self.sock.close()


def _produce(port: int, count: int, body: bytes, tag: str, errors: list[BaseException]) -> None:
    try:
        client = _Stomp(port)
        send = {"destination": DESTINATION, "persistent": "true", "content-length": str(len(body))}
        done = 0
        while done < count:
            n = min(BATCH, count - done)
            tx = f"{tag}-{done}"
            frames = [client.frame("BEGIN", {"transaction": tx})]
            frames += [client.frame("SEND", {**send, "transaction": tx}, body)] * n
            frames.append(client.frame("COMMIT", {"transaction": tx, "receipt": tx}))
            client.sock.sendall(b"".join(frames))
            command, headers = client.read_frame()
            if command != "RECEIPT" or headers.get("receipt-id") != tx:
                raise RuntimeError(f"ActiveMQ answered COMMIT with {command} {headers}")
            done += n
        client.close()
    except BaseException as exc:  # reported by fill()
        errors.append(exc)


def fill(port: int, messages: int, body: bytes) -> float:
    """Store ``messages`` persistent messages of ``body`` in :data:`DESTINATION`; returns the
    seconds it took. Raises the first producer's error."""
    errors: list[BaseException] = []
    shares = [messages // PRODUCERS + (i < messages % PRODUCERS) for i in range(PRODUCERS)]
    threads = [
        threading.Thread(target=_produce, args=(port, n, body, f"p{i}", errors))
        for i, n in enumerate(shares)
    ]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(FILL_SECONDS)
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def _first_message(setup: activemq.Setup, process: subprocess.Popen[bytes]) -> tuple[float, float]:
    """Subscribe as soon as the port answers; return when it answered and when the first
    MESSAGE frame arrived (``time.perf_counter``)."""
    activemq.wait_answers(setup, process)
    answered = time.perf_counter()
    client = _Stomp(setup.port)
    client.send_frame(
        "SUBSCRIBE", {"destination": DESTINATION, "id": "0", "ack": "client-individual"}
    )
    command, headers = client.read_frame()
    if command != "MESSAGE":
        raise RuntimeError(f"ActiveMQ sent {command} {headers} before any MESSAGE")
    received = time.perf_counter()
    client.sock.close()
    return answered, received


def _vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no VmHWM for process {pid}")


def restart_figures(store: str, messages: int, body: bytes) -> dict[str, float]:
    """Fill a fresh broker on ``store`` (``kahadb`` or ``jdbc``) with ``messages``, stop it
    cleanly, restart it and measure (see the module docstring). Returns ``fill_seconds``,
    ``port_seconds`` (launch to the port answering), ``first_message_seconds`` (launch to
    the first MESSAGE) and ``peak_rss_mb``. Raises RuntimeError when the broker fails."""
    with tempfile.TemporaryDirectory(prefix="amq-deep-") as tmp:
        setup = activemq.configure(store, Path(tmp) / "activemq")
        try:
            process = activemq.launch(setup)
            try:
                activemq.wait_answers(setup, process)
                fill_seconds = fill(setup.port, messages, body)
            finally:
                activemq.stop(process)
            launched = time.perf_counter()
            process = activemq.launch(setup)
            try:
                answered, received = _first_message(setup, process)
                peak = _vm_hwm_mb(process.pid)
            finally:
                activemq.stop(process)
        finally:
            activemq.remove(setup)
    return {
        "fill_seconds": fill_seconds,
        "port_seconds": answered - launched,
        "first_message_seconds": received - launched,
        "peak_rss_mb": peak,
    }
