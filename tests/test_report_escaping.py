"""Text from a file (a sweep's description and values, result rows, verdicts, a report's
summary) reaches a page as text: never as a tag, and never ending or holding open the JSON
block the index reads. Checked in the HTML and, where Chromium is installed, in the DOM it
builds."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tunelab.report import index
from tunelab.report.data import load
from tunelab.report.page import findings_section, header_section, measured_section

# Each would be a tag, a comment or the end of a <script> block if it reached a page raw;
# '<!--<script' inside a script block makes the parser take the rest of the page as script.
HOSTILE = (
    "<script>alert(1)</script>",
    "<!--<script",
    "</script>",
    '"><img src=x onerror=alert(1)>',
)
TEXT = " ".join(HOSTILE)
END = '<p id="page-end">the end of the page</p>'
SCRIPT_RE = re.compile(r"<script\b[^>]*>(.*?)</script>", re.S)


def _page(body: str) -> str:
    head = '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"></head>'
    return f"{head}<body>{body}{END}</body></html>\n"


def _no_markup_from_files(page: str, scripts: int) -> None:
    """Only the page's own tags: its ``scripts`` script blocks, none of them holding a
    '<' (nothing in them can end or reopen them), and no tag or comment a value made."""
    assert page.count("<script") == scripts, page
    assert all("<" not in body for body in SCRIPT_RE.findall(page))
    assert "<img" not in page and "<!--" not in page


def _dom(page: Path) -> str | None:
    """The document Chromium builds from ``page`` (None without Chromium)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return None
    proc = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _check_dom(page: Path, scripts: int) -> None:
    dom = _dom(page)
    if dom is None:
        return
    assert 'id="page-end"' in dom, dom[-2000:]  # nothing swallowed the rest of the page
    assert dom.count("<script") == scripts and "<img" not in dom


@pytest.fixture
def hostile_report(tmp_path: Path) -> tuple[Path, Path]:
    """A sweep and rows whose every text field holds the hostile strings."""
    sweep = {
        "name": "escape",
        "description": TEXT,
        "notes": {"sqlite": TEXT},
        "dataset": {"rows": 1000, "seed": 1},
        "knobs": {"index": ["none", TEXT]},
        "fixed": {TEXT: TEXT},
        "workloads": [{"type": "scan", TEXT: TEXT}],
        "cache": TEXT,
    }
    sweep_file = tmp_path / "escape.yaml"
    sweep_file.write_text(yaml.safe_dump(sweep))
    rows = [
        {
            "sweep": "escape",
            "point_id": f"p{index}",
            "engine": "sqlite",
            "engine_version": TEXT,
            "knob_index": kind,
            f"knob_{TEXT}": "1",
            f"applied_{TEXT}": "2",
            "cache_requested": TEXT,
            "elapsed_s": 1.0 + rep / 10,
            "started_at": f"2026-01-0{rep + 1}T00:00:00",
            "host_name": "vm",
        }
        for index, kind in enumerate(["none", TEXT])
        for rep in range(3)
    ]
    csv = tmp_path / "escape.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    return csv, sweep_file


def test_a_report_shows_every_value_of_its_files_as_text(hostile_report, tmp_path):
    csv, sweep_file = hostile_report
    data = load(csv, sweep_file)
    verdicts = [
        {
            "claim": TEXT,
            "word": TEXT,
            "evidence": TEXT,
            "causes": [TEXT],
            "source": TEXT,
            "reported": TEXT,
        }
    ]
    body = (
        header_section.header_html(data, TEXT)
        + findings_section.claims_html(verdicts)
        + measured_section.measured_html(data)
    )
    page = tmp_path / "reports" / "sqlite" / "escape.html"
    page.parent.mkdir(parents=True)
    page.write_text(_page(body), encoding="utf-8")
    _no_markup_from_files(page.read_text(encoding="utf-8"), scripts=1)
    # The summary reads back exactly as written, the hostile text included.
    summary = index.read_summary(page)
    assert summary is not None and summary["description"] == TEXT
    assert summary == json.loads(json.dumps(header_section.summary(data, TEXT)))
    _check_dom(page, scripts=1)


def test_the_index_shows_every_field_of_a_summary_as_text(tmp_path):
    summary = {
        "sweep": TEXT,
        "title": TEXT,
        "description": TEXT,
        "engine": TEXT,
        "engine_versions": [TEXT],
        "swept": [TEXT],
        "points": TEXT,
        "rows": TEXT,
        "reps_min": TEXT,
        "reps_max": TEXT + "!",
        "cache": [TEXT],
        "first_started": TEXT,
        "last_started": TEXT,
        "hosts": [TEXT, TEXT + "2"],
    }
    report = tmp_path / "reports" / "sqlite" / "escape.html"
    report.parent.mkdir(parents=True)
    block = f'<script type="application/json" id="{header_section.SUMMARY_ID}">'
    as_json = json.dumps(summary).replace("<", "\\u003c")  # a block that ends where it should
    report.write_text(_page(block + as_json + "</script>"), encoding="utf-8")
    assert index.read_summary(report) == summary
    out = tmp_path / "reports" / "index.html"
    index.write_index([report], out, tmp_path / "results")
    text = out.read_text(encoding="utf-8")
    assert text.count("<script") == 0 and "<img" not in text and "<!--" not in text
    assert html.escape(f"{TEXT} × {TEXT}–{TEXT}!") in text  # points × repetitions
    # Chromium: the index holds no script, the report's block ends where it should.
    if (dom := _dom(out)) is not None:
        assert dom.count("<script") == 0 and "<img" not in dom
    _check_dom(report, scripts=1)


def test_json_in_a_page_escapes_what_could_end_its_block():
    from tunelab.report.fragments import script_json

    text = script_json({"a": "</script><!--<script>&"})
    assert text == '{"a": "\\u003c/script\\u003e\\u003c!--\\u003cscript\\u003e\\u0026"}'
    assert json.loads(text) == {"a": "</script><!--<script>&"}


def test_a_page_across_engines_shows_its_files_text_as_text(tmp_path):
    from test_report_engines import SWEEP, _rows

    from tunelab.report import across_engines, across_runs

    quoted = json.dumps(TEXT)  # a YAML string
    text = SWEEP.replace(
        "A range query through an index or a scan, as the selectivity grows.", quoted
    ).replace("SQLite's note.", quoted)
    text = text.replace("the scan overtakes the index", TEXT.replace('"', "'"))
    sweep = tmp_path / "tiny-range.yaml"
    sweep.write_text(text)
    results, reports = tmp_path / "results", tmp_path / "reports"
    (results / "sqlite").mkdir(parents=True)
    _rows("sqlite", sweep, "vm", 64, 4096, 1.0, "index").to_csv(
        results / "sqlite" / "tiny-range.csv", index=False
    )
    verdicts = [{"claim": TEXT.replace('"', "'"), "word": TEXT, "evidence": TEXT}]
    (reports / "sqlite").mkdir(parents=True)
    (reports / "sqlite" / "tiny-range.verdicts.json").write_text(
        json.dumps({"x": {"sweep": "tiny-range", "engine": "sqlite", "verdicts": verdicts}})
    )
    (exp,) = across_runs.gather(results, reports)
    (page,) = across_engines.write_pages([exp], reports / "engines")
    _no_markup_from_files(page.read_text(encoding="utf-8").replace('<img src="data:', ""), 0)
    index.write_index([], reports / "index.html", results)
    _no_markup_from_files((reports / "index.html").read_text(encoding="utf-8"), 0)
