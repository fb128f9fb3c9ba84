"""A 256 MiB body is written and read back in bounded memory on every kind of persistent
storage (docs/large.md: "memory stays bounded by a chunk, whatever the body size"); on Derby
128 MiB in CI (still four times the bound: a store or driver that kept the body, or half of it,
fails), 256 MiB in a soak (``STORE_TEST_PROFILE=soak``). Derby streams at 8-10 MiB/s on this
machine kind: its 256 MiB took 55-71 s, the longest test of a run.

Memory is measured two ways, both under 32 MiB: the ``tracemalloc`` peak (Python objects) and
the growth of the process's resident set (``VmHWM`` after ``/proc/self/clear_refs`` reset it
to the current ``VmRSS``), which also sees the drivers' C buffers and the JVM's heap. A
warm-up body first loads the driver, the JVM, the pool and the statement caches, so what is
measured is the streaming alone. Durations are printed (``-s``) and kept as test properties.

Derby runs inside the JVM, whose heap grows and shrinks by the collector's policy, not the
store's: while a 256 MiB body passes through, G1 moves its young generation across 200-500 MiB
of heap (measured: RSS +380 MiB on the first body, +220 MiB on a second one, while the Python
side stayed at 4 MiB and the Java heap *in use after a full GC* stayed at 55-64 MiB, body after
body). So on Derby the resident-set check is made on what the JVM retains: the heap in use
after ``System.gc()`` must grow by less than 32 MiB across the write and across the read, which
it could not if the store or the driver kept chunks alive (its warm-up body is 64 MiB, which
fills Derby's page cache: 1,000 pages of 32 KiB, retained by design). The RSS growth is still
printed.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable

import pytest

from tests.large.support import chunk_size_of, read_all, stored_names, write_body
from tests.support import profile
from tests.support.backends import BackendSpec, StoreFactory

SIZE = 256 * 1024 * 1024
#: Derby's body in CI (module docstring).
DERBY_SIZE = SIZE if profile.full_matrix() else 128 * 1024 * 1024
LIMIT = 32 * 1024 * 1024
# Writes of a whole chunk and a bit, so every write straddles a chunk boundary.
PIECE = (1 << 20) + 4099


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} is not in /proc/self/status")


def _reset_peak_rss() -> None:
    # "5" resets VmHWM to the current VmRSS (Linux >= 4.0, proc(5)).
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _jvm_retained() -> int:
    """Bytes of Java heap in use after a full collection (0 when no JVM runs)."""
    import jpype

    if not jpype.isJVMStarted():
        return 0
    runtime = jpype.java.lang.Runtime.getRuntime()
    # The least of full collections a moment apart, taken until two in a row agree within
    # 1 MiB (at least three, at most 25: 5 s): Derby's background threads (the post-commit
    # work of the last transactions) may still hold what they work on when the first ones
    # run, for longer on a busy machine (+42 MiB once after three collections 0.2 s apart,
    # +38 MiB again while a JVM wrote a class archive beside the suite). What the store or
    # the driver kept alive would still be there at the last.
    used: list[int] = []
    for _ in range(25):
        jpype.java.lang.System.gc()
        used.append(int(runtime.totalMemory() - runtime.freeMemory()))
        if len(used) >= 3 and abs(used[-1] - used[-2]) < 1 << 20:
            break
        time.sleep(0.2)
    return min(used)


def _measured(work: Callable[[], str], *, jvm: bool) -> tuple[str, float, int, int]:
    """Runs ``work``; returns (its result, seconds, tracemalloc peak, memory growth) in bytes.
    The growth is the resident set's, or with ``jvm`` the retained Java heap's (see module
    docstring), then the RSS growth is printed."""
    gc.collect()
    retained = _jvm_retained() if jvm else 0
    _reset_peak_rss()
    rss = _status_kib("VmRSS")
    tracemalloc.start()
    start = time.perf_counter()
    try:
        result = work()
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    growth = (_status_kib("VmHWM") - rss) * 1024
    if jvm:
        java = _jvm_retained() - retained
        print(f"RSS +{growth / 2**20:.1f} MiB, Java heap retained +{java / 2**20:.1f} MiB")
        growth = java
    return result, seconds, peak, growth


def test_a_body_of_many_times_the_bound_round_trips_in_bounded_memory(
    body_backend: BackendSpec,
    body_store_factory: StoreFactory,
    record_property: Callable[[str, object], None],
) -> None:
    """256 MiB (Derby: :data:`DERBY_SIZE`) written and read back: same sha256, and neither the
    write nor the read grows Python's heap or the process's resident set by 32 MiB or more."""
    size = DERBY_SIZE if body_backend.name == "derby" else SIZE
    lm = body_store_factory.open().large_messages
    # Derby: enough to fill its page cache (1,000 pages of 32 KiB for tables with BLOBs).
    warm_size = 64 * 1024 * 1024 if body_backend.name == "derby" else 3 * chunk_size_of(lm) + 1
    warm = write_body(lm, 1, warm_size, PIECE)
    assert read_all(lm, 1, 1 << 20) == warm

    jvm = body_backend.name == "derby"
    written, write_s, write_peak, write_rss = _measured(
        lambda: write_body(lm, 2, size, PIECE), jvm=jvm
    )
    read, read_s, read_peak, read_rss = _measured(lambda: read_all(lm, 2, 1 << 20), jvm=jvm)

    mib = 1024 * 1024
    growth = "Java heap retained" if jvm else "RSS"
    line = (
        f"{body_backend.name}: write {write_s:.1f} s ({size / mib / write_s:.0f} MiB/s, "
        f"peak {write_peak / mib:.1f} MiB, {growth} +{write_rss / mib:.1f} MiB), "
        f"read {read_s:.1f} s ({size / mib / read_s:.0f} MiB/s, peak {read_peak / mib:.1f} MiB, "
        f"{growth} +{read_rss / mib:.1f} MiB)"
    )
    print(line)
    record_property("large_body", line)
    assert read == written
    assert lm.size(2) == size
    assert write_peak < LIMIT, line
    assert read_peak < LIMIT, line
    assert write_rss < LIMIT, line
    assert read_rss < LIMIT, line
    lm.delete(2)
    lm.delete(1)
    assert stored_names(lm) == []


@pytest.fixture(autouse=True)
def _no_tracemalloc_left() -> None:
    assert not tracemalloc.is_tracing()
