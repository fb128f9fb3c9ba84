"""The duplicate-id cache of one address (reference §3.4).

A ring of the last ``id-cache-size`` duplicate ids sent to the address. With
``persist-id-cache`` each id is a DUPLICATE_ID record (type 37, its record id a new id) in the
message journal; when the ring wraps, the overwritten id's record is deleted, so the journal
never holds more than the ring. A transaction *reserves* its ids at ``send`` (a second send of
the same id, in any transaction or outside, is refused while the first is pending) and adds
them at commit; a rollback releases them. A cache of size 0 remembers nothing.

The cache itself writes nothing: :meth:`DuplicateIdCache.add` and :meth:`DuplicateIdCache.load`
return the record ids the caller must delete.

Thread-safety: none; the storage manager's lock guards every cache.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["DuplicateIdCache"]


class DuplicateIdCache:
    """The ring of one address's duplicate ids (see the module docstring)."""

    def __init__(self, address: str, size: int) -> None:
        self.address = address
        self.size = max(size, 0)
        # dup id -> record id (None: not persisted), oldest first.
        self._ring: OrderedDict[bytes, int | None] = OrderedDict()
        self._reserved: set[bytes] = set()

    def __contains__(self, dup_id: bytes) -> bool:
        return dup_id in self._ring or dup_id in self._reserved

    def __len__(self) -> int:
        return len(self._ring)

    def reserve(self, dup_id: bytes) -> None:
        """Mark ``dup_id`` as pending in a transaction. Returns None; raises nothing (the caller
        checks ``in`` first). A cache of size 0 reserves nothing."""
        if self.size:
            self._reserved.add(dup_id)

    def release(self, dup_id: bytes) -> None:
        """Forget a reservation (rollback, or just before ``add`` at commit). Raises nothing."""
        self._reserved.discard(dup_id)

    def add(self, dup_id: bytes, record_id: int | None) -> list[int]:
        """Remember ``dup_id`` (stored as record ``record_id``, None when not persisted);
        returns the record ids of the ids it pushed out of the ring. Raises nothing."""
        if self.size == 0:
            return [] if record_id is None else [record_id]
        self._ring[dup_id] = record_id
        self._ring.move_to_end(dup_id)
        evicted: list[int] = []
        while len(self._ring) > self.size:
            _, old = self._ring.popitem(last=False)
            if old is not None:
                evicted.append(old)
        return evicted

    def load(self, entries: list[tuple[bytes, int]]) -> list[int]:
        """Rebuild the ring from loaded ``(dup id, record id)`` pairs in journal order; returns
        the record ids beyond the ring's size (oldest first), for the caller to delete.
        Raises nothing."""
        evicted: list[int] = []
        for dup_id, record_id in entries:
            old = self._ring.get(dup_id)
            if old is not None and dup_id in self._ring:
                evicted.append(old)  # the same id twice: keep the newer record
                del self._ring[dup_id]
            evicted.extend(self.add(dup_id, record_id))
        return evicted
