"""``store data verify`` on the file store's large-message bodies: every body read whole, and
every large message the message journal holds checked to have one. The journals' own checks
are :mod:`store.file.verify`; the database store's bodies are checked by
:mod:`store.data.db_check.verify` with the same rules.

Findings (:class:`store.file.verify.Finding`, ``path`` the body's file):

======================  ========  ==============================================================
kind                    severity  what
======================  ========  ==============================================================
``damaged-body``        error     a ``<id>.msg`` file that cannot be read whole: a damaged or
                                  unknown header, a size its header does not account for
                                  (truncated), a chunk that fails its checksum or is not in its
                                  place (``offset``: the body offset, as the reader says)
``large-body-missing``  error     a large message a load of the message journal returns whose
                                  ``<id>.msg`` is gone: the message cannot be delivered
``incomplete-body``     warning   a ``<id>.tmp`` (a writer that died): the next open deletes it
======================  ========  ==============================================================

Each body is read through :class:`store.large.files.FileLargeMessages` opened read-only (its
own header check and reader, no second decoder), one chunk in memory at a time; nothing is
changed. A paged large message's body is checked by the page stores' part of verify
(:func:`store.data.page_salvage.lost_paged_bodies`: required while some queue may still receive
it; the load sweeps the bodies of paged messages no queue can receive again).

Thread-safety: each call works alone on its directory.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from store.data.describe.file import live_large_ids
from store.data.describe.model import LargeMessage
from store.data.describe.parts import file_large_messages
from store.file.options import FileJournalOptions
from store.file.verify import ERROR, WARNING, Finding

if TYPE_CHECKING:
    from store.config import StoreConfig

__all__ = ["verify_file_large_messages"]


def verify_file_large_messages(
    config: StoreConfig, messages: FileJournalOptions | None
) -> tuple[int, list[Finding]]:
    """Check every body of ``config``'s large-messages directory, and, when ``messages`` (the
    message journal's options) is given, that every large message it holds has one. Returns
    (bodies read, findings), errors first. Raises StoreIOError when a file cannot be read,
    ConfigError when the message journal does not exist."""
    directory = config.large_messages_directory
    findings: list[Finding] = []
    complete: set[int] = set()
    bodies = 0
    for entry in file_large_messages(directory):
        assert isinstance(entry, LargeMessage)
        path = os.path.join(directory, entry.name)
        if not entry.complete:
            findings.append(
                Finding(
                    WARNING,
                    "incomplete-body",
                    path,
                    None,
                    "a body whose writer died before it completed; the next open deletes it",
                )
            )
            continue
        bodies += 1
        if entry.message_id is not None:
            complete.add(entry.message_id)
        if entry.error is not None:
            findings.append(Finding(ERROR, "damaged-body", path, None, entry.error))
    if messages is not None:
        for mid in sorted(live_large_ids(messages) - complete):
            findings.append(
                Finding(
                    ERROR,
                    "large-body-missing",
                    os.path.join(directory, f"{mid}.msg"),
                    None,
                    f"large message {mid} is live in the message journal but its body is gone",
                )
            )
    findings.sort(key=lambda f: f.severity != ERROR)
    return bodies, findings
