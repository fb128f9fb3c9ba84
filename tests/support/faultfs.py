"""An in-memory file system for the file-system seam that simulates crashes and I/O faults.

It implements :class:`store.fs.FileSystem` / :class:`~store.fs.FileHandle` exactly
(same methods, same ``StoreIOError`` wrapping as :class:`~store.fs.OsFileSystem`) and
models durability the way SQLite's ``test6.c`` does:

- every file (an *inode*) has **durable** content plus a list of **unsynced operations**
  (``pwrite``, ``allocate``, ``truncate``) applied to the content the process sees;
  ``datasync`` of any handle of the file makes them all durable;
- directory entries change by **directory operations** (create, rename, remove) that are
  volatile until ``fsync_dir`` of a directory they touch; they are kept in one list in call
  order, because journaling file systems (ext4, xfs) commit metadata in order, so a crash
  leaves a prefix of the operations still pending;
- directories themselves (``makedirs``) are durable at once: the journal makes its directories
  once, before anything is written, and losing one would only lose an empty store.

:meth:`FaultFileSystem.snapshot` freezes "what a crash now could leave" into a
:class:`Snapshot`; :meth:`Snapshot.crash` turns it into a NEW :class:`FaultFileSystem` holding
one possible outcome, chosen by a :data:`CrashMode` and a ``random.Random``:

=============  ====================================================================================
mode           what survives of the unsynced state
=============  ====================================================================================
``process``    everything (a ``kill -9``: the page cache survives the process)
``drop``       nothing: every unsynced write and directory operation is lost
``random``     each unsynced write independently applied, dropped or torn; a random prefix of
               the pending directory operations
``prefix``     the unsynced writes in call order up to a random cut (the write at the cut torn
               half of the time), the rest dropped; a random prefix of the directory operations
``tear-last``  everything except the last unsynced write, which is torn; all directory operations
``reorder``    unsynced writes as in ``random``; each pending directory operation kept or lost on
               its own (plain POSIX promises no order between directory operations that were
               not synced; ``random`` and ``prefix`` model the ordered metadata journal of ext4)
=============  ====================================================================================

A torn write keeps a prefix of its bytes: any length, or up to a 512-byte sector boundary, or up
to a sector boundary followed by one sector of garbage (random bytes).

Fault injection (counted from the moment it is armed, among calls of one kind, or of several
kinds counted together, whose path matches an optional predicate): :meth:`FaultFileSystem.fail`
makes the Nth call raise an ``OSError`` (``ENOSPC``, ``EIO``, …) that reaches the caller as
:class:`~store.errors.StoreIOError`, exactly as the real seam wraps it; :meth:`crash_at`
records a :class:`Snapshot` just before or just after the Nth call and, with ``stop=True``,
kills the machine: that call (when "before") and every later one fail with ``EIO``.
:meth:`watch` calls a function before and after every call, for tests that snapshot at many
points of one run. :meth:`mount_read_only` makes it behave as a read-only mount (``EROFS`` for
an open that could write and for every directory change). Every snapshot carries
``context``: what the ``context`` callable passed to the constructor returned at that instant
(crash tests store their acknowledged-operation count there).

Thread-safety: every method may be called from any thread; one re-entrant lock serialises all
calls, and hooks run under it (so a snapshot taken from a hook is consistent).

Why one ~800-line module (docs/conventions.md#13): the crash model (:class:`Snapshot`, the fates of
unsynced operations) and the file system that records what it needs are two halves of one
durability contract that must change together; a third of the module is docstrings.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from store.errors import StoreIOError
from store.fs import _io_error

__all__ = [
    "CALL_KINDS",
    "SECTOR",
    "Call",
    "CrashMode",
    "DirOp",
    "FaultFileSystem",
    "FaultHandle",
    "Phase",
    "Snapshot",
    "Unsynced",
]

SECTOR = 512
_T = TypeVar("_T")

CrashMode = Literal["process", "drop", "random", "prefix", "tear-last", "reorder"]
Phase = Literal["before", "after"]

#: Every call kind a fault or hook can name.
CALL_KINDS = frozenset(
    {
        "open", "pread", "pwrite", "datasync", "size", "allocate", "truncate", "close",
        "rename", "remove", "fsync_dir", "listdir", "exists", "makedirs",
    }
)  # fmt: skip

# What the real seam says when a call fails, so messages and hints match OsFileSystem's.
_WHAT = {
    "open": "cannot open",
    "pread": "cannot read",
    "pwrite": "cannot write",
    "datasync": "cannot sync",
    "size": "cannot stat",
    "allocate": "cannot allocate",
    "truncate": "cannot truncate",
    "remove": "cannot remove",
    "fsync_dir": "cannot sync directory",
    "listdir": "cannot list",
    "makedirs": "cannot create directory",
}


@dataclass(frozen=True, slots=True)
class Unsynced:
    """One data operation not yet made durable: ``kind`` write / allocate / truncate.

    ``seq`` orders every unsynced operation of the file system; ``size`` is the target size of
    an allocate or truncate.
    """

    seq: int
    kind: Literal["write", "allocate", "truncate"]
    offset: int = 0
    data: bytes = b""
    size: int = 0


@dataclass(frozen=True, slots=True)
class DirOp:
    """One directory operation not yet made durable (``create``, ``rename`` or ``remove``)."""

    seq: int
    kind: Literal["create", "rename", "remove"]
    path: str
    ino: int
    dst: str = ""

    def dirs(self) -> tuple[str, ...]:
        """Returns the directories whose ``fsync_dir`` makes this operation durable."""
        if self.kind == "rename":
            return (os.path.dirname(self.path), os.path.dirname(self.dst))
        return (os.path.dirname(self.path),)


@dataclass(frozen=True, slots=True)
class Call:
    """A call seen by a :meth:`FaultFileSystem.watch` hook; ``index`` counts every call."""

    kind: str
    path: str
    phase: Phase
    index: int
    dst: str = ""
    offset: int = 0
    length: int = 0
    read_only: bool = False  # an open for reading only


class _Inode:
    __slots__ = ("data", "durable", "ino", "pending")

    def __init__(self, ino: int, content: bytes = b"") -> None:
        self.ino = ino
        self.durable: bytes = bytes(content)
        self.data = bytearray(content)  # what reads see: durable + pending applied
        self.pending: list[Unsynced] = []


def _apply(content: bytearray, op: Unsynced, keep: int | None = None, garbage: bytes = b"") -> None:
    """Applies ``op`` (or the first ``keep`` bytes of a write, then ``garbage``) to ``content``."""
    if op.kind == "write":
        piece = op.data if keep is None else op.data[:keep] + garbage
        end = op.offset + len(piece)
        if op.offset > len(content):
            content.extend(bytes(op.offset - len(content)))
        content[op.offset : end] = piece
    elif op.kind == "allocate":
        if op.size > len(content):
            content.extend(bytes(op.size - len(content)))
    else:
        del content[op.size :]
        if op.size > len(content):
            content.extend(bytes(op.size - len(content)))


def _tear(content: bytearray, op: Unsynced, rng: random.Random) -> str:
    """Applies a torn version of ``op``; returns how it was torn (for failure messages)."""
    if op.kind != "write" or len(op.data) < 2:
        if rng.random() < 0.5:
            _apply(content, op)
            return "applied"
        return "dropped"
    n = len(op.data)
    first = (op.offset // SECTOR + 1) * SECTOR  # first sector boundary inside the write
    boundaries = list(range(first, op.offset + n, SECTOR))
    style = rng.randrange(3) if boundaries else 0
    if style == 0:
        keep = rng.randrange(1, n)
        _apply(content, op, keep)
        return f"torn after {keep} of {n} bytes"
    keep = rng.choice(boundaries) - op.offset
    if style == 1:
        _apply(content, op, keep)
        return f"torn at sector boundary, {keep} of {n} bytes"
    junk = rng.randbytes(min(SECTOR, n - keep))
    _apply(content, op, keep, junk)
    return f"torn at sector boundary, {keep} of {n} bytes, then {len(junk)} bytes of garbage"


@dataclass(frozen=True)
class Snapshot:
    """The durable state of a file system at one instant plus what was still unsynced.

    ``names`` maps every durable path to its inode; ``files`` holds each inode's durable bytes
    and its unsynced operations; ``dir_ops`` the directory operations not yet durable, in call
    order. ``label`` says where it was taken; ``context`` is what the owner's ``context``
    callable returned then. Snapshots are immutable and can be pickled (to replay a failure).
    """

    names: dict[str, int]
    dirs: frozenset[str]
    files: dict[int, tuple[bytes, tuple[Unsynced, ...]]]
    dir_ops: tuple[DirOp, ...]
    label: str = ""
    context: Any = None
    seq: int = 0  # the file system's operation counter then (equal seq and unsynced: same state)

    @property
    def unsynced(self) -> int:
        """Returns how many data and directory operations are not durable."""
        return sum(len(p) for _d, p in self.files.values()) + len(self.dir_ops)

    def crash(self, rng: random.Random, mode: CrashMode = "random") -> FaultFileSystem:
        """Returns a new file system holding one outcome of a crash now (see module docstring).

        Everything in the returned file system is durable. Its ``crash_report`` says what
        happened to each unsynced operation. Raises ValueError for an unknown mode.
        """
        if mode not in ("process", "drop", "random", "prefix", "tear-last", "reorder"):
            raise ValueError(f"unknown crash mode {mode!r}")
        report: list[str] = [f"crash mode {mode} at {self.label}"]
        n_dir = len(self.dir_ops)
        if mode in ("process", "tear-last"):
            kept = list(self.dir_ops)
        elif mode == "drop":
            kept = []
        elif mode == "reorder":
            kept = [op for op in self.dir_ops if rng.random() < 0.5]
        else:
            kept = list(self.dir_ops[: rng.randint(0, n_dir)])
        names = dict(self.names)
        for op in kept:
            _apply_dir_op(names, op)
        if n_dir:
            names_kept = [f"{op.kind} {os.path.basename(op.path)}" for op in kept]
            report.append(f"directory operations kept: {names_kept} of {n_dir}")
        all_seqs = sorted(u.seq for _d, pend in self.files.values() for u in pend)
        cut = rng.randint(0, len(all_seqs)) if mode == "prefix" else 0
        cut_seq = all_seqs[cut] if cut < len(all_seqs) else None
        last_seq = all_seqs[-1] if all_seqs else None
        fs = FaultFileSystem(context=None)
        fs._dirs = set(self.dirs)
        for path, ino in sorted(names.items()):
            durable, pending = self.files[ino]
            inode = fs._inodes.get(ino)
            if inode is None:
                content = bytearray(durable)
                for unsynced in pending:
                    fate = _fate(unsynced, mode, rng, content, cut_seq, last_seq)
                    if fate != "applied" or mode in ("random", "reorder"):
                        where = f"{os.path.basename(path)} {unsynced.kind}@{unsynced.offset}"
                        report.append(f"{where}: {fate}")
                inode = fs._inodes[ino] = _Inode(ino, bytes(content))
            fs._names[path] = ino
        fs._durable_names = dict(fs._names)
        fs._next_ino = max([*fs._inodes, 0]) + 1
        fs.crash_report = "; ".join(report)
        return fs


def _fate(
    op: Unsynced,
    mode: CrashMode,
    rng: random.Random,
    content: bytearray,
    cut_seq: int | None,
    last_seq: int | None,
) -> str:
    """Applies, drops or tears ``op`` into ``content`` as ``mode`` says; returns the fate."""
    if mode == "process":
        _apply(content, op)
        return "applied"
    if mode == "drop":
        return "dropped"
    if mode == "tear-last":
        if op.seq == last_seq:
            return _tear(content, op, rng)
        _apply(content, op)
        return "applied"
    if mode == "reorder":
        mode = "random"
    if mode == "prefix":
        if cut_seq is None or op.seq < cut_seq:
            _apply(content, op)
            return "applied"
        if op.seq == cut_seq and rng.random() < 0.5:
            return _tear(content, op, rng)
        return "dropped"
    roll = rng.random()
    if roll < 0.4:
        _apply(content, op)
        return "applied"
    if roll < 0.7:
        return "dropped"
    return _tear(content, op, rng)


def _apply_dir_op(names: dict[str, int], op: DirOp) -> None:
    if op.kind == "create":
        names[op.path] = op.ino
    elif op.kind == "remove":
        if names.get(op.path) == op.ino:
            del names[op.path]
    else:
        if names.get(op.path) == op.ino:
            del names[op.path]
        names[op.dst] = op.ino


@dataclass
class _Trigger:
    kinds: frozenset[str]
    nth: int
    match: Callable[[str], bool] | None
    seen: int = 0
    # fail: raise errno for ``times`` calls (None: forever); crash: snapshot then maybe stop
    err: int = errno.EIO
    times: int | None = 1
    crash: Phase | None = None
    stop: bool = True
    fired: int = 0
    done: bool = False

    def hit(self, kind: str, path: str) -> bool:
        """Counts a call; returns True when this trigger acts on it."""
        if self.done or kind not in self.kinds or (self.match is not None and not self.match(path)):
            return False
        self.seen += 1
        if self.seen < self.nth:
            return False
        self.fired += 1
        if self.times is not None and self.fired >= self.times:
            self.done = True
        return True


def _os_error(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path)


class FaultHandle:
    """An open file of a :class:`FaultFileSystem` (see the module docstring)."""

    def __init__(
        self, fs: FaultFileSystem, inode: _Inode, path: str, *, read_only: bool = False
    ) -> None:
        self.path = path
        self._fs = fs
        self._inode = inode
        self._closed = False
        self.read_only = read_only

    def _live(self) -> _Inode:
        if self._closed:
            raise _os_error(errno.EBADF, self.path)
        return self._inode

    def _writable(self, refusal: int = errno.EBADF) -> _Inode:
        # A descriptor opened O_RDONLY refuses writes as the real seam's does: pwrite with
        # EBADF, ftruncate with EINVAL.
        if self.read_only:
            raise _os_error(refusal, self.path)
        return self._live()

    def pwrite(self, data: bytes | bytearray | memoryview, offset: int) -> None:
        """Writes ``data`` at ``offset`` (volatile until datasync); returns None.

        Raises StoreIOError on an injected fault or a closed handle."""
        payload = bytes(data)

        def run() -> None:
            inode = self._writable()
            op = Unsynced(self._fs._take_seq(), "write", offset=offset, data=payload)
            inode.pending.append(op)
            _apply(inode.data, op)

        self._fs._call("pwrite", self.path, run, offset=offset, length=len(payload))

    def pread(self, size: int, offset: int) -> bytes:
        """Returns up to ``size`` bytes at ``offset`` (short at the end of the file).

        Raises StoreIOError on an injected fault or a closed handle."""
        return self._fs._call(
            "pread",
            self.path,
            lambda: bytes(self._live().data[offset : offset + size]),
            offset=offset,
            length=size,
        )

    def datasync(self) -> None:
        """Makes every unsynced operation on this file durable; returns None.

        Raises StoreIOError on an injected fault or a closed handle."""

        def run() -> None:
            inode = self._live()
            inode.durable = bytes(inode.data)
            inode.pending.clear()

        self._fs._call("datasync", self.path, run)

    def size(self) -> int:
        """Returns the size the process sees. Raises StoreIOError on an injected fault."""
        return self._fs._call("size", self.path, lambda: len(self._live().data))

    def allocate(self, size: int) -> None:
        """Extends the file with zeros to ``size`` bytes (volatile); returns None.

        Raises StoreIOError on an injected fault (ENOSPC is the realistic one)."""

        def run() -> None:
            inode = self._writable()
            if len(inode.data) >= size:
                return
            op = Unsynced(self._fs._take_seq(), "allocate", size=size)
            inode.pending.append(op)
            _apply(inode.data, op)

        self._fs._call("allocate", self.path, run, length=size)

    def truncate(self, size: int) -> None:
        """Sets the size to ``size`` (volatile); returns None. Raises StoreIOError on a fault."""

        def run() -> None:
            inode = self._writable(errno.EINVAL)
            op = Unsynced(self._fs._take_seq(), "truncate", size=size)
            inode.pending.append(op)
            _apply(inode.data, op)

        self._fs._call("truncate", self.path, run, length=size)

    def close(self) -> None:
        """Closes the handle (idempotent, never fails, also on a dead file system)."""
        with self._fs._lock:
            self._fs.calls["close"] += 1
            self._closed = True

    def __repr__(self) -> str:
        return f"FaultHandle({self.path!r}{', closed' if self._closed else ''})"


class FaultFileSystem:
    """The in-memory, crash-simulating :class:`~store.fs.FileSystem` (module docstring).

    ``context`` is called (under the lock) whenever a snapshot is taken; its result is stored
    in :attr:`Snapshot.context`. ``calls`` counts every call by kind.
    """

    native = False

    def __init__(self, *, context: Callable[[], Any] | None = None) -> None:
        self._lock = threading.RLock()
        self._inodes: dict[int, _Inode] = {}
        self._names: dict[str, int] = {}
        self._durable_names: dict[str, int] = {}
        self._dirs: set[str] = {"/"}
        self._dir_ops: list[DirOp] = []
        self._next_ino = 1
        self._seq = 0
        self._index = 0
        self._triggers: list[_Trigger] = []
        self._watchers: list[Callable[[Call], None]] = []
        self.context = context
        self.calls: Counter[str] = Counter()
        #: Snapshots recorded by :meth:`crash_at`, in the order they were taken.
        self.crash_points: list[Snapshot] = []
        #: True once a ``crash_at(..., stop=True)`` fired: every later call fails with EIO.
        self.dead = False
        #: What :meth:`Snapshot.crash` did to the unsynced state (empty for a fresh one).
        self.crash_report = ""
        #: Set by :meth:`mount_read_only`.
        self.mounted_read_only = False

    def mount_read_only(self) -> None:
        """From now on behave as a file system mounted read-only: an open that could write,
        and every directory change (create, rename, remove, makedirs), fails with EROFS, as
        the real seam's would. Reads, listings and handles opened ``read_only`` work.
        Returns None."""
        with self._lock:
            self.mounted_read_only = True

    def _refuse_on_read_only(self, path: str) -> None:
        if self.mounted_read_only:
            raise _os_error(errno.EROFS, path)

    # -- fault injection and hooks -------------------------------------------------------

    def fail(
        self,
        kind: str | tuple[str, ...],
        nth: int = 1,
        *,
        err: int = errno.EIO,
        times: int | None = 1,
        match: Callable[[str], bool] | None = None,
    ) -> None:
        """Makes the ``nth`` call of ``kind`` (one kind, or a tuple of kinds counted together)
        from now whose path ``match`` accepts, and the ``times - 1`` after it (None: all later
        ones), raise ``OSError(err)``, seen by the caller as StoreIOError. The failed call
        changes nothing. Returns None; raises ValueError for an unknown kind."""
        self._arm(_Trigger(_check_kinds(kind), nth, match, err=err, times=times))

    def crash_at(
        self,
        kind: str | tuple[str, ...],
        nth: int = 1,
        *,
        when: Phase = "before",
        stop: bool = True,
        match: Callable[[str], bool] | None = None,
    ) -> None:
        """At the ``nth`` matching call of ``kind`` (one kind, or a tuple of kinds counted
        together) from now, appends a :class:`Snapshot` taken just ``when`` the call to
        :attr:`crash_points`; with ``stop`` the machine dies there (a "before" call does not
        happen and fails with EIO; every later call fails too). Returns None; raises
        ValueError for an unknown kind."""
        self._arm(_Trigger(_check_kinds(kind), nth, match, crash=when, stop=stop))

    def watch(self, hook: Callable[[Call], None]) -> None:
        """Calls ``hook(call)`` before and after every call, under the lock; returns None."""
        with self._lock:
            self._watchers.append(hook)

    def clear_faults(self) -> None:
        """Disarms every fault, crash trigger and watch hook; returns None."""
        with self._lock:
            self._triggers.clear()
            self._watchers.clear()

    def _arm(self, trigger: _Trigger) -> None:
        if trigger.nth < 1:
            raise ValueError(f"nth counts from 1, not {trigger.nth}")
        with self._lock:
            self._triggers.append(trigger)

    # -- snapshots and crashes -----------------------------------------------------------

    def snapshot(self, label: str = "") -> Snapshot:
        """Returns the durable state plus everything unsynced, as of now. Raises nothing."""
        with self._lock:
            live = set(self._durable_names.values())
            for op in self._dir_ops:
                live.add(op.ino)
            files = {
                ino: (self._inodes[ino].durable, tuple(self._inodes[ino].pending)) for ino in live
            }
            context = self.context() if self.context is not None else None
            return Snapshot(
                names=dict(self._durable_names),
                dirs=frozenset(self._dirs),
                files=files,
                dir_ops=tuple(self._dir_ops),
                label=label or f"call {self._index}",
                context=context,
                seq=self._seq,
            )

    def crash(self, rng: random.Random, mode: CrashMode = "random") -> FaultFileSystem:
        """Returns a new file system with one outcome of a crash now (:meth:`Snapshot.crash`)."""
        return self.snapshot().crash(rng, mode)

    # -- the seam ------------------------------------------------------------------------

    def _take_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _call(self, kind: str, path: str, run: Callable[[], _T], **info: Any) -> _T:
        with self._lock:
            self.calls[kind] += 1
            self._index += 1
            index = self._index
            if self.dead:
                raise _io_error(_os_error(errno.EIO, path), self._what(kind, info), path)
            after: list[_Trigger] = []
            for trig in self._triggers:
                if not trig.hit(kind, path):
                    continue
                if trig.crash is None:
                    exc = _os_error(trig.err, path)
                    raise _io_error(exc, self._what(kind, info), path) from exc
                if trig.crash == "after":
                    after.append(trig)
                    continue
                self.crash_points.append(self.snapshot(f"before {kind} #{trig.seen} {path}"))
                if trig.stop:
                    self.dead = True
                    exc = _os_error(errno.EIO, path)
                    raise _io_error(exc, self._what(kind, info), path) from exc
            for hook in self._watchers:
                hook(Call(kind, path, "before", index, **info))
            try:
                result = run()
            except OSError as exc:
                raise _io_error(exc, self._what(kind, info), path) from exc
            for trig in after:
                self.crash_points.append(self.snapshot(f"after {kind} #{trig.seen} {path}"))
                self.dead = self.dead or trig.stop
            for hook in self._watchers:
                hook(Call(kind, path, "after", index, **info))
            return result

    @staticmethod
    def _what(kind: str, info: dict[str, Any]) -> str:
        if kind == "rename":
            return f"cannot rename to {info.get('dst', '')}:"
        return _WHAT.get(kind, f"cannot {kind}")

    def _dir_op(
        self, kind: Literal["create", "rename", "remove"], path: str, ino: int, dst: str = ""
    ) -> None:
        self._dir_ops.append(DirOp(self._take_seq(), kind, path, ino, dst))

    def open(self, path: str, *, create: bool = False, read_only: bool = False) -> FaultHandle:
        """Returns a handle on ``path``, creating an empty file (a volatile directory entry)
        when ``create`` is set; ``read_only`` gives a handle that refuses writes (EBADF).
        Raises StoreIOError (ENOENT) for a missing file or folder, (EROFS) for a handle that
        could write on a file system mounted read-only (:meth:`mount_read_only`)."""
        if create and read_only:
            raise ValueError("a file opened read-only cannot be created")
        path = os.path.normpath(path)

        def run() -> FaultHandle:
            if self.mounted_read_only and not read_only:
                raise _os_error(errno.EROFS, path)
            ino = self._names.get(path)
            if ino is None:
                if not create or os.path.dirname(path) not in self._dirs:
                    raise _os_error(errno.ENOENT, path)
                ino = self._next_ino
                self._next_ino += 1
                self._inodes[ino] = _Inode(ino)
                self._names[path] = ino
                self._dir_op("create", path, ino)
            return FaultHandle(self, self._inodes[ino], path, read_only=read_only)

        result: FaultHandle = self._call("open", path, run, read_only=read_only)
        return result

    def rename(self, src: str, dst: str) -> None:
        """Atomically replaces ``dst`` by ``src`` (volatile until fsync_dir); returns None.
        A folder is renamed too, with everything in it, and durably at once, as ``makedirs``
        makes folders (the page store renames a folder to its tombstone and fsyncs the parent
        right after: the window left out is the one that fsync closes). Raises StoreIOError
        (ENOENT) when ``src`` does not exist."""
        src, dst = os.path.normpath(src), os.path.normpath(dst)

        def run() -> None:
            self._refuse_on_read_only(src)
            ino = self._names.get(src)
            if ino is None and src in self._dirs and os.path.dirname(dst) in self._dirs:
                self._rename_folder(src, dst)
                return
            if ino is None or os.path.dirname(dst) not in self._dirs:
                raise _os_error(errno.ENOENT, src)
            del self._names[src]
            self._names[dst] = ino
            self._dir_op("rename", src, ino, dst)

        self._call("rename", src, run, dst=dst)

    def _rename_folder(self, src: str, dst: str) -> None:
        def move(path: str) -> str:
            if path == src or path.startswith(src + os.sep):
                return dst + path[len(src) :]
            return path

        self._dirs = {move(d) for d in self._dirs}
        self._names = {move(p): ino for p, ino in self._names.items()}
        self._durable_names = {move(p): ino for p, ino in self._durable_names.items()}
        self._dir_ops = [
            dataclasses.replace(op, path=move(op.path), dst=move(op.dst) if op.dst else "")
            for op in self._dir_ops
        ]

    def remove(self, path: str) -> None:
        """Removes ``path`` (volatile until fsync_dir); a missing file is ignored, as the real
        seam does. Returns None; raises StoreIOError on an injected fault."""
        path = os.path.normpath(path)

        def run() -> None:
            self._refuse_on_read_only(path)
            ino = self._names.pop(path, None)
            if ino is not None:
                self._dir_op("remove", path, ino)

        self._call("remove", path, run)

    def fsync_dir(self, path: str) -> None:
        """Makes every pending directory operation touching ``path`` durable; returns None.
        Raises StoreIOError for a missing directory or an injected fault."""
        path = os.path.normpath(path)

        def run() -> None:
            if path not in self._dirs:
                raise _os_error(errno.ENOENT, path)
            keep: list[DirOp] = []
            for op in self._dir_ops:
                if path in op.dirs():
                    _apply_dir_op(self._durable_names, op)
                else:
                    keep.append(op)
            self._dir_ops = keep

        self._call("fsync_dir", path, run)

    def listdir(self, path: str) -> list[str]:
        """Returns the sorted names in directory ``path`` ([] when it does not exist).
        Raises StoreIOError on an injected fault."""
        path = os.path.normpath(path)

        def run() -> list[str]:
            names = {os.path.basename(p) for p in self._names if os.path.dirname(p) == path}
            names |= {
                os.path.basename(d) for d in self._dirs if os.path.dirname(d) == path and d != path
            }
            return sorted(names)

        result: list[str] = self._call("listdir", path, run)
        return result

    def exists(self, path: str) -> bool:
        """Returns True if ``path`` is a file or directory the process sees. Raises nothing
        (it is a metadata query that keeps answering on a dead file system)."""
        path = os.path.normpath(path)
        with self._lock:
            self.calls["exists"] += 1
            return path in self._names or path in self._dirs

    def makedirs(self, path: str) -> None:
        """Creates ``path`` and its parents (durable at once, see the module docstring);
        returns None. Raises StoreIOError on an injected fault."""
        path = os.path.normpath(path)

        def run() -> None:
            self._refuse_on_read_only(path)
            if path in self._names:
                raise _os_error(errno.EEXIST, path)
            d = path
            while d not in self._dirs:
                self._dirs.add(d)
                d = os.path.dirname(d)

        self._call("makedirs", path, run)

    # -- helpers for tests (not part of the seam; never counted, never faulted) ------------

    def read_file(self, path: str, *, durable: bool = False) -> bytes:
        """Returns the content the process sees (or the durable content) of ``path``.
        Raises FileNotFoundError when it does not exist."""
        with self._lock:
            names = self._durable_names if durable else self._names
            ino = names.get(os.path.normpath(path))
            if ino is None:
                raise FileNotFoundError(path)
            inode = self._inodes[ino]
            return inode.durable if durable else bytes(inode.data)

    def write_file(self, path: str, data: bytes) -> None:
        """Creates or replaces ``path`` with ``data``, durably (directory entry included);
        returns None. Raises FileNotFoundError when its directory does not exist."""
        path = os.path.normpath(path)
        with self._lock:
            if os.path.dirname(path) not in self._dirs:
                raise FileNotFoundError(path)
            ino = self._names.get(path)
            if ino is None:
                ino = self._next_ino
                self._next_ino += 1
                self._inodes[ino] = _Inode(ino)
            inode = self._inodes[ino]
            inode.durable = bytes(data)
            inode.data = bytearray(data)
            inode.pending.clear()
            self._names[path] = self._durable_names[path] = ino

    def corrupt(self, path: str, offset: int, *, xor: int = 0xFF) -> None:
        """Flips bits of one byte of ``path``, durable and volatile alike (media damage);
        returns None. Raises FileNotFoundError / IndexError for a missing file or offset."""
        with self._lock:
            ino = self._names.get(os.path.normpath(path))
            if ino is None:
                raise FileNotFoundError(path)
            inode = self._inodes[ino]
            inode.data[offset] ^= xor
            durable = bytearray(inode.durable)
            durable[offset] ^= xor
            inode.durable = bytes(durable)

    def files(self, directory: str) -> dict[str, int]:
        """Returns {name: size} of the files the process sees in ``directory``. Raises nothing."""
        directory = os.path.normpath(directory)
        with self._lock:
            return {
                os.path.basename(p): len(self._inodes[i].data)
                for p, i in sorted(self._names.items())
                if os.path.dirname(p) == directory
            }

    @property
    def unsynced(self) -> int:
        """Returns how many data and directory operations are not durable yet."""
        with self._lock:
            return sum(len(i.pending) for i in self._inodes.values()) + len(self._dir_ops)


def _check_kinds(kind: str | tuple[str, ...]) -> frozenset[str]:
    kinds = frozenset((kind,) if isinstance(kind, str) else kind)
    unknown = sorted(kinds - CALL_KINDS)
    if unknown or not kinds:
        raise ValueError(f"unknown call kind {unknown or kind!r}; known: {sorted(CALL_KINDS)}")
    return kinds


def io_error_of(exc: BaseException) -> int | None:
    """Returns the errno behind a StoreIOError raised by either seam (None if there is none)."""
    cause = exc.__cause__
    if isinstance(exc, StoreIOError) and isinstance(cause, OSError):
        return cause.errno
    return None
