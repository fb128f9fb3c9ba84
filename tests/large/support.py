"""Helpers of the large-message tests: bodies with known bytes, and a look at what a back-end
really stores (files in the directory, rows of the table), which only tests may take.

Thread-safety: the functions are safe to call from several threads (they share nothing).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from store import StoreConfig
from store.large.api import LargeMessageStore
from store.large.chunks import CHUNK_SIZE, CRC
from store.large.database import DatabaseLargeMessages, chunk_name
from store.large.files import FileLargeMessages, frame_offset
from tests.support.backends import unique_prefix
from tests.support.db_backends import new_store_mapping

__all__ = [
    "PIECE",
    "Case",
    "body_bytes",
    "chunk_size_of",
    "cli_case",
    "damage_chunk",
    "pieces",
    "read_all",
    "stored_names",
    "write_body",
]

# An odd piece size, so writes straddle chunk boundaries.
PIECE = 100_003
_BLOCK = os.urandom(4 << 20)  # pieces are slices of it: at most 4 MiB


def body_bytes(message_id: int, size: int) -> bytes:
    """Returns ``size`` bytes that differ per ``message_id`` (whole bodies: small ones only)."""
    return b"".join(pieces(message_id, size))


def pieces(message_id: int, size: int, piece: int = PIECE) -> Iterator[bytes]:
    """Yields the body of ``message_id`` of ``size`` bytes in pieces of ``piece`` bytes
    (memory: one piece); the same call yields the same bytes within a test run."""
    seed = hashlib.sha256(str(message_id).encode()).digest()
    done = 0
    k = 0
    while done < size:
        n = min(piece, size - done)
        start = (k * 7919 + seed[0]) % (len(_BLOCK) - piece)
        head = seed + k.to_bytes(8, "little", signed=False)
        yield head[:n] if n <= len(head) else head + _BLOCK[start : start + n - len(head)]
        done += n
        k += 1


def write_body(lm: LargeMessageStore, message_id: int, size: int, piece: int = PIECE) -> str:
    """Writes the body of ``message_id`` of ``size`` bytes; returns its sha256 hex digest.
    Raises what the store raises."""
    digest = hashlib.sha256()
    with lm.create(message_id) as w:
        for data in pieces(message_id, size, piece):
            digest.update(data)
            assert w.write(data) == len(data)
        assert w.size == size
    return digest.hexdigest()


def read_all(lm: LargeMessageStore, message_id: int, piece: int = 65536) -> str:
    """Reads the body of ``message_id`` in ``piece``-byte reads; returns its sha256 hex."""
    digest = hashlib.sha256()
    with lm.open(message_id) as r:
        while data := r.read(piece):
            digest.update(data)
    return digest.hexdigest()


def chunk_size_of(lm: LargeMessageStore) -> int:
    """The chunk size the store writes new bodies with (the default for zero persistence)."""
    return int(getattr(lm, "chunk_size", CHUNK_SIZE))


def stored_names(lm: LargeMessageStore) -> list[str]:
    """Every file of the large-message directory, or every row filename of the table (a
    database), sorted; [] for zero persistence."""
    if isinstance(lm, FileLargeMessages):
        return sorted(os.listdir(lm.directory))
    if isinstance(lm, DatabaseLargeMessages):
        with lm.engine.connect() as conn:
            rows = conn.execute(sa.select(lm.table.c.filename)).scalars().all()
            conn.rollback()
        return sorted(str(r) for r in rows)
    return []


def damage_chunk(lm: LargeMessageStore, message_id: int, index: int, at: int) -> None:
    """Flips one byte of chunk ``index``'s payload (byte ``at`` of it) in storage."""
    if isinstance(lm, FileLargeMessages):
        path = lm.paths(message_id)[1]
        offset = frame_offset(index, lm.chunk_size) + CRC.size + at
        with open(path, "r+b") as f:
            f.seek(offset)
            old = f.read(1)
            f.seek(offset)
            f.write(bytes([old[0] ^ 0xFF]))
        return
    assert isinstance(lm, DatabaseLargeMessages), "only persistent stores can be damaged"
    table = lm.table
    name = chunk_name(message_id, index)
    with lm.engine.begin() as conn:
        data = bytearray(
            conn.execute(sa.select(table.c.data).where(table.c.filename == name)).scalar_one()
        )
        data[CRC.size + at] ^= 0xFF
        conn.execute(sa.update(table).where(table.c.filename == name).values(data=bytes(data)))


def table_rows(lm: Any) -> int:
    """Rows of a database store's large-message table. Raises AssertionError otherwise."""
    assert isinstance(lm, DatabaseLargeMessages)
    with lm.engine.connect() as conn:
        n = int(conn.execute(sa.select(sa.func.count()).select_from(lm.table)).scalar_one())
        conn.rollback()
    return n


@dataclass
class Case:
    """A store for the command line: its back-end, configuration and the options naming it."""

    name: str
    config: StoreConfig
    args: list[str]


def _file_case(tmp_path: Path) -> Case:
    dirs = {k: tmp_path / k for k in ("journal", "bindings", "paging", "large")}
    path = tmp_path / "store.toml"
    path.write_text(
        "".join(f'{k}-directory = "{d}"\n' for k, d in dirs.items()).replace(
            "large-directory", "large-messages-directory"
        )
        + 'journal-type = "NIO"\n'
    )
    mapping = {
        "journal-directory": str(dirs["journal"]),
        "bindings-directory": str(dirs["bindings"]),
        "paging-directory": str(dirs["paging"]),
        "large-messages-directory": str(dirs["large"]),
        "journal-type": "NIO",
    }
    return Case("file", StoreConfig.from_mapping(mapping), ["--config", str(path)])


def _database_case(tmp_path: Path, which: str) -> Case:
    mapping = new_store_mapping(tmp_path, unique_prefix(), which)
    section = mapping["database-store"]
    args = ["--jdbc-connection-url", section["jdbc-connection-url"]]
    for key, option in (
        ("jdbc-user", "--jdbc-user"),
        ("bindings-table-name", "--jdbc-bindings-table-name"),
        ("message-table-name", "--jdbc-message-table-name"),
        ("large-message-table-name", "--jdbc-large-message-table-name"),
        ("page-store-table-name", "--jdbc-page-store-table-name"),
        ("node-manager-store-table-name", "--jdbc-node-manager-table-name"),
    ):
        if section.get(key) is not None:
            args += [option, str(section[key])]
    return Case(which, StoreConfig.from_mapping(mapping), args)


def cli_case(tmp_path: Path, which: str) -> Case:
    """A new store of back-end ``which`` ("file" or a database) for ``store`` commands."""
    return _file_case(tmp_path) if which == "file" else _database_case(tmp_path, which)
