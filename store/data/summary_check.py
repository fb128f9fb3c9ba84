"""``store data verify`` on the page summaries (:mod:`store.messaging.page_summary`): each
address's summary, when it has one, against the pages it describes, as the load would judge
it (:func:`check_summaries`).

- A summary that does not decode, or that is stale (a page it lists is gone or of another
  length): a warning; the load ignores it and reads every page.
- A summary of the right lengths whose page holds something else (another number of
  records, records routed to other queues or in another transaction, other large messages):
  an error; the load trusts the summary for that page, and its first read of the page raises
  CorruptionError naming it (``PagerCursors.check_summary``).

Reads every page a summary lists; changes nothing.

Thread-safety: each call works alone on its store.
"""

from __future__ import annotations

from store.config import StoreConfig
from store.errors import CorruptionError
from store.messaging.page_scan import paged_runs, per_record
from store.messaging.page_summary import decode_summary
from store.paging.format import page_binding, scan_page
from store.paging.repair import ERROR, WARNING, PageFinding, page_backend

__all__ = ["check_summaries"]


def check_summaries(config: StoreConfig) -> list[PageFinding]:
    """Every finding of ``config``'s page summaries (module docstring). Raises
    StoreIOError / StoreUnavailableError."""
    out: list[PageFinding] = []
    with page_backend(config) as backend:
        for address, locator in sorted(backend.survey().stores.items()):
            data = backend.read_summary(locator)
            if data is None:
                continue
            where = f"the page summary of address {address!r}"
            try:
                summary = decode_summary(data)
            except ValueError as exc:
                out.append(PageFinding(WARNING, where, 0, f"ignored by the next load: {exc}"))
                continue
            lengths = backend.page_lengths(locator)
            stale = [p for p, known in summary.items() if lengths.get(p) != known.length]
            if stale:
                out.append(
                    PageFinding(
                        WARNING,
                        where,
                        0,
                        f"stale (page {stale[0]} is not at the length it lists): the next load "
                        "ignores it and reads every page",
                    )
                )
                continue
            for page_no, known in sorted(summary.items()):
                raw = backend.read_bytes(locator, page_no)
                path, _label = backend.page_path(locator, page_no)
                try:
                    bound = page_binding(address, page_no)
                    records, _end = scan_page(raw or b"", path=path, torn_tail=False, binding=bound)
                    runs, large = paged_runs(records)
                except (CorruptionError, ValueError):
                    continue  # the page's own damage: its own finding
                if (
                    len(records) != known.records
                    or per_record(runs) != per_record(known.runs)
                    or tuple(large) != tuple(known.large)
                ):
                    out.append(
                        PageFinding(
                            ERROR,
                            path,
                            0,
                            f"page {page_no} of address {address!r} is not the page its "
                            f"summary describes ({len(records)} records; the summary: "
                            f"{known.records}, routed and in transactions as listed there): "
                            "changed or replaced after the last clean close; a load raises "
                            "CorruptionError when it reads it",
                        )
                    )
    return out
