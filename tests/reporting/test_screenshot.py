"""The report's page as an operator sees it, in a real headless Chromium (issue 28): every
chart image loads and is drawn where the page puts it (the screenshot's pixels there are the
PNG's), no chart is blank, and the header's totals are the datasets' totals.

``index.html`` itself has no script. To ask the browser what it loaded, the test writes a
copy of the page with a probe script appended (``probe.html``, beside it so the images
resolve the same way) and reads the DOM Chromium dumps after the load; the screenshot is taken
of ``index.html`` itself.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from PIL import Image, ImageChops, ImageStat

from store import StoreConfig, open_store
from store.messaging import Message, StorageManager
from store.reporting.report import ReportSource, run_report
from tests.reporting.support import fill, fill_paging, paging_mapping
from tests.support.backends import file_config_mapping

_PROBE = """
<pre id="probe"></pre>
<script>
window.addEventListener("load", () => {
  const images = [...document.querySelectorAll("img")].map((img) => {
    const r = img.getBoundingClientRect();
    return {src: img.getAttribute("src"), complete: img.complete, width: img.naturalWidth,
            height: img.naturalHeight,
            box: [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height]};
  });
  const totals = {};
  for (const dd of document.querySelectorAll("dd[data-total]")) {
    totals[dd.dataset.total] = {text: dd.textContent, value: dd.dataset.value};
  }
  document.getElementById("probe").textContent = JSON.stringify(
    {images, totals, height: document.documentElement.scrollHeight,
     width: document.documentElement.scrollWidth});
});
</script>
"""
_WIDTH = 1280


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found is not None, "headless Chromium is needed (Debian package chromium)"
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--force-device-scale-factor=1", *args],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _probe(out: Path) -> dict[str, Any]:
    page = (out / "index.html").read_text()
    (out / "probe.html").write_text(page.replace("</body>", _PROBE + "</body>"))
    dom = _run(f"--window-size={_WIDTH},1000", "--virtual-time-budget=10000", "--dump-dom",
               (out / "probe.html").as_uri()).stdout  # fmt: skip
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found is not None and found.group(1), dom[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))  # type: ignore[no-any-return]


def _ink(image: Image.Image) -> float:
    """Share of pixels that are not (near) white."""
    gray = image.convert("L")
    histogram = gray.histogram()
    return sum(histogram[:230]) / (gray.width * gray.height)


def _number(text: str) -> int:
    return int(text.split()[0].replace(",", ""))


def _report(spark: Any, tmp_path: Path) -> Path:
    """A file store with queues, acks, transactions, paged and large messages, reported."""
    config = StoreConfig.from_mapping(paging_mapping(file_config_mapping(tmp_path, "NIO")))
    sm = StorageManager(open_store(config))
    sm.load()
    try:
        fill(sm, messages=40)
        fill_paging(sm)
    finally:
        sm.close()
    out = tmp_path / "report"
    run_report(spark, ReportSource(config=config), str(out))
    return out


@pytest.mark.slow  # a report and two headless Chromium runs
def test_the_page_shows_loaded_charts_and_the_datasets_totals(spark: Any, tmp_path: Path) -> None:
    out = _report(spark, tmp_path)
    page = (out / "index.html").read_text()
    assert "<script" not in page and "http" not in re.sub(r"<a href=[^>]*>", "", page)
    probe = _probe(out)

    # every chart the page references loaded in the browser, at full width
    images = probe["images"]
    charts = re.findall(r'<img class="chart" src="([^"]+)"', page)
    assert [i["src"] for i in images] == charts and len(charts) >= 6
    assert charts[0] == "message_age_histogram.png"
    for image in images:
        assert image["complete"] and image["width"] >= 1000 and image["height"] >= 100, image
        assert image["box"][2] >= 1000, image  # drawn at (nearly) the page's full width

    # the header's totals are the datasets' totals
    def rows(name: str) -> list[dict[str, Any]]:
        return pq.read_table(out / name).to_pylist()  # type: ignore[no-any-return]

    depths, ages, dead = rows("queue_depths"), rows("message_ages"), rows("dead_records")
    large, pages = rows("large_messages"), rows("page_stores")
    large = [r for r in large if r["status"] != "orphan"]
    expected = {
        "messages": sum(r["messages"] for r in depths),
        "bytes": sum(r["bytes"] for r in depths),
        "queues": len(depths),
        "dead_bytes": sum(r["dead_bytes"] for r in dead),
        "large_bodies": len(large),
        "paged_addresses": len(pages),
    }
    totals = probe["totals"]
    shown = {key: _number(totals[key]["text"]) for key in expected}
    assert shown == expected
    assert all(v > 0 for v in expected.values())  # the scenario has something of each
    assert f"({sum(r['stored_bytes'] for r in large):,} B" in totals["large_bodies"]["text"]
    oldest = min(r["oldest_timestamp"] for r in ages if r["oldest_timestamp"] is not None)
    assert int(totals["oldest"]["value"]) == oldest
    assert "," in totals["messages"]["text"] or expected["messages"] < 1000
    assert f"{expected['bytes']:,} B" in totals["bytes"]["text"]
    assert re.search(r"cut taken \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", page)

    # the screenshot: each chart's place on the page shows that chart's pixels, not blank
    shot = tmp_path / "shot.png"
    _run(f"--window-size={_WIDTH},{probe['height']}", f"--screenshot={shot}",
         (out / "index.html").as_uri())  # fmt: skip
    with Image.open(shot) as screen:
        screen = screen.convert("RGB")
        for image in images:
            x, y, w, h = (round(v) for v in image["box"])
            seen = screen.crop((x + 1, y + 1, x + w - 1, y + h - 1))  # inside the border
            with Image.open(out / image["src"]) as png:
                drawn = png.convert("RGB").resize(seen.size)
            assert _ink(drawn) > 0.005, image["src"]  # the chart is not blank
            difference = ImageStat.Stat(ImageChops.difference(seen, drawn).convert("L")).mean[0]
            assert difference < 12, (image["src"], difference)  # and it is what is shown
    shutil.copy(shot, out / "screenshot.png")  # for a person to look at


_FIRST_SCREEN = 900  # px: what a 1280x900 window shows before any scrolling


def _troubled_store(tmp_path: Path) -> StoreConfig:
    """A file store with paged and large messages, a message journal mostly dead (600 sends
    acknowledged, no compaction), one flipped byte in a page record, never compacted."""
    mapping = paging_mapping(file_config_mapping(tmp_path, "NIO"))
    config = StoreConfig.from_mapping({**mapping, "journal-compact-min-files": 0})
    with StorageManager(open_store(config)) as sm:
        sm.load()
        fill(sm, messages=20)
        fill_paging(sm)
        sm.create_address("done", routing_types=("ANYCAST",))
        sm.create_queue("done", address="done", routing_type="ANYCAST")
        for _ in range(600):
            sm.send(Message(address="done", body=b"d" * 2000, durable=True))
        while batch := sm.receive("done", max_messages=100):
            for d in batch:
                sm.ack("done", d.message.message_id)
    # the fullest page: records after the damaged one show it is a damaged record, not a
    # page cut short
    page = max(Path(config.paging_directory).rglob("*.page"), key=lambda p: p.stat().st_size)
    with open(page, "r+b") as f:  # a byte inside its first record's body
        f.seek(150)
        byte = f.read(1)
        f.seek(150)
        f.write(bytes([byte[0] ^ 0xFF]))
    return config


@pytest.mark.slow  # a report and two headless Chromium runs
def test_the_first_screen_says_damaged_with_the_repair_the_compaction_the_limits_and_the_lease(
    spark: Any, tmp_path: Path
) -> None:
    """The page's first screen (1280x900) of a store with a damaged page, a dead journal and
    a held HA lease: the verdict, the advised repair, the compaction hint, the paged
    address's limits and the lease's holder, all in the DOM above the fold; the screenshot is
    kept as ``first-screen.png`` in the test's tmp folder (and the report's)."""
    from store.ha import open_node_manager

    config = _troubled_store(tmp_path)
    out = tmp_path / "report"
    nm = open_node_manager(config)
    try:
        nm.start_primary(timeout=10)
        summary = run_report(spark, ReportSource(config=config), str(out), salvage=True)
    finally:
        nm.close()
    page = (out / "index.html").read_text()
    header = page[page.index('<header id="summary">') : page.index("</header>")]

    assert summary.health.verdict == "damaged"
    assert 'data-verdict="damaged"' in header and "DAMAGED" in header
    repair = [a for a in summary.health.actions if "store data repair --salvage" in a]
    assert repair and "page" in repair[0], summary.health.actions
    assert any("journal-compact-percentage 30" in a for a in summary.health.actions)
    assert "messages journal:" in header and "`store data compact --config FILE`" in header
    assert '<tr data-address="paged">' in header
    paged = header[header.index('<tr data-address="paged">') :].split("</tr>")[0]
    assert "2,048 B" in paged and "PAGE" in paged
    assert re.search(r'<p class="ha" id="ha">live lock: held by pid \d+ on ', header)

    probe_page = page.replace(
        "</body>",
        '<pre id="probe"></pre><script>window.addEventListener("load", () => {'
        "const box = (id) => document.getElementById(id).getBoundingClientRect().bottom;"
        'document.getElementById("probe").textContent = JSON.stringify('
        '{verdict: box("verdict"), ha: box("ha"), limits: box("limits")});'
        "});</script></body>",
    )
    (out / "probe.html").write_text(probe_page)
    dom = _run(f"--window-size={_WIDTH},{_FIRST_SCREEN}", "--virtual-time-budget=10000",
               "--dump-dom", (out / "probe.html").as_uri()).stdout  # fmt: skip
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found is not None, dom[-2000:]
    bottoms = json.loads(found.group(1).replace("&quot;", '"'))
    assert bottoms["verdict"] < _FIRST_SCREEN and bottoms["ha"] < _FIRST_SCREEN, bottoms

    shot = tmp_path / "first-screen.png"
    _run(f"--window-size={_WIDTH},{_FIRST_SCREEN}", f"--screenshot={shot}",
         (out / "index.html").as_uri())  # fmt: skip
    with Image.open(shot) as screen:
        top = screen.convert("RGB").crop((0, 0, _WIDTH, 200))
        reds = sum(1 for r, g, b in top.getdata() if r > 180 and g < 80 and b < 80)
    assert reds > 500, "the damaged verdict's red border is on the first screen"
    shutil.copy(shot, out / "first-screen.png")
