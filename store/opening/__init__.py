"""Assembling an open store: one opener per back-end, each building every part of the store
(two journals, the large-message store, the page stores, the lock) and returning them as a
:class:`~store.parts.StoreParts`. :func:`store.open_store` only chooses which one to call.

- :mod:`~store.opening.file` — :func:`~store.opening.file.open_file_store`: the native file
  journals, a file per large body, a folder of page files per address;
- :mod:`~store.opening.database` — :func:`~store.opening.database.open_database_store`: the
  journals, large messages and page stores in the tables of one database, on one engine;
- :mod:`~store.opening.zero` — :func:`~store.opening.zero.open_zero_store`: zero persistence
  (``persistence-enabled = false``), nothing written;
- :mod:`~store.opening.read_only` — :func:`~store.opening.read_only.open_read_only_parts`: either
  persistent back-end opened to read and change nothing (``open_store(read_only=True)``).

This package sits above the back-ends (``store.file``, ``store.db``) and the contracts they
implement (``store.journal``, ``store.large``, ``store.paging``), so those import nothing above
them (docs/architecture.md#layers). The modules are imported by :func:`store.open_store` when a
store of their kind is opened, not by this ``__init__``: ``import store`` does not load the
database store's modules (SQLAlchemy) for a file store.
"""
