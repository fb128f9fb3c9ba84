"""``store data verify`` and ``store data print`` check every large body they list, on the
file store and the databases (store.data.large_verify, store.data.db_check.verify,
store.data.describe.parts): a body truncated to 100 bytes, deleted, or with one flipped byte
makes verify exit non-zero naming the body, and print never calls it complete (it exits 5
for a damaged one). An intact store verifies clean and prints the body complete.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from store import StoreConfig, open_store
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.schema import StoreSchema, TableNames
from store.large.chunks import CRC
from store.large.database import chunk_name
from store.messaging import Message, StorageManager
from tests.large.support import Case, cli_case
from tests.support.cli import run_store_here
from tests.support.db_backends import DERBY_CLASSPATH, drop_schema

BODY = 2 * (1 << 20) + 5000  # three chunks at the default chunk size


@pytest.fixture(params=["file", "postgresql", "mariadb", "sqlite"])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    which: str = request.param
    made = cli_case(tmp_path, which)
    try:
        yield made
    finally:
        if which != "file":
            drop_schema(made.config)


def _send_large(config: StoreConfig) -> int:
    """One large message on a queue (its body 3 chunks); returns its id."""
    with StorageManager(open_store(config)) as sm:
        sm.load()
        sm.create_address("big")
        sm.create_queue("big", address="big")
        mid = sm.send(Message("big", bytes(range(256)) * (BODY // 256) + b"x" * (BODY % 256)))
    assert mid is not None
    return mid


def _damage(case: Case, mid: int, how: str) -> None:
    """Truncate the body to 100 bytes, delete it, or flip one byte of its chunk 1."""
    if case.name == "file":
        path = os.path.join(case.config.large_messages_directory, f"{mid}.msg")
        if how == "truncated":
            os.truncate(path, 100)
        elif how == "deleted":
            os.remove(path)
        else:
            with open(path, "r+b") as f:
                f.seek(32 + (CRC.size + (1 << 20)) + CRC.size + 777)
                b = f.read(1)
                f.seek(-1, os.SEEK_CUR)
                f.write(bytes([b[0] ^ 0x04]))
        return
    db = case.config.database_store
    assert db is not None
    t = StoreSchema(TableNames.from_config(db)).large_messages
    engine, _target = create_store_engine(db)
    try:
        with engine.begin() as conn:
            first = t.c.filename == chunk_name(mid, 0)
            if how == "truncated":  # the body's bytes cut to 100: chunk 0 short, the rest gone
                data = conn.execute(sa.select(t.c.data).where(first)).scalar_one()
                conn.execute(sa.update(t).where(first).values(data=bytes(data)[:100]))
                for k in (1, 2):
                    conn.execute(sa.delete(t).where(t.c.filename == chunk_name(mid, k)))
            elif how == "deleted":
                conn.execute(sa.delete(t).where(t.c.filename.like(f"{mid}.%")))
            else:
                one = t.c.filename == chunk_name(mid, 1)
                data = bytearray(conn.execute(sa.select(t.c.data).where(one)).scalar_one())
                data[CRC.size + 777] ^= 0x04
                conn.execute(sa.update(t).where(one).values(data=bytes(data)))
    finally:
        dispose_store_engine(engine)


def _cli(*argv: str) -> tuple[int, str]:
    """The command through its entry point in this process: its exit status and output."""
    done = run_store_here(*argv, env={"CLASSPATH": DERBY_CLASSPATH})
    return done.returncode, done.stdout + done.stderr


def _body_line(out: str, mid: int) -> str | None:
    lines = [line for line in out.splitlines() if line.startswith(f"large message {mid}:")]
    assert len(lines) <= 1, lines
    return lines[0] if lines else None


def test_an_intact_body_verifies_clean_and_prints_complete(case: Case) -> None:
    mid = _send_large(case.config)
    code, out = _cli("data", "verify", *case.args)
    assert code == 0, out
    code, out = _cli("data", "print", "--safe", *case.args)
    assert code == 0, out
    assert _body_line(out, mid) is not None
    assert f"{BODY} bytes, complete" in (_body_line(out, mid) or "")


@pytest.mark.parametrize("how", ["truncated", "deleted", "flipped"])
def test_a_damaged_body_fails_verify_by_name_and_never_prints_complete(
    case: Case, how: str
) -> None:
    mid = _send_large(case.config)
    _damage(case, mid, how)
    code, out = _cli("data", "verify", *case.args)
    assert code == 5, out
    named = f"{mid}.msg" if case.name == "file" else f"message {mid}"
    assert named in out, out
    code, out = _cli("data", "print", "--safe", *case.args)
    line = _body_line(out, mid)
    if how == "deleted":
        assert line is None, line
    else:
        assert line is not None and "complete" not in line and "DAMAGED" in line, line
        assert code == 5, out
