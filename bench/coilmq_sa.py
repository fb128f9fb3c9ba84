"""coilmq 1.1.0 on its SQLAlchemy store as a child process of a benchmark (``bench.stomp``'s
``coilmq-sqlalchemy`` target, issue 29).

coilmq's ``coilmq.store.sa`` needs SQLAlchemy 1.x (``MetaData(bind=...)``, ``select([...])``)
and the project needs 2.x, so the broker cannot run in the project's virtualenv. :func:`prepare`
makes a virtualenv of its own, once: ``python3.11 -m venv`` at :func:`venv_path` (the
``--coilmq-sa-venv`` option of ``bench.stomp``, else ``$STORE_BENCH_COILMQ_SA_VENV``, else
``~/.cache/store-bench/coilmq-sa-venv``), then ``pip install`` of :data:`REQUIREMENTS` from the
package index pip is configured with. A file in the virtualenv records the requirements it was
made with; while it matches, later runs reuse the virtualenv without calling pip. When
anything fails, :func:`prepare` returns why, and the benchmark prints that ("not installed
here") instead of a figure, as it does for ActiveMQ without its package.

:func:`coilmq_sa` runs one broker for one run: a fresh PostgreSQL database (``CREATE DATABASE``
with a unique name on 127.0.0.1:5432 as ``postgres``; coilmq's table is always named
``frames``, so a table prefix in the shared ``test`` database is not possible), the script
``bench/coilmq_sa_broker.py`` run by the virtualenv's python on a free loopback port (it
imports nothing of ``store``), stopped with SIGTERM (SIGKILL after :data:`STOP_SECONDS`), and
the database dropped afterwards.

What coilmq's SQLAlchemy store does, read from its code (``coilmq/store/sa/__init__.py`` and
``model.py``), which the figures depend on:

- One table, ``frames (message_id PK, sequence BIGINT, destination indexed, frame PickleType,
  queued DateTime default now())``: each frame is pickled whole into a ``bytea``.
- ``enqueue`` is one INSERT and a COMMIT: one transaction per SEND, committed before the
  RECEIPT (with PostgreSQL's ``synchronous_commit = on``, durable per RECEIPT, as ours).
- ``dequeue`` is a SELECT of the destination's frames ``ORDER BY queued, sequence`` without a
  LIMIT, a DELETE of the first by ``message_id``, and a COMMIT. psycopg2's cursors fetch the
  whole result when the statement runs, so every dequeue reads (and sorts) every waiting frame
  of the queue: its cost grows with the queue's depth, and draining N costs O(N^2).
  ``has_frames`` (asked before each dequeue) likewise fetches every waiting ``message_id``.
- ``sequence`` is not filled (``autoincrement`` does nothing on a column outside the primary
  key), so the order is ``now()`` of each INSERT's transaction; frames that share a
  microsecond come in no defined order.
- The frame is deleted when it is dispatched, not when it is ACKed: a dispatched, unacked
  frame lives only in coilmq's memory until its ACK (lost if the broker dies; INSERTed again
  if its client disconnects).
- A SEND that finds a subscriber with no unacked frame goes straight to it and is never
  stored (coilmq's ``QueueManager.send``; its dbm store alike). In ``bench.stomp``'s
  ``send+consume 16+16`` no frame at all was inserted (bench/RESULTS.md).
- coilmq's queue manager holds one process-wide lock around every store call, so SENDs from
  16 producers commit one after the other: there is no group commit across connections.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from bench.activemq import _answers, _free_port, stop_process

__all__ = ["REQUIREMENTS", "coilmq_sa", "prepare", "venv_path"]

_log = logging.getLogger(__name__)

#: What the virtualenv gets: coilmq as ``bench.stomp``'s other coilmq target, the last
#: SQLAlchemy its store works with, and a PostgreSQL driver for SQLAlchemy 1.x.
REQUIREMENTS = ("coilmq==1.1.0", "sqlalchemy<2", "psycopg2-binary")
#: Where the virtualenv goes unless ``--coilmq-sa-venv`` or this environment variable says.
VENV_ENV = "STORE_BENCH_COILMQ_SA_VENV"
DEFAULT_VENV = Path.home() / ".cache" / "store-bench" / "coilmq-sa-venv"
BROKER_SCRIPT = Path(__file__).with_name("coilmq_sa_broker.py")
PG_ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"
PG_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/{database}"
START_SECONDS = 60.0
STOP_SECONDS = 30.0
PIP_SECONDS = 600.0
_STAMP = "store-bench-requirements.txt"
_CHECK = (
    "import coilmq.store.sa, psycopg2, sqlalchemy; "
    "assert sqlalchemy.__version__.startswith('1.'), sqlalchemy.__version__"
)


def venv_path(option: str | Path | None = None) -> Path:
    """The virtualenv's folder: ``option`` if given, else ``$STORE_BENCH_COILMQ_SA_VENV`` if
    set, else ``~/.cache/store-bench/coilmq-sa-venv``."""
    if option:
        return Path(option).expanduser()
    if os.environ.get(VENV_ENV):
        return Path(os.environ[VENV_ENV]).expanduser()
    return DEFAULT_VENV


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _run(command: list[str], seconds: float) -> str | None:
    """Run ``command``; None when it succeeded, else its last lines of output."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
    return f"exit {done.returncode}: " + " / ".join(tail)


def prepare(venv: Path) -> str | None:
    """Make (or reuse) the virtualenv at ``venv``; return None when the broker can run, else
    why not, in one line (which ``bench.stomp`` prints as "not installed here").

    A folder that exists but is not a virtualenv (no ``pyvenv.cfg``) is left alone and
    reported; a virtualenv made with other requirements (or half made) is made again with
    ``python3.11 -m venv --clear``.
    """
    stamp = venv / _STAMP
    wanted = "\n".join(REQUIREMENTS) + "\n"
    python = _python(venv)
    if stamp.is_file() and stamp.read_text() == wanted and python.exists():
        failure = _run([str(python), "-c", _CHECK], 60)
        return None if failure is None else f"the virtualenv at {venv} fails: {failure}"
    if venv.exists() and any(venv.iterdir()) and not (venv / "pyvenv.cfg").is_file():
        return f"{venv} exists and is not a virtualenv (set --coilmq-sa-venv)"
    interpreter = shutil.which("python3.11")
    if interpreter is None:
        return "no python3.11 on the PATH to make coilmq's virtualenv with"
    venv.parent.mkdir(parents=True, exist_ok=True)
    failure = _run([interpreter, "-m", "venv", "--clear", str(venv)], 120)
    if failure is not None:
        return f"python3.11 -m venv {venv} failed: {failure}"
    failure = _run([str(python), "-m", "pip", "install", "-q", *REQUIREMENTS], PIP_SECONDS)
    if failure is not None:
        return f"pip install {' '.join(REQUIREMENTS)} failed: {failure}"
    failure = _run([str(python), "-c", _CHECK], 60)
    if failure is not None:
        return f"the virtualenv at {venv} fails: {failure}"
    stamp.write_text(wanted)
    return None


def _admin(statement: str, database: str) -> None:
    import psycopg
    from psycopg import sql

    query = sql.SQL(statement).format(sql.Identifier(database))
    with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
        conn.execute(query)


def _report_errors(log_path: Path) -> None:
    """Log a warning when the broker's log holds tracebacks (coilmq drops a connection whose
    frames arrive pipelined, ``BodyNotTerminated``; the temporary folder with the log goes
    away after the run, so this is where a run's figures can be told to have lost clients)."""
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    if (count := text.count("Traceback")) > 0:
        last = [line for line in text.splitlines() if line.strip(" -")][-1]
        _log.warning("coilmq (SQLAlchemy) logged %d traceback(s), the last: %s", count, last)


@contextlib.contextmanager
def coilmq_sa(base: Path, venv: Path) -> Iterator[int]:
    """Run coilmq on its SQLAlchemy store on a fresh PostgreSQL database, its log in
    ``base/coilmq.log`` (``base`` must exist); yield its STOMP port once it answers; stop it
    and drop the database afterwards.

    :func:`prepare` must have returned None for ``venv``. Raises RuntimeError when the broker
    exits or does not answer within START_SECONDS (the message ends with its log), and
    psycopg's errors when the database cannot be made or dropped.
    """
    database = f"coilmq_bench_{os.getpid()}_{secrets.token_hex(3)}"
    _admin("CREATE DATABASE {}", database)
    try:
        port = _free_port()
        log_path = base / "coilmq.log"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [str(_python(venv)), str(BROKER_SCRIPT), "--port", str(port),
                 "--url", PG_URL.format(database=database)],
                stdout=log, stderr=subprocess.STDOUT, cwd=base,
            )  # fmt: skip
        try:
            deadline = time.monotonic() + START_SECONDS
            while not _answers(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"coilmq (SQLAlchemy) did not start:\n{tail}")
                time.sleep(0.05)
            yield port
        finally:
            stop_process(process, STOP_SECONDS)
            _report_errors(log_path)
    finally:
        # FORCE: a broker killed by SIGKILL may leave sessions the server has not ended yet.
        _admin("DROP DATABASE IF EXISTS {} WITH (FORCE)", database)
