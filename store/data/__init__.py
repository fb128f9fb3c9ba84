"""The library behind ``store data`` (docs/cli.md): what the operators' data tools do, on the
file store and the database store, as functions that return results and never print
(docs/conventions.md#10). The :mod:`store.cli.data` commands parse, call one of these, and format.

- :mod:`.describe` (with :mod:`.describe_records`, :mod:`.describe_file`,
  :mod:`.describe_db`, :mod:`.describe_parts`) — ``print``: every record decoded by user
  record type, summaries, pages and large messages, read-only;
- :mod:`.db_verify` (with :mod:`.db_verify_journal`, :mod:`.db_verify_files`,
  :mod:`.db_report`), :mod:`.db_repair` — ``verify`` / ``repair`` of a database store (the
  file journal's are :mod:`store.file.verify`, :mod:`store.file.repair`,
  :mod:`store.file.salvage`);
- :mod:`.xml_format`, :mod:`.xml_reader`, :mod:`.xml_document`, :mod:`.xml_export`,
  :mod:`.xml_import` — ``exp`` / ``imp`` in Artemis's XML export format, streaming, with a
  hardened parser.

``recover`` is :mod:`store.file.history` (the retention history is the file journal's);
whole-store compaction is :mod:`store.maintenance`.
"""
