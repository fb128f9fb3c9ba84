"""What a report's first screen says (issue 44): is the store healthy, and what needs doing.

An operator opening a report at 3 a.m. reads the verdict first, then the lines under it, each
one thing to do (or to know) with the command that does it:

- **damaged** (a salvaged report, or large bodies missing or damaged): the repairs
  ``store data verify`` advises (:func:`store.data.advice.repair_advice`: the least
  destructive repair of each damaged part and what it drops). The store is verified again for
  them, read-only, only when something is damaged; an embedded Derby / H2 database Spark has
  open cannot be verified beside it, so the line names the command to run once it is closed.
- **needs attention**: a journal whose live share of its bytes is under
  ``journal-compact-percentage`` (the store compacts it by itself only once it has
  ``journal-compact-min-files`` files; ``store data compact`` does it now), an address
  holding paged messages under a policy that is not PAGE (left from an earlier setting), and
  dead-lettered messages waiting (a poison message: its consumers failed
  ``max-delivery-attempts`` times).
- **healthy**: nothing of the above. Orphan large bodies (the next load sweeps them) and
  expired messages waiting on expiry queues are a line under any verdict (nothing to do).

Beside the verdict: the limits the store runs under (``global-max-size``,
``global-max-messages``, and each reported address's ``max-size-bytes``,
``max-size-messages`` and ``address-full-policy`` beside its messages, stored bytes and
pages), and the HA live lock (holder, lease expiry in UTC with how far off it is) as
``store ha status`` reads it: on a database reachable from Python, or a file store that has
run as an HA node (its ``server.lock`` exists; nothing is created for a report).

Thread-safety: pure functions, called from the report's thread.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from store.config import StoreConfig
from store.errors import CorruptionError, StoreError

__all__ = [
    "ATTENTION",
    "DAMAGED",
    "HEALTHY",
    "AddressLimits",
    "Health",
    "assess",
    "ha_line",
    "iso_time",
]

HEALTHY: Final = "healthy"
ATTENTION: Final = "needs attention"
DAMAGED: Final = "damaged"

Rows = Sequence[Mapping[str, Any]]


@dataclass(frozen=True, kw_only=True)
class AddressLimits:
    """One address's figures beside its limits (-1: none) and policy. Immutable."""

    address: str
    messages: int
    bytes: int
    pages: int
    max_size_bytes: int
    max_size_messages: int
    policy: str


@dataclass(frozen=True, kw_only=True)
class Health:
    """The verdict (:data:`HEALTHY`, :data:`ATTENTION` or :data:`DAMAGED`), one line per thing
    to do or know, the limits, and the HA line (None: not read). Immutable."""

    verdict: str
    actions: tuple[str, ...] = ()
    global_limits: str = ""
    limits: tuple[AddressLimits, ...] = ()
    ha: str | None = None


def iso_time(ms: int) -> str:
    """``2026-12-03T14:05:06.123Z``: epoch ms as ISO 8601 in UTC. Raises nothing."""
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _size(value: int) -> str:
    if value < 0:
        return "none"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:,.1f} {unit}"
    return f"{value:,} B"


def assess(
    config: StoreConfig | None,
    *,
    found: Sequence[CorruptionError],
    large_missing: int,
    orphan_bodies: int,
    orphan_bytes: int,
    tables: Mapping[str, Rows],
    verify: bool,
    now_ms: int,
) -> Health:
    """The :class:`Health` of a report: ``found`` its damage (salvaged), ``large_missing`` its
    kept large messages without a sound body, the orphans, ``tables`` each dataset's rows the
    page shows; ``verify``: the store may be verified again here for the repair advice (not an
    embedded database Spark holds). Raises nothing: what cannot be read is said in a line."""
    actions: list[str] = []
    verdict = HEALTHY
    if found or large_missing:
        verdict = DAMAGED
        actions += _repairs(config, verify)
    hints = _compaction(config, tables.get("dead_records", ()))
    limits = _limits(config, tables)
    hints += [
        f"address {a.address!r} holds {a.pages:,} page(s) under policy {a.policy}: they are "
        "delivered, but new sends are not paged; set address-full-policy PAGE to keep paging"
        for a in limits
        if a.pages and a.policy != "PAGE"
    ]
    dead, expired = _moved(tables.get("address_bytes", ()))
    if dead:
        hints.append(
            f"{_count(dead)} dead-lettered after max-delivery-attempts wait on dead-letter "
            "queues: find why their consumers fail, then consume or remove them there "
            "(`store data print --config FILE` counts them by address)"
        )
    if hints and verdict == HEALTHY:
        verdict = ATTENTION
    actions += hints
    if expired:
        actions.append(
            f"{_count(expired)} expired and wait on expiry queues (kept, as expiry-address "
            "says; nothing is lost)"
        )
    if orphan_bodies:
        actions.append(
            f"{orphan_bodies:,} orphan large bod{'y' if orphan_bodies == 1 else 'ies'} "
            f"({_size(orphan_bytes)}): no message refers to them; the store's next load "
            "removes them (nothing to do)"
        )
    global_limits = ""
    if config is not None and config.persistence_enabled:
        messages = config.global_max_messages
        global_limits = f"global-max-size {_size(config.global_max_size)}, global-max-messages " + (
            "none" if messages < 0 else f"{messages:,}"
        )
    return Health(
        verdict=verdict,
        actions=tuple(actions),
        global_limits=global_limits,
        limits=tuple(limits),
        ha=ha_line(config, now_ms) if verify else None,
    )


def _moved(rows: Rows) -> tuple[dict[str, int], dict[str, int]]:
    """The dead-lettered and expired messages waiting, by original address."""
    dead = {str(r["address"]): int(r["dead_lettered"]) for r in rows if r.get("dead_lettered")}
    expired = {str(r["address"]): int(r["expired"]) for r in rows if r.get("expired")}
    return dead, expired


def _count(by_address: Mapping[str, int]) -> str:
    """``3 messages sent to 'a' (2) and 'b' (1)``."""
    total = sum(by_address.values())
    ranked = sorted(by_address.items(), key=lambda kv: (-kv[1], kv[0]))
    named = ", ".join(f"{a!r} ({n:,})" for a, n in ranked[:5])
    more = f" and {len(ranked) - 5:,} more addresses" if len(ranked) > 5 else ""
    return f"{total:,} message{'' if total == 1 else 's'} sent to {named}{more}"


def _repairs(config: StoreConfig | None, verify: bool) -> list[str]:
    """The repairs ``store data verify`` advises for the damaged store ``config``."""
    command = "`store data verify --config FILE`"
    if config is None:
        return [f"run {command} on the store for the advised repair"]
    if not verify:
        return [f"close the embedded database, then run {command} for the advised repair"]
    from store.data.advice import repair_advice
    from store.data.checking import verify_store

    try:
        advice = repair_advice(verify_store(config, force=True))
    except StoreError as exc:
        return [f"the store could not be verified for the advised repair ({exc}): run {command}"]
    return advice or [f"run {command}: it names each damaged place and its repair"]


def _compaction(config: StoreConfig | None, rows: Rows) -> list[str]:
    if config is None:
        return []
    percentage, min_files = config.journal_compact_percentage, config.journal_compact_min_files
    by_itself = (
        f"a running store compacts by itself once the journal has journal-compact-min-files "
        f"{min_files} files"
        if min_files
        else "journal-compact-min-files 0: the store never compacts by itself"
    )
    lines = []
    for row in rows:
        total, live, dead = int(row["bytes"]), int(row["live_bytes"]), int(row["dead_bytes"])
        if total <= 0 or dead <= 0 or live * 100 >= percentage * total:
            continue
        lines.append(
            f"{row['journal']} journal: {dead * 100 // total}% of its {_size(total)} are dead "
            f"records (live {live * 100 / total:.0f}% < journal-compact-percentage "
            f"{percentage}): `store data compact --config FILE` reclaims about "
            f"{_size(dead)} ({by_itself})"
        )
    return lines


def _limits(config: StoreConfig | None, tables: Mapping[str, Rows]) -> list[AddressLimits]:
    if config is None or not config.persistence_enabled:
        return []
    figures: dict[str, dict[str, int]] = {}
    for row in tables.get("address_bytes", ()):
        figures.setdefault(str(row["address"]), {}).update(
            messages=int(row["messages"]), bytes=int(row["bytes"])
        )
    for row in tables.get("page_stores", ()):
        figures.setdefault(str(row["address"]), {})["pages"] = int(row["pages"])
    limits = []
    for address in sorted(figures):
        s = config.address_settings_for(address)
        f = figures[address]
        limits.append(
            AddressLimits(
                address=address,
                messages=f.get("messages", 0),
                bytes=f.get("bytes", 0),
                pages=f.get("pages", 0),
                max_size_bytes=s.max_size_bytes,
                max_size_messages=s.max_size_messages,
                policy=s.address_full_policy.upper(),
            )
        )
    return limits


def ha_line(config: StoreConfig | None, now_ms: int) -> str | None:
    """The HA live lock as ``store ha status`` reads it: ``held by H, lease expires at T (in
    2.0 s)``, ``not held (no live node)``; None when there is nothing to read (no store, zero
    persistence, a file store that never ran as an HA node). Raises nothing."""
    if config is None or not config.persistence_enabled:
        return None
    try:
        if not _ran_as_ha_node(config):
            return None
    except Exception as exc:  # the drivers' and SQLAlchemy's errors have no common class
        return f"live lock: not read ({type(exc).__name__}: {' '.join(str(exc).split())})"
    from store.ha.status import ha_status

    try:
        status = ha_status(config)
    except StoreError as exc:
        return f"live lock: not read ({exc})"
    if status.holder is None:
        return f"live lock: not held (no live node), state {status.state}"
    line = f"live lock: held by {status.holder}, state {status.state}"
    if status.expires_at_ms is not None:
        now = status.database_now_ms if status.database_now_ms is not None else now_ms
        left = (status.expires_at_ms - now) / 1000
        off = f"in {left:.1f} s" if left >= 0 else f"{-left:.1f} s ago"
        line += f", lease expires at {iso_time(status.expires_at_ms)} ({off})"
    return line


def _ran_as_ha_node(config: StoreConfig) -> bool:
    """Whether the node manager's state exists (a file store's ``server.lock``; a database's
    node-manager rows with a holder, node id or state: the schema makes them empty): a node
    manager opened on a store without it would write it, and a report changes nothing."""
    if config.database_store is None:
        from store.ha.files import SERVER_LOCK

        return os.path.exists(os.path.join(config.node_manager_lock_directory, SERVER_LOCK))
    import sqlalchemy as sa

    from store.db.engine import create_store_engine, dispose_store_engine
    from store.db.schema import TableNames

    table = TableNames.from_config(config.database_store).node_manager
    engine, _ = create_store_engine(config.database_store)
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table(table):
                return False
            t = sa.table(table, sa.column("holder_id"), sa.column("node_id"), sa.column("state"))
            used = sa.or_(t.c.holder_id.isnot(None), t.c.node_id.isnot(None), t.c.state.isnot(None))
            count = conn.execute(sa.select(sa.func.count()).select_from(t).where(used))
            return bool(count.scalar())
    finally:
        dispose_store_engine(engine)
