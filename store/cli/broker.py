"""``store broker``: a STOMP broker on the store (coilmq's server, :mod:`store.stomp`).

::

    store broker --config etc/broker.xml [--host 127.0.0.1] [--port 61613]
                 [--metrics 127.0.0.1:9404] [--no-security]

Secure by default: logins are checked against ``artemis-users.properties`` and
``artemis-roles.properties`` beside the configuration and every command against its
security settings (:mod:`store.stomp.security`); without those files it does not start
(exit 2), unless ``--no-security`` (trials only; a WARNING says so).

Loads the store (a progress bar on stderr), then prints ``listening on HOST:PORT`` on stdout
and serves until SIGTERM or Ctrl-C (exit 0 after a clean shutdown). With ``ha-policy`` in
the configuration (or ``--role``) it is one node of a shared-store HA pair: a backup waits for
the live lock before it opens its port; a node that loses the lock stops at once (exit 3).
``--metrics HOST:PORT`` serves Prometheus text there (:mod:`store.stomp.metrics`; its address
on stderr).
One call of :func:`store.stomp.run.run_broker`.

Thread-safety: a command runs once per process; nothing is shared.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any

from store.config import load_config
from store.config.values import parse_size
from store.errors import ConfigError
from store.extras import missing_extra_message

__all__ = ["register"]

_log = logging.getLogger("store.stomp")


def register(subparsers: Any) -> None:
    """Add ``broker`` to the ``store`` parser. Returns nothing."""
    parser = subparsers.add_parser(
        "broker",
        help="run a STOMP broker on the store (coilmq)",
        description="Serve STOMP 1.0-1.2 clients with every queue kept in the store: a SEND "
        "is durable before its RECEIPT, a message stays stored until its ACK.",
    )
    parser.add_argument(
        "--config",
        required=True,
        metavar="PATH",
        help="store configuration: a .toml file or an Artemis broker.xml",
    )
    parser.add_argument(
        "--host",
        help="address to listen on (127.0.0.1); with one acceptor in the configuration, its "
        "address instead",
    )
    parser.add_argument(
        "--port",
        type=int,
        help="port to listen on (61613; 0: any free port); with one acceptor in the "
        "configuration, its port instead",
    )
    parser.add_argument(
        "--role",
        choices=("primary", "backup"),
        help="HA role (default: the configuration's <ha-policy>, else no HA)",
    )
    parser.add_argument(
        "--max-frame-size",
        default="64M",
        metavar="SIZE",
        help="largest frame body a client may send (64M); a larger one is an ERROR",
    )
    parser.add_argument(
        "--prefetch",
        type=int,
        default=100,
        help="messages a client-ack subscription may hold unacknowledged (100)",
    )
    parser.add_argument(
        "--no-security",
        action="store_true",
        help="accept any login and allow everything: for trials only (a WARNING says so); "
        "by default logins are checked against artemis-users.properties and "
        "artemis-roles.properties beside the configuration, with its security-settings",
    )
    parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics (queue depths, sends, acks, redeliveries, dead letters, "
        "expired, flush waits, connections, HA role) over HTTP there (port 0: any free one)",
    )
    parser.set_defaults(func=run)


def _host_port(value: str | None) -> tuple[str, int] | None:
    """``--metrics HOST:PORT`` parsed. Raises ConfigError naming ``--metrics``."""
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(
            f"--metrics {value!r} is not HOST:PORT", key="--metrics", value=value,
            hint="e.g. --metrics 127.0.0.1:9404",
        )  # fmt: skip
    return host, int(port)


def _security(args: argparse.Namespace) -> Any:
    """The broker's security from ``--config`` (:mod:`store.stomp.security`), or None with
    ``--no-security`` or ``security-enabled`` false (a WARNING either way). Raises
    ConfigError for a missing users file and a bad setting."""
    if args.no_security:
        _log.warning("--no-security: any login is accepted and may send and consume anything")
        return None
    from store.stomp.security import load_security

    security = load_security(args.config)
    if security is None:
        _log.warning(
            "security-enabled is false in %s: any login is accepted and may send and consume "
            "anything", args.config,
        )  # fmt: skip
    return security


def _acceptors(args: argparse.Namespace) -> Any:
    """The configuration's acceptors (:mod:`store.stomp.acceptors`), ``--host``/``--port``
    moving a single one; None when it has none (``--host``/``--port`` then). Raises
    ConfigError for a bad acceptor, and for ``--host``/``--port`` beside several."""
    from store.stomp.acceptors import load_acceptors, with_address

    acceptors = load_acceptors(args.config)
    if not acceptors:
        return None
    if args.host is None and args.port is None:
        return acceptors
    if len(acceptors) > 1:
        raise ConfigError(
            f"--host/--port name one port, and {args.config} has {len(acceptors)} acceptors",
            key="--port", value=args.port,
            hint="leave --host/--port out, or change the acceptors' URLs",
        )  # fmt: skip
    return [with_address(acceptors[0], args.host, args.port)]


def run(args: argparse.Namespace) -> int:
    """Run the broker until SIGTERM / SIGINT (0) or the loss of the live lock (3). Raises
    ConfigError for a bad option or a missing ``store[stomp]`` extra, and what the store
    raises (mapped to exit codes by ``store``)."""
    try:
        from store.stomp.run import run_broker
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in (
            "coilmq",
            "stomp",
            "prometheus_client",
            "cryptography",
        ):
            raise ConfigError(missing_extra_message(exc.name, "stomp", "store broker")) from exc
        raise
    from rich.progress import Progress

    from store.cli.output import progress_console

    max_frame_size = parse_size(args.max_frame_size, key="--max-frame-size")
    metrics = _host_port(args.metrics)
    config = load_config(args.config)
    security = _security(args)
    acceptors = _acceptors(args)
    stop = threading.Event()

    def on_signal(*_: object) -> None:
        if waiting.is_set():  # still waiting to go live: stop waiting now
            raise KeyboardInterrupt
        stop.set()

    waiting = threading.Event()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def on_waiting(role: str) -> None:
        waiting.set()
        print(f"waiting to go live as {role}", file=sys.stderr, flush=True)

    with Progress(console=progress_console(args), transient=True) as bar:
        tasks: dict[str, Any] = {}

        def progress(phase: str, done: int, total: int) -> None:
            waiting.clear()
            if phase not in tasks:
                tasks[phase] = bar.add_task(f"loading {phase}", total=total or None)
            bar.update(tasks[phase], completed=done, total=total or None)

        def on_listening(host: str, port: int) -> None:
            waiting.clear()
            bar.stop()
            print(f"listening on {host}:{port}", flush=True)

        try:
            run_broker(
                config,
                stop=stop,
                host=args.host or "127.0.0.1",
                port=61613 if args.port is None else args.port,
                acceptors=acceptors,
                role=args.role,
                max_frame_size=max_frame_size,
                prefetch=args.prefetch,
                progress=progress,
                on_listening=on_listening,
                on_waiting=on_waiting,
                metrics=metrics,
                security=security,
                on_metrics=lambda host, port: print(
                    f"metrics on http://{host}:{port}/", file=sys.stderr, flush=True
                ),
            )
        except KeyboardInterrupt:
            print("stopped before going live", file=sys.stderr, flush=True)
    return 0
