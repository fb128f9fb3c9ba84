"""The delivery-policy address settings and their two core keys, from every source: names,
defaults, ranges, merging by match, and what broker.xml gives (store.config.address_keys)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from store.config import StoreConfig, load_config
from store.config.addresses import AddressSettings
from store.errors import ConfigError

XML_HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'

# key: (Artemis's default, a value given as Artemis writes it, what it reads as)
KEYS: dict[str, tuple[object, str, object]] = {
    "dead-letter-address": (None, "DLA", "DLA"),
    "max-delivery-attempts": (10, "3", 3),
    "auto-create-dead-letter-resources": (False, "true", True),
    "dead-letter-queue-prefix": ("DLQ.", "dead.", "dead."),
    "dead-letter-queue-suffix": ("", ".dlq", ".dlq"),
    "expiry-address": (None, "EXP", "EXP"),
    "expiry-delay": (-1, "5000", 5000),
    "min-expiry-delay": (-1, "100", 100),
    "max-expiry-delay": (-1, "9000", 9000),
    "auto-create-expiry-resources": (False, "TRUE", True),
    "expiry-queue-prefix": ("EXP.", "", ""),
    "expiry-queue-suffix": ("", "-x", "-x"),
    "redelivery-delay": (0, "250", 250),
    "redelivery-delay-multiplier": (1.0, "2.5", 2.5),
    "max-redelivery-delay": (0, "60000", 60000),
}


def _field(key: str) -> str:
    return key.replace("-", "_")


def _xml(tmp_path: Path, core: str) -> StoreConfig:
    path = tmp_path / "broker.xml"
    path.write_text(
        f'{XML_HEAD}<configuration xmlns="urn:activemq">'
        f'<core xmlns="urn:activemq:core">{core}</core></configuration>',
        encoding="utf-8",
    )
    return load_config(path)


def test_defaults_are_artemis_s():
    settings = StoreConfig().address_settings_for("orders")
    for key, (default, _, _) in KEYS.items():
        assert getattr(settings, _field(key)) == default, key
    config = StoreConfig()
    assert (config.message_expiry_scan_period, config.max_redelivery_records) == (30000, 10)


@pytest.mark.parametrize("key", sorted(KEYS))
def test_each_key_is_read_from_toml_a_mapping_and_broker_xml(tmp_path, key):
    _, text, expected = KEYS[key]
    toml = tmp_path / "s.toml"
    toml.write_text(f'[address-settings."orders.#"]\n{key} = "{text}"\n', encoding="utf-8")
    xml = _xml(
        tmp_path,
        f'<address-settings><address-setting match="orders.#"><{key}>{text}</{key}>'
        "</address-setting></address-settings>",
    )
    mapping = StoreConfig.from_mapping({"address-settings": {"orders.#": {key: text}}})
    for config in (load_config(toml), xml, mapping):
        assert getattr(config.address_settings_for("orders.eu"), _field(key)) == expected
        # the default elsewhere
        assert getattr(config.address_settings_for("invoices"), _field(key)) == KEYS[key][0]


def test_core_keys_are_read_from_toml_and_broker_xml(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text("message-expiry-scan-period = 500\nmax-redelivery-records = -1\n")
    xml = _xml(
        tmp_path,
        "<message-expiry-scan-period>-1</message-expiry-scan-period>"
        "<max-redelivery-records>0</max-redelivery-records>",
    )
    assert (
        load_config(toml).message_expiry_scan_period,
        load_config(toml).max_redelivery_records,
    ) == (500, -1)
    assert (xml.message_expiry_scan_period, xml.max_redelivery_records) == (-1, 0)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max-delivery-attempts", "-2"),
        ("max-delivery-attempts", "many"),
        ("expiry-delay", "-5"),
        ("min-expiry-delay", "soon"),
        ("redelivery-delay", "-1"),
        ("redelivery-delay-multiplier", "0.5"),
        ("redelivery-delay-multiplier", "fast"),
        ("max-redelivery-delay", "-1"),
        ("auto-create-dead-letter-resources", "yes"),
    ],
)
def test_a_bad_value_names_the_key_and_the_match(key, value):
    with pytest.raises(ConfigError) as info:
        StoreConfig.from_mapping({"address-settings": {"orders.#": {key: value}}})
    assert info.value.key == f'address-settings."orders.#".{key}'
    assert info.value.allowed


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("message-expiry-scan-period", 0),
        ("message-expiry-scan-period", -2),
        ("max-redelivery-records", -3),
    ],
)
def test_a_bad_core_value_names_its_key(key, value):
    with pytest.raises(ConfigError) as info:
        StoreConfig.from_mapping({key: value})
    assert info.value.key == key


def test_max_redelivery_delay_follows_the_merged_delay_unless_given():
    config = StoreConfig.from_mapping(
        {
            "address-settings": {
                "#": {"redelivery-delay": 100},
                "orders.#": {"redelivery-delay": 2000},
                "orders.eu": {"max-redelivery-delay": 5000},
            }
        }
    )
    assert config.address_settings_for("x").max_redelivery_delay == 1000
    assert config.address_settings_for("orders.us").max_redelivery_delay == 20000
    eu = config.address_settings_for("orders.eu")
    assert (eu.redelivery_delay, eu.max_redelivery_delay) == (2000, 5000)


def test_keys_merge_by_match_most_specific_first():
    config = StoreConfig.from_mapping(
        {
            "address-settings": {
                "#": {"dead-letter-address": "DLA", "max-delivery-attempts": 5},
                "orders.#": {"max-delivery-attempts": 2, "expiry-address": "EXP"},
                "orders.eu": {"dead-letter-address": "orders.DLA"},
            }
        }
    )
    eu = config.address_settings_for("orders.eu")
    assert (eu.dead_letter_address, eu.max_delivery_attempts, eu.expiry_address) == (
        "orders.DLA",
        2,
        "EXP",
    )
    other = config.address_settings_for("invoices")
    assert (other.dead_letter_address, other.max_delivery_attempts, other.expiry_address) == (
        "DLA",
        5,
        None,
    )


def test_an_empty_address_element_means_none(tmp_path):
    config = _xml(
        tmp_path,
        '<address-settings><address-setting match="#"><dead-letter-address></dead-letter-address>'
        "<expiry-address> </expiry-address></address-setting></address-settings>",
    )
    settings = config.address_settings_for("orders")
    assert (settings.dead_letter_address, settings.expiry_address) == (None, None)


def test_settings_built_directly_are_checked_too():
    with pytest.raises(ConfigError) as info:
        AddressSettings(max_delivery_attempts=-7)
    assert info.value.key == "max-delivery-attempts"
    assert AddressSettings(redelivery_delay=30).max_redelivery_delay == 300


def test_broker_xml_with_these_keys_loads_and_an_unknown_key_still_warns(tmp_path, caplog):
    keys = "".join(f"<{key}>{text}</{key}>" for key, (_, text, _) in KEYS.items())
    with caplog.at_level(logging.WARNING, logger="store.config.broker_xml"):
        config = _xml(
            tmp_path,
            f'<address-settings><address-setting match="#">{keys}'
            "<dead-letter-adress>X</dead-letter-adress></address-setting></address-settings>",
        )
    settings = config.address_settings_for("orders")
    for key, (_, _, expected) in KEYS.items():
        assert getattr(settings, _field(key)) == expected, key
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "<dead-letter-adress>" in warning and "did you mean <dead-letter-address>?" in warning


def test_an_unknown_key_in_toml_is_an_error_naming_the_closest(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text('[address-settings."#"]\nmax-delivery-atempts = 3\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(toml)
    assert info.value.key == "max-delivery-atempts"
    assert "max-delivery-attempts" in str(info.value)
