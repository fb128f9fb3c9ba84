"""``store ha``: a shared-store HA pair (docs/ha.md).

::

    store ha run --config etc/broker.xml --role primary   # go live, then write until stopped
    store ha run --config etc/broker.xml                  # role from <ha-policy>
    store ha status --config etc/broker.xml [--json]      # holder, generation, expiry, state

``run`` waits to go live (a status line on stderr), then sends durable messages through the
storage manager (queue ``store-ha.smoke``) and prints each acknowledged message id on stdout,
one per line, until interrupted or sent SIGTERM (exit 0; a node still waiting stops waiting)
or until the live lock is lost (a message on stderr, exit 3). ``status`` prints the live
lock's holder, generation, expiry by the database clock, the node id and the state. Each is
one call: :class:`store.node.NodeRunner` / :func:`store.ha.status.ha_status`.

Thread-safety: a command runs once per process; nothing is shared.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import TYPE_CHECKING, Any

from store.config import load_config
from store.errors import ConfigError

if TYPE_CHECKING:
    from store.ha import Lease

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``ha run|status`` to the ``store`` parser. Returns nothing."""
    parser = subparsers.add_parser(
        "ha",
        help="shared-store HA pair: run a node, show the lock",
        description="Run one node of a shared-store HA pair, or show who holds the live lock.",
    )
    sub = parser.add_subparsers(dest="ha_command", metavar="SUBCOMMAND", required=True)

    run = sub.add_parser(
        "run",
        help="go live (primary or backup), then send messages until stopped",
        description="Wait to go live in this node's role, then write durable sends to the "
        "queue store-ha.smoke (--pause seconds apart) and print the id of each one "
        "acknowledged, until SIGTERM or Ctrl-C; exit 3 when the live lock is lost or the wait "
        "times out (docs/ha.md).",
    )
    _config_arg(run)
    run.add_argument(
        "--role",
        choices=("primary", "backup"),
        help="this node's role (default: the configuration's <ha-policy>)",
    )
    run.add_argument(
        "--timeout", type=float, default=None, help="seconds to wait to go live (default: forever)"
    )
    run.add_argument("--pause", type=float, default=0.0, help="seconds between sends (default: 0)")
    run.set_defaults(func=run_node)

    status = sub.add_parser("status", help="show the live lock, the state and the node id")
    _config_arg(status)
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(func=run_status)


def _config_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        required=True,
        metavar="PATH",
        help="store configuration: a .toml file or an Artemis broker.xml",
    )


def run_node(args: argparse.Namespace) -> int:
    """Go live in the role, then append until interrupted (0) or the lock is lost (3): one
    :class:`store.node.NodeRunner`, stopped by SIGTERM (a node still waiting stops waiting).

    Raises ConfigError without a role, StoreLockedError (exit 3) when ``--timeout`` passes
    before this node goes live, LockLostError (exit 3) when the live lock is lost,
    and what the store raises (mapped to exit codes by ``store``).
    """
    from store.node import NodeRunner

    config = load_config(args.config)
    role = args.role or config.ha_role
    if role is None:
        raise ConfigError(
            "no HA role: give --role or <ha-policy><shared-store><primary/>|<backup/>",
            key="role",
            value=None,
            allowed="primary or backup",
        )

    def waiting(node_id: str) -> None:
        print(f"waiting to go live as {role} (node {node_id})", file=sys.stderr, flush=True)

    def live(lease: Lease, waited: float) -> None:
        print(
            f"live as {role} after {waited:.1f} s: generation {lease.generation}, holder "
            f"{lease.holder}",
            file=sys.stderr,
            flush=True,
        )

    def acknowledged(record_id: int) -> None:
        print(record_id, flush=True)

    runner = NodeRunner(
        config,
        role,
        timeout=args.timeout,
        pause=args.pause,
        on_waiting=waiting,
        on_live=live,
        acknowledged=acknowledged,
    )
    signal.signal(signal.SIGTERM, lambda *_: runner.stop())
    if not runner.run().live:
        print(f"stopped before going live as {role}", file=sys.stderr, flush=True)
    return 0


def run_status(args: argparse.Namespace) -> int:
    """Print the HA status of the configured store. Returns 0. Raises what opening the node
    manager raises."""
    from store.ha.status import ha_status

    status = ha_status(load_config(args.config))
    if args.json:
        print(json.dumps(status.as_dict(), sort_keys=True))
        return 0
    if status.holder is None:
        held = "not held"
    elif status.expires_at_ms is None:
        held = f"held by {status.holder}"
    else:
        expiry = _expiry(status.expires_at_ms, status.database_now_ms)
        held = f"held by {status.holder}, expires {expiry}"
    print(f"live lock: {held}")
    print(f"generation: {status.generation}")
    print(f"node id: {status.node_id}")
    print(f"state: {status.state}")
    return 0


def _expiry(expires_at_ms: int, now_ms: int | None) -> str:
    """``at 2026-12-02T22:14:05.123Z (in 1.2 s)``: the lease's expiry in UTC, and how far off
    it is by the database's clock (``… ago`` once past; no distance without that clock)."""
    from store.reporting.health import iso_time

    text = f"at {iso_time(expires_at_ms)}"
    if now_ms is None:
        return text
    left = (expires_at_ms - now_ms) / 1000
    return f"{text} ({f'in {left:.1f} s' if left >= 0 else f'{-left:.1f} s ago'})"
