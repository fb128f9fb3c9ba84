"""The storage manager's layer (DESIGN §9): messaging records over the journals, the
large-message store and the page stores.

:mod:`store.messaging.page_records` holds the codecs of the message-journal records that tie
paged messages to queues (page transactions, cursor acks, page completion, page counters).
"""

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

__all__ = [
    "CursorAck",
    "PageComplete",
    "PageCounterIncrement",
    "PageCounterPending",
    "PageCounterValue",
    "PageTransaction",
    "PageTransactionUpdate",
    "decode_page_record",
]
