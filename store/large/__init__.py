"""Large-message bodies outside the journals (DESIGN §7.1).

``api`` holds the contract (:class:`LargeMessageStore`, :class:`LargeMessageWriter`); each
back-end implements it in its own module: ``memory`` (zero persistence), and the file and
database stores' own.
"""

from store.large.api import LargeMessageStore, LargeMessageWriter

__all__ = ["LargeMessageStore", "LargeMessageWriter"]
