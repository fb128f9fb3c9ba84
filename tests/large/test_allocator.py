"""Chunk-sized objects come from the heap once a large-message store is open
(``store.large.chunks.settle_allocator``): a driver's 1 MiB rows, read one after another,
no longer fault in fresh pages each. Run in a child process, whose allocator state is its own.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHILD = textwrap.dedent(
    """
    import os, resource, sys
    from store.large.chunks import CHUNK_SIZE
    from store.large.files import FileLargeMessages
    from store.fs import OsFileSystem

    if sys.argv[2] == "open":
        FileLargeMessages(sys.argv[1], fs=OsFileSystem())
    row = os.urandom(CHUNK_SIZE + 4)

    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    held = bytes(bytearray(row))  # one round first, as a reader's first chunk
    del held
    before = faults()
    for _ in range(50):  # a row at a time, each dropped before the next: a reader's pattern
        held = bytes(bytearray(row))
        del held
    print(faults() - before)
    """
)


def _faults(tmp_path: Path, mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "lm"), mode],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_chunk_sized_objects_reuse_heap_pages_once_a_store_is_open(tmp_path: Path) -> None:
    """50 copies of a 1 MiB + 4 byte row (2 objects each) fault in fewer than 5 % of their
    pages once a store is open; without one, each is a fresh mapping (the control).

    A fault is not a page: a kernel with multi-size transparent huge pages for anonymous
    memory (``/sys/kernel/mm/transparent_hugepage/hugepages-16kB/enabled`` = always, as on
    this machine kind's 6.18 kernels) maps a fresh mapping 16 KiB or more a fault, so the
    control faults a quarter of its pages there. What tells a fresh mapping is that every
    copy faults again: at least one fault per object, and many times what the settled
    allocator takes."""
    objects = 50 * 2
    pages = objects * ((1 << 20) // 4096)
    control = _faults(tmp_path, "none")
    settled = _faults(tmp_path, "open")
    assert control >= objects, f"the control faulted only {control} times for {objects} objects"
    assert settled < pages // 20, f"{settled} page faults for {pages} pages of rows"
    assert settled * 4 < control, f"{settled} page faults, the control's {control}"
