"""STOMP over loopback: our broker (``store.stomp`` on the file store and PostgreSQL) beside
coilmq 1.1.0 with its own dbm store and its SQLAlchemy store on the same PostgreSQL, and Apache
ActiveMQ 5 over its STOMP connector (KahaDB, and its JDBC adapter on the same PostgreSQL),
with real stomp.py clients.

Figures (messages per second, median of ``--repeat`` runs of ``--seconds`` each, every run on a
fresh broker and store):

- ``send``: persistent SENDs with receipts, 1 and 16 producers, 100 B and 1 KiB bodies; each
  producer keeps up to ``--window`` SENDs awaiting their RECEIPT (coilmq: 1, since its frame
  reader drops a connection that pipelines, issue 29);
- ``consume``: every message the sends stored, taken by 1 and 16 ``client-individual``
  consumers that ACK each one (no receipts): messages over the time to the last ACK;
- ``consume+ack receipts``: a queue filled for ``--seconds`` by 16 producers (window 100, not
  counted), then taken by 1 and 16 ``client-individual`` consumers whose every ACK asks for a
  RECEIPT and waits for it before the next (issue 43: a careful consumer); only with
  ``--figures consume-receipts``;
- ``send+consume 16+16``: issue 29's figure as it states it, 16 producers (as ``send``) and
  16 ``client-individual`` consumers acking every message, all at once on one queue, for
  ``--seconds``: acks per second.

``ours-file-tls`` is ``ours-file`` with its one acceptor speaking TLS (a self-signed
certificate ``openssl`` makes for the run; the clients trust it): its figures beside
``ours-file``'s are what TLS costs (issue 43's target: within 20 %). ``activemq-kahadb-tls``
is ``activemq-kahadb`` with its STOMP connector on ``stomp+ssl`` (the same kind of
certificate, in a PKCS#12 key store ``openssl`` makes): the peer of ``ours-file-tls``.

The ``ours/ActiveMQ`` column divides each figure of ``ours-file`` by ``activemq-kahadb``'s, of
``ours-file-tls`` by ``activemq-kahadb-tls``'s and of ``ours-postgresql`` by
``activemq-jdbc``'s, when both ran (issue 29's targets: at least 2x for ``send 16p`` and
``consume 16c``).

ActiveMQ (``bench/activemq.py``): Debian's ``activemq`` package, one child JVM per run from a
generated ``activemq.xml`` (STOMP connector only, on a free loopback port; KahaDB on a fresh
folder under the run's temporary folder, or the JDBC adapter with a table prefix of its own,
its tables dropped afterwards), stopped with SIGTERM (SIGKILL after 30 s). Its SENDs carry
``persistent:true``, without which its STOMP connector does not store them. Without the
package (or java, or Debian's PostgreSQL JDBC jar for ``activemq-jdbc``) its targets print
"not installed here" and the others run.

coilmq's SQLAlchemy store (``bench/coilmq_sa.py``, target ``coilmq-sqlalchemy``) needs
SQLAlchemy 1.x, so it runs in a virtualenv of its own, made once with ``python3.11 -m venv``
and pip (``--coilmq-sa-venv``, default ``$STORE_BENCH_COILMQ_SA_VENV`` or
``~/.cache/store-bench/coilmq-sa-venv``), as a child process on a fresh PostgreSQL database
per run (dropped afterwards). When the virtualenv cannot be made the target prints why ("not
installed here") and the others run. That module's docstring says what its store does per
operation: one INSERT and COMMIT per SEND (durable per RECEIPT), and a dequeue that reads
every waiting frame of the queue (its cost grows with depth).

Caveats: our broker (without ``--process``) and coilmq on dbm run in the clients' process
(one GIL for all: their figures are low bounds) while ActiveMQ and coilmq on SQLAlchemy have a
process of their own; each ActiveMQ run is a fresh JVM, so its figures include JIT warm-up;
coilmq's dbm store syncs every 100 operations, not per SEND (it is not durable per RECEIPT as
ours, coilmq's SQLAlchemy store and ActiveMQ are); both coilmq stores are used one call at a
time (coilmq's queue manager holds one lock around each), and coilmq hands a SEND that finds
an idle subscriber straight to it without storing it: in ``send+consume 16+16`` (16 consumers
and 16 producers with one SEND in flight each) coilmq's SQLAlchemy store inserted no frame at
all (counted in PostgreSQL's statistics, bench/RESULTS.md), so coilmq's figure there measures
its frame path, not a store. coilmq's frame reader also drops a consumer whose ACKs arrive
pipelined (``BodyNotTerminated``); ``coilmq-sqlalchemy`` logs a warning when its broker's log
holds tracebacks, and the other consumers take the dropped one's messages.

Start-up of a broker holding 1,000,000 messages is ``bench.deep_queues``'s (beside ActiveMQ).

Run from the repository root: ``python -m bench.stomp [--target ours-file ours-file-tls
ours-postgresql coilmq-dbm coilmq-sqlalchemy activemq-kahadb activemq-kahadb-tls
activemq-jdbc] [--figures send send-consume consume-receipts] [--window N] [--seconds 3]
[--repeat 3] [--process] [--coilmq-sa-venv PATH]``. Benchmarks report, they never assert.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import stomp
from rich.console import Console
from rich.table import Table

from bench import coilmq_sa
from bench.activemq import activemq, missing

TARGETS = (
    "ours-file", "ours-file-tls", "ours-postgresql", "coilmq-dbm", "coilmq-sqlalchemy",
    "activemq-kahadb", "activemq-kahadb-tls", "activemq-jdbc",
)  # fmt: skip
#: The ActiveMQ target each of ours is compared with (the "ours/ActiveMQ" column).
PEERS = {
    "ours-file": "activemq-kahadb",
    "ours-file-tls": "activemq-kahadb-tls",
    "ours-postgresql": "activemq-jdbc",
}
#: Ports that speak TLS (``ours-file-tls``) -> the certificate their clients trust.
TLS: dict[int, str] = {}


def _certificate(base: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 made by ``openssl``: (key and certificate in
    one PEM file, the certificate alone)."""
    import subprocess

    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem",
         "-out", "c.pem", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        cwd=base, check=True, capture_output=True,
    )  # fmt: skip
    both = base / "server.pem"
    both.write_text((base / "k.pem").read_text() + (base / "c.pem").read_text())
    return both, base / "c.pem"


@contextlib.contextmanager
def broker(target: str, base: Path) -> Iterator[int]:
    """A broker of ``target`` on a fresh store under ``base``; yields its port."""
    if target == "activemq-kahadb-tls":
        pem, cert = _certificate(base)
        import subprocess

        subprocess.run(
            ["openssl", "pkcs12", "-export", "-in", "c.pem", "-inkey", "k.pem", "-out",
             "server.p12", "-passout", "pass:bench-tls", "-name", "server"],
            cwd=base, check=True, capture_output=True,
        )  # fmt: skip
        with activemq("kahadb", base / "activemq", (base / "server.p12", "bench-tls")) as port:
            TLS[port] = str(cert)
            yield port
    elif target.startswith("activemq"):
        with activemq(target.removeprefix("activemq-"), base / "activemq") as port:
            yield port
    elif target == "coilmq-sqlalchemy":
        with coilmq_sa.coilmq_sa(base, COILMQ_SA_VENV) as port:
            yield port
    elif target.startswith("ours") and PROCESS:
        with _broker_process(target, base) as port:
            yield port
    elif target.startswith("ours"):
        from store import StoreConfig
        from store.stomp.server import open_broker

        if target in ("ours-file", "ours-file-tls"):
            config = StoreConfig.from_mapping({
                "journal-directory": str(base / "journal"),
                "bindings-directory": str(base / "bindings"),
                "large-messages-directory": str(base / "large"),
                "paging-directory": str(base / "paging"),
            })  # fmt: skip
        else:
            from store.db.migrate import drop_schema, upgrade
            from tests.support.backends import unique_prefix
            from tests.support.db_backends import new_store_mapping

            config = StoreConfig.from_mapping(
                new_store_mapping(base, unique_prefix(), "postgresql")
            )
            upgrade(config)
        acceptors = None
        if target == "ours-file-tls":
            from store.stomp.acceptors import parse_acceptor

            pem, cert = _certificate(base)
            url = f"tcp://127.0.0.1:0?sslEnabled=true;keyStorePath={pem}"
            acceptors = [parse_acceptor("tls", url)]
        b = open_broker(config, port=0, acceptors=acceptors)  # type: ignore[arg-type]
        thread = threading.Thread(target=b.serve_forever, daemon=True)
        thread.start()
        if acceptors:
            TLS[b.address[1]] = str(cert)
        try:
            yield b.address[1]
        finally:
            b.shutdown()
            thread.join()
            b.close()
            if target == "ours-postgresql":
                drop_schema(config)
    else:
        from coilmq.queue import QueueManager
        from coilmq.server.socket_server import ThreadedStompServer
        from coilmq.store.dbm import DbmQueue
        from coilmq.topic import TopicManager

        server = ThreadedStompServer(
            ("127.0.0.1", 0),
            queue_manager=QueueManager(
                DbmQueue(str(base), checkpoint_operations=100, checkpoint_timeout=20)
            ),
            topic_manager=TopicManager(),
        )
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server.socket.getsockname()[1]
        finally:
            server.shutdown()
            thread.join()
            server.server_close()


#: ``--process``: our broker runs as ``store broker`` in a process of its own, as ActiveMQ
#: does, instead of in the clients' process (where it shares their GIL).
PROCESS = False
#: ``--coilmq-sa-venv``: the virtualenv ``coilmq-sqlalchemy`` runs in (``bench.coilmq_sa``).
COILMQ_SA_VENV = coilmq_sa.venv_path()


@contextlib.contextmanager
def _broker_process(target: str, base: Path) -> Iterator[int]:
    """``store broker`` on a fresh store of ``target`` in a child process; yields its port."""
    import signal
    import subprocess
    import sys

    from bench.activemq import _answers, _free_port
    from bench.broker_deep import CLI
    from tests.ha.nodes import write_toml

    if target in ("ours-file", "ours-file-tls"):
        mapping: dict[str, Any] = {
            "journal-directory": str(base / "journal"),
            "bindings-directory": str(base / "bindings"),
            "large-messages-directory": str(base / "large"),
            "paging-directory": str(base / "paging"),
        }
    else:
        from tests.support.backends import unique_prefix
        from tests.support.db_backends import new_store_mapping

        mapping = new_store_mapping(base, unique_prefix(), "postgresql")
    config_path = write_toml(mapping, base / "store.toml")
    port = _free_port()
    where = ["--port", str(port)]
    if target == "ours-file-tls":
        pem, cert = _certificate(base)
        with config_path.open("a") as f:
            f.write(f'\n[broker.acceptors]\ntls = "tcp://127.0.0.1:{port}?sslEnabled=true;'
                    f'keyStorePath={pem}"\n')  # fmt: skip
        where = []
        TLS[port] = str(cert)
    if target == "ours-postgresql":
        from store import StoreConfig
        from store.db.migrate import upgrade

        upgrade(StoreConfig.from_mapping(mapping))
    child = subprocess.Popen(
        [sys.executable, "-c", CLI, "-q", "broker", "--config", str(config_path), *where,
         "--no-security"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not _answers(port):
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"store broker did not start (exit {child.poll()})")
            time.sleep(0.05)
        yield port
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if target == "ours-postgresql":
            from store import StoreConfig
            from store.db.migrate import drop_schema

            drop_schema(StoreConfig.from_mapping(mapping))


class _Client(stomp.ConnectionListener):  # type: ignore[misc]
    def __init__(self, port: int) -> None:
        self.cond = threading.Condition()
        self.receipts = 0
        self.messages: list[Any] = []
        self.conn = stomp.Connection11([("127.0.0.1", port)], heartbeats=(0, 0))
        if port in TLS:
            self.conn.set_ssl(for_hosts=[("127.0.0.1", port)], ca_certs=TLS[port])
        self.conn.set_listener("b", self)
        self.conn.connect(wait=True)

    def on_receipt(self, frame: Any) -> None:
        with self.cond:
            self.receipts += 1
            self.cond.notify_all()

    def on_message(self, frame: Any) -> None:
        with self.cond:
            self.messages.append(frame)
            self.cond.notify_all()


def send_rate(
    port: int,
    producers: int,
    size: int,
    seconds: float,
    window: int,
    headers: dict[str, str] | None = None,
) -> tuple[float, int]:
    """Receipted SENDs per second over ``seconds``, and how many were stored in all; every
    SEND carries ``headers`` besides its receipt."""
    body = "x" * size
    extra = dict(headers or {})
    clients = [_Client(port) for _ in range(producers)]
    stop = threading.Event()
    sent = [0] * producers

    def produce(i: int) -> None:
        c = clients[i]
        while not stop.is_set():
            with c.cond:
                c.cond.wait_for(lambda: sent[i] - c.receipts < window, 1.0)
            c.conn.send("/queue/bench", body, headers={**extra, "receipt": f"{i}-{sent[i]}"})
            sent[i] += 1

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(producers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    done = sum(c.receipts for c in clients)
    elapsed = time.perf_counter() - start
    stop.set()
    for t in threads:
        t.join()
    for c in clients:  # wait for the stragglers, so the consume phase sees them stored
        with c.cond:
            c.cond.wait_for(lambda c=c, i=clients.index(c): c.receipts >= sent[i], 30)
        c.conn.disconnect()
    return done / elapsed, sum(sent)


def _ack_each(
    c: _Client, acked: list[int], i: int, stop: threading.Event, receipts: bool = False
) -> None:
    """Consumer ``i``: subscribe ``client-individual`` and ACK every message as it comes,
    counting in ``acked[i]``, until ``stop``; with ``receipts`` each ACK asks for a RECEIPT
    and the next waits for it (a careful consumer: the ACK is durable before it goes on)."""
    c.conn.subscribe("/queue/bench", id="s", ack="client-individual")
    while not stop.is_set():
        with c.cond:
            c.cond.wait_for(lambda: len(c.messages) > acked[i], 0.2)
            todo = c.messages[acked[i] :]
        for m in todo:
            if not receipts:
                c.conn.ack(m.headers["message-id"], "s")
                acked[i] += 1
                continue
            expected = c.receipts + 1
            c.conn.ack(m.headers["message-id"], "s", receipt=f"a{i}-{acked[i]}")
            with c.cond:
                if not c.cond.wait_for(lambda e=expected: c.receipts >= e, 10):
                    return  # the broker is gone: measured on what was ACKed
            acked[i] += 1


#: The longest a consume phase runs: a broker that has not had every stored message ACKed by
#: then is measured on what was ACKed (coilmq's dbm store on a Python without ``dbm.gnu`` or
#: ``dbm.ndbm``, as this machine's: ``dbm.dumb`` rewrites its whole index file on every
#: delete, so each take costs more the deeper the queue, and a drain of a few thousand took
#: minutes, and a run of every figure with three repeats over an hour).
CONSUME_LIMIT_SECONDS = 20.0


def consume_rate(port: int, consumers: int, total: int, receipts: bool = False) -> float:
    """Messages per second for ``consumers`` to take and ACK the ``total`` stored (or what
    they ACKed in :data:`CONSUME_LIMIT_SECONDS`); ``receipts``: each ACK waits for its
    RECEIPT."""
    clients = [_Client(port) for _ in range(consumers)]
    acked = [0] * consumers
    stop = threading.Event()

    threads = [
        threading.Thread(target=_ack_each, args=(clients[i], acked, i, stop, receipts))
        for i in range(consumers)
    ]
    start = time.perf_counter()
    for t in threads:
        t.start()
    while sum(acked) < total and time.perf_counter() - start < CONSUME_LIMIT_SECONDS:
        time.sleep(0.01)
    done = sum(acked)
    elapsed = time.perf_counter() - start
    stop.set()
    for t in threads:
        t.join()
    for c in clients:
        c.conn.disconnect()
    return done / elapsed


def send_consume_rate(
    port: int,
    pairs: int,
    size: int,
    seconds: float,
    window: int,
    headers: dict[str, str] | None = None,
) -> float:
    """Messages per second through the broker with ``pairs`` producers (receipted SENDs, up to
    ``window`` awaiting their RECEIPT each) and ``pairs`` ``client-individual`` consumers
    acking every message, all at once on one queue: acks over ``seconds``."""
    body = "x" * size
    extra = dict(headers or {})
    producers = [_Client(port) for _ in range(pairs)]
    consumers = [_Client(port) for _ in range(pairs)]
    stop = threading.Event()
    sent = [0] * pairs
    acked = [0] * pairs

    def produce(i: int) -> None:
        c = producers[i]
        while not stop.is_set():
            with c.cond:
                c.cond.wait_for(lambda: sent[i] - c.receipts < window, 1.0)
            c.conn.send("/queue/bench", body, headers={**extra, "receipt": f"{i}-{sent[i]}"})
            sent[i] += 1

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(pairs)]
    threads += [
        threading.Thread(target=_ack_each, args=(consumers[i], acked, i, stop))
        for i in range(pairs)
    ]
    start = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    done = sum(acked)
    elapsed = time.perf_counter() - start
    stop.set()
    for t in threads:
        t.join()
    for c in producers + consumers:
        c.conn.disconnect()
    return done / elapsed


def measure(target: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """Every figure of ``target``: its name ("send 16p 100 B") to the rates of its runs."""
    window = 1 if target.startswith("coilmq") else args.window
    # ActiveMQ's STOMP connector stores a message only when its SEND says persistent:true;
    # ours and coilmq store every message whatever its headers.
    headers = {"persistent": "true"} if target.startswith("activemq") else {}
    figures: dict[str, list[float]] = {}
    if "send-consume" in args.figures:
        for size in (100, 1024):
            mixed = figures.setdefault(f"send+consume 16+16 {size} B", [])
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory() as tmp, broker(target, Path(tmp)) as port:
                    mixed.append(send_consume_rate(port, 16, size, args.seconds, window, headers))
    if "consume-receipts" in args.figures:
        for consumers in (1, 16):
            acks = figures.setdefault(f"consume+ack receipts {consumers}c 100 B", [])
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory() as tmp, broker(target, Path(tmp)) as port:
                    _, total = send_rate(port, 16, 100, args.seconds, 100, headers)
                    acks.append(consume_rate(port, consumers, total, receipts=True))
    if "send" not in args.figures:
        return figures
    for producers in (1, 16):
        for size in (100, 1024):
            sends = figures.setdefault(f"send {producers}p {size} B", [])
            takes = figures.setdefault(f"consume {producers}c {size} B", [])
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory() as tmp, broker(target, Path(tmp)) as port:
                    rate, total = send_rate(port, producers, size, args.seconds, window, headers)
                    sends.append(rate)
                    takes.append(consume_rate(port, producers, total))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", nargs="+", choices=TARGETS, default=list(TARGETS))
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument(
        "--figures",
        nargs="+",
        choices=("send", "send-consume", "consume-receipts"),
        default=["send", "send-consume"],
        help="send: the send then consume phases; send-consume: 16 producers and 16 consumers"
        " at once; consume-receipts: a queue filled by 16 pipelining producers, then taken by 1"
        " and 16 consumers whose every ACK waits for its RECEIPT",
    )
    parser.add_argument(
        "--process", action="store_true",
        help="run our broker as `store broker` in a process of its own (as ActiveMQ runs)",
    )  # fmt: skip
    parser.add_argument(
        "--coilmq-sa-venv", type=Path, default=None,
        help="virtualenv for coilmq-sqlalchemy, made there if absent (default: "
        f"${coilmq_sa.VENV_ENV} or {coilmq_sa.DEFAULT_VENV})",
    )  # fmt: skip
    args = parser.parse_args()
    global PROCESS, COILMQ_SA_VENV
    PROCESS = args.process
    COILMQ_SA_VENV = coilmq_sa.venv_path(args.coilmq_sa_venv)
    results: dict[str, dict[str, list[float]] | str] = {}
    for target in args.target:
        kind = target.removeprefix("activemq-").removesuffix("-tls")
        absent = missing(kind) if target in PEERS.values() else None
        if target == "coilmq-sqlalchemy":
            absent = coilmq_sa.prepare(COILMQ_SA_VENV)
        results[target] = absent or measure(target, args)
    table = Table(title="STOMP over loopback (messages/s, median; all runs)")
    for column in ("target", "figure", "median", "runs", "ours/ActiveMQ"):
        table.add_column(column)
    for target, figures in results.items():
        if isinstance(figures, str):
            table.add_row(target, "-", "not installed here", figures, "")
            continue
        peer = results.get(PEERS.get(target, ""))
        for name, runs in figures.items():
            median = statistics.median(runs)
            ratio = ""
            if isinstance(peer, dict) and statistics.median(peer[name]) > 0:
                ratio = f"{median / statistics.median(peer[name]):.2f}x"
            table.add_row(
                target, name, f"{median:,.0f}", " ".join(f"{r:,.0f}" for r in runs), ratio
            )
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
