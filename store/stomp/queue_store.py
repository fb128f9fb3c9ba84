"""coilmq's ``QueueStore`` over the storage manager: STOMP frames kept as messages.

Each STOMP destination is one ANYCAST address and one queue of the same name, made durably on
the first frame sent to it (a destination nothing was sent to does not exist: ``size`` is 0,
``dequeue`` None). A frame is one durable message of that address:

=============================  =============================================================
frame                          message
=============================  =============================================================
body (bytes)                   body, as is; over ``min-large-message-size`` it streams to
                               the large-message store (the manager decides)
body (str, as coilmq's tests   body UTF-8 encoded, property ``stomp.text`` = True, so it
make frames)                   comes back a str
command                        property ``stomp.command``
header ``NAME``                property ``stomp.header.NAME``, its value as given (a str from
                               the wire; an int or bool a program set stays one; any other
                               type is kept as its ``str``)
header ``expires``             also the message's expiration (ms since the epoch), as in
                               Artemis's STOMP: an expired message is never delivered
=============================  =============================================================

A message a dead-letter or expiry move made shows its ``_AMQ_ORIG_*`` (and
``_AMQ_ACTUAL_EXPIRY``) properties as headers of the same names.

so ``dequeue`` gives back a frame equal to the one enqueued (command, headers, body), in send
order. The prefix keeps a header apart from the store's own properties; nothing else is
added, so a message exported with ``store data exp`` shows the frame's headers as they came.

Two ways to take a message out:

- coilmq's ``dequeue`` (the contract its own QueueManager uses): the message is taken and
  acknowledged at once; ``requeue`` is ``enqueue`` (a new message at the tail, as coilmq's
  memory store and its test suite have it);
- :meth:`take` / :meth:`ack` / :meth:`cancel` (what :class:`~store.stomp.queue_manager.
  DurableQueueManager` uses): a taken message stays stored until acknowledged; cancel puts it
  back at the head with its delivery count + 1; after a restart every message not
  acknowledged is ready again. ``take(stream=True)`` leaves a large binary body in the store
  (:class:`StreamedFrame`: the broker writes it to the socket in chunks).

``size`` counts the messages ready to take: the queue's depth less those taken and not yet
acknowledged or cancelled (and those a transaction acknowledged, until it ends).

:func:`make_queue_store` is a ``qstore.factory`` for coilmq's own configuration file
(``qstore.store.config = /path/to/broker.xml``), for a coilmq started by its own command.

Thread-safety: every method may be called from any thread. The storage manager is
thread-safe; this class's own lock guards the destinations made and the taken counts, and is
never held while the manager waits for durability.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from coilmq.store import QueueStore  # type: ignore[import-untyped]
from coilmq.util.frames import Frame  # type: ignore[import-untyped]

from store.config import StoreConfig, load_config
from store.errors import UnknownQueueError
from store.messaging import Message, StorageManager, Transaction
from store.messaging.values import ANYCAST, PropertyValue
from store.stomp.metrics import BrokerCounts

__all__ = [
    "COMMAND_PROPERTY",
    "HEADER_PREFIX",
    "TEXT_PROPERTY",
    "StompQueueStore",
    "StompTransaction",
    "StreamedFrame",
    "Taken",
    "frame_to_message",
    "make_queue_store",
    "message_to_frame",
    "open_queue_store",
]

HEADER_PREFIX: Final = "stomp.header."
COMMAND_PROPERTY: Final = "stomp.command"
TEXT_PROPERTY: Final = "stomp.text"
#: The store's own properties a MESSAGE frame shows as headers: those a dead-letter or expiry
#: move adds (``_AMQ_ORIG_ADDRESS``, ``_AMQ_ORIG_QUEUE``, ``_AMQ_ORIG_MESSAGE_ID``,
#: ``_AMQ_ACTUAL_EXPIRY``), as Artemis's STOMP shows them.
ARTEMIS_PREFIX: Final = "_AMQ_"


def frame_to_message(destination: str, frame: Frame) -> Message:
    """The durable message that keeps ``frame`` (see the module docstring). Raises nothing
    for any frame coilmq makes."""
    properties: dict[str, PropertyValue] = {COMMAND_PROPERTY: str(frame.cmd)}
    body = frame.body
    if isinstance(body, str):
        properties[TEXT_PROPERTY] = True
        body = body.encode("utf-8")
    for name, value in frame.headers.items():
        if not isinstance(value, bool | int | float | str | bytes) or (
            isinstance(value, int) and not -(2**63) <= value < 2**63
        ):
            value = str(value)
        properties[HEADER_PREFIX + str(name)] = value
    return Message(destination, bytes(body), properties=properties, expiration=_expires(frame))


def _expires(frame: Frame) -> int:
    """The message's expiration from the frame's ``expires`` header (ms since the epoch, as
    Artemis's STOMP reads it); 0 (never) without one, or for one that is not a number."""
    value = frame.headers.get("expires")
    try:
        expires = int(str(value).strip()) if value is not None else 0
    except ValueError:
        return 0
    return expires if 0 < expires < 2**63 else 0


class StreamedFrame(Frame):  # type: ignore[misc]
    """A frame whose large body stays in the store until it is written: ``open_body()``
    gives it as a stream (the broker's handler writes it in chunks, never whole in memory).
    ``body`` is empty; ``pack()`` reads the body whole, for a caller that needs bytes."""

    def __init__(self, cmd: str, headers: dict[str, Any], opener: Callable[[], Any]) -> None:
        super().__init__(cmd, headers=headers, body=b"")
        self.open_body = opener

    def pack(self) -> bytes:
        with self.open_body() as stream:
            self.body = stream.read()
        return bytes(super().pack())


def message_to_frame(message: Message, *, stream: bool = False) -> Frame:
    """The frame ``message`` keeps. A large body is read whole (coilmq's frames hold their
    body) unless ``stream``: then a binary large body stays in the store
    (:class:`StreamedFrame`). Raises what reading a large body raises."""
    props = message.properties
    headers = {
        name[len(HEADER_PREFIX) :]: value
        for name, value in props.items()
        if name.startswith(HEADER_PREFIX)
    }
    for name, value in props.items():  # a moved message's _AMQ_ORIG_* (Artemis's STOMP)
        if name.startswith(ARTEMIS_PREFIX):
            headers[name] = str(value)
    command = str(props.get(COMMAND_PROPERTY, "MESSAGE"))
    if stream and message.is_large and props.get(TEXT_PROPERTY) is not True:
        return StreamedFrame(command, headers, message.open_body)
    if message.is_large or not isinstance(message.body, bytes):
        with message.open_body() as reader:
            raw = reader.read()
    else:
        raw = message.body
    body: bytes | str = raw.decode("utf-8") if props.get(TEXT_PROPERTY) is True else raw
    return Frame(command, headers=headers, body=body)


@dataclass(frozen=True)
class Taken:
    """A message taken from a destination and not yet acknowledged: its frame, the store's
    message id (what :meth:`StompQueueStore.ack` takes) and its delivery count (0 the first
    time; each cancel, rollback of an ack, or restart while taken may add one)."""

    destination: str
    frame: Frame
    message_id: int
    delivery_count: int
    #: True for a message stored before this store was opened: it may have been delivered
    #: before a crash without its delivery being counted (the count is written at cancel, not
    #: at delivery), so a broker marks it redelivered, as JMS allows.
    recovered: bool = False


class StompQueueStore(QueueStore):  # type: ignore[misc]
    """coilmq's queue store over an opened and loaded :class:`StorageManager`, which it owns
    (``close`` closes it). See the module docstring."""

    def __init__(self, manager: StorageManager) -> None:
        super().__init__()
        self.manager = manager
        #: What the broker did, for its metrics (store/stomp/metrics.py).
        self.counts = BrokerCounts()
        self._lock = threading.Lock()
        self._known = {q.name for q in manager.queues()}
        self._held: dict[str, int] = {}  # destination -> messages taken, not settled
        # The first message id stored since opening: ids only grow, so every smaller one was
        # there before (see Taken.recovered). None until the first put.
        self._first_new: int | None = None

    # -- coilmq's contract ------------------------------------------------------------------

    def enqueue(self, destination: str, frame: Frame) -> None:
        """Store ``frame`` at the tail of ``destination``, durable when it returns."""
        self.put(destination, frame, sync=True)

    def dequeue(self, destination: str) -> Frame | None:
        """Take the next frame of ``destination`` and acknowledge it (durably); None when
        there is none."""
        taken = self.take(destination)
        if taken is None:
            return None
        self.ack(destination, taken.message_id, sync=True)
        return taken.frame

    def size(self, destination: str) -> int:
        """Messages of ``destination`` ready to take."""
        if destination not in self._known:
            return 0
        depth = self.manager.depth(destination)
        with self._lock:
            return max(0, depth - self._held.get(destination, 0))

    def has_frames(self, destination: str) -> bool:
        """True when ``destination`` has a message ready to take."""
        return self.size(destination) > 0

    def destinations(self) -> set[str]:
        """Every destination a frame was ever sent to (that still exists)."""
        with self._lock:
            return set(self._known)

    def close(self) -> None:
        """Close the storage manager (and its store). Idempotent."""
        self.manager.close()

    # -- what the durable queue manager adds ------------------------------------------------

    def ensure(self, destination: str) -> None:
        """Make ``destination``'s address and queue unless they exist (durable on return)."""
        if destination in self._known:
            return
        with self._lock:
            if destination in self._known:
                return
            names = {q.name for q in self.manager.queues()}
            if destination not in names:
                if destination not in {a.name for a in self.manager.addresses()}:
                    self.manager.create_address(destination, routing_types=(ANYCAST,))
                self.manager.create_queue(destination, address=destination)
            self._known.add(destination)

    def holds(self, destination: str) -> bool:
        """Whether the store has a queue named ``destination``."""
        return destination in self._known or self._appeared(destination)

    def _appeared(self, destination: str) -> bool:
        """Whether a queue named ``destination`` exists now (one a dead-letter or expiry move
        auto-created); it is known from then on."""
        try:
            self.manager.depth(destination)  # one lookup, whatever the number of queues
        except UnknownQueueError:
            return False
        with self._lock:
            self._known.add(destination)
        return True

    def moved(self) -> int:
        """How many messages the delivery policies moved or removed so far (a change tells
        the broker to deliver to the other destinations' subscribers)."""
        return self.manager.policy_moves()

    def put(self, destination: str, frame: Frame, *, sync: bool) -> int:
        """Store ``frame`` at the tail of ``destination`` (made on first use); returns the
        message id. Without ``sync`` it may not be durable yet: :meth:`flush` makes it so
        (many puts, one sync)."""
        self.ensure(destination)
        mid = self.manager.send(frame_to_message(destination, frame), [destination], sync=sync)
        assert mid is not None  # a durable message routed to its one queue
        self._saw_new(mid)
        return mid

    def put_topic(self, topic: str, frame: Frame) -> int | None:
        """Store ``frame`` on every queue of the MULTICAST address ``topic`` (its durable
        subscriptions), durable when it returns; the message id, or None when no queue took
        it (their filters)."""
        mid = self.manager.send(frame_to_message(topic, frame), None, sync=True)
        if mid is not None:
            self._saw_new(mid)
        return mid

    def forget(self, queue: str) -> None:
        """``queue`` was deleted (a durable subscription ended): no longer one of ours."""
        with self._lock:
            self._known.discard(queue)

    def _saw_new(self, mid: int) -> None:
        first = self._first_new
        if first is None or mid < first:  # rarely true after the first put: no lock then
            with self._lock:
                if self._first_new is None or mid < self._first_new:
                    self._first_new = mid

    def browse(self, destination: str) -> Iterator[tuple[int, Frame]]:
        """The message id and frame of every message on ``destination`` now, in store order,
        nothing delivered or changed (:meth:`StorageManager.browse`); none when it has no
        queue. A binary large body stays in the store (:class:`StreamedFrame`): one
        acknowledged meanwhile may be gone when the frame is written."""
        if not self.holds(destination):
            return
        for message, _ in self.manager.browse(destination):
            assert message.message_id is not None
            yield message.message_id, message_to_frame(message, stream=True)

    def take(self, destination: str, *, stream: bool = False) -> Taken | None:
        """The next ready message of ``destination``, now delivered and held until
        :meth:`ack` or :meth:`cancel`; None when none is ready. With ``stream`` a large body
        stays in the store (:class:`StreamedFrame`)."""
        if not self.holds(destination):
            return None
        with self._lock:  # held across receive so that size() never counts it twice
            ds = self.manager.receive(destination, 1)
            if not ds:
                return None
            self._held[destination] = self._held.get(destination, 0) + 1
        d = ds[0]
        message = d.message
        assert message.message_id is not None
        mid = message.message_id
        first_new = self._first_new
        recovered = first_new is None or mid < first_new
        frame = message_to_frame(message, stream=stream)
        return Taken(destination, frame, mid, d.delivery_count, recovered)

    def ack(self, destination: str, message_id: int, *, sync: bool) -> None:
        """Acknowledge a taken message; with ``sync`` durable on return."""
        self.manager.ack(destination, message_id, sync=sync)
        self._settle(destination, 1)

    def cancel(self, destination: str, message_id: int) -> None:
        """Put a taken message back at the head of its queue, delivery count + 1."""
        self.manager.cancel(destination, message_id)
        self._settle(destination, 1)

    def begin(self) -> StompTransaction:
        """A store transaction for one STOMP transaction (BEGIN ... COMMIT / ABORT)."""
        return StompTransaction(self, self.manager.begin())

    def flush(self) -> None:
        """Return once everything stored and acknowledged so far is durable (the wait
        counted in :attr:`counts`)."""
        self.counts.timed_flush(self.manager.flush)

    def _settle(self, destination: str, n: int) -> None:
        with self._lock:
            left = self._held.get(destination, 0) - n
            if left > 0:
                self._held[destination] = left
            else:
                self._held.pop(destination, None)


@dataclass
class StompTransaction:
    """One STOMP transaction as a store transaction: its SENDs are invisible until
    :meth:`commit` (durable when it returns), its ACKs final then; :meth:`rollback` drops the
    sends and puts the messages it acknowledged back at the head of their queues, delivery
    count + 1. Thread-safety: one connection's thread uses it."""

    queues: StompQueueStore
    tx: Transaction
    acked: list[str] = field(default_factory=list)  # destination of each ack
    sent: set[str] = field(default_factory=set)

    def send(self, destination: str, frame: Frame) -> int:
        """Store ``frame`` in the transaction; returns its message id."""
        self.queues.ensure(destination)
        mid = self.tx.send(frame_to_message(destination, frame), [destination])
        assert mid is not None
        self.queues._saw_new(mid)
        self.sent.add(destination)
        return mid

    def ack(self, destination: str, message_id: int) -> None:
        """Acknowledge a taken message in the transaction."""
        self.tx.ack(destination, message_id)
        self.acked.append(destination)

    def commit(self) -> set[str]:
        """Commit; returns the destinations that have new messages."""
        try:
            self.tx.commit()
        finally:
            self._settle()
        return set(self.sent)

    def rollback(self) -> set[str]:
        """Roll back; returns the destinations whose messages came back."""
        try:
            self.tx.rollback()
        finally:
            self._settle()
        return set(self.acked)

    def _settle(self) -> None:
        for destination in self.acked:
            self.queues._settle(destination, 1)


def open_queue_store(
    config: StoreConfig,
    *,
    progress: Callable[[str, int, int], None] | None = None,
    node_manager: Any = None,
) -> StompQueueStore:
    """Open the store ``config`` describes, load it (``progress(phase, done, total)`` during
    the load) and return its queue store. Raises what ``open_store`` and ``load`` raise."""
    from store import open_store

    store = open_store(config, node_manager=node_manager)
    manager = StorageManager(store)
    try:
        manager.load(progress)
    except BaseException:
        manager.close()
        raise
    return StompQueueStore(manager)


def make_queue_store() -> StompQueueStore:
    """coilmq's ``qstore.factory``: the store named by ``qstore.store.config`` in coilmq's
    configuration (a .toml file or an Artemis broker.xml). Raises ConfigError for a missing
    or bad file, and what :func:`open_queue_store` raises."""
    from coilmq.config import config as coilmq_config  # type: ignore[import-untyped]

    return open_queue_store(load_config(coilmq_config.get("coilmq", "qstore.store.config")))
