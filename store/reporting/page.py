"""The report's static page: PNG charts (matplotlib, headless ``Agg`` backend) and an
``index.html`` an operator can pin on a wall. It has no scripts and no external resources (no
CDN, no fonts): it opens from disk (``file://``) anywhere.

What the page shows, top to bottom (the decisions, issue 28):

- a **header**: the store, when the cut was taken (UTC), the totals (:class:`Totals`:
  messages, bytes, queues, oldest message, dead bytes, large bodies, orphan large bodies,
  paged addresses, dead-lettered and expired messages waiting) and any
  warning (a salvaged report says so here, first). Each total carries its exact value in
  ``data-value`` and shows it with thousands separators;
- the **age histogram** (messages per queue by age bucket), then every other chart, each at
  the page's full width;
- the **raw tables** (each dataset's first rows) below, numbers with separators; the age
  histogram's as one row per queue with a column per bucket.

Where two charts count bytes differently (stored bytes per address, paged bytes per
address), a caption under each says what its bars count (:data:`CAPTIONS`). Stored bytes per
queue is the queue table's column, not a chart: beside bytes per address it said the same
thing twice. The age chart is one bar per queue split by age bucket (shares, so a deep and
a shallow queue read alike), its colours pale to dark red as messages get older.

Charts are read, not admired: horizontal bars with the label on the axis and the value at the
bar's end; a **log scale** when the largest value is at least 100 times the smallest non-zero
one (else the small bars vanish); ticks with thousands separators; a chart with nothing to
show is a small image saying "none" (no axis: matplotlib draws an all-zero axis as
-0.04..0.04).

Thread-safety: functions over plain rows; matplotlib's pyplot state is touched only here,
one figure at a time, from the caller's thread.
"""

from __future__ import annotations

import datetime as dt
import html
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from store.reporting.health import ATTENTION, DAMAGED, HEALTHY, Health

__all__ = [
    "CAPTIONS",
    "CHARTS",
    "HISTOGRAM_CHART",
    "Totals",
    "format_number",
    "histogram_queues",
    "write_charts",
    "write_index",
]

#: chart file -> (dataset, label column, value column, title, unit of the value).
CHARTS: Final = {
    "queue_depths.png": ("queue_depths", "queue", "messages", "Messages per queue", "messages"),
    "address_bytes.png": (
        "address_bytes", "address", "bytes", "Stored bytes per address", "bytes",
    ),
    "record_types.png": ("record_types", "name", "records", "Live records per type", "records"),
    "dead_records.png": (
        "dead_records", "journal", "dead_bytes", "Dead bytes per journal (reclaimable)", "bytes",
    ),
    "page_stores.png": ("page_stores", "address", "bytes", "Paged bytes per address", "bytes"),
}  # fmt: skip
#: The age histogram's chart (dataset ``message_age_histogram``), shown first.
HISTOGRAM_CHART: Final = "message_age_histogram.png"
#: What a chart's bars count, under the chart: where two charts measure bytes differently.
CAPTIONS: Final = {
    "address_bytes.png": (
        "The messages some queue still holds at each address, in the journal or paged, each "
        "counted once however many queues hold it: its record (header, properties, inline "
        "body) and, for a large message, its body."
    ),
    "page_stores.png": (
        "The bytes of each address's page files: every record its pages hold, with each "
        "record's framing, acknowledged ones too until their page is deleted; a large "
        "message's body is in the large-message store, not here. So this is not stored bytes "
        "per address: that counts only what is still held, large bodies included."
    ),
    HISTOGRAM_CHART: (
        "How old each queue's waiting messages are (report time minus the message's "
        "timestamp), as the share of the queue's messages in each age, pale to dark as they "
        "get older; the count at the bar's end; the fullest queues first, an empty queue as "
        "empty. The table below has the counts."
    ),
}
_MAX_BARS: Final = 30
_MAX_HISTOGRAM_QUEUES: Final = 15
#: Largest / smallest non-zero value from which a chart's scale is logarithmic.
_LOG_RATIO: Final = 100
_WIDTH_IN: Final = 12.0  # at _DPI: 1,200 pixels, the page's full width
_DPI: Final = 100
_BAR: Final = "#3b6ea5"
#: The age buckets' colours, youngest to oldest: one ramp from pale to dark red, so a darker
#: bar is an older message without reading the legend.
_BUCKET_COLOURS: Final = ("#fecc5c", "#fd8d3c", "#e31a1c", "#800026")
#: Columns whose numbers are identifiers or codes, shown without separators.
_IDS: Final = frozenset({"user_record_type", "message_id", "page", "bucket_index", "queue_id"})

Rows = Sequence[Mapping[str, Any]]


@dataclass(frozen=True, kw_only=True)
class Totals:
    """The header's totals, computed from whole datasets (not the rows a page shows).

    ``oldest_timestamp``: the oldest unacknowledged message's timestamp (ms since the epoch,
    UTC; None: no message). ``large_bodies`` / ``large_bytes``: large messages the load keeps
    (some queue holds them, or a prepared transaction sends them) and the bytes the
    large-message store holds for them; ``large_missing``: those of them whose body is missing
    or damaged; ``orphan_bodies`` / ``orphan_bytes``: bodies no such message refers to (what
    a load sweeps) and their bytes. ``dead_lettered`` / ``expired``: the messages waiting
    that a dead-letter or an expiry move put where they are. Immutable.
    """

    messages: int = 0
    bytes: int = 0
    queues: int = 0
    oldest_timestamp: int | None = None
    dead_bytes: int = 0
    large_bodies: int = 0
    large_bytes: int = 0
    large_missing: int = 0
    orphan_bodies: int = 0
    orphan_bytes: int = 0
    paged_addresses: int = 0
    dead_lettered: int = 0
    expired: int = 0


def format_number(value: int) -> str:
    """``value`` with thousands separators ("1,234,567"). Raises nothing."""
    return f"{value:,}"


def _bytes_text(value: int) -> str:
    text = f"{format_number(value)} B"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{text} ({value / size:,.1f} {unit})"
    return text


def _when(ms: int) -> str:
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _age(seconds: float) -> str:
    seconds = max(seconds, 0)
    for unit, size in (("days", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:,.0f} s"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _number_axis(ax: Any, values: Sequence[int], *, horizontal: bool = True) -> None:
    """Log scale when the values span :data:`_LOG_RATIO` or more; ticks with separators."""
    from matplotlib.ticker import FuncFormatter

    positive = [v for v in values if v > 0]
    axis = ax.xaxis if horizontal else ax.yaxis
    if positive and max(positive) >= _LOG_RATIO * min(positive):
        (ax.set_xscale if horizontal else ax.set_yscale)("log")
    axis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:,.0f}" if x >= 1 else f"{x:g}"))


def _none_chart(path: str, title: str) -> None:
    plt = _pyplot()
    fig = plt.figure(figsize=(_WIDTH_IN, 1.4))
    try:
        fig.text(0.01, 0.72, title, fontsize=13, weight="bold")
        fig.text(0.5, 0.3, "none", fontsize=16, ha="center", color="#555")
        fig.savefig(path, dpi=_DPI)
    finally:
        plt.close(fig)


def _bar_chart(path: str, rows: Rows, label: str, value: str, title: str, unit: str) -> None:
    top = sorted(rows, key=lambda r: -int(r[value] or 0))[:_MAX_BARS]
    values = [int(r[value] or 0) for r in top][::-1]
    if not any(values):
        _none_chart(path, title)
        return
    plt = _pyplot()
    names = [str(r[label]) for r in top][::-1]
    fig, ax = plt.subplots(figsize=(_WIDTH_IN, max(2.2, 0.38 * len(top) + 1.2)))
    try:
        bars = ax.barh(names, values, color=_BAR)
        _number_axis(ax, values)
        ax.bar_label(bars, labels=[format_number(v) for v in values], padding=3, fontsize=9)
        ax.margins(x=0.12)
        ax.set_title(title, loc="left", fontsize=13, weight="bold")
        ax.set_xlabel(unit + (" (log scale)" if ax.get_xscale() == "log" else ""))
        if len(rows) > _MAX_BARS:
            ax.text(1, -0.25, f"the {_MAX_BARS} largest of {format_number(len(rows))}",
                    transform=ax.transAxes, ha="right", fontsize=9)  # fmt: skip
        ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
        fig.savefig(path, dpi=_DPI)
    finally:
        plt.close(fig)


def _by_queue(rows: Rows) -> tuple[dict[str, dict[int, int]], dict[int, str]]:
    """``message_age_histogram`` rows as queue -> bucket index -> messages, and the buckets'
    names by index."""
    per_queue: dict[str, dict[int, int]] = {}
    names: dict[int, str] = {}
    for r in rows:
        per_queue.setdefault(str(r["queue"]), {})[int(r["bucket_index"])] = int(r["messages"])
        names[int(r["bucket_index"])] = str(r["bucket"])
    return per_queue, names


def histogram_queues(rows: Rows) -> list[str]:
    """The queues of ``message_age_histogram`` rows in the order the age chart and table show
    them: the fullest first, then by name, empty ones last (still shown). Raises nothing."""
    per_queue, _names = _by_queue(rows)
    return sorted(per_queue, key=lambda q: (-sum(per_queue[q].values()), q))


def _histogram_chart(path: str, rows: Rows) -> None:
    """How old each queue's messages are: one bar per queue (the queues holding the most
    messages, then empty ones, which show as "empty"), split by age bucket in the share of the
    queue's messages each holds, youngest left, pale to dark; the queue's count at the bar's
    end (its depth is the depth chart's to compare)."""
    title = "Message age per queue"
    per_queue, names = _by_queue(rows)
    ranked = histogram_queues(rows)
    queues = ranked[:_MAX_HISTOGRAM_QUEUES]
    if not any(sum(per_queue[q].values()) for q in queues):
        _none_chart(path, title + (": every queue is empty" if queues else ""))
        return
    plt = _pyplot()
    buckets = sorted(names)
    queues = queues[::-1]
    totals = [sum(per_queue[q].values()) for q in queues]
    fig, ax = plt.subplots(figsize=(_WIDTH_IN, max(2.6, 0.42 * len(queues) + 1.6)))
    try:
        left = [0.0] * len(queues)
        for i, b in enumerate(buckets):
            shares = [per_queue[q].get(b, 0) / t * 100 if t else 0.0
                      for q, t in zip(queues, totals, strict=True)]  # fmt: skip
            ax.barh(range(len(queues)), shares, left=left, height=0.7,
                    color=_BUCKET_COLOURS[i % 4], label=names[b])  # fmt: skip
            left = [x + y for x, y in zip(left, shares, strict=True)]
        ax.set_yticks(range(len(queues)), queues)
        for y, t in enumerate(totals):
            text = f"{format_number(t)} message{'s' if t != 1 else ''}" if t else "empty"
            ax.annotate(text, (100 if t else 0, y), xytext=(4, 0), textcoords="offset points",
                        va="center", fontsize=9, color="#000" if t else "#555")  # fmt: skip
        ax.set_xlim(0, 118)
        ax.set_xticks(range(0, 101, 25), [f"{x} %" for x in range(0, 101, 25)])
        ax.set_title(title, loc="left", fontsize=13, weight="bold")
        ax.set_xlabel("share of the queue's messages")
        # above the bars, right of the title: never over a bar or its value
        ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=len(buckets), fontsize=9,
                  frameon=False, title="age:", alignment="left")  # fmt: skip
        if len(ranked) > len(queues):
            ax.text(1, -0.25, f"the {len(queues)} fullest of {format_number(len(ranked))} "
                    "queues", transform=ax.transAxes, ha="right", fontsize=9)  # fmt: skip
        ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
        fig.savefig(path, dpi=_DPI)
    finally:
        plt.close(fig)


def write_charts(tables: Mapping[str, Rows], out: str) -> list[str]:
    """Draw the age histogram and each chart of :data:`CHARTS` whose dataset is in ``tables``
    into ``out``. Returns the file names written, in page order. Raises OSError when a file
    cannot be written."""
    written = []
    if "message_age_histogram" in tables:
        _histogram_chart(os.path.join(out, HISTOGRAM_CHART), tables["message_age_histogram"])
        written.append(HISTOGRAM_CHART)
    for name, (dataset, label, value, title, unit) in CHARTS.items():
        if dataset in tables:
            _bar_chart(os.path.join(out, name), tables[dataset], label, value, title, unit)
            written.append(name)
    return written


def _cell(column: str, value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return html.escape("" if value is None else str(value).lower())
    if isinstance(value, int):
        if column.endswith("_timestamp"):
            return f'<span title="{value}">{html.escape(_when(value))}</span>'
        if column not in _IDS:
            return format_number(value)
    return html.escape(str(value))


_NUMERIC: Final = ' class="n"'


def _table(name: str, rows: Rows) -> str:
    if not rows:
        return f'<h2 id="{name}">{name}</h2>\n<p class="empty">none</p>\n'
    columns = list(rows[0].keys())
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "\n".join(
        "<tr>"
        + "".join(
            f"<td{_NUMERIC if isinstance(r[c], int) else ''}>{_cell(c, r[c])}</td>" for c in columns
        )
        + "</tr>"
        for r in rows
    )
    return (
        f'<h2 id="{name}">{name}</h2>\n<table class="dataset" data-dataset="{name}">\n'
        f"<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>\n"
    )


def _age_table(rows: Rows) -> str:
    """``message_age_histogram``'s rows as one row per queue, a column per age bucket (the
    dataset keeps a row per queue and bucket): hundreds of queues stay readable."""
    per_queue, names = _by_queue(rows)
    pivoted = [
        {"queue": q, **{names[b]: per_queue[q].get(b, 0) for b in sorted(names)},
         "messages": sum(per_queue[q].values())}
        for q in histogram_queues(rows)
    ]  # fmt: skip
    return _table("message_age_histogram", pivoted)


def _header(
    source: str,
    cut_ms: int,
    totals: Totals,
    warnings: Sequence[str],
    cut: str | None,
    health: Health,
) -> list[str]:
    oldest = totals.oldest_timestamp
    items: list[tuple[str, str, int | str, str]] = [
        ("messages", "messages", totals.messages, format_number(totals.messages)),
        ("bytes", "stored bytes", totals.bytes, _bytes_text(totals.bytes)),
        ("queues", "queues", totals.queues, format_number(totals.queues)),
        (
            "oldest",
            "oldest message",
            "" if oldest is None else oldest,
            "none" if oldest is None
            else f"{_when(oldest)} ({_age((cut_ms - oldest) / 1000)} old)",
        ),
        ("dead_bytes", "dead bytes", totals.dead_bytes, _bytes_text(totals.dead_bytes)),
        ("large_bodies", "large bodies", totals.large_bodies,
         f"{format_number(totals.large_bodies)} ({_bytes_text(totals.large_bytes)})"
         + (f", {format_number(totals.large_missing)} missing or damaged"
            if totals.large_missing else "")),
        ("orphan_bodies", "orphan large bodies", totals.orphan_bodies,
         f"{format_number(totals.orphan_bodies)} ({_bytes_text(totals.orphan_bytes)})"),
        ("paged_addresses", "paged addresses", totals.paged_addresses,
         format_number(totals.paged_addresses)),
        ("dead_lettered", "dead-lettered waiting", totals.dead_lettered,
         format_number(totals.dead_lettered)),
        ("expired", "expired waiting", totals.expired, format_number(totals.expired)),
    ]  # fmt: skip
    parts = [
        '<header id="summary">',
        "<h1>store report</h1>",
        *_verdict(health),
        f'<p class="source">{html.escape(source)}</p>',
        f'<p class="cut" data-value="{cut_ms}">cut taken {html.escape(_when(cut_ms))}'
        + ("" if cut is None else f": {html.escape(cut)}")
        + "</p>",
    ]
    if warnings:
        parts.append('<div class="warning" id="warnings">')
        parts += [f"<p>{html.escape(w)}</p>" for w in warnings]
        parts.append("</div>")
    parts.append('<dl class="totals">')
    for key, label, value, text in items:
        parts.append(
            f'<div class="total"><dt>{html.escape(label)}</dt>'
            f'<dd data-total="{key}" data-value="{value}">{html.escape(text)}</dd></div>'
        )
    parts.append("</dl>")
    if health.ha is not None:
        parts.append(f'<p class="ha" id="ha">{html.escape(health.ha)}</p>')
    parts += [*_limits(health), "</header>"]
    return parts


def _verdict(health: Health) -> list[str]:
    """The verdict and, under it, one item per thing to do (store.reporting.health)."""
    kind = {HEALTHY: "ok", ATTENTION: "attention", DAMAGED: "damaged"}[health.verdict]
    parts = [
        f'<div class="verdict {kind}" id="verdict" data-verdict="{html.escape(health.verdict)}">',
        f'<p class="verdict-line">{html.escape(health.verdict.upper())}'
        + (": nothing to repair, nothing to do" if not health.actions else "")
        + "</p>",
    ]
    if health.actions:
        parts.append("<ul>")
        parts += [f'<li class="action">{html.escape(a)}</li>' for a in health.actions]
        parts.append("</ul>")
    parts.append("</div>")
    return parts


def _limit(value: int, size: bool) -> str:
    if value < 0:
        return "none"
    return _bytes_text(value) if size else format_number(value)


def _limits(health: Health) -> list[str]:
    """The store's limits: the global ones, then each address's beside its figures."""
    if not health.global_limits and not health.limits:
        return []
    parts = ['<section id="limits">', "<h2>Limits</h2>"]
    if health.global_limits:
        parts.append(f'<p class="global-limits">{html.escape(health.global_limits)}</p>')
    if health.limits:
        head = "".join(
            f"<th>{c}</th>"
            for c in ("address", "messages", "stored bytes", "pages", "max-size-bytes",
                      "max-size-messages", "address-full-policy")
        )  # fmt: skip
        parts.append(f'<table class="limits"><thead><tr>{head}</tr></thead><tbody>')
        for a in health.limits:
            cells = (
                (html.escape(a.address), ""),
                (format_number(a.messages), _NUMERIC),
                (_bytes_text(a.bytes), _NUMERIC),
                (format_number(a.pages), _NUMERIC),
                (_limit(a.max_size_bytes, True), _NUMERIC),
                (_limit(a.max_size_messages, False), _NUMERIC),
                (html.escape(a.policy), ""),
            )
            row = "".join(f"<td{attr}>{text}</td>" for text, attr in cells)
            parts.append(f'<tr data-address="{html.escape(a.address)}">{row}</tr>')
        parts.append("</tbody></table>")
    parts.append("</section>")
    return parts


_STYLE: Final = """
body { font-family: sans-serif; margin: 1.5em 2em; color: #222; max-width: 1240px; }
header#summary { border-bottom: 2px solid #3b6ea5; margin-bottom: 1.5em; }
h1 { margin: 0 0 0.2em 0; }
p.source { font-size: 1.2em; margin: 0.2em 0; font-family: monospace; }
p.cut { color: #444; margin: 0.2em 0 0.8em 0; }
dl.totals { display: flex; flex-wrap: wrap; gap: 0.6em; margin: 0.8em 0 1.2em 0; }
div.total { border: 1px solid #bcd; border-radius: 4px; padding: 0.4em 0.8em;
            background: #f4f7fb; min-width: 9em; }
dt { font-size: 0.85em; color: #555; }
dd { margin: 0; font-size: 1.25em; font-weight: bold; }
div.verdict { border: 3px solid; border-radius: 6px; padding: 0.4em 1em; margin: 0.6em 0; }
div.verdict.ok { border-color: #2e7d32; background: #e8f5e9; }
div.verdict.attention { border-color: #c4a000; background: #fff8e1; }
div.verdict.damaged { border-color: #c62828; background: #ffebee; }
p.verdict-line { font-size: 1.5em; font-weight: bold; margin: 0.2em 0; }
div.verdict ul { margin: 0.3em 0 0.5em 0; }
li.action { margin: 0.25em 0; }
p.ha { margin: 0.3em 0; font-family: monospace; }
p.global-limits { margin: 0.3em 0; }
div.warning { background: #fff3cd; border: 2px solid #c4a000; padding: 0.3em 0.8em;
              margin: 0.6em 0; font-weight: bold; }
div.warning p { margin: 0.3em 0; font-family: monospace; font-weight: normal; }
div.warning p:first-child { font-family: sans-serif; font-weight: bold; }
figure { margin: 1em 0; }
img.chart { display: block; width: 100%; max-width: 1200px; border: 1px solid #ddd; }
figcaption { color: #444; font-size: 0.9em; margin: 0.3em 0 0 0; max-width: 1200px; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: left; }
th { background: #e8eef5; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
"""


def write_index(
    tables: Mapping[str, Rows],
    charts: Sequence[str],
    out: str,
    *,
    title: str,
    source: str = "",
    cut_ms: int = 0,
    totals: Totals | None = None,
    warnings: Sequence[str] = (),
    cut: str | None = None,
    health: Health | None = None,
) -> str:
    """Write ``out/index.html``: the header (``source``, the cut at ``cut_ms`` and what it is,
    ``cut``, ``totals``, ``warnings``), the ``charts`` in order, then every table of ``tables``
    (each dataset's first rows) with links to the Parquet datasets. Returns its path. Raises
    OSError when it cannot be written."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        *_header(
            source or title,
            cut_ms,
            totals or Totals(),
            warnings,
            cut,
            health or Health(verdict=HEALTHY),
        ),
    ]
    for c in charts:
        caption = CAPTIONS.get(c)
        parts.append(
            f'<figure><img class="chart" src="{c}" alt="{html.escape(c)}">'
            + ("" if caption is None else f"<figcaption>{html.escape(caption)}</figcaption>")
            + "</figure>"
        )
    parts.append("<h2>Datasets</h2>")
    parts.append("<p>Parquet: " + ", ".join(f'<a href="{n}/">{n}/</a>' for n in tables) + "</p>")
    parts += [
        _age_table(rows) if name == "message_age_histogram" else _table(name, rows)
        for name, rows in tables.items()
    ]
    parts.append("</body></html>")
    path = os.path.join(out, "index.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    return path
