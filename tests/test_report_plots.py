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
from tunelab.report.page import figures_section, io_section, locking, metric_panel, sweep_figures


@pytest.fixture(scope="module")
def scan(tmp_path_factory):
    csv, sweep = measured("scan", tmp_path_factory)
    return load(csv, sweep), pd.read_csv(csv)


@pytest.fixture(scope="module")
def ranged(tmp_path_factory):
    csv, sweep = measured("range", tmp_path_factory)
    return load(csv, sweep), pd.read_csv(csv)


def _medians_from_rows(rows: pd.DataFrame, x: str, others: list[str], metric: str) -> list[float]:
    """Medians per point straight from the CSV, independently of tunelab.analysis.stats."""
    return sorted(rows.groupby([x, *others], dropna=False)[metric].median().tolist())


def _drawn(ax) -> list[float]:
    return sorted(float(v) for _, ys in metric_panel.plotted_medians(ax).values() for v in ys)


def test_swept_dimensions_come_from_the_rows(scan, ranged):
    assert scan[0].dims == ["knob_cache_size", "knob_page_size"]
    assert scan[0].groups == ["cache_requested"]
    assert ranged[0].dims == ["knob_index", "wl_selectivity"]


@pytest.mark.parametrize("which", ["scan", "ranged"])
def test_overview_has_one_axes_per_swept_dimension(which, request):
    data, rows = request.getfixturevalue(which)
    fig = sweep_figures.overview_figure(data, "elapsed_s")
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == len(data.dims) == 2
    for ax, x in zip(visible, data.dims, strict=True):
        others = [c for c in data.point_columns if c != x]
        assert _drawn(ax) == pytest.approx(_medians_from_rows(rows, x, others, "elapsed_s"))


@pytest.mark.parametrize("which", ["scan", "ranged"])
def test_knob_figure_medians_equal_row_medians(which, request):
    data, rows = request.getfixturevalue(which)
    for x in data.dims:
        fig = sweep_figures.knob_figure(data, x)
        axes = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax.get_title() for ax in axes] == ["Response time", "Throughput"]
        others = [c for c in data.point_columns if c != x]
        for ax, metric in zip(axes, ["elapsed_s", "throughput_rows_s"], strict=True):
            assert _drawn(ax) == pytest.approx(_medians_from_rows(rows, x, others, metric))
            # every raw repetition is drawn as a dot
            dots = [c for c in ax.collections if isinstance(c, PathCollection)]
            assert sum(len(c.get_offsets()) for c in dots) == rows[metric].notna().sum()


def test_axis_scales_follow_the_values(scan, ranged):
    fig = sweep_figures.knob_figure(scan[0], "knob_cache_size")  # 16..8192 pages: log axis
    assert fig.axes[0].get_xscale() == "log"
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["16", "128", "1024", "8192"]
    fig = sweep_figures.knob_figure(scan[0], "knob_page_size")  # 1024..4096: linear
    assert fig.axes[0].get_xscale() == "linear"
    fig = sweep_figures.knob_figure(ranged[0], "knob_index")  # categories in the sweep's order
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["none", "secondary"]


def test_hit_ratio_is_drawn_beside_the_reads_and_the_device_rate(scan):
    rows, names = io_section.io_rows(scan[0])  # as the page draws it
    fig = sweep_figures.io_figure(rows, "knob_cache_size", names)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == [
        "Reads from the OS",
        "Reads from the OS per second",
        "Rate of bytes read from the device",
        "Hit ratio",
    ]
    assert fig.axes[3].get_ylim() == pytest.approx((-0.03, 1.03))


def test_png_is_deterministic_and_valid(scan):
    first = plots.to_png(sweep_figures.knob_figure(scan[0], "knob_cache_size"))
    second = plots.to_png(sweep_figures.knob_figure(scan[0], "knob_cache_size"))
    assert first == second
    image = Image.open(io.BytesIO(first))
    assert image.format == "PNG" and image.width > 1000
    pixels = np.asarray(image.convert("L"), dtype=float)
    assert pixels.std() > 10  # not a blank canvas
    html = plots.figure_html(sweep_figures.knob_figure(scan[0], "knob_cache_size"), "alt text")
    assert html.startswith('<figure class="tl-figure"><img src="data:image/png;base64,')


def test_png_has_the_pixels_matplotlib_saves(scan):
    """to_png draws on its own canvas: the same pixels as matplotlib's savefig at the lab's
    DPI on white, for a figure with a layout engine (drawn twice by savefig)."""
    ours = Image.open(io.BytesIO(plots.to_png(sweep_figures.io_figure(scan[0], "knob_cache_size"))))
    buf = io.BytesIO()
    sweep_figures.io_figure(scan[0], "knob_cache_size").savefig(
        buf, format="png", dpi=plots.DPI, facecolor="white"
    )
    saved = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    quantized = saved.quantize(colors=256, method=Image.Quantize.MEDIANCUT).convert("RGB")
    assert ours.size == saved.size
    assert np.array_equal(np.asarray(ours.convert("RGB")), np.asarray(quantized))


# -- knob order, bytes beside pages, the table's size, crossovers, negative hit ratios ----------
def _pool_variant(rows: pd.DataFrame, tmp_path, page_size: int | None = 4096):
    """The measured scan rows as a buffer-pool sweep: the rows carry pages (16..8192) while the
    sweep lists sizes, out of order, as a MariaDB sweep does; one page size unless None."""
    import yaml

    rows = rows.rename(
        columns={"knob_cache_size": "knob_buffer_pool", "applied_cache_size": "applied_buffer_pool"}
    )
    if page_size is not None:
        rows = rows[rows["knob_page_size"] == page_size].drop(columns="knob_page_size")
    sweep = {
        "name": "sqlite-cache-scan",
        "knobs": {"buffer_pool": ["32MiB", "64KiB", "4MiB", "512KiB"]},
        "workloads": [{"type": "scan"}],
        "cache": "both",
    }
    if page_size is None:
        sweep["knobs"]["page_size"] = [1024, 4096]
    (tmp_path / "pool.yaml").write_text(yaml.safe_dump(sweep))
    rows.to_csv(tmp_path / "pool.csv", index=False)
    return load(tmp_path / "pool.csv", tmp_path / "pool.yaml"), rows


def test_buffer_pools_are_ordered_as_numbers_not_text(scan, tmp_path):
    data, rows = _pool_variant(scan[1], tmp_path)
    assert data.orders["knob_buffer_pool"] == [16, 128, 1024, 8192]
    fig = sweep_figures.knob_figure(data, "knob_buffer_pool")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["16", "128", "1024", "8192"]
    # every median line runs left to right through the pools in ascending order
    for xs, _ in metric_panel.plotted_medians(fig.axes[0]).values():
        assert list(xs) == sorted(xs)


def test_sizes_and_numeric_text_sort_by_magnitude():
    from tunelab.report.data import numeric_order, order_key

    assert numeric_order(["256MiB", "64MiB", "1GiB"]) == ["64MiB", "256MiB", "1GiB"]
    assert numeric_order([16384, 2048, 384, 1024]) == [384, 1024, 2048, 16384]
    assert numeric_order(["none", "clustered"]) is None  # categories keep the sweep's order
    assert sorted(["16384", "2048", "384"], key=order_key({}, "x")) == ["384", "2048", "16384"]


def test_legend_lists_buffer_pools_in_numeric_order(scan, tmp_path):
    data, _ = _pool_variant(scan[1], tmp_path, page_size=None)
    fig = sweep_figures.knob_figure(data, "knob_page_size")
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    pools = list(dict.fromkeys(int(t.split(" · ")[0]) for t in texts))
    assert pools == [16, 128, 1024, 8192]


def test_pool_axis_shows_bytes_on_top_and_the_table_size(scan, tmp_path):
    data, rows = _pool_variant(scan[1], tmp_path)
    fig = sweep_figures.knob_figure(data, "knob_buffer_pool")
    ax = fig.axes[0]
    (top,) = [c for c in ax.child_axes if c.get_gid() == "pool-bytes"]
    # 16..8192 pages of 4 KiB in one unit, MiB: 0.0625 .. 32
    assert [t.get_text() for t in top.get_xticklabels()] == ["0.0625", "0.5", "4", "32"]
    assert top.get_xlabel() == "size (MiB = 2²⁰ B), at 4 KiB pages"
    pages = int(np.ceil(rows["data_bytes"].median() / 4096))
    lines = [ln for ln in ax.get_lines() if str(ln.get_gid()).startswith("table|")]
    assert [ln.get_gid() for ln in lines] == [f"table|4096|{pages}"]
    assert lines[0].get_xdata()[0] == pages
    labels = [t.get_text() for t in ax.texts]
    assert any(t.startswith(f"table + indexes: {pages} pages / ") for t in labels), labels


def test_pool_axis_without_one_page_size_has_no_byte_axis(scan, tmp_path):
    data, _ = _pool_variant(scan[1], tmp_path, page_size=None)
    ax = sweep_figures.knob_figure(data, "knob_buffer_pool").axes[0]
    assert not [c for c in ax.child_axes if c.get_gid() == "pool-bytes"]
    tables = {ln.get_gid().split("|")[1] for ln in ax.get_lines() if "table|" in str(ln.get_gid())}
    assert tables == {"1024", "4096"}  # one table line per page size


def test_crossings_interpolate_on_the_log_axis():
    from tunelab.analysis.stats import crossings

    # index 1, 2, 5 against scan 2, 2.5, 3: a − b goes −0.5 -> +2 between 0.1 and 1
    assert crossings([0.01, 0.1, 1.0], [1, 2, 5], [2, 2.5, 3]) == pytest.approx([10**-0.8])
    assert crossings([0.01, 0.1, 1.0], [1, 2, 5], [2, 2.5, 3], log=False) == pytest.approx([0.28])
    assert crossings([0.1, 1.0], [1, 1], [2, 2]) == []
    assert crossings([0.1, 1.0, 10.0], [1, 2, 3], [2, 2, 2]) == [1.0]  # equal at a point


def _known_medians(rows: pd.DataFrame, tmp_path):
    """The measured range rows with response times set to known medians: warm, the index
    costs 0.1, 0.5, 2 s at selectivity 0.001, 0.01, 0.1 against the scan's 1 s (they meet at
    10^(−2 + 1/3)); cold, the index costs 2 s throughout (never faster)."""
    warm = rows.copy()
    cold = rows.assign(cache_requested="cold", cache_achieved="cold")
    index = {0.001: 0.1, 0.01: 0.5, 0.1: 2.0}
    spread = warm.groupby(["knob_index", "wl_selectivity"]).cumcount().map({0: 0.9, 1: 1.0, 2: 1.2})
    base = np.where(warm["knob_index"] == "none", 1.0, warm["wl_selectivity"].map(index))
    warm["elapsed_s"] = base * spread
    cold["elapsed_s"] = np.where(cold["knob_index"] == "none", 1.0, 2.0) * spread
    frame = pd.concat([warm, cold], ignore_index=True)
    frame["throughput_rows_s"] = frame["rows_touched"] / frame["elapsed_s"]
    frame.to_csv(tmp_path / "known.csv", index=False)
    csv, sweep = tmp_path / "known.csv", tmp_path / "sweep.yaml"
    import yaml

    doc = {
        "name": "sqlite-index-range",
        "knobs": {"index": ["none", "secondary"]},
        "workloads": [{"type": "range", "selectivity": [0.001, 0.01, 0.1]}],
    }
    sweep.write_text(yaml.safe_dump(doc))
    return load(csv, sweep)


def test_crossover_of_index_and_scan_is_marked_per_cache_state(ranged, tmp_path):
    from tunelab.report import marks

    data = _known_medians(ranged[1], tmp_path)
    found = {c.group: c for c in marks.crossovers(data)}
    assert found["warm"].at == pytest.approx([10 ** (-2 + 1 / 3)])  # 0.0215
    assert found["warm"].faster_first == "index"
    assert found["cold"].at == [] and found["cold"].faster_first == "scan"
    fig = sweep_figures.knob_figure(data, "wl_selectivity")
    for ax in fig.axes[:2]:
        gids = [ln.get_gid() for ln in ax.get_lines() if "crossover|" in str(ln.get_gid())]
        assert gids == [f"crossover|warm|{10 ** (-2 + 1 / 3):.6g}"]
    caption = marks.crossover_caption(marks.crossovers(data))
    assert "warm: at selectivity 2.2 %" in caption
    assert "cold: none between 0.1 % and 10 % (the scan is faster throughout)" in caption


def test_negative_system_hit_ratio_is_not_clipped(scan, tmp_path):
    rows = scan[1].copy()
    rows["hit_ratio_sys"] = rows["hit_ratio_app"]
    rows.loc[rows.index[:5], "hit_ratio_sys"] = -0.4  # prefetch read pages never asked for
    rows.to_csv(tmp_path / "neg.csv", index=False)
    data = load(tmp_path / "neg.csv", scan[0].sweep_file)
    fig = sweep_figures.io_figure(data, "knob_cache_size")
    ax = [a for a in fig.axes if a.get_title().startswith("Hit ratio")][0]
    low, high = ax.get_ylim()
    assert low < -0.4 and high >= 1.0
    assert any(ln.get_gid() == "zero" for ln in ax.get_lines())
    drawn = [v for _, ys in metric_panel.plotted_medians(ax).values() for v in ys]
    assert min(drawn) >= low


# -- row locks versus a table lock --------------------------------------------------------------
LOCK_SWEEP = """\
name: {name}
engines: [{engine}]
dataset: {{rows: 2000, seed: 7}}
knobs:
  {knob}: [{first}, {second}]
workloads:
  - {{type: insert, rows: 2000, threads: [1, 4], commit_every: 100}}
  - {{type: update, rows: 2000, threads: [1, 4], commit_every: 100}}
cache: warm
repetitions: 3
"""
_LOCKING: dict[str, tuple] = {}


def _measure_points(sweep, engine: str, out_dir, run_id: str | None = None) -> pd.DataFrame:
    from tunelab.measure import runner
    from tunelab.sweep import spec

    points, errors = spec.expand(sweep, engine)
    assert not errors, errors
    frames = []
    for point in points:
        out = out_dir / "points" / f"{point.point_id}.csv"
        runner.run_point(point, out, out_dir / "work", out_dir / "data", run_id)
        frames.append(pd.read_csv(out))
    return pd.concat(frames, ignore_index=True)


def measured_locking(tmp_path_factory):
    """Real SQLite inserts and updates by 1 and 4 threads at two pool sizes, the small pool
    relabelled as a table lock and the large one as row locks (SQLite has one lock level);
    returns (ReportData, rows)."""
    if "sqlite" not in _LOCKING:
        work = tmp_path_factory.mktemp("locking")
        measured_sweep = work / "measured.yaml"
        measured_sweep.write_text(
            LOCK_SWEEP.format(
                name="locking", engine="sqlite", knob="buffer_pool", first=10, second=1000
            )
        )
        rows = _measure_points(measured_sweep, "sqlite", work)
        lock = {10: "table", 1000: "row"}
        rows["knob_lock_granularity"] = rows.pop("knob_buffer_pool").map(lock)
        rows["applied_lock_granularity"] = rows.pop("applied_buffer_pool").map(lock)
        rows.to_csv(work / "locking.csv", index=False)
        sweep = work / "locking.yaml"
        sweep.write_text(
            LOCK_SWEEP.format(
                name="locking",
                engine="sqlite",
                knob="lock_granularity",
                first="row",
                second="table",
            )
        )
        _LOCKING["sqlite"] = (load(work / "locking.csv", sweep), rows)
    return _LOCKING["sqlite"]


def _hodges_lehmann(ratios: pd.Series) -> float:
    """The ratio whose log is the median of the Walsh averages of the logs."""
    logs = np.log(ratios.to_numpy())
    walsh = [(a + b) / 2 for i, a in enumerate(logs) for b in logs[i:]]
    return float(np.exp(np.median(walsh)))


def expected_lock_ratios(rows: pd.DataFrame) -> dict[tuple[str, int], float]:
    """(workload, threads) -> median throughput with row locks / with a table lock, straight
    from the rows; where they record rounds, the Hodges–Lehmann estimate of the per-round
    ratios (the signed-rank test's own)."""
    keys = ["workload", "wl_threads", "knob_lock_granularity"]
    if "round" in rows:
        per_round = rows.groupby([*keys, "round"])["throughput_rows_s"].median().unstack(2)
        ratios = (per_round["row"] / per_round["table"]).dropna()
        by_point = ratios.groupby(level=[0, 1])
        return {(w, int(t)): _hodges_lehmann(r) for (w, t), r in by_point}
    medians = rows.groupby(keys)["throughput_rows_s"].median()
    return {
        (w, int(t)): medians[(w, t, "row")] / medians[(w, t, "table")]
        for w, t in {(w, t) for w, t, _ in medians.index}
    }


def _check_lock_figure(data, rows) -> None:
    expected = expected_lock_ratios(rows)
    assert set(expected) == {(w, t) for w in ("insert", "update") for t in (1, 4)}
    fig = locking.lock_figure(data)
    (ax,) = [a for a in fig.axes if a.get_visible()]
    drawn = locking.plotted_ratios(ax)
    assert set(drawn) == {"insert", "update"}
    threads = [1, 4]  # categories, left to right
    seen = {}
    for workload, (xs, ys, bars) in drawn.items():
        assert len(xs) == len(ys) == len(bars) == 2
        for x, y, bar in zip(xs, ys, bars, strict=True):
            seen[(workload, threads[round(x)])] = y
            (bx0, low), (bx1, high) = bar
            assert bx0 == bx1 == x
            assert low <= y <= high  # the interval contains the ratio of medians
    assert seen == pytest.approx(expected, rel=1e-12)
    assert [ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_gid() == "parity"] == [1.0]
    assert ax.get_xlabel() == "client threads"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "4"]
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] > max(1.0, *expected.values())


@pytest.mark.slow
def test_lock_figure_draws_the_throughput_ratio_with_its_interval(tmp_path_factory):
    data, rows = measured_locking(tmp_path_factory)
    _check_lock_figure(data, rows)
    ratios = locking.lock_ratios(data)
    assert list(ratios[["workload", "wl_threads"]].itertuples(index=False, name=None)) == [
        ("insert", 1),
        ("insert", 4),
        ("update", 1),
        ("update", 4),
    ]
    assert (ratios["n_row"] == 3).all() and (ratios["n_table"] == 3).all()
    # the same rows give the same intervals (the bootstrap is seeded per point)
    again = locking.lock_ratios(data)
    assert again[["low", "high"]].equals(ratios[["low", "high"]])


@pytest.mark.slow
def test_no_lock_figure_without_both_lock_kinds(tmp_path_factory, tmp_path, scan):
    assert locking.lock_ratios(scan[0]) is None and locking.lock_figure(scan[0]) is None
    data, rows = measured_locking(tmp_path_factory)
    rows[rows["knob_lock_granularity"] == "row"].to_csv(tmp_path / "row.csv", index=False)
    assert locking.lock_ratios(load(tmp_path / "row.csv", data.sweep_file)) is None


@pytest.mark.slow
@pytest.mark.docker
def test_lock_figure_of_a_real_mariadb_locking_sweep(tmp_path_factory, image):
    import uuid

    from tunelab.run import recovery

    work = tmp_path_factory.mktemp("mdb-locking")
    sweep = work / "locking.yaml"
    sweep.write_text(
        LOCK_SWEEP.format(
            name="locking", engine="mariadb", knob="lock_granularity", first="row", second="table"
        )
    )
    run_id = f"lock-{uuid.uuid4().hex[:6]}"
    try:
        rows = _measure_points(sweep, "mariadb", work, run_id)
    finally:
        recovery.clean(run_id)
    assert set(rows["knob_lock_granularity"]) == {"row", "table"}
    rows.to_csv(work / "locking.csv", index=False)
    _check_lock_figure(load(work / "locking.csv", sweep), rows)


def test_the_figure_along_the_claims_question_comes_first(ranged):
    import dataclasses
    import re

    claim = {
        "says": "the scan overtakes the index",
        "kind": "crossover",
        "along": "selectivity",
        "a": {"index": "nonclustered"},
        "b": {"index": "none"},
        "within": [0.01, 0.5],
    }
    data = dataclasses.replace(ranged[0], sweep={**ranged[0].sweep, "expect": [claim]})
    assert figures_section.figure_order(data) == ["wl_selectivity", "knob_index"]
    heads = re.findall(r"<h3>([^<]+)</h3>", figures_section.figures_html(data))
    assert heads.index("Selectivity (fraction of rows)") < heads.index("Index type")
