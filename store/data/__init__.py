"""The library behind ``store data`` (DESIGN §10): what the operators' data tools do, on the
file store and the database store, as functions that return results and never print
(CONVENTIONS 10). The commands in :mod:`store.cli.data` parse, call one of these, and format.

File-level tools of the native journal stay with it (:mod:`store.file.survey`,
:mod:`store.file.verify`, :mod:`store.file.repair`, :mod:`store.file.history`); whole-store
compaction is :mod:`store.maintenance`.
"""
