"""What a waiting message costs the storage manager in memory after ``load()`` (issue 27), as
a bound: a store with 200,000 100-byte messages waiting in one queue loads with at most
:data:`BUDGET` bytes per message traced by ``tracemalloc``, on the file store and on
PostgreSQL.

What is traced: everything the storage manager builds from the message journal's load
(``tracemalloc`` starts when that journal's ``load()`` returns): its stored messages, queue
entries, heap items, dicts and ints, and what the replay left behind. Not traced: the encoded
records themselves and the journal's own index, which the journal's load allocates (and
under ``tracemalloc`` that load alone takes 20 s here, past what this test may take;
``bench/deep_queues.py`` measures the whole, RSS included). Measured: about 390 bytes
per message on both back-ends on the tree that holds one queue's ref in two slots instead of
a dict; the tree before that cut measured about 600, and fails :data:`BUDGET`.

The store is filled through the journal API with the records a ``send`` writes (ADD 45, then
UPDATE 32), not by 200,000 sends, which take longer than the whole test may. The first
message is then received, the first one written.
"""

from __future__ import annotations

import concurrent.futures
import gc
import multiprocessing
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from store import StoreConfig, open_store
from store.messaging import Message, StorageManager
from store.messaging import records as r
from store.messaging.message_records import encode_message
from store.messaging.pager import MEMORY_PER_MESSAGE
from tests.support.backends import file_config_mapping, unique_prefix
from tests.support.db_backends import db_backend

N = 200_000
BODY = b"x" * 100
#: Bytes the storage manager holds per waiting message after load() (module docstring).
BUDGET = 450


def _fill(config: StoreConfig) -> None:
    """Create queue "deep" with N messages waiting. Returns None."""
    with StorageManager(open_store(config)) as sm:
        sm.load()
        sm.create_address("deep")
        queue = sm.create_queue("deep", address="deep")
        journal, ref = sm._store.messages, r.queue_id_body(queue.id)
        for n in range(N):
            mid = sm._state.ids.next_id()
            record = encode_message(Message("deep", BODY, timestamp=n + 1, message_id=mid), BODY)
            journal.append_add(mid, r.ADD_MESSAGE_PROTOCOL, record)
            journal.append_update(mid, r.ADD_REF, ref)
        sm.flush()


def _traced_per_message(config: StoreConfig) -> float:
    """Load the store, tracing from the end of the message journal's load; returns the traced
    bytes per message still allocated once load() has returned."""
    store = open_store(config)
    journal = store.messages
    journal_load = journal.load

    def load_then_trace() -> Any:
        result = journal_load()
        gc.collect()
        tracemalloc.start()
        return result

    journal.load = load_then_trace  # type: ignore[method-assign]
    sm = StorageManager(store)
    try:
        rec = sm.load()
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert rec.messages == N and sm.depth("deep") == N
        (first,) = sm.receive("deep", 1)
        assert first.message.body == BODY and first.message.timestamp == 1
    finally:
        tracemalloc.stop()
        sm.close()
    return traced / N


def _check(config: StoreConfig) -> None:
    _fill(config)
    # In a fresh interpreter: tracemalloc.stop() while another thread allocates crashes
    # CPython 3.11 (a segfault, fixed in 3.12.9/3.13.2: gh-128679), and a pytest worker
    # holds threads of earlier tests (a JVM's, Spark's) that this test cannot stop.
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        per_message = pool.submit(_traced_per_message, config).result()
    assert per_message <= BUDGET, f"{per_message:.0f} bytes per waiting message, budget {BUDGET}"
    # global-max-size counts at least this much per message beyond its record.
    assert per_message < MEMORY_PER_MESSAGE


def test_200000_waiting_messages_load_within_the_memory_budget_on_the_file_store(
    tmp_path: Path,
):
    mapping = {**file_config_mapping(tmp_path, "NIO"), "journal-file-size": "10M"}
    _check(StoreConfig.from_mapping(mapping))


@pytest.mark.parametrize("name", ["postgresql"])
def test_200000_waiting_messages_load_within_the_memory_budget_on_a_database(
    tmp_path: Path, name: str
):
    spec = db_backend(name)
    config = spec.make_config(tmp_path, unique_prefix())
    try:
        _check(config)
    finally:
        spec.cleanup(config)
