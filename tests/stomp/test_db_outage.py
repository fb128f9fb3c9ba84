"""``store broker`` on a database store through a PostgreSQL restart (docs/db.md "Outages"):
a private cluster (:mod:`tests.support.pg_cluster`) restarted while a client sends with
receipts. The client stays connected; a SEND refused during the outage gets an ERROR and no
RECEIPT; the broker serves again by itself (every SEND from a second after the restart is
receipted); afterwards every receipted message is delivered once and no refused one at all.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.stomp.support import BrokerProcess, bye, client, write_toml
from tests.support.backends import unique_prefix
from tests.support.db_backends import store_mapping
from tests.support.pg_cluster import private_cluster


def test_the_broker_keeps_its_clients_through_a_database_restart(tmp_path: Path) -> None:
    with private_cluster() as cluster:
        mapping = store_mapping(cluster.url, unique_prefix(), user="postgres")
        broker = BrokerProcess(write_toml(tmp_path / "broker.toml", mapping))
        conn, rec = client(broker.port)
        sent: list[tuple[str, float]] = []
        stop = threading.Event()

        def produce() -> None:
            i = 0
            while not stop.is_set():
                body = f"m{i}"
                conn.send("/queue/out", body, headers={"receipt": body})
                sent.append((body, time.monotonic()))
                i += 1
                time.sleep(0.005)

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        time.sleep(0.5)
        cluster.restart("fast")
        back = time.monotonic()
        time.sleep(2.5)
        stop.set()
        producer.join(10)
        assert not rec.disconnected, "the broker dropped the client"
        bye(conn, rec)  # every SEND before it was answered
        refused = {e.headers.get("receipt-id") for e in rec.errors}
        receipted = set(rec.receipts) - {r for r in rec.receipts if r.startswith("bye-")}
        assert not (refused & receipted), f"both ERROR and RECEIPT: {sorted(refused & receipted)}"
        assert {b for b, _ in sent} == receipted | refused, "a SEND got no answer"
        later = {b for b, t in sent if t > back + 1.0}
        assert later and later <= receipted, f"refused after the restart: {later - receipted}"

        conn, rec = client(broker.port)
        conn.subscribe("/queue/out", id="s", ack="auto")
        delivered = [m.body for m in rec.quiet(1.0)]
        bye(conn, rec)
        assert broker.terminate() == 0
    assert len(delivered) == len(set(delivered)), "a message came twice"
    assert receipted <= set(delivered), f"receipted, not delivered: {receipted - set(delivered)}"
    assert not (refused & set(delivered)), f"refused and stored: {refused & set(delivered)}"
