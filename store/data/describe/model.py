"""The entries of ``store data print`` (:func:`store.data.describe.describe_store`) and its
options: the dataclasses every module of :mod:`store.data.describe` shares, and
:class:`Decoded`, what a record body says (filled in by :mod:`store.data.describe.records`).

This module imports no other module of the package. The readers (``file``, ``db``, ``parts``)
and the decoders (``records``) import it, and it imports none of them, so the package's
imports run one way (the package docstring lists them).

Thread-safety: every class here is immutable (frozen dataclasses); safe to share.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

__all__ = [
    "Decoded",
    "DescribeOptions",
    "Entry",
    "Journal",
    "JournalFile",
    "LargeMessage",
    "Marker",
    "NodeId",
    "Page",
    "PagedMessage",
    "PagingAddress",
    "Record",
    "Summary",
]


@dataclass(frozen=True, slots=True)
class Decoded:
    """What a record body says: ``name`` (the user record type's name, or ``XID`` for a
    prepare's extra data), its ``fields``, or the ``error`` that stopped the decoding (then
    ``fields`` is empty). Immutable; safe to share."""

    name: str
    fields: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class DescribeOptions:
    """What :func:`describe_store` reads and shows.

    ``bindings`` / ``messages`` (default True): read that journal. ``paging`` /
    ``large_messages`` (default True): list the page stores / the large-message bodies.
    ``safe`` (default False): structure only, no payloads (no bodies, no property values, no
    duplicate-id bytes). ``reclaimed`` (default False): also produce the records the load would
    not return (module docstring). ``max_records``: records produced per journal (default
    None: all; the summary still counts every one). ``max_pages``: pages produced per paging
    address (default None: all). ``force`` (default False): read a store a live process holds.

    Thread-safety: immutable.
    """

    bindings: bool = True
    messages: bool = True
    paging: bool = True
    large_messages: bool = True
    safe: bool = False
    reclaimed: bool = False
    max_records: int | None = None
    max_pages: int | None = None
    force: bool = False


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One thing :func:`describe_store` found; ``kind`` names the subclass."""

    kind: ClassVar[str] = "entry"

    def as_dict(self) -> dict[str, Any]:
        """The entry as a dict (``kind`` first; bytes stay bytes). Raises nothing."""
        return {"kind": self.kind, **asdict(self)}


@dataclass(frozen=True, kw_only=True)
class NodeId(Entry):
    """The store's node id (None: the store has none), and where it was read from."""

    kind: ClassVar[str] = "node_id"
    node_id: str | None
    source: str


@dataclass(frozen=True, kw_only=True)
class Journal(Entry):
    """The start of one journal: ``journal`` is ``bindings`` or ``messages``; ``store`` is
    ``file`` or ``database``; ``where`` its directory (file store) or database and table;
    ``prefix`` the file prefix (None on the database)."""

    kind: ClassVar[str] = "journal"
    journal: str
    store: str
    where: str
    prefix: str | None = None


@dataclass(frozen=True, kw_only=True)
class JournalFile(Entry):
    """One file of a file journal: header status (``ok``, ``zero``, ``bad``), records in
    sequence, end of data, and what follows it (``tail``: ``clean``, ``torn`` or
    ``corrupt``, with ``tail_records`` valid records after the end). ``retired``: a file an
    interrupted compaction retires (the next open removes it)."""

    kind: ClassVar[str] = "file"
    journal: str
    name: str
    file_id: int | None
    size: int
    header: str
    header_error: str | None = None
    records: int | None = None
    end: int | None = None
    tail: str | None = None
    tail_records: int = 0
    stale_bytes: int = 0
    retired: bool = False


@dataclass(frozen=True, kw_only=True)
class Marker(Entry):
    """A file-list marker of a file journal (``text`` says what it lists)."""

    kind: ClassVar[str] = "marker"
    journal: str
    offset: int
    lsn: int
    text: str


@dataclass(frozen=True, kw_only=True)
class Record(Entry):
    """One journal record (a row on the database). ``op`` is the journal operation
    (``ADD``, ``UPDATE_TX``, …); ``user_type`` its user record type and ``user_type_name``
    Artemis's name of it (None where the operation has none); ``body`` the raw body (empty
    when ``safe``; the XID of a prepare); ``decoded`` what the body says. Position: ``file``,
    ``offset`` and ``lsn`` on the file store, ``seq`` on the database. ``reclaimed``: why a
    load would not return it (None: a record in sequence / a row a load reads). ``size`` is
    the record's whole length (file) or its body's (database), ``body_size`` the body's."""

    kind: ClassVar[str] = "record"
    journal: str
    op: str
    id: int
    tx_id: int
    user_type: int | None
    user_type_name: str | None
    size: int
    body_size: int
    body: bytes
    decoded: Decoded | None
    file: str | None = None
    offset: int | None = None
    lsn: int | None = None
    seq: int | None = None
    tx_count: int | None = None
    compact_count: int = 0
    reclaimed: str | None = None


@dataclass(frozen=True, kw_only=True)
class Summary(Entry):
    """The end of one journal. ``records`` every record (row) read in sequence; ``shown``
    those produced (``max_records``); ``by_op`` / ``by_user_type`` counts by journal operation
    and by user record type name; ``reclaimed`` records the load would not return (produced
    only with ``reclaimed``); ``problems`` why a load refuses the journal (empty: it loads);
    ``load`` what a load returns (``records``, ``prepared``, ``failed``; None when it refuses);
    ``notes`` other things an operator should know (leftover files, retired files)."""

    kind: ClassVar[str] = "summary"
    journal: str
    records: int
    shown: int
    files: int | None
    by_op: dict[str, int]
    by_user_type: dict[str, int]
    reclaimed: int = 0
    problems: list[str] = field(default_factory=list)
    load: dict[str, int] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class PagingAddress(Entry):
    """A paging address: its page store (folder or table) and its page numbers; a folder or
    table open refuses is one too, with an ``error`` (its address may then be unknown: "")."""

    kind: ClassVar[str] = "paging_address"
    address: str
    where: str
    pages: list[int]
    #: What open refuses in this page store (a lost address, pages missing or shorter than
    #: its manifest lists: :mod:`store.paging.manifest`), or None.
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class Page(Entry):
    """One page: its messages and bytes; ``error`` when a record of it is damaged (the
    messages before the damage are still produced); a torn tail of the page being written
    is ignored, as a load ignores it."""

    kind: ClassVar[str] = "page"
    address: str
    page: int
    messages: int
    size: int
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class PagedMessage(Entry):
    """One paged message: its page, its index in the page (0-based) and what it says."""

    kind: ClassVar[str] = "paged_message"
    address: str
    page: int
    index: int
    size: int
    decoded: Decoded


@dataclass(frozen=True, kw_only=True)
class LargeMessage(Entry):
    """One body of the large-message store: its message id, size, and whether it is
    complete (an incomplete one is what a writer left; the next open removes it; its size is
    None, as it is recorded only when a body completes); ``error`` when its header or
    descriptor is damaged."""

    kind: ClassVar[str] = "large_message"
    message_id: int | None
    name: str
    size: int | None
    complete: bool
    error: str | None = None
