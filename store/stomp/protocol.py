"""coilmq's STOMP 1.0 / 1.1 / 1.2 protocol classes, with every queue command routed to the
durable queue manager.

coilmq's classes buffer a transaction's frames in memory and replay them at COMMIT, treat
``client-individual`` as ``auto``, refuse NACK (``NotImplementedError``), and send a RECEIPT
as soon as the command returns. Here (one mixin over each of coilmq's classes, which keep
CONNECT, heart-beats and topics):

- a SEND to a ``/queue/`` destination outside a transaction is stored and its RECEIPT
  deferred (``connection.after_flush``): the connection makes every deferred SEND durable
  with one flush, then sends their RECEIPTs in order, before it handles any other command and
  before it waits for more bytes (:class:`~store.stomp.server.StoreStompHandler`);
- an ACK or NACK with a receipt is durable before its RECEIPT;
- BEGIN / COMMIT / ABORT, and SEND / ACK with a ``transaction`` header, are the queue
  manager's store transactions;
- SUBSCRIBE takes ``ack:auto|client|client-individual`` (1.0 included); one to a topic with
  ``durable-subscription-name`` (or ``activemq.subscriptionName``) is a durable subscription,
  a queue ``<client-id>.<name>`` kept while its subscriber is away (:mod:`store.stomp.topics`);
  a SEND to a topic is stored for its durable subscriptions (nothing stored when it has none);
  one to a queue with ``browser:true`` browses it (:mod:`store.stomp.browser`);
- heart-beats (1.1, 1.2) are negotiated as the specification says, each direction at least
  :data:`HEART_BEAT_MS` apart, and kept by the connection (``keep_heartbeats``: it sends them
  and closes a client silent for twice its interval), not by coilmq's timer (which sent one
  and never enforced any);
- STOMP 1.2's CONNECT accepts any ``host`` (one virtual host; coilmq refuses any but its own
  FQDN, so a client connecting to 127.0.0.1 could not), and its MESSAGE frames carry the
  ``ack`` header its ACK names.

An error in a command is an ERROR frame (with ``receipt-id`` when the frame asked for a
receipt). A frame the broker cannot process as STOMP says (a ProtocolError: a SEND or SUBSCRIBE
without a destination, an ACK of no message, an unknown transaction), an unknown command, a
frame before CONNECT and bytes that are not a frame then end the connection, as STOMP 1.2
requires (:class:`Answered`); an error of the store (a SEND refused while the database is away)
keeps the connection, so the client retries on it.

Thread-safety: a protocol object belongs to one connection's thread.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from coilmq.exception import ProtocolError  # type: ignore[import-untyped]
from coilmq.protocol import STOMP10, STOMP11, STOMP12  # type: ignore[import-untyped]
from coilmq.util import frames  # type: ignore[import-untyped]
from coilmq.util.frames import (  # type: ignore[import-untyped]
    ConnectedFrame,
    ErrorFrame,
    Frame,
    ReceiptFrame,
)

from store.stomp.browser import browse_queue, is_browser
from store.stomp.queue_manager import DurableQueueManager
from store.stomp.security import BrokerSecurity
from store.stomp.topics import durable_name

__all__ = ["Answered", "DurableStomp10", "DurableStomp11", "DurableStomp12", "durable_protocol"]

log = logging.getLogger(__name__)

_QUEUE_PREFIX = "/queue/"
#: The shortest heart-beat interval the broker sends or expects (milliseconds).
HEART_BEAT_MS = 1000


class Answered(ProtocolError):  # type: ignore[misc]
    """A frame's protocol error, already answered with its ERROR frame: the connection ends
    without another one."""


class _Durable:
    """The mixin (see the module docstring); ``engine`` is coilmq's StompEngine."""

    engine: Any

    @property
    def _qm(self) -> DurableQueueManager:
        qm: DurableQueueManager = self.engine.queue_manager
        return qm

    def process_frame(self, frame: Frame) -> None:
        engine = self.engine
        connection = engine.connection
        if frame.cmd not in frames.VALID_COMMANDS:
            raise ProtocolError(f"unknown STOMP command {frame.cmd[:40]!r}")
        if not engine.connected and frame.cmd not in (frames.CONNECT, frames.STOMP_CMD):
            raise ProtocolError("not connected: the first frame must be CONNECT or STOMP")
        receipt = frame.headers.get("receipt")
        try:
            if frame.cmd in (frames.CONNECT, frames.STOMP_CMD):
                connection.client_id = frame.headers.get("client-id")  # durable subscriptions
                self._login(frame)
            destination = frame.headers.get("destination") or ""
            if (
                frame.cmd == frames.SEND
                and destination.startswith(_QUEUE_PREFIX)
                and not frame.headers.get("transaction")
            ):
                self._permit_send(destination)
                connection.after_flush(receipt, self._qm.store_frame(frame))
                return
            connection.settle()
            getattr(self, frame.cmd.lower())(frame)
            if receipt and frame.cmd not in (frames.CONNECT, frames.STOMP_CMD):
                if frame.cmd in (frames.ACK, frames.NACK):
                    self._qm.store.flush()
                connection.send_frame(ReceiptFrame(receipt))
        except Exception as exc:
            engine.log.debug("error in a %s frame", frame.cmd, exc_info=True)
            extra = {"receipt-id": receipt} if receipt else None
            connection.send_frame(ErrorFrame(str(exc) or type(exc).__name__, extra_headers=extra))
            if isinstance(exc, ProtocolError):
                raise Answered(str(exc)) from exc

    # -- security (store.stomp.security) ----------------------------------------------------

    def _login(self, frame: Frame) -> None:
        """Check the CONNECT's login and passcode when the broker has security. Raises
        ProtocolError (an ERROR, then the connection closes) for a bad one."""
        connection = self.engine.connection
        security: BrokerSecurity | None = getattr(connection, "security", None)
        connection.user = login = frame.headers.get("login")
        connection.permitted = set()
        if security is None:
            return
        if not security.authenticate(login, frame.headers.get("passcode")):
            log.info("login refused for user %r from %s", login, getattr(connection, "peer", "?"))
            raise ProtocolError("login refused: unknown user or wrong passcode")

    def _permit(self, permission: str, destination: str) -> None:
        """Raise ProtocolError naming the user, ``permission`` and ``destination`` unless the
        connection's user has it (always, without security). A granted permission is
        remembered for the connection (the settings never change while it runs)."""
        connection = self.engine.connection
        security: BrokerSecurity | None = getattr(connection, "security", None)
        if security is None or (permission, destination) in connection.permitted:
            return
        if not security.allows(connection.user, permission, destination):
            log.info("refused: %s", security.why_not(connection.user, permission, destination))
            raise ProtocolError(security.why_not(connection.user, permission, destination))
        connection.permitted.add((permission, destination))

    def _permit_creating(self, destination: str) -> None:
        """A queue destination the store does not hold yet is made by this command:
        ``createAddress`` and ``createDurableQueue`` too."""
        if getattr(self.engine.connection, "security", None) is not None and not (
            self._qm.store.holds(destination)
        ):
            self._permit("createAddress", destination)
            self._permit("createDurableQueue", destination)

    def _permit_send(self, destination: str) -> None:
        self._permit("send", destination)
        if self._is_queue(destination):
            self._permit_creating(destination)

    def enable_heartbeat(self, cx: int, cy: int) -> tuple[int, int]:
        """The CONNECT asked ``cx,cy`` (it sends every cx ms, wants one every cy ms; 0: not
        at all): the broker sends every max(cy, HEART_BEAT_MS) ms when cy is set and expects
        one every max(cx, HEART_BEAT_MS) ms when cx is set. Returns the CONNECTED frame's
        ``heart-beat``."""
        send = max(cy, HEART_BEAT_MS) if cy else 0
        expect = max(cx, HEART_BEAT_MS) if cx else 0
        self.engine.connection.keep_heartbeats(send / 1000, expect / 1000)
        return send, expect

    def _is_queue(self, destination: str) -> bool:
        """A ``/queue/`` destination, or one naming a queue the store holds (a dead-letter
        or expiry queue, ``DLQ./queue/orders``): the durable queue manager's; any other is
        a topic."""
        return destination.startswith(_QUEUE_PREFIX) or self._qm.store.holds(destination)

    def send(self, frame: Frame) -> None:
        destination = frame.headers.get("destination")
        if not destination:
            raise ProtocolError("SEND without a destination")
        transaction = frame.headers.get("transaction")
        self._permit_send(destination)
        if self._is_queue(destination):
            self._qm.store_frame(frame, transaction, self.engine.connection)
        elif transaction:
            raise ProtocolError("a transaction holds SENDs to /queue/ destinations only")
        else:
            queues = self._qm.store_topic_frame(frame)  # durable subscriptions: stored first
            self.engine.topic_manager.send(frame)
            self._qm.dispatch(queues)

    def subscribe(self, frame: Frame) -> None:
        destination = frame.headers.get("destination")
        if not destination:
            raise ProtocolError("SUBSCRIBE without a destination")
        sub_id = frame.headers.get("id")
        mode = frame.headers.get("ack", "auto")
        name = durable_name(frame.headers)
        if is_browser(frame.headers):  # store.stomp.browser
            if not self._is_queue(destination):
                raise ProtocolError(f"browser:true is for queues, not topic {destination!r}")
            self._permit("browse", destination)
            browse_queue(self._qm.store, self.engine.connection, destination, sub_id)
            return
        self._permit("consume", destination)
        if self._is_queue(destination):
            self._permit_creating(destination)
            self._qm.subscribe(self.engine.connection, destination, id=sub_id, ack=mode)
        elif name is not None:
            connection = self.engine.connection
            client = self._client_id(frame)
            self._permit("createDurableQueue", destination)
            self._qm.subscribe_durable(connection, destination, client, name, sub_id, mode)
        else:
            self._permit("createNonDurableQueue", destination)
            self.engine.topic_manager.subscribe(self.engine.connection, destination, id=sub_id)

    def _client_id(self, frame: Frame) -> str:
        """The client id of a durable SUBSCRIBE or UNSUBSCRIBE: its own ``client-id`` header,
        or the CONNECT's. Raises ProtocolError when neither gives one."""
        client = frame.headers.get("client-id") or getattr(
            self.engine.connection, "client_id", None
        )
        if not client:
            raise ProtocolError(
                "a durable subscription needs a client id: a client-id header on CONNECT"
            )
        return str(client)

    def unsubscribe(self, frame: Frame) -> None:
        destination = frame.headers.get("destination")
        sub_id = frame.headers.get("id")
        if destination is None and sub_id is None:
            raise ProtocolError("UNSUBSCRIBE without an id or a destination")
        name = durable_name(frame.headers)
        if name is not None:
            client = self._client_id(frame)
            topic = destination or self._qm.topics.topic_of(client, name)
            if topic is not None:
                self._permit("deleteDurableQueue", topic)
            self._qm.unsubscribe_durable(self.engine.connection, client, name, sub_id)
            return
        self._qm.unsubscribe(self.engine.connection, destination, id=sub_id)
        if destination is not None and not self._is_queue(destination):
            self.engine.topic_manager.unsubscribe(self.engine.connection, destination, id=sub_id)

    def ack(self, frame: Frame) -> None:
        if not (frame.headers.get("message-id") or frame.headers.get("id")):
            raise ProtocolError("ACK without a message-id (or, STOMP 1.2, an id)")
        self._qm.ack(
            self.engine.connection,
            frame,
            transaction=frame.headers.get("transaction"),
            id=frame.headers.get("id"),
        )

    def nack(self, frame: Frame) -> None:
        if not (frame.headers.get("message-id") or frame.headers.get("id")):
            raise ProtocolError("NACK without a message-id (or, STOMP 1.2, an id)")
        self._qm.nack(self.engine.connection, frame, id=frame.headers.get("id"))

    def begin(self, frame: Frame) -> None:
        self._qm.begin(self.engine.connection, _transaction(frame))

    def commit(self, frame: Frame) -> None:
        self._qm.commit(self.engine.connection, _transaction(frame))

    def abort(self, frame: Frame) -> None:
        self._qm.abort(self.engine.connection, _transaction(frame))


def _transaction(frame: Frame) -> str:
    transaction = frame.headers.get("transaction")
    if not transaction:
        raise ProtocolError(f"{frame.cmd} without a transaction header")
    return str(transaction)


class DurableStomp10(_Durable, STOMP10):  # type: ignore[misc]
    """STOMP 1.0 on the durable queue manager."""


class DurableStomp11(_Durable, STOMP11):  # type: ignore[misc]
    """STOMP 1.1 on the durable queue manager (heart-beats as coilmq's)."""


class DurableStomp12(_Durable, STOMP12):  # type: ignore[misc]
    """STOMP 1.2 on the durable queue manager: any ``host``; MESSAGE frames carry ``ack``."""

    def connect(self, frame: Frame, response: ConnectedFrame | None = None) -> None:
        if not frame.headers.get("host"):
            raise ProtocolError('"host" header is required')
        response = response or ConnectedFrame(str(uuid.uuid4()))
        response.headers.setdefault("version", "1.2")
        self.engine.connection.ack_header = True
        STOMP11.connect(self, frame, response)


_OURS = {STOMP10: DurableStomp10, STOMP11: DurableStomp11, STOMP12: DurableStomp12}


def durable_protocol(coilmq_class: type) -> type:
    """Ours for one of coilmq's protocol classes (what its negotiation picked). Raises
    ProtocolError for a class it does not know."""
    ours = _OURS.get(coilmq_class)
    if ours is None:
        raise ProtocolError(f"no durable protocol for {coilmq_class.__name__}")
    return ours
