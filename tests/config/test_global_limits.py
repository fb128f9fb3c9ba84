"""``global-max-size`` and ``global-max-messages`` (issue 27): Artemis's names and meaning,
our default (a fixed 64 MiB, see ``StoreConfig.global_max_size``), from TOML, broker.xml and
a mapping."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.config import DEFAULT_GLOBAL_MAX_SIZE, StoreConfig, load_config
from store.errors import ConfigError


def test_defaults_bound_memory_by_size_and_leave_the_message_count_open():
    cfg = StoreConfig()
    assert cfg.global_max_size == DEFAULT_GLOBAL_MAX_SIZE == 64 * 1024 * 1024
    assert cfg.global_max_messages == -1


@pytest.mark.parametrize(
    ("given", "expected"),
    [("512M", 512 * 1024 * 1024), ("1G", 1 << 30), (0, 0), ("-1", DEFAULT_GLOBAL_MAX_SIZE)],
    ids=["512M", "1G", "zero pages everything", "-1 is the default as in Artemis"],
)
def test_global_max_size_is_a_size_and_minus_one_means_the_default(given, expected):
    assert StoreConfig.from_mapping({"global-max-size": given}).global_max_size == expected


def test_global_max_messages_is_read():
    assert StoreConfig.from_mapping({"global-max-messages": "1000"}).global_max_messages == 1000


@pytest.mark.parametrize(
    ("key", "value"),
    [("global-max-size", "-2"), ("global-max-size", "lots"), ("global-max-messages", -5)],
)
def test_bad_global_limit_is_config_error_naming_the_key(key, value):
    with pytest.raises(ConfigError) as info:
        StoreConfig.from_mapping({key: value})
    assert key in str(info.value)


def test_toml_top_level_keys(tmp_path: Path):
    path = tmp_path / "store.toml"
    path.write_text('global-max-size = "100M"\nglobal-max-messages = 5000\n')
    cfg = load_config(path)
    assert (cfg.global_max_size, cfg.global_max_messages) == (100 * 1024 * 1024, 5000)


def test_broker_xml_core_elements(tmp_path: Path):
    path = tmp_path / "broker.xml"
    path.write_text(
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
        "<global-max-size>10M</global-max-size>"
        "<global-max-messages>250</global-max-messages>"
        "</core></configuration>"
    )
    cfg = load_config(path)
    assert (cfg.global_max_size, cfg.global_max_messages) == (10 * 1024 * 1024, 250)


def test_replace_keeps_the_default_rule():
    cfg = StoreConfig().replace(global_max_size=1024)
    assert cfg.global_max_size == 1024
    assert cfg.replace(global_max_size=-1).global_max_size == DEFAULT_GLOBAL_MAX_SIZE


@pytest.mark.parametrize("key", ["global-max-size", "global-max-messages"])
def test_a_global_limit_of_zero_with_a_blocking_address_is_refused(key: str):
    settings = {"orders.#": {"address-full-policy": "BLOCK"}}
    with pytest.raises(ConfigError) as info:
        StoreConfig.from_mapping({key: 0, "address-settings": settings})
    assert key in str(info.value) and "orders.#" in str(info.value.hint)
    # Paging, dropping or failing at once is what 0 means there: accepted.
    settings = {"orders.#": {"address-full-policy": "PAGE"}}
    assert StoreConfig.from_mapping({key: 0, "address-settings": settings})
