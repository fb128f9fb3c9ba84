"""Page stores in ``paging-directory``: one folder per address (docs/paging.md, reference §5).

Layout::

    <paging-directory>/
        <time-based UUID>/          one folder per address, named str(uuid.uuid1())
            address.txt             the address, UTF-8, followed by one newline
            pages.txt               the page manifest (store.paging.manifest)
            summary.bin             what the last clean close knew of each page
                                    (store.messaging.page_summary; deleted at open)
            000000001.page          pages: records as store.paging.format lays them out
            000000002.page
        attic/                      damaged page records a salvage replaced
                                    (store.data.page_salvage); never a page store

Crash safety, step by step:

- creating a store: make the folder, write an empty page manifest (``pages.txt``,
  :mod:`store.paging.manifest`) and ``address.txt`` each through a ``.tmp`` file that is
  fdatasynced and renamed, then fsync the folder and ``paging-directory``. A folder is a store
  only once it holds ``address.txt``;
- appending: the flusher (:mod:`store.paging.flusher`) writes a batch's records at the end of
  each store's current page file and fdatasyncs every file it wrote once. A new page file is
  created (and the folder fsynced) only after the previous page's file was fdatasynced, so
  every page below the highest is complete: only the highest page can have a torn tail, and
  it is cut back to its last valid record before anything is appended after it. After the
  first batch of a new page is synced the manifest is replaced (every earlier page at its
  final length, the new one at its synced length) before the batch is acknowledged; a clean
  close replaces it once more with the current page at its final length, so that after one
  only what a crash can leave (bytes past the last length the manifest lists) is a torn tail;
- deleting a page rewrites the manifest without it, then unlinks its file and fsyncs the
  folder;
- removing a store renames its folder to ``<name>.removed`` (a tombstone, fsynced) and then
  deletes it: a crash never leaves a half-removed store that looks alive; tombstones found at
  open are deleted.

**What open may delete** (the rule, for this back-end): only what the store can prove is its
own unfinished work. A tombstone folder (it renamed it); a folder without ``address.txt`` that
holds no page record and nothing proving it ever held one (a crash while it was created:
nothing in it can be a message; a ``pages.txt`` listing pages, a damaged one or a
``summary.bin`` is such a proof, and the folder is then kept and reported as
:class:`~store.errors.LostDataError`); a page
file its manifest proves was being deleted. Anything else that is not a healthy store, above
all a folder that holds page records but lost its ``address.txt``, an empty or undecodable
``address.txt``, two folders claiming one address, or a page its manifest lists that is
missing or shortened, is kept as it is and reported: open raises
:class:`~store.errors.CorruptionError` (:class:`~store.errors.LostDataError` for lost pages)
naming the folder or file, and ``store data repair --pages`` adopts or removes it with the
operator's consent (:mod:`store.paging.repair`).

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

from store.errors import CorruptionError, LostDataError, StoreIOError
from store.fs import FileHandle, FileSystem, OsFileSystem
from store.paging.base import SUMMARY_NAME, GroupCommitPagingManager, PageBackend, Survey
from store.paging.flusher import WriteBatch
from store.paging.format import page_file_name, page_number_of
from store.paging.manifest import (
    MANIFEST_NAME,
    Manifest,
    decode_manifest,
    encode_manifest,
    manifest_problems,
)

__all__ = ["ADDRESS_FILE", "ATTIC", "FilePageBackend", "FilePagingManager", "TOMBSTONE_SUFFIX"]

_log = logging.getLogger(__name__)

ADDRESS_FILE = "address.txt"
#: The folder of the paging directory that holds what a salvage set aside (not a page store).
ATTIC = "attic"
TOMBSTONE_SUFFIX = ".removed"
_TMP_SUFFIX = ".tmp"
_REPAIR_HINT = (
    "nothing was deleted; adopt or remove it with `store data repair --pages` "
    "(see `store data verify`)"
)


class _Folder:
    """One address's folder, and the page file appends go to (flusher only)."""

    __slots__ = ("handle", "manifest", "page", "path")

    def __init__(self, path: str, manifest: Manifest | None) -> None:
        self.path = path
        self.page = 0
        self.handle: FileHandle | None = None
        self.manifest = manifest

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

    def survey(self) -> Survey:
        out = Survey()
        if not self.fs.exists(self.directory):
            return out
        for name in sorted(self.fs.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            if name == ATTIC or not self._is_folder(path):
                continue
            if name.endswith(TOMBSTONE_SUFFIX):
                out.leftovers.append((path, "a removal the store had committed"))
                continue
            if not self.fs.exists(os.path.join(path, ADDRESS_FILE)):
                held = self.record_bytes(path)
                proof = None if held else self._proof_of_pages(path)
                if not held and proof is None:
                    out.leftovers.append(
                        (path, f"no {ADDRESS_FILE} and no page record: a crash while created")
                    )
                    continue
                if not held:
                    out.problems.append(
                        LostDataError(
                            path,
                            0,
                            f"page store folder {path} has lost its {ADDRESS_FILE} and its "
                            f"pages, but {proof}: pages existed; it is kept",
                            hint=_REPAIR_HINT,
                        )
                    )
                    continue
                out.problems.append(
                    CorruptionError(
                        path,
                        0,
                        f"page store folder {path} holds {held} bytes of page records but has "
                        f"no {ADDRESS_FILE}; it is kept",
                        hint=_REPAIR_HINT,
                    )
                )
                continue
            try:
                address = self.read_address(path)
                manifest = self.read_manifest(path)
            except CorruptionError as exc:
                out.problems.append(exc)
                continue
            if address in out.stores:
                other = _folder(out.stores[address]).path
                out.problems.append(
                    CorruptionError(
                        path,
                        0,
                        f"page store folder {path} claims address {address!r}, as {other} does",
                        hint=_REPAIR_HINT,
                    )
                )
                continue
            out.stores[address] = _Folder(path, manifest)
        return out

    def _proof_of_pages(self, path: str) -> str | None:
        """What in the folder at ``path`` (no ``address.txt``, no page record) proves it was a
        working page store rather than one a crash interrupted while it was made (which writes
        an empty ``pages.txt``, then ``address.txt``): a manifest listing pages, one that does
        not decode, or a page summary (written at a clean close). None when nothing does.
        Raises StoreIOError."""
        if self.fs.exists(os.path.join(path, SUMMARY_NAME)):
            return f"it holds a page summary ({SUMMARY_NAME})"
        try:
            manifest = self.read_manifest(path)
        except CorruptionError:
            return f"its {MANIFEST_NAME} is there and damaged"
        if manifest is not None and manifest.listed():
            pages = ", ".join(str(n) for n in sorted(manifest.listed()))
            return f"its {MANIFEST_NAME} lists page(s) {pages}"
        return None

    def _is_folder(self, path: str) -> bool:
        """Whether ``path`` is a folder. The seam has no such query: on a seam that is not the
        operating system's (a test's in-memory one) every entry of the paging directory is
        one, as the store makes nothing else there."""
        return os.path.isdir(path) if self.fs.native else self.fs.exists(path)

    def discover(self) -> dict[str, Hashable]:
        self.fs.makedirs(self.directory)
        return super().discover()

    def remove_leftover(self, where: str) -> None:
        self._delete_folder(where)

    def adopt(self, stores: dict[str, Hashable]) -> None:
        self._folders.extend(_folder(f) for f in stores.values())

    def record_bytes(self, path: str) -> int:
        """Bytes in the page files of the folder at ``path``. Raises StoreIOError."""
        total = 0
        for name in self.fs.listdir(path):
            if page_number_of(name) is not None:
                total += self._file_size(os.path.join(path, name)) or 0
        return total

    def read_address(self, path: str) -> str:
        """The address in the folder at ``path``'s ``address.txt``. Raises CorruptionError
        when it is empty or not UTF-8, StoreIOError."""
        file = os.path.join(path, ADDRESS_FILE)
        data = self._read_file(file) or b""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptionError(
                file, exc.start, "the address is not UTF-8", hint=_REPAIR_HINT
            ) from None
        text = text[:-1] if text.endswith("\n") else text
        if not text:
            raise CorruptionError(file, 0, "the address is empty", hint=_REPAIR_HINT)
        return text

    def read_manifest(self, path: str) -> Manifest | None:
        """The page manifest of the folder at ``path``, None when it has none (written before
        manifests). Raises CorruptionError, StoreIOError."""
        file = os.path.join(path, MANIFEST_NAME)
        data = self._read_file(file)
        return None if data is None else decode_manifest(data, path=file)

    def _file_size(self, path: str) -> int | None:
        try:
            handle = self.fs.open(path, read_only=True)
        except StoreIOError:
            if not self.fs.exists(path):
                return None
            raise
        try:
            return handle.size()
        finally:
            handle.close()

    @staticmethod
    def store_path(locator: Hashable) -> str:
        """The folder of the store ``locator``. Raises nothing."""
        return _folder(locator).path

    def write_named(self, folder_path: str, name: str, data: bytes) -> None:
        """Write the file ``name`` in the folder at ``folder_path`` atomically and durably
        (``store.paging.repair``'s adopt and accept). Raises StoreIOError."""
        self._replace(folder_path, name, data)

    def _replace(self, folder_path: str, name: str, data: bytes) -> None:
        """Write ``name`` in the folder atomically and durably (tmp, fdatasync, rename, fsync
        of the folder)."""
        tmp = os.path.join(folder_path, name + _TMP_SUFFIX)
        handle = self.fs.open(tmp, create=True)
        try:
            handle.truncate(0)
            handle.pwrite(data, 0)
            handle.datasync()
        finally:
            handle.close()
        self.fs.rename(tmp, os.path.join(folder_path, name))
        self.fs.fsync_dir(folder_path)

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
        manifest = Manifest()
        self._replace(path, MANIFEST_NAME, encode_manifest(manifest))
        self._replace(path, ADDRESS_FILE, (address + "\n").encode("utf-8"))
        self.fs.fsync_dir(self.directory)
        folder = _Folder(path, manifest)
        self._folders.append(folder)
        return folder

    def page_size(self, configured: int) -> int:
        return configured

    def page_numbers(self, locator: Hashable) -> list[int]:
        return sorted(self._page_sizes(_folder(locator)))

    def _page_sizes(self, folder: _Folder) -> dict[int, int]:
        out: dict[int, int] = {}
        for name in self.fs.listdir(folder.path):
            page = page_number_of(name)
            if page is not None:
                size = self._file_size(os.path.join(folder.path, name))
                if size is not None:
                    out[page] = size
        return out

    def manifest(self, locator: Hashable) -> Manifest | None:
        return _folder(locator).manifest

    def problems(self, locator: Hashable) -> list[CorruptionError]:
        folder = _folder(locator)
        if folder.manifest is None:
            return []
        sizes = self._page_sizes(folder)
        paths = {p: self._page_file(folder, p) for p in folder.manifest.listed()}
        where = os.path.join(folder.path, MANIFEST_NAME)
        return manifest_problems(folder.manifest, sizes, where=where, page_path=paths)

    def stale_pages(self, locator: Hashable) -> list[int]:
        folder = _folder(locator)
        manifest = folder.manifest
        if manifest is None:
            return []
        listed, highest = manifest.listed(), manifest.highest()
        return [p for p in self.page_numbers(folder) if p < highest and p not in listed]

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

    def overwrite(self, locator: Hashable, page: int, offset: int, data: bytes) -> None:
        handle = self.fs.open(self._page_file(_folder(locator), page))
        try:
            if offset < 0 or offset + len(data) > handle.size():
                raise ValueError(f"bytes {offset}..{offset + len(data)} are past page {page}")
            handle.pwrite(data, offset)
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
                current = folder.manifest.current if folder.manifest is not None else None
                if current is None or current[0] != folder.page:
                    self._note_roll(folder)

    def _note_roll(self, folder: _Folder) -> None:
        """Replace the manifest after the first synced batch of the folder's page (module
        docstring): every other page present at its length, this one at its synced length."""
        assert folder.handle is not None
        old = folder.manifest or Manifest()
        pages = dict(old.pages)
        for page, size in self._page_sizes(folder).items():
            if page not in pages and page != folder.page:
                pages[page] = size
        manifest = Manifest(pages, (folder.page, folder.handle.size()))
        self._replace(folder.path, MANIFEST_NAME, encode_manifest(manifest))
        folder.manifest = manifest

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
        if folder.manifest is not None and page in folder.manifest.listed():
            manifest = folder.manifest.without(page)
            self._replace(folder.path, MANIFEST_NAME, encode_manifest(manifest))
            folder.manifest = manifest
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
        if not self.fs.native:
            return  # a seam of a test: its empty folder stays (it has no call to remove one)
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreIOError(
                f"cannot remove page store folder {path}: {exc.strerror or exc}", path=path
            ) from exc
        self.fs.fsync_dir(self.directory)

    def page_lengths(self, locator: Hashable) -> dict[int, int]:
        return self._page_sizes(_folder(locator))

    def read_summary(self, locator: Hashable) -> bytes | None:
        return self._read_file(os.path.join(_folder(locator).path, SUMMARY_NAME))

    def write_summary(self, locator: Hashable, data: bytes | None) -> None:
        folder = _folder(locator)
        if data is not None:
            self._replace(folder.path, SUMMARY_NAME, data)
        elif self.fs.exists(path := os.path.join(folder.path, SUMMARY_NAME)):
            self.fs.remove(path)
            self.fs.fsync_dir(folder.path)

    def note_clean_close(self) -> None:
        """Each folder's current page, written to since open, gets its final length in the
        manifest (``current <page> <length>``; the flusher synced every byte of it): at the
        next open, a page shorter than that, or damaged before it, is LostDataError, not a
        torn tail to cut (what a crash leaves is only ever past the last durable length)."""
        for folder in self._folders:
            handle, manifest = folder.handle, folder.manifest
            if handle is None or manifest is None or manifest.current is None:
                continue
            page, listed = manifest.current
            size = handle.size()
            if page != folder.page or size <= listed:
                continue
            handle.datasync()
            closed = Manifest(dict(manifest.pages), (page, size))
            self._replace(folder.path, MANIFEST_NAME, encode_manifest(closed))
            folder.manifest = closed

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
        read_only: bool = False,
    ) -> None:
        super().__init__(
            FilePageBackend(directory, fs=fs),
            page_size_of=page_size_of,
            sync_timeout_ns=sync_timeout_ns,
            read_only=read_only,
        )
