"""The library behind ``store data`` (docs/cli.md): what the operators' data tools do, on the
file store and the database store, as functions that return results and never print
(docs/conventions.md#10). The :mod:`store.cli.data` commands parse, call one of these, and format.

::

    from store.data import repair_store, verify_store

    result = verify_store(config)            # the file or the database store, from the config
    if not result.ok:
        for part in result.parts: ...        # each journal, the large messages, the pages
    repair_store(config, force=False)        # -> StoreRepairResult: every change it made

The entry points, each choosing the back-end from the configuration:

- :func:`verify_store`, :func:`repair_store` (:mod:`.checking`) — ``verify`` / ``repair``,
  over :mod:`.db_verify` (with :mod:`.db_verify_journal`, :mod:`.db_verify_files`,
  :mod:`.db_report`), :mod:`.db_repair` (the database store), :mod:`store.file.verify`,
  :mod:`store.file.repair`, :mod:`store.file.salvage`, :mod:`.large_verify` (the file store)
  and :mod:`store.paging.repair` (both);
- :func:`recover_store` (:mod:`.recover`) — ``recover``, over :mod:`.recover_messages` (every
  message ever added) and :mod:`store.file.history` (the retention history is the file
  journal's).

And the modules of the other commands: :mod:`.describe` (with :mod:`.describe_records`,
:mod:`.describe_file`, :mod:`.describe_db`, :mod:`.describe_parts`) — ``print``: every record
decoded by user record type, summaries, pages and large messages, read-only;
:mod:`.xml_format`, :mod:`.xml_reader`, :mod:`.xml_document`, :mod:`.xml_export`,
:mod:`.xml_import` — ``exp`` / ``imp`` in Artemis's XML export format, streaming, with a
hardened parser. Whole-store compaction is :mod:`store.maintenance`.

The entry points are imported on first use (PEP 562, as ``store``'s lazy names): a command
that needs only the XML modules does not import both back-ends' verifiers.
"""

from __future__ import annotations

import typing

from store import _lazy

if typing.TYPE_CHECKING:
    from store.data.checking import (
        StoreRepairResult,
        StoreVerifyResult,
        repair_store,
        verify_store,
    )
    from store.data.recover import StoreRecoverResult, recover_store

__all__ = [
    "StoreRecoverResult",
    "StoreRepairResult",
    "StoreVerifyResult",
    "recover_store",
    "repair_store",
    "verify_store",
]

#: The names imported on first use, and the module each comes from.
_LAZY = {
    "StoreRecoverResult": "store.data.recover",
    "StoreRepairResult": "store.data.checking",
    "StoreVerifyResult": "store.data.checking",
    "recover_store": "store.data.recover",
    "repair_store": "store.data.checking",
    "verify_store": "store.data.checking",
}


__getattr__, __dir__ = _lazy.lazy_exports(__name__, _LAZY, globals())
