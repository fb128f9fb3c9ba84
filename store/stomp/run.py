"""Running a broker until told to stop: what ``store broker`` calls.

:func:`run_broker` opens the store the configuration describes, loads it (``progress``),
binds the port, reports the address (``on_listening``), serves until ``stop`` is set, then
shuts down (:mod:`store.stomp.server`'s order): no new connection, every connection ends and
its thread is waited for (a few seconds at most), then the store is closed cleanly (the id
generator's position recorded).

With ``ha-policy`` in the configuration (``StoreConfig.ha_role``, or ``role``), the broker is
one node of a shared-store HA pair (docs/ha.md): a backup waits for the live lock before it
opens the store or its port; a node that loses the live lock stops at once (``stop`` is set
from the node manager's thread; the port closes as the server shuts down) and returns
LockLostError after closing.

``security`` (:mod:`store.stomp.security`) checks logins and permissions; None lets any
login do anything. ``acceptors`` (:mod:`store.stomp.acceptors`): the ports, TLS and limits;
None: one plain port on ``host``:``port``. ``on_listening`` is told each acceptor's address.

With ``metrics`` (host, port) the broker's figures are served as Prometheus text there
(:mod:`store.stomp.metrics`), from before the STOMP port opens until the broker closes;
``on_metrics`` is told the address.

Thread-safety: call from one thread (the main thread, for a signal handler to set ``stop``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from store.config import StoreConfig
from store.errors import ConfigError, LockLostError
from store.stomp.acceptors import Acceptor
from store.stomp.frames import DEFAULT_MAX_FRAME_SIZE
from store.stomp.metrics import MetricsServer, serve_metrics
from store.stomp.queue_manager import DEFAULT_PREFETCH
from store.stomp.security import BrokerSecurity
from store.stomp.server import StompBroker, open_broker

__all__ = ["run_broker"]


def run_broker(
    config: StoreConfig,
    *,
    stop: threading.Event,
    host: str = "127.0.0.1",
    port: int = 61613,
    role: str | None = None,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = DEFAULT_PREFETCH,
    progress: Callable[[str, int, int], None] | None = None,
    on_listening: Callable[[str, int], None] | None = None,
    on_waiting: Callable[[str], None] | None = None,
    metrics: tuple[str, int] | None = None,
    on_metrics: Callable[[str, int], None] | None = None,
    security: BrokerSecurity | None = None,
    acceptors: list[Acceptor] | None = None,
) -> None:
    """Serve STOMP on ``host``:``port`` over the store until ``stop`` is set (see the module
    docstring). Returns None after a clean shutdown. Raises LockLostError when the live lock
    was lost, and what opening and loading the store, binding the port and going live
    raise."""
    role = role or config.ha_role
    nm = None
    lost = threading.Event()
    if role is not None:
        from store.ha import go_live, open_node_manager

        nm = open_node_manager(config)
        if on_waiting is not None:
            on_waiting(role)
        try:
            go_live(nm, role)
        except BaseException:
            nm.close()
            raise

        def on_lock_lost(*_: object) -> None:
            lost.set()
            stop.set()

        nm.on_lock_lost(on_lock_lost)
    try:
        broker = open_broker(
            config,
            host=host,
            port=port,
            max_frame_size=max_frame_size,
            prefetch=prefetch,
            progress=progress,
            node_manager=nm,
            security=security,
            acceptors=acceptors,
        )
        server = None
        try:
            if metrics is not None:
                server = _serve_metrics(broker, metrics, live=lambda: not lost.is_set())
                if on_metrics is not None:
                    on_metrics(*server.address)
            serving = threading.Thread(target=broker.serve_forever, name="stomp-accept")
            serving.start()
            if on_listening is not None:
                for _name, where, at in broker.addresses:
                    on_listening(where, at)
            stop.wait()
            broker.shutdown()
            serving.join()
        finally:
            if server is not None:
                server.close()
            broker.close()
    finally:
        if nm is not None:
            nm.close()
    if lost.is_set():
        raise LockLostError("lost the live lock; the broker stopped")


def _serve_metrics(
    broker: StompBroker, where: tuple[str, int], *, live: Callable[[], bool]
) -> MetricsServer:
    """The metrics server of ``--metrics HOST:PORT``. Raises ConfigError naming
    ``--metrics`` when its port cannot be bound."""
    host, port = where
    try:
        return serve_metrics(broker.collector(live=live), host, port)
    except OSError as exc:
        raise ConfigError(
            f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}",
            key="--metrics",
            value=f"{host}:{port}",
            hint="choose another port for --metrics (0: any free one)",
        ) from exc
