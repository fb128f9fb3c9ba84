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
from store.messaging import StorageManager
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
    assert [i["src"] for i in images] == charts and len(charts) >= 7
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
