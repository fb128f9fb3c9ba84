"""Journals laid out by hand, record by record, for exact damage; shared by the tests of the
offline tools (``store.file.verify``, ``repair``, ``survey``, ``history``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from store.file import format as fmt
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.journal.api import LoadResult, RecordType

ADD = RecordType.ADD
SIZE = 4096
A, B, C = 65536, 131072, 196608


class Builder:
    """Journal files laid out by hand, record by record (lsns run across files)."""

    def __init__(self, prefix: str = "data", kind: int = fmt.KIND_MESSAGES) -> None:
        self.prefix = prefix
        self.kind = kind
        # (id in the name, id in the header, bytes, record offsets)
        self.files: list[tuple[int, int, bytearray, list[int]]] = []
        self.pos = 0
        self.lsn = 0

    def file(self, file_id: int, *, header_id: int | None = None) -> Builder:
        data = bytearray(SIZE)
        header_id = file_id if header_id is None else header_id
        data[: fmt.HEADER_SIZE] = fmt.encode_header(header_id, self.kind, created_ns=1)
        self.files.append((file_id, header_id, data, []))
        self.pos = fmt.DATA_START
        return self

    def rec(
        self,
        rtype: RecordType = ADD,
        *,
        id: int = 0,
        tx_id: int = 0,
        body: bytes = b"body",
        tx_count: int = 0,
        durable: int | None = None,
        cc: int = 0,
        fid: int | None = None,
    ) -> Builder:
        _name_id, file_id, data, offsets = self.files[-1]
        self.lsn += 1
        raw = fmt.encode_record(
            int(rtype),
            file_id=file_id if fid is None else fid,
            lsn=self.lsn,
            durable_lsn=self.lsn - 1 if durable is None else durable,
            id=id or self.lsn,
            tx_id=tx_id,
            user_type=7,
            tx_count=tx_count,
            body=body,
            compact_count=cc,
        )
        data[self.pos : self.pos + len(raw)] = raw
        offsets.append(self.pos)
        self.pos += len(raw)
        return self

    def adds(self, n: int, *, durable: int | None = None) -> Builder:
        for _ in range(n):
            self.rec(durable=durable)
        return self

    def offset(self, file_index: int, record_index: int) -> int:
        return self.files[file_index][3][record_index]

    def write(self, directory: Path) -> list[Path]:
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for file_id, _h, data, _o in self.files:
            path = directory / f"{self.prefix}-{file_id:020d}.jrn"
            path.write_bytes(bytes(data))
            paths.append(path)
        return paths


def flip(path: Path, offset: int) -> None:
    """Damage one byte of ``path`` (as a bad sector or a torn write would)."""
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def snapshot(directory: Path) -> dict[str, str]:
    """Every path under ``directory`` with a digest of its bytes (directories: "dir")."""
    out = {}
    for p in sorted(directory.rglob("*")):
        rel = str(p.relative_to(directory))
        out[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def load(directory: Path, *, prefix: str = "data") -> LoadResult:
    opts = FileJournalOptions(directory=str(directory), prefix=prefix, file_size=SIZE)
    journal = FileJournal(opts)
    try:
        return journal.load()
    finally:
        journal.close()


def ids(result: LoadResult) -> list[int]:
    return [r.id for r in result.records]


# Three shapes of damage, all built by hand. File A: lsn 1..5; file B: lsn 6, 7 synced, then a
# batch 8..10 appended after lsn 7 was durable (durable_lsn 7).


def two_files() -> Builder:
    b = Builder().file(A).adds(5).file(B).adds(2)
    return b.rec(durable=7).rec(durable=7).rec(durable=7)
