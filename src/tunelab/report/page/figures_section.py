"""The figures: one per swept dimension (and all of them at a glance), row locks against a
table lock; and what every figure of the page shares: the rows drawn, the caption, the
dimensions in the order drawn and the one rule that leaves one out, the notes on an axis."""

from __future__ import annotations

import dataclasses
import html

import pandas as pd

from tunelab.analysis import figures, hostspeed, stats
from tunelab.report import checks, marks, plots, sources, tables
from tunelab.report.data import ReportData
from tunelab.report.fragments import note, reps_per_point
from tunelab.report.labels import fmt, fmt_bytes, fmt_percent, label, unit_text
from tunelab.report.page import locking, sweep_figures
from tunelab.store.results import KNOB_PREFIX, WORKLOAD_PREFIX
from tunelab.sweep import claimspec


def figure_rows(data: ReportData) -> ReportData:
    """The report's rows with the values every figure of a point is made from
    (``analysis.figures``: times at one CPU speed where the verdicts compare them so)."""
    return dataclasses.replace(data, results=figures.at_one_speed(data.results))


def figure_caption(data: ReportData) -> str:
    reps = reps_per_point(data)
    n = int(reps.min())
    cov = stats.coverage(n, stats.order_ranks(n)[0])
    fewest = "" if n == int(reps.max()) else ", the fewest of a point"
    text = (
        f"Line or marker: median over repetitions; band or bar: the {fmt_percent(cov)} "
        f"interval for the median (order statistics, n = {n}{fewest}); "
        "dots: every repetition (jittered sideways)."
    )
    if figures.corrected(data.results):
        text += f" Times {hostspeed.NOTE}, as the verdicts compare them."
    if checks.row_mismatch(data.results).any():
        text += (
            f" {checks.MISMATCH_MARK}: the plan differed from what the index knob built "
            "(see the warning at the top)."
        )
    return text


MAX_SERIES = 8  # colours a reader can still tell apart in one panel


def figure_order(data: ReportData) -> list[str]:
    """The swept dimensions, the one the sweep's claims ask along (``along``) first: the
    figure that answers the question leads."""
    claims, _ = claimspec.sweep_claims(data.sweep, data.sweep_file, data.engine)
    along = [
        f"{p}{c['along']}" for c in claims if c.get("along") for p in (KNOB_PREFIX, WORKLOAD_PREFIX)
    ]
    return sorted(data.dims, key=lambda d: (d not in along, data.dims.index(d)))


def not_drawn(data: ReportData, x: str) -> str | None:
    """Why no figure versus ``x`` is drawn (a note), or None: every section follows this one
    rule. The dimension the findings ask along is always drawn; another only when its other
    dimensions make at most MAX_SERIES series, colours a reader can still tell apart."""
    first = figure_order(data)[0]
    series = len(plots.hue_levels(data.results, data.hue_for(x), data.orders)[1])
    if x == first or series <= MAX_SERIES:
        return None
    shown = label(first, data.engine)
    return note(
        f"Not drawn versus {html.escape(label(x, data.engine))}: {series} series would "
        "share one panel, too many to tell apart; the figure against "
        f"{html.escape(shown)} shows the same points, and the table gives each "
        "one."
    )


def figures_html(data: ReportData) -> str:
    """One figure per swept dimension: response time and throughput."""
    if not data.dims:
        return note("Nothing varies in this sweep: see the summary table.")
    parts = []
    caption = html.escape(figure_caption(data))
    data = figure_rows(data)
    if len(data.dims) > 2:  # with one or two, the per-dimension figures say it all
        fig = sweep_figures.overview_figure(data, "elapsed_s")
        notes = "".join(axis_notes(data, x, crossover=True) for x in data.dims)
        parts.append("<h3>At a glance: response time versus every swept dimension</h3>")
        parts.append(
            plots.figure_html(fig, "response time versus each swept dimension", caption + notes)
        )
    first = figure_order(data)
    for x in first:
        name = label(x, data.engine)
        parts.append(f"<h3>{html.escape(name[:1].upper() + name[1:])}</h3>")
        skipped = not_drawn(data, x)
        if skipped:
            parts.append(skipped)
            continue
        fig = sweep_figures.knob_figure(data, x)
        notes = axis_notes(data, x, crossover=True)
        parts.append(
            plots.figure_html(fig, f"response time and throughput versus {name}", caption + notes)
        )
    return "".join(parts)


def lock_caption() -> str:
    return (
        "Marker: the ratio of the median throughput (rows per second) with row locks to the "
        "median throughput with a table lock, per workload and number of client threads; bar: "
        "the ratio's interval, at the level the table gives beside it: a "
        f"{stats.LEVEL:.0%} percentile bootstrap interval "
        f"({stats.DEFAULT_RESAMPLES:,} resamples of each side's repetitions), or, where the rows "
        "record the round each repetition was measured in, the signed-rank interval of the "
        "per-round ratios around their Hodges–Lehmann estimate, so that drift between rounds "
        "cancels out (its exact level: three rounds reach only 75 %); the same comparison as "
        "a claim on these points makes; dashed line: 1, the same throughput either way. "
        "Above 1, row locks gave more rows per second than a table lock (for instance clients "
        "that a table lock makes wait for each other); below 1, the table lock gave more (for "
        "instance a lock per row costing more than it saves when nothing runs beside it). An "
        "interval that contains 1 shows no difference these repetitions can tell."
    )


def locking_html(data: ReportData) -> str | None:
    """Throughput with row locks over throughput with a table lock, per write workload and
    thread count; None unless the sweep measured both (a lock_granularity of row and table)."""
    data = figure_rows(data)
    ratios = locking.lock_ratios(data)
    if ratios is None:
        return None
    keys = locking.ratio_keys(ratios)
    fig = locking.lock_figure(data, ratios)
    caption = html.escape(lock_caption())
    shown = ratios[keys].map(fmt).rename(columns=lambda c: label(c, data.engine))
    shown["throughput, row locks (rows/s): median"] = ratios["row_median"].map(fmt)
    shown["throughput, table lock (rows/s): median"] = ratios["table_median"].map(fmt)
    shown["row / table"] = ratios["ratio"].map(lambda v: f"{v:.3f}")
    shown["interval (its level)"] = [
        f"[{lo:.3f}, {hi:.3f}] ({fmt_percent(level)})"
        for lo, hi, level in zip(ratios["low"], ratios["high"], ratios["level"], strict=True)
    ]
    shown["p"] = ratios["p"].map(lambda v: f"{v:.3g}")
    shown["test"] = ratios["method"]
    shown["repetitions (row, table)"] = [
        f"{r}, {t}" for r, t in zip(ratios["n_row"], ratios["n_table"], strict=True)
    ]
    return (
        "<h2>Row locks versus a table lock</h2>"
        + plots.figure_html(fig, "throughput ratio, row locks / table lock", caption)
        + tables.html_table(shown, "locking")
    )


def crossover_text(data: ReportData, x: str = marks.SELECTIVITY) -> str:
    """Where index and scan cross, per cache state, on the scale the figures draw; ""
    when ``x`` is not a selectivity with an index and a scan."""
    if not marks.crossover_applies(data, x):
        return ""
    log = plots.wants_log(pd.to_numeric(data.results[x], errors="coerce").dropna().unique())
    return marks.crossover_caption(marks.crossovers(data, x, log=log), log=log)


def axis_notes(data: ReportData, x: str, crossover: bool = False) -> str:
    """Caption sentences (HTML) for what a figure marks on its x axis: a buffer pool's size
    in bytes and the table's size; where index and scan cross on a selectivity axis."""
    out = []
    frame = data.results
    if marks.is_pool(x) and pd.api.types.is_numeric_dtype(frame[x]):
        sizes = marks.page_sizes(frame)
        if len(sizes) == 1:
            pages = pd.to_numeric(frame[x], errors="coerce").dropna()
            unit = marks.pool_unit(list(pages), sizes[0])
            out.append(
                f"Top axis: the same pools in {unit_text(unit)}, at the rows' page size of "
                f"{fmt_bytes(sizes[0])} ({fmt(sizes[0])} B)."
            )
        elif sizes:
            listed = ", ".join(fmt_bytes(v) for v in sizes)
            out.append(
                f"Page sizes differ here ({listed}): a pool of n pages holds n × page size "
                "bytes, so no single byte axis is drawn."
            )
        tables_ = marks.table_sizes(frame)
        if tables_:
            pages = list(pd.to_numeric(frame[x], errors="coerce").dropna())
            unit = marks.pool_unit(pages, max(t.page_size for t in tables_))  # as in the figure
            listed = "; ".join(
                t.text(unit) + (f" at {fmt_bytes(t.page_size)} pages" if len(tables_) > 1 else "")
                for t in tables_
            )
            out.append(
                "Dashed line: the table with its indexes as the engine reported it (median of "
                f"the rows' data_bytes): {listed}. A pool to its right can hold all of it."
            )
        else:
            out.append("The rows carry no table size (data_bytes), so the table is not marked.")
    text = crossover_text(data, x) if crossover else ""
    if text:
        out.append(text + " Dash-dotted lines mark it.")
    source = sources.caption(data, x, sweep_figures.PERFORMANCE) if crossover else ""
    if source:
        out.append(source)
    return "".join(" " + html.escape(t) for t in out)
