"""Child process of tests/file/test_unclosed_exit.py: open a file store in ``argv[1]``, load
both journals, and end the interpreter without closing the store while the journal's ready
file is still being made (slowed by ``argv[2]`` seconds). Prints nothing."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from store import StoreConfig, open_store
from store.fs import OsFileHandle, OsFileSystem
from tests.support.backends import file_config_mapping


def _pause() -> None:
    if _SlowTemporaries.slow:
        time.sleep(float(sys.argv[2]))


class _SlowHandle(OsFileHandle):
    __slots__ = ()

    def allocate(self, size: int) -> None:
        _pause()
        super().allocate(size)


class _SlowTemporaries(OsFileSystem):
    """A file being made (``.tmp``: a new one allocating, a reused one renamed aside to get
    its fresh header) is slow to get on once ``slow`` is set; everything else as the real
    one."""

    slow = False

    def open(self, path: str, *, create: bool = False, read_only: bool = False) -> OsFileHandle:
        handle = super().open(path, create=create, read_only=read_only)
        if path.endswith(".tmp"):
            return _SlowHandle(handle.path, handle.fd)
        return handle

    def rename(self, src: str, dst: str) -> None:
        super().rename(src, dst)
        if dst.endswith(".tmp"):
            _pause()


def main() -> None:
    config = StoreConfig.from_mapping(file_config_mapping(Path(sys.argv[1]), "NIO"))  # 64 KiB files
    store = open_store(config, fs=_SlowTemporaries())
    store.bindings.load()
    store.messages.load()
    store.messages.append_add(1, 7, b"x" * 2000, sync=True)
    _SlowTemporaries.slow = True
    for i in range(2, 36):  # past the first file: the ready one is taken, the next made
        store.messages.append_add(i, 7, b"x" * 2000, sync=True)
    time.sleep(0.1)  # the next ready file is being made on the journal-preopen thread
    # no close: the interpreter ends here


if __name__ == "__main__":
    main()
