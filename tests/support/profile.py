"""How hard the suite tries: one environment variable, ``STORE_TEST_PROFILE``, for Hypothesis
and for the repeated rounds (kill -9 rounds, crash points, volume loops).

- ``ci`` (the default, what ``scripts/test`` and CI run): the example and round counts that
  find the bugs these tests were written for. Each count is chosen from what ever failed: the
  rounds in which a kill -9 test found a bug were all within the first few (the round counts
  of each test say which, where they are set), so CI runs those plus a margin.
- ``soak``: long runs outside CI, e.g. overnight or before a release:
  ``STORE_TEST_PROFILE=soak scripts/test tests/messaging/test_kill9.py``. Hypothesis runs
  :data:`SOAK_EXAMPLES_FACTOR` times the examples, the rounds :data:`SOAK_ROUNDS_FACTOR` times
  the rounds, each with its own seed printed on failure, and every test runs on every
  back-end it is written for (:func:`full_matrix`).

The back-end matrix of ``ci``: the store contract (``tests/journal``, ``tests/large``,
``tests/paging``, ``tests/db``) runs on every back-end, since each back-end has its own code
below that contract. The storage manager's tests (``tests/messaging``, the
``messaging_backend`` fixture) sit above it and run on the file store, PostgreSQL and SQLite
(the server database, the embedded one, the file journal); MariaDB's dialect code is the
contract suites' to check, and the storage manager's kill -9 tests still kill a process
writing to MariaDB (they name their databases themselves). A soak adds MariaDB to the
storage manager's tests (measured 2026-12-03: 92 of a run's 2,907 test-seconds).

Tests ask through :func:`examples` and :func:`rounds`, which take the count CI runs; the
Hypothesis profiles of the same names are registered in ``tests/conftest.py``.
"""

from __future__ import annotations

import os

__all__ = [
    "PROFILE",
    "SOAK_EXAMPLES_FACTOR",
    "SOAK_ROUNDS_FACTOR",
    "examples",
    "full_matrix",
    "rounds",
    "soak",
]

#: The profile in force: ``ci`` or ``soak``.
PROFILE = os.environ.get("STORE_TEST_PROFILE", "ci").strip() or "ci"
if PROFILE not in ("ci", "soak"):
    raise RuntimeError(f"STORE_TEST_PROFILE={PROFILE!r}: use ci or soak")

#: How many times CI's examples a soak runs.
SOAK_EXAMPLES_FACTOR = 10
#: How many times CI's rounds a soak runs.
SOAK_ROUNDS_FACTOR = 10


def soak() -> bool:
    """True under ``STORE_TEST_PROFILE=soak``."""
    return PROFILE == "soak"


def examples(ci: int) -> int:
    """Hypothesis examples for a test that runs ``ci`` in CI (more in a soak)."""
    return ci * SOAK_EXAMPLES_FACTOR if soak() else ci


def rounds(ci: int) -> int:
    """Rounds of a repeated crash or volume test that runs ``ci`` in CI (more in a soak)."""
    return ci * SOAK_ROUNDS_FACTOR if soak() else ci


def full_matrix() -> bool:
    """True when every test runs on every back-end it is written for (a soak); False for
    CI's matrix (module docstring)."""
    return soak()
