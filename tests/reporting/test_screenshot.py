"""The report's page renders: headless Chromium takes a screenshot of ``index.html`` that is
not blank, and every chart and dataset the page references exists."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from PIL import Image

from store.reporting.report import ReportSource, run_report
from tests.reporting.support import filled_store
from tests.support.backends import StoreFactory, backend_by_name, unique_prefix


def test_index_html_renders_with_its_charts_and_tables(spark: Any, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium is not None, "headless Chromium is needed (Debian package chromium)"
    factory = StoreFactory(backend_by_name("file-nio"), tmp_path, unique_prefix())
    try:
        filled_store(factory, messages=10)
        out = tmp_path / "report"
        run_report(spark, ReportSource(config=factory.config), str(out))
    finally:
        factory.teardown()
    html = (out / "index.html").read_text()
    images = re.findall(r'<img src="([^"]+)"', html)
    links = re.findall(r'<a href="([^"]+)/">', html)
    assert len(images) >= 4 and "queue_depths" in links
    for name in images:
        with Image.open(out / name) as chart:
            assert chart.width > 300 and chart.height > 150
    for name in links:
        assert list((out / name).glob("*.parquet")), name
    assert re.search(r'<table class="dataset" data-dataset="queue_depths">', html)
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--window-size=1024,1400", f"--screenshot={shot}", (out / "index.html").as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    with Image.open(shot) as image:
        assert image.size == (1024, 1400)
        gray = image.convert("L")
        low, high = gray.getextrema()
        assert high - low > 100  # not blank: text and bars on a white page
        histogram = gray.histogram()
        not_white = sum(histogram[:200])
        assert not_white > 0.01 * image.width * image.height  # charts drawn, not just a line
