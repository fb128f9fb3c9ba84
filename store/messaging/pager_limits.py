"""The pager's limits and admission (:mod:`store.messaging.pager`): where a send goes by its
address's limits and ``address-full-policy``, the global limits, and what the addresses
hold in memory.

**Limits.** Every address counts the messages it holds in memory and their encoded bytes
(counted once per message, whatever its queues; a message stops counting when no queue holds
it any more). The address is *full* when ``max-size-bytes`` (≥ 0) is reached or
``max-size-messages`` (≥ 0) messages are held. Then a send, by ``address-full-policy``:

- ``PAGE``: a durable message goes to the address's page store
  (:class:`~store.messaging.message_records.PagedMessage`) and stays out of memory; the
  address keeps paging until every paged message is acknowledged, so paged messages are
  delivered after those in memory, in page order;
- ``DROP``: nothing is stored, ``send`` returns None;
- ``FAIL``: :class:`~store.errors.AddressFullError`, nothing stored;
- ``BLOCK``: the sender waits until an ack (from any thread) makes room. A limit of 0 under
  BLOCK can never make room: the configuration refuses it (``ConfigError``, see
  :mod:`store.config.addresses`).

**Transactions obey the limits at ``tx.send``** (docs/messaging.md). A transaction's in-memory sends
are counted against their address from ``tx.send`` (not from commit), so the address is full
when what queues hold plus what open transactions hold reaches the limit, and the policy
applies to the transaction's next send as to any other: PAGE pages it (below), DROP drops it,
FAIL raises ``AddressFullError`` (the transaction stays usable; nothing of that message is
stored). Rollback uncounts them; commit hands them to their queues, which count them from then.
What one transaction holds in memory is therefore bounded by its addresses' limits (plus one
message, as for any sender; non-durable messages under PAGE excepted, below), and once it has
paged to an address its later durable sends there are paged too, so they still become
deliverable in send order (:mod:`store.messaging.pager_sends`).

``BLOCK`` in a transaction: a ``tx.send`` waits for room as a plain send does only while its
transaction holds nothing (no in-memory send to any address, no acknowledged message). A
transaction that holds something fails fast with ``AddressFullError`` instead: the room it
would wait for may be its own (only its commit or rollback frees what it holds, and its caller
is the one waiting), or held by another transaction waiting on it; refusing to wait while
holding is what keeps BLOCK free of such deadlocks. The transaction stays usable: commit or
roll back, then send again.

**Global limits** (Artemis's ``global-max-size`` / ``global-max-messages``, see
:class:`~store.config.StoreConfig`): the manager also counts what all addresses hold in memory
together. Once that reaches a global limit, every address is full, whatever its own limits
(an address without any is full too), and its own ``address-full-policy`` applies: PAGE pages,
DROP drops, FAIL fails, BLOCK waits for an ack anywhere. ``global-max-size`` is an estimate of
memory, not of record bytes: each message counts its record's bytes plus
:data:`MEMORY_PER_MESSAGE` (what a waiting message costs in memory beyond its record, measured
by ``bench/deep_queues.py`` and held to by ``tests/messaging/test_deep_memory.py``), as
Artemis counts a message's memory estimate. An address's own ``max-size-bytes`` still counts
record bytes (its meaning before the global limits existed). Because paged messages are not
loaded at start-up, the global limit bounds what a restart holds too; an address paging
because of it keeps paging until its paged messages are acknowledged, as for its own limit,
so delivery stays in send order.

Non-durable messages are never paged (they are never written): they stay in memory, past the
limit.

Thread-safety: none of its own; the storage manager's lock guards every call.
"""

from __future__ import annotations

import logging
from typing import Final

from store.errors import AddressFullError
from store.messaging.pager_state import AddressPaging, PagerBase

__all__ = ["BLOCK", "DROP", "MEMORY", "MEMORY_PER_MESSAGE", "PAGE", "PagerLimits"]

log = logging.getLogger("store.messaging.paging")  # the logger this code always logged to

MEMORY: Final = "MEMORY"
PAGE: Final = "PAGE"
DROP: Final = "DROP"
BLOCK: Final = "BLOCK"
#: What ``global-max-size`` counts for a message held in memory beyond its record's bytes:
#: its StoredMessage, queue entry, heap item and dict slots (``bench/deep_queues.py`` measures
#: the whole; ``tests/messaging/test_deep_memory.py`` checks a load stays within it).
MEMORY_PER_MESSAGE: Final = 900


class PagerLimits(PagerBase):
    """The pager's admission of sends and its memory counts (see the module docstring)."""

    def admit(self, address: str, *, durable: bool, transactional: bool) -> str:
        """Where a new message of ``address`` goes: MEMORY, PAGE, DROP or BLOCK (wait and ask
        again). ``transactional`` sends are judged the same way (they page invisibly until
        commit): the transaction counts its in-memory sends with :meth:`hold_memory` at
        ``tx.send``, so they weigh on the limit as the queues' messages do. Raises
        AddressFullError under the FAIL policy, ConfigError for settings that can never
        admit a message (see :meth:`address`)."""
        state = self.address(address)
        if state.policy == PAGE:
            if durable and (state.live > 0 or state.full() or self.global_full()):
                # A transaction's paged sends count in ``live`` only at commit: logged there
                # once per send, the line would repeat for every send of a large transaction.
                if state.live == 0 and not transactional:
                    log.info("address %r starts paging: %s", address, self._fullness(state))
                return PAGE
            return MEMORY
        if not state.full() and not self.global_full():
            return MEMORY
        if state.policy == "FAIL":
            raise AddressFullError(
                f"address {address!r} is full ({self._fullness(state)}) and its"
                " address-full-policy is FAIL"
            )
        return DROP if state.policy == DROP else BLOCK

    def global_full(self) -> bool:
        """True when what all addresses hold in memory reaches ``global-max-size`` (as an
        estimate: record bytes plus :data:`MEMORY_PER_MESSAGE` each) or
        ``global-max-messages``. Raises nothing."""
        messages = self._total_messages
        return (
            0 <= self._global_max_size <= self._total_bytes + messages * MEMORY_PER_MESSAGE
        ) or (0 <= self._global_max_messages <= messages)

    def _fullness(self, state: AddressPaging) -> str:
        """Why ``state`` is full, for a message: its own counts, and the global ones when
        those are reached."""
        own = f"{state.memory_messages} messages, {state.memory_bytes} bytes"
        if not self.global_full():
            return own
        estimate = self._total_bytes + self._total_messages * MEMORY_PER_MESSAGE
        return (
            f"{own}; all addresses hold {self._total_messages} messages, about {estimate}"
            f" bytes of memory: global-max-size {self._global_max_size},"
            f" global-max-messages {self._global_max_messages}"
        )

    def refuse_block(self, address: str) -> AddressFullError:
        """The error for a ``tx.send`` to ``address``, full under BLOCK, by a transaction that
        holds memory and so may not wait (module docstring). Returns it. Raises nothing."""
        state = self.address(address)
        return AddressFullError(
            f"address {address!r} is full ({self._fullness(state)}) and its"
            " address-full-policy is BLOCK; a transaction"
            " that holds messages (sent or acknowledged) does not wait, since the room it"
            " would wait for may be its own: commit or roll back, then send again"
        )

    def hold_memory(self, address: str, size: int, delta: int) -> None:
        """Count (``delta`` 1) or uncount (-1) a message of ``size`` bytes in memory."""
        state = self.address(address)
        state.memory_bytes += size * delta
        state.memory_messages += delta
        self._total_bytes += size * delta
        self._total_messages += delta

    def hold_memory_total(self, address: str, size: int, count: int) -> None:
        """Count ``count`` messages of ``size`` bytes in all in memory (a load's messages of
        one address at once). Returns None. Raises nothing."""
        state = self.address(address)
        state.memory_bytes += size
        state.memory_messages += count
        self._total_bytes += size
        self._total_messages += count
