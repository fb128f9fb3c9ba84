"""A network cut between the store and its database (a loopback proxy the test controls,
:mod:`tests.support.tcp_proxy`, in front of the shared PostgreSQL and MariaDB servers, which stay
up): nothing is refused and nothing answers, for longer than ``jdbc-network-timeout``; then the
cut heals and the connections made before it are reset.

While it lasts no call hangs: each send returns or raises within about the timeout (a commit
that got no answer leaves its callers in doubt, an append once the outage is known is refused).
After it heals the same store and manager serve again within 2 s, by themselves; a fresh open
then holds every acknowledged send once, no refused send and no acknowledged ack, and a send
in doubt at most once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from store import StoreConfig, open_store
from store.db.migrate import drop_schema
from store.errors import StoreError, StoreUnavailableError
from store.messaging import Message, StorageManager
from tests.db.test_outages import Traffic, check_reopened
from tests.support.backends import unique_prefix
from tests.support.db_backends import store_mapping
from tests.support.tcp_proxy import TcpProxy
from tests.support.waiting import wait_for

TIMEOUT_MS = 1000
CUT_SECONDS = 3.0
SERVERS = {
    "postgresql": (5432, "jdbc:postgresql://127.0.0.1:{port}/test", "postgres", None),
    "mariadb": (3306, "jdbc:mariadb://127.0.0.1:{port}/test", "root", ""),
}


@pytest.fixture(params=sorted(SERVERS))
def proxied(request: pytest.FixtureRequest) -> Iterator[tuple[TcpProxy, StoreConfig]]:
    port, url, user, password = SERVERS[request.param]
    proxy = TcpProxy(("127.0.0.1", port))
    mapping = store_mapping(
        url.format(port=proxy.port), unique_prefix(), user=user, password=password,
        **{"jdbc-network-timeout": TIMEOUT_MS},
    )  # fmt: skip
    config = StoreConfig.from_mapping(mapping)
    try:
        yield proxy, config
    finally:
        proxy.close()
        direct = mapping["database-store"]
        direct["jdbc-connection-url"] = url.format(port=port)
        drop_schema(StoreConfig.from_mapping(mapping))


def _produce(
    sm: StorageManager, k: int, traffic: Traffic, stop: threading.Event, longest: list[float]
) -> None:
    n = 0
    while not stop.is_set():
        body = f"p{k}-{n}"
        n += 1
        began = time.monotonic()
        try:
            mid = sm.send(Message("orders", body.encode()), dup_id=body)
        except StoreUnavailableError as exc:
            with traffic.lock:
                (traffic.in_doubt if exc.in_doubt else traffic.refused).add(body)
            time.sleep(0.01)
            continue
        except BaseException as exc:
            traffic.errors.append(exc)
            return
        finally:
            longest[k] = max(longest[k], time.monotonic() - began)
        assert mid is not None
        with traffic.lock:
            traffic.sent[body] = mid
            traffic.sent_at.append(time.monotonic())


def _consume(sm: StorageManager, traffic: Traffic, stop: threading.Event, maybe: set[int]) -> None:
    """Receive and ack; an ack in doubt goes to ``maybe`` (it may be applied later)."""
    while not stop.is_set():
        try:
            deliveries = sm.receive("orders", 10)
        except StoreUnavailableError:
            time.sleep(0.01)
            continue
        for d in deliveries:
            mid = d.message.message_id
            assert mid is not None
            try:
                sm.ack("orders", mid)
            except StoreUnavailableError as exc:
                if exc.in_doubt:
                    with traffic.lock:
                        maybe.add(mid)
                continue
            except BaseException as exc:
                traffic.errors.append(exc)
                return
            with traffic.lock:
                traffic.acked.add(mid)
        if not deliveries:
            time.sleep(0.002)


def test_a_network_cut_never_hangs_a_call_and_the_store_serves_again_after(
    proxied: tuple[TcpProxy, StoreConfig],
) -> None:
    proxy, config = proxied
    store = open_store(config)
    sm = StorageManager(store)
    traffic = Traffic()
    stop = threading.Event()
    longest = [0.0, 0.0]
    threads = [
        threading.Thread(target=_produce, args=(sm, k, traffic, stop, longest), daemon=True)
        for k in range(2)
    ]
    maybe: set[int] = set()  # acks in doubt
    threads.append(threading.Thread(target=_consume, args=(sm, traffic, stop, maybe), daemon=True))
    try:
        sm.load()
        sm.create_address("orders")
        sm.create_queue("orders", address="orders")
        for t in threads:
            t.start()
        wait_for(lambda: bool(traffic.sent), 15.0, "nothing was sent before the cut")
        time.sleep(0.5)  # traffic under way
        proxy.cut()
        time.sleep(CUT_SECONDS)
        proxy.heal()
        healed = time.monotonic()
        time.sleep(2.5)
        stop.set()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads), "a producer or the consumer hangs"
        assert not traffic.errors, traffic.errors
        # a call returns or raises within about the timeout (plus a pause of the writer)
        assert max(longest) < CUT_SECONDS, f"a send took {max(longest):.2f} s"
        assert traffic.in_doubt or traffic.refused, "the cut was never noticed"
        resumed = [t for t in traffic.sent_at if t > healed]
        assert resumed, "no send succeeded after the cut healed"
        assert resumed[0] - healed < 2.0, (
            f"the first send after it took {resumed[0] - healed:.2f} s"
        )
        sm.close()
        store.close()
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        try:
            sm.close()
            store.close()
        except StoreError:
            pass
    check_reopened(config, traffic, maybe)
