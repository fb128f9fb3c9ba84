"""Where our STOMP broker's CPU goes (issue 29: "profile and say where the time goes").

Runs ``run_broker`` on a fresh file store in a child process under yappi (CPU clock, every
thread, builtins included), drives it from this process with ``bench.stomp``'s own phases
(16 producers sending 100-byte messages with receipts for ``--seconds``, window 100; then 16
``client-individual`` consumers acking every message), stops it with SIGTERM and prints the
child's CPU by module (the store's modules by path, coilmq's, the standard library's by file,
builtins by name) and its costliest functions. yappi slows the broker several times over:
read the shares, not the rates.

Needs yappi, which the project does not depend on: ``pip install yappi`` into the venv.

``--send-consume``: the two at once instead (``bench.stomp``'s send+consume figure).

Run: ``PYTHONPATH=. python -m bench.stomp_profile [--seconds 5] [--send-consume]``.
"""

from __future__ import annotations

import argparse
import collections
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from bench.activemq import _free_port
from bench.stomp import consume_rate, send_consume_rate, send_rate


def serve(root: Path, port: int) -> None:
    """The child: the broker under yappi until SIGTERM, then the profile on stdout."""
    import yappi

    from store.config import StoreConfig
    from store.stomp.run import run_broker

    config = StoreConfig.from_mapping(
        {
            "journal-directory": str(root / "journal"),
            "bindings-directory": str(root / "bindings"),
            "large-messages-directory": str(root / "large"),
            "paging-directory": str(root / "paging"),
        }
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    yappi.set_clock_type("cpu")
    yappi.start(builtins=True)
    run_broker(config, stop=stop, port=port, on_listening=lambda *_: print("listening", flush=True))
    yappi.stop()
    groups: collections.Counter[str] = collections.Counter()
    functions = []
    for stat in yappi.get_func_stats():
        path = stat.module or ""
        if "/store/" in path and "site-packages" not in path:
            group = "store." + path.split("/store/", 1)[1].replace("/", ".")
        elif "coilmq" in path:
            group = "coilmq." + Path(path).name
        elif path.startswith("<") or not path:
            group = "builtin " + stat.name
        else:
            group = Path(path).name
        groups[group] += stat.tsub
        functions.append((stat.tsub, stat.name, Path(path).name))
    total = sum(groups.values())
    print(f"broker CPU {total:.2f} s")
    for group, seconds in groups.most_common(30):
        print(f"{seconds:7.2f} s {100 * seconds / total:5.1f} %  {group}")
    print("costliest functions (own time):")
    for seconds, name, where in sorted(functions, reverse=True)[:30]:
        print(f"{seconds:7.2f} s  {name} ({where})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--send-consume",
        action="store_true",
        help="16 producers and 16 consumers at once (bench.stomp's send-consume figure)",
    )
    parser.add_argument("--serve", nargs=2, metavar=("ROOT", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve[0]), int(args.serve[1]))
        return
    with tempfile.TemporaryDirectory(prefix="stomp-profile-") as tmp:
        port = _free_port()
        child = subprocess.Popen(
            [sys.executable, "-m", "bench.stomp_profile", "--serve", tmp, str(port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        if child.stdout.readline().strip() != "listening":
            raise SystemExit("the broker did not start")
        if args.send_consume:
            rate = send_consume_rate(port, 16, 100, args.seconds, 100, {})
            said = f"{rate:,.0f} messages/s sent and acknowledged, 16 + 16 at once"
        else:
            sent, total = send_rate(port, 16, 100, args.seconds, 100, {})
            acked = consume_rate(port, 16, total)
            said = f"{sent:,.0f} sends/s, {acked:,.0f} acks/s, {total:,} messages"
        child.send_signal(signal.SIGTERM)
        report = child.stdout.read()
        child.wait(60)
    print(f"under the profiler: {said}")
    print(report)


if __name__ == "__main__":
    main()
