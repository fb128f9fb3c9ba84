"""The reports' JVM record decoder as a session uses it (``store.reporting.jvm``): built with
javac into a cached jar, chosen by ``STORE_REPORT_DECODER``, and giving every source exactly
the rows the Python decode gives (the record-by-record parity, damaged records included, is
``test_jvm_decode.py``)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from store.errors import ReportError
from store.reporting import jvm
from store.reporting.decode import JVM_ERROR, exact_error
from store.reporting.report import ReportSource, _records
from tests.reporting.support import filled_store
from tests.support.backends import StoreFactory


def test_the_reports_session_decodes_in_the_jvm(spark: Any) -> None:
    # scripts/test installs a JDK: a session without the JVM decoder is a failure, not a skip
    jar, why = jvm.decoder_jar()
    assert jar is not None, why
    assert jvm.uses_jvm(spark)


def _rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in frame.collect()), key=repr)


def test_both_decoders_give_the_same_records_on_every_back_end(
    spark: Any, report_factory: StoreFactory
) -> None:
    filled_store(report_factory)
    source = ReportSource(config=report_factory.config)
    assert jvm.uses_jvm(spark)
    in_jvm, _pages = _records(spark, source)
    spark.conf.set(jvm.DECODER_CONF, "python")
    try:
        in_python, _pages = _records(spark, source)
        assert in_jvm is not None and in_python is not None
        expected = _rows(in_python)
    finally:
        spark.conf.set(jvm.DECODER_CONF, "jvm")
    got = _rows(in_jvm)
    assert len(got) > 100 and any(r[8] is not None for r in got)  # addresses were decoded
    assert got == expected


def test_an_unknown_decoder_is_refused_naming_the_setting() -> None:
    with pytest.raises(ReportError, match="STORE_REPORT_DECODER is one of auto, jvm, python"):
        jvm.choose("java")


def test_the_python_decoder_needs_no_jar() -> None:
    assert jvm.choose("python") is None


def _without_javac(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no javac on it
    monkeypatch.setenv("STORE_REPORT_JVM_CACHE", str(tmp_path / "cache"))


def test_without_a_jdk_jvm_is_an_error_and_auto_falls_back_to_python(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _without_javac(monkeypatch, tmp_path)
    with pytest.raises(ReportError, match="no javac"):
        jvm.choose("jvm")
    with caplog.at_level(logging.WARNING, logger="store.reporting.jvm"):
        assert jvm.choose("auto") is None
    assert "decode records in Python workers" in caplog.text


def test_the_jar_is_built_once_into_the_cache_and_reused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STORE_REPORT_JVM_CACHE", str(tmp_path))
    jar, why = jvm.decoder_jar()
    assert jar is not None, why
    assert os.path.dirname(jar) == str(tmp_path) and os.path.getsize(jar) > 0
    built = os.stat(jar).st_mtime_ns
    assert jvm.decoder_jar() == (jar, None)
    assert os.stat(jar).st_mtime_ns == built  # not built again
    assert [p.name for p in tmp_path.iterdir()] == [os.path.basename(jar)]  # no leftovers


def test_a_jvm_error_is_shown_in_the_python_decode_s_words() -> None:
    import base64

    body = b"\x01garbage!"
    error = JVM_ERROR + base64.b64encode(body).decode()
    words = exact_error("messages", 11, 45, 7, error)
    assert words.startswith("record 7 (type 45): ") and JVM_ERROR not in words
    assert exact_error("messages", 11, 45, 7, "as it was") == "as it was"
