"""The report's static page: PNG charts (matplotlib, headless ``Agg`` backend) and an
``index.html`` that shows every job's table and references the charts beside it. The page
has no scripts and no external resources: it opens from disk (``file://``) anywhere.

Thread-safety: functions over plain rows; matplotlib's pyplot state is touched only here,
one figure at a time, from the caller's thread.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["CHARTS", "write_charts", "write_index"]

#: chart file -> (dataset, label column, value column, title).
CHARTS: Final = {
    "queue_depths.png": ("queue_depths", "queue", "messages", "Messages per queue"),
    "queue_bytes.png": ("queue_depths", "queue", "bytes", "Stored bytes per queue"),
    "record_types.png": ("record_types", "name", "records", "Live records per type"),
    "address_bytes.png": ("address_bytes", "address", "bytes", "Stored bytes per address"),
    "dead_records.png": ("dead_records", "journal", "dead_bytes", "Dead bytes per journal"),
}
_MAX_BARS: Final = 30

Rows = Sequence[Mapping[str, Any]]


def _bar_chart(path: str, rows: Rows, label: str, value: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = sorted(rows, key=lambda r: -int(r[value] or 0))[:_MAX_BARS]
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.35 * len(top) + 1)))
    try:
        names = [str(r[label]) for r in top][::-1]
        values = [int(r[value] or 0) for r in top][::-1]
        ax.barh(names, values, color="#3b6ea5")
        ax.set_title(title)
        ax.set_xlabel(value)
        if not top:
            ax.text(0.5, 0.5, "nothing to show", ha="center", va="center", transform=ax.transAxes)
        fig.tight_layout()
        fig.savefig(path, dpi=90)
    finally:
        plt.close(fig)


def write_charts(tables: Mapping[str, Rows], out: str) -> list[str]:
    """Draw each chart of :data:`CHARTS` whose dataset is in ``tables`` into ``out``.
    Returns the file names written. Raises OSError when a file cannot be written."""
    written = []
    for name, (dataset, label, value, title) in CHARTS.items():
        if dataset in tables:
            _bar_chart(os.path.join(out, name), tables[dataset], label, value, title)
            written.append(name)
    return written


def _table(name: str, rows: Rows) -> str:
    if not rows:
        return f'<h2 id="{name}">{name}</h2>\n<p class="empty">no rows</p>\n'
    columns = list(rows[0].keys())
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in columns) + "</tr>"
        for r in rows
    )
    return (
        f'<h2 id="{name}">{name}</h2>\n<table class="dataset" data-dataset="{name}">\n'
        f"<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>\n"
    )


_STYLE: Final = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: right; }
th { background: #e8eef5; }
td:first-child, th:first-child { text-align: left; }
img { display: block; margin: 1em 0; max-width: 100%; border: 1px solid #ddd; }
"""


def write_index(tables: Mapping[str, Rows], charts: Sequence[str], out: str, *, title: str) -> str:
    """Write ``out/index.html``: the charts, then every table of ``tables`` (each dataset's
    first rows), with links to the Parquet datasets. Returns its path. Raises OSError when it
    cannot be written."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        "<p>Datasets (Parquet): " + ", ".join(f'<a href="{n}/">{n}/</a>' for n in tables) + "</p>",
    ]
    parts += [f'<img src="{c}" alt="{html.escape(c)}">' for c in charts]
    parts += [_table(name, rows) for name, rows in tables.items()]
    parts.append("</body></html>")
    path = os.path.join(out, "index.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    return path
