"""``store data``: the operators' data tools, on the file store and the database store.

One module per command (or pair of commands); each adds its parser in ``register(sub)`` and
calls one library function, formatting its result:

- :mod:`.options` — ``--config`` and Artemis's option names for the store (shared);
- :mod:`.common` — the console and the file-journal selection the file-level commands share;
- :mod:`.printing` — ``print``;
- :mod:`.checking` — ``verify``, ``repair``;
- :mod:`.compact` — ``compact``;
- :mod:`.recover` — ``recover``;
- :mod:`.exchange` — ``exp``, ``imp`` (Artemis's XML export format).

No command but ``imp`` creates a store (an import usually goes into a new one): every
journal a command works on must already hold one, checked
before any is touched; ``print`` and ``verify`` only read, so they work on a read-only file
system. A store a live process holds is refused with an error naming the holder (exit 3);
``--force`` reads it anyway where reading is safe.

Exit codes (``store.cli.main``): 0 nothing to report, 1 findings that need no operator
(torn tails, leftovers the next open cleans up, damaged sources a recovery read around, records
a salvage dropped), 2 a path that holds no journal (or another configuration error), 5
corruption (whatever makes a load refuse the journal: a checksum failure, a damaged header, a
missing or truncated file; ``print`` and ``verify`` report it, ``repair`` without ``--force``
refuses it), 3 when a broker holds the store.

Thread-safety: a command runs once per process; nothing is shared.
"""

from __future__ import annotations

from typing import Any

from store.cli.data import checking, compact, exchange, printing, recover

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``store data`` and its subcommands to the ``store`` parser. Returns nothing."""
    data = subparsers.add_parser(
        "data",
        help="print, verify, repair, compact, recover, export or import a store's data",
        description="Work on a store's data while no broker runs: the file store (--config, "
        "else Artemis's defaults under data/, overridden by --journal, --bindings, --paging, "
        "--large-messages) or a database store (--jdbc-connection-url, or a --config with a "
        "database-store). A path that holds no journal is an error: these commands never "
        "create one, except imp, which imports into a new store as readily as an existing one.",
    )
    sub = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND", required=True)
    for module in (printing, checking, compact, recover, exchange):
        module.register(sub)
