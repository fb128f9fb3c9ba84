"""``store data verify`` / ``repair`` on the database store (PostgreSQL, MariaDB/MySQL,
SQLite, the JDBC databases): the counterpart of :mod:`store.file.verify` and
:mod:`store.file.repair`, called by :mod:`store.data.checking`.

The modules, each importing only those above it in this list:

- :mod:`.report` — the report's dataclasses (findings, table summaries, severities);
- :mod:`.verify_journal` — the scan of the two journal tables, through the load's own row
  dispatch and the storage manager's codecs;
- :mod:`.verify_files` — the scan of the large-message table and the page-store directory;
- :mod:`.verify` — :func:`~store.data.db_check.verify.verify_database` and the opened store
  both entry points share (its docstring lists every finding);
- :mod:`.repair` — :func:`~store.data.db_check.repair.repair_database`, which verifies first.

The package imports nothing itself: ``store data print`` or ``exp`` never loads it.
"""
