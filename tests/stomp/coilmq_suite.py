"""coilmq's own test suite, fetched at test time and imported under its own name.

The pinned sdist (``COILMQ_VERSION``, the version the ``stomp`` extra pins) is downloaded with
``pip download`` into a cache folder (``STORE_COILMQ_SUITE_DIR``, default
``$TMPDIR/store-coilmq-suite``; once per machine, under a file lock so that pytest-xdist
workers share it) and its ``tests/`` folder is extracted there. Nothing of it is copied into
this repository.

coilmq's test modules import each other as ``tests.mock``, ``tests.functional`` …, and this
repository's tests are a package called ``tests`` too. :func:`load` imports coilmq's as the
package ``coilmq_suite`` and registers the modules their imports name (``tests.mock``,
``tests.store``, ``tests.queue_manager``, ``tests.functional`` …) under those names in
``sys.modules``; none of them exists in this repository's ``tests`` package, so nothing of
ours is shadowed. Their base classes (``BaseQueueTests``, ``QueueManagerTests``,
``TestServerWithDefaultClasses``) are then subclassed in tests/stomp/test_coilmq_suite.py with
fixtures that give them our store.
"""

from __future__ import annotations

import fcntl
import importlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

COILMQ_VERSION = "1.1.0"

# coilmq's modules in the order their imports need them (a module's imports first).
_MODULES = (
    "mock",
    "store",
    "queue_manager",
    "queue_manager.conftest",
    "functional",
    "functional.conftest",
    "functional.test_memory",
)


def suite_dir() -> Path:
    """The folder holding coilmq's ``tests/`` (downloaded and extracted on first use)."""
    base = Path(
        os.environ.get("STORE_COILMQ_SUITE_DIR")
        or Path(tempfile.gettempdir()) / "store-coilmq-suite"
    )
    target = base / f"coilmq-{COILMQ_VERSION}"
    if (target / "tests" / "__init__.py").exists():
        return target
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "tests" / "__init__.py").exists():
            _download(base, target)
    return target


def _download(base: Path, target: Path) -> None:
    sdist = base / f"coilmq-{COILMQ_VERSION}.tar.gz"
    if not sdist.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                f"coilmq=={COILMQ_VERSION}",
                "--no-deps",
                "--no-binary",
                ":all:",
                "-q",
                "-d",
                str(base),
            ],
            check=True,
        )
    work = Path(tempfile.mkdtemp(dir=base))
    with tarfile.open(sdist) as tar:
        prefix = f"coilmq-{COILMQ_VERSION}/tests/"
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(work, members=members, filter="data")
    (work / f"coilmq-{COILMQ_VERSION}").rename(target)
    shutil.rmtree(work, ignore_errors=True)


def load() -> dict[str, ModuleType]:
    """Import coilmq's test modules (see the module docstring); returns them by their name
    under coilmq's ``tests`` package (``"store"``, ``"queue_manager"``, …)."""
    root = suite_dir() / "tests"
    if "coilmq_suite" not in sys.modules:
        package = ModuleType("coilmq_suite")
        package.__path__ = [str(root)]
        package.__file__ = str(root / "__init__.py")
        sys.modules["coilmq_suite"] = package
    loaded: dict[str, ModuleType] = {}
    for name in _MODULES:
        module = importlib.import_module(f"coilmq_suite.{name}")
        sys.modules.setdefault(f"tests.{name}", module)
        loaded[name] = module
    return loaded
