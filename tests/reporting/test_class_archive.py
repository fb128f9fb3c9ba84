"""Spark's driver JVM and the class-data-sharing archive (store.reporting.class_archive):
the first session's JVM writes it as it ends, the next one maps it, one process at a time
writes it, and an archive that is cut short or stops a JVM from starting costs a slower start,
never a report.

The sessions run in child processes (a JVM of their own, the archive in the test's folder):
the worker's shared session must not be the one that ends.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from store.reporting import class_archive
from store.reporting.session import require_java

pytest.importorskip("pyspark")

# A session built the way ``store report`` builds one for a small store (its JVM with the
# quick compiler alone, archive or not), one job, and the interpreter's exit.
_SESSION = (
    "from store.reporting.session import build_session\n"
    "s = build_session(master='local[1]', shuffle_partitions=1, small_store=True)\n"
    "assert s.range(10).count() == 10\n"
    "bean = s.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()\n"
    "assert '-XX:TieredStopAtLevel=1' in list(bean.getInputArguments())\n"
    "print('ok')\n"
)


def _session(folder: Path, *, log: Path | None = None) -> None:
    """One session in a child process with its archive in ``folder``; with ``log``, the
    JVM's class loading is logged there (one file per JVM: ``<log>.<pid>``)."""
    env = {**os.environ, class_archive.ARCHIVE_ENV: str(folder)}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    if log is not None:
        env["JAVA_TOOL_OPTIONS"] = f"-Xlog:class+load=info:file={log}.%p"
    done = subprocess.run(
        [sys.executable, "-c", _SESSION], env=env, capture_output=True, text=True,
        timeout=300, cwd=folder,
    )  # fmt: skip
    # (a JVM that an archive stopped prints its fatal error's summary before the "ok")
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines[-1:] == ["ok"], done.stderr[-3000:]


def _archives(folder: Path) -> list[Path]:
    return sorted(folder.glob("spark-classes-*"))


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder holding the archive a first session's JVM wrote as it ended."""
    folder = tmp_path_factory.mktemp("class-archive")
    _session(folder)
    yield folder


def test_the_first_session_s_jvm_writes_the_archive_and_the_next_maps_it(
    written: Path, tmp_path: Path
) -> None:
    [archive] = _archives(written)  # no .part and no claim left beside it
    size = int(archive.name.removesuffix(".jsa").rsplit("-", 1)[1])
    assert archive.stat().st_size == size > 10_000_000
    log = tmp_path / "classes.log"
    _session(written, log=log)
    spark_context = [
        line
        for path in glob.glob(f"{log}.*")
        for line in Path(path).read_text(errors="replace").splitlines()
        if " org.apache.spark.SparkContext " in line
    ]
    assert spark_context and all("shared objects file (top)" in s for s in spark_context), (
        spark_context
    )


def test_an_archive_that_stops_the_jvm_is_removed_and_spark_starts_without_it(
    written: Path, tmp_path: Path
) -> None:
    """A cut-short archive whose name still gives its size (what a damaged disk could make):
    mapped, it stops the JVM (SIGBUS); the session starts again without it and removes it."""
    [archive] = _archives(written)
    folder = tmp_path / "cut"
    folder.mkdir()
    key = archive.name.removeprefix("spark-classes-").rsplit("-", 1)[0]
    cut = archive.stat().st_size // 3
    with open(archive, "rb") as f:
        (folder / f"spark-classes-{key}-{cut}.jsa").write_bytes(f.read(cut))
    _session(folder)
    # the cut archive is gone; the JVM that started without it wrote no new one (the claim
    # belongs to the JVM that starts with an archive to write, not to a second try)
    assert not list(folder.glob("*.jsa")), _archives(folder)


def test_an_archive_of_another_size_than_its_name_says_is_removed_unread(
    tmp_path: Path,
) -> None:
    java = require_java()
    first = class_archive.prepare_in(str(tmp_path), java)
    assert first is not None and first.making
    first.discard()
    planted = tmp_path / f"spark-classes-{first.key}-999999.jsa"
    planted.write_bytes(b"\xa8\xab\x0b\xf0" + b"\0" * 100)
    again = class_archive.prepare_in(str(tmp_path), java)
    assert again is not None and again.making  # not the planted archive: it is removed
    assert not planted.exists()
    again.discard()


def test_one_process_at_a_time_writes_the_archive(tmp_path: Path) -> None:
    java = require_java()
    first = class_archive.prepare_in(str(tmp_path), java)
    assert first is not None and first.making and Path(first.claim).exists()
    # a second JVM while the claim's process lives starts without an archive
    assert class_archive.prepare_in(str(tmp_path), java) is None
    # a claim whose process is gone is taken over
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    Path(first.claim).write_text(gone.stdout.strip())
    taken = class_archive.prepare_in(str(tmp_path), java)
    assert taken is not None and taken.making
    assert Path(first.claim).read_text() == str(os.getpid())
    taken.discard()
    assert not list(tmp_path.iterdir())


def test_the_folder_keeps_the_last_used_archives_of_other_installations(tmp_path: Path) -> None:
    """Two virtualenvs sharing the folder each keep theirs; older ones age out."""
    for i in range(4):
        other = tmp_path / f"spark-classes-other{i}-10.jsa"
        other.write_bytes(b"x" * 10)
        os.utime(other, (1_000_000 + i, 1_000_000 + i))
    archive = class_archive.prepare_in(str(tmp_path), require_java())
    assert archive is not None and archive.making
    kept = sorted(p.name for p in tmp_path.glob("*.jsa"))
    assert kept == ["spark-classes-other2-10.jsa", "spark-classes-other3-10.jsa"]
    archive.discard()


def test_off_turns_the_archive_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, "off")
    assert class_archive.archive_folder() is None
    assert class_archive.prepare(require_java()) is None
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, str(tmp_path / "here"))
    assert class_archive.archive_folder() == str(tmp_path / "here")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-java-options '-Xmx2g' pyspark-shell")
    assert class_archive.prepare(require_java()) is None  # those options would replace ours


def test_store_report_in_a_process_with_a_session_leaves_that_session_and_its_archive(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embedding program's session (here the worker's) that is to write the archive:
    ``store report`` in that process uses the session and neither ends its JVM nor writes
    the archive for it (it did both once: the worker's JVM ended mid-suite)."""
    from tests.reporting.support import filled_store
    from tests.support.backends import StoreFactory, backend_by_name, unique_prefix
    from tests.support.cli import run_store_here

    pending = class_archive.ClassArchive(
        str(tmp_path), "k", "", making=True, part=str(tmp_path / "k.part")
    )
    monkeypatch.setattr(class_archive, "_making", [(spark, pending)])
    factory = StoreFactory(backend_by_name("file-nio"), tmp_path / "store", unique_prefix())
    filled_store(factory)
    done = run_store_here(
        "report", "--journal", factory.config.journal_directory, "--out", str(tmp_path / "out")
    )
    assert done.returncode == 0, done.stderr
    assert spark.sparkContext._gateway.proc.poll() is None  # the JVM runs on
    assert class_archive._making == [(spark, pending)]
    assert spark.range(3).count() == 3
