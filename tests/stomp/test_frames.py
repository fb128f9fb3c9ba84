"""The frame reader: frames split at any byte, pipelined, heart-beats between them, and the
bytes it refuses (tables of hand-built frames)."""

from __future__ import annotations

import pytest

from store.stomp.frames import FrameError, FrameReader

# Three frames back to back: a content-length body holding NUL and a header value with colons,
# one without content-length, CRLF line ends (STOMP 1.2), heart-beat EOLs between them.
STREAM = (
    b"SEND\ndestination:/queue/a\nurl:http://x:1/y\ncontent-length:5\n\nab\x00cd\x00"
    b"\n\n"
    b"SEND\ndestination:/queue/b\nn:2\nn:3\n\nplain body\x00"
    b"\r\n"
    b"ACK\r\nid:7\r\n\r\n\x00"
)
EXPECTED = [
    (
        "SEND",
        {"destination": "/queue/a", "url": "http://x:1/y", "content-length": "5"},
        b"ab\x00cd",
    ),
    ("SEND", {"destination": "/queue/b", "n": "2"}, b"plain body"),
    ("ACK", {"id": "7"}, b""),
]


def _frames(reader: FrameReader) -> list[tuple[str, dict[str, str], bytes]]:
    # coilmq's Frame makes an empty body "" (``body or ""``).
    return [(f.cmd, dict(f.headers), f.body or b"") for f in reader]


def test_pipelined_frames_in_one_read_come_out_in_order() -> None:
    reader = FrameReader()
    reader.append(STREAM)
    assert _frames(reader) == EXPECTED
    assert reader.buffered() == 0


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_a_stream_split_at_any_byte_gives_the_same_frames(cut: int) -> None:
    reader = FrameReader()
    reader.append(STREAM[:cut])
    got = _frames(reader)
    reader.append(STREAM[cut:])
    got += _frames(reader)
    assert got == EXPECTED


def test_a_stream_fed_byte_by_byte_gives_the_same_frames() -> None:
    reader = FrameReader()
    got = []
    for i in range(len(STREAM)):
        reader.append(STREAM[i : i + 1])
        got += _frames(reader)
    assert got == EXPECTED


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(b"SEND\nno colon here\n\n\x00", "without a colon", id="header-without-colon"),
        pytest.param(b"SEND\ncontent-length:x\n\nab\x00", "content-length", id="bad-length"),
        pytest.param(b"SEND\ncontent-length:-1\n\n\x00", "content-length", id="negative-length"),
        pytest.param(b"SEND\ncontent-length:2\n\nabc\x00", "not followed by NUL", id="no-nul"),
        pytest.param(b"SEND\nh:\xff\xfe\n\n\x00", "not UTF-8", id="not-utf8"),
        pytest.param(b"SEND\ncontent-length:101\n\n", "over the limit", id="declared-too-big"),
        pytest.param(b"SEND\n\n" + b"x" * 101, "over the limit", id="body-too-big"),
        pytest.param(b"SEND\nh:" + b"x" * 300, "headers longer", id="headers-too-long"),
    ],
)
def test_bytes_that_are_not_an_acceptable_frame_are_refused(data: bytes, message: str) -> None:
    reader = FrameReader(max_frame_size=100, max_header_size=200)
    reader.append(data)
    with pytest.raises(FrameError, match=message):
        _frames(reader)


def test_an_incomplete_frame_waits_for_more_bytes() -> None:
    reader = FrameReader()
    reader.append(b"SEND\ncontent-length:4\n\nab")
    assert _frames(reader) == []
    reader.append(b"cd\x00")
    assert _frames(reader) == [("SEND", {"content-length": "4"}, b"abcd")]
