"""A dead-lettered message through Artemis's XML (``export_xml`` then ``import_xml`` into
another store): its ``_AMQ_ORIG_*`` properties come back exactly, with their types, and the
imported store's load counts it as dead-lettered (issue 42)."""

from __future__ import annotations

from pathlib import Path

from store import StoreConfig, open_store
from store.data.xml.export import export_xml
from store.data.xml.import_ import import_xml
from store.messaging import Message, StorageManager
from store.messaging.policies import ORIG_ADDRESS, ORIG_MESSAGE_ID, ORIG_QUEUE
from tests.support.backends import file_config_mapping


def _config(root: Path) -> StoreConfig:
    mapping = file_config_mapping(root, "NIO")
    mapping["address-settings"] = {
        "orders": {"max-delivery-attempts": 1, "dead-letter-address": "DLA"}
    }
    return StoreConfig.from_mapping(mapping)


def test_the_orig_properties_survive_an_export_and_an_import(tmp_path: Path) -> None:
    source = _config(tmp_path / "a")
    with StorageManager(open_store(source)) as sm:
        sm.load()
        sm.create_address("orders")
        sm.create_queue("orders", address="orders")
        sm.create_address("DLA", routing_types=("MULTICAST",))
        sm.create_queue("dead", address="DLA", routing_type="MULTICAST")
        mid = sm.send(Message("orders", b"poison", properties={"k": "v"}))
        assert [d.message.message_id for d in sm.receive("orders")] == [mid]
        sm.cancel("orders", mid)  # type: ignore[arg-type]
    export_xml(source, tmp_path / "out.xml")
    target = _config(tmp_path / "b")
    import_xml(target, tmp_path / "out.xml")
    with StorageManager(open_store(target)) as sm:
        rec = sm.load()
        assert rec.dead_lettered == {"orders": 1}
        (moved,) = sm.receive("dead")
        assert moved.message.body == b"poison"
        assert moved.message.properties == {
            "k": "v",
            ORIG_ADDRESS: "orders",
            ORIG_QUEUE: "orders",
            ORIG_MESSAGE_ID: mid,
        }
