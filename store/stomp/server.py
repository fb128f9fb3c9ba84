"""The broker: coilmq's threaded server with our frame reader, protocol and durable queue
manager, on an opened store.

:class:`StoreStompHandler` is coilmq's request handler (one thread per connection) with:

- :class:`~store.stomp.frames.FrameReader` instead of coilmq's ``FrameBuffer`` (split and
  pipelined frames; size limits). Bytes that are not a frame get an ERROR frame and the
  connection is closed; the broker and the store carry on.
- the protocol classes of :mod:`store.stomp.protocol` (coilmq's negotiation picks the
  version);
- deferred receipts: SENDs are stored as they are read; before the handler handles another
  command, and before it waits for more bytes, one flush makes them all durable, then their
  RECEIPTs go out in order and the messages are delivered (:meth:`settle`);
- one lock per socket for writes: deliveries come from other connections' threads, and
  coilmq's handler lets two threads write one socket at once.

:class:`StompBroker` holds the server and its store; :func:`open_broker` opens the store,
loads it (``progress`` during the load) and binds the port.

Thread-safety: a handler belongs to its connection's thread, except :meth:`send_frame`,
which any thread may call. :meth:`StompBroker.shutdown` is called from a thread other than
the one in :meth:`StompBroker.serve_forever`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from itertools import chain
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
from store.stomp.frames import DEFAULT_MAX_FRAME_SIZE, FrameReader
from store.stomp.protocol import durable_protocol
from store.stomp.queue_manager import DEFAULT_PREFETCH, DurableQueueManager
from store.stomp.queue_store import StompQueueStore, StreamedFrame, open_queue_store

__all__ = ["StompBroker", "StoreStompHandler", "open_broker"]

log = logging.getLogger(__name__)

#: Bytes of a large body read from the store and written to the socket at a time.
STREAM_CHUNK = 256 * 1024
#: How often a connection's thread looks up from a quiet socket to see a shutdown (seconds).
POLL_SECONDS = 0.5


class StoreStompHandler(StompRequestHandler):  # type: ignore[misc]
    """One client connection (see the module docstring)."""

    ack_header = False  # STOMP 1.2 connections: MESSAGE frames carry `ack`

    def setup(self) -> None:
        super().setup()
        self.buffer = FrameReader(max_frame_size=self.server.max_frame_size)
        self._write_lock = threading.Lock()
        self._receipts: list[str | None] = []
        self._destinations: set[str] = set()

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
        except ProtocolError as exc:
            self._refuse(exc)
        except AuthError:
            log.debug("authentication failed; connection closed")
        finally:
            try:
                self.settle()  # the client may be gone: its SENDs are durable all the same
            except Exception:
                log.debug("settling a closed connection's SENDs failed", exc_info=True)
            finally:
                engine.unbind()

    def _refuse(self, exc: Exception) -> None:
        log.debug("connection refused: %s", exc)
        try:
            self.send_frame(ErrorFrame(str(exc), str(exc)))
        except OSError:
            pass

    def iter_frames(self) -> Iterator[Frame]:
        """The frames the client sends, until it closes or the server shuts down. Raises
        FrameError (a ProtocolError) for bytes that are not a frame."""
        while not self.server.shutdown_requested.is_set():
            yield from self.buffer
            self.settle()  # nothing more to read now: receipts before waiting
            try:
                data = self.request.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
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
            return
        head = "".join(f"{name}:{value}\n" for name, value in frame.headers.items())
        with frame.open_body() as body, self._write_lock:
            self.request.sendall(f"{frame.cmd}\n{head}\n".encode())
            while chunk := body.read(STREAM_CHUNK):
                self.request.sendall(chunk)
            self.request.sendall(b"\x00")

    def send_heartbeat(self) -> None:
        with self._write_lock:
            self.request.sendall(b"\n")


class _Server(ThreadedStompServer):  # type: ignore[misc]
    daemon_threads = True
    max_frame_size = DEFAULT_MAX_FRAME_SIZE

    def server_close(self) -> None:
        # Connections first (each ends within POLL_SECONDS of the shutdown flag), then the
        # listening socket and the store: no connection writes to a closed store.
        self.shutdown_requested.set()
        self._threads.join()
        super().server_close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver prints the traceback to stderr; a library logs it.
        log.warning("connection from %s failed", client_address, exc_info=True)


class StompBroker:
    """coilmq's threaded STOMP server on a :class:`StompQueueStore` (see the module
    docstring). ``address`` is the (host, port) it listens on (the real port when 0 was
    asked for)."""

    def __init__(
        self,
        queue_store: StompQueueStore,
        *,
        host: str = "127.0.0.1",
        port: int = 61613,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        prefetch: int = DEFAULT_PREFETCH,
    ) -> None:
        self.queue_store = queue_store
        self.queue_manager = DurableQueueManager(queue_store, prefetch=prefetch)
        self.server = _Server(
            (host, port),
            RequestHandlerClass=StoreStompHandler,
            timeout=POLL_SECONDS,
            queue_manager=self.queue_manager,
            topic_manager=TopicManager(),
        )
        self.server.max_frame_size = max_frame_size

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.socket.getsockname()[:2]
        return str(host), int(port)

    def serve_forever(self) -> None:
        """Accept connections until :meth:`shutdown`. Returns then."""
        self.server.serve_forever(poll_interval=POLL_SECONDS)

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` (from another thread) and every connection's loop."""
        self.server.shutdown()

    def close(self) -> None:
        """Close the listening socket and the store (after :meth:`shutdown`). Idempotent."""
        self.server.server_close()

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
) -> StompBroker:
    """Open and load the store ``config`` describes, then bind ``host``:``port``; returns
    the broker, not yet serving. Raises what opening and loading the store raise, and
    OSError when the port cannot be bound (the store is closed again)."""
    queue_store = open_queue_store(config, progress=progress, node_manager=node_manager)
    try:
        return StompBroker(
            queue_store, host=host, port=port, max_frame_size=max_frame_size, prefetch=prefetch
        )
    except BaseException:
        queue_store.close()
        raise
