"""The rendered index and one report, opened in headless Chromium: the screenshots show
pages with figures (not blank, no broken images), and every <img> is a valid PNG."""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import seaborn as sns
from PIL import Image
from test_report_engines import stored  # noqa: F401  (a fixture)
from test_report_support import rendered

from tunelab.report.index import write_index

IMG_RE = re.compile(r"<img\b[^>]*>")
SRC_RE = re.compile(r'\bsrc="([^"]*)"')
WINDOW = (1280, 2400)


def _chromium() -> str | None:
    """The chromium binary; installed with apt-get when missing and this process may."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found or os.geteuid() != 0 or not shutil.which("apt-get"):
        return found
    try:
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "chromium"],
            check=False,
            capture_output=True,
            timeout=900,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return shutil.which("chromium")


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = _chromium()
    if binary is None:
        pytest.skip("chromium is not installed and could not be installed with apt-get")
    return binary


def screenshot(chromium: str, page: Path, out: Path) -> np.ndarray:
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={out.parent / 'chromium-profile'}",
            f"--screenshot={out}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            page.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    image = Image.open(out)
    assert image.size == WINDOW
    return np.asarray(image.convert("RGB"), dtype=float)


def palette_pixels(rgb: np.ndarray, tolerance: float = 30.0) -> int:
    """Pixels drawn in one of the figures' palette colours (lines, markers, bands' edges)."""
    count = 0
    for color in sns.color_palette("colorblind")[:4]:
        target = np.array(color) * 255
        count += int((np.abs(rgb - target).max(axis=2) < tolerance).sum())
    return count


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    report, _ = rendered("scan", tmp_path_factory)
    other, _ = rendered("range", tmp_path_factory)
    index = report.parent.parent / "index.html"
    write_index([report, other], index, results_dir=report.parent.parent)
    return index, report


def test_every_img_is_a_valid_embedded_png(pages):
    html = pages[1].read_text(encoding="utf-8")
    tags = IMG_RE.findall(html)
    assert len(tags) >= 4
    for tag in tags:
        src = SRC_RE.search(tag).group(1)
        assert src.startswith("data:image/png;base64,"), tag[:80]
        data = base64.b64decode(src.split(",", 1)[1], validate=True)
        image = Image.open(io.BytesIO(data))
        image.load()
        assert image.format == "PNG" and image.width > 300 and image.height > 200
        assert 'alt="' in tag


def test_report_screenshot_shows_the_figures(chromium, pages, tmp_path):
    rgb = screenshot(chromium, pages[1], tmp_path / "report.png")
    gray = rgb.mean(axis=2)
    assert gray.std() > 20, "the page looks blank"
    # The first figures sit within the first 2400 px: their palette colours must be on screen.
    assert palette_pixels(rgb) > 2000, "no figure colours visible: images missing or broken"
    # Text renders: plenty of dark pixels.
    assert (gray < 80).sum() > 5000


def test_index_screenshot_shows_the_table(chromium, pages, tmp_path):
    rgb = screenshot(chromium, pages[0], tmp_path / "index.png")
    gray = rgb.mean(axis=2)
    assert gray.std() > 5, "the index looks blank"
    assert (gray < 80).sum() > 1000  # text
    link_blue = np.array([0x0B, 0x5C, 0xAD], dtype=float)
    assert (np.abs(rgb - link_blue).max(axis=2) < 40).sum() > 200  # the links to the reports


def test_plan_warning_is_on_screen_at_the_top_of_the_page(chromium, tmp_path_factory, tmp_path):
    """The engine sweep's real mismatch (a scan where the knob built an index) shows as the
    warning call-out's yellow above the first figure, not somewhere further down."""
    report, _ = rendered("engine", tmp_path_factory)
    rgb = screenshot(chromium, report, tmp_path / "engine.png")
    warn = np.array([0xFF, 0xF7, 0xE0], dtype=float)
    rows = np.nonzero((np.abs(rgb - warn).max(axis=2) < 4).sum(axis=1) > 600)[0]
    assert rows.size and rows.min() < 300, "no warning call-out near the top"
    assert palette_pixels(rgb) > 2000  # the figures below it still render


# Every piece of visible text as one rectangle per line; two of different elements that
# cross are drawn over each other. The result goes into the document Chromium dumps.
OVERLAP_JS = """
(function () {
  const pieces = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!node.textContent.trim() || !el || el.closest("script,style,title")) continue;
    if (!el.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) {
      if (r.width >= 1 && r.height >= 1) pieces.push({el, text: node.textContent.trim()
        .slice(0, 40), l: r.left, r: r.right, t: r.top, b: r.bottom});
    }
  }
  pieces.sort((a, b) => a.t - b.t);
  const found = [];
  for (let i = 0; i < pieces.length; i++) {
    const a = pieces[i];
    for (let j = i + 1; j < pieces.length && pieces[j].t < a.b - 2; j++) {
      const b = pieces[j];
      const w = Math.min(a.r, b.r) - Math.max(a.l, b.l);
      const h = Math.min(a.b, b.b) - Math.max(a.t, b.t);
      if (a.el !== b.el && w > 2 && h > 2) found.push(a.text + " | " + b.text);
    }
  }
  const out = document.createElement("pre");
  out.id = "tl-overlaps";
  out.textContent = JSON.stringify({pieces: pieces.length, overlaps: found.slice(0, 20)});
  document.body.appendChild(out);
})();
"""
OVERLAPS_RE = re.compile(r'<pre id="tl-overlaps">(.*?)</pre>', re.S)


def text_overlaps(chromium: str, page: Path, tmp_path: Path, insert: str = "") -> list[str]:
    """Texts of ``page`` that Chromium lays out over each other (``insert``: HTML put
    before the page's first table)."""
    import html as html_lib
    import json

    text = page.read_text(encoding="utf-8")
    if insert:
        at = text.index("<table")
        text = text[:at] + insert + text[at:]
    probe = tmp_path / f"probe-{page.stem}.html"
    probe.write_text(text.replace("</body>", f"<script>{OVERLAP_JS}</script></body>"))
    proc = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            "--dump-dom",
            probe.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = json.loads(html_lib.unescape(OVERLAPS_RE.search(proc.stdout).group(1)))
    assert found["pieces"] > 20, "no text laid out"
    return found["overlaps"]


def test_the_overlap_probe_finds_text_drawn_over_text(chromium, pages, tmp_path):
    over = (
        '<div style="position:relative"><span>first words</span><span style="position:'
        'absolute;left:0;top:0">second words</span></div>'
    )
    assert text_overlaps(chromium, pages[1], tmp_path, insert=over)


def test_no_text_overlaps_on_a_sweep_page_even_with_long_plan_names(
    chromium, tmp_path_factory, tmp_path
):
    """The engine sweep's page has the plan column; a long index name in it breaks inside
    its cell instead of running into the next one ("…wrong_orde0.4 %")."""
    from tunelab.report.tables import html_table

    report, _ = rendered("engine", tmp_path_factory)
    long = pd.DataFrame(
        {
            "index type": ["covering_wrong_order"],
            "access path": ["index accounts_covering_wrong_order; covering_index_scan_of_it"],
            "client share": ["0.4 %"],
        }
    )
    table = html_table(long, "long-plan", wrap=["access path"])
    assert text_overlaps(chromium, report, tmp_path, insert=table) == []


def test_no_text_overlaps_on_the_index(chromium, pages, tmp_path):
    assert text_overlaps(chromium, pages[0], tmp_path) == []


def test_no_text_overlaps_on_a_cross_engine_page(chromium, stored, tmp_path):  # noqa: F811
    from tunelab.report import across_engines, across_runs

    (exp,) = across_runs.gather(*stored)
    (page,) = across_engines.write_pages([exp], tmp_path / "reports" / "engines")
    assert text_overlaps(chromium, page, tmp_path) == []
