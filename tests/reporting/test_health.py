"""``store.reporting.health``: the verdict and the lines under it, from the figures a report
computed (no Spark: the datasets' rows are given), and the HA line read from a real node
manager."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from store import StoreConfig, open_store
from store.errors import ChecksumError
from store.ha import open_node_manager
from store.messaging import Message, StorageManager
from store.reporting.health import ATTENTION, DAMAGED, HEALTHY, assess, ha_line, iso_time
from tests.support.backends import file_config_mapping


def _config(tmp_path: Path, **extra: Any) -> StoreConfig:
    return StoreConfig.from_mapping({**file_config_mapping(tmp_path, "NIO"), **extra})


def _assess(config: StoreConfig | None, **kwargs: Any) -> Any:
    given: dict[str, Any] = dict(
        found=[], large_missing=0, orphan_bodies=0, orphan_bytes=0, tables={}, verify=False,
        now_ms=0,
    )  # fmt: skip
    given.update(kwargs)
    return assess(config, **given)


def _dead(total: int, live: int) -> dict[str, list[dict[str, Any]]]:
    return {
        "dead_records": [
            {"journal": "messages", "bytes": total, "live_bytes": live, "dead_bytes": total - live}
        ]
    }


def _line_while_live(config: StoreConfig) -> str | None:
    """The HA line read while a node manager of this process is the live node."""
    nm = open_node_manager(config)
    try:
        nm.start_primary(timeout=10)
        return ha_line(config, 0)
    finally:
        nm.close()


def test_a_store_with_nothing_to_do_is_healthy_with_its_global_limits(tmp_path: Path) -> None:
    config = _config(tmp_path, **{"global-max-size": "8M", "global-max-messages": 1000})

    health = _assess(config, tables=_dead(1000, 900))

    assert health.verdict == HEALTHY and health.actions == ()
    assert health.global_limits == "global-max-size 8.0 MiB, global-max-messages 1,000"


def test_a_journal_mostly_dead_under_the_compact_percentage_gets_the_compaction_hint(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, **{"journal-compact-percentage": 30})

    hinted = _assess(config, tables=_dead(100_000, 7_000))
    at_the_line = _assess(config, tables=_dead(100_000, 30_000))

    assert hinted.verdict == ATTENTION
    (line,) = hinted.actions
    assert line.startswith("messages journal: 93% of its 97.7 KiB are dead records")
    assert "journal-compact-percentage 30" in line and "`store data compact" in line
    assert "journal-compact-min-files 10 files" in line
    assert at_the_line.verdict == HEALTHY, "live 30% is not under 30%"


def test_damage_is_the_verdict_with_the_repair_verify_advises(tmp_path: Path) -> None:
    config = _config(tmp_path)
    with StorageManager(open_store(config)) as sm:  # a sound store: nothing to advise
        sm.load()
        sm.create_address("a", routing_types=("ANYCAST",))
        sm.create_queue("a", address="a", routing_type="ANYCAST")
        sm.send(Message(address="a", body=b"x", durable=True))
    found = [ChecksumError("data-1.jrn", 100, "checksum mismatch")]

    verified = _assess(config, found=found, verify=True)
    embedded = _assess(config, found=found, verify=False)
    bodies = _assess(config, large_missing=2, verify=True)
    unreadable = _assess(_config(tmp_path / "none"), found=found, verify=True)

    assert verified.verdict == DAMAGED
    assert verified.actions == ("run `store data verify --config FILE`: it names each damaged "
                                "place and its repair",)  # fmt: skip
    assert embedded.verdict == DAMAGED and "close the embedded database" in embedded.actions[0]
    assert bodies.verdict == DAMAGED
    assert unreadable.actions[0].startswith("the store could not be verified for the advised")
    assert "no journal in" in unreadable.actions[0]


def test_limits_list_each_address_with_its_settings_and_pages(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        **{
            "address-settings": {
                "paged": {"max-size-bytes": 2048, "address-full-policy": "PAGE"},
                "blocked": {"max-size-messages": 10, "address-full-policy": "BLOCK"},
            }
        },
    )
    tables = {
        "address_bytes": [
            {"address": "paged", "messages": 30, "bytes": 9000},
            {"address": "blocked", "messages": 5, "bytes": 500},
        ],
        "page_stores": [
            {"address": "paged", "pages": 3, "records": 20, "bytes": 6000},
            {"address": "blocked", "pages": 1, "records": 2, "bytes": 300},
        ],
    }

    health = _assess(config, tables=tables)

    by_name = {a.address: a for a in health.limits}
    assert by_name["paged"].max_size_bytes == 2048 and by_name["paged"].policy == "PAGE"
    assert by_name["paged"].pages == 3 and by_name["paged"].messages == 30
    assert by_name["blocked"].max_size_messages == 10 and by_name["blocked"].policy == "BLOCK"
    assert health.verdict == ATTENTION
    assert health.actions == (
        "address 'blocked' holds 1 page(s) under policy BLOCK: they are delivered, but new "
        "sends are not paged; set address-full-policy PAGE to keep paging",
    )


def test_orphan_bodies_are_said_without_changing_the_verdict(tmp_path: Path) -> None:
    health = _assess(_config(tmp_path), orphan_bodies=2, orphan_bytes=4096)

    assert health.verdict == HEALTHY
    assert health.actions == (
        "2 orphan large bodies (4.0 KiB): no message refers to them; the store's next load "
        "removes them (nothing to do)",
    )


def test_the_ha_line_names_the_live_holder_and_says_nothing_for_a_store_never_an_ha_node(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    open_store(config).close()
    assert ha_line(config, 0) is None
    assert not (Path(config.node_manager_lock_directory) / "server.lock").exists()

    held = _line_while_live(config)

    assert held is not None and held.startswith("live lock: held by pid ")
    assert ha_line(config, 0) == "live lock: not held (no live node), state ACTIVE"


def test_iso_time_is_utc_with_milliseconds() -> None:
    assert iso_time(1_796_309_758_856) == "2026-12-03T14:55:58.856Z"


def test_on_a_database_the_ha_line_reads_the_lease_and_creates_no_rows(tmp_path: Path) -> None:
    import sqlalchemy as sa

    from store.db.migrate import upgrade
    from store.db.schema import TableNames
    from tests.support.backends import unique_prefix
    from tests.support.db_backends import db_backend

    spec = db_backend("sqlite")
    config = spec.make_config(tmp_path, unique_prefix())
    upgrade(config)  # the tables, without the rows a node manager (or an open) writes
    assert config.database_store is not None
    table = TableNames.from_config(config.database_store).node_manager
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        assert ha_line(config, 0) is None
        with engine.connect() as conn:
            rows = conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY id")).fetchall()
        assert all(set(r[1:]) == {None} for r in rows), "the HA line wrote the node manager"

        held = _line_while_live(config)
    finally:
        engine.dispose()
        spec.cleanup(config)
    assert held is not None and held.startswith("live lock: held by ")
    assert ", lease expires at 20" in held and "Z (in " in held
