"""``STORE_JVM_OPTIONS`` (:mod:`store.db.jvm`): the options reach the JVM the JDBC drivers run
in, and an option the JVM refuses is a clear StoreUnavailableError naming the variable. Each
case runs in a process of its own (a process starts one JVM, once)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import sys
from store.db.jvm import ensure_jvm
from store.errors import StoreUnavailableError
try:
    ensure_jvm([])
except StoreUnavailableError as exc:
    print("refused:", exc)
    sys.exit(3)
import jpype
bean = jpype.JClass("java.lang.management.ManagementFactory").getRuntimeMXBean()
print(" ".join(str(a) for a in bean.getInputArguments()))
"""


def _probe(options: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STORE_JVM_OPTIONS": options, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=120,
        check=False,
    )  # fmt: skip


@pytest.mark.parametrize("options", ["-Xmx300m -XX:+UseSerialGC", ""])
def test_the_options_reach_the_jvm(options: str) -> None:
    done = _probe(options)
    assert done.returncode == 0, done.stdout + done.stderr
    started_with = done.stdout.split()
    assert "-Dderby.stream.error.file=" in done.stdout
    for option in options.split():
        assert option in started_with


def test_an_option_the_jvm_refuses_names_the_variable() -> None:
    done = _probe("-XX:+NoSuchOptionAtAll")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "STORE_JVM_OPTIONS='-XX:+NoSuchOptionAtAll'" in done.stdout
