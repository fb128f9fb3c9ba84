"""``store report --master spark://…`` on a real Spark standalone cluster: a master and a worker
started from the installed PySpark's own ``spark-class`` (the processes the docker-compose
services run), the report run as a user runs it (a subprocess).

The workers' Python is started without site processing (``python -S``), so this checkout's
editable install is invisible to it: the executors can decode only because ``build_session``
ships the ``store`` package to them (``addPyFile``). ``pyarrow`` and ``pandas`` come from the
virtualenv's site-packages, as a cluster's Python has them installed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reporting.support import check_report, filled_store, python_live
from tests.support.backends import StoreFactory, backend_by_name, file_config_mapping, unique_prefix
from tests.support.store_state import file_state

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in {log} after {seconds} s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a running standalone master with one worker (2 cores); stopped after."""
    import pyspark

    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("spark")
    port = _free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_WORKER_DIR": str(work / "worker"),
        "SPARK_LOG_DIR": str(work),
        # The daemons only pass messages: the client compiler and the serial collector start
        # them in less CPU (as tests/conftest.py does for the other JVMs).
        "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    }
    spark_class = str(home / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> Path:
        log = work / f"{name}.log"
        argv = [spark_class, f"org.apache.spark.deploy.{name}", *args, "--host", "127.0.0.1"]
        argv += ["--webui-port", str(_free_port())]
        with log.open("wb") as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        procs.append(proc)
        return log

    try:
        # Both at once: the worker retries its registration until the master answers.
        url = f"spark://127.0.0.1:{port}"
        master = start("master.Master", "--port", str(port))
        worker = start("worker.Worker", url, "--cores", "2", "--memory", "1g")
        _wait_for(master, "I have been elected leader", procs[0], 90)
        _wait_for(worker, "Successfully registered with master", procs[1], 90)
        yield url
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


@pytest.mark.slow  # a standalone master and worker, a `store report` process
def test_report_runs_on_a_standalone_cluster_whose_python_lacks_this_package(
    cluster: str, tmp_path: Path
) -> None:
    worker_python = tmp_path / "worker-python"
    site = sysconfig.get_paths()["purelib"]
    worker_python.write_text(
        f'#!/bin/sh\nPYTHONPATH="$PYTHONPATH:{site}" exec {sys.executable} -S "$@"\n'
    )
    worker_python.chmod(0o755)
    # The worker's Python really cannot import this checkout by itself.
    alone = subprocess.run(
        [str(worker_python), "-c", "import store"], capture_output=True, text=True,
        cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, check=False,
    )  # fmt: skip
    assert alone.returncode != 0 and "No module named 'store'" in alone.stderr

    factory = StoreFactory(backend_by_name("file-nio"), tmp_path, unique_prefix())
    try:
        expected = filled_store(factory)
    finally:
        factory.teardown()
    before = file_state(tmp_path, skip=("report", "store.toml", "worker-python"))
    mapping = file_config_mapping(tmp_path, "NIO")
    config = tmp_path / "store.toml"
    config.write_text(
        "".join(
            f"{k} = {v!r}\n" if not isinstance(v, str) else f'{k} = "{v}"\n'
            for k, v in mapping.items()
            if not isinstance(v, dict)
        )
    )
    out = tmp_path / "report"
    light = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"  # a tiny store: start-up is the cost
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYSPARK_PYTHON": str(worker_python),
        "PYSPARK_SUBMIT_ARGS": f'--driver-java-options "{light}" --conf '
        f'"spark.executor.extraJavaOptions={light}" pyspark-shell',
    }
    done = subprocess.run(
        [sys.executable, "-m", "store.cli.main", "report", "--config", str(config), "--out",
         str(out), "--master", cluster],
        capture_output=True, text=True, env=env, timeout=400, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    # Read-only: not a byte of the store changed (issue 25).
    assert file_state(tmp_path, skip=("report", "store.toml", "worker-python")) == before
    # The file store's end-to-end checks (tests/reporting/test_cli.py runs the databases').
    check_report(out, done.stdout, expected, python_live(factory))
