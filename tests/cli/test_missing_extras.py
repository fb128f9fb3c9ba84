"""A base install (``pip install store``, no extras) as a new user has it: the command line
works, and a command that needs a missing extra says which one to install, in one line, exit 2.

Each test runs ``store`` in a subprocess whose import system refuses the extras' modules (a
meta-path finder put first, so an installed module cannot be found), which is what a virtualenv
without them looks like to the code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from store.extras import EXTRA_OF_MODULE, install_hint
from tests.ha.nodes import write_toml
from tests.support.cli import ROOT

# ``python -c BLOCKING MODULES ARGV...``: store's main with MODULES (comma-separated top-level
# names) unimportable.
BLOCKING = """
import sys
blocked = set(sys.argv[1].split(","))
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Refuse())
from store.cli.main import main
sys.exit(main(sys.argv[2:]))
"""

EVERY_EXTRA = sorted(EXTRA_OF_MODULE)


def store_without(
    blocked: list[str], *argv: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-c", BLOCKING, ",".join(blocked), *argv],
        capture_output=True, text=True, cwd=cwd, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": path, "COLUMNS": "200"},
    )  # fmt: skip


def test_the_base_install_holds_the_database_stack_and_the_extras_only_drivers() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {d.split(">")[0].split(";")[0].strip().lower() for d in project["dependencies"]}
    assert {"sqlalchemy", "alembic"} <= base
    extras = project["optional-dependencies"]
    for module, extra in EXTRA_OF_MODULE.items():
        assert extra in extras, (module, extra)  # every extra a message names exists


def test_store_help_and_data_commands_work_without_any_extra(tmp_path: Path) -> None:
    done = store_without(EVERY_EXTRA, "--help")
    assert done.returncode == 0, done.stderr
    assert "report" in done.stdout and "data" in done.stdout
    # a database-store command on SQLite needs no extra either
    config = write_toml(
        {"database-store": {"jdbc-connection-url": f"jdbc:sqlite:{tmp_path / 's.db'}"}},
        tmp_path / "sqlite.toml",
    )
    done = store_without(EVERY_EXTRA, "db", "upgrade", "--config", str(config))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("url", "blocked", "extra"),
    [
        ("jdbc:postgresql://127.0.0.1:5432/test", ["psycopg"], "postgresql"),
        ("postgresql://postgres@127.0.0.1:5432/test", ["psycopg"], "postgresql"),
        ("jdbc:mariadb://127.0.0.1:3306/test", ["pymysql"], "mysql"),
        ("jdbc:derby:{tmp}/derby;create=true", ["jaydebeapi"], "jdbc"),
        ("jdbc:derby:{tmp}/derby;create=true", ["jpype"], "jdbc"),
    ],
)
def test_a_database_command_without_its_driver_names_the_extra_in_one_line(
    tmp_path: Path, url: str, blocked: list[str], extra: str
) -> None:
    config = write_toml(
        {"database-store": {"jdbc-connection-url": url.format(tmp=tmp_path)}},
        tmp_path / "db.toml",
    )
    for argv in (("db", "current"), ("data", "verify")):
        done = store_without(blocked, *argv, "--config", str(config))
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.splitlines()  # one line, no traceback
        assert line.startswith("store: error: the Python module"), line
        assert line.endswith(install_hint(extra)), line
        # this interpreter's pip, into this checkout (issue 44: a bare pip installed PyPI's
        # unrelated "store" outside the virtualenv)
        assert f"{sys.executable} -m pip install -e '{ROOT}[{extra}]'" in line, line
        assert repr(blocked[0]) in line


def test_report_without_the_spark_extra_names_it_before_reading_anything(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    journal.mkdir()
    for blocked, module in ((["pyspark"], "pyspark"), (["pyarrow", "pandas"], "pyarrow")):
        done = store_without(
            blocked, "report", "--journal", str(journal), "--out", str(tmp_path / "r")
        )
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.splitlines()
        assert repr(module) in line and line.endswith(install_hint("spark")), line
    assert not (tmp_path / "r").exists()


def test_any_other_missing_module_of_an_extra_is_the_same_one_line(tmp_path: Path) -> None:
    # matplotlib is imported only when the report draws its charts, past every check: what
    # reaches main is a plain ModuleNotFoundError, which its safety net turns into the line.
    # (The command is replaced before main builds its parser, so Spark does not start.)
    script = BLOCKING.replace(
        "from store.cli.main import main",
        "from store.cli.main import main\n"
        "import store.cli.report as r\n"
        "def boom(args):\n"
        "    import matplotlib.pyplot\n"
        "r.run_report_command = boom",
    )
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    argv = ["report", "--journal", str(tmp_path), "--out", str(tmp_path / "r")]
    done = subprocess.run(
        [sys.executable, "-c", script, "matplotlib", *argv],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"store: error: the Python module 'matplotlib' is not installed: {install_hint('spark')}\n"
    )


def test_the_main_job_runs_on_the_base_install(tmp_path: Path) -> None:
    done = store_without(
        EVERY_EXTRA, "perf", "--seconds", "0.5", "--no-crash", "-q", "--json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert '"verified": true' in done.stdout
