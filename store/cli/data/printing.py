"""``store data print``: a store's node id, journals (files, records decoded by user record
type), summaries, page stores and large messages, on the file store and the database store.

The command formats the entries of :func:`store.data.describe.describe_store` as it receives
them (a large journal prints as it is read; only the summaries wait for their journal's end).

Text (default): one line per file, marker, record, page and body; a record's decoded body on
the line below it, indented, as ``NAME field=value …`` (or ``NAME: UNDECODABLE: why`` beside
the raw body's hex). In decoded values strings are quoted, bytes are ``0x`` and hex (at most
``--body-bytes`` of them, then ``...(+NB)``), ``None`` is a null.

``--json``: **JSON lines**, one object per entry, in the same order, each with ``kind``
(``node_id``, ``journal``, ``file``, ``marker``, ``record``, ``summary``, ``paging_address``,
``page``, ``paged_message``, ``large_message``, and last ``moved``) and the fields of that entry
(:mod:`store.data.describe`), keys sorted. Bytes (bodies, ``bytes`` property values, XIDs,
duplicate ids) are standard base64 of at most ``--body-bytes`` bytes, like the text
(``--body-bytes 0``: whole); a message's ``property_types`` tells a ``bytes`` property from a
``str`` one. Lines rather than one document, so that a script reads a store of any size as it
is printed (``jq -c 'select(.kind == "record")'``).

Last (unless ``--skip-journal``), the messages the delivery policies moved that still wait,
by original address (:mod:`store.data.moved`: the store loaded read-only and browsed):
``delivery policies: dead-lettered waiting: orders 3; expired waiting: none``; as JSON
``{"kind": "moved", "dead_lettered": {...}, "expired": {...}}`` (``error`` instead when a
live process holds the store, read with ``--force``, or the storage manager's load refuses
it; the exit code is then what the entries made it).

Exit codes: 0, or 5 when a load would refuse a journal (checksum failure, damaged header,
missing file, a row of an unknown kind), a page record is damaged or a large body cannot be
read whole (each is read through); 3 when a live process
holds the store (without ``--force``); 2 for a path or database without a store.

Thread-safety: a command runs once per process; nothing is shared.
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Callable
from typing import Any

from store.cli.data.options import FORCE_READ, add_store_options, store_config
from store.cli.main import EXIT_CORRUPT, EXIT_OK
from store.config import StoreConfig
from store.data.describe import (
    DescribeOptions,
    Entry,
    Journal,
    JournalFile,
    LargeMessage,
    Marker,
    NodeId,
    Page,
    PagedMessage,
    PagingAddress,
    Record,
    Summary,
    describe_store,
)
from store.data.describe.model import Decoded
from store.data.moved import moved_counts
from store.errors import StoreError

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add this module's ``store data`` subcommands to ``sub``. Returns nothing."""
    p = sub.add_parser(
        "print",
        help="print the node id, journal records decoded, pages and large messages",
        description="Print the store's node id; every bindings and message journal record "
        "with its journal operation and its user record type by name, decoded (addresses, "
        "queues, messages with their properties, refs, acks, page cursors, duplicate ids, "
        "id counters; a body that does not decode is shown raw with the error); a summary "
        "per journal (counts per type, what a load returns); every paging address with its "
        "pages and paged messages; every large-message body. The file store also shows its "
        "files, headers, markers and tails. Read-only: works on a read-only file system. "
        "Exits 5 when a load would refuse a journal, naming why; 3 when a live process holds "
        "the store (--force reads it anyway).",
    )
    add_store_options(p)
    p.add_argument("--skip-bindings", action="store_true", help="leave the bindings out")
    p.add_argument("--skip-journal", action="store_true", help="leave the messages out")
    p.add_argument(
        "--safe",
        action="store_true",
        help="structure only: no bodies, no property values, no duplicate-id bytes",
    )
    p.add_argument(
        "--reclaimed",
        action="store_true",
        help="also print records a load would not return but that can still be read "
        "(after the end of data, in reused, free or retired files; rows no load needs)",
    )
    p.add_argument(
        "--max-records", type=int, metavar="N", help="print at most N records per journal"
    )
    p.add_argument(
        "--max-pages", type=int, metavar="N", help="print at most N pages per paging address"
    )
    p.add_argument(
        "--body-bytes",
        type=int,
        default=32,
        metavar="N",
        help="bytes of each body printed, as hex (JSON: base64) (default 32; 0 prints whole "
        "bodies)",
    )
    p.add_argument(
        "--json", action="store_true", help="JSON lines: one object per entry, for scripts"
    )
    p.add_argument("--force", action="store_true", help=FORCE_READ)
    p.set_defaults(func=run_print)


# -- print -------------------------------------------------------------------------------------


def run_print(args: argparse.Namespace) -> int:
    """Print the entries of the store as they are read.

    Returns 0, or 5 when a load would refuse a journal or a page is damaged; raises
    StoreError (ConfigError for a path without a store, StoreLockedError for a held one).
    """
    config = store_config(args, command="store data print")
    options = DescribeOptions(
        bindings=not args.skip_bindings,
        messages=not args.skip_journal,
        safe=args.safe,
        reclaimed=args.reclaimed,
        max_records=args.max_records,
        max_pages=args.max_pages,
        force=args.force,
    )
    entries = describe_store(config, options)
    damaged = False
    text = _TextFormat(args.body_bytes)
    emit: Callable[[Entry], None] = (
        (lambda e: _json_line(e, args.body_bytes)) if args.json else text.emit
    )
    try:
        for entry in entries:
            if isinstance(entry, Summary) and entry.problems:
                damaged = True
            if isinstance(entry, Page | LargeMessage | PagingAddress) and entry.error is not None:
                damaged = True
            emit(entry)
    finally:
        close = getattr(entries, "close", None)
        if close is not None:
            close()
    if not damaged and not args.skip_journal:
        _print_moved(config, args.json)
    return EXIT_CORRUPT if damaged else EXIT_OK


def _print_moved(config: StoreConfig, as_json: bool) -> None:
    """The dead-lettered and expired messages waiting, by original address
    (:mod:`store.data.moved`), after the entries. A store a live process holds (``--force``)
    or one the storage manager's load refuses (a record that does not decode: the entries
    above show it) is not counted, and says why; the exit code stays what the entries made
    it."""
    try:
        counts = moved_counts(config)
    except StoreError as exc:
        _moved_line(as_json, {"error": f"not counted: {exc}"}, f"not counted ({exc})")
        return
    fields: dict[str, object] = {"dead_lettered": counts.dead_lettered, "expired": counts.expired}
    text = "; ".join(
        f"{label} waiting: " + (", ".join(f"{a} {n}" for a, n in found.items()) or "none")
        for label, found in (("dead-lettered", counts.dead_lettered), ("expired", counts.expired))
    )
    _moved_line(as_json, fields, f"{text} (by original address, of {counts.messages} messages)")


def _moved_line(as_json: bool, fields: dict[str, object], text: str) -> None:
    if as_json:
        print(json.dumps({"kind": "moved", **fields}, sort_keys=True))
    else:
        print(f"delivery policies: {text}")


# -- JSON lines --------------------------------------------------------------------------------


def _json_line(entry: Entry, body_bytes: int) -> None:
    print(json.dumps(_jsonable(entry.as_dict(), body_bytes), sort_keys=True))


def _jsonable(value: Any, body_bytes: int) -> Any:
    if isinstance(value, bytes):
        shown = value if body_bytes <= 0 else value[:body_bytes]
        return base64.b64encode(shown).decode("ascii")
    if isinstance(value, dict):
        return {str(k): _jsonable(v, body_bytes) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, body_bytes) for v in value]
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return "NaN"
    return value


# -- text --------------------------------------------------------------------------------------


class _TextFormat:
    """Formats entries as the text lines of the command (module docstring)."""

    def __init__(self, body_bytes: int) -> None:
        self.body_bytes = body_bytes

    def emit(self, entry: Entry) -> None:
        for line in self.lines(entry):
            print(line)

    def lines(self, entry: Entry) -> list[str]:
        if isinstance(entry, NodeId):
            return [f"node id: {entry.node_id or 'none'} ({entry.source})"]
        if isinstance(entry, Journal):
            if entry.prefix is not None:
                return [f"{entry.journal} journal {entry.where} (prefix {entry.prefix})"]
            return [f"{entry.journal} journal {entry.where}"]
        if isinstance(entry, JournalFile):
            return [_file_line(entry)]
        if isinstance(entry, Marker):
            return [f"    marker @{entry.offset} lsn={entry.lsn} {entry.text}"]
        if isinstance(entry, Record):
            return self._record(entry)
        if isinstance(entry, Summary):
            return _summary(entry)
        if isinstance(entry, PagingAddress):
            line = f"paging address {entry.address}: {len(entry.pages)} pages ({entry.where})"
            return [line + (f"; DAMAGED: {entry.error}" if entry.error else "")]
        if isinstance(entry, Page):
            line = f"  page {entry.page}: {entry.messages} messages, {entry.size} bytes"
            return [line + (f"; DAMAGED: {entry.error}" if entry.error else "")]
        if isinstance(entry, PagedMessage):
            head = f"    [{entry.index}] size={entry.size} "
            return [head + self._decoded(entry.decoded)]
        if isinstance(entry, LargeMessage):
            if entry.error is not None:  # never "complete": the body cannot be read whole
                what = f"DAMAGED: {entry.error}"
            elif entry.complete:
                what = "complete"
            else:
                what = "INCOMPLETE (the next open removes it)"
            size = "?" if entry.size is None else str(entry.size)
            return [f"large message {entry.message_id}: {size} bytes, {what} ({entry.name})"]
        return [repr(entry)]  # pragma: no cover - every kind is handled above

    def _record(self, r: Record) -> list[str]:
        user = r.user_type if r.user_type is not None else 0
        if r.seq is not None:
            where = f"seq={r.seq:<8}"
            rest = f"{r.op:<9} id={r.id} user_type={user} tx={r.tx_id} size={r.size}"
        else:
            where = f"@{r.offset:<8}"
            rest = f"{r.op:<9} id={r.id} user_type={user} tx={r.tx_id} lsn={r.lsn} size={r.size}"
        line = f"    {'RECLAIMED ' if r.reclaimed else ''}{where} {rest}"
        if r.tx_count is not None:
            line += f" tx_count={r.tx_count}"
        if r.compact_count:
            line += f" compacted={r.compact_count}"
        if r.body:
            line += f" body={self._hex(r.body)}"
        else:
            line += f" body={r.body_size}B"
        if r.reclaimed:
            line += f" ({r.reclaimed})"
        out = [line]
        if r.decoded is not None:
            out.append("      " + self._decoded(r.decoded))
        return out

    def _decoded(self, d: Decoded) -> str:
        if d.error is not None:
            return f"{d.name}: UNDECODABLE: {d.error}"
        # property_types is for JSON readers: in text a value's spelling says its type.
        parts = [f"{k}={self._value(v)}" for k, v in d.fields.items() if k != "property_types"]
        return " ".join([d.name, *parts])

    def _value(self, v: Any) -> str:
        if isinstance(v, bytes):
            return "0x" + self._hex(v) if v else "0x"
        if isinstance(v, str):
            return json.dumps(v, ensure_ascii=False)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {self._value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list | tuple):
            return "[" + ", ".join(self._value(x) for x in v) + "]"
        return str(v)

    def _hex(self, data: bytes) -> str:
        shown = data if self.body_bytes <= 0 else data[: self.body_bytes]
        more = len(data) - len(shown)
        return shown.hex() + (f"...(+{more}B)" if more else "")


def _file_line(f: JournalFile) -> str:
    line = f"  file {f.name} id {f.file_id if f.file_id is not None else '-'} size {f.size} "
    line += f"header {f.header}"
    if f.header_error is not None:
        line += f" ({f.header_error})"
    if f.retired:
        line += " RETIRED by an interrupted compaction"
    if f.records is None:
        return line
    line += f" records {f.records} end {f.end}"
    if f.tail_records:
        what = "CORRUPT" if f.tail == "corrupt" else "torn tail"
        line += f" {what}: {f.tail_records} valid record(s) after the end"
    return line


def _summary(s: Summary) -> list[str]:
    out = []
    if s.shown < s.records:
        out.append(f"  ... {s.records - s.shown} more records not printed")
    for note in s.notes:
        if note.startswith("file "):
            note += " (the next open removes it)"
        out.append(f"  {note}")
    counts = ", ".join(f"{op} {n}" for op, n in s.by_op.items())
    where = f"{s.files} files" if s.files is not None else "the table"
    head = f"  summary: {s.records} records in {where}" + (f" ({counts})" if counts else "")
    if s.problems:
        out += [f"  DAMAGED: {p}" for p in s.problems]
        out.append(
            f"{head}; a load refuses this journal ({len(s.problems)} problem(s): see "
            "`store data verify`)"
        )
    else:
        load = s.load or {}
        out.append(
            f"{head}; a load returns {load.get('records', 0)} records, "
            f"{load.get('prepared', 0)} prepared and {load.get('failed', 0)} failed transactions"
        )
    if s.by_user_type:
        types = ", ".join(f"{name} {n}" for name, n in s.by_user_type.items())
        out.append(f"  user record types: {types}")
    if s.reclaimed:
        out.append(
            f"  reclaimed: {s.reclaimed} readable records a load would not return "
            "(printed with --reclaimed)"
        )
    return out
