"""Spark's driver JVM started from a class-data-sharing archive of the classes a report loads.

A report of a small store is mostly the JVM's first use: loading, verifying and linking the
15,000-odd classes of Spark, Parquet, Arrow and the JDBC drivers that a report touches. Java's
application class-data sharing (JDK 13 and later, HotSpot: ``-XX:ArchiveClassesAtExit``,
``-XX:SharedArchiveFile``) writes those classes, parsed and verified, into an archive at the
end of one run and maps it into every later JVM. On the 2-core machines of bench/RESULTS.md a
report of 500 messages went from 24.6-26.9 s to 20.4 s with it, the session start from 11.5 s
to 4.7 s.

How the archive is made and used (:func:`prepare`, :func:`finish`):

- It lives in ``STORE_REPORT_CLASS_ARCHIVE`` (a folder; ``off`` turns the archive off),
  default ``$XDG_CACHE_HOME/store`` (``~/.cache/store``), made mode 0700: 150-200 MB per
  Java and Spark installation, named ``spark-classes-<key>-<bytes>.jsa``. The key hashes the
  ``java`` that runs Spark (its path and its ``lib/modules``) and PySpark's jars (names, sizes,
  times), the two things the archive is valid for; the folder keeps the three last used
  archives, of any key.
- With no archive yet, one report's JVM (the one holding ``spark-classes-<key>.claim``, taken
  with ``O_EXCL``; a claim whose process is gone, or older than an hour, is taken over) writes
  it when it exits. :func:`finish` ends that JVM (at the report's end in ``store report``,
  else at interpreter exit) and waits for it: the archive is written into a ``.part`` file,
  and only a JVM that exited with status 0 has its ``.part`` renamed to the archive, its size
  in its name. That adds the writing (about 10 s, once) to that one report. Other JVMs
  started meanwhile run without an archive.
- A JVM maps the archive only when its size is the one in its name (a truncated archive is a
  SIGBUS in the JVM, not a refusal) and checks its checksums as it maps it
  (``-XX:+VerifySharedSpaces``: a damaged archive is ignored, the JVM loads its classes the
  usual way). Any other mismatch (another Java, other jars) the JVM detects itself and ignores
  the archive; its CDS log lines are off. Should a JVM given the archive still fail to start,
  :mod:`store.reporting.session` removes the archive and starts once more without it.
- Nothing is used when the driver's Java options are set elsewhere (``--driver-java-options``
  in ``PYSPARK_SUBMIT_ARGS``): those would replace these.

Errors: none of these raise; an archive that cannot be made or read is a slower start, logged
at DEBUG. Thread-safety: call from the thread that builds the session.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "ARCHIVE_ENV",
    "ClassArchive",
    "archive_folder",
    "finish",
    "prepare",
    "prepare_in",
    "started",
    "writing",
]

_log = logging.getLogger(__name__)

#: The environment variable naming the archive's folder (``off``: no archive).
ARCHIVE_ENV: Final = "STORE_REPORT_CLASS_ARCHIVE"
_PREFIX: Final = "spark-classes-"
#: A claim older than this is taken over (its JVM would long have ended).
_CLAIM_SECONDS: Final = 3600.0
#: How long :func:`finish` waits for the JVM to write the archive and exit.
_WRITE_SECONDS: Final = 600.0
#: The most archives the folder keeps (of as many keys), the one in use included.
_KEPT: Final = 3
#: The first 4 bytes of a HotSpot dynamic archive (0xf00baba8, little-endian).
_MAGIC: Final = bytes.fromhex("a8ab0bf0")
_QUIET: Final = ("-XX:+IgnoreUnrecognizedVMOptions", "-Xshare:auto", "-Xlog:cds=off",
                 "-Xlog:cds+dynamic=off")  # fmt: skip


@dataclass(frozen=True)
class ClassArchive:
    """The archive a session starts with: ``path`` mapped (``making`` False), or written at
    its JVM's exit into ``part`` and renamed to ``path`` (``making`` True). Immutable."""

    folder: str
    key: str
    path: str
    making: bool
    part: str | None = None

    def java_options(self) -> str:
        """The driver's Java options (``spark.driver.extraJavaOptions``). A JVM that an
        archive makes fail writes its crash log into the temporary folder, not the working
        one, and no core file."""
        import tempfile

        crash = os.path.join(tempfile.gettempdir(), "store-report-hs_err_pid%p.log")
        common = (*_QUIET, "-XX:-CreateCoredumpOnCrash", f"-XX:ErrorFile={crash}")
        if self.making:
            return " ".join((*common, f"-XX:ArchiveClassesAtExit={self.part}"))
        return " ".join((*common, "-XX:+VerifySharedSpaces", f"-XX:SharedArchiveFile={self.path}"))

    @property
    def claim(self) -> str:
        """The file whose creator writes the archive (:func:`prepare`)."""
        return os.path.join(self.folder, f"{_PREFIX}{self.key}.claim")

    def discard(self) -> None:
        """Remove the archive, or when ``making`` its ``.part`` and the claim (a JVM given
        it did not start). Raises nothing."""
        for path in (self.part, self.claim) if self.making else (self.path,):
            with contextlib.suppress(OSError):
                if path:
                    os.unlink(path)


def archive_folder() -> str | None:
    """The archive's folder by ``STORE_REPORT_CLASS_ARCHIVE`` (None: off)."""
    setting = os.environ.get(ARCHIVE_ENV)
    if setting is not None and setting.strip().lower() in ("off", "0", "no", "false", ""):
        return None
    if setting:
        return os.path.abspath(os.path.expanduser(setting))
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "store")


def _key(java: str) -> str | None:
    """What the archive is valid for, hashed: the Java that runs Spark and PySpark's jars."""
    import pyspark

    java = os.path.realpath(java)
    digest = hashlib.sha256(java.encode())
    modules = os.path.join(os.path.dirname(os.path.dirname(java)), "lib", "modules")
    jars = os.path.join(os.path.dirname(os.path.abspath(pyspark.__file__)), "jars")
    try:
        for path in [modules, *sorted(os.path.join(jars, n) for n in os.listdir(jars))]:
            st = os.stat(path)
            digest.update(f"{os.path.basename(path)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    except OSError:
        return None  # not a JDK layout or PySpark install this module knows
    return digest.hexdigest()[:20]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _claim(folder: str, key: str) -> bool:
    """Take the right to write the archive of ``key``. Returns whether this process has it."""
    claim = ClassArchive(folder, key, "", making=True).claim
    for _ in range(2):
        try:
            fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            try:
                with open(claim) as f:
                    holder = int(f.read().strip() or 0)
                stale = time.time() - os.stat(claim).st_mtime > _CLAIM_SECONDS
            except (OSError, ValueError):
                holder, stale = 0, True
            if holder and _alive(holder) and not stale:
                return False
            with contextlib.suppress(OSError):
                os.unlink(claim)  # taken over; the next round creates it afresh
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def _tidy(folder: str, key: str) -> None:
    """Remove the ``.part`` files of processes that are gone, and archives of other keys
    beyond the :data:`_KEPT` last used (two installations sharing the folder, say two
    virtualenvs, each keep theirs; an upgraded Java or Spark leaves its old one to age out)."""
    others: list[tuple[float, str]] = []
    for name in os.listdir(folder):
        if not name.startswith(_PREFIX):
            continue
        path = os.path.join(folder, name)
        stem = name[len(_PREFIX) :]
        if name.endswith(".part"):
            pid = stem.rsplit(".", 2)[-2]
            if pid.isdigit() and not (int(pid) == os.getpid() or _alive(int(pid))):
                with contextlib.suppress(OSError):
                    os.unlink(path)
        elif name.endswith(".jsa") and not stem.startswith(key + "-"):
            with contextlib.suppress(OSError):
                others.append((os.stat(path).st_mtime, path))
    for _used, path in sorted(others, reverse=True)[_KEPT - 1 :]:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _existing(folder: str, key: str) -> str | None:
    """The archive of ``key`` whose size is the one in its name (others are removed)."""
    for name in os.listdir(folder):
        if name.startswith(f"{_PREFIX}{key}-") and name.endswith(".jsa"):
            path = os.path.join(folder, name)
            size = name[len(f"{_PREFIX}{key}-") : -len(".jsa")]
            try:
                if size.isdigit() and os.path.getsize(path) == int(size):
                    return path
            except OSError:
                continue
            with contextlib.suppress(OSError):
                os.unlink(path)
    return None


#: The session whose JVM writes the archive, and the archive (see :func:`finish`).
_making: list[tuple[SparkSession, ClassArchive]] = []


def prepare(java: str) -> ClassArchive | None:
    """The archive a new driver JVM should start with, or None (off, another process is
    writing it, Java options set elsewhere, or a folder that cannot be written): in
    :func:`archive_folder`. Raises nothing."""
    folder = archive_folder()
    if folder is None or "driver-java-options" in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        return None
    return prepare_in(folder, java)


def prepare_in(folder: str, java: str) -> ClassArchive | None:
    """:func:`prepare` with the archive in ``folder``. Raises nothing."""
    try:
        key = _key(java)
        if key is None:
            return None
        os.makedirs(folder, mode=0o700, exist_ok=True)
        _tidy(folder, key)
        path = _existing(folder, key)
        if path is not None:
            with contextlib.suppress(OSError):
                os.utime(path)  # its last use, by which :func:`_tidy` keeps archives
            return ClassArchive(folder, key, path, making=False)
        if not _claim(folder, key):
            return None
        part = os.path.join(folder, f"{_PREFIX}{key}.{os.getpid()}.part")
        return ClassArchive(folder, key, "", making=True, part=part)
    except OSError as exc:
        _log.debug("no class archive in %s: %s", folder, exc)
        return None


def started(session: SparkSession, archive: ClassArchive) -> None:
    """Note that ``session``'s JVM writes ``archive`` at its exit: :func:`finish` ends it
    (called at interpreter exit if nobody calls it before)."""
    if archive.making and not _making:
        _making.append((session, archive))
        atexit.register(finish)


def writing() -> bool:
    """Whether this process's JVM is to write the archive when it ends (:func:`finish`)."""
    return bool(_making)


def finish() -> None:
    """When this process's JVM writes the archive: stop the session, end the JVM, wait for
    it to write the archive and exit, and keep the archive if it exited with status 0. The
    session cannot be used afterwards. Otherwise nothing. Raises nothing."""
    if not _making:
        return
    session, archive = _making.pop()
    assert archive.part is not None
    try:
        proc = session.sparkContext._gateway.proc  # type: ignore[union-attr]
        session.stop()
        if proc.stdin is not None:
            proc.stdin.close()  # the JVM's gateway ends at the end of its input
        status = proc.wait(timeout=_WRITE_SECONDS)
        with open(archive.part, "rb") as f:
            complete = status == 0 and f.read(4) == _MAGIC
        if complete:
            size = os.path.getsize(archive.part)
            final = os.path.join(archive.folder, f"{_PREFIX}{archive.key}-{size}.jsa")
            os.replace(archive.part, final)
    except Exception as exc:  # Py4J, a JVM that did not end, a file system: a slower start
        _log.debug("the class archive was not written: %s", exc)
    finally:
        archive.discard()  # what is left: the .part (renamed when complete) and the claim
