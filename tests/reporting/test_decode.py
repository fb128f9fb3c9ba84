"""The report's decode step without Spark: the message summary it reads every message with
agrees with the full codecs, on the fast path and off it."""

from __future__ import annotations

import pytest

from store.messaging import Message
from store.messaging.message_facts import message_summary
from store.messaging.message_records import (
    decode_large_message,
    decode_message,
    encode_large_message,
    encode_message,
)


@pytest.mark.parametrize(
    "message",
    [
        Message(address="a", body=b"x" * 64, timestamp=5, priority=7),
        Message(address="ünï", body=b"", timestamp=0, properties={"k": 1, "s": "v"}),
    ],
)
def test_message_summary_equals_the_full_decode(message: Message) -> None:
    assert isinstance(message.body, bytes)
    inline = encode_message(message, message.body)
    m = decode_message(inline, 3)
    assert message_summary(inline, 45, 3) == (m.address, m.timestamp, m.priority, len(m.body))
    large = encode_large_message(message, 12_345)
    m, size = decode_large_message(large, 3)
    assert message_summary(large, 30, 3) == (m.address, m.timestamp, m.priority, 12_345)
    assert size == 12_345


def test_message_summary_raises_what_the_codec_raises() -> None:
    good = encode_message(Message(address="a", body=b"body"), b"body")
    for bad in (good[:-1], good + b"!", good[:1] + b"\xff" + good[2:]):
        with pytest.raises(ValueError):
            message_summary(bad, 45, 1)
    with pytest.raises(ValueError):
        message_summary(good, 44, 1)
