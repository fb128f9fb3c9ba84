"""The library behind ``store data`` (docs/cli.md): what the operators' data tools do, on the
file store and the database store, as functions that return results and never print
(docs/conventions.md#10). The :mod:`store.cli.data` commands parse, call one of these, and format.

::

    from store.data import repair_store, verify_store

    result = verify_store(config)            # the file or the database store, from the config
    if not result.ok:
        for part in result.parts: ...        # each journal, the large messages, the pages
    repair_store(config, force=False)        # -> StoreRepairResult: every change it made

Layout: one sub-package per command family whose modules are only its own, and at the top
the entry points that choose the back-end, with what serves them alone:

- :func:`verify_store`, :func:`repair_store` (:mod:`.checking`) — ``verify`` / ``repair``,
  over :mod:`.db_check` (the database store: :mod:`~.db_check.verify` with its scans
  :mod:`~.db_check.verify_journal` and :mod:`~.db_check.verify_files` and their
  :mod:`~.db_check.report`, and :mod:`~.db_check.repair`), :mod:`store.file.verify`,
  :mod:`store.file.repair`, :mod:`store.file.salvage`, :mod:`.large_verify` (the file store)
  and :mod:`store.paging.repair` (both);
- :func:`recover_store` (:mod:`.recover`) — ``recover``, over :mod:`.recover_messages` (every
  message ever added) and :mod:`store.file.history` (the retention history is the file
  journal's);
- :mod:`.describe` — ``print``: every record decoded by user record type, summaries, pages
  and large messages, read-only (:func:`~.describe.describe_store`; the entries in
  :mod:`~.describe.model`, which the package's other modules share and which imports none of
  them; :mod:`~.describe.records`, :mod:`~.describe.parts`, :mod:`~.describe.file`,
  :mod:`~.describe.db`);
- :mod:`.xml` — ``exp`` / ``imp`` in Artemis's XML export format, streaming, with a hardened
  parser (:mod:`~.xml.format`, :mod:`~.xml.numbers`, :mod:`~.xml.reader`,
  :mod:`~.xml.document`, :mod:`~.xml.export`, :mod:`~.xml.import_`).

:mod:`.checking` and :mod:`.recover` stay at the top because :func:`verify_store`,
:func:`repair_store` and :func:`recover_store` are this package's exports and each decides from
the configuration which back-end's code runs; :mod:`.large_verify` (the file store's
large-message bodies) stays beside :mod:`.checking`, its only caller, as a part of the file
store's verify: it is not a database check, and it reads the bodies with :mod:`.describe`'s
readers rather than belonging to ``print``. Whole-store compaction is :mod:`store.maintenance`.

The imports between these modules form no cycle (``tests/data/test_imports.py``): each
sub-package's modules import one way (its ``__init__`` docstring lists the order), and the
top-level modules import the sub-packages, never the reverse.

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
