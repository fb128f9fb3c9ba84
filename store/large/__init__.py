"""Large-message bodies outside the journals (docs/large.md).

``api`` holds the contract (:class:`LargeMessageStore`, :class:`LargeMessageWriter`); each
back-end implements it in its own module:

- ``memory``: zero persistence (bodies in a dict);
- ``files``: the file store, one ``<id>.msg`` file per body in ``large-messages-directory``;
- ``database``: the database store, one row per chunk plus a ``<id>.msg`` descriptor row in
  ``large-message-table-name``;
- ``chunks``: what the two persistent ones share: bodies cut into CRC-32-checked chunks, and
  the seekable reader that verifies each chunk before handing out a byte of it.

Each opener builds one (``Store.large_messages``); it is usable right after ``open_store``.
"""

from store.large.api import LargeMessageStore, LargeMessageWriter

__all__ = ["LargeMessageStore", "LargeMessageWriter"]
