"""The one JVM of this process, for JDBC drivers reached through JPype and JayDeBeApi.

JPype starts at most one JVM per process and its class path is fixed at start, so the first
JDBC store opened starts it with every jar it can name: ``jdbc-driver-classpath`` (entries
separated by ``os.pathsep``; ``dir/*`` means every jar in ``dir``) and ``$CLASSPATH``. A store
opened later whose jars were not on that class path still works: its driver is loaded through
a ``URLClassLoader`` and instantiated directly, bypassing ``java.sql.DriverManager`` (which only
hands out drivers of the system class loader).

JVM options set here, and why:

- ``derby.stream.error.file``: embedded Derby writes ``derby.log`` into the working directory
  otherwise; it goes to the temporary directory instead (one file per user).
- ``$STORE_JVM_OPTIONS``: more options, separated by white space (``-Xmx2g`` for a large
  embedded Derby database; the test suite sets ``-XX:TieredStopAtLevel=1 -XX:+UseSerialGC``,
  which cut the CPU time of its short Derby tests by about a third). Read when the JVM starts;
  an option the JVM refuses makes the start fail with StoreUnavailableError naming it.

Nothing here downloads a driver: jars come from the configuration or ``$CLASSPATH`` (Debian's
``libderby-java``, ``libh2-java``, … put them in ``/usr/share/java``).

Thread-safety: :func:`ensure_jvm` and :func:`load_driver` may be called from any thread; a lock
makes the start happen once.
"""

from __future__ import annotations

import glob
import logging
import os
import tempfile
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from store.errors import ConfigError, StoreUnavailableError

__all__ = ["ensure_jvm", "expand_classpath", "load_driver"]

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_started_with: frozenset[str] = frozenset()
_loaders: dict[tuple[str, ...], Any] = {}


def expand_classpath(entries: Iterable[str]) -> list[str]:
    """Absolute class-path entries, with ``dir/*`` expanded to the jars in ``dir``.

    Returns the list in order, without duplicates. Raises nothing (missing paths are kept;
    the driver load reports them).
    """
    out: list[str] = []
    for entry in entries:
        entry = os.path.expanduser(entry.strip())
        if not entry:
            continue
        found = sorted(glob.glob(entry[:-1] + "*.[jJ][aA][rR]")) if entry.endswith("*") else [entry]
        for path in found:
            path = os.path.abspath(path)
            if path not in out:
                out.append(path)
    return out


def ensure_jvm(classpath: Sequence[str]) -> bool:
    """Start the JVM with ``classpath`` (plus ``$CLASSPATH``) unless it runs already.

    Returns True if every entry of ``classpath`` is on the running JVM's class path, False if
    the JVM was started earlier without some of them. Raises StoreUnavailableError when no JVM
    can be started (no Java installed).
    """
    import jpype

    global _started_with
    wanted = expand_classpath(classpath)
    with _lock:
        if not jpype.isJVMStarted():
            env = expand_classpath(os.environ.get("CLASSPATH", "").split(os.pathsep))
            full = wanted + [p for p in env if p not in wanted]
            log_file = os.path.join(tempfile.gettempdir(), f"store-derby-{os.getuid()}.log")
            extra = os.environ.get("STORE_JVM_OPTIONS", "").split()
            try:
                jpype.startJVM(
                    f"-Dderby.stream.error.file={log_file}",
                    *extra,
                    classpath=full,
                    convertStrings=True,
                )
            except (OSError, RuntimeError, jpype.JVMNotFoundException) as exc:
                options = f" with STORE_JVM_OPTIONS={' '.join(extra)!r}" if extra else ""
                raise StoreUnavailableError(
                    f"cannot start a Java VM for the JDBC driver{options}: {exc}",
                    hint="install Java (e.g. apt-get install openjdk-17-jre-headless), and "
                    "check the options STORE_JVM_OPTIONS gives",
                ) from exc
            _started_with = frozenset(full)
            _log.info("started the JVM with %d class-path entries", len(full))
        return all(p in _started_with for p in wanted)


def load_driver(driver_class: str, classpath: Sequence[str]) -> Any:
    """An instance of the JDBC driver class ``driver_class``.

    Returns the ``java.sql.Driver``. Raises ConfigError (naming ``jdbc-driver-class-name``) when
    the class is not found on ``classpath`` / ``$CLASSPATH``.
    """
    import jpype

    on_path = ensure_jvm(classpath)
    try:
        if on_path:
            cls = jpype.JClass(driver_class)
            return cls()
        jars = tuple(expand_classpath(classpath))
        with _lock:
            loader = _loaders.get(jars)
            if loader is None:
                urls = [jpype.java.io.File(p).toURI().toURL() for p in jars]
                loader = jpype.java.net.URLClassLoader(
                    urls, jpype.java.lang.ClassLoader.getSystemClassLoader()
                )
                _loaders[jars] = loader
        jcls = jpype.java.lang.Class.forName(driver_class, True, loader)
        return jcls.getDeclaredConstructor().newInstance()
    except (TypeError, jpype.JException) as exc:
        raise ConfigError(
            f"jdbc-driver-class-name: {driver_class!r} is not allowed: expected a JDBC driver "
            "class found on jdbc-driver-classpath or $CLASSPATH",
            key="jdbc-driver-class-name",
            value=driver_class,
            allowed="a JDBC driver class on the class path",
            hint="set jdbc-driver-classpath to the driver's jars, e.g. /usr/share/java/derby.jar",
        ) from exc
