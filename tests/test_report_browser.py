"""report.html in a real browser: headless Chromium renders the page (a screenshot whose first
screen holds the summary card, not a blank page) and nothing overflows horizontally at
1280 px. Skipped where no Chromium is installed (CI installs Debian's, see ``.ci/run``)."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
import torch
from matplotlib.image import imread
from torch_geometric.nn.models import GCN

import gnnaudit
from gnnaudit.datasets import synthetic_credit_graph

BROWSER = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no headless Chromium installed")

WIDTH = 1280
#: the page in an iframe of the report's width; once loaded, its widths go in the title
PROBE = """<!doctype html><html><head><title>pending</title></head><body style="margin:0">
<iframe id="f" src="report.html" style="width:{width}px;height:900px;border:0"></iframe>
<script>
document.getElementById('f').addEventListener('load', function () {{
  var d = this.contentDocument.documentElement;
  document.title = 'scroll=' + d.scrollWidth + ';client=' + d.clientWidth;
}});
</script></body></html>"""


def _chromium(*args: str) -> str:
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("browser") / "report"
    data = synthetic_credit_graph(300, bias=2.0, seed=1)
    torch.manual_seed(0)
    model = GCN(data.num_features, 16, num_layers=2, out_channels=2).eval()
    gnnaudit.audit_model(model, data, out=out, progress=False, n_boot=50, k=3)
    return out


def test_the_first_screen_shows_the_summary_card(report_dir):
    shot = report_dir / "shot.png"
    _chromium(
        "--hide-scrollbars",
        f"--window-size={WIDTH},1000",
        f"--screenshot={shot}",
        (report_dir / "report.html").as_uri(),
    )
    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (1000, WIDTH)
    ink = np.abs(pixels - 1.0).max(axis=2) > 0.2  # not white: text, rules, the card's chart
    assert ink.mean() > 0.02  # a rendered page, not a blank or error screen
    rows = np.flatnonzero(ink.any(axis=1))
    assert rows.size and rows[0] < 150 and rows[-1] > 700  # heading on top, the card below it
    html = (report_dir / "report.html").read_text()
    assert html.index("Summary") < html.index("Findings")  # the card comes before the table


def test_nothing_overflows_at_1280_pixels(report_dir):
    probe = report_dir / "probe.html"
    probe.write_text(PROBE.format(width=WIDTH))
    dom = _chromium(
        "--allow-file-access-from-files", "--virtual-time-budget=5000", "--dump-dom",
        probe.as_uri(),
    )  # fmt: skip
    got = re.search(r"<title>scroll=(\d+);client=(\d+)</title>", dom)
    assert got is not None, dom[:500]
    scroll, client = map(int, got.groups())
    assert client <= WIDTH and scroll <= client  # no horizontal scroll bar
