"""Waiting for something a test's threads or processes are to make happen, with a bound.

A fixed sleep followed by an assertion ("nothing was sent before the outage") fails whenever
the machine is slower than the sleep allows: three test workers, JVMs and database servers on
two cores made a private MariaDB server's first sends take longer than 0.5 s once. Waiting
until the condition holds, for at most a bound well above what it ever takes, checks the same
thing without the race.

Thread-safety: :func:`wait_for` only reads through ``what``, which must be safe to call from
the test's thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["wait_for"]


def wait_for(what: Callable[[], bool], seconds: float, message: str) -> None:
    """Returns once ``what()`` is true; raises AssertionError(``message``) after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, message
        time.sleep(0.005)
