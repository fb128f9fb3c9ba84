"""A message the storage manager holds (:class:`StoredMessage`): the message, or its encoded
record body until first used, and the queues still holding it.

Made by the manager's send (:meth:`store.messaging.state.ManagerState.prepare_message`), by
the load (:mod:`store.messaging.loader`; the compiled ``keep_run`` of
``store/_speedups_load.c`` writes its slots directly, by name) and for a message read back from
a page.

Thread-safety: none of its own; the storage manager's lock guards it.
"""

from __future__ import annotations

from store.messaging import records as r
from store.messaging.message_records import decode_message, encode_large_message, encode_message
from store.messaging.queues import QueueEntry
from store.messaging.values import Message
from store.paging.api import PagePosition

__all__ = ["StoredMessage"]


class StoredMessage:
    """A message the manager holds, and the queues still holding it (``refs``: queue id -> the
    message's entry on that queue; a load hands over the dict it replayed the refs into).

    Memory (issue 27): a message waiting on one queue, the common case, holds that ref as
    two slots (``_ref_queue``, the queue id, shared between messages; ``_refs``, the entry)
    instead of a dict of one item, which cost 224 bytes and its own queue-id int per
    message, about a quarter of what a waiting message cost. :attr:`refs` turns them into the
    dict the first time it is asked for (an ack, a second queue), which it stays;
    :meth:`queue_ids` and :meth:`add_ref` do not need it.

    ``size`` is what it counts against its address's limit (its record's size);
    ``position`` is set for a message read back from a page (it has no journal record).
    A recovered message may be held as its encoded ADD_MESSAGE_PROTOCOL body only
    (``encoded``, with ``message_id``; ``message`` None): it is decoded when first used
    (:attr:`message`), and the encoded body released then, so one form is held at a time.
    """

    __slots__ = (
        "_encoded",
        "_message",
        "_message_id",
        "_record",
        "_ref_queue",
        "_refs",
        "large_size",
        "position",
        "size",
    )

    def __init__(
        self,
        message: Message | None,
        refs: dict[int, QueueEntry] | None = None,
        size: int = 0,
        position: PagePosition | None = None,
        large_size: int | None = None,
        *,
        encoded: bytes | None = None,
        message_id: int | None = None,
    ) -> None:
        """``message``, or ``encoded`` (a body :func:`peek_message` accepted) and its
        ``message_id``; ``large_size`` is the size of a body kept in the large-message store,
        None for an inline body. Raises ValueError when neither form is given."""
        if message is None and (encoded is None or message_id is None):
            raise ValueError("a stored message needs its message, or its encoded body and id")
        self._message = message
        self._encoded = encoded
        self._message_id = message.message_id if message is not None else message_id
        self._refs: dict[int, QueueEntry] | QueueEntry = {} if refs is None else refs
        #: The one queue holding the message when ``_refs`` is its entry, else None.
        self._ref_queue: int | None = None
        if refs is not None and len(refs) == 1:
            ((self._ref_queue, self._refs),) = refs.items()
        self.size = size
        self.position = position
        #: The size of a body kept in the large-message store; None for an inline body.
        self.large_size = large_size
        self._record: tuple[int, bytes] | None = None

    @classmethod
    def read_back(
        cls, message: Message, position: PagePosition, qid: int, entry: QueueEntry
    ) -> StoredMessage:
        """A message read back from the page at ``position``, held by queue ``qid`` only, as
        ``entry``: what ``StoredMessage(message, position=position)`` then ``add_ref(qid,
        entry)`` make, in one call (every receive of a deep queue makes one). Raises
        nothing."""
        stored = cls.__new__(cls)
        stored._message, stored._encoded, stored._message_id = message, None, message.message_id
        stored._refs, stored._ref_queue, stored._record = entry, qid, None
        stored.size, stored.position, stored.large_size = 0, position, None
        return stored

    @property
    def refs(self) -> dict[int, QueueEntry]:
        """Queue id -> this message's entry on that queue, for every queue holding it (the
        dict itself: change it to change the refs). Raises nothing."""
        qid = self._ref_queue
        if qid is not None:
            entry = self._refs
            assert isinstance(entry, QueueEntry)
            self._refs, self._ref_queue = {qid: entry}, None
        refs = self._refs
        assert isinstance(refs, dict)
        return refs

    def queue_ids(self) -> list[int]:
        """The ids of the queues holding the message (without making the refs' dict). Raises
        nothing."""
        qid = self._ref_queue
        return [qid] if qid is not None else list(self._refs)  # type: ignore[arg-type]

    def add_ref(self, qid: int, entry: QueueEntry) -> None:
        """Queue ``qid`` holds the message as ``entry``: kept in the two slots when it is the
        only ref, else in the dict. Returns None. Raises nothing."""
        if self._ref_queue is None and not self._refs:
            self._ref_queue, self._refs = qid, entry
        else:
            self.refs[qid] = entry

    def held_without(self, qid: int) -> bool:
        """Whether a queue other than ``qid`` holds the message. Raises nothing."""
        if self._ref_queue is not None:
            return self._ref_queue != qid
        refs = self._refs
        assert isinstance(refs, dict)
        return any(other != qid for other in refs)

    def remove_ref(self, qid: int) -> bool:
        """Queue ``qid`` no longer holds the message (nothing happens if it did not); returns
        whether any queue still does. Raises nothing."""
        if self._ref_queue is not None:
            if self._ref_queue != qid:
                return True
            self._ref_queue, self._refs = None, {}
            return False
        refs = self.refs
        refs.pop(qid, None)
        return bool(refs)

    @property
    def message(self) -> Message:
        """The message, decoded from its encoded body on first use. Raises nothing (the body
        was checked when it was loaded)."""
        m = self._message
        if m is None:
            assert self._encoded is not None and self._message_id is not None
            m = self._message = decode_message(self._encoded, self._message_id)
            self._encoded = None
        return m

    @property
    def expiration(self) -> int:
        """The message's expiration (ms since the epoch, 0 never), read from its encoded body
        without decoding it when it is held encoded: the body starts with the version byte,
        the address (u32 length and bytes), priority, durable, timestamp, then expiration
        (:mod:`store.messaging.message_records`). Raises nothing."""
        m = self._message
        if m is not None:
            return m.expiration
        body = self._encoded
        assert body is not None
        at = 15 + int.from_bytes(body[1:5], "big")
        return int.from_bytes(body[at : at + 8], "big", signed=True)

    def peek(self) -> Message:
        """The message, decoded from its encoded body without keeping the decoded form (a
        reader passing through, such as
        :meth:`~store.messaging.manager.StorageManager.browse`). Raises nothing."""
        if self._message is not None:
            return self._message
        assert self._encoded is not None and self._message_id is not None
        return decode_message(self._encoded, self._message_id)

    def record(self) -> tuple[int, bytes]:
        """The user record type (45 or 30) and body of this message's journal record. Raises
        ValueError when a field does not fit its slot."""
        if self._encoded is not None:
            return r.ADD_MESSAGE_PROTOCOL, self._encoded
        m = self.message
        if self.large_size is not None:
            return r.ADD_LARGE_MESSAGE, encode_large_message(m, self.large_size)
        assert isinstance(m.body, bytes)
        return r.ADD_MESSAGE_PROTOCOL, encode_message(m, m.body)

    def prepare(self) -> None:
        """Encode the journal record of a message about to be sent: its size is what the
        message counts against its address (:attr:`size`), and the send writes it
        (:meth:`take_record`) without encoding it again. Raises as :meth:`record`."""
        rec = self._record = self.record()
        self.size = len(rec[1])

    def take_record(self) -> tuple[int, bytes]:
        """The record :meth:`prepare` encoded, forgotten here so the message is held in one
        form only (or :meth:`record`'s answer when there is none). Raises as :meth:`record`."""
        rec = self._record
        if rec is None:
            return self.record()
        self._record = None
        return rec

    @property
    def message_id(self) -> int:
        """The message id (set by send or load)."""
        mid = self._message_id if self._message is None else self._message.message_id
        assert mid is not None
        return mid
