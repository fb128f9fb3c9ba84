"""The broker's Prometheus metrics (store/stomp/metrics.py): scraped over HTTP and parsed with
prometheus_client's own parser, from the library (an embedding program's collector) and from
``store broker --metrics HOST:PORT``."""

from __future__ import annotations

import logging
import socket
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from store import StoreConfig
from store.stomp.metrics import FLUSH_BUCKETS, serve_metrics
from tests.stomp.support import BrokerProcess, bye, client, running_broker, send_all, write_toml
from tests.support.backends import file_config_mapping

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape(host: str, port: int) -> Samples:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _one(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def test_an_embedding_program_scrapes_what_the_broker_did(tmp_path: Path) -> None:
    mapping = file_config_mapping(tmp_path, "NIO")
    mapping["address-settings"] = {"#": {"max-delivery-attempts": 1, "dead-letter-address": "DLA"}}
    with running_broker(StoreConfig.from_mapping(mapping)) as broker:
        port = broker.address[1]
        manager = broker.queue_manager.store.manager
        manager.create_address("DLA", routing_types=("MULTICAST",))
        manager.create_queue("dead", address="DLA", routing_type="MULTICAST")
        producer, prec = client(port)
        send_all(producer, prec, "/queue/a", ["one", "two", "three"])
        bye(producer, prec)
        conn, rec = client(port)
        conn.subscribe("/queue/a", id="s", ack="client-individual")
        first, second, _third = rec.wait_messages(3)
        conn.ack(first.headers["message-id"], "s", receipt="a")
        conn.nack(second.headers["message-id"], "s", receipt="n")  # the one attempt: dead
        rec.wait_receipts({"a", "n"})
        bye(conn, rec)  # the third goes back: a failed delivery too, so dead as well
        server = serve_metrics(broker.collector(), "127.0.0.1", 0)
        try:
            samples = _scrape(*server.address)
        finally:
            server.close()
    assert _one(samples, "store_queue_depth", queue="/queue/a") == 0
    assert _one(samples, "store_queue_depth", queue="dead") == 2
    assert _one(samples, "store_messages_sent_total") == 3
    assert _one(samples, "store_messages_acknowledged_total") == 1
    assert _one(samples, "store_messages_redelivered_total") == 2
    assert _one(samples, "store_messages_dead_lettered_total", address="/queue/a") == 2
    assert not [k for k in samples if k[0] == "store_messages_expired_total"]
    assert _one(samples, "store_connections_total") == 2
    assert _one(samples, "store_ha_live") == 1
    assert not [k for k in samples if k[0] == "store_database_reconnects_total"]  # files
    flushes = _one(samples, "store_flush_seconds_count")
    assert flushes >= 2  # the SENDs' receipts, the ACK's and the NACK's
    assert _one(samples, "store_flush_seconds_bucket", le="+Inf") == flushes
    assert (
        len([k for k in samples if k[0] == "store_flush_seconds_bucket"]) == len(FLUSH_BUCKETS) + 1
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_store_broker_serves_metrics_where_asked(tmp_path: Path) -> None:
    path = write_toml(tmp_path / "broker.toml", file_config_mapping(tmp_path, "NIO"))
    metrics = _free_port()
    broker = BrokerProcess(path, "--metrics", f"127.0.0.1:{metrics}")
    try:
        conn, rec = client(broker.port)
        send_all(conn, rec, "/queue/m", ["x", "y"])
        samples = _scrape("127.0.0.1", metrics)
        assert _one(samples, "store_queue_depth", queue="/queue/m") == 2
        assert _one(samples, "store_messages_sent_total") == 2
        assert _one(samples, "store_connections_open") == 1
        bye(conn, rec)
    finally:
        assert broker.terminate() == 0


def test_a_bad_metrics_address_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from tests.support.cli import run_store

    path = write_toml(tmp_path / "broker.toml", file_config_mapping(tmp_path, "NIO"))
    done = run_store("broker", "--config", str(path), "--port", "0", "--metrics", "9404")
    assert done.returncode == 2, done.stderr
    assert "--metrics" in done.stderr and "Traceback" not in done.stderr


def test_each_connection_and_its_end_are_logged_at_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))
    with (
        caplog.at_level(logging.INFO, logger="store.stomp.server"),
        running_broker(config) as broker,
    ):
        conn, rec = client(broker.address[1])
        bye(conn, rec)
    lines = [r.getMessage() for r in caplog.records if r.name == "store.stomp.server"]
    opened = [line for line in lines if line.startswith("connection from 127.0.0.1:")]
    assert any(line.endswith(" closed") for line in opened), lines
    assert any(not line.endswith(" closed") for line in opened), lines


def test_paging_addresses_and_database_reconnects_are_shown(tmp_path: Path) -> None:
    from tests.support.backends import unique_prefix
    from tests.support.db_backends import db_backend

    spec = db_backend("postgresql")
    config = spec.make_config(tmp_path, unique_prefix()).replace(
        address_settings={"/queue/p": {"max_size_messages": 1, "address_full_policy": "PAGE"}}
    )
    try:
        with running_broker(config) as broker:
            conn, rec = client(broker.address[1])
            send_all(conn, rec, "/queue/p", [f"m{i}" for i in range(5)])
            bye(conn, rec)
            server = serve_metrics(broker.collector(), "127.0.0.1", 0)
            try:
                samples = _scrape(*server.address)
            finally:
                server.close()
    finally:
        spec.cleanup(config)
    assert _one(samples, "store_address_paged_messages", address="/queue/p") == 4
    assert _one(samples, "store_address_pages", address="/queue/p") >= 1
    assert _one(samples, "store_address_memory_bytes", address="/queue/p") > 0
    assert _one(samples, "store_database_reconnects_total") == 0
