"""The broker's frame reading over a real socket: pipelined SENDs, frames written one byte at
a time, garbage and frames STOMP cannot process (each an ERROR, then the connection closed, as
STOMP 1.2 says), a frame over the limit, a client gone mid-frame (issue 29: coilmq 1.1.0
dropped the connection on 200 pipelined SENDs), and connections that never send CONNECT."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from pathlib import Path

import pytest

from store import StoreConfig
from tests.stomp.support import WAIT, bye, client, raw_connect, read_frames, running_broker
from tests.support.backends import file_config_mapping

CONNECT = b"CONNECT\naccept-version:1.1\nhost:127.0.0.1\n\n\x00"


@pytest.fixture
def file_config(tmp_path: Path) -> StoreConfig:
    return StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))


def _send(i: int) -> bytes:
    body = f"body {i}\x00with NUL".encode()
    return (
        (
            f"SEND\ndestination:/queue/wire\nreceipt:r{i}\nurl:http://h:1/{i}\n"
            f"content-length:{len(body)}\n\n"
        ).encode()
        + body
        + b"\x00\n"
    )


def _consume(port: int, n: int) -> list[tuple[str, str]]:
    conn, rec = client(port)
    conn.subscribe("/queue/wire", id="s", ack="auto")
    got = [(m.headers["url"], m.body) for m in rec.wait_messages(n)]
    assert len(rec.quiet(0.3)) == n
    bye(conn, rec)
    return got


def test_200_pipelined_sends_get_200_receipts_in_order(file_config: StoreConfig) -> None:
    with running_broker(file_config) as broker:
        sock = raw_connect(broker.address[1])
        sock.sendall(CONNECT + b"".join(_send(i) for i in range(200)))
        frames = read_frames(sock, 201)
        assert frames[0][0] == "CONNECTED"
        assert [f[1].get("receipt-id") for f in frames[1:]] == [f"r{i}" for i in range(200)]
        sock.close()
        got = _consume(broker.address[1], 200)
        assert got == [(f"http://h:1/{i}", f"body {i}\x00with NUL") for i in range(200)]


def test_frames_written_one_byte_at_a_time_are_all_read(file_config: StoreConfig) -> None:
    with running_broker(file_config) as broker:
        sock = raw_connect(broker.address[1])
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = CONNECT + b"".join(_send(i) for i in range(10))
        for i in range(len(data)):
            sock.sendall(data[i : i + 1])
        frames = read_frames(sock, 11)
        assert [f[1].get("receipt-id") for f in frames[1:]] == [f"r{i}" for i in range(10)]
        sock.close()
        assert len(_consume(broker.address[1], 10)) == 10


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(b"\xff\xfe\x00\x01 not stomp\n\n\x00", id="binary"),
        pytest.param(CONNECT + b"SEND\ndestination:/queue/wire\nno colon\n\nx\x00", id="header"),
        pytest.param(CONNECT + b"FROB\n\n\x00", id="unknown-command"),
        pytest.param(b"garbage\x00", id="no-headers"),
        pytest.param(CONNECT + b"garbage\x00", id="no-headers-after-connect"),
        pytest.param(CONNECT + b"SEND\nreceipt:r\n\nx\x00", id="send-without-destination"),
        pytest.param(CONNECT + b"ACK\nreceipt:r\n\n\x00", id="ack-of-nothing"),
        pytest.param(CONNECT + b"SEND\ndestination:/queue/wire\n\n" + b"x" * 5000, id="too-big"),
    ],
)
def test_a_client_sending_garbage_gets_an_error_and_is_dropped_and_the_broker_carries_on(
    file_config: StoreConfig, garbage: bytes
) -> None:
    with running_broker(file_config, max_frame_size=4096) as broker:
        sock = raw_connect(broker.address[1])
        sock.sendall(garbage)
        frames = read_frames(sock, 10)
        assert frames[-1][0] == "ERROR"
        assert sock.recv(1) == b""  # closed by the broker
        sock.close()
        conn, rec = client(broker.address[1])
        conn.send("/queue/wire", "after", headers={"receipt": "ok", "url": "u"})
        rec.wait_receipts({"ok"})
        bye(conn, rec)
        assert _consume(broker.address[1], 1) == [("u", "after")]


def test_an_error_reaches_the_client_after_what_was_sent_before_it(
    file_config: StoreConfig,
) -> None:
    """A refused frame (an ACK on an ``auto`` subscription) while the client keeps writing:
    the client still reads the messages the subscription was sent (acknowledged as sent, so
    gone from the store) and then the ERROR. A broker that closed its socket with the client's
    bytes unread would reset the connection, and a reset makes the client's kernel drop what
    it has not read yet (the kill -9 test's drain lost its last deliveries so)."""
    with running_broker(file_config) as broker:
        port = broker.address[1]
        sock = raw_connect(port)
        sock.sendall(CONNECT + b"".join(_send(i) for i in range(50)))
        assert len(read_frames(sock, 51)) == 51
        sock.close()
        sock = raw_connect(port)
        subscribe = b"SUBSCRIBE\ndestination:/queue/wire\nid:s\nack:auto\n\n\x00"
        refused = b"ACK\nid:nothing\nsubscription:s\n\n\x00"
        beats = b"\n" * 500_000  # heart-beats the broker never reads as frames

        def write() -> None:
            with contextlib.suppress(OSError):
                sock.sendall(CONNECT + subscribe + refused + beats)

        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(0.5)  # the broker answers and closes before the client reads a byte
        frames = read_frames(sock, 60)
        writer.join(WAIT)
        assert [f[0] for f in frames] == ["CONNECTED"] + ["MESSAGE"] * 50 + ["ERROR"]
        assert sock.recv(1) == b""
        sock.close()
        assert not _consume_nothing(port)


def _consume_nothing(port: int) -> list[object]:
    conn, rec = client(port)
    conn.subscribe("/queue/wire", id="s", ack="auto")
    got = rec.quiet(0.3)
    bye(conn, rec)
    return list(got)


def test_a_client_gone_mid_frame_stores_nothing_of_it(file_config: StoreConfig) -> None:
    with running_broker(file_config) as broker:
        sock = raw_connect(broker.address[1])
        sock.sendall(CONNECT + _send(0) + _send(1)[:30])
        frames = read_frames(sock, 2)
        assert frames[1][1]["receipt-id"] == "r0"
        sock.close()
        assert _consume(broker.address[1], 1) == [("http://h:1/0", "body 0\x00with NUL")]


@pytest.mark.parametrize("pace", ["silent", "a-byte-at-a-time"])
def test_a_connection_that_never_sends_connect_is_closed_after_the_bound(
    file_config: StoreConfig, pace: str
) -> None:
    """Nothing at all, or a CONNECT frame one byte every 0.2 s (slowloris): after the
    connect timeout (1 s here; 60 s by default, Artemis's connection-ttl) an ERROR naming it
    and the connection closed; a client that connects at once is served meanwhile."""
    with running_broker(file_config, connect_timeout=1.0) as broker:
        sock = raw_connect(broker.address[1])
        started = time.monotonic()
        if pace == "a-byte-at-a-time":  # a header that never ends, until the broker answers
            for byte in b"CONNECT\nx-pad:" + b"a" * 50:
                if select.select([sock], [], [], 0.2)[0]:
                    break
                sock.sendall(bytes([byte]))
        frames = read_frames(sock, 1, timeout=10)
        assert [f[0] for f in frames] == ["ERROR"], frames
        assert "no CONNECT frame within 1 s" in frames[0][1].get("message", "")
        assert sock.recv(1) == b""
        assert time.monotonic() - started < 6
        sock.close()
        conn, rec = client(broker.address[1])
        conn.send("/queue/wire", "served", headers={"receipt": "ok", "url": "u"})
        rec.wait_receipts({"ok"})
        bye(conn, rec)


def _raw_until_closed(sock: socket.socket, seconds: float, beat: float | None = None) -> bytes:
    """Everything the broker writes to ``sock`` for up to ``seconds`` (less if it closes),
    sending a heart-beat every ``beat`` seconds meanwhile when given."""
    got = bytearray()
    end = time.monotonic() + seconds
    next_beat = time.monotonic() + (beat or 0)
    while time.monotonic() < end:
        if beat is not None and time.monotonic() >= next_beat:
            sock.sendall(b"\n")
            next_beat += beat
        if select.select([sock], [], [], 0.05)[0]:
            data = sock.recv(65536)
            if not data:
                break
            got += data
    return bytes(got)


def test_heart_beats_are_sent_and_a_silent_client_is_dropped(file_config: StoreConfig) -> None:
    """CONNECT asking ``heart-beat:500,500``: the broker answers ``1000,1000`` (its floor),
    sends a heart-beat whenever it wrote nothing for a second, and closes the connection with
    an ERROR once the client was silent for twice its interval (2 s); a client that keeps its
    beats is kept, and served after."""
    beats = b"CONNECT\naccept-version:1.2\nhost:127.0.0.1\nheart-beat:500,500\n\n\x00"
    with running_broker(file_config) as broker:
        silent = raw_connect(broker.address[1])
        started = time.monotonic()
        silent.sendall(beats)
        wrote = _raw_until_closed(silent, 6.0)
        took = time.monotonic() - started
        head, _, rest = wrote.partition(b"\x00")
        assert head.startswith(b"CONNECTED\n") and b"heart-beat:1000,1000" in head, head
        before_error, _, error = rest.partition(b"ERROR")
        assert before_error.count(b"\n") >= 1, rest  # a beat while the client kept quiet
        assert b"no heart-beat or frame for" in error, rest
        assert 1.9 < took < 5.0, took
        silent.close()

        kept = raw_connect(broker.address[1])
        kept.sendall(beats)
        wrote = _raw_until_closed(kept, 3.5, beat=0.5)
        assert b"ERROR" not in wrote and wrote.count(b"\n") >= 3, wrote
        kept.sendall(b"SEND\ndestination:/queue/wire\nreceipt:k\nurl:u\n\nkept\x00")
        frames = read_frames(kept, 1)
        assert frames[0][0] == "RECEIPT", frames
        kept.close()
