"""What TLS costs our STOMP broker: the same window-1 SENDs (each waits for its RECEIPT)
through a plain acceptor and a TLS acceptor of one ``store broker`` process (file store),
side by side in the same run.

The clients are plain blocking sockets, wrapped by Python's ``ssl`` for the TLS acceptor
(a self-signed certificate ``openssl`` makes for the run), one thread per producer: stomp.py's
TLS transport hands every frame to its receiver thread through a queue and a selector, a cost
of the client library that would hide the broker's (``bench.stomp``'s ``ours-file-tls`` rows
show it). Figures: SENDs per second, median of ``--repeat`` runs of ``--seconds``, for 1 and
16 producers and 100 B and 1 KiB bodies, and the ratio TLS / plain (issue 43's target: TLS
within 20 % of plain, so at least 0.80).

Run from the repository root: ``python -m bench.stomp_tls [--seconds 3] [--repeat 3]``.
Benchmarks report, they never assert.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.broker_deep import CLI
from bench.stomp import _certificate


@contextlib.contextmanager
def broker(base: Path) -> Iterator[tuple[int, int, str]]:
    """``store broker`` with a plain and a TLS acceptor on a fresh file store; yields (plain
    port, TLS port, the certificate to trust)."""
    pem, cert = _certificate(base)
    config = base / "store.toml"
    config.write_text(
        "".join(f'{k}-directory = "{base / k}"\n' for k in ("journal", "bindings", "paging"))
        + f'large-messages-directory = "{base / "large"}"\n\n[broker.acceptors]\n'
        'plain = "tcp://127.0.0.1:0"\n'
        f'tls = "tcp://127.0.0.1:0?sslEnabled=true;keyStorePath={pem}"\n'
    )
    child = subprocess.Popen(
        [sys.executable, "-c", CLI, "-q", "broker", "--config", str(config), "--no-security"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        ports = [int(child.stdout.readline().rsplit(":", 1)[1]) for _ in range(2)]
        yield ports[0], ports[1], str(cert)
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(60)


def _connect(port: int, cafile: str | None) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if cafile is not None:
        context = ssl.create_default_context(cafile=cafile)
        sock = context.wrap_socket(sock, server_hostname="127.0.0.1")
    sock.sendall(b"CONNECT\naccept-version:1.2\nhost:bench\n\n\0")
    while b"\0" not in sock.recv(4096):
        pass
    return sock


def rate(port: int, cafile: str | None, producers: int, size: int, seconds: float) -> float:
    """SENDs per second of ``producers`` window-1 producers for ``seconds``."""
    socks = [_connect(port, cafile) for _ in range(producers)]
    counts = [0] * producers
    stop = time.monotonic() + seconds

    def produce(i: int) -> None:
        sock, body = socks[i], b"x" * size
        while time.monotonic() < stop:
            sock.sendall(b"SEND\ndestination:/queue/q%d\nreceipt:r\ncontent-length:%d\n\n"
                         % (i, size) + body + b"\0")  # fmt: skip
            buf = b""
            while b"\0" not in buf:
                buf += sock.recv(4096)
            counts[i] += 1

    start = time.monotonic()
    threads = [threading.Thread(target=produce, args=(i,)) for i in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    for sock in socks:
        sock.close()
    return sum(counts) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    table = Table(title="window-1 SENDs per second: plain and TLS acceptors of one broker")
    for column in ("figure", "plain", "TLS", "TLS/plain", "runs (plain | TLS)"):
        table.add_column(column)
    for producers in (1, 16):
        for size in (100, 1024):
            plain: list[float] = []
            tls: list[float] = []
            for n in range(args.repeat):
                with tempfile.TemporaryDirectory() as tmp, broker(Path(tmp)) as (p, t, ca):
                    for kind in ("plain", "tls") if n % 2 == 0 else ("tls", "plain"):  # fair
                        if kind == "plain":
                            plain.append(rate(p, None, producers, size, args.seconds))
                        else:
                            tls.append(rate(t, ca, producers, size, args.seconds))
            a, b = statistics.median(plain), statistics.median(tls)
            runs = " ".join(f"{r:,.0f}" for r in plain) + " | " + " ".join(f"{r:,.0f}" for r in tls)
            table.add_row(f"send {producers}p {size} B", f"{a:,.0f}", f"{b:,.0f}",
                          f"{b / a:.2f}", runs)  # fmt: skip
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
