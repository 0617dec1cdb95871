"""Does each number measure the engine? The report's plan, engine-time and per-query parts,
on rows measured through tunelab.measure.runner on SQLite (the engine sweep of test_report_support):
the planner's real choice of a scan where the index knob built an index is listed and
marked, engine time stands beside the client's clock, the first cold query apart from the
rest. Client-bound points and result files from before these columns are derived from the
same real rows."""

from __future__ import annotations

import base64
import re

import numpy as np
import pandas as pd
import pytest
from test_report_render import number, tables_of
from test_report_support import TEMPLATE, measured, rendered, report_params

from tunelab.report import checks, plots, tables
from tunelab.report.data import load
from tunelab.report.page import (
    callouts,
    figures_section,
    io_section,
    metric_panel,
    sweep_figures,
    times_section,
)
from tunelab.report.render import render

POINT = ["knob_index", "wl_selectivity", "workload", "cache_requested"]
NEW_COLUMNS = (
    "access_mode",
    "access_path",
    "access_expected",
    "access_matches",
    "engine_elapsed_s",
    "client_share",
    "queries",
    "q_first_s",
    "q_rest_median_s",
    "q_p50_s",
    "q_p95_s",
    "q_p99_s",
    "q_max_s",
)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    csv, sweep = measured("engine", tmp_path_factory)
    return load(csv, sweep), pd.read_csv(csv), csv, sweep


def _variant(rows: pd.DataFrame, sweep, tmp_path, name: str):
    """The real rows, changed by the caller, stored and loaded as a report would."""
    path = tmp_path / f"{name}.csv"
    rows.to_csv(path, index=False)
    return load(path, sweep)


def _key(cells: list[str], header: list[str]) -> tuple:
    """(index, selectivity or NaN, workload, cache) of a table row."""
    sel = cells[header.index("selectivity (fraction of rows)")]
    return (
        cells[header.index("index type")],
        float("nan") if sel == "—" else float(sel),
        cells[header.index("workload")],
        cells[header.index("cache")],
    )


def _row_medians(rows: pd.DataFrame, column: str, how: str = "median") -> dict:
    """Per point straight from the CSV rows, keyed with None where a parameter is missing."""
    keys = rows[POINT].astype(object).where(rows[POINT].notna(), None)
    key = pd.Series(list(keys.itertuples(index=False, name=None)), index=rows.index)
    groups = rows.groupby(key)[column]
    return dict(getattr(groups, how)())


def _lookup(medians: dict, key: tuple) -> float:
    index, sel, workload, cache = key
    return medians[(index, None if sel != sel else sel, workload, cache)]


# -- access paths --------------------------------------------------------------------------
def test_points_whose_plan_differs_from_the_index_knob_are_listed_at_the_top(engine):
    data, rows, _, _ = engine
    top = callouts.checks_html(data)
    assert top.startswith('<div class="tl-warn">')
    assert "did not run the access path their index knob built</b> (access: optimizer)" in top
    listed = re.findall(r"<li>(.*?)</li>", top.split("</ul>")[0])
    assert listed == [
        "index type = nonclustered, selectivity (fraction of rows) = 0.9, workload = range, "
        f"cache = {cache}: ran <code>scan</code>, the knob built "
        "<code>index:accounts_nonclustered</code>"
        for cache in ("cold", "warm")
    ]
    assert "access: forced</code> pins the plan" in top


def test_the_points_table_shows_each_points_plan_and_marks_the_mismatches(engine):
    data, rows, _, _ = engine
    header, *body = tables_of(tables.summary_html(data))["summary"]
    at = header.index("access path")
    plans = _row_medians(rows, "access_path", "first")
    assert len(body) == 12
    for cells in body:
        index, sel, _, _ = key = _key(cells, header)
        plan = _lookup(plans, key)
        if index == "nonclustered" and sel == 0.9:
            assert plan == "scan"
            built = "index:accounts_nonclustered"
            assert cells[at] == f"{checks.MISMATCH_MARK} scan (the knob built {built})"
        else:
            assert cells[at] == plan
            assert checks.MISMATCH_MARK not in cells[at]


def test_figures_ring_exactly_the_medians_of_the_mismatched_points(engine):
    data, rows, _, _ = engine
    fig = sweep_figures.knob_figure(data, "wl_selectivity")
    wrong = rows[~rows["access_matches"]]
    assert set(wrong["wl_selectivity"]) == {0.9}
    want = sorted(wrong.groupby("cache_requested")["elapsed_s"].median())
    ax = fig.axes[0]
    (ring,) = [line for line in ax.get_lines() if line.get_gid() == "mismatch"]
    assert sorted(ring.get_ydata()) == pytest.approx(want)
    # Each ring sits exactly on a drawn median (lines are dodged sideways around x = 0.9),
    # and only on the medians of the non-clustered index's range points.
    on = {
        gid
        for gid, (xs, ys) in metric_panel.plotted_medians(ax).items()
        for x, y in zip(xs, ys)
        if any(x == rx and y == ry for rx, ry in zip(ring.get_xdata(), ring.get_ydata()))
    }
    assert on == {f"median|nonclustered · range · {cache}|" for cache in ("cold", "warm")}
    assert ring.get_label() == metric_panel.MISMATCH_LABEL
    assert metric_panel.MISMATCH_LABEL in [t.get_text() for t in fig.legends[0].get_texts()]
    caption = figures_section.figure_caption(data)
    assert "the plan differed from what the index knob built" in caption


def test_when_every_plan_matches_one_line_says_so(engine, tmp_path):
    data, rows, _, sweep = engine
    matching = _variant(rows[rows["access_matches"]], sweep, tmp_path, "matching")
    assert callouts.access_note(matching) == (
        '<div class="tl-note">Every point ran the access path its index knob built '
        "(access: optimizer).</div>"
    )
    fig = sweep_figures.knob_figure(matching, "knob_index")
    assert not [line for line in fig.axes[0].get_lines() if line.get_gid() == "mismatch"]
    assert "index knob" not in figures_section.figure_caption(matching)


def test_rows_without_a_recorded_plan_are_named_not_guessed(engine, tmp_path):
    data, rows, _, sweep = engine
    older = rows.astype({"access_matches": object})
    point = older["workload"].eq("point")
    older.loc[point, ["access_path", "access_expected", "access_matches"]] = np.nan
    older = older[older["access_matches"].ne(False)]
    text = callouts.access_note(_variant(older, sweep, tmp_path, "mixed"))
    assert "Every point whose plan was recorded ran the access path" in text
    assert "plans were not recorded for 4 point(s)" in text
    assert checks.as_bool(pd.Series([True, "false", "True", np.nan, "0"])).tolist() == [
        True,
        False,
        True,
        None,
        False,
    ]


# -- engine time and client time ------------------------------------------------------------
def test_engine_time_table_gives_the_medians_of_the_rows(engine):
    data, rows, _, _ = engine
    header, *body = tables_of(tables.engine_time_html(data))["engine-time"]
    engine_s = _row_medians(rows, "engine_elapsed_s")
    share = _row_medians(rows, "client_share")
    assert len(body) == 12
    for cells in body:
        key = _key(cells, header)
        at = header.index("engine time (s): median")
        assert number(cells[at]) == pytest.approx(_lookup(engine_s, key), rel=5e-4)
        pct = cells[header.index("client share: median")].split(" %")[0]
        assert float(pct) / 100 == pytest.approx(_lookup(share, key), abs=6e-4)
        assert cells[header.index("rows to the client")] == "all"


def test_a_client_bound_point_is_flagged_and_the_others_are_not(engine, tmp_path):
    data, rows, _, sweep = engine
    changed = rows.copy()
    # One point's engine time cut to a fifth of its response time: 80 % went to the client.
    at = (changed["knob_index"] == "none") & (changed["wl_selectivity"] == 0.01)
    at &= changed["cache_requested"] == "warm"
    changed.loc[at, "engine_elapsed_s"] = changed.loc[at, "elapsed_s"] * 0.2
    changed.loc[at, "client_share"] = 0.8
    bound = _variant(changed, sweep, tmp_path, "bound")
    header, *body = tables_of(tables.summary_html(bound))["summary"]
    col = header.index("client share: median")
    flagged = [_key(c, header) for c in body if c[col].endswith("client-bound")]
    assert (
        len(flagged) == 1
        and flagged[0][:1] == ("none",)
        and flagged[0][2:]
        == (
            "range",
            "warm",
        )
    )
    assert [c[col] for c in body if c[col].endswith("client-bound")] == ["80.0 % client-bound"]
    note = callouts.client_note(bound)
    assert note.startswith('<div class="tl-warn"><b>Client-bound:</b>')
    assert note.count("<li>") == 1
    assert "cache = warm: client share 80.0 %, rows to the client: all" in note
    assert "<code>fetch: count</code>" in note
    # The real rows: SQLite's own time is most of the response time, no point is flagged.
    assert "client-bound" not in "".join(
        r[col] for r in tables_of(tables.summary_html(data))["summary"][1:]
    )
    assert callouts.client_note(data).startswith('<div class="tl-note">At every point')


def test_client_bound_points_that_fetch_a_count_are_told_why(engine, tmp_path):
    data, rows, _, sweep = engine
    changed = rows[rows["workload"] == "point"].copy()
    changed["wl_fetch"] = "count"
    changed["client_share"] = 0.7
    note = callouts.client_note(_variant(changed, sweep, tmp_path, "count"))
    assert note.count("<li>") == 4
    assert "already fetch only a count" in note and "fetch: count</code> in the" not in note


def test_an_engine_without_its_own_time_is_named(engine, tmp_path):
    data, rows, _, sweep = engine
    changed = rows.copy()
    changed["engine_elapsed_s"] = np.nan
    changed["client_share"] = np.nan
    none = _variant(changed, sweep, tmp_path, "no-engine-time")
    page = times_section.engine_time_html(none)
    assert "sqlite does not expose its own time for the timed statements" in page
    assert "data:image/png" not in page
    assert callouts.client_note(none) is None
    assert "client share: median" not in tables_of(tables.summary_html(none))["summary"][0]


def test_engine_time_figure_draws_both_clocks_and_the_share(engine):
    data, rows, _, _ = engine
    fig = sweep_figures.engine_time_figure(data, "wl_selectivity")
    left, right = (ax for ax in fig.axes if ax.get_visible())
    drawn = metric_panel.plotted_medians(left)
    clocks = {gid.split("|")[2] for gid in drawn}
    assert clocks == set(sweep_figures.CLOCKS.values())
    ranged = rows[rows["workload"] == "range"]
    for column, name in sweep_figures.CLOCKS.items():
        got = sorted(v for gid, (_, ys) in drawn.items() if gid.endswith(name) for v in ys)
        want = sorted(ranged.groupby(POINT)[column].median())
        assert got == pytest.approx(want)
    assert right.get_ylim() == pytest.approx((-0.03, 1.03))


# -- per query -----------------------------------------------------------------------------
def test_first_query_of_cold_repetitions_is_set_apart_from_the_rest(engine):
    data, rows, _, _ = engine
    header, *body = tables_of(tables.first_query_html(data))["first-query"]
    assert "cache" not in header  # cold only
    cold = rows[rows["cache_requested"] == "cold"]
    assert len(body) == cold.groupby(POINT, dropna=False).ngroups == 6
    first = _row_medians(cold, "q_first_s")
    rest = _row_medians(cold, "q_rest_median_s")
    each, first_read = _row_medians(cold, "q_p50_s"), _row_medians(cold, "q_first_read_bytes")
    for cells in body:
        sel = cells[header.index("selectivity (fraction of rows)")]
        key = (cells[0], float("nan") if sel == "—" else float(sel), cells[2], "cold")
        f = number(cells[header.index("first query (ms): median")])
        r = number(cells[header.index("later queries (ms): median")])
        assert f == pytest.approx(_lookup(first, key) * 1e3, rel=5e-4)
        assert r == pytest.approx(_lookup(rest, key) * 1e3, rel=5e-4)
        assert number(cells[header.index("first / later")]) == pytest.approx(f / r, rel=2e-3)
        # the time of one cold query, and what the first and the later ones read
        per_query = number(cells[header.index("per query (ms): median")])
        assert per_query == pytest.approx(_lookup(each, key) * 1e3, rel=5e-4)
        read = number(cells[header.index("first query, read from the device (MB): median")])
        assert read == pytest.approx(_lookup(first_read, key) / 1e6, rel=5e-4)


def test_a_cold_repetition_says_whether_each_query_met_a_cold_cache(engine, tmp_path):
    data, rows, _, sweep = engine
    note = "each of its queries met a cold cache of its own"
    assert note in times_section.per_query_html(data)
    older = rows.drop(columns=["cold_queries", "q_first_read_bytes", "q_rest_median_read_bytes"])
    older.to_csv(tmp_path / "older.csv", index=False)
    text = times_section.per_query_html(load(tmp_path / "older.csv", sweep))
    assert note not in text and "only the first query met a cold cache" in text


def test_lookup_percentiles_per_point_and_cache(engine):
    data, rows, _, _ = engine
    header, *body = tables_of(tables.lookups_html(data))["lookups"]
    assert header[:3] == ["index type", "cache", "n"]
    lookups = rows[rows["workload"] == "point"]
    medians = lookups.groupby(["knob_index", "cache_requested"])[list(checks.PERCENTILES)].median()
    assert len(body) == 4
    for cells in body:
        for col, name in zip(checks.PERCENTILES, ("p50 (ms)", "p95 (ms)", "p99 (ms)")):
            want = medians.loc[(cells[0], cells[1]), col] * 1e3
            assert number(cells[header.index(name)]) == pytest.approx(want, rel=5e-4)
    fig = sweep_figures.lookup_figure(data)
    styles = {gid.split("|")[2] for gid in metric_panel.plotted_medians(fig.axes[0])}
    assert styles == {"p50", "p95", "p99"}


def test_scans_have_no_per_query_section(tmp_path_factory):
    csv, sweep = measured("scan", tmp_path_factory)
    assert times_section.per_query_html(load(csv, sweep)) is None


# -- result files from before these columns -------------------------------------------------
def test_an_older_result_file_says_what_was_not_recorded(engine, tmp_path):
    data, rows, _, sweep = engine
    older = rows.drop(columns=[c for c in NEW_COLUMNS if c in rows])
    path = tmp_path / "older.csv"
    older.to_csv(path, index=False)
    old = load(path, sweep)
    assert "Plans were not recorded in these results" in callouts.checks_html(old)
    assert "own time was not recorded in these results" in times_section.engine_time_html(old)
    assert "Per-query times were not recorded" in times_section.per_query_html(old)
    header = tables_of(tables.summary_html(old))["summary"][0]
    assert "access path" not in header and "client share: median" not in header
    page = render(TEMPLATE, report_params(path, sweep), tmp_path / "older.html")
    text = page.read_text(encoding="utf-8")
    assert "Traceback" not in text and "Plans were not recorded" in text


# -- the rendered page ---------------------------------------------------------------------
def _figures_of(data) -> list[bytes]:
    """Every figure of the page, in page order, drawn again from the rows (times at one CPU
    speed where the page's figures are: ``figures_section.figure_rows``)."""
    shown = figures_section.figure_rows(data)
    order = figures_section.figure_order(data)
    figs = [sweep_figures.knob_figure(shown, x) for x in order]
    figs += [sweep_figures.engine_time_figure(shown, x) for x in order]
    figs += [sweep_figures.first_query_figure(data), sweep_figures.lookup_figure(data)]
    io, names = io_section.io_rows(data)
    figs += [sweep_figures.io_figure(io, x, names) for x in data.dims]
    return [plots.to_png(f) for f in figs if f is not None]


def test_rendered_page_shows_the_new_sections_with_the_figures_of_the_rows(
    engine, tmp_path, tmp_path_factory
):
    data, _, csv, sweep = engine
    path, _ = rendered("engine", tmp_path_factory)
    html = path.read_text(encoding="utf-8")
    body = html.split("<body", 1)[1]
    assert body.index("did not run the access path") < body.index("What was measured")
    for heading in ("Engine time and client time", "Per query", "Lookup time percentiles"):
        assert heading in body
    shown = [base64.b64decode(s) for s in re.findall(r'src="data:image/png;base64,([^"]+)"', html)]
    assert shown == _figures_of(data)
    again = render(TEMPLATE, report_params(csv, sweep), tmp_path / "again.html")
    assert again.read_text(encoding="utf-8") == html
