"""A broker's figures for Prometheus: what ``store broker --metrics HOST:PORT`` serves, and
what a program embedding a broker registers itself (:class:`BrokerCollector`).

The broker keeps plain counts as it works (:class:`BrokerCounts`: an increment under a lock,
no Prometheus object on the path of a frame); the collector turns them, and what the storage
manager knows at that moment, into Prometheus metric families at each scrape:

- ``store_queue_depth{queue}`` (gauge): messages on the queue not yet acknowledged;
- ``store_messages_sent_total``: SEND frames stored (queues and durable topics);
- ``store_messages_acknowledged_total``: messages acknowledged (ACK, ``ack:auto`` delivery);
- ``store_messages_redelivered_total``: messages put back (NACK, UNSUBSCRIBE, a connection
  gone);
- ``store_messages_dead_lettered_total{address}``, ``store_messages_expired_total{address}``:
  what the delivery policies moved or removed, by original address;
- ``store_flush_seconds`` (histogram, :data:`FLUSH_BUCKETS`): the broker's waits for
  durability, each before the RECEIPTs of the SENDs or ACKs it covers;
- ``store_address_memory_bytes{address}``, ``store_address_pages{address}``,
  ``store_address_paged_messages{address}`` (gauges): each paging address's bytes in memory
  (what ``max-size-bytes`` limits), its pages, its paged messages not yet acknowledged
  (:meth:`~store.messaging.StorageManager.paging_figures`);
- ``store_database_reconnects_total`` (database stores only): outages ridden out
  (:attr:`~store.store.Store.outages`);
- ``store_connections_total``, ``store_connections_open`` (gauge): STOMP connections accepted,
  and open now;
- ``store_ha_live`` (gauge): 1 on the live node of an HA pair, or a broker outside one.

Counters count from the broker's start (Prometheus's ``rate`` takes restarts in its stride).

Thread-safety: :class:`BrokerCounts` may be updated from any thread; a scrape runs on the
metrics server's thread and takes the storage manager's lock once per queue.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

if TYPE_CHECKING:
    from store.messaging import StorageManager

__all__ = ["FLUSH_BUCKETS", "BrokerCollector", "BrokerCounts", "MetricsServer", "serve_metrics"]

#: The upper bounds (seconds) of the flush-wait histogram's buckets: a local disk's sync is
#: 0.1-2 ms, a database commit 1-20 ms, an outage seconds.
FLUSH_BUCKETS: Final = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)


class BrokerCounts:
    """What one broker did since it started, counted as it happens."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent = 0
        self.acknowledged = 0
        self.redelivered = 0
        self.connections_total = 0
        self.flush_buckets = [0] * (len(FLUSH_BUCKETS) + 1)  # the last: +Inf
        self.flush_sum = 0.0

    def add(self, name: str, n: int = 1) -> None:
        """``name`` (sent, acknowledged, redelivered, connections_total) += ``n``."""
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def flushed(self, seconds: float) -> None:
        """One wait for durability that took ``seconds``."""
        at = bisect.bisect_left(FLUSH_BUCKETS, seconds)
        with self._lock:
            self.flush_buckets[at] += 1
            self.flush_sum += seconds

    def timed_flush(self, flush: Callable[[], None]) -> None:
        """Run ``flush`` and count how long it took (also when it raises)."""
        began = time.perf_counter()
        try:
            flush()
        finally:
            self.flushed(time.perf_counter() - began)


class BrokerCollector:
    """A prometheus_client collector of one broker: ``REGISTRY.register(BrokerCollector(
    broker.queue_manager.store.manager, broker.counts, broker.connections))``."""

    def __init__(
        self,
        manager: StorageManager,
        counts: BrokerCounts,
        connections: Callable[[], int],
        *,
        live: Callable[[], bool] = lambda: True,
    ) -> None:
        self._manager = manager
        self._counts = counts
        self._connections = connections
        self._live = live

    def collect(self) -> Iterator[Any]:
        """The metric families of the module docstring, as they are now."""
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        sm, c = self._manager, self._counts
        depth = GaugeMetricFamily(
            "store_queue_depth", "Messages on a queue not yet acknowledged", labels=["queue"]
        )
        for queue in sm.queues():
            depth.add_metric([queue.name], sm.depth(queue.name))
        yield depth
        for name, what, value in (
            ("store_messages_sent", "SEND frames stored", c.sent),
            ("store_messages_acknowledged", "Messages acknowledged", c.acknowledged),
            ("store_messages_redelivered", "Messages put back for delivery", c.redelivered),
            ("store_connections", "STOMP connections accepted", c.connections_total),
        ):
            yield CounterMetricFamily(name, what, value=value)
        moved = sm.policy_counts()
        for name, key, what in (
            ("store_messages_dead_lettered", "dead_lettered", "Messages dead-lettered"),
            ("store_messages_expired", "expired", "Messages expired"),
        ):
            family = CounterMetricFamily(name, f"{what}, by original address", labels=["address"])
            for address, n in sorted(moved[key].items()):
                family.add_metric([address], n)
            yield family
        with c._lock:
            counts, total = list(c.flush_buckets), c.flush_sum
        buckets, running = [], 0
        for bound, n in zip((*map(str, FLUSH_BUCKETS), "+Inf"), counts, strict=True):
            running += n
            buckets.append((bound, running))
        yield HistogramMetricFamily(
            "store_flush_seconds", "The broker's waits for durability", buckets=buckets,
            sum_value=total,
        )  # fmt: skip
        yield from _paging(sm.paging_figures())
        outages = sm.store.outages
        if outages is not None:
            yield CounterMetricFamily(
                "store_database_reconnects", "Database outages ridden out", value=outages
            )
        yield GaugeMetricFamily(
            "store_connections_open", "STOMP connections open now", value=self._connections()
        )
        yield GaugeMetricFamily(
            "store_ha_live", "1 on the live node (or outside an HA pair)", value=int(self._live())
        )


def _paging(figures: dict[str, dict[str, int]]) -> Iterator[Any]:
    from prometheus_client.core import GaugeMetricFamily

    for key, name, what in (
        ("memory_bytes", "store_address_memory_bytes", "Bytes an address holds in memory"),
        ("pages", "store_address_pages", "Pages an address has"),
        ("paged", "store_address_paged_messages", "Paged messages not yet acknowledged"),
    ):
        family = GaugeMetricFamily(name, what, labels=["address"])
        for address, values in figures.items():
            family.add_metric([address], values[key])
        yield family


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        del format, args  # a scrape every few seconds is not worth a log line


class MetricsServer:
    """The HTTP server of :func:`serve_metrics` on its own daemon thread; ``address`` is the
    (host, port) it listens on. :meth:`close` stops it."""

    def __init__(self, server: WSGIServer) -> None:
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="store-metrics",
            daemon=True,
        )  # fmt: skip
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def close(self) -> None:
        """Stop serving and close the socket. Idempotent."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()


def serve_metrics(collector: BrokerCollector, host: str, port: int) -> MetricsServer:
    """Serve ``collector``'s metrics as Prometheus text on ``http://host:port/`` (any path;
    port 0: a free one). Raises OSError when the port cannot be bound, ImportError without
    prometheus_client (the ``stomp`` extra)."""
    from prometheus_client import CollectorRegistry, make_wsgi_app

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)  # type: ignore[arg-type]
    server = make_server(host, port, make_wsgi_app(registry), handler_class=_Quiet)
    return MetricsServer(server)
