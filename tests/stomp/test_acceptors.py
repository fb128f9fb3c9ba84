"""Acceptors (store/stomp/acceptors.py, store/stomp/tls.py) through a real STOMP client
(stomp.py): several at once on one store; TLS with a PEM and with a PKCS#12 key store made by
``openssl`` for the test; ``needClientAuth`` refusing a client without a certificate its CA
signed; ``connectionsAllowed`` and ``stompMaxFramePayloadLength`` per acceptor; every
parameter, scheme or protocol not served is a WARNING naming it; ``store broker`` prints each
acceptor's address and refuses ``--port`` beside several."""

from __future__ import annotations

import logging
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import stomp

from store import StoreConfig
from store.config.masking import mask
from store.errors import ConfigError
from store.stomp.acceptors import Acceptor, load_acceptors, parse_acceptor
from store.stomp.server import StompBroker
from tests.stomp.support import (
    WAIT,
    BrokerProcess,
    Recorder,
    bye,
    raw_connect,
    read_frames,
    running_broker,
)
from tests.support.backends import file_config_mapping
from tests.support.cli import run_store


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1 (PEM with its key, and PKCS#12 with password
    ``p12-pw``) and a client certificate, all signed by the CA; and a second CA nobody
    trusts with a client certificate of its own."""
    d = tmp_path_factory.mktemp("certs")
    for ca in ("ca", "rogue-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key",
                 "-out", f"{ca}.pem", "-days", "2", "-subj", f"/CN={ca}", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name, ca in (("server", "ca"), ("client", "ca"), ("rogue", "rogue-ca")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                 f"{name}.csr", "-subj", f"/CN={name}", cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey",
                 f"{ca}.key", "-CAcreateserial", "-out", f"{name}.crt", "-days", "2",
                 "-extfile", "san.ext", cwd=d)  # fmt: skip
    (d / "server.pem").write_text((d / "server.key").read_text() + (d / "server.crt").read_text())
    _openssl("pkcs12", "-export", "-inkey", "server.key", "-in", "server.crt", "-out",
             "server.p12", "-passout", "pass:p12-pw", cwd=d)  # fmt: skip
    return d


def _config(tmp_path: Path) -> StoreConfig:
    return StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))


@pytest.fixture
def broker(tmp_path: Path, certs: Path) -> Iterator[StompBroker]:
    acceptors = [
        parse_acceptor("plain", "tcp://127.0.0.1:0?protocols=STOMP;connectionsAllowed=2;"
                       "stompMaxFramePayloadLength=1K"),
        parse_acceptor("tls", f"tcp://127.0.0.1:0?sslEnabled=true;keyStorePath={certs}/"
                       "server.pem"),
        parse_acceptor("tls-p12", f"tcp://127.0.0.1:0?sslEnabled=true;keyStorePath={certs}/"
                       f"server.p12;keyStorePassword=ENC({mask('p12-pw')})"),
        parse_acceptor("mutual", f"tcp://127.0.0.1:0?sslEnabled=true;keyStorePath={certs}/"
                       f"server.pem;needClientAuth=true;trustStorePath={certs}/ca.pem"),
    ]  # fmt: skip
    assert all(a is not None for a in acceptors)
    with running_broker(_config(tmp_path), acceptors=acceptors) as b:
        yield b


def _port(broker: StompBroker, name: str) -> int:
    return next(port for n, _host, port in broker.addresses if n == name)


def _client(port: int, certs: Path | None = None, cert: str | None = None) -> tuple:
    conn = stomp.Connection11([("127.0.0.1", port)], heartbeats=(0, 0), auto_content_length=True)
    if certs is not None:
        conn.set_ssl(
            for_hosts=[("127.0.0.1", port)],
            ca_certs=str(certs / "ca.pem"),
            cert_file=str(certs / f"{cert}.crt") if cert else None,
            key_file=str(certs / f"{cert}.key") if cert else None,
        )
    rec = Recorder()
    conn.set_listener("rec", rec)
    conn.connect(wait=True)
    return conn, rec


@pytest.mark.parametrize("acceptor", ["tls", "tls-p12"])
def test_a_message_sent_over_tls_is_received_on_the_plain_port(
    broker: StompBroker, certs: Path, acceptor: str
) -> None:
    conn, rec = _client(_port(broker, acceptor), certs)
    big = "x" * 200_000  # many TLS records
    conn.send("/queue/q", big, headers={"receipt": "r"})
    rec.wait_receipts({"r"})
    bye(conn, rec)
    reader, rrec = _client(_port(broker, "plain"))
    reader.subscribe("/queue/q", id="s", ack="auto")
    assert rrec.wait_messages(1)[0].body == big
    bye(reader, rrec)


def test_tls_delivers_while_the_client_sends(broker: StompBroker, certs: Path) -> None:
    """Deliveries come from another connection's thread while this one's thread reads: the
    channel's one lock keeps the TLS state whole."""
    conn, rec = _client(_port(broker, "tls"), certs)
    conn.subscribe("/queue/echo", id="s", ack="auto")
    producer, prec = _client(_port(broker, "tls-p12"), certs)
    for i in range(300):
        producer.send("/queue/echo", f"m{i}")
        conn.send("/queue/other", f"o{i}")  # this connection's own SENDs meanwhile
    got = rec.wait_messages(300)
    assert [m.body for m in got] == [f"m{i}" for i in range(300)]
    bye(producer, prec)
    bye(conn, rec)


def test_a_plain_client_gets_nothing_from_a_tls_port(broker: StompBroker) -> None:
    conn = stomp.Connection11([("127.0.0.1", _port(broker, "tls"))], heartbeats=(0, 0))
    with pytest.raises(stomp.exception.ConnectFailedException):
        conn.connect(wait=True)


def _refused_tls(port: int, certs: Path, cert: str | None) -> BaseException | None:
    """A TLS client (Python's ssl) on ``port`` with ``cert`` or none, sending CONNECT and a
    SEND: the exception that ended it, or None when the broker answered CONNECTED. Under TLS
    1.3 the client's own handshake may finish before the broker has checked its certificate,
    so the refusal can come at the first read. (stomp.py 9's TLS client can miss an end
    while it connects and wait for ever: hence this client.)"""
    context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    if cert is not None:
        context.load_cert_chain(str(certs / f"{cert}.crt"), str(certs / f"{cert}.key"))
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=WAIT) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            tls.sendall(b"CONNECT\naccept-version:1.2\nhost:h\n\n\x00")
            tls.sendall(b"SEND\ndestination:/queue/q\nreceipt:r\n\nmust not arrive\x00")
            data = tls.recv(65536)
    except (ssl.SSLError, OSError) as exc:
        return exc
    assert not data.startswith(b"CONNECTED"), data
    return EOFError("the broker closed the connection")


@pytest.mark.parametrize("cert", [None, "rogue"])
def test_client_auth_refuses_a_client_without_a_certificate_its_ca_signed(
    broker: StompBroker, certs: Path, cert: str | None
) -> None:
    """Refused within the socket's timeout (``WAIT``), never CONNECTED; a client with a
    certificate learns why: the TLS alert comes before the end."""
    refused = _refused_tls(_port(broker, "mutual"), certs, cert)
    assert refused is not None and not isinstance(refused, TimeoutError), refused
    if cert is not None:
        assert isinstance(refused, ssl.SSLError) and "ALERT" in str(refused), refused
    assert not broker.queue_manager.store.holds("/queue/q")


def test_client_auth_lets_a_signed_client_in(broker: StompBroker, certs: Path) -> None:
    conn, rec = _client(_port(broker, "mutual"), certs, "client")
    conn.send("/queue/q", "signed", headers={"receipt": "r"})
    rec.wait_receipts({"r"})
    bye(conn, rec)


def test_connections_allowed_bounds_its_acceptor_only(broker: StompBroker, certs: Path) -> None:
    port = _port(broker, "plain")
    first, second = _client(port), _client(port)
    with raw_connect(port) as sock:  # the broker answers at once: ERROR, then it closes
        ((command, headers, _body),) = read_frames(sock, 2)
    assert command == "ERROR" and "connectionsAllowed (2) reached" in headers["message"]
    third = stomp.Connection11([("127.0.0.1", port)], heartbeats=(0, 0))
    # However stomp.py meets the refusal: the close before its CONNECT went out (no socket
    # left to send on, NotConnectedException: seen once with three workers), during the send
    # (OSError), or while it waits for CONNECTED (ConnectFailedException).
    refused = (
        stomp.exception.ConnectFailedException,
        stomp.exception.NotConnectedException,
        OSError,
    )
    with pytest.raises(refused):
        third.connect(wait=True)
    other, orec = _client(_port(broker, "tls"), certs)  # another acceptor: its own bound
    for conn, crec in (first, second, (other, orec)):
        bye(conn, crec)


def test_the_frame_bound_is_the_acceptor_s(broker: StompBroker, certs: Path) -> None:
    conn, rec = _client(_port(broker, "plain"))
    conn.send("/queue/big", "x" * 2048, headers={"receipt": "r"})
    with rec.cond:
        assert rec.cond.wait_for(lambda: rec.errors, WAIT)
    assert not broker.queue_manager.store.holds("/queue/big")
    tls, trec = _client(_port(broker, "tls"), certs)  # the default bound there
    tls.send("/queue/big", "x" * 2048, headers={"receipt": "r"})
    trec.wait_receipts({"r"})
    bye(tls, trec)


def test_what_is_not_served_is_a_warning_naming_it(caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="store.stomp"):
        assert parse_acceptor("amqp", "tcp://0.0.0.0:5672?protocols=AMQP") is None
        assert parse_acceptor("ws", "ws://0.0.0.0:61614") is None
        a = parse_acceptor("stomp", "tcp://0.0.0.0:61613?protocols=STOMP;useEpoll=true;"
                           "tcpSendBufferSize=1048576;anycastPrefix=/queue/")  # fmt: skip
    assert a == Acceptor("stomp", "0.0.0.0", 61613, send_buffer=1048576)
    text = caplog.text
    assert "'amqp' serves AMQP, not STOMP" in text and "ws:// is not served" in text
    assert "parameter anycastPrefix is not served" in text and "useEpoll" not in text


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("tcp://h:1?sslEnabled=yes", "sslEnabled"),
        ("tcp://h:1?sslEnabled=true", "keyStorePath"),
        ("tcp://h:1?sslEnabled=true;keyStorePath=k.jks;keyStoreType=JKS", "JKS is not read"),
        ("tcp://h:1?connectionsAllowed=many", "connectionsAllowed"),
        ("tcp://h:1?needClientAuth=true;sslEnabled=true;keyStorePath=k.pem", "trustStorePath"),
    ],
)
def test_a_bad_value_names_the_acceptor_and_the_parameter(url: str, words: str) -> None:
    with pytest.raises(ConfigError, match="'bad'") as caught:
        parse_acceptor("bad", url)
    assert words in str(caught.value) + str(caught.value.hint)


def test_an_unreadable_key_store_names_it(tmp_path: Path) -> None:
    (tmp_path / "junk.pem").write_text("not a key")
    acceptor = parse_acceptor("t", f"tcp://127.0.0.1:0?sslEnabled=true;keyStorePath={tmp_path}"
                              "/junk.pem")  # fmt: skip
    with pytest.raises(ConfigError, match=r"junk\.pem"):
        StompBroker.__new__(StompBroker)._server(acceptor, 1, 1.0, None, given=False)  # type: ignore[arg-type]


def _broker_xml(tmp_path: Path, acceptors: str) -> Path:
    xml = tmp_path / "broker.xml"
    dirs = "".join(f"<{k}>{v}</{k}>" for k, v in file_config_mapping(tmp_path, "NIO").items()
                   if k.endswith("directory"))  # fmt: skip
    xml.write_text(
        f'<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">{dirs}'
        f"<security-enabled>false</security-enabled><acceptors>{acceptors}</acceptors>"
        "</core></configuration>"
    )
    return xml


def test_store_broker_serves_each_acceptor_of_broker_xml(tmp_path: Path) -> None:
    xml = _broker_xml(tmp_path,
        '<acceptor name="artemis">tcp://127.0.0.1:0?protocols=CORE,AMQP,STOMP</acceptor>'
        '<acceptor name="amqp">tcp://127.0.0.1:0?protocols=AMQP</acceptor>'
        '<acceptor name="stomp">tcp://127.0.0.1:0?protocols=STOMP</acceptor>')  # fmt: skip
    assert [a.name for a in load_acceptors(xml)] == ["artemis", "stomp"]
    broker = BrokerProcess(xml, security=True, port=None)  # security-enabled false
    first = broker.port
    try:
        second = broker.wait_listening(WAIT)  # one "listening on" line per acceptor
        assert second != first
        for port in (first, second):
            conn, rec = _client(port)
            bye(conn, rec)
    finally:
        assert broker.terminate() == 0
    assert broker.proc.stderr is not None
    assert "acceptor 'amqp' serves AMQP, not STOMP" in broker.proc.stderr.read()
    done = run_store("broker", "--config", str(xml), "--port", "0")
    assert done.returncode == 2 and "has 2 acceptors" in done.stderr
