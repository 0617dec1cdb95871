"""Figures: one panel per swept dimension, medians drawn equal the medians of the rows."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection
from PIL import Image
from test_report_support import measured

from tunelab.report import plots
from tunelab.report.data import load


@pytest.fixture(scope="module")
def scan(tmp_path_factory):
    csv, sweep = measured("scan", tmp_path_factory)
    return load(csv, sweep), pd.read_csv(csv)


@pytest.fixture(scope="module")
def ranged(tmp_path_factory):
    csv, sweep = measured("range", tmp_path_factory)
    return load(csv, sweep), pd.read_csv(csv)


def _medians_from_rows(rows: pd.DataFrame, x: str, others: list[str], metric: str) -> list[float]:
    """Medians per point straight from the CSV, independently of tunelab.report.stats."""
    return sorted(rows.groupby([x, *others], dropna=False)[metric].median().tolist())


def _drawn(ax) -> list[float]:
    return sorted(float(v) for _, ys in plots.plotted_medians(ax).values() for v in ys)


def test_swept_dimensions_come_from_the_rows(scan, ranged):
    assert scan[0].dims == ["knob_cache_size", "knob_page_size"]
    assert scan[0].groups == ["cache_requested"]
    assert ranged[0].dims == ["knob_index", "wl_selectivity"]


@pytest.mark.parametrize("which", ["scan", "ranged"])
def test_overview_has_one_axes_per_swept_dimension(which, request):
    data, rows = request.getfixturevalue(which)
    fig = plots.overview_figure(data, "elapsed_s")
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == len(data.dims) == 2
    for ax, x in zip(visible, data.dims, strict=True):
        others = [c for c in data.point_columns if c != x]
        assert _drawn(ax) == pytest.approx(_medians_from_rows(rows, x, others, "elapsed_s"))


@pytest.mark.parametrize("which", ["scan", "ranged"])
def test_knob_figure_medians_equal_row_medians(which, request):
    data, rows = request.getfixturevalue(which)
    for x in data.dims:
        fig = plots.knob_figure(data, x)
        axes = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax.get_title() for ax in axes] == ["Response time", "Throughput"]
        others = [c for c in data.point_columns if c != x]
        for ax, metric in zip(axes, ["elapsed_s", "throughput_rows_s"], strict=True):
            assert _drawn(ax) == pytest.approx(_medians_from_rows(rows, x, others, metric))
            # every raw repetition is drawn as a dot
            dots = [c for c in ax.collections if isinstance(c, PathCollection)]
            assert sum(len(c.get_offsets()) for c in dots) == rows[metric].notna().sum()


def test_axis_scales_follow_the_values(scan, ranged):
    fig = plots.knob_figure(scan[0], "knob_cache_size")  # 16..8192 pages: log axis
    assert fig.axes[0].get_xscale() == "log"
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["16", "128", "1024", "8192"]
    fig = plots.knob_figure(scan[0], "knob_page_size")  # 1024..4096: linear
    assert fig.axes[0].get_xscale() == "linear"
    fig = plots.knob_figure(ranged[0], "knob_index")  # categories in the sweep's order
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["none", "secondary"]


def test_hit_ratio_is_drawn_beside_physical_reads(scan):
    fig = plots.io_figure(scan[0], "knob_cache_size")
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["Physical reads", "Physical reads per second", "Hit ratio"]
    assert fig.axes[2].get_ylim() == pytest.approx((-0.03, 1.03))


def test_png_is_deterministic_and_valid(scan):
    first = plots.to_png(plots.knob_figure(scan[0], "knob_cache_size"))
    second = plots.to_png(plots.knob_figure(scan[0], "knob_cache_size"))
    assert first == second
    image = Image.open(io.BytesIO(first))
    assert image.format == "PNG" and image.width > 1000
    pixels = np.asarray(image.convert("L"), dtype=float)
    assert pixels.std() > 10  # not a blank canvas
    html = plots.figure_html(plots.knob_figure(scan[0], "knob_cache_size"), "alt text")
    assert html.startswith('<figure class="tl-figure"><img src="data:image/png;base64,')
