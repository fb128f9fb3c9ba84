"""Artemis's users and roles files (store/stomp/users.py) and the security settings' matching
(store/stomp/security.py), without a broker: the properties syntax, the three password forms
(a one-way hash computed by Java's own PBKDF2WithHmacSHA1, as ``artemis user add`` writes
it), and the most specific match deciding alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.config.masking import mask
from store.errors import ConfigError
from store.stomp.security import BrokerSecurity, load_security, security_address
from store.stomp.users import Users, hash_password, read_properties, read_users

#: ``PBEKeySpec("s3cret-ü", salt, 1024, 512)`` through Java 17's PBKDF2WithHmacSHA1, the salt
#: bytes ``(i * 7 + 1) & 255`` for i in 0..31: what Artemis's one-way codec computes.
JAVA_HASH = (
    "ENC(1024:01080F161D242B323940474E555C636A71787F868D949BA2A9B0B7BEC5CCD3DA:"
    "CB2F28FF01CA37E23C6C1556C31CA286ACF86C313FDD346C3994C6D47F4E5CBEA39005C556760BD50F6226825D"
    "788DB94B6BB631579CF388D8396FE4BEB6DCA9)"
)


def test_properties_read_as_java_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "p.properties"
    path.write_text(
        "# a comment\n! another\n\n  alice = pass=word  \nbob:secret\ncarol plain\n"
        "long = one, \\\n    two\nesc\\ aped = tab\\there\\u00fc\nalice = again\nempty\n",
        encoding="utf-8",
    )
    assert read_properties(str(path)) == {
        "alice": "again",  # a key given twice keeps its last value
        "bob": "secret",
        "carol": "plain",
        "long": "one, two",
        "esc aped": "tab\there\u00fc",
        "empty": "",
    }


def test_a_missing_properties_file_names_itself(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.properties"):
        read_properties(str(tmp_path / "nope.properties"))


def test_each_password_form_opens_with_its_password_only() -> None:
    users = Users(
        {
            "plain": "pw",
            "java": JAVA_HASH,
            "hashed": hash_password("hashed-pw"),
            "masked": f"ENC({mask('masked-pw')})",
            "broken": "ENC(not-a-value)",
        },
        {},
    )
    assert users.authenticate("plain", "pw") and not users.authenticate("plain", "pw ")
    assert users.authenticate("java", "s3cret-ü") and not users.authenticate("java", "s3cret-u")
    assert users.authenticate("hashed", "hashed-pw") and not users.authenticate("hashed", "x")
    assert users.authenticate("masked", "masked-pw") and not users.authenticate("masked", "x")
    assert not users.authenticate("broken", "not-a-value")
    assert not users.authenticate("nobody", "pw") and not users.authenticate(None, None)
    assert not users.authenticate("plain", None)


def test_the_hash_is_java_s_for_the_same_salt() -> None:
    salt = bytes((i * 7 + 1) & 255 for i in range(32))
    assert hash_password("s3cret-ü", salt=salt) == JAVA_HASH


def test_roles_list_users_and_a_user_may_have_several(tmp_path: Path) -> None:
    (tmp_path / "u").write_text("a=1\nb=2\n")
    (tmp_path / "r").write_text("admin = a\nproducer = a, b\nempty =\n")
    users = read_users(str(tmp_path / "u"), str(tmp_path / "r"))
    assert users.roles_of("a") == {"admin", "producer"}
    assert users.roles_of("b") == {"producer"}
    assert users.roles_of("c") == frozenset()


def test_the_most_specific_match_decides_alone() -> None:
    users = Users({"u": "p"}, {"u": frozenset({"producer"})})
    settings = {
        "#": {"send": frozenset({"producer"})},
        "orders.#": {"consume": frozenset({"producer"})},
        "orders.eu": {"send": frozenset({"admin"})},
    }
    security = BrokerSecurity(users, settings)
    assert security.allows("u", "send", "/queue/other")
    assert not security.allows("u", "send", "/queue/orders.us")  # orders.# gives no send
    assert security.allows("u", "consume", "/queue/orders.us")
    assert not security.allows("u", "send", "/queue/orders.eu")  # the exact match decides
    assert not security.allows("u", "consume", "/queue/orders.eu")
    assert security.allows("u", "send", "/topic/anything")
    assert "no security-setting matches" in BrokerSecurity(users, {}).why_not(
        "u", "send", "/queue/x"
    )
    assert security_address("/queue/a.b") == "a.b" and security_address("DLQ.x") == "DLQ.x"


def _files(folder: Path) -> None:
    (folder / "artemis-users.properties").write_text("u = p\n")
    (folder / "artemis-roles.properties").write_text("producer = u\n")


def test_broker_xml_gives_settings_and_the_files_beside_it(tmp_path: Path) -> None:
    xml = tmp_path / "broker.xml"
    xml.write_text(
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
        "<journal-directory>j</journal-directory>"
        '<security-settings><security-setting match="orders.#">'
        '<permission type="send" roles="producer, admin"/>'
        '<permission type="consume" roles="consumer"/></security-setting>'
        "</security-settings></core></configuration>"
    )
    with pytest.raises(ConfigError, match=r"artemis-users\.properties.*does not exist"):
        load_security(xml)
    _files(tmp_path)
    security = load_security(xml)
    assert security is not None and security.authenticate("u", "p")
    assert security.settings == {
        "orders.#": {"send": {"producer", "admin"}, "consume": {"consumer"}}
    }
    xml.write_text(xml.read_text().replace("<journal-directory>", "<security-enabled>false"
                   "</security-enabled><journal-directory>"))  # fmt: skip
    assert load_security(xml) is None
    xml.write_text(xml.read_text().replace('type="consume"', 'type="consum"'))
    with pytest.raises(ConfigError, match="did you mean 'consume'"):
        load_security(xml)


def test_toml_gives_the_same_in_its_broker_section(tmp_path: Path) -> None:
    from store.config import load_config

    toml = tmp_path / "store.toml"
    toml.write_text(
        'journal-directory = "j"\n\n[broker]\nusers-file = "users.properties"\n\n'
        '[broker.security-settings."orders.#"]\nsend = ["producer"]\nconsume = "a, b"\n'
    )
    (tmp_path / "users.properties").write_text("u = p\n")
    (tmp_path / "artemis-roles.properties").write_text("producer = u\n")
    load_config(toml)  # the store's settings leave [broker] to the broker
    security = load_security(toml)
    assert security is not None and security.authenticate("u", "p")
    assert security.settings == {"orders.#": {"send": {"producer"}, "consume": {"a", "b"}}}
    toml.write_text('journal-directory = "j"\n[broker]\nsecurity-enable = false\n')
    with pytest.raises(ConfigError, match="did you mean 'security-enabled'"):
        load_security(toml)
