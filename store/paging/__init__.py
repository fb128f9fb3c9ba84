"""Per-address page stores (DESIGN §7.2).

``api`` holds the contract (:class:`PagingManager`, :class:`PageStore`, :class:`PagePosition`),
``format`` the page record format every back-end writes; each back-end implements the contract
in its own module: ``memory`` (zero persistence), and the file and database stores' own.
"""

from store.paging.api import PagePosition, PageStore, PagingManager

__all__ = ["PagePosition", "PageStore", "PagingManager"]
