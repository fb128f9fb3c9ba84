"""The report page's charts and tables as an operator reads them (issue 44), from plain rows
without Spark: age colours that darken with age, no chart saying twice what another says, a
caption where two charts count bytes differently, empty queues in the age chart, and an age
table of one row per queue that stays readable with hundreds of queues."""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from PIL import Image

from store.reporting import page
from store.reporting.datasets import PAGE_ROWS, Written
from store.reporting.jobs import AGE_BUCKETS


def _histogram(counts: dict[str, tuple[int, ...]]) -> list[dict[str, Any]]:
    return [
        {"queue": q, "bucket_index": i, "bucket": AGE_BUCKETS[i][0], "messages": n}
        for q, per_bucket in counts.items()
        for i, n in enumerate(per_bucket)
    ]


def _luminance(colour: str) -> float:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_the_age_colours_darken_from_the_youngest_bucket_to_the_oldest() -> None:
    shades = [_luminance(c) for c in page._BUCKET_COLOURS]
    assert len(shades) == len(AGE_BUCKETS)
    assert shades == sorted(shades, reverse=True) and len(set(shades)) == len(shades)


def test_no_chart_repeats_the_address_chart_and_the_byte_charts_say_what_they_count(
    tmp_path: Path,
) -> None:
    assert "queue_bytes.png" not in page.CHARTS  # the queue table's bytes column says it
    assert [v[2] for v in page.CHARTS.values()].count("bytes") == 2  # address, page stores
    tables = {
        "queue_depths": [{"queue": "q", "messages": 2, "bytes": 300}],
        "address_bytes": [
            {"address": "a", "messages": 2, "bytes": 300, "dead_lettered": 0, "expired": 0}
        ],
        "page_stores": [{"address": "a", "pages": 1, "records": 3, "bytes": 200}],
        "message_age_histogram": _histogram({"q": (2, 0, 0, 0)}),
    }
    charts = page.write_charts(tables, str(tmp_path))
    html = Path(page.write_index(tables, charts, str(tmp_path), title="t")).read_text()
    for chart in ("address_bytes.png", "page_stores.png", page.HISTOGRAM_CHART):
        figure = re.search(rf'<img class="chart" src="{re.escape(chart)}"[^>]*>'
                           r"<figcaption>([^<]+)</figcaption>", html)  # fmt: skip
        assert figure is not None, chart
    assert "acknowledged ones too until their page is deleted" in html
    assert "large body" in html or "its body" in html


def test_the_age_chart_shows_empty_queues_after_the_full_ones(tmp_path: Path) -> None:
    rows = _histogram({"idle": (0, 0, 0, 0), "busy": (5, 1, 0, 0), "old": (0, 0, 0, 9)})
    assert page.histogram_queues(rows) == ["old", "busy", "idle"]
    many = _histogram({f"q{i:03}": (i, 0, 0, 0) for i in range(40)})
    assert page.histogram_queues(many)[:2] == ["q039", "q038"]
    assert page.histogram_queues(many)[-1] == "q000"  # the empty one, last, still there
    page.write_charts({"message_age_histogram": rows}, str(tmp_path))
    with Image.open(tmp_path / page.HISTOGRAM_CHART) as chart:
        assert chart.height > 200  # three queues' bars, not the "none" strip
    page.write_charts({"message_age_histogram": _histogram({"idle": (0,) * 4})}, str(tmp_path))
    with Image.open(tmp_path / page.HISTOGRAM_CHART) as chart:
        assert chart.height < 200  # nothing waits anywhere: the short "none" image


def test_the_age_table_is_one_row_per_queue_the_fullest_first(tmp_path: Path) -> None:
    counts = {f"queue-{i:03}": (i % 7, i % 3, 0, 1 if i == 5 else 0) for i in range(300)}
    rows = _histogram(counts)
    table = pa.Table.from_pylist(rows)
    shown = Written("message_age_histogram", table.num_rows, table=table).first_rows()
    assert len(shown) == 4 * 300 and PAGE_ROWS >= 300  # every bucket of every queue
    html = Path(
        page.write_index({"message_age_histogram": shown}, [], str(tmp_path), title="t")
    ).read_text()
    section = html[html.index('data-dataset="message_age_histogram"') :]
    head = [
        html_lib.unescape(h)
        for h in re.findall(r"<th>([^<]+)</th>", section[: section.index("</thead>")])
    ]
    assert head == ["queue", *(name for name, _bound in AGE_BUCKETS), "messages"]
    body = section[: section.index("</tbody>")]
    queues = re.findall(r"<tr><td>(queue-\d+)</td>", body)
    assert len(queues) == 300
    totals = {q: sum(c) for q, c in counts.items()}
    assert [totals[q] for q in queues] == sorted(totals.values(), reverse=True)
    assert queues[0] == "queue-005"  # 5 + 2 + 0 + 1, the fullest


@pytest.mark.parametrize("queues", [PAGE_ROWS + 20])
def test_the_histograms_rows_keep_the_fullest_queues_whole(queues: int) -> None:
    counts = {f"q{i:04}": (i, 0, 0, 0) for i in range(queues)}
    table = pa.Table.from_pylist(_histogram(counts))
    shown = Written("message_age_histogram", table.num_rows, table=table).first_rows()
    kept = {r["queue"] for r in shown}
    assert len(kept) == PAGE_ROWS and len(shown) == 4 * PAGE_ROWS
    assert "q0000" not in kept and f"q{queues - 1:04}" in kept  # the fullest, not the first
