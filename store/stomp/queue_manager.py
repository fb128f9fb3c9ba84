"""The durable queue manager: coilmq's ``QueueManager`` whose every message lives in the
store until a client acknowledges it.

coilmq's own manager hands a SEND straight to a waiting subscriber without storing it and
keeps delivered, unacknowledged frames in memory: a crash loses every message in flight.
This one keeps every message in :class:`~store.stomp.queue_store.StompQueueStore` from SEND
to ACK:

- SEND: stored first (:meth:`store_frame`, not waited for), then made durable by one
  :meth:`StompQueueStore.flush` for every SEND buffered so far (the connection flushes before
  it sends their RECEIPTs, before any other command, and before it waits for more bytes:
  pipelined SENDs share one sync, and senders on other connections share the journal's group
  commit); only then is it delivered (:meth:`dispatch`). :meth:`send` does all three, for a
  caller that wants coilmq's one-call form.
- delivery: from the store, in its order, to the destination's subscribers in turn. An
  ``auto`` subscription's message is acknowledged as it is sent (not waited for: a crash may
  deliver it again); a ``client`` or ``client-individual`` subscription has up to
  ``prefetch`` messages delivered and unacknowledged, each still stored.
- ACK: ``client`` acknowledges the message and every earlier one delivered to that
  subscription, ``client-individual`` that message alone; the store's ack is durable before
  the ACK's RECEIPT goes out (the protocol flushes first).
- NACK, UNSUBSCRIBE and disconnect put the subscription's unacknowledged messages back at the
  head of their queues with the delivery count + 1 (persisted), each a failed delivery for
  the delivery policies: the one that reaches ``max-delivery-attempts`` moves the message to
  its dead-letter address (:mod:`store.messaging.policies`), whose queues' subscribers then
  get it with its ``_AMQ_ORIG_*`` headers; so do an expiry queue's subscribers, at once when
  a delivery met the expired message, within :data:`MOVES_CHECK_SECONDS` when the store's
  expiry scan moved it; a redelivered MESSAGE carries
  ``redelivered:true``, as does every message stored before the broker started (it may have
  been delivered before a crash: the count is written at cancel, not at delivery).
- BEGIN / COMMIT / ABORT: a store transaction. Its SENDs are invisible until COMMIT and
  durable when it returns; its ACKs are final at COMMIT; ABORT drops its SENDs and redelivers
  what it acknowledged (count + 1). A connection that goes away aborts its transactions.
- restart: the store's load makes every unacknowledged message ready again, with its count.

A MESSAGE frame carries the frame's stored headers, ``subscription`` (the subscription's id)
and, for STOMP 1.2 connections (``connection.ack_header``), ``ack`` (what the client's ACK
names). A delivery whose socket write fails is cancelled (back at the head) and that
subscription dropped; the sender never sees the consumer's error.

Consumers first: while an ACK or NACK is being handled, a SEND waits before it is stored,
until no acknowledgement is in progress or :data:`CONSUMERS_FIRST_WAIT` (10 ms) has passed.
The broker's connection threads share one interpreter lock and the storage manager's lock,
and neither is fair: the thread that holds the interpreter takes a lock again before a
thread woken for it can run. Without this, 16 producers pipelining SENDs kept both, and 16
consumers' ACKs each waited for a turn: in ``bench.stomp``'s send+consume 16+16 the broker
stored 11,600-17,300 messages a second and acknowledged 960-4,550, so the queue grew
without bound and a delivery waited seconds behind it. With consumers first a queue whose
consumers keep up stays short (stored and acknowledged 5,200-6,900 a second each),
and a queue with a backlog drains while its producers slow down (a SEND waits at most 10 ms,
so producers never stop, and nothing waits when no consumer acknowledges).

Thread-safety: every public method may be called from any connection's thread. One lock
guards the subscriptions and transactions and is held while a frame is written to a
subscriber's socket (as in coilmq's manager: a slow consumer slows deliveries); it is never
held while the store waits for durability.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from coilmq.exception import ProtocolError  # type: ignore[import-untyped]
from coilmq.queue import QueueManager  # type: ignore[import-untyped]
from coilmq.util.frames import MESSAGE, Frame  # type: ignore[import-untyped]

from store.stomp.queue_store import StompQueueStore, StompTransaction
from store.stomp.topics import DurableTopics

__all__ = [
    "ACK_MODES",
    "CONSUMERS_FIRST_WAIT",
    "DEFAULT_PREFETCH",
    "MOVES_CHECK_SECONDS",
    "DurableQueueManager",
]

log = logging.getLogger(__name__)

#: STOMP's acknowledgement modes.
ACK_MODES: Final = ("auto", "client", "client-individual")
#: Messages a client-ack subscription may hold unacknowledged by default.
DEFAULT_PREFETCH: Final = 100
#: The longest a SEND waits for acknowledgements in progress (seconds; "consumers first" in
#: the module docstring).
CONSUMERS_FIRST_WAIT: Final = 0.01
#: How often the broker looks whether the expiry scan moved messages, whose expiry queues'
#: subscribers it then serves (seconds): a poll of one counter, so a subscriber of an expiry
#: queue gets a message the scan moved within this of the move.
MOVES_CHECK_SECONDS: Final = 0.2


@dataclass(eq=False)
class _Subscription:
    connection: Any
    id: Any
    destination: str
    mode: str
    #: STOMP message-id -> store message id, in delivery order.
    inflight: OrderedDict[str, int] = field(default_factory=OrderedDict)


@dataclass(eq=False)
class _Transaction:
    store_tx: StompTransaction  # what it acknowledged comes back at rollback (the store's)


class DurableQueueManager(QueueManager):  # type: ignore[misc]
    """coilmq's queue manager over a :class:`StompQueueStore` (see the module docstring).
    ``prefetch`` is how many messages a ``client`` / ``client-individual`` subscription may
    hold unacknowledged (default 100; coilmq's own manager holds 1)."""

    def __init__(self, store: StompQueueStore, *, prefetch: int = DEFAULT_PREFETCH) -> None:
        super().__init__(store)
        if prefetch < 1:
            raise ValueError(f"prefetch is at least 1, not {prefetch}")
        self.store: StompQueueStore = store
        self.topics = DurableTopics(store.manager)
        self.prefetch = prefetch
        self._lock = threading.RLock()
        #: ACKs and NACKs being handled now, and the condition a SEND waits on for them.
        self._acking = 0
        self._acks_done = threading.Condition(threading.Lock())
        self._subs: dict[tuple[Any, Any], _Subscription] = {}
        self._by_destination: dict[str, list[_Subscription]] = {}
        self._turn = itertools.count()
        self._txs: dict[tuple[Any, str], _Transaction] = {}
        #: A SEND's ``message-id`` when it has none: this broker's random prefix and a
        #: counter (unique as a uuid4 per frame is, without reading urandom per frame).
        self._id_prefix = uuid.uuid4().hex
        self._ids = itertools.count(1)
        #: The store's count of messages moved or removed by the delivery policies when it
        #: was last looked at (:meth:`_dispatch`), and the thread that looks every
        #: :data:`MOVES_CHECK_SECONDS`.
        self._moved_seen = store.moved()
        self._closing = threading.Event()
        self._watcher = threading.Thread(
            target=self._watch_moves, name="stomp-moves-watch", daemon=True
        )
        self._watcher.start()

    # -- life cycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store (what coilmq's server calls at ``server_close``)."""
        self._closing.set()
        if self._watcher is not threading.current_thread():
            self._watcher.join()
        with self._lock:
            self.store.close()

    def subscriber_count(self, destination: str | None = None) -> int:
        """Subscriptions to ``destination`` (None: to any)."""
        with self._lock:
            if destination is not None:
                return len(self._by_destination.get(destination, ()))
            return len(self._subs)

    # -- subscriptions ------------------------------------------------------------------------

    def subscribe(
        self, connection: Any, destination: str, id: Any = None, ack: str = "auto"
    ) -> None:
        """Subscribe ``connection`` to ``destination`` in acknowledgement mode ``ack`` and
        deliver what is ready. Raises ProtocolError for an unknown mode or a subscription id
        the connection already uses."""
        if ack not in ACK_MODES:
            raise ProtocolError(f"unknown ack mode {ack!r}; STOMP has {', '.join(ACK_MODES)}")
        key = (connection, 0 if id is None else id)
        with self._lock:
            if key in self._subs:
                raise ProtocolError(f"subscription id {key[1]!r} is already in use")
            sub = _Subscription(connection, key[1], destination, ack)
            self._subs[key] = sub
            self._by_destination.setdefault(destination, []).append(sub)
            self._dispatch(destination)

    def unsubscribe(self, connection: Any, destination: str | None = None, id: Any = None) -> None:
        """End a subscription; its unacknowledged messages are redelivered (count + 1)."""
        with self._lock:
            sub = self._subs.get((connection, 0 if id is None else id))
            if sub is None and destination is not None:  # STOMP 1.0: by destination
                sub = next(
                    (
                        s
                        for s in self._by_destination.get(destination, ())
                        if s.connection is connection
                    ),
                    None,
                )
            if sub is not None:
                self._drop(sub)

    def disconnect(self, connection: Any) -> None:
        """A connection went: abort its transactions, redeliver its subscriptions'
        unacknowledged messages (count + 1)."""
        with self._lock:
            for key in [k for k in self._txs if k[0] is connection]:
                self._abort(self._txs.pop(key))
            for sub in [s for s in self._subs.values() if s.connection is connection]:
                self._drop(sub)

    def _drop(self, sub: _Subscription) -> None:
        del self._subs[(sub.connection, sub.id)]
        subs = self._by_destination[sub.destination]
        subs.remove(sub)
        if not subs:
            del self._by_destination[sub.destination]
        self.store.counts.add("redelivered", len(sub.inflight))
        for mid in reversed(sub.inflight.values()):  # each goes to the head: last first
            self.store.cancel(sub.destination, mid)
        sub.inflight.clear()
        self._dispatch(sub.destination)

    # -- sending ------------------------------------------------------------------------------

    def send(self, message: Frame) -> None:
        """coilmq's one-call SEND: store ``message``, make it durable, deliver it."""
        destination = self.store_frame(message)
        self.store.flush()
        self.dispatch([destination])

    def store_frame(
        self, frame: Frame, transaction: str | None = None, connection: Any = None
    ) -> str:
        """Store a SEND frame as a MESSAGE (``message-id`` set unless given), in STOMP
        transaction ``transaction`` of ``connection`` if given; returns its destination. Not
        durable until :meth:`StompQueueStore.flush` (or the transaction's commit), not
        delivered until :meth:`dispatch`. Raises ProtocolError without a destination or for
        an unknown transaction."""
        destination = frame.headers.get("destination")
        if not destination:
            raise ProtocolError("SEND without a destination")
        self._consumers_first()
        self._as_message(frame)
        self.store.counts.add("sent")
        if transaction is None:
            self.store.put(destination, frame, sync=False)
        else:
            with self._lock:
                tx = self._transaction(connection, transaction)
                tx.store_tx.send(destination, frame)
        return str(destination)

    def dispatch(self, destinations: Any) -> None:
        """Deliver what is ready on each of ``destinations`` to its subscribers."""
        with self._lock:
            for destination in destinations:
                self._dispatch(destination)

    def _dispatch(self, destination: str) -> None:
        """Deliver what is ready on ``destination``; when that (or whatever ran before it
        under the lock) moved messages, also deliver on every other subscribed destination:
        a receive that met an expired message moved it to its expiry address, a cancel that
        reached max-delivery-attempts to its dead-letter address."""
        self._deliver(destination)
        if self.store.moved() != self._moved_seen:
            self._deliver_everywhere()

    def _deliver_everywhere(self) -> None:
        self._moved_seen = self.store.moved()
        for destination in list(self._by_destination):
            self._deliver(destination)

    def _watch_moves(self) -> None:
        """The thread behind :data:`MOVES_CHECK_SECONDS`: the expiry scan moves messages on
        the storage manager's own thread, whose expiry queues' subscribers are served here."""
        while not self._closing.wait(MOVES_CHECK_SECONDS):
            if self.store.moved() != self._moved_seen:
                with self._lock:
                    self._deliver_everywhere()

    def _deliver(self, destination: str) -> None:
        subs = self._by_destination.get(destination)
        while subs:
            ready = [s for s in subs if s.mode == "auto" or len(s.inflight) < self.prefetch]
            if not ready:
                return
            sub = ready[next(self._turn) % len(ready)]
            taken = self.store.take(destination, stream=True)
            if taken is None:
                return
            frame = taken.frame
            frame.cmd = MESSAGE
            headers = frame.headers
            message_id = str(headers.setdefault("message-id", str(taken.message_id)))
            headers["subscription"] = sub.id
            if taken.delivery_count or taken.recovered:
                headers["redelivered"] = "true"
            if getattr(sub.connection, "ack_header", False):
                headers["ack"] = message_id
            try:
                sub.connection.send_frame(frame)
            except Exception:
                log.warning(
                    "delivery to subscription %r of %s failed; message %d back at the head",
                    sub.id,
                    destination,
                    taken.message_id,
                    exc_info=True,
                )
                self.store.cancel(destination, taken.message_id)
                self._drop(sub)
                subs = self._by_destination.get(destination)
                continue
            if sub.mode == "auto":
                self.store.ack(destination, taken.message_id, sync=False)
                self.store.counts.add("acknowledged")
            else:
                sub.inflight[message_id] = taken.message_id

    def _as_message(self, frame: Frame) -> None:
        """A SEND frame made the MESSAGE it is stored as (``message-id`` set unless given)."""
        frame.cmd = MESSAGE
        # The SEND's own control headers are not the message's: a consumer is not in the
        # producer's transaction and did not ask for its receipt.
        frame.headers.pop("transaction", None)
        frame.headers.pop("receipt", None)
        if "message-id" not in frame.headers:
            frame.headers["message-id"] = f"{self._id_prefix}-{next(self._ids)}"

    # -- topics (store/stomp/topics.py) -------------------------------------------------------

    def store_topic_frame(self, frame: Frame) -> list[str]:
        """Store a SEND to a topic on its durable subscriptions' queues, durable when it
        returns; returns those queues (empty, and nothing stored, when it has none: then it
        only goes to the subscribers connected now, coilmq's topic manager)."""
        destination = str(frame.headers.get("destination"))
        queues = self.topics.queues(destination)
        if not queues:
            log.debug("SEND to topic %s: no durable subscription, nothing stored", destination)
            return []
        self._consumers_first()
        self._as_message(frame)
        self.store.counts.add("sent")
        self.store.put_topic(destination, frame)
        return queues

    def subscribe_durable(
        self, connection: Any, topic: str, client_id: str, name: str, id: Any, ack: str
    ) -> None:
        """A durable subscription ``name`` of ``client_id`` to ``topic``: its queue made
        unless it exists, then subscribed as a queue (what waits is delivered now)."""
        queue = self.topics.subscribe(topic, client_id, name)
        self.subscribe(connection, queue, id=id, ack=ack)

    def unsubscribe_durable(self, connection: Any, client_id: str, name: str, id: Any) -> None:
        """End durable subscription ``name`` of ``client_id`` for good: its delivery on this
        connection, then its queue and what waits on it."""
        with self._lock:
            self.unsubscribe(connection, None, id=id)
            queue = self.topics.unsubscribe(client_id, name)
            if queue is not None:
                self.store.forget(queue)

    # -- acknowledgements ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _acknowledging(self) -> Iterator[None]:
        """An ACK or NACK in progress: SENDs wait for it (:meth:`_consumers_first`)."""
        with self._acks_done:
            self._acking += 1
        try:
            yield
        finally:
            with self._acks_done:
                self._acking -= 1
                if not self._acking:
                    self._acks_done.notify_all()

    def _consumers_first(self) -> None:
        """Before a SEND is stored: wait while an ACK or NACK is handled, at most
        :data:`CONSUMERS_FIRST_WAIT`."""
        if self._acking:  # read without the lock: a stale value costs one wait or none
            with self._acks_done:
                self._acks_done.wait_for(lambda: not self._acking, CONSUMERS_FIRST_WAIT)

    def ack(
        self, connection: Any, frame: Frame, transaction: str | None = None, id: Any = None
    ) -> None:
        """ACK ``frame`` (its ``message-id``, or the ``id`` STOMP 1.2 names) on
        ``connection``, in ``transaction`` if given; not waited for (the protocol flushes
        before a RECEIPT). Raises ProtocolError when no subscription of the connection holds
        that message unacknowledged."""
        with self._acknowledging(), self._lock:
            sub, message_id = self._find(connection, frame, id)
            if sub.mode == "client":  # that message and every earlier one (in delivery order)
                ids = list(sub.inflight)
                upto = ids[: ids.index(message_id) + 1]
            else:  # without listing the up to ``prefetch`` others: the costliest step of an ACK
                upto = [message_id]
            tx = None if transaction is None else self._transaction(connection, transaction)
            self.store.counts.add("acknowledged", len(upto))
            for one in upto:
                mid = sub.inflight.pop(one)
                if tx is None:
                    self.store.ack(sub.destination, mid, sync=False)
                else:
                    tx.store_tx.ack(sub.destination, mid)
            self._dispatch(sub.destination)

    def nack(self, connection: Any, frame: Frame, id: Any = None) -> None:
        """NACK: the message (``client``: and every earlier one delivered to that
        subscription) back at the head of its queue, count + 1, and delivered again."""
        with self._acknowledging(), self._lock:
            sub, message_id = self._find(connection, frame, id)
            ids = list(sub.inflight)
            upto = ids[: ids.index(message_id) + 1] if sub.mode == "client" else [message_id]
            self.store.counts.add("redelivered", len(upto))
            for one in reversed(upto):  # each cancel goes to the head: the first ends first
                self.store.cancel(sub.destination, sub.inflight.pop(one))
            self._dispatch(sub.destination)  # dead-lettered: its queue's subscribers get it

    def _find(self, connection: Any, frame: Frame, id: Any) -> tuple[_Subscription, str]:
        headers = frame.headers
        message_id = headers.get("message-id") or id
        wanted = headers.get("subscription")
        for sub in self._subs.values():
            if sub.connection is not connection:
                continue
            if wanted is not None and str(sub.id) != str(wanted):
                continue
            if message_id in sub.inflight:
                return sub, str(message_id)
        raise ProtocolError(f"no unacknowledged message {message_id!r} on this connection")

    # -- transactions -------------------------------------------------------------------------

    def begin(self, connection: Any, transaction: str) -> None:
        """BEGIN: a store transaction. Raises ProtocolError when it is already open."""
        with self._lock:
            if (connection, transaction) in self._txs:
                raise ProtocolError(f"transaction {transaction!r} is already open")
            self._txs[(connection, transaction)] = _Transaction(self.store.begin())

    def commit(self, connection: Any, transaction: str) -> None:
        """COMMIT: durable when it returns; its SENDs are then delivered."""
        with self._lock:
            tx = self._txs.pop((connection, transaction), None)
            if tx is None:
                raise ProtocolError(f"no open transaction {transaction!r}")
        destinations = tx.store_tx.commit()
        self.dispatch(destinations)

    def abort(self, connection: Any, transaction: str) -> None:
        """ABORT: its SENDs are dropped, what it acknowledged is delivered again."""
        with self._lock:
            tx = self._txs.pop((connection, transaction), None)
            if tx is None:
                raise ProtocolError(f"no open transaction {transaction!r}")
            self._abort(tx)

    def _abort(self, tx: _Transaction) -> None:
        destinations = tx.store_tx.rollback()
        for destination in destinations:
            self._dispatch(destination)

    def _transaction(self, connection: Any, transaction: str) -> _Transaction:
        tx = self._txs.get((connection, transaction))
        if tx is None:
            raise ProtocolError(f"no open transaction {transaction!r}")
        return tx

    # coilmq's engine calls these for its own transaction handling; the protocol of
    # store.stomp.protocol uses begin/commit/abort instead.
    def resend_transaction_frames(self, connection: Any, transaction: str) -> None:
        """Nothing: ABORT is :meth:`abort`."""

    def clear_transaction_frames(self, connection: Any, transaction: str) -> None:
        """Nothing: COMMIT is :meth:`commit`."""
