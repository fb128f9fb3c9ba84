"""``import_xml`` with ``transactional=True`` (store.data.xml.import_) when the import pass fails
part-way, after it created the file's addresses and queues and sent some of its messages in
the one transaction: the store keeps nothing of the import — not a message, nor an address or
queue it created — and keeps what it held before (a reused address and queue, their messages).

The check pass reads the whole file first, so what fails in the second pass is the store or a
file changed between the passes; one test for each, on the file store, SQLite, PostgreSQL and
MariaDB.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store import AddressFullError, StoreConfig, open_store
from store.data.xml.import_ import import_xml
from store.data.xml.reader import XmlFormatError
from store.db.migrate import drop_schema
from store.messaging import Message, StorageManager
from tests.support.backends import file_config_mapping, unique_prefix
from tests.support.db_backends import new_store_mapping

#: ``full`` refuses a message once it holds 2 (FAIL policy): the store's own failure.
SETTINGS = {"address-settings": {"full": {"max-size-messages": 2, "address-full-policy": "FAIL"}}}

HEAD = (
    '<?xml version="1.0"?>\n<activemq-journal><bindings>\n'
    '<address-binding routing-types="ANYCAST" name="new" id="1"/>\n'
    '<address-binding routing-types="ANYCAST,MULTICAST" name="other" id="2"/>\n'
    '<address-binding routing-types="ANYCAST" name="full" id="3"/>\n'
    '<queue-binding address="new" filter-string="" name="new.q" id="4" routing-type="ANYCAST"/>\n'
    '<queue-binding address="other" filter-string="" name="other.q" id="5"'
    ' routing-type="MULTICAST"/>\n'
    '<queue-binding address="full" filter-string="" name="full.q" id="6" routing-type="ANYCAST"/>\n'
    "</bindings><messages>\n"
)
TAIL = "</messages></activemq-journal>\n"


def _message(number: int, queue: str, *, end: str = "</message>") -> str:
    return (
        f'<message id="{number}" priority="4" expiration="0" timestamp="{number + 1}"'
        f' type="default"><properties/><queues><queue name="{queue}"/></queues>'
        f"<body><![CDATA[bmV3]]></body>{end}\n"
    )


@pytest.fixture(params=["file", "sqlite", "postgresql", "mariadb"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreConfig]:
    """A store that does not exist yet (the import creates it), with :data:`SETTINGS`."""
    if request.param == "file":
        yield StoreConfig.from_mapping({**file_config_mapping(tmp_path, "NIO"), **SETTINGS})
        return
    mapping = new_store_mapping(tmp_path, unique_prefix(), request.param)
    made = StoreConfig.from_mapping({**mapping, **SETTINGS})
    try:
        yield made
    finally:
        drop_schema(made)


def _contents(config: StoreConfig) -> tuple[list[str], list[str], list[tuple[str, bytes]]]:
    """The store's addresses and queues by name, and every message (queue, body) it holds."""
    with StorageManager(open_store(config)) as sm:
        sm.load()
        messages: list[tuple[str, bytes]] = []
        for message, queues in sm.browse():
            with message.open_body() as body:
                data = body.read()
            messages.extend((queue, data) for queue in queues)
        return (
            sorted(a.name for a in sm.addresses()),
            sorted(q.name for q in sm.queues()),
            sorted(messages),
        )


def _prefill_full_address(config: StoreConfig) -> None:
    """Address ``full`` with its queue, already holding the 2 messages it accepts."""
    with StorageManager(open_store(config)) as sm:
        sm.load()
        sm.create_address("full", routing_types=("ANYCAST",))
        sm.create_queue("full.q", address="full")
        for i in range(2):
            sm.send(Message("full", f"old-{i}".encode()))


def test_a_transactional_import_the_store_refuses_part_way_keeps_nothing_it_created(
    config: StoreConfig, tmp_path: Path
) -> None:
    _prefill_full_address(config)
    before = _contents(config)
    assert before == (["full"], ["full.q"], [("full.q", b"old-0"), ("full.q", b"old-1")])
    path = tmp_path / "refused.xml"
    # messages for the new addresses first, then one the full address refuses (FAIL)
    messages = [_message(i, "new.q" if i % 2 else "other.q") for i in range(5)]
    path.write_text(HEAD + "".join(messages) + _message(9, "full.q") + TAIL)

    # commit_interval=1: transactional sends everything in one transaction all the same
    with pytest.raises(AddressFullError, match="'full' is full"):
        import_xml(config, path, transactional=True, commit_interval=1)

    # the addresses and queues it created are gone, the reused ones and their messages stay
    assert _contents(config) == before


def test_a_transactional_import_of_a_file_that_changed_between_the_passes_keeps_nothing(
    config: StoreConfig, tmp_path: Path
) -> None:
    path = tmp_path / "changed.xml"
    good = [_message(i, "new.q" if i % 2 else "other.q") for i in range(6)]
    path.write_text(HEAD + "".join(good) + TAIL)
    # Once the check pass has passed and the store is loaded, the file loses its last
    # message's end tag: the import pass has created the bindings and sent five messages in
    # its transaction when the reader refuses the sixth.
    broken = HEAD + "".join(good[:5]) + _message(5, "new.q", end="</mesage>") + TAIL
    opened: list[int] = []

    def change_the_file(messages: int) -> None:
        opened.append(messages)
        path.write_text(broken)

    with pytest.raises(XmlFormatError, match="mismatched tag"):
        import_xml(config, path, transactional=True, commit_interval=1, on_open=change_the_file)

    assert opened == [6]
    assert _contents(config) == ([], [], [])
