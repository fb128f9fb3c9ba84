"""Page stores in ``paging-directory``: one folder per address (DESIGN §7.2, reference §5).

Layout::

    <paging-directory>/
        <time-based UUID>/          one folder per address, named str(uuid.uuid1())
            address.txt             the address, UTF-8, followed by one newline
            000000001.page          pages: records as store.paging.format lays them out
            000000002.page

Crash safety, step by step:

- creating a store: make the folder, write ``address.txt.tmp``, fdatasync it, rename it to
  ``address.txt``, fsync the folder and ``paging-directory``. A folder is a store only once
  it holds ``address.txt``; a folder without one is what a crash left while creating a store
  and is removed at open (a warning is logged);
- appending: the flusher (:mod:`store.paging.flusher`) writes a batch's records at the end of
  each store's current page file and fdatasyncs every file it wrote once. A new page file is
  created (and the folder fsynced) only after the previous page's file was fdatasynced, so
  every page below the highest is complete: only the highest page can have a torn tail, and
  it is cut back to its last valid record before anything is appended after it;
- deleting a page unlinks its file and fsyncs the folder;
- removing a store renames its folder to ``<name>.removed`` (a tombstone, fsynced) and then
  deletes it: a crash never leaves a half-removed store that looks alive; tombstones found at
  open are deleted.

Pages are read whole (at most ``page-size-bytes``, 10 MiB by default, plus one record that
does not fit a page; Artemis reads them whole too). File I/O goes through the ``store.fs``
seam, except removing an empty folder (``os.rmdir``), which the seam has no call for.

Thread-safety: see :class:`~store.paging.base.PageBackend`; one folder's open page file is
touched only under the flusher's ``io_lock``.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Hashable

from store.errors import StoreIOError
from store.fs import FileHandle, FileSystem, OsFileSystem
from store.paging.base import GroupCommitPagingManager, PageBackend
from store.paging.flusher import WriteBatch
from store.paging.format import page_file_name, page_number_of

__all__ = ["ADDRESS_FILE", "FilePageBackend", "FilePagingManager", "TOMBSTONE_SUFFIX"]

_log = logging.getLogger(__name__)

ADDRESS_FILE = "address.txt"
TOMBSTONE_SUFFIX = ".removed"
_TMP_SUFFIX = ".tmp"


class _Folder:
    """One address's folder, and the page file appends go to (flusher only)."""

    __slots__ = ("handle", "page", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self.page = 0
        self.handle: FileHandle | None = None

    def close_page(self) -> None:
        handle, self.handle, self.page = self.handle, None, 0
        if handle is not None:
            handle.close()


class FilePageBackend(PageBackend):
    """Pages in files under ``directory`` (layout in the module docstring); ``fs`` is the
    file-system seam (default: the real one)."""

    torn_tails = True

    def __init__(self, directory: str, *, fs: FileSystem | None = None) -> None:
        self.directory = directory
        self.fs = fs or OsFileSystem()
        self._folders: list[_Folder] = []

    def describe(self) -> str:
        return self.directory

    def discover(self) -> dict[str, Hashable]:
        self.fs.makedirs(self.directory)
        found: dict[str, Hashable] = {}
        for name in self.fs.listdir(self.directory):
            path = os.path.join(self.directory, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(TOMBSTONE_SUFFIX):
                _log.info("finishing the removal of page store folder %s", path)
                self._delete_folder(path)
                continue
            if not self.fs.exists(os.path.join(path, ADDRESS_FILE)):
                _log.warning(
                    "removing page store folder %s: it has no %s (a crash while it was created)",
                    path,
                    ADDRESS_FILE,
                )
                self._delete_folder(path)
                continue
            address = self._read_address(path)
            if address in found:
                _log.warning(
                    "page store folder %s repeats address %r; it is ignored", path, address
                )
                continue
            folder = _Folder(path)
            self._folders.append(folder)
            found[address] = folder
        return found

    def _read_address(self, path: str) -> str:
        data = self._read_file(os.path.join(path, ADDRESS_FILE)) or b""
        text = data.decode("utf-8", errors="replace")
        return text[:-1] if text.endswith("\n") else text

    def _read_file(self, path: str) -> bytes | None:
        try:
            handle = self.fs.open(path, read_only=True)
        except StoreIOError:
            if not self.fs.exists(path):
                return None
            raise
        try:
            return handle.pread(handle.size(), 0)
        finally:
            handle.close()

    def create(self, address: str) -> Hashable:
        path = os.path.join(self.directory, str(uuid.uuid1()))
        self.fs.makedirs(path)
        tmp = os.path.join(path, ADDRESS_FILE + _TMP_SUFFIX)
        handle = self.fs.open(tmp, create=True)
        try:
            handle.truncate(0)
            handle.pwrite((address + "\n").encode("utf-8"), 0)
            handle.datasync()
        finally:
            handle.close()
        self.fs.rename(tmp, os.path.join(path, ADDRESS_FILE))
        self.fs.fsync_dir(path)
        self.fs.fsync_dir(self.directory)
        folder = _Folder(path)
        self._folders.append(folder)
        return folder

    def page_size(self, configured: int) -> int:
        return configured

    def page_numbers(self, locator: Hashable) -> list[int]:
        folder = _folder(locator)
        numbers = (page_number_of(name) for name in self.fs.listdir(folder.path))
        return sorted(n for n in numbers if n is not None)

    def read_bytes(self, locator: Hashable, page: int) -> bytes | None:
        return self._read_file(self._page_file(_folder(locator), page))

    def page_path(self, locator: Hashable, page: int) -> tuple[str, str]:
        return self._page_file(_folder(locator), page), ""

    def cut(self, locator: Hashable, page: int, length: int) -> None:
        handle = self.fs.open(self._page_file(_folder(locator), page))
        try:
            handle.truncate(length)
            handle.datasync()
        finally:
            handle.close()

    def write(self, batch: WriteBatch) -> None:
        for locator, chunks in batch:
            folder = _folder(locator)
            for chunk in chunks:
                if folder.handle is None or folder.page != chunk.page:
                    self._switch_page(folder, chunk.page)
                assert folder.handle is not None
                folder.handle.pwrite(chunk.data, folder.handle.size())
            if folder.handle is not None:
                folder.handle.datasync()

    def _switch_page(self, folder: _Folder, page: int) -> None:
        """Make ``page`` the folder's open page file, the previous one synced first (every
        page below the highest is complete: module docstring)."""
        if folder.handle is not None:
            folder.handle.datasync()
        folder.close_page()
        path = self._page_file(folder, page)
        created = not self.fs.exists(path)
        folder.handle = self.fs.open(path, create=True)
        folder.page = page
        if created:
            self.fs.fsync_dir(folder.path)

    def delete_page(self, locator: Hashable, page: int) -> None:
        folder = _folder(locator)
        if folder.page == page:
            folder.close_page()
        self.fs.remove(self._page_file(folder, page))
        self.fs.fsync_dir(folder.path)

    def remove(self, locator: Hashable) -> None:
        folder = _folder(locator)
        folder.close_page()
        if folder in self._folders:
            self._folders.remove(folder)
        tombstone = folder.path + TOMBSTONE_SUFFIX
        self.fs.rename(folder.path, tombstone)
        self.fs.fsync_dir(self.directory)
        self._delete_folder(tombstone)

    def _delete_folder(self, path: str) -> None:
        for name in self.fs.listdir(path):
            self.fs.remove(os.path.join(path, name))
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreIOError(
                f"cannot remove page store folder {path}: {exc.strerror or exc}", path=path
            ) from exc
        self.fs.fsync_dir(self.directory)

    def close(self) -> None:
        for folder in self._folders:
            folder.close_page()

    @staticmethod
    def _page_file(folder: _Folder, page: int) -> str:
        return os.path.join(folder.path, page_file_name(page))


def _folder(locator: Hashable) -> _Folder:
    assert isinstance(locator, _Folder)
    return locator


class FilePagingManager(GroupCommitPagingManager):
    """Every address's page store under ``directory`` (``paging-directory``).

    ``page_size_of(address)`` gives ``page-size-bytes``; ``sync_timeout_ns`` is
    ``page-sync-timeout``; ``fs`` replaces the file-system seam. Construction creates the
    directory when missing and rediscovers the stores in it; raises StoreIOError.
    """

    def __init__(
        self,
        directory: str,
        *,
        page_size_of: Callable[[str], int],
        sync_timeout_ns: int,
        fs: FileSystem | None = None,
    ) -> None:
        super().__init__(
            FilePageBackend(directory, fs=fs),
            page_size_of=page_size_of,
            sync_timeout_ns=sync_timeout_ns,
        )
