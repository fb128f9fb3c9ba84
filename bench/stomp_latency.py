"""Where a window-1 round trip of our STOMP broker goes (issue 43): one producer sends a SEND
and waits for its RECEIPT, ``--messages`` times, through ``store broker`` (file store with
``--journal-type``, ASYNCIO by default as the store's; its own process); beside it in the
same run, the parts it is made of:

- ``round trip``: SEND to RECEIPT as the client sees it (mean and median, microseconds);
- ``flush wait``: the broker's waits for durability per SEND, from its own
  ``store_flush_seconds`` histogram (``--metrics``), scraped before and after;
- ``loopback echo``: the same client, the same bytes, against a Python echo server in a
  process of its own (one ``recv`` and one ``sendall`` per frame): the floor any Python
  broker on this machine pays for the sockets, the two processes and the wake-ups;
- ``fdatasync``: the disk's own sync of a 4 KiB write in the store's folder (the reference
  the journal's flush is judged against);
- what is left: the broker's Python between the socket and the store (reading the frame,
  the storage manager's send, the RECEIPT), round trip minus flush wait minus echo.

Run from the repository root: ``python -m bench.stomp_latency [--messages 3000]
[--repeat 3]``. Benchmarks report, they never assert.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.broker_deep import CLI

_ECHO = """
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1], flush=True)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
receipt = b"RECEIPT\\nreceipt-id:r\\n\\n\\0"
while True:
    data = c.recv(65536)
    if not data:
        break
    c.sendall(receipt)
"""


def _frame(size: int) -> bytes:
    return (b"SEND\ndestination:/queue/latency\nreceipt:r\ncontent-length:%d\n\n" % size
            + b"x" * size + b"\0")  # fmt: skip


def _round_trips(port: int, messages: int, size: int, connect: bool) -> list[float]:
    """Seconds of each SEND-to-RECEIPT round trip of one window-1 client."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if connect:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:bench\n\n\0")
        while b"\0" not in sock.recv(4096):
            pass
    frame, out = _frame(size), []
    for _ in range(messages):
        began = time.perf_counter()
        sock.sendall(frame)
        buf = b""
        while b"\0" not in buf:
            buf += sock.recv(4096)
        out.append(time.perf_counter() - began)
    sock.close()
    return out


def _flush_totals(metrics_port: int) -> tuple[float, float]:
    """(sum of seconds, count) of the broker's store_flush_seconds histogram."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/").read().decode()
    values = {}
    for line in text.splitlines():
        if line.startswith(("store_flush_seconds_sum", "store_flush_seconds_count")):
            name, value = line.split()[:2]
            values[name] = float(value)
    return values["store_flush_seconds_sum"], values["store_flush_seconds_count"]


def _fdatasync(folder: Path, times: int = 1000) -> float:
    """Mean seconds of a 4 KiB pwrite + fdatasync in ``folder``."""
    path = folder / "sync-probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        block = b"s" * 4096
        began = time.perf_counter()
        for i in range(times):
            os.pwrite(fd, block, (i % 16) * 4096)
            os.fdatasync(fd)
        return (time.perf_counter() - began) / times
    finally:
        os.close(fd)
        path.unlink()


def run(messages: int, size: int, journal_type: str) -> dict[str, float]:
    """One run's figures (microseconds per message)."""
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        base = Path(tmp).resolve()
        config = base / "store.toml"
        config.write_text(
            "".join(f'{k}-directory = "{base / k}"\n' for k in ("journal", "bindings", "paging"))
            + f'large-messages-directory = "{base / "large"}"\n'
            + f'journal-type = "{journal_type}"\n'
        )
        child = subprocess.Popen(
            [sys.executable, "-c", CLI, "-q", "broker", "--config", str(config), "--port", "0",
             "--no-security", "--metrics", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert child.stdout is not None and child.stderr is not None
            line = ""
            while "metrics on" not in line:  # stderr: "metrics on http://HOST:PORT/"
                line = child.stderr.readline()
                if not line:
                    raise SystemExit("store broker ended before serving its metrics")
            metrics = int(line.strip().rstrip("/").rsplit(":", 1)[1])
            port = int(child.stdout.readline().rsplit(":", 1)[1])  # "listening on HOST:PORT"
            _round_trips(port, 200, size, connect=True)  # warm-up
            before = _flush_totals(metrics)
            trips = _round_trips(port, messages, size, connect=True)
            after = _flush_totals(metrics)
        finally:
            child.send_signal(signal.SIGTERM)
            child.wait(60)
        sync = _fdatasync(base)
    echo = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True)
    try:
        assert echo.stdout is not None
        echo_port = int(echo.stdout.readline())
        echoes = _round_trips(echo_port, messages, size, connect=False)
    finally:
        echo.kill()
        echo.wait()
    flush_us = (after[0] - before[0]) / messages * 1e6
    mean_us = statistics.mean(trips) * 1e6
    echo_us = statistics.mean(echoes) * 1e6
    return {
        "round trip (mean)": mean_us,
        "round trip (median)": statistics.median(trips) * 1e6,
        "flush wait per SEND": flush_us,
        "flushes per SEND": (after[1] - before[1]) / messages,
        "loopback echo (mean)": echo_us,
        "fdatasync 4 KiB": sync * 1e6,
        "left: the broker's Python": mean_us - flush_us - echo_us,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--journal-type", default="ASYNCIO", choices=("ASYNCIO", "NIO", "MAPPED"))
    args = parser.parse_args()
    runs = [run(args.messages, args.size, args.journal_type) for _ in range(args.repeat)]
    table = Table(
        title=f"a window-1 SEND of {args.size} B, {args.journal_type} journal, SEND to RECEIPT"
        " (µs per message)"
    )
    for column in ("part", "median of runs", "runs"):
        table.add_column(column)
    for name in runs[0]:
        values = [r[name] for r in runs]
        fmt = "{:.2f}" if name.startswith("flushes") else "{:,.0f}"
        table.add_row(name, fmt.format(statistics.median(values)),
                      " ".join(fmt.format(v) for v in values))  # fmt: skip
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
