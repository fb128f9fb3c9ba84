"""The broker: coilmq's threaded server with our frame reader, protocol and durable queue
manager, on an opened store.

:class:`StoreStompHandler` is coilmq's request handler (one thread per connection) with:

- :class:`~store.stomp.frames.FrameReader` instead of coilmq's ``FrameBuffer`` (split and
  pipelined frames; size limits). Bytes that are not a frame get an ERROR frame and the
  connection is closed; the broker and the store carry on. After any ERROR (and a refused
  TLS handshake) the broker lingers before it closes (:mod:`store.stomp.linger`): closing
  on unread bytes would reset the connection, and the client would lose what it received
  and had not read yet, the ERROR included;
- the protocol classes of :mod:`store.stomp.protocol` (coilmq's negotiation picks the
  version);
- deferred receipts: SENDs are stored as they are read; before the handler handles another
  command, and before it waits for more bytes, one flush makes them all durable, then their
  RECEIPTs go out in order and the messages are delivered (:meth:`settle`);
- one lock per socket for writes: deliveries come from other connections' threads, and
  coilmq's handler lets two threads write one socket at once.

:class:`StompBroker` holds the server and its store; :func:`open_broker` opens the store,
loads it (``progress`` during the load) and binds the port.

Shutdown, in this order (:meth:`StompBroker.shutdown`, then :meth:`StompBroker.close`):

1. the shutdown flag is set and the accept loop stops: a connection accepted after that is
   closed at once;
2. the listening socket closes, and every open connection's socket is shut for reading (a
   waiting ``recv`` returns at once). A connection's thread handles no frame after the flag is
   set: it makes the SENDs it has stored durable and sends their RECEIPTs (:meth:`settle`),
   sends an ERROR frame ("the broker is shutting down"), puts its subscriptions'
   unacknowledged messages back, and closes its socket;
3. the broker waits for those threads, at most ``SHUTDOWN_WAIT`` seconds (a warning names
   the ones still running);
4. then it closes the store, which makes durable what was stored and acknowledged.

So no connection meets a closed store, and a frame that comes after shutdown began gets an
ERROR frame or a closed socket, never a RECEIPT.

Thread-safety: a handler belongs to its connection's thread, except :meth:`send_frame`,
which any thread may call. :meth:`StompBroker.shutdown` and :meth:`StompBroker.close` are
called from a thread other than the one in :meth:`StompBroker.serve_forever`.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from itertools import chain
from socketserver import TCPServer
from typing import Any

from coilmq.engine import StompEngine  # type: ignore[import-untyped]
from coilmq.exception import AuthError, ProtocolError  # type: ignore[import-untyped]
from coilmq.protocol import protocol_class_from_first_frame  # type: ignore[import-untyped]
from coilmq.server.socket_server import (  # type: ignore[import-untyped]
    StompRequestHandler,
    ThreadedStompServer,
)
from coilmq.topic import TopicManager  # type: ignore[import-untyped]
from coilmq.util.frames import ErrorFrame, Frame, ReceiptFrame  # type: ignore[import-untyped]

from store.config import StoreConfig
from store.errors import ConfigError
from store.stomp.acceptors import Acceptor
from store.stomp.frames import DEFAULT_MAX_FRAME_SIZE, FrameReader
from store.stomp.linger import linger
from store.stomp.metrics import BrokerCollector
from store.stomp.protocol import Answered, durable_protocol
from store.stomp.queue_manager import DEFAULT_PREFETCH, DurableQueueManager
from store.stomp.queue_store import StompQueueStore, StreamedFrame, open_queue_store
from store.stomp.security import BrokerSecurity
from store.stomp.tls import TlsChannel, server_context

__all__ = ["StompBroker", "StoreStompHandler", "open_broker"]

log = logging.getLogger(__name__)

#: Bytes of a large body read from the store and written to the socket at a time.
STREAM_CHUNK = 256 * 1024
#: How often a connection's thread looks up from a quiet socket to see a shutdown (seconds).
POLL_SECONDS = 0.5
#: How long closing the broker waits for its connections' threads to end (seconds).
SHUTDOWN_WAIT = 5.0
#: A client silent for this many times its heart-beat interval is gone (Artemis's
#: ``heartBeatToConnectionTtlModifier``): an ERROR, and the connection closed.
HEART_BEAT_GRACE = 2.0
#: How long a connection may take to send its CONNECT frame (seconds; Artemis's default
#: ``connection-ttl``): one that sends nothing, or a byte at a time, is closed after it.
CONNECT_TIMEOUT = 60.0


class StoreStompHandler(StompRequestHandler):  # type: ignore[misc]
    """One client connection (see the module docstring)."""

    ack_header = False  # STOMP 1.2 connections: MESSAGE frames carry `ack`

    def setup(self) -> None:
        super().setup()
        self.buffer = FrameReader(max_frame_size=self.server.max_frame_size)
        self._write_lock = threading.Lock()
        self._receipts: list[str | None] = []
        self._destinations: set[str] = set()
        self._ended = threading.Event()  # the connection's thread is done with it
        self._errored = False  # an ERROR went out: linger before closing (store.stomp.linger)
        self._expect = 0.0  # seconds between the client's heart-beats (0: none asked)
        self._last_read = self._last_write = time.monotonic()
        self.security = self.server.security  # None: any login (store.stomp.security)
        self.peer = f"{self.client_address[0]}:{self.client_address[1]}"
        self.user: str | None = None
        self.permitted: set[tuple[str, str]] = set()

    def handle(self) -> None:
        frames = self.iter_frames()
        try:
            try:
                first = next(frames)
            except StopIteration:
                return
            protocol = durable_protocol(protocol_class_from_first_frame(first))
        except ProtocolError as exc:
            self._refuse(exc)
            if self._errored:
                linger(self.request)
            return
        engine = StompEngine(
            connection=self,
            authenticator=self.server.authenticator,
            queue_manager=self.server.queue_manager,
            topic_manager=self.server.topic_manager,
            protocol=protocol,
        )
        try:
            for frame in chain([first], frames):
                engine.process_frame(frame)
            if self.server.shutdown_requested.is_set():
                self._say_goodbye()
        except Answered as exc:
            log.debug("connection closed after an ERROR: %s", exc)
            self._errored = True
        except ProtocolError as exc:
            self._refuse(exc)
        except AuthError:
            log.debug("authentication failed; connection closed")
        finally:
            self._ended.set()
            try:
                self.settle()  # the client may be gone: its SENDs are durable all the same
            except Exception:
                log.debug("settling a closed connection's SENDs failed", exc_info=True)
            finally:
                engine.unbind()
                if self._errored:
                    linger(self.request)

    # -- heart-beats ------------------------------------------------------------------------

    def keep_heartbeats(self, send: float, expect: float) -> None:
        """After CONNECT: send a heart-beat whenever nothing was written for ``send`` seconds
        (a thread of this connection's), and end the connection when nothing was read for
        ``HEART_BEAT_GRACE`` times ``expect`` seconds (0: either not at all)."""
        self._expect = expect
        if send > 0:
            beats = threading.Thread(
                target=self._beat, args=(send,), name="stomp-heart-beat", daemon=True
            )
            beats.start()

    def _beat(self, every: float) -> None:
        while not self._ended.wait(min(every / 4, POLL_SECONDS)):
            if time.monotonic() - self._last_write >= every:
                try:
                    self.send_heartbeat()
                except OSError:
                    return

    def _say_goodbye(self) -> None:
        """At shutdown: the RECEIPTs of what was stored, then an ERROR frame."""
        try:
            self.settle()
            self.send_frame(ErrorFrame("the broker is shutting down"))
        except OSError:
            pass  # the client went first

    def _refuse(self, exc: Exception) -> None:
        log.debug("connection refused: %s", exc)
        try:
            self.send_frame(ErrorFrame(str(exc), str(exc)))
        except OSError:
            return
        self._errored = True

    def iter_frames(self) -> Iterator[Frame]:
        """The frames the client sends, until it closes or the server shuts down. Raises
        FrameError (a ProtocolError) for bytes that are not a frame, ProtocolError for a
        connection without CONNECT past the bound, or silent past its heart-beats. Silence is
        counted only while this thread waits to read: the time it spends handling frames (a
        flush that waits for a database, say) is never the client's."""
        stopping = self.server.shutdown_requested
        deadline: float | None = time.monotonic() + self.server.connect_timeout
        listening = time.monotonic()  # since when this thread has been waiting to read
        while not stopping.is_set():
            handled = False
            for frame in self.buffer:
                if stopping.is_set():
                    return  # not handled: the frame came after shutdown began
                deadline = None
                handled = True
                yield frame
            self.settle()  # nothing more to read now: receipts before waiting
            now = time.monotonic()
            if handled:
                listening = now
            if deadline is not None and now > deadline:
                timeout = self.server.connect_timeout
                raise ProtocolError(f"no CONNECT frame within {timeout:g} s")
            silent = now - max(self._last_read, listening)
            if self._expect and silent > self.server.ttl_modifier * self._expect:
                raise ProtocolError(
                    f"no heart-beat or frame for {silent:.1f} s (the client promised one "
                    f"every {self._expect:g} s)"
                )
            try:
                data = self.request.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            self._last_read = time.monotonic()
            self.last_data = datetime.now()
            self.buffer.append(data)

    # -- deferred receipts --------------------------------------------------------------------

    def after_flush(self, receipt: str | None, destination: str) -> None:
        """A SEND to ``destination`` was stored: its RECEIPT (if any) and its delivery wait
        for the next :meth:`settle`."""
        self._receipts.append(receipt)
        self._destinations.add(destination)

    def settle(self) -> None:
        """Make every SEND stored since the last call durable (one flush), send their
        RECEIPTs in order, deliver them. Raises what the store's flush raises."""
        if not self._receipts:
            return
        receipts, self._receipts = self._receipts, []
        destinations, self._destinations = self._destinations, set()
        qm: DurableQueueManager = self.server.queue_manager
        qm.store.flush()
        for receipt in receipts:
            if receipt:
                self.send_frame(ReceiptFrame(receipt))
        qm.dispatch(sorted(destinations))

    def send_frame(self, frame: Frame) -> None:
        """Write ``frame`` to the client (any thread); a :class:`StreamedFrame`'s body goes
        from the store to the socket in chunks. Raises OSError when the socket is gone, and
        what reading a large body raises."""
        if not isinstance(frame, StreamedFrame):
            packed = frame.pack()
            with self._write_lock:
                self.request.sendall(packed)
                self._last_write = time.monotonic()
            return
        head = "".join(f"{name}:{value}\n" for name, value in frame.headers.items())
        with frame.open_body() as body, self._write_lock:
            self.request.sendall(f"{frame.cmd}\n{head}\n".encode())
            while chunk := body.read(STREAM_CHUNK):
                self.request.sendall(chunk)
                self._last_write = time.monotonic()
            self.request.sendall(b"\x00")
            self._last_write = time.monotonic()

    def send_heartbeat(self) -> None:
        with self._write_lock:
            self.request.sendall(b"\n")
            self._last_write = time.monotonic()


def _socket_options(request: socket.socket, acceptor: Acceptor) -> None:
    """The acceptor's TCP options on an accepted socket."""
    with contextlib.suppress(OSError):
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(acceptor.no_delay))
        if acceptor.send_buffer is not None:
            request.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, acceptor.send_buffer)
        if acceptor.receive_buffer is not None:
            request.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, acceptor.receive_buffer)


class _Server(ThreadedStompServer):  # type: ignore[misc]
    """coilmq's threaded server that knows its connections' threads and ends them before it
    closes the store (the module docstring's shutdown order). socketserver's own list keeps
    no daemon thread, so its ``server_close`` waits for none."""

    daemon_threads = True
    max_frame_size = DEFAULT_MAX_FRAME_SIZE
    connect_timeout = CONNECT_TIMEOUT
    security: BrokerSecurity | None = None
    acceptor = Acceptor("stomp", "127.0.0.1", 61613)
    tls: ssl.SSLContext | None = None
    ttl_modifier = HEART_BEAT_GRACE

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lock = threading.Lock()  # the shutdown flag's check and the connections
        self._connections: dict[threading.Thread, socket.socket] = {}
        super().__init__(*args, **kwargs)

    def process_request(self, request: socket.socket, client_address: Any) -> None:
        acceptor = self.acceptor
        with self._lock:
            if self.shutdown_requested.is_set():
                self.shutdown_request(request)
                return
            if 0 <= acceptor.connections_allowed <= len(self._connections):
                log.info(
                    "acceptor %s: connection from %s refused: connectionsAllowed %d reached",
                    acceptor.name, client_address[0], acceptor.connections_allowed,
                )  # fmt: skip
                if self.tls is None:
                    with contextlib.suppress(OSError):
                        request.sendall(ErrorFrame(
                            f"connectionsAllowed ({acceptor.connections_allowed}) reached"
                        ).pack())  # fmt: skip
                self.shutdown_request(request)
                return
            _socket_options(request, acceptor)
            thread = threading.Thread(
                target=self.process_request_thread,
                args=(request, client_address),
                name=f"stomp-connection-{client_address[0]}:{client_address[1]}",
                daemon=True,
            )
            self._connections[thread] = request
            thread.start()
        self.queue_manager.store.counts.add("connections_total")

    def process_request_thread(self, request: socket.socket, client_address: Any) -> None:
        peer = f"{client_address[0]}:{client_address[1]}"
        log.info("connection from %s (acceptor %s)", peer, self.acceptor.name)
        try:
            if self.tls is not None:
                request.settimeout(POLL_SECONDS)
                channel = TlsChannel(request, self.tls)
                try:
                    channel.handshake()
                except (OSError, ssl.SSLError) as exc:
                    log.info("TLS handshake with %s failed: %s", peer, exc)
                    linger(request)  # the alert reaches the client (store.stomp.linger)
                    self.close_request(request)
                    return
                request = channel  # type: ignore[assignment]
            super().process_request_thread(request, client_address)
        finally:
            log.info("connection from %s closed", peer)
            with self._lock:
                self._connections.pop(threading.current_thread(), None)

    def server_close(self) -> None:
        with self._lock:
            self.shutdown_requested.set()
            connections = dict(self._connections)
        self.socket.close()
        for request in connections.values():
            try:
                request.shutdown(socket.SHUT_RD)  # its thread's recv returns now
            except OSError:
                pass  # already closed
        deadline = time.monotonic() + SHUTDOWN_WAIT
        for thread in connections:
            thread.join(max(0.0, deadline - time.monotonic()))
        left = [thread.name for thread in connections if thread.is_alive()]
        if left:
            log.warning(
                "%d connection(s) still running after %s s; closing the store: %s",
                len(left), SHUTDOWN_WAIT, ", ".join(left),
            )  # fmt: skip
        # The listening socket again (a no-op); the store is closed by StompBroker.close once
        # every acceptor's connections ended, not by coilmq's server_close.
        TCPServer.server_close(self)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver prints the traceback to stderr; a library logs it.
        log.warning("connection from %s failed", client_address, exc_info=True)


class StompBroker:
    """coilmq's threaded STOMP server on a :class:`StompQueueStore` (see the module
    docstring), on one port per acceptor. ``address`` is the (host, port) the first acceptor
    listens on (the real port when 0 was asked for), ``addresses`` every acceptor's;
    ``connect_timeout``: seconds a connection has to send its CONNECT frame; ``security``:
    who may log in and do what (:mod:`store.stomp.security`; None: any login does anything,
    an embedder's choice: ``store broker`` is secure unless told ``--no-security``);
    ``acceptors`` (:mod:`store.stomp.acceptors`): the ports and their TLS and limits (None:
    one plain acceptor on ``host``:``port``). Raises ConfigError naming the port that cannot
    be bound (``--port`` for the one of ``host``:``port``) or the TLS store that cannot be
    read; the ports bound before are closed again."""

    def __init__(
        self,
        queue_store: StompQueueStore,
        *,
        host: str = "127.0.0.1",
        port: int = 61613,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        prefetch: int = DEFAULT_PREFETCH,
        connect_timeout: float = CONNECT_TIMEOUT,
        security: BrokerSecurity | None = None,
        acceptors: list[Acceptor] | None = None,
    ) -> None:
        self.queue_store = queue_store
        self.queue_manager = DurableQueueManager(queue_store, prefetch=prefetch)
        self.topic_manager = TopicManager()
        self.servers: list[_Server] = []
        try:
            for acceptor in acceptors or [Acceptor("stomp", host, port)]:
                server = self._server(
                    acceptor, max_frame_size, connect_timeout, security, given=acceptors is None
                )
                self.servers.append(server)
        except BaseException:
            for server in self.servers:
                TCPServer.server_close(server)
            raise
        self.server = self.servers[0]
        self._serving = threading.Event()
        self._threads: list[threading.Thread] = []

    def _server(
        self,
        acceptor: Acceptor,
        max_frame_size: int,
        connect_timeout: float,
        security: BrokerSecurity | None,
        *,
        given: bool,
    ) -> _Server:
        tls = server_context(acceptor) if acceptor.tls else None
        key = "--port" if given else f"acceptor {acceptor.name}"
        try:
            server = _Server(
                (acceptor.host, acceptor.port),
                RequestHandlerClass=StoreStompHandler,
                timeout=POLL_SECONDS,
                queue_manager=self.queue_manager,
                topic_manager=self.topic_manager,
            )
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {acceptor.host}:{acceptor.port}: {exc.strerror or exc}",
                key=key,
                value=acceptor.port,
                hint="choose another --port (0: any free one), or stop what listens there"
                if given else f"change acceptor {acceptor.name!r}'s port, or stop what "
                "listens there",
            ) from exc  # fmt: skip
        server.acceptor = acceptor
        server.tls = tls
        server.ttl_modifier = acceptor.ttl_modifier
        server.max_frame_size = acceptor.max_frame_size or max_frame_size
        server.connect_timeout = connect_timeout
        server.security = security
        return server

    @property
    def address(self) -> tuple[str, int]:
        return self.addresses[0][1:]  # type: ignore[return-value]

    @property
    def addresses(self) -> list[tuple[str, str, int]]:
        """(acceptor name, host, port) of every acceptor, in order."""
        out = []
        for server in self.servers:
            host, port = server.socket.getsockname()[:2]
            out.append((server.acceptor.name, str(host), int(port)))
        return out

    def connections(self) -> int:
        """STOMP connections open now, on every acceptor."""
        total = 0
        for server in self.servers:
            with server._lock:
                total += len(server._connections)
        return total

    def collector(self, *, live: Callable[[], bool] = lambda: True) -> BrokerCollector:
        """A prometheus_client collector of this broker's figures (:mod:`store.stomp.metrics`);
        ``live`` says whether this node is live (an HA pair's)."""
        return BrokerCollector(
            self.queue_store.manager, self.queue_store.counts, self.connections, live=live
        )

    def serve_forever(self) -> None:
        """Accept connections on every acceptor until :meth:`shutdown`. Returns then."""
        self._serving.set()
        self._threads = [
            threading.Thread(target=s.serve_forever, args=(POLL_SECONDS,),
                             name=f"stomp-accept-{s.acceptor.name}", daemon=True)
            for s in self.servers[1:]
        ]  # fmt: skip
        for thread in self._threads:
            thread.start()
        try:
            self.server.serve_forever(poll_interval=POLL_SECONDS)
        finally:
            self._serving.clear()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` (from another thread) and every connection's loop;
        returns once the accept loops stopped."""
        self.server.shutdown()
        for server, thread in zip(self.servers[1:], self._threads, strict=False):
            if thread.is_alive():
                server.shutdown()  # blocks until its loop ended: only for a running one
            thread.join()

    def close(self) -> None:
        """Shut down (when :meth:`serve_forever` still runs), end every connection (at most
        ``SHUTDOWN_WAIT`` seconds), then close the store; see the module docstring.
        Idempotent."""
        if self._serving.is_set():
            self.shutdown()
        for server in self.servers:
            server.server_close()
        self.queue_manager.close()
        self.topic_manager.close()

    def __enter__(self) -> StompBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_broker(
    config: StoreConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 61613,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    prefetch: int = DEFAULT_PREFETCH,
    progress: Callable[[str, int, int], None] | None = None,
    node_manager: Any = None,
    connect_timeout: float = CONNECT_TIMEOUT,
    security: BrokerSecurity | None = None,
    acceptors: list[Acceptor] | None = None,
) -> StompBroker:
    """Open and load the store ``config`` describes, then bind ``host``:``port``; returns
    the broker, not yet serving (``security``, ``acceptors``: as :class:`StompBroker`'s).
    Raises what opening and loading the store raise, and ConfigError naming the port that
    cannot be bound (the store is closed again)."""
    queue_store = open_queue_store(config, progress=progress, node_manager=node_manager)
    try:
        return StompBroker(
            queue_store,
            host=host,
            port=port,
            max_frame_size=max_frame_size,
            prefetch=prefetch,
            connect_timeout=connect_timeout,
            security=security,
            acceptors=acceptors,
        )
    except BaseException:
        queue_store.close()
        raise
