"""Rendering: executed template -> HTML with no code, embedded PNGs, numbers from the rows."""

from __future__ import annotations

import base64
import io
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image
from test_report_support import TEMPLATE, measured, rendered, report_params

from tunelab.report import cli
from tunelab.report.index import read_summary, write_index
from tunelab.report.render import RenderError, inject_parameters, render

IMG_RE = re.compile(r'<img\b[^>]*\bsrc="([^"]*)"')


class _Tables(HTMLParser):
    """Cells of every <table id=...> in a page: {id: [[cell, ...], ...]} (header row first)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._stack: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._stack.append(dict(attrs).get("id") or f"anon{len(self.tables)}")
            self.tables.setdefault(self._stack[-1], [])
        elif tag == "tr" and self._stack:
            self.tables[self._stack[-1]].append([])
        elif tag in ("td", "th") and self._stack:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "table" and self._stack:
            self._stack.pop()
        elif tag in ("td", "th") and self._cell is not None and self._stack:
            self.tables[self._stack[-1]][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def tables_of(html: str) -> dict[str, list[list[str]]]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def number(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.fixture(scope="module")
def scan_report(tmp_path_factory):
    path, seconds = rendered("scan", tmp_path_factory)
    csv, sweep = measured("scan", tmp_path_factory)
    return path.read_text(encoding="utf-8"), pd.read_csv(csv), path, csv, sweep


def test_html_has_no_code_inputs(scan_report):
    html = scan_report[0].split("<body", 1)[1]  # the head holds JupyterLab's whole stylesheet
    assert "jp-CodeMirrorEditor" not in html and "highlight-ipynb" not in html
    for source in ("report_data.load(", "s.show(", "import tunelab", "# Parameters"):
        assert source not in html
    assert "jp-InputPrompt" not in html and "jp-OutputPrompt" not in html
    assert "Traceback" not in html and "jp-RenderedText" not in html  # no stdout/stderr
    assert 'class="jp-OutputArea-output jp-OutputArea-executeResult"' not in html


def test_html_is_self_contained_with_png_figures(scan_report):
    html = scan_report[0]
    sources = IMG_RE.findall(html)
    assert len(sources) >= 4  # two dimensions x (performance + I/O)
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        image = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
        image.verify()
    assert not re.search(r'<script[^>]+src="http', html)
    assert not re.search(r'<link[^>]+href="http', html)


def test_summary_table_numbers_equal_medians_of_the_csv(scan_report):
    html, rows = scan_report[0], scan_report[1]
    table = tables_of(html)["summary"]
    header, body = table[0], table[1:]
    assert header[:4] == ["cache size", "page size (bytes)", "cache", "n"]
    # three repetitions: [min, max] covers the median with 1 - 2 / 2^3, and says so
    assert "75.0 % interval for the median (order statistics)" in header
    medians = rows.groupby(["knob_cache_size", "knob_page_size", "cache_requested"])
    expected = medians["elapsed_s"].median()
    counts = medians.size()
    assert len(body) == len(expected) == 16
    col = header.index("response time (s): median")
    tcol = header.index("throughput (rows/s): median")
    for cells in body:
        key = (int(cells[0]), int(cells[1]), cells[2])
        assert int(cells[3]) == counts[key]
        assert number(cells[col]) == pytest.approx(expected[key], rel=5e-4)
        want = medians["throughput_rows_s"].median()[key]
        assert number(cells[tcol]) == pytest.approx(want, rel=5e-4, abs=0.5)
        low, high = (number(v) for v in cells[col + 1].split(" – "))
        assert low <= number(cells[col]) <= high


def test_io_table_shows_the_reads_beside_hit_ratio(scan_report):
    html, rows = scan_report[0], scan_report[1]
    header, *body = tables_of(html)["io"]
    assert "hit ratio, application: median" in header
    assert "hit ratio, system: median" not in header  # SQLite has no second-level pool
    medians = rows.groupby(["knob_cache_size", "knob_page_size", "cache_requested"]).median(
        numeric_only=True
    )
    for column, name in [
        ("c_physical_reads", "reads from the OS (pages; page cache or device): median"),
        ("physical_reads_per_s", "reads from the OS per second: median"),
    ]:
        at = header.index(name)
        for cells in body:
            key = (int(cells[0]), int(cells[1]), cells[2])
            assert number(cells[at]) == pytest.approx(medians.loc[key, column], rel=5e-4)


def test_provenance_names_engine_host_commit_seeds_and_cache_states(scan_report):
    html, rows = scan_report[0], scan_report[1]
    prov = {r[0]: r[1] for r in tables_of(html)["provenance"] if len(r) == 2}
    assert prov["engine version"] == rows["engine_version"].iloc[0]
    assert prov["git commit"] == rows["git_commit"].iloc[0]
    assert prov["seeds"] == str(rows["seed"].iloc[0])
    assert str(rows["host_cores"].iloc[0]) + " cores" in prov["host"]
    cache = tables_of(html)["cache"]
    assert {tuple(r[:3]) for r in cache[1:]} == {
        ("cold", "cold", "new connection+fadvise"),
        ("warm", "warm", "warm-up run"),
    }


def test_rendering_again_gives_the_same_page(scan_report, tmp_path):
    html, _, _, csv, sweep = scan_report
    again = render(TEMPLATE, report_params(csv, sweep), tmp_path / "again.html")
    assert again.read_text(encoding="utf-8") == html


def test_index_links_reports_with_one_line_each(tmp_path_factory, scan_report):
    path = scan_report[2]
    other, _ = rendered("range", tmp_path_factory)
    out = path.parent.parent / "index.html"
    write_index([other, path], out, results_dir=path.parent.parent)
    html = out.read_text(encoding="utf-8")
    rows = tables_of(html)
    body = next(iter(rows.values()))[1:]
    assert body[0][0].startswith("sqlite-cache-scan")
    assert body[1][0].startswith("sqlite-index-range")
    assert body[0][4] == "16 × 3" and body[1][4] == "6 × 3"  # after the claims column
    assert f'href="reports/{path.name}"' in html
    assert read_summary(path)["rows"] == 48


def test_parameters_are_injected_after_the_parameters_cell():
    import jupytext

    nb = inject_parameters(jupytext.read(TEMPLATE), {"title": "x"})
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    at = tags.index(["parameters"])
    assert tags[at + 1] == ["injected-parameters"]
    assert nb.cells[at + 1].source == "# Parameters\ntitle = 'x'\n"
    with pytest.raises(RenderError, match="unknown parameter"):
        inject_parameters(jupytext.read(TEMPLATE), {"colour": "red"})


def test_a_failing_cell_is_one_line_error(tmp_path_factory, tmp_path):
    csv, sweep = measured("scan", tmp_path_factory)
    params = report_params(csv, sweep, sweep_name="no-such-sweep")
    with pytest.raises(RenderError) as err:
        render(TEMPLATE, params, tmp_path / "bad.html")
    assert "ReportInputError" in str(err.value) and "no rows of sweep 'no-such-sweep'" in str(
        err.value
    )
    assert "\n" not in str(err.value)
    assert not (tmp_path / "bad.html").exists()


def test_cli_errors_are_one_line_with_exit_2(tmp_path_factory, tmp_path, capsys):
    csv, sweep = measured("scan", tmp_path_factory)
    out = tmp_path / "r.html"
    cases = [
        ["--results", str(tmp_path / "missing.csv"), "--sweep", str(sweep), "--out", str(out)],
        ["--results", str(csv), "--sweep", str(sweep), "--out", str(out), "--name", "nope"],
        ["--results", str(csv), "--sweep", str(sweep), "--out", str(out), "--bpsim", "x.csv"],
        ["--results", str(csv), "--out", str(out)],
    ]
    for argv in cases:
        assert cli.report_main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("tunelab report: error: ") and err.count("\n") == 1, err
    assert not out.exists()
    assert cli.index_main(["--out", str(tmp_path / "i.html"), str(tmp_path / "nope.html")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_cli_renders_a_report(tmp_path_factory, tmp_path, capsys):
    csv, sweep = measured("range", tmp_path_factory)
    out = tmp_path / "range.html"
    assert cli.report_main(["--results", str(csv), "--sweep", str(sweep), "--out", str(out)]) == 0
    summary = read_summary(out)
    assert summary["sweep"] == "sqlite-index-range" and summary["points"] == 6
    assert cli.index_main(["--out", str(tmp_path / "index.html"), str(out)]) == 0
    assert Path(tmp_path / "index.html").is_file()


def test_page_has_a_methods_section_naming_the_engine_version(scan_report):
    html, rows = scan_report[0], scan_report[1]
    assert "<h2" in html and ">Methods<" in html
    methods = re.search(r'<div id="methods">(.*?)</div>', html, re.S).group(1)
    assert rows["engine_version"].iloc[0] in methods
    assert f"The data set held {rows['dataset_rows'].iloc[0]:,} generated rows" in methods
    # the page answers first: the claims and the figures, then what was measured and how
    assert html.index('class="tl-figure"') < html.index('id="methods"')


def test_the_page_says_which_megabyte_once(scan_report):
    header = tables_of(scan_report[0])["io"][0]
    assert "rate of reads from the OS (MB/s): median" in header
    assert scan_report[0].count("MB = ") == 1
    assert "Rates are in MB/s of a million bytes (MB = 10⁶ B)" in scan_report[0]
