"""Our STOMP broker (``store broker``) started on a store with N messages waiting, for
``bench.deep_queues`` (issue 29: "start-up of a broker holding 1,000,000 messages to the first
MESSAGE frame: no slower than ActiveMQ's clean restart").

:func:`first_message` writes the store's configuration to a TOML file, launches ``store
broker --config FILE --port P`` as a process of its own (the installed package's command line,
run by this interpreter), and times, from that launch, when the port answers and when a STOMP
consumer (CONNECT, then SUBSCRIBE with ``ack:client-individual``, retried until the port
answers: the same client and steps as ActiveMQ's figure, ``bench.activemq_deep``) receives the
first MESSAGE frame; then the process's peak RSS (``VmHWM``) is read and it is stopped with
SIGTERM, which closes the store cleanly. The message is not acknowledged, so the store is left
as it was.

Thread-safety: one call at a time per process.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import activemq
from bench.activemq_deep import _Stomp, _vm_hwm_mb
from tests.ha.nodes import write_toml

CLI = "import sys; from store.cli.main import main; sys.exit(main(sys.argv[1:]))"
#: How long the broker may take to answer before the figure is given up (seconds).
START_SECONDS = 600.0


def first_message(mapping: dict[str, object], destination: str) -> dict[str, float]:
    """Start our broker on the store ``mapping`` configures and time its first MESSAGE on
    ``destination`` (module docstring). Returns ``port_seconds``, ``first_message_seconds``
    (both from the launch) and ``peak_rss_mb``. Raises RuntimeError when the broker exits or
    answers with something else."""
    with tempfile.TemporaryDirectory(prefix="broker-deep-") as tmp:
        config = write_toml(mapping, Path(tmp) / "store.toml")
        port = activemq._free_port()
        command = [sys.executable, "-c", CLI, "broker", "--config", str(config), "--no-security"]
        launched = time.perf_counter()
        process = subprocess.Popen(
            [*command, "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            while not activemq._answers(port):
                if process.poll() is not None:
                    assert process.stderr is not None
                    said = process.stderr.read().decode(errors="replace")
                    raise RuntimeError(f"store broker exited ({process.returncode}): {said}")
                if time.perf_counter() - launched > START_SECONDS:
                    raise RuntimeError(f"store broker did not answer in {START_SECONDS} s")
                time.sleep(0.01)
            answered = time.perf_counter()
            client = _Stomp(port)
            client.send_frame(
                "SUBSCRIBE", {"destination": destination, "id": "0", "ack": "client-individual"}
            )
            command_name, headers = client.read_frame()
            if command_name != "MESSAGE":
                raise RuntimeError(f"store broker sent {command_name} {headers} first")
            received = time.perf_counter()
            peak = _vm_hwm_mb(process.pid)
            client.sock.close()
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    return {
        "port_seconds": answered - launched,
        "first_message_seconds": received - launched,
        "peak_rss_mb": peak,
    }
