"""The storage manager's layer (docs/messaging.md): messaging records over the journals, the
large-message store and the page stores.

Usage::

    from store import StoreConfig, open_store
    from store.messaging import Message, StorageManager, Xid

    sm = StorageManager(open_store(config))     # closing sm closes the store
    rec = sm.load()                             # once, before anything else
    sm.create_address("orders", routing_types=("ANYCAST",))
    sm.create_queue("orders.eu", address="orders", routing_type="ANYCAST")
    mid = sm.send(Message("orders", b"..."))
    for d in sm.receive("orders.eu", max_messages=10):
        sm.ack("orders.eu", d.message.message_id)

Modules, one concern each:

- :mod:`~store.messaging.values` — Message, Delivery, Xid, AddressInfo, QueueInfo;
- :mod:`~store.messaging.manager` — the StorageManager (live operations);
- :mod:`~store.messaging.state` — the ManagerState the manager owns (its in-memory state and
  the operations the manager, the load and transactions share); the TransactionWork;
- :mod:`~store.messaging.stored` — StoredMessage, a message the manager holds;
- :mod:`~store.messaging.transactions` — Transaction (local and XA);
- :mod:`~store.messaging.loader` and :mod:`~store.messaging.recovery` — ``load()``: replay,
  rebuild, sweep; the Recovery it returns;
- :mod:`~store.messaging.queues` — one queue in memory (order, schedule, deliveries);
- :mod:`~store.messaging.pager` — the Pager: address limits, full policies, paged messages,
  cursors, page deletion; written in parts (:mod:`~store.messaging.pager_state`,
  :mod:`~store.messaging.pager_limits`, :mod:`~store.messaging.pager_sends`,
  :mod:`~store.messaging.pager_cursors`, :mod:`~store.messaging.pager_deletion`,
  :mod:`~store.messaging.pager_load`), with what it reads pages through
  (:mod:`~store.messaging.page_cache`, :mod:`~store.messaging.page_scan`,
  :mod:`~store.messaging.page_summary`);
- :mod:`~store.messaging.bodies` — bodies inline or streamed to the large-message store;
- :mod:`~store.messaging.dupcache` — the duplicate-id cache of an address;
- :mod:`~store.messaging.ids` — the id generator persisted in the bindings journal;
- :mod:`~store.messaging.records`, :mod:`~store.messaging.message_records`,
  :mod:`~store.messaging.page_records`, :mod:`~store.messaging.codec` — record bodies;
  :mod:`~store.messaging.message_facts` — what a report reads of a message record.
"""

from store.messaging.manager import StorageManager
from store.messaging.page_records import (
    CursorAck,
    PageComplete,
    PageCounterIncrement,
    PageCounterPending,
    PageCounterValue,
    PageTransaction,
    PageTransactionUpdate,
    decode_page_record,
)
from store.messaging.recovery import Recovery
from store.messaging.transactions import Transaction
from store.messaging.values import AddressInfo, Delivery, Message, QueueInfo, Xid

__all__ = [
    "AddressInfo",
    "CursorAck",
    "Delivery",
    "Message",
    "PageComplete",
    "PageCounterIncrement",
    "PageCounterPending",
    "PageCounterValue",
    "PageTransaction",
    "PageTransactionUpdate",
    "QueueInfo",
    "Recovery",
    "StorageManager",
    "Transaction",
    "Xid",
    "decode_page_record",
]
