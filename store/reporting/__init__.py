"""Reporting on Spark (docs/reporting.md): PySpark jobs over the store's tables (JDBC) or files.

::

    from store.reporting import ReportSource, build_session, run_report

    spark = build_session()                       # local[*]; master="spark://host:7077"
    summary = run_report(spark, ReportSource(config=config), "report/")

Modules: :mod:`~store.reporting.session` (the SparkSession), :mod:`~store.reporting.schemas`
(every schema), :mod:`~store.reporting.decode` (records decoded with the project's codecs),
:mod:`~store.reporting.sources` (tables, journal files, history, pages),
:mod:`~store.reporting.jobs` (pure ``DataFrame -> DataFrame`` jobs),
:mod:`~store.reporting.page` (charts and ``index.html``), :mod:`~store.reporting.report`
(:func:`run_report`). Needs the ``store[spark]`` extra: importing this package imports
PySpark (the CLI imports it only when ``store report`` runs).
"""

from __future__ import annotations

from store.reporting.report import AuditWindow, ReportSource, ReportSummary, run_report
from store.reporting.session import build_session

__all__ = ["AuditWindow", "ReportSource", "ReportSummary", "build_session", "run_report"]
