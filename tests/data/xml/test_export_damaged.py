"""``store data exp`` of a damaged store (store.data.xml.export), the file store and the
database back-ends: a store with a large message whose body was deleted and a paged message
whose page record has a flipped byte. Without ``skip_damaged`` the export fails naming the
body (LostDataError) and writes nothing; with it, every other message is exported (inline,
large and paged, in id order) and the two are listed in ``skipped``, the body by its file or
row name and the page record by its page and offset; the CLI exits 1 and prints each."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.data.xml.export import export_xml
from store.errors import LostDataError
from store.messaging.manager import StorageManager
from store.messaging.values import Message
from store.paging.files import FilePageBackend
from store.paging.format import FRAMING
from store.paging.repair import page_backend
from store.store import Store
from tests.support.backends import (
    StoreFactory,
    backend_by_name,
    file_config_mapping,
    unique_prefix,
)
from tests.support.cli import run_store_here
from tests.support.db_backends import new_store_mapping

LIMIT = 1024
BIG = bytes(range(256)) * 8  # 2048 bytes: a large message


@pytest.fixture(params=["file-nio", "sqlite", "postgresql"])
def factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    made = StoreFactory(backend_by_name(request.param), tmp_path, unique_prefix())
    made.config = made.config.replace(
        min_large_message_size=LIMIT,
        address_settings={"paged": {"max_size_messages": 1, "address_full_policy": "PAGE"}},
    )
    try:
        yield made
    finally:
        made.teardown()


def _damaged_store(factory: StoreFactory) -> tuple[list[int], int, int]:
    """Returns (every message id sent, the large one whose body is deleted, the paged one
    whose record is flipped)."""
    store = factory.open()
    assert isinstance(store, Store)
    sm = StorageManager(store)
    sm.load()
    for address in ("orders", "paged"):
        sm.create_address(address)
        sm.create_queue(address, address=address)
    ids = [sm.send(Message("orders", b"small")), sm.send(Message("orders", BIG))]
    ids.append(sm.send(Message("orders", BIG)))  # its body goes
    ids += [sm.send(Message("paged", b"p%d" % i + b"." * 100)) for i in range(4)]
    sm.close()
    store = factory.open()
    assert isinstance(store, Store)
    store.large_messages.delete(ids[2])  # type: ignore[arg-type]
    factory.close()
    with page_backend(factory.config) as backend:  # a byte of the 2nd paged record's body
        (locator,) = backend.survey().stores.values()
        data = backend.read_bytes(locator, 1)
        assert data is not None
        at = FRAMING + int.from_bytes(data[1:5], "big") + 60
        flipped = bytes([data[at] ^ 0xFF])
        if isinstance(backend, FilePageBackend):
            with open(backend.page_path(locator, 1)[0], "r+b") as f:
                f.seek(at)
                f.write(flipped)
        else:
            backend.overwrite(locator, 1, at, flipped)
    sent = [i for i in ids if i is not None]
    return sent, sent[2], sent[5]  # the first paged message is in memory, then page 1


def test_export_fails_on_damage_or_skips_it_when_asked(factory: StoreFactory) -> None:
    sent, lost_body, flipped = _damaged_store(factory)
    with pytest.raises(LostDataError) as refused:
        export_xml(factory.config, io.BytesIO())
    assert str(lost_body) in refused.value.path

    out = io.BytesIO()
    result = export_xml(factory.config, out, skip_damaged=True)
    exported = [int(m) for m in re.findall(rb'<message id="(\d+)"', out.getvalue())]
    assert exported == [m for m in sent if m not in (lost_body, flipped)]
    assert result.messages == len(exported) and result.large_messages == 1
    body, record = result.skipped
    assert f"large message {lost_body}" in body and "left out" in body
    assert "damaged page record" in record and "at offset" in record


def test_the_cli_lists_what_it_skipped_and_exits_1(factory: StoreFactory, tmp_path: Path) -> None:
    _sent, lost_body, _flipped = _damaged_store(factory)
    if factory.spec.name.startswith("file"):
        mapping = file_config_mapping(tmp_path, "NIO")
    else:
        mapping = new_store_mapping(tmp_path, factory.prefix, factory.spec.name)
    config = tmp_path / "store.toml"
    config.write_text(_toml(mapping))
    options = ["--config", str(config)]
    out = tmp_path / "export.xml"
    failed = run_store_here("data", "exp", *options, "--output", str(out))
    assert failed.returncode == 5 and not out.exists(), failed.stderr
    done = run_store_here("data", "exp", *options, "--output", str(out), "--skip-damaged")
    assert done.returncode == 1, done.stderr
    skipped = [line for line in done.stderr.splitlines() if line.startswith("skipped: ")]
    assert len(skipped) == 2 and f"large message {lost_body}" in skipped[0]
    assert out.exists()


def _toml(mapping: dict[str, object]) -> str:
    """``mapping`` (values: strings, numbers, one level of tables) as TOML."""

    def line(k: str, v: object) -> str:
        return f'{k} = "{v}"\n' if isinstance(v, str) else f"{k} = {v!r}\n"

    top = [line(k, v) for k, v in mapping.items() if not isinstance(v, dict)]
    for name, table in mapping.items():
        if isinstance(table, dict):
            top.append(f"[{name}]\n")
            top += [line(k, v) for k, v in table.items()]
    return "".join(top)
