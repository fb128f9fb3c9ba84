"""The file node manager: the live/backup lock of a file store as lock files in
``node-manager-lock-directory`` (docs/ha.md, reference §7, Artemis's FileLockNodeManager).

Files (created when missing, the directory too):

==================  =========================================================================
file                content and lock
==================  =========================================================================
``server.lock``     19 bytes, Artemis's layout: byte 0 the state (``L`` ACTIVE, ``F`` FAILING_BACK,
                    ``P`` PAUSED, ``N`` or ``0`` NOT_STARTED), bytes 1-2 ``'0'``, bytes 3-18 the
                    16-byte node UUID (time-based, written once, by whichever node creates the
                    file, under the state lock). The **state lock** is an exclusive lock on the
                    whole file, held only while byte 0 is read or written (a write is fsynced).
``serverlock.1``    the **live (primary) lock**: an exclusive lock on the whole file. Its holder
                    writes ``"<generation> <holder>\\n"`` into it (generation = the previous
                    one + 1) and ``"<generation> \\n"`` when it releases it: the generation lives
                    here, so ``server.lock`` stays exactly Artemis's 19 bytes.
``serverlock.2``    the **backup lock**: an exclusive lock on the whole file.
==================  =========================================================================

Locks are ``fcntl`` open-file-description record locks (``F_OFD_SETLK``) over the whole file:
they conflict with the POSIX record locks Java's ``FileChannel.tryLock`` takes (so an Artemis
broker and this library exclude each other on a shared directory), the kernel drops them when
the process dies, and unlike classic POSIX locks they belong to the open file, so two node
managers of one process exclude each other too (tests rely on it). Where OFD locks are missing
``flock`` is used (same exclusion, but not against Java's locks).

A waiting node tries every 0.5 s. The **lock monitor** (the node manager's thread, every
0.5 s) reports the live lock lost when ``serverlock.1`` was deleted or replaced under it (its
path no longer names the file this node locked), when ``server.lock`` disappeared, or when
``server.lock`` was modified by someone else while its state reads ACTIVE (a backup that took
over wrote it: ARTEMIS-4143's split-brain check for NFS). ``Lease.expires_at_ms`` is None: a
file lock does not expire, it is held until released or the holder dies.

File-store writes are not fenced (a file write has no transaction to check a lock in): a node
that lost the lock learns it from ``on_lock_lost`` and must stop writing. A store whose write
failed gives the lock up (:mod:`store.ha.watch`): the lock file is released once the
callbacks ran, and the backup goes live on its next try (0.5 s).

**A frozen live node keeps the lock: the file pair does not fail over then.** A file lock has
no expiry; the kernel drops it only when the process dies (or closes the file). A live node
stopped with ``SIGSTOP``, paused by a debugger or a stalled VM, holds ``serverlock.1`` however
long it is stopped, and the backup waits until it continues or dies — so two nodes are never
live at once, at the price of no failover from a frozen node (Artemis's file lock behaves the
same; the database pair's lease expires instead, and its fence stops the woken node).

Thread-safety: as :class:`~store.ha.api.NodeManager`. The state lock is an OFD lock, which
belongs to the open file and so does not exclude this node's own threads; a thread lock
(``_server_guard``) does, so the lock monitor never takes the node's own write of ACTIVE for
another node's.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
import struct
import threading
import uuid
from typing import TYPE_CHECKING

from store.errors import StoreIOError
from store.ha.api import STATE_LETTERS, Lease, NodeManager, state_of_letter

if TYPE_CHECKING:
    from store.config import StoreConfig

__all__ = ["BACKUP_LOCK", "PRIMARY_LOCK", "SERVER_LOCK", "FileNodeManager", "live_holder"]

_log = logging.getLogger(__name__)

SERVER_LOCK = "server.lock"
PRIMARY_LOCK = "serverlock.1"
BACKUP_LOCK = "serverlock.2"
_SIZE = 19
_POLL_SECONDS = 0.5
# struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks), padded to 32 bytes.
_FLOCK = struct.Struct("hhqqi4x")
_OFD = hasattr(fcntl, "F_OFD_SETLK")


def _lock(fd: int, *, wait: bool) -> bool:
    """Exclusively lock the whole file ``fd``; returns False when another holds it (and
    ``wait`` is False). Raises OSError for other failures."""
    if _OFD:
        cmd = fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK
        try:
            fcntl.fcntl(fd, cmd, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
            return True
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False


def _unlock(fd: int) -> None:
    if _OFD:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, 0, 0, 0))
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _locked_elsewhere(fd: int) -> bool:
    """Whether another open file (or process) holds a lock on ``fd``'s file."""
    if not _OFD:
        if _lock(fd, wait=False):
            _unlock(fd)
            return False
        return True
    answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
    return bool(_FLOCK.unpack(answer)[0] != fcntl.F_UNLCK)


def _read_generation(fd: int) -> tuple[int, str | None]:
    text = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    head, _, rest = text.partition(" ")
    if not head.isdigit():
        return 0, None
    return int(head), rest.strip() or None


def live_holder(directory: str) -> str | None:
    """Who holds the live lock in the lock directory ``directory`` (None: nobody, or no
    node manager ever ran there). A plain open of a file store refuses to write under a live
    HA node with it. Returns the holder text; raises nothing (unreadable means unknown)."""
    try:
        fd = os.open(os.path.join(directory, PRIMARY_LOCK), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not _OFD:
            return None  # flock cannot be probed without taking it on a read-only file
        answer = fcntl.fcntl(
            fd, fcntl.F_OFD_GETLK, _FLOCK.pack(fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0)
        )
        if _FLOCK.unpack(answer)[0] == fcntl.F_UNLCK:
            return None
        return _read_generation(fd)[1] or "another process"
    except OSError:
        return None
    finally:
        os.close(fd)


class FileNodeManager(NodeManager):
    """The live/backup lock of one file store (module docstring). Construction creates the
    lock directory and the three files when missing and sets the node id.

    Raises (constructor) StoreIOError when the directory or a file cannot be used.
    """

    kind = "file"

    def __init__(self, config: StoreConfig) -> None:
        super().__init__(poll_seconds=_POLL_SECONDS, tick_seconds=_POLL_SECONDS)
        self.directory = os.path.abspath(config.node_manager_lock_directory)
        self.holder = f"pid {os.getpid()} on {socket.gethostname()} ({uuid.uuid4().hex[:12]})"
        self._generation = 0
        self._server_mtime = 0
        # An OFD lock belongs to the open file, so it does not exclude this node's own
        # threads: the lock monitor would otherwise read the node's own state write (its
        # mtime newer than the one recorded, byte 0 ACTIVE) as another node's and give up
        # the lock it had just taken. Every use of server.lock's mtime goes under this lock.
        self._server_guard = threading.RLock()
        self._primary_identity: tuple[int, int] | None = None
        self._fds: list[int] = []
        try:
            os.makedirs(self.directory, exist_ok=True)
            self._server = self._open(SERVER_LOCK)
            self._primary = self._open(PRIMARY_LOCK)
            self._backup_fd = self._open(BACKUP_LOCK)
            self._node_id = self._setup_server_lock()
        except OSError as exc:
            self._dispose()
            raise StoreIOError(
                f"HA: cannot use the lock directory {self.directory}: {exc.strerror or exc}",
                path=self.directory,
                hint="check node-manager-lock-directory (both nodes must see the same folder)",
            ) from exc

    def _open(self, name: str) -> int:
        fd = os.open(os.path.join(self.directory, name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        self._fds.append(fd)
        return fd

    def _setup_server_lock(self) -> str:
        _lock(self._server, wait=True)
        try:
            data = os.pread(self._server, _SIZE, 0)
            if len(data) < _SIZE:
                data = b"000" + uuid.uuid1().bytes
                os.pwrite(self._server, data, 0)
                os.fsync(self._server)
            return str(uuid.UUID(bytes=data[3:_SIZE]))
        finally:
            _unlock(self._server)

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def _io(self, what: str, exc: OSError) -> StoreIOError:
        return StoreIOError(
            f"HA: {what} in {self.directory} failed: {exc.strerror or exc}", path=self.directory
        )

    # -- NodeManager -----------------------------------------------------------------------

    @property
    def node_id(self) -> str:
        return self._node_id

    @property
    def state(self) -> str:
        try:
            with self._server_guard:
                _lock(self._server, wait=True)
                try:
                    letter = os.pread(self._server, 1, 0).decode("ascii", "replace")
                finally:
                    _unlock(self._server)
            return state_of_letter(letter)
        except OSError as exc:
            raise self._io("reading the state", exc) from exc

    def _set_state(self, state: str) -> None:
        try:
            with self._server_guard:
                _lock(self._server, wait=True)
                try:
                    os.pwrite(self._server, STATE_LETTERS[state].encode(), 0)
                    os.fsync(self._server)
                    self._server_mtime = os.fstat(self._server).st_mtime_ns
                finally:
                    _unlock(self._server)
        except OSError as exc:
            raise self._io(f"writing state {state}", exc) from exc

    @property
    def lease(self) -> Lease:
        try:
            generation, holder = _read_generation(self._primary)
            if self._live:
                return Lease(self.holder, self._generation, None)
            held = _locked_elsewhere(self._primary)
        except OSError as exc:
            raise self._io("reading the live lock", exc) from exc
        return Lease(holder if held else None, generation, None)

    def _try_live(self) -> bool:
        try:
            if not _lock(self._primary, wait=False):
                return False
            generation = _read_generation(self._primary)[0] + 1
            os.ftruncate(self._primary, 0)
            os.pwrite(self._primary, f"{generation} {self.holder}\n".encode(), 0)
            os.fsync(self._primary)
            st = os.fstat(self._primary)
        except OSError as exc:
            raise self._io("taking the live lock", exc) from exc
        with self._mutex:
            self._generation = generation
            self._primary_identity = (st.st_dev, st.st_ino)
        _log.info("HA: took the live lock in %s, generation %d", self.directory, generation)
        return True

    def _release_live(self) -> None:
        try:
            os.ftruncate(self._primary, 0)
            os.pwrite(self._primary, f"{self._generation} \n".encode(), 0)
            os.fsync(self._primary)
            _unlock(self._primary)
        except OSError as exc:
            raise self._io("releasing the live lock", exc) from exc

    def _try_backup(self) -> bool:
        try:
            return _lock(self._backup_fd, wait=False)
        except OSError as exc:
            raise self._io("taking the backup lock", exc) from exc

    def _release_backup(self) -> None:
        try:
            _unlock(self._backup_fd)
        except OSError as exc:
            raise self._io("releasing the backup lock", exc) from exc

    def _went_live(self) -> None:
        with self._server_guard:
            try:
                self._server_mtime = os.stat(self._path(SERVER_LOCK)).st_mtime_ns
            except OSError:
                self._server_mtime = 0
        super()._went_live()

    def _tick(self) -> None:
        if not self._live:
            return
        problem = self._monitor_problem()
        if problem is not None:
            self._lock_lost(problem)

    def _monitor_problem(self) -> str | None:
        try:
            st = os.stat(self._path(PRIMARY_LOCK))
        except FileNotFoundError:
            return f"{PRIMARY_LOCK} was deleted"
        except OSError as exc:
            return f"{PRIMARY_LOCK} cannot be read: {exc}"
        if (st.st_dev, st.st_ino) != self._primary_identity:
            return f"{PRIMARY_LOCK} was replaced by another file"
        with self._server_guard:  # this node's own state write is not another node's
            try:
                server = os.stat(self._path(SERVER_LOCK))
            except OSError as exc:
                return f"{SERVER_LOCK} cannot be read: {exc}"
            if server.st_mtime_ns <= self._server_mtime:
                return None
            try:
                state = self.state
            except StoreIOError as exc:
                return str(exc)
            if state == "ACTIVE":
                return f"{SERVER_LOCK} was rewritten by another node while ACTIVE"
            self._server_mtime = server.st_mtime_ns
        return None

    def _dispose(self) -> None:
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []
