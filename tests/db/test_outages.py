"""Database outages under a running storage manager (docs/db.md "Outages", :mod:`store.db.writer`
"Outages"): a PostgreSQL restart, a crash and start, and every connection terminated, while
producers send and a consumer acknowledges. The same store carries on by itself, and a
fresh open afterwards holds every acknowledged send once, no send that raised without being
in doubt, and no acknowledged ack.

The cluster is private (:mod:`tests.support.pg_cluster`), one per module: the shared server
is never stopped. Each test has its own table prefix in it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import psycopg
import pytest

from store import StoreConfig, open_store
from store.db.migrate import drop_schema
from store.errors import DuplicateIdError, SchemaError, StoreError, StoreUnavailableError
from store.messaging import Message, StorageManager
from tests.support.backends import unique_prefix
from tests.support.db_backends import store_mapping
from tests.support.pg_cluster import PgCluster, private_cluster
from tests.support.waiting import wait_for

PRODUCERS = 3
#: Long enough that none of these outages (well under a second) makes an answer in doubt.
NETWORK_TIMEOUT_MS = 10_000
PAGED = {"max_size_bytes": 4096, "address_full_policy": "PAGE", "page_size_bytes": 8192}


@pytest.fixture(scope="module")
def cluster() -> Iterator[PgCluster]:
    with private_cluster() as made:
        yield made


@pytest.fixture
def config(cluster: PgCluster) -> Iterator[StoreConfig]:
    made = StoreConfig.from_mapping(
        store_mapping(
            cluster.url,
            unique_prefix(),
            user="postgres",
            **{"jdbc-network-timeout": NETWORK_TIMEOUT_MS},
        )
    )
    yield made
    drop_schema(made)


@dataclass
class Traffic:
    """What the producers and the consumer were told."""

    sent: dict[str, int] = field(default_factory=dict)  # body -> id, the send returned
    refused: set[str] = field(default_factory=set)  # raised, not in doubt: applied nothing
    in_doubt: set[str] = field(default_factory=set)
    acked: set[int] = field(default_factory=set)  # the ack returned
    sent_at: list[float] = field(default_factory=list)  # when each send returned
    errors: list[BaseException] = field(default_factory=list)  # anything else
    lock: threading.Lock = field(default_factory=threading.Lock)


def _produce(
    sm: StorageManager, k: int, traffic: Traffic, stop: threading.Event, pad: int = 0
) -> None:
    """Send ``p<k>-<n>`` (``pad`` bytes more after a ``|``: large messages) with its dup id."""
    n = 0
    while not stop.is_set():
        body = f"p{k}-{n}"
        n += 1
        data = body.encode() + (b"|" + b"." * pad if pad else b"")
        try:
            mid = sm.send(Message("orders", data), dup_id=body)
        except StoreUnavailableError as exc:
            with traffic.lock:
                (traffic.in_doubt if exc.in_doubt else traffic.refused).add(body)
            time.sleep(0.01)
            continue
        except BaseException as exc:
            traffic.errors.append(exc)
            return
        assert mid is not None
        with traffic.lock:
            traffic.sent[body] = mid
            traffic.sent_at.append(time.monotonic())


def _name(m: Message) -> str:
    """The ``p<k>-<n>`` a producer sent as ``m``'s body (a large one read whole)."""
    with m.open_body() as body:
        return body.read().split(b"|", 1)[0].decode()


def _consume(sm: StorageManager, traffic: Traffic, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            deliveries = sm.receive("orders", 10)
            for d in deliveries:
                mid = d.message.message_id
                assert mid is not None
                sm.ack("orders", mid)
                with traffic.lock:
                    traffic.acked.add(mid)
        except StoreUnavailableError:
            time.sleep(0.01)
            continue
        except BaseException as exc:
            traffic.errors.append(exc)
            return
        if not deliveries:
            time.sleep(0.002)


def _outage(cluster: PgCluster, how: str) -> None:
    if how == "restart":
        cluster.restart("fast")
    elif how == "crash":
        cluster.restart("immediate")
    else:
        cluster.terminate_clients()


@pytest.mark.parametrize("paged", [False, True], ids=["in-memory", "paged"])
@pytest.mark.parametrize("how", ["restart", "crash", "terminate"])
def test_the_store_carries_on_through_an_outage_and_answers_each_send_once(
    cluster: PgCluster, config: StoreConfig, how: str, paged: bool
) -> None:
    """``paged``: the address pages past 4 KiB, so most sends and receives go through the
    page store (its flusher rides the outage out as the journals do)."""
    carries_on(config, lambda: _outage(cluster, how), paged=paged)


@pytest.mark.parametrize("how", ["restart", "terminate"])
def test_large_messages_are_sent_through_an_outage_and_answered_once(
    cluster: PgCluster, config: StoreConfig, how: str
) -> None:
    """Every send is a large message (its body written to the large-message store before
    its journal record): a body whose write failed leaves no message, and no orphan once a
    load has swept it."""
    carries_on(config.replace(min_large_message_size=1024), lambda: _outage(cluster, how),
               paged=False, pad=4096)  # fmt: skip
    with open_store(config) as again:
        sm = StorageManager(again)
        sm.load()  # sweeps the bodies of sends that failed
        kept = sorted(m.message_id or 0 for m, _ in sm.browse())
        stored = sorted(again.large_messages.ids())
        sm.close()
    assert stored == kept, "orphan bodies left after the load's sweep"


def carries_on(
    config: StoreConfig, outage: Callable[[], None], *, paged: bool, pad: int = 0
) -> None:
    """Producers and a consumer on a manager over ``config`` while ``outage()`` takes the
    database away and brings it back (it returns once the database accepts connections):
    no error, none in doubt, a send succeeds within 2 s, the outage was noticed; after a
    fresh open every acknowledged send is there once, no refused send was applied and no
    acknowledged ack undone."""
    if paged:
        config = config.replace(address_settings={"orders": PAGED})
    store = open_store(config)
    sm = StorageManager(store)
    traffic = Traffic()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        sm.load()
        sm.create_address("orders")
        sm.create_queue("orders", address="orders")
        threads = [
            threading.Thread(target=_produce, args=(sm, k, traffic, stop, pad), daemon=True)
            for k in range(PRODUCERS)
        ]
        threads.append(threading.Thread(target=_consume, args=(sm, traffic, stop), daemon=True))
        for t in threads:
            t.start()
        wait_for(lambda: bool(traffic.sent), 15.0, "nothing was sent before the outage")
        time.sleep(0.5)  # traffic under way
        outage()
        back = time.monotonic()  # the database accepts connections again
        time.sleep(2.5)
        stop.set()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads), "a producer or the consumer hangs"
        assert not traffic.errors, traffic.errors
        assert not traffic.in_doubt, f"answers in doubt after a short outage: {traffic.in_doubt}"
        resumed = [t for t in traffic.sent_at if t > back]
        assert resumed, "no send succeeded after the database came back"
        assert resumed[0] - back < 2.0, f"the first send after it took {resumed[0] - back:.2f} s"
        journal = store.messages._started()  # type: ignore[attr-defined]
        outages = journal.health.outages + store.paging.flusher.outages  # type: ignore[attr-defined]
        assert outages >= 1, "the outage was never noticed"
        if paged:
            assert store.paging.addresses() == ["orders"], "nothing was paged"
        sm.close()
        store.close()  # the same store carried on: nothing to report at close
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        try:
            sm.close()
            store.close()
        except StoreError:
            pass

    check_reopened(config, traffic)


def check_reopened(
    config: StoreConfig, traffic: Traffic, maybe_acked: set[int] | None = None
) -> None:
    """A fresh open of ``config`` holds every acknowledged send once (``maybe_acked``: acks
    that were in doubt, so may have been applied), no refused send and no acknowledged ack."""
    with open_store(config) as again:
        reopened = StorageManager(again)
        reopened.load()
        bodies = [_name(m) for m, _ in reopened.browse()]
        reopened.close()
    assert len(bodies) == len(set(bodies)), "a message is stored twice"
    found = set(bodies)
    acked = traffic.acked | (maybe_acked or set())
    waiting = {b for b, mid in traffic.sent.items() if mid not in acked}
    assert waiting <= found, f"acknowledged sends lost: {sorted(waiting - found)[:10]}"
    assert not (traffic.refused & found), f"refused sends applied: {traffic.refused & found}"
    gone = {b for b, mid in traffic.sent.items() if mid in traffic.acked}
    assert not (gone & found), f"acknowledged acks undone: {sorted(gone & found)[:10]}"


def test_an_outage_longer_than_the_network_timeout_leaves_the_answer_in_doubt_then_applies_it(
    cluster: PgCluster,
) -> None:
    """A sync append queued as the database goes away for longer than
    ``jdbc-network-timeout`` raises in doubt within about that timeout, and a ``sync_future``
    taken for it fails in doubt as well; an append once the outage is known is refused
    having applied nothing; when the database is back the queued one is applied (settled at
    reconnect) and the same store writes again."""
    config = StoreConfig.from_mapping(
        store_mapping(
            cluster.url, unique_prefix(), user="postgres", **{"jdbc-network-timeout": 1000}
        )
    )
    try:
        with open_store(config) as store:
            store.bindings.load()
            journal = store.messages
            journal.load()
            journal.append_add(1, 7, b"before", sync=True)
            cluster.stop("fast")
            try:
                began = time.monotonic()
                with pytest.raises(StoreUnavailableError) as doubt:
                    journal.append_add(2, 7, b"queued as it went away", sync=True)
                waited = time.monotonic() - began
                assert doubt.value.in_doubt, doubt.value
                assert 0.9 <= waited < 3.0, f"in doubt after {waited:.2f} s"
                future = journal.sync_future()  # the same batch, still not confirmed
                failed = future.exception(timeout=3.0)
                assert isinstance(failed, StoreUnavailableError) and failed.in_doubt, failed
                with pytest.raises(StoreUnavailableError) as refused:
                    journal.append_add(3, 7, b"refused", sync=True)
                assert not refused.value.in_doubt, refused.value
            finally:
                cluster.start()
            deadline = time.monotonic() + 10
            while journal._started().health.outages < 1:  # type: ignore[attr-defined]
                assert time.monotonic() < deadline, "the journal never reconnected"
                time.sleep(0.02)
            journal.append_add(4, 7, b"after", sync=True)
        with open_store(config) as again:
            again.bindings.load()
            ids = sorted(r.id for r in again.messages.load().records)
        assert ids == [1, 2, 4], ids
    finally:
        drop_schema(config)


def test_a_send_in_doubt_retried_with_its_duplicate_id_is_stored_once(cluster: PgCluster) -> None:
    """A send whose answer is in doubt (the database away past ``jdbc-network-timeout``) is
    applied once the database is back; the broker's retry with the same ``dup_id`` is then
    refused as a duplicate (DuplicateIdError), never stored a second time."""
    config = StoreConfig.from_mapping(
        store_mapping(
            cluster.url, unique_prefix(), user="postgres", **{"jdbc-network-timeout": 1000}
        )
    )
    try:
        with open_store(config) as store:
            sm = StorageManager(store)
            sm.load()
            sm.create_address("orders")
            sm.create_queue("orders", address="orders")
            sm.send(Message("orders", b"before"), dup_id="a")
            cluster.stop("fast")
            try:
                with pytest.raises(StoreUnavailableError) as doubt:
                    sm.send(Message("orders", b"in doubt"), dup_id="b")
                assert doubt.value.in_doubt, doubt.value
            finally:
                cluster.start()
            deadline = time.monotonic() + 10
            while True:  # the broker retries until the store answers
                try:
                    sm.send(Message("orders", b"in doubt"), dup_id="b")
                except StoreUnavailableError as exc:
                    assert not exc.in_doubt, exc
                    assert time.monotonic() < deadline, "the store never answered again"
                    time.sleep(0.05)
                    continue
                except DuplicateIdError:
                    break
                raise AssertionError("the retry of a send in doubt was stored again")
            sm.close()
        with open_store(config) as again:
            reopened = StorageManager(again)
            reopened.load()
            bodies = [bytes(m.body) for m, _ in reopened.browse()]  # type: ignore[arg-type]
            reopened.close()
        assert bodies == [b"before", b"in doubt"], bodies
    finally:
        drop_schema(config)


def test_a_schema_revision_changed_while_the_database_was_away_stops_the_writer(
    cluster: PgCluster,
) -> None:
    """The first thing a journal does on a fresh connection after an outage is to read the
    store's schema revision again (store.db.settle.revision_check): a database restored or
    migrated meanwhile is SchemaError for the batch that was waiting, nothing of it is
    written, and the writer stops for good (later appends are refused)."""
    prefix = unique_prefix()
    role = f"r{prefix[1:-1]}"
    admin = psycopg.connect(
        f"host=127.0.0.1 port={cluster.port} dbname=postgres user=postgres", autocommit=True
    )
    admin.execute(f"CREATE ROLE {role} SUPERUSER LOGIN")
    config = StoreConfig.from_mapping(
        store_mapping(cluster.url, prefix, user=role, **{"jdbc-network-timeout": 10_000})
    )
    version = f"{prefix}bindings_version"
    try:
        store = open_store(config)
        try:
            store.bindings.load()
            journal = store.messages
            journal.load()
            journal.append_add(1, 7, b"before", sync=True)
            head = admin.execute(f"SELECT version_num FROM {version}").fetchone()
            admin.execute(f"ALTER ROLE {role} NOLOGIN")  # away: no connection works
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            journal.append_add(2, 7, b"waits through the outage")  # its batch fails
            deadline = time.monotonic() + 10
            while journal._started().health.down_since is None:  # type: ignore[attr-defined]
                assert time.monotonic() < deadline, "the outage was never noticed"
                time.sleep(0.02)
            admin.execute(f"UPDATE {version} SET version_num = 'restored_backup'")
            admin.execute(f"ALTER ROLE {role} LOGIN")  # back, with another revision
            with pytest.raises(SchemaError, match="restored_backup"):
                journal.flush()
            with pytest.raises(StoreUnavailableError):
                journal.append_add(3, 7, b"refused", sync=True)
        finally:
            try:
                store.close()
            except StoreError:
                pass
        ids = [row[0] for row in admin.execute(f"SELECT id FROM {prefix}messages ORDER BY id")]
        assert ids == [1], f"rows written into the changed schema: {ids}"
        assert head is not None
        admin.execute(f"UPDATE {version} SET version_num = %s", (head[0],))
    finally:
        drop_schema(config)
        admin.execute(f"REASSIGN OWNED BY {role} TO postgres")
        admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.close()
