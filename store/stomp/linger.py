"""Ending a connection the broker refused without losing what it told the client.

Closing a socket whose receive buffer still holds bytes makes Linux answer with a reset, and
a reset makes the client's kernel drop what it received and its program has not read yet:
the broker's ERROR frame, a TLS alert, messages an ``auto`` subscription was sent. So after
an ERROR, or a TLS handshake it refused, the broker first ends its own side (FIN; over TLS,
close_notify before it), then reads and drops what the client still sends until the client
closes, at most :data:`LINGER_SECONDS`, and only then closes.
"""

from __future__ import annotations

import socket
import time
from typing import Any

__all__ = ["LINGER_SECONDS", "linger"]

#: How long the broker reads (and drops) what a refused client still sends (seconds).
LINGER_SECONDS = 2.0
#: Each wait for the client's bytes (seconds): a bound on how late a broker shutdown is seen.
_POLL_SECONDS = 0.5


def linger(request: Any, seconds: float = LINGER_SECONDS) -> None:
    """End the broker's side of ``request`` (a socket, or a TLS channel with its socket in
    ``sock``), then read and drop until the client closes, at most ``seconds``. Does not
    close ``request``; never raises OSError (a client already gone ends it)."""
    raw: socket.socket = getattr(request, "sock", None) or request
    try:
        request.shutdown(socket.SHUT_WR)
    except OSError:
        return
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            raw.settimeout(min(left, _POLL_SECONDS))
            if not raw.recv(65536):
                return
        except TimeoutError:
            continue
        except OSError:
            return
