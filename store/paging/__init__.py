"""Per-address page stores (docs/paging.md).

``api`` holds the contract (:class:`PagingManager`, :class:`PageStore`, :class:`PagePosition`),
``format`` the page record format every back-end writes; each back-end implements the contract
in its own module: ``memory`` (zero persistence), ``files`` (``paging-directory``) and
``database`` (``page-store-table-name`` tables). The two persistent ones share ``base`` (the
contract on top of a storage back-end: roll state, locking, reopen) and ``flusher`` (group
commit within ``page-sync-timeout``).
"""

from store.paging.api import PagePosition, PageStore, PagingManager

__all__ = ["PagePosition", "PageStore", "PagingManager"]
