"""Logins and permissions (store/stomp/security.py) through a real STOMP client (stomp.py):
a bad login gets ERROR and the connection closes; each command needs its permission by match;
a refused SEND, in a transaction or not, stores nothing; ``store broker`` is secure by
default (no users file: an error line and a hint, exit 2), ``--no-security`` says so, and a
broker.xml with Artemis's files beside it lets its users in."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import stomp

from store import StoreConfig
from store.config.masking import mask
from store.stomp.security import load_security
from store.stomp.server import StompBroker
from store.stomp.users import hash_password
from tests.stomp.support import WAIT, BrokerProcess, Recorder, bye, running_broker
from tests.support.backends import file_config_mapping
from tests.support.cli import run_store

SETTINGS = """
[broker.security-settings."orders.#"]
send = ["producer"]
consume = ["consumer"]
createAddress = ["producer"]
createDurableQueue = ["producer"]
browse = ["admin"]

[broker.security-settings."news.#"]
send = ["producer"]
consume = ["consumer"]
createNonDurableQueue = ["consumer"]
createDurableQueue = ["consumer"]
deleteDurableQueue = ["admin"]
"""


def _write_files(folder: Path) -> None:
    (folder / "artemis-users.properties").write_text(
        f"producer = p-pw\nconsumer = {hash_password('c-pw')}\nadmin = ENC({mask('a-pw')})\n"
    )
    (folder / "artemis-roles.properties").write_text(
        "producer = producer\nconsumer = consumer, admin\nadmin = admin\n"
    )


def _toml(tmp_path: Path) -> Path:
    mapping = file_config_mapping(tmp_path, "NIO")
    lines = [f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}" for k, v in mapping.items()
             if not isinstance(v, dict)]  # fmt: skip
    path = tmp_path / "store.toml"
    path.write_text("\n".join(lines) + "\n" + SETTINGS)
    _write_files(tmp_path)
    return path


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[StompBroker]:
    path = _toml(tmp_path)
    config = StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))
    with running_broker(config, security=load_security(path)) as b:
        yield b


def _connect(port: int, login: str | None, passcode: str | None, **headers: str) -> tuple:
    conn = stomp.Connection11([("127.0.0.1", port)], heartbeats=(0, 0), auto_content_length=True)
    rec = Recorder()
    conn.set_listener("rec", rec)
    conn.connect(login, passcode, wait=True, headers=headers)
    return conn, rec


def _refused(rec: Recorder, *words: str) -> str:
    """The ERROR text the broker sent, once the connection closed after it."""
    with rec.cond:
        assert rec.cond.wait_for(lambda: rec.errors and rec.disconnected, WAIT), rec.errors
        text = str(rec.errors[0].headers.get("message"))
    for word in words:
        assert word in text, text
    return text


def _depth(broker: StompBroker, queue: str) -> int:
    manager: Any = broker.queue_manager.store.manager
    try:
        return int(manager.depth(queue))
    except Exception:
        return 0


@pytest.mark.parametrize(
    ("login", "passcode"),
    [("producer", "wrong"), ("nobody", "p-pw"), (None, None), ("consumer", "C-PW")],
)
def test_a_bad_login_gets_error_and_the_connection_closes(
    broker: StompBroker, login: str | None, passcode: str | None
) -> None:
    conn = stomp.Connection11([("127.0.0.1", broker.address[1])], heartbeats=(0, 0))
    rec = Recorder()
    conn.set_listener("rec", rec)
    with pytest.raises(stomp.exception.ConnectFailedException):
        conn.connect(login, passcode, wait=True)
    assert "login refused" in _refused(rec)
    conn.disconnect()


def test_each_form_of_password_logs_in(broker: StompBroker) -> None:
    for login, passcode in (("producer", "p-pw"), ("consumer", "c-pw"), ("admin", "a-pw")):
        conn, rec = _connect(broker.address[1], login, passcode)
        bye(conn, rec)


def _produce(port: int, body: str) -> None:
    """A receipted SEND of ``body`` to /queue/orders.eu by the producer."""
    producer, prec = _connect(port, "producer", "p-pw")
    producer.send("/queue/orders.eu", body, headers={"receipt": "r"})
    prec.wait_receipts({"r"})
    bye(producer, prec)


def test_a_permitted_send_is_consumed_by_a_permitted_consumer(broker: StompBroker) -> None:
    port = broker.address[1]
    _produce(port, "one")
    consumer, crec = _connect(port, "consumer", "c-pw")
    consumer.subscribe("/queue/orders.eu", id="s", ack="client-individual")
    (got,) = crec.wait_messages(1)
    assert got.body == "one"
    consumer.ack(got.headers["message-id"], "s", receipt="a1")
    crec.wait_receipts({"a1"})
    bye(consumer, crec)
    assert _depth(broker, "/queue/orders.eu") == 0


@pytest.mark.parametrize(
    ("login", "passcode", "destination", "words"),
    [
        ("consumer", "c-pw", "/queue/orders.eu", ("'consumer'", "send", "/queue/orders.eu")),
        ("producer", "p-pw", "/queue/other", ("send", "no security-setting matches", "other")),
    ],
)
def test_a_refused_send_stores_nothing(
    broker: StompBroker, login: str, passcode: str, destination: str, words: tuple[str, ...]
) -> None:
    conn, rec = _connect(broker.address[1], login, passcode)
    conn.send(destination, "x", headers={"receipt": "r"})
    _refused(rec, *words)
    assert "r" not in rec.receipts
    assert _depth(broker, destination) == 0
    assert not broker.queue_manager.store.holds(destination)


def test_a_refused_send_in_a_transaction_stores_nothing(broker: StompBroker) -> None:
    port = broker.address[1]
    producer, prec = _connect(port, "producer", "p-pw")
    producer.send("/queue/orders.eu", "kept", headers={"receipt": "r0"})
    prec.wait_receipts({"r0"})
    producer.begin("t1")
    producer.send("/queue/orders.eu", "in the transaction", transaction="t1")
    producer.send("/queue/other", "refused", transaction="t1")
    producer.commit("t1")
    _refused(prec, "send", "/queue/other")
    time.sleep(0.2)
    assert _depth(broker, "/queue/orders.eu") == 1  # the transaction's SEND went with it


def test_subscribing_needs_consume_and_for_a_new_queue_the_right_to_create_it(
    broker: StompBroker,
) -> None:
    port = broker.address[1]
    producer, prec = _connect(port, "producer", "p-pw")
    producer.subscribe("/queue/orders.eu", id="s")
    _refused(prec, "'producer'", "consume", "/queue/orders.eu")
    consumer, crec = _connect(port, "consumer", "c-pw")
    consumer.subscribe("/queue/orders.new", id="s")  # no such queue: creating it is refused
    _refused(crec, "createAddress", "/queue/orders.new")
    assert not broker.queue_manager.store.holds("/queue/orders.new")


def test_a_browser_needs_browse_not_consume(broker: StompBroker) -> None:
    port = broker.address[1]
    _produce(port, "browsed")
    admin, arec = _connect(port, "admin", "a-pw")  # its roles hold admin (browse)
    admin.subscribe("/queue/orders.eu", id="b", headers={"browser": "true"})
    got = arec.wait_messages(2)
    assert [m.body for m in got] == ["browsed", ""] and got[1].headers["browser"] == "end"
    bye(admin, arec)
    consumer, crec = _connect(port, "consumer", "c-pw")  # consume, but not browse
    consumer.subscribe("/queue/orders.eu", id="b", headers={"browser": "true"})
    _refused(crec, "'consumer'", "browse", "/queue/orders.eu")
    assert _depth(broker, "/queue/orders.eu") == 1


def test_topics_need_their_queue_permissions_and_deleting_a_durable_one_too(
    broker: StompBroker,
) -> None:
    port = broker.address[1]
    name = {"durable-subscription-name": "feed"}
    consumer, crec = _connect(port, "consumer", "c-pw", **{"client-id": "c1"})
    consumer.subscribe("/topic/news.eu", id="plain")
    consumer.subscribe("/topic/news.eu", id="d", headers=name)
    consumer.unsubscribe("d", headers=name)  # consumer has no deleteDurableQueue
    _refused(crec, "deleteDurableQueue", "/topic/news.eu")
    assert broker.queue_manager.store.manager.depth("c1.feed") == 0  # the queue stays
    admin, arec = _connect(port, "admin", "a-pw", **{"client-id": "c1"})
    admin.unsubscribe("d", headers=name)  # admin may: its roles hold admin
    bye(admin, arec)
    assert "c1.feed" not in {q.name for q in broker.queue_manager.store.manager.queues()}
    producer, prec = _connect(port, "producer", "p-pw")
    producer.subscribe("/topic/news.eu", id="t")
    _refused(prec, "consume", "/topic/news.eu")


def test_store_broker_is_secure_by_default(tmp_path: Path) -> None:
    path = tmp_path / "store.toml"
    mapping = file_config_mapping(tmp_path, "NIO")
    path.write_text("".join(f'{k} = "{v}"\n' for k, v in mapping.items() if isinstance(v, str)))
    done = run_store("broker", "--config", str(path), "--port", "0")
    assert done.returncode == 2
    error, hint = done.stderr.strip().splitlines()  # no traceback: the error and its hint
    assert error.startswith("store: error:") and "artemis-users.properties" in error
    assert hint.startswith("store: hint:") and "--no-security" in hint
    broker = BrokerProcess(path)  # --no-security
    try:
        conn, rec = _connect(broker.port, "anyone", "anything")
        bye(conn, rec)
    finally:
        assert broker.terminate() == 0
    assert broker.proc.stderr is not None
    assert "--no-security: any login is accepted" in broker.proc.stderr.read()


def test_store_broker_on_broker_xml_lets_its_users_in(tmp_path: Path) -> None:
    xml = tmp_path / "broker.xml"
    xml.write_text(
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
        f"<journal-directory>{tmp_path / 'journal'}</journal-directory>"
        f"<paging-directory>{tmp_path / 'paging'}</paging-directory>"
        f"<large-messages-directory>{tmp_path / 'large'}</large-messages-directory>"
        f"<bindings-directory>{tmp_path / 'bindings'}</bindings-directory>"
        '<security-settings><security-setting match="#">'
        '<permission type="send" roles="producer"/><permission type="consume" roles="consumer"/>'
        '<permission type="createAddress" roles="producer"/>'
        '<permission type="createDurableQueue" roles="producer"/>'
        "</security-setting></security-settings></core></configuration>"
    )
    _write_files(tmp_path)
    broker = BrokerProcess(xml, security=True)
    try:
        producer, prec = _connect(broker.port, "producer", "p-pw")
        producer.send("/queue/a", "x", headers={"receipt": "r"})
        prec.wait_receipts({"r"})
        bye(producer, prec)
        conn = stomp.Connection11([("127.0.0.1", broker.port)], heartbeats=(0, 0))
        with pytest.raises(stomp.exception.ConnectFailedException):
            conn.connect("producer", "nope", wait=True)
    finally:
        assert broker.terminate() == 0
