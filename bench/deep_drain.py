"""What happens after a deep queue's restart, for ``bench.deep_queues --drain`` (issue 27:
"the whole queue then drains in order with every message exactly once", and "send/receive/
ack rates with N waiting within 20 % of those at depth 0").

Every message the deep-queue benchmark builds has its number in its body (:func:`body`), so a
drain can check order and exactly-once without holding anything per message:

- :func:`steady` runs cycles of one send (``sync=False``), one receive and one ack
  (``sync=False``) for a few seconds, then flushes: the queue keeps its depth, so the rate is
  the cost of an operation *at that depth* (on a deep queue the receive reads a paged
  message and the send is paged; at depth 0 both stay in memory). Its sends are numbered
  apart (:func:`tail_body`) and come back at the end of the drain.
- :func:`drain` receives and acknowledges everything left, in batches, and checks each body
  against the next number expected; the acks are flushed at the end. With ``in_memory``, it
  stops once the queue holds no message in memory: what a load kept in memory (up to the
  global limit) is gone, and every receive from then on reads a page (depages), which is the
  steady state of a queue that stays deep.

Thread-safety: one storage manager, this thread only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from store.messaging import Message, StorageManager

#: The bytes a message body has besides its number: 100 bytes in all.
_PAD = b"x" * 90


def body(index: int) -> bytes:
    """The body of the ``index``-th message of a deep-queue build (100 bytes)."""
    return b"%010d" % index + _PAD


def tail_body(index: int) -> bytes:
    """The body of the ``index``-th message :func:`steady` sends (100 bytes)."""
    return b"T%09d" % index + _PAD


class Expected:
    """The bodies a drain must see next: the build's from ``start``, then ``tail`` bodies."""

    def __init__(self, start: int, total: int) -> None:
        self.next_index = start
        self.total = total
        self.tail = 0

    def __iter__(self) -> Iterator[bytes]:
        while self.next_index < self.total:
            self.next_index += 1
            yield body(self.next_index - 1)
        while True:
            self.tail += 1
            yield tail_body(self.tail - 1)


def steady(
    sm: StorageManager, queue: str, seconds: float, expected: Iterator[bytes], sent: int
) -> tuple[float, int]:
    """Send, receive and ack for ``seconds`` (module docstring); its sends are
    ``tail_body(sent)`` on, and every body received must be the next of ``expected``. Returns
    (cycles per second, the flush included; how many it sent). Raises AssertionError on a body
    out of order."""
    cycles = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        sm.send(Message(queue, tail_body(sent + cycles)), sync=False)
        (delivery,) = sm.receive(queue, 1)
        want = next(expected)
        assert delivery.message.body == want, (delivery.message.body[:10], want[:10])
        assert delivery.message.message_id is not None
        sm.ack(queue, delivery.message.message_id, sync=False)
        cycles += 1
    sm.flush()
    return cycles / (time.perf_counter() - started), cycles


def in_memory(sm: StorageManager, queue: str) -> Callable[[], int]:
    """How many of ``queue``'s messages are in memory now (its depth less what is paged and
    not read back), as :func:`drain`'s ``in_memory`` asks."""
    qid = sm._state.queues[queue].info.id
    return lambda: sm.depth(queue) - sm._pager.remaining(queue, qid)


def drain(
    sm: StorageManager,
    queue: str,
    expected: Iterator[bytes],
    in_memory: Callable[[], int] | None = None,
) -> tuple[int, float]:
    """Receive and ack everything left in ``queue`` (batches of 1,000), each body the next of
    ``expected``; with ``in_memory`` (how many of the queue's messages are in memory), only
    those (module docstring). Returns (messages, messages per second, the final flush
    included). Raises AssertionError on a body out of order or missing."""
    count = 0
    started = time.perf_counter()
    while True:
        want = 1000 if in_memory is None else min(1000, in_memory())
        batch = sm.receive(queue, want) if want else []
        if not batch:
            break
        for delivery in batch:
            expect = next(expected)
            assert delivery.message.body == expect, (count, delivery.message.body[:10], expect[:10])
            assert delivery.message.message_id is not None
            sm.ack(queue, delivery.message.message_id, sync=False)
        count += len(batch)
    sm.flush()
    if in_memory is None:
        assert sm.depth(queue) == 0, sm.depth(queue)
    return count, count / (time.perf_counter() - started)
