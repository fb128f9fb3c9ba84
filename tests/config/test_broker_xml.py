"""Reading an Artemis broker.xml (store.config.broker_xml through store.config.load_config)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from store.config import DatabaseStoreConfig, RetentionConfig, StoreConfig, load_config
from store.config.addresses import ADDRESS_SETTING_KEYS, AddressSettings
from store.config.artemis_elements import ADDRESS_SETTING_ELEMENTS
from store.errors import ConfigError

TESTDATA = Path(__file__).parent.parent / "testdata" / "config"
PG = "jdbc:postgresql://127.0.0.1:5432/test"
XML_HEAD = '<?xml version="1.0"?>\n'
MiB = 1024**2


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def xml_core(tmp_path: Path, core: str, *, name: str = "broker.xml") -> StoreConfig:
    doc = (
        f'{XML_HEAD}<configuration xmlns="urn:activemq">'
        f'<core xmlns="urn:activemq:core">{core}</core></configuration>'
    )
    return load_config(write(tmp_path, name, doc))


def test_realistic_broker_xml_reads_only_the_persistence_settings():
    cfg = load_config(TESTDATA / "broker-jdbc.xml")
    base = str(TESTDATA)
    expected = StoreConfig(
        bindings_directory=f"{base}/data/bindings",
        journal_directory=f"{base}/data/journal",
        large_messages_directory=f"{base}/data/large-messages",
        paging_directory=f"{base}/data/paging",
        journal_type="NIO",
        journal_pool_files=10,
        journal_buffer_timeout=40000,
        journal_max_io=1,
        page_sync_timeout=40000,
        global_max_size=100 * MiB,  # its <global-max-size>100Mb</global-max-size>
        address_settings={
            "activemq.management#": {
                "dead_letter_address": "DLQ",
                "expiry_address": "ExpiryQueue",
                "redelivery_delay": 0,
                "max_size_bytes": -1,
                "address_full_policy": "PAGE",
            },
            "#": {
                "dead_letter_address": "DLQ",
                "expiry_address": "ExpiryQueue",
                "redelivery_delay": 0,
                "max_size_bytes": -1,
                "max_size_messages": -1,
                "page_size_bytes": 10 * MiB,
                "max_read_page_bytes": 20 * MiB,
                "address_full_policy": "PAGE",
            },
        },
        database_store=DatabaseStoreConfig(
            jdbc_connection_url="jdbc:postgresql://db.example.com:5432/artemis",
            jdbc_driver_class_name="org.postgresql.Driver",
            jdbc_user="artemis-db-user",
            jdbc_password="s3cr3t!pass",
            data_source_properties={
                "maxTotal": -1,
                "poolPreparedStatements": True,
                "applicationName": "artemis-primary",
                "password": "pool-secret",
            },
            masked_properties=frozenset({"password"}),
        ),
        ha_role="primary",  # its <ha-policy><shared-store><primary/>
    )
    assert cfg == expected
    # Address settings hold page-size-bytes 10M; the database page size stays its own 100K.
    assert cfg.database_store is not None and cfg.database_store.jdbc_max_page_size_bytes == 102400


def test_file_store_broker_xml_with_retention_directory_element():
    cfg = load_config(TESTDATA / "broker-file.xml")
    base = str(TESTDATA)
    assert cfg == StoreConfig(
        bindings_directory="/var/lib/artemis/bindings",
        journal_directory=f"{base}/journal",
        paging_directory=f"{base}/paging",
        large_messages_directory=f"{base}/large",
        node_manager_lock_directory="/mnt/shared/lock",
        create_bindings_dir=False,
        create_journal_dir=False,
        journal_type="MAPPED",
        journal_file_size=1048576,
        journal_min_files=4,
        journal_buffer_size=102400,
        journal_sync_non_transactional=False,
        journal_datasync=False,
        journal_compact_min_files=0,
        journal_compact_percentage=50,
        journal_file_open_timeout=10,
        journal_max_attic_files=3,
        journal_lock_acquisition_timeout=30000,
        journal_retention=RetentionConfig(
            directory=f"{base}/history", period=7, unit="DAYS", storage_limit=10 * 1024**3
        ),
        address_settings={"#": {"page_size_bytes": MiB, "max_size_bytes": 10 * MiB}},
    )


@pytest.mark.parametrize(
    "element",
    [
        '<journal-retention directory="hist" period="2" unit="HOURS" storage-limit="1G"/>',
        '<journal-retention-directory period="2" unit="HOURS" storage-limit="1G">hist'
        "</journal-retention-directory>",
    ],
    ids=["journal-retention", "journal-retention-directory"],
)
def test_both_xml_retention_spellings_read_the_same(tmp_path, element):
    cfg = xml_core(tmp_path, element)
    assert cfg.journal_retention == RetentionConfig(
        directory=str(tmp_path / "hist"), period=2, unit="HOURS", storage_limit=1024**3
    )


def test_both_retention_spellings_at_once_are_refused(tmp_path):
    with pytest.raises(ConfigError) as info:
        xml_core(
            tmp_path,
            '<journal-retention directory="a"/><journal-retention-directory>b'
            "</journal-retention-directory>",
        )
    assert info.value.key == "journal-retention"


@pytest.mark.parametrize(
    "doc",
    [
        '<configuration xmlns="urn:activemq">'
        '<core xmlns="urn:activemq:core">{}</core></configuration>',
        '<configuration xmlns="urn:activemq"><core>{}</core></configuration>',
        "<configuration><core>{}</core></configuration>",
        '<core xmlns="urn:activemq:core">{}</core>',
        "<core>{}</core>",
        '<a:configuration xmlns:a="urn:activemq"><c:core xmlns:c="urn:activemq:core">{}</c:core>'
        "</a:configuration>",
    ],
    ids=[
        "activemq-and-core",
        "inherited-activemq",
        "no-namespace",
        "core-root",
        "bare-core-root",
        "prefixed",
    ],
)
def test_xml_namespaces_accepted(tmp_path, doc):
    body = (
        "<journal-type>NIO</journal-type><store><database-store>"
        f"<jdbc-connection-url>{PG}</jdbc-connection-url></database-store></store>"
    )
    cfg = load_config(write(tmp_path, "b.xml", XML_HEAD + doc.format(body)))
    assert cfg.journal_type == "NIO"
    assert cfg.database_store is not None and cfg.database_store.jdbc_connection_url == PG


def test_elements_of_foreign_namespaces_are_ignored(tmp_path):
    cfg = xml_core(
        tmp_path,
        '<x:journal-type xmlns:x="urn:example">MAPPED</x:journal-type>'
        "<journal-type>NIO</journal-type>",
    )
    assert cfg.journal_type == "NIO"


@pytest.mark.parametrize(
    "doc",
    [
        '<configuration xmlns="urn:example"><core/></configuration>',
        "<configuration><other/></configuration>",
        "<configuration><core/><core/></configuration>",
        "<broker><core/></broker>",
    ],
    ids=["foreign-root", "no-core", "two-cores", "other-root"],
)
def test_document_without_one_artemis_core_is_refused(tmp_path, doc):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "b.xml", XML_HEAD + doc))
    assert info.value.key == "config file"


@pytest.mark.parametrize(
    ("core", "key"),
    [
        ("<journal-type>NIO</journal-type><journal-type>NIO</journal-type>", "journal-type"),
        ("<journal-directory>${data.dir}/journal</journal-directory>", "journal-directory"),
        ("<journal-file-size>10X</journal-file-size>", "journal-file-size"),
        (
            "<store><database-store><jdbc-pasword>x</jdbc-pasword></database-store></store>",
            "jdbc-pasword",
        ),
        (
            f"<store><database-store><jdbc-connection-url>{PG}</jdbc-connection-url>"
            '<data-source-properties><data-source-property key="k"/></data-source-properties>'
            "</database-store></store>",
            "data-source-properties",
        ),
        (
            '<journal-retention-directory directory="x">y</journal-retention-directory>',
            "journal-retention.directory",
        ),
        ('<journal-retention directory="x" perod="1"/>', "perod"),
    ],
    ids=[
        "repeated",
        "system-property",
        "bad-size",
        "unknown-database-key",
        "property-no-value",
        "directory-twice",
        "unknown-retention-attribute",
    ],
)
def test_bad_persistence_settings_in_xml_name_the_key(tmp_path, core, key):
    with pytest.raises(ConfigError) as info:
        xml_core(tmp_path, core)
    assert info.value.key == key


def test_unrelated_xml_elements_are_not_validated(tmp_path):
    cfg = xml_core(
        tmp_path,
        "<message-expiry-thread-priority>not a priority</message-expiry-thread-priority>"
        "<name>${name}</name>"
        "<journal-device-block-size>4096</journal-device-block-size>",
    )
    assert cfg == StoreConfig.from_mapping({}, base_dir=tmp_path)


def _xml_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "store.config.broker_xml" and r.levelno >= logging.WARNING
    ]


def test_misspelled_core_element_is_warned_with_the_closest_key(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="store.config.broker_xml"):
        cfg = xml_core(tmp_path, "<journal-file-sise>1M</journal-file-sise>")
    assert cfg.journal_file_size == StoreConfig().journal_file_size  # still ignored
    [warning] = _xml_warnings(caplog)
    assert "<journal-file-sise>" in warning
    assert "did you mean <journal-file-size>?" in warning


def test_unknown_core_element_without_a_close_key_is_still_warned(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="store.config.broker_xml"):
        xml_core(tmp_path, "<zzz-not-a-setting>1</zzz-not-a-setting>")
    [warning] = _xml_warnings(caplog)
    assert "<zzz-not-a-setting>" in warning and "did you mean" not in warning


@pytest.mark.parametrize(
    "element",
    [
        "<cluster-user>admin</cluster-user>",
        "<acceptors><acceptor name='a'>tcp://0.0.0.0:61616</acceptor></acceptors>",
        "<security-settings><security-setting match='#'/></security-settings>",
        "<address-settings><address-setting match='#'/></address-settings>",
        "<journal-device-block-size>4096</journal-device-block-size>",
        "<name>broker</name>",
    ],
)
def test_artemis_elements_we_do_not_read_are_not_warned(tmp_path, caplog, element):
    with caplog.at_level(logging.DEBUG, logger="store.config.broker_xml"):
        xml_core(tmp_path, element)
    assert _xml_warnings(caplog) == []


def test_misspelled_element_in_a_foreign_namespace_stays_silent(tmp_path, caplog):
    with caplog.at_level(logging.DEBUG, logger="store.config.broker_xml"):
        xml_core(tmp_path, '<x:journal-file-sise xmlns:x="urn:example">1</x:journal-file-sise>')
    assert _xml_warnings(caplog) == []


@pytest.mark.parametrize(
    "name", ["broker-jdbc.xml", "broker-file.xml", "broker-artemis-create.xml"]
)
def test_realistic_broker_xml_files_load_without_warnings(caplog, name):
    with caplog.at_level(logging.DEBUG):
        load_config(TESTDATA / name)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_file_store_element_and_disabled_persistence(tmp_path):
    cfg = xml_core(
        tmp_path, "<persistence-enabled>false</persistence-enabled><store><file-store/></store>"
    )
    assert cfg.database_store is None and cfg.store_type == "none"


def test_data_source_class_name_is_accepted_and_ignored(tmp_path):
    cfg = xml_core(
        tmp_path,
        f"<store><database-store><jdbc-connection-url>{PG}</jdbc-connection-url>"
        "<data-source-class-name>com.zaxxer.hikari.HikariDataSource</data-source-class-name>"
        "</database-store></store>",
    )
    assert cfg.database_store == DatabaseStoreConfig(jdbc_connection_url=PG)


def test_xinclude_of_a_local_fragment_is_followed(tmp_path):
    write(
        tmp_path,
        "store.xml",
        f'<store xmlns="urn:activemq:core"><database-store><jdbc-connection-url>{PG}'
        "</jdbc-connection-url></database-store></store>",
    )
    cfg = xml_core(
        tmp_path, '<xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="store.xml"/>'
    )
    assert cfg.store_type == "database"


@pytest.mark.parametrize(
    "href",
    ["http://example.invalid/store.xml", "missing.xml", "broker.xml"],
    ids=["url", "missing", "includes-itself"],
)
def test_xinclude_that_cannot_be_followed_safely_is_refused(tmp_path, href):
    with pytest.raises(ConfigError) as info:
        xml_core(
            tmp_path, f'<xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="{href}"/>'
        )
    assert info.value.key == "xi:include"


HOSTILE = {
    "billion-laughs": '<!DOCTYPE configuration [<!ENTITY lol "lol">'
    '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
    '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
    "<configuration><core><journal-directory>&lol3;</journal-directory></core></configuration>",
    "external-entity": '<!DOCTYPE configuration [<!ENTITY xxe SYSTEM "file://{secret}">]>'
    "<configuration><core><journal-directory>&xxe;</journal-directory></core></configuration>",
    "parameter-entity": '<!DOCTYPE configuration [<!ENTITY % p SYSTEM "file://{secret}"> %p;]>'
    "<configuration><core/></configuration>",
    "external-dtd": '<!DOCTYPE configuration SYSTEM "http://example.invalid/a.dtd">'
    "<configuration><core/></configuration>",
    "not-well-formed": "<configuration><core></configuration>",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_or_broken_xml_is_config_error(tmp_path, name):
    secret = write(tmp_path, "secret.txt", "TOP-SECRET-CONTENT")
    path = write(tmp_path, "evil.xml", XML_HEAD + HOSTILE[name].replace("{secret}", str(secret)))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == "config file"
    assert "TOP-SECRET-CONTENT" not in str(info.value) and "lollol" not in str(info.value)


def test_embedded_database_path_in_broker_xml_follows_the_files_folder(tmp_path, monkeypatch):
    """A relative embedded Derby (or SQLite) path in broker.xml's jdbc-connection-url is
    resolved against the folder of broker.xml, not the working directory."""
    etc = tmp_path / "etc"
    etc.mkdir()
    monkeypatch.chdir(tmp_path)
    cfg = xml_core(
        etc,
        "<store><database-store>"
        "<jdbc-connection-url>jdbc:derby:../data/derby;create=true</jdbc-connection-url>"
        "</database-store></store>",
    )
    assert cfg.database_store is not None
    assert cfg.database_store.jdbc_connection_url == f"jdbc:derby:{tmp_path}/data/derby;create=true"
    cfg = xml_core(
        etc,
        "<store><database-store>"
        "<jdbc-connection-url>jdbc:sqlite:store.db</jdbc-connection-url>"
        "</database-store></store>",
    )
    assert cfg.database_store is not None
    assert cfg.database_store.jdbc_connection_url == f"jdbc:sqlite:{etc}/store.db"


# --------------------------------------------------------------------------- address settings


def test_broker_xml_written_by_artemis_create_loads():
    """etc/broker.xml of "artemis create" (plus an operator's edits) loads, keeps its address
    settings' keys that are ours and skips the many that are not."""
    cfg = load_config(TESTDATA / "broker-artemis-create.xml")
    assert (cfg.journal_type, cfg.journal_pool_files, cfg.journal_buffer_timeout) == (
        "NIO",
        10,
        80000,
    )
    assert cfg.page_sync_timeout == 80000
    assert cfg.max_redelivery_records == 1
    dla = {"dead_letter_address": "DLQ", "expiry_address": "ExpiryQueue", "redelivery_delay": 0}
    assert cfg.address_settings == {
        "activemq.management#": {
            **dla,
            "max_size_bytes": -1,
            "address_full_policy": "PAGE",
        },
        "#": {
            **dla,
            "address_full_policy": "PAGE",
            "page_size_bytes": 10 * MiB,
            "max_size_bytes": -1,
            "max_size_messages": -1,
            "max_read_page_bytes": 20 * MiB,
        },
        "orders.#": {
            "dead_letter_address": "orders.DLQ",
            "max_delivery_attempts": 5,
            "max_size_bytes": 10 * MiB,
            "page_size_bytes": MiB,
            "address_full_policy": "BLOCK",
        },
    }
    defaults = AddressSettings(
        max_read_page_bytes=20 * MiB, dead_letter_address="DLQ", expiry_address="ExpiryQueue"
    )
    assert cfg.address_settings_for("activemq.management.x") == defaults
    assert cfg.address_settings_for("DLQ") == defaults
    # "#" gives max-read-page-bytes 20M itself, so orders' 1M pages do not derive 2M.
    orders = AddressSettings(
        max_size_bytes=10 * MiB,
        page_size_bytes=MiB,
        address_full_policy="BLOCK",
        max_read_page_bytes=20 * MiB,
        dead_letter_address="orders.DLQ",
        max_delivery_attempts=5,
        expiry_address="ExpiryQueue",
    )
    assert cfg.address_settings_for("orders") == orders
    assert cfg.address_settings_for("orders.eu.de") == orders
    assert cfg.address_settings_for("ordersx") == defaults


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("<max-size-byte>3K</max-size-byte>", "max-size-bytes"),
        ("<adress-full-policy>FAIL</adress-full-policy>", "address-full-policy"),
        ("<page-size-byte>1M</page-size-byte>", "page-size-bytes"),
        ("<dead-leter-address>DLA</dead-leter-address>", "dead-letter-address"),
    ],
)
def test_misspelled_address_setting_is_warned_with_the_match_and_closest_key(
    tmp_path, caplog, given, meant
):
    with caplog.at_level(logging.WARNING, logger="store.config.broker_xml"):
        cfg = xml_core(
            tmp_path,
            f'<address-settings><address-setting match="orders.#">{given}'
            "</address-setting></address-settings>",
        )
    assert cfg.address_settings == {"orders.#": {}}  # still ignored
    [warning] = _xml_warnings(caplog)
    typo = given[1 : given.index(">")]
    assert f"<{typo}>" in warning and '"orders.#"' in warning
    assert f"did you mean <{meant}>?" in warning


def test_unknown_address_setting_without_a_close_key_is_still_warned(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="store.config.broker_xml"):
        xml_core(
            tmp_path,
            '<address-settings><address-setting match="#"><zzz-qqq>1</zzz-qqq>'
            "</address-setting></address-settings>",
        )
    [warning] = _xml_warnings(caplog)
    assert "<zzz-qqq>" in warning and "did you mean" not in warning


def test_artemis_address_settings_we_do_not_read_are_logged_at_debug_only(tmp_path, caplog):
    with caplog.at_level(logging.DEBUG, logger="store.config.broker_xml"):
        xml_core(
            tmp_path,
            '<address-settings><address-setting match="#">'
            "<slow-consumer-policy>KILL</slow-consumer-policy><page-limit-bytes>1M</page-limit-bytes>"
            "</address-setting></address-settings>",
        )
    assert _xml_warnings(caplog) == []
    skipped = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("<slow-consumer-policy>" in m for m in skipped)
    assert any("<page-limit-bytes>" in m for m in skipped)


def test_every_address_setting_we_read_is_an_artemis_address_setting():
    """A key of ours missing from Artemis's list would be warned about as a typo."""
    assert set(ADDRESS_SETTING_KEYS) <= ADDRESS_SETTING_ELEMENTS


def test_address_settings_in_xml_read_our_keys_and_skip_the_others(tmp_path, caplog):
    with caplog.at_level(logging.DEBUG, logger="store.config.broker_xml"):
        cfg = xml_core(
            tmp_path,
            "<address-settings>"
            '<address-setting match="#"><page-size-bytes>2M</page-size-bytes>'
            "<auto-create-queues>${auto}</auto-create-queues>"
            "<redistribution-delay>not a number</redistribution-delay></address-setting>"
            '<address-setting match="orders.*"><max-size-messages>100</max-size-messages>'
            "<address-full-policy> drop </address-full-policy>"
            "<max-size-bytes>10Mb</max-size-bytes></address-setting>"
            '<address-setting match="jms.#"><auto-create-jms-queues>true</auto-create-jms-queues>'
            "</address-setting>"
            "</address-settings>",
        )
    assert _xml_warnings(caplog) == []
    assert cfg.address_settings == {
        "#": {"page_size_bytes": 2 * MiB},
        "orders.*": {
            "max_size_messages": 100,
            "address_full_policy": "DROP",
            "max_size_bytes": 10 * MiB,
        },
        "jms.#": {},
    }
    assert cfg.address_settings_for("orders.eu") == AddressSettings(
        max_size_bytes=10 * MiB,
        max_size_messages=100,
        page_size_bytes=2 * MiB,
        address_full_policy="DROP",
    )
    assert cfg.address_settings_for("orders") == AddressSettings(page_size_bytes=2 * MiB)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        (
            '<address-setting match="#"/><address-setting match="#"/>',
            'address-settings."#"',
        ),
        (
            '<address-setting match="#"><page-size-bytes>1M</page-size-bytes>'
            "<page-size-bytes>2M</page-size-bytes></address-setting>",
            'address-settings."#".page-size-bytes',
        ),
        (
            "<address-setting><page-size-bytes>1M</page-size-bytes></address-setting>",
            "address-settings",
        ),
        ('<address-setting match="#.x"/>', "address-settings"),
        (
            '<address-setting match="#"><page-size-bytes>0</page-size-bytes></address-setting>',
            'address-settings."#".page-size-bytes',
        ),
        (
            '<address-setting match="q"><address-full-policy>SPILL</address-full-policy>'
            "</address-setting>",
            'address-settings."q".address-full-policy',
        ),
        (
            '<address-setting match="q"><max-size-bytes>${max}</max-size-bytes></address-setting>',
            'address-settings."q".max-size-bytes',
        ),
    ],
    ids=["match-twice", "key-twice", "no-match", "bad-match", "bad-size", "bad-policy", "property"],
)
def test_bad_address_settings_in_xml_name_the_key(tmp_path, settings, key):
    with pytest.raises(ConfigError) as info:
        xml_core(tmp_path, f"<address-settings>{settings}</address-settings>")
    assert info.value.key == key


def test_new_core_keys_are_read_from_xml_without_warnings(tmp_path, caplog):
    with caplog.at_level(logging.DEBUG, logger="store.config.broker_xml"):
        cfg = xml_core(
            tmp_path,
            "<page-sync-timeout>40000</page-sync-timeout><id-cache-size>5000</id-cache-size>"
            "<persist-id-cache>false</persist-id-cache>"
            "<min-large-message-size>50K</min-large-message-size>",
        )
    assert _xml_warnings(caplog) == []
    assert (
        cfg.page_sync_timeout,
        cfg.id_cache_size,
        cfg.persist_id_cache,
        cfg.min_large_message_size,
    ) == (40000, 5000, False, 50 * 1024)


@pytest.mark.parametrize(
    ("policy", "role"),
    [
        ("<shared-store><primary/></shared-store>", "primary"),
        (
            "<shared-store><backup><allow-failback>true</allow-failback></backup></shared-store>",
            "backup",
        ),
        ("<shared-store><master/></shared-store>", "primary"),
        ("<shared-store><slave/></shared-store>", "backup"),
        ("<replication><primary/></replication>", None),
        ("<primary-only/>", None),
    ],
    ids=["primary", "backup", "master", "slave", "replication", "primary-only"],
)
def test_the_ha_role_comes_from_a_shared_store_ha_policy(tmp_path, policy, role):
    """docs/ha.md: <ha-policy><shared-store><primary/>|<backup/> (and the older names) give
    StoreConfig.ha_role; other policies are not a shared store and give none."""
    assert xml_core(tmp_path, f"<ha-policy>{policy}</ha-policy>").ha_role == role


def test_a_shared_store_policy_with_two_roles_is_refused(tmp_path):
    with pytest.raises(ConfigError) as info:
        xml_core(
            tmp_path, "<ha-policy><shared-store><primary/><backup/></shared-store></ha-policy>"
        )
    assert info.value.key == "ha-policy"


def test_ha_role_in_a_mapping_is_validated():
    assert StoreConfig.from_mapping({"ha-role": "Backup"}).ha_role == "backup"
    with pytest.raises(ConfigError) as info:
        StoreConfig.from_mapping({"ha-role": "live"})
    assert info.value.key == "ha-role" and "primary or backup" in str(info.value)
