"""Figures that show the comparison: log axes where a panel spans more than 10x, the source's
figures on the axis, selectivity in %, categories as points, one rule for too many series,
and no text drawn over other text."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from test_findings import _copy_pack, _validate
from test_report_support import measured

from tunelab.report import labels, plots
from tunelab.report.data import load
from tunelab.report.page import figures_section, io_section, sweep_figures

FINDINGS = """
rules: {alpha: 0.05, margin: 0.05, similar_within: 0.15, crossover_factor: 3,
        contexts: all-bonferroni}
findings:
  - id: cross
    sweep: sqlite-index-range
    source: a test source
    says: the scan overtakes the index at about 5 %
    reported: at about 5 %
    kind: crossover
    at: 0.05
    a: {index: secondary}
    b: {index: none}
    along: selectivity
  - id: wider
    sweep: sqlite-index-range
    source: a test source
    says: a scan of 10 % takes longer than of 0.1 %
    reported: 14 s against 8 s
    source_ratio: 1.75
    reported_value: {a: 14, b: 8, unit: s}
    kind: higher
    a: {selectivity: 0.1}
    b: {selectivity: 0.001}
    where: {index: none}
"""


@pytest.fixture(scope="module")
def ranged(tmp_path_factory):
    """The measured range rows, judged by a findings file beside their sweep's folder."""
    csv, sweep = measured("range", tmp_path_factory)
    lab = tmp_path_factory.mktemp("lab")
    (lab / "sweeps").mkdir()
    (lab / "findings.yaml").write_text(FINDINGS)
    doc = yaml.safe_load(Path(sweep).read_text())
    (lab / "sweeps" / "sqlite-index-range.yaml").write_text(yaml.safe_dump(doc))
    return load(csv, lab / "sweeps" / "sqlite-index-range.yaml"), pd.read_csv(csv)


def overlapping_texts(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of drawn texts whose boxes cross (by more than a pixel each way). Drawn: a
    tick's label outside the axis's range is a visible Text that is never drawn."""
    canvas = FigureCanvasAgg(fig)
    drawn: list[Text] = []
    draw = Text.draw

    def recorded(text: Text, renderer) -> None:
        if text.get_visible() and text.get_text().strip():
            drawn.append(text)
        draw(text, renderer)

    with mock.patch.object(Text, "draw", recorded):
        canvas.draw()
    renderer = canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in dict.fromkeys(drawn)]
    out = []
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1 :]:
            w = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            h = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if w > 1 and h > 1:
                out.append((a, b))
    return out


def test_a_panel_spanning_more_than_ten_times_is_log():
    assert plots.x_scale([1.0, 5.0, 10.0]) == "linear"
    assert plots.x_scale([1.0, 5.0, 10.5]) == "log"
    assert plots.x_scale([0.0, 16.0, 128.0, 1024.0]) == "symlog"  # a zero among them
    assert plots.x_scale([0.0, 1.0, 2.0]) == "linear"


def test_times_spanning_more_than_ten_times_are_drawn_on_a_log_axis(ranged):
    data, rows = ranged
    fig = sweep_figures.knob_figure(data, "knob_index")
    ax = fig.axes[0]
    times = rows["elapsed_s"].to_numpy(float)
    wide = times.max() / times.min() > plots.LOG_SPAN
    assert ax.get_yscale() == ("log" if wide else "linear")
    # the medians of every index type sit on distinct ticks' range, not on the axis
    low, high = ax.get_ylim()
    assert low > 0 or not wide


def test_selectivity_is_drawn_in_percent(ranged):
    data, _ = ranged
    fig = sweep_figures.knob_figure(data, "wl_selectivity")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "selectivity (% of rows)"
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ticks and all(t.endswith(" %") for t in ticks), ticks
    shown = {float(t.removesuffix(" %")) / 100 for t in ticks}
    assert shown <= set(data.results["wl_selectivity"].round(12))
    legend = sweep_figures.knob_figure(data, "knob_index").legends[0]
    assert all(t.get_text().endswith(" %") for t in legend.get_texts())


def test_the_sources_crossover_and_ratio_are_drawn_on_the_axis(ranged):
    data, rows = ranged
    fig = sweep_figures.knob_figure(data, "wl_selectivity")
    time_ax, throughput_ax = fig.axes[:2]
    for ax in (time_ax, throughput_ax):
        assert [
            ln.get_gid() for ln in ax.get_lines() if str(ln.get_gid()).startswith("source|")
        ] == ["source|0.05"]
    marks = [ln for ln in time_ax.get_lines() if str(ln.get_gid()).startswith("source-ratio|")]
    scan = rows[rows["knob_index"] == "none"]
    expected = float(np.median(scan.loc[scan["wl_selectivity"] == 0.001, "elapsed_s"])) * 14 / 8
    assert len(marks) == 1
    assert marks[0].get_xdata()[0] == pytest.approx(0.1)
    assert marks[0].get_ydata()[0] == pytest.approx(expected)
    assert "14 s vs 8 s" in marks[0].get_label()
    assert not [ln for ln in throughput_ax.get_lines() if "source-ratio" in str(ln.get_gid())]
    notes = figures_section.axis_notes(data, "wl_selectivity", crossover=True)
    assert "5 % (a test source)" in notes and "1.75×" in notes


@pytest.mark.parametrize("x", ["wl_selectivity", "knob_index"])
def test_no_text_of_a_figure_is_drawn_over_another(ranged, x):
    data, _ = ranged
    assert overlapping_texts(sweep_figures.knob_figure(data, x)) == []
    assert overlapping_texts(sweep_figures.overview_figure(data)) == []


def test_the_overlap_check_can_fail():
    fig = Figure()
    ax = fig.subplots()
    ax.annotate("one label here", (0.5, 0.5))
    ax.annotate("another label", (0.52, 0.5))
    assert overlapping_texts(fig)


def test_too_many_series_is_one_rule_for_every_section(ranged, monkeypatch):
    data, _ = ranged
    data = dataclasses.replace(data, sweep={**data.sweep, "expect": []})
    monkeypatch.setattr(figures_section, "MAX_SERIES", 2)  # 3 selectivities per index type
    first = figures_section.figure_order(data)[0]
    other = next(x for x in data.dims if x != first)
    name = labels.label(other, data.engine)
    for html in (figures_section.figures_html(data), io_section.io_html(data)):
        assert f"Not drawn versus {name}" in html
        alts = re.findall(r'alt="([^"]*)"', html)
        assert alts and not [a for a in alts if a.endswith(f"vs {name}") or a.endswith(name)]


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (
            "reported_value: {a: 14, b: 8, unit: s}",
            "reported_value: {a: 14, b: 8, unit: sec}",
            ".reported_value.unit: 'sec' is no unit the axis of elapsed_s shows (allowed: s, ms)",
        ),
        (
            "reported_value: {a: 14, b: 8, unit: s}",
            "reported_value: {a: 14, b: 4, unit: s}",
            ".reported_value: a/b = 3.5 but source_ratio is 1.75",
        ),
    ],
)
def test_a_source_figure_the_axis_cannot_show_is_one_line_exit_2(tmp_path, old, new, said):
    root = _copy_pack(tmp_path)
    text = (root / "findings.yaml").read_text()
    assert old in text
    (root / "findings.yaml").write_text(text.replace(old, new, 1))
    proc = _validate(root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [x for x in (proc.stdout + proc.stderr).splitlines() if said in x]
    assert len(lines) == 1 and "findings.yaml: findings[" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_overlap_check_sees_texts_drawn_on_one_spot_and_not_undrawn_ticks():
    fig = Figure()
    ax = fig.subplots()
    ax.set_xlim(0, 1)
    ax.set_xticks([0.5, 5.0])  # the tick at 5 is outside the range: its label is not drawn
    ax.text(0.5, 0.5, "one words")
    assert overlapping_texts(fig) == []
    ax.text(0.5, 0.5, "two words")
    assert overlapping_texts(fig) == [("one words", "two words")]
