"""Apache ActiveMQ 5's JDBC adapter through the same PostgreSQL restarts as ``bench.db_outage``
(issue 41's side-by-side reference), on a private cluster (:mod:`tests.support.pg_cluster`).

One broker (Debian's ``activemq``, its JDBC adapter on the private cluster, :mod:`bench.activemq`,
Debian's default configuration otherwise) with a STOMP connector; one producer sends persistent
messages with a receipt each, one consumer acknowledges them (``client-individual``). Each round
restarts the cluster (``pg_ctl restart -m fast``, or ``-m immediate`` with ``--crash``); the
clock starts when ``pg_ctl start`` returns and stops at the first RECEIPT of a SEND made after
it. Then for ``--after`` seconds it counts receipts, ERROR frames and lost STOMP connections
(a broker that restarts itself, or its JVM exiting, shows there as a second outage). At the end
every queue is drained: messages receipted and never found (lost) and found twice or on
``ActiveMQ.DLQ`` (duplicates) are counted.

Run: ``python -m bench.activemq_outage [--rounds N] [--after S] [--crash]`` (needs
``apt-get install activemq libpostgresql-jdbc-java``; prints what is missing otherwise).

Thread-safety: the main thread restarts the cluster; the producer and consumer threads each
own their connection and record under a lock.
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from bench import activemq
from bench.db_outage import _pct
from tests.support.pg_cluster import private_cluster

QUEUE = "/queue/bench"
DLQ = "/queue/ActiveMQ.DLQ"


class Stomp:
    """A minimal blocking STOMP 1.2 client over one socket (frames in, frames out)."""

    def __init__(self, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        self.send("CONNECT", {"accept-version": "1.2", "host": "localhost"})
        command, _, _ = self.read()
        if command != "CONNECTED":
            raise ConnectionError(f"STOMP CONNECT answered {command}")

    def send(self, command: str, headers: dict[str, str], body: bytes = b"") -> None:
        head = "".join(f"{k}:{v}\n" for k, v in headers.items())
        self.sock.sendall(f"{command}\n{head}\n".encode() + body + b"\x00")

    def read(self) -> tuple[str, dict[str, str], bytes]:
        """The next frame (heart-beat newlines skipped). Raises ConnectionError at EOF."""
        while b"\x00" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self.buf += chunk
        frame, self.buf = self.buf.split(b"\x00", 1)
        frame = frame.lstrip(b"\r\n")
        head, _, body = frame.partition(b"\n\n")
        lines = head.decode().split("\n")
        headers = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
        return lines[0], headers, body

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


@dataclass
class Counts:
    receipted: dict[str, float] = field(default_factory=dict)  # body -> when receipted
    errors: int = 0  # ERROR frames and lost connections
    error_at: list[float] = field(default_factory=list)
    delivered: list[str] = field(default_factory=list)  # bodies the consumer acked
    lock: threading.Lock = field(default_factory=threading.Lock)


def _produce(port: int, counts: Counts, stop: threading.Event) -> None:
    client: Stomp | None = None
    n = 0
    while not stop.is_set():
        try:
            if client is None:
                client = Stomp(port)
            body = f"m{n}"
            n += 1
            client.send(
                "SEND",
                {"destination": QUEUE, "persistent": "true", "receipt": body},
                body.encode(),
            )
            command, headers, _ = client.read()
            if command == "RECEIPT" and headers.get("receipt-id") == body:
                with counts.lock:
                    counts.receipted[body] = time.monotonic()
                continue
            raise ConnectionError(f"SEND answered {command}")
        except (OSError, ConnectionError):
            with counts.lock:
                counts.errors += 1
                counts.error_at.append(time.monotonic())
            if client is not None:
                client.close()
            client = None
            time.sleep(0.01)
    if client is not None:
        client.close()


def _consume(port: int, counts: Counts, stop: threading.Event) -> None:
    client: Stomp | None = None
    while not stop.is_set():
        try:
            if client is None:
                client = Stomp(port)
                client.sock.settimeout(0.5)
                client.send(
                    "SUBSCRIBE", {"destination": QUEUE, "id": "1", "ack": "client-individual"}
                )
            try:
                command, headers, body = client.read()
            except TimeoutError:
                continue
            if command == "MESSAGE":
                client.send("ACK", {"id": headers.get("ack", headers.get("message-id", ""))})
                with counts.lock:
                    counts.delivered.append(body.decode())
        except (OSError, ConnectionError):
            if client is not None:
                client.close()
            client = None
            time.sleep(0.05)
    if client is not None:
        client.close()


def _drain(port: int, destination: str) -> list[str]:
    """Every body left on ``destination``, acknowledged as read. A broker that closes the
    connection meanwhile (it restarts itself after an outage it found late) is connected to
    again, for up to 60 s."""
    found: list[str] = []
    deadline = time.monotonic() + 60
    while True:
        try:
            client = Stomp(port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
            continue
        client.sock.settimeout(2.0)
        try:
            client.send("SUBSCRIBE", {"destination": destination, "id": "d", "ack": "auto"})
            while True:
                command, _, body = client.read()
                if command == "MESSAGE":
                    found.append(body.decode())
        except TimeoutError:
            return found
        except ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
        finally:
            client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--after", type=float, default=10.0)
    parser.add_argument("--crash", action="store_true", help="pg_ctl stop -m immediate")
    args = parser.parse_args()
    console = Console(stderr=True)
    gap = activemq.missing("jdbc")
    if gap is not None:
        Console().print(f"ActiveMQ: not measured: {gap}")
        return
    firsts: list[float] = []
    second_outages = 0
    with private_cluster() as cluster, tempfile.TemporaryDirectory() as tmp:
        setup = activemq.configure("jdbc", Path(tmp) / "amq", pg_port=cluster.port,
                                   database="postgres")  # fmt: skip
        process = activemq.launch(setup)
        try:
            activemq.wait_answers(setup, process)
            counts = Counts()
            stop = threading.Event()
            threads = [
                threading.Thread(target=_produce, args=(setup.port, counts, stop)),
                threading.Thread(target=_consume, args=(setup.port, counts, stop)),
            ]
            for t in threads:
                t.start()
            time.sleep(3.0)
            for n in range(args.rounds):
                cluster.stop("immediate" if args.crash else "fast")
                cluster.start()
                back = time.monotonic()
                deadline = back + 60
                first = None
                while first is None and time.monotonic() < deadline:
                    with counts.lock:
                        after = [t for t in counts.receipted.values() if t > back]
                    first = min(after) if after else None
                    time.sleep(0.005)
                if first is None:
                    console.print(f"round {n + 1}: no receipt within 60 s of the restart")
                    continue
                firsts.append(first - back)
                time.sleep(args.after)
                with counts.lock:
                    later = [t for t in counts.error_at if first + 1.0 < t <= first + args.after]
                second_outages += bool(later)
                alive = "" if process.poll() is None else " (the broker's JVM has exited)"
                console.print(
                    f"round {n + 1}: first receipt {1000 * (first - back):.0f} ms after, "
                    f"{len(later)} failed sends later{alive}"
                )
                if process.poll() is not None:
                    break
            stop.set()
            for t in threads:
                t.join(30)
            left = _drain(setup.port, QUEUE) if process.poll() is None else []
            dead = _drain(setup.port, DLQ) if process.poll() is None else []
        finally:
            activemq.stop(process)
    if not firsts:
        Console().print("no round measured")
        return
    seen = counts.delivered + left + dead
    lost = set(counts.receipted) - set(seen)
    Console().print(
        f"ActiveMQ {activemq.version()} JDBC, PostgreSQL {'crash' if args.crash else 'restart'}"
        f" x {len(firsts)}: first receipted send after the restart (ms) min "
        f"{1000 * min(firsts):.0f}, p50 {1000 * _pct(firsts, 50):.0f}, p99 "
        f"{1000 * _pct(firsts, 99):.0f}, max {1000 * max(firsts):.0f}; rounds with a later "
        f"outage of its own {second_outages}; failed sends {counts.errors}; delivered "
        f"{len(counts.delivered)}, left {len(left)}, on ActiveMQ.DLQ {len(dead)}; duplicates "
        f"{len(seen) - len(set(seen))}; receipted and never seen {len(lost)}"
    )


if __name__ == "__main__":
    main()
