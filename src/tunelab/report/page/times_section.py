"""Where the time went: the engine's own time beside the client's clock, and per query (the
first query of a cold repetition apart from the later ones, lookup percentiles)."""

from __future__ import annotations

import html

import pandas as pd

from tunelab.report import checks, plots, tables
from tunelab.report.data import ReportData
from tunelab.report.fragments import note, unique
from tunelab.report.labels import fmt_percent, label
from tunelab.report.page import sweep_figures
from tunelab.report.page.figures_section import (
    axis_notes,
    figure_caption,
    figure_order,
    figure_rows,
    not_drawn,
)


def _engine_time_source(engine: str) -> str:
    """Where an engine's own statement time comes from ("" when it exposes none)."""
    try:
        from tunelab import engines

        return engines.info(engine).engine_time or ""
    except Exception:  # engine drivers are optional; a sentence is not worth failing for
        return ""


def engine_time_html(data: ReportData) -> str:
    head = "<h2>Engine time and client time</h2>"
    frame = data.results
    if "engine_elapsed_s" not in frame:
        return head + note(
            "The engine's own time was not recorded in these results (they predate it): only "
            "the client's clock is shown and the client share is unknown."
        )
    parts = [head]
    explain = (
        "Response time is the client's clock around the timed statements; engine time is the "
        "engine's own time for the same statements. The client share, 1 − engine time / "
        "response time, went to the client: the driver fetching rows, turning them into "
        f"Python objects, round trips. A point is client-bound when its median client share "
        f"exceeds {fmt_percent(checks.CLIENT_BOUND)}."
    )
    sources = []
    for engine in unique(frame, "engine"):
        source = _engine_time_source(engine)
        if source:
            sources.append(f"{html.escape(engine)}: {html.escape(source)}")
    if sources:
        explain += " Engine time, " + "; ".join(sources) + "."
    parts.append(note(explain))
    engines = frame["engine"].astype(str) if "engine" in frame else pd.Series("", frame.index)
    for engine in sorted(set(engines)):
        rows = frame[engines == engine]
        if not checks.engine_time_recorded(rows):
            who = html.escape(engine or data.engine or "The engine")
            parts.append(
                note(
                    f"{who} does not expose its own time for the timed statements: only the "
                    "client's clock is shown for its points, and their client share is unknown.",
                    "warn",
                )
            )
    if not checks.engine_time_recorded(frame):
        return "".join(parts)
    caption = html.escape(figure_caption(data))
    for x in figure_order(data):
        if (skipped := not_drawn(data, x)) is not None:
            parts.append(skipped)
            continue
        fig = sweep_figures.engine_time_figure(figure_rows(data), x)
        if fig is not None:
            name = label(x, data.engine)
            parts.append(f"<h3>Versus {html.escape(name)}</h3>")
            alt = f"engine time and client share vs {name}"
            parts.append(plots.figure_html(fig, alt, caption + axis_notes(data, x)))
    table = tables.engine_time_html(data)
    if table:
        parts.append("<h3>Medians per point</h3>" + table)
    return "".join(parts)


# What a cold repetition's later queries met, by how its rows were measured.
_EACH_COLD = (
    "each of its queries met a cold cache of its own: the cache was emptied before every "
    "query, outside the clock (see the Methods), and the repetition's time is the sum of its "
    "queries' own. The first query and the later ones should then take about as long and read "
    "about as much from the device; here they are apart to show it"
)
_FIRST_COLD = (
    "only the first query met a cold cache (rows measured before each query had one of its "
    "own): it read the pages (index root and inner pages, table pages, and what the kernel "
    "read ahead of them) that the later queries of the same repetition then found in memory, "
    "so the repetition's time mixes one cold query with warmer ones; here they are apart"
)


def _first_query_text(rows: pd.DataFrame) -> str:
    each = int(checks.cold_each_query(rows).sum())
    if each == len(rows):
        text = f"In a cold repetition {_EACH_COLD}."
    elif each == 0:
        text = f"In these cold repetitions {_FIRST_COLD}."
    else:
        text = (
            f"In {each} of these {len(rows)} cold repetitions {_EACH_COLD}; in the other "
            f"{len(rows) - each}, {_FIRST_COLD}."
        )
    return text + (
        " First: median over repetitions of the first query's time; later: median over "
        "repetitions of the median of the other queries; per query: median over repetitions "
        "of the median of all its queries, the time of one cold query where each met a cold "
        "cache."
    )


def per_query_html(data: ReportData) -> str | None:
    """The first query of cold repetitions apart from the rest; lookup percentiles. None
    when every point runs a single statement."""
    head = "<h2>Per query</h2>"
    if checks.multi_query_without_timings(data.results):
        return head + note(
            "Per-query times were not recorded in these results (they predate them): the "
            "response time of a repetition is the sum of its queries, the cold first one "
            "included."
        )
    first, lookups = tables.first_query_html(data), tables.lookups_html(data)
    if first is None and lookups is None:
        return None
    parts = [head]
    caption = html.escape(figure_caption(data))
    if first is not None:
        parts.append("<h3>First query of a cold repetition versus the later ones</h3>")
        parts.append(note(_first_query_text(checks.first_query_rows(data.results))))
        fig = sweep_figures.first_query_figure(data)
        if fig is not None:
            parts.append(plots.figure_html(fig, "first query vs later queries, cold", caption))
        parts.append(first)
    if lookups is not None:
        parts.append("<h3>Lookup time percentiles</h3>")
        parts.append(
            note(
                "Per repetition, the 50th, 95th and 99th percentiles and the maximum of the "
                "single lookups' times; shown: their medians over the repetitions."
            )
        )
        fig = sweep_figures.lookup_figure(data)
        if fig is not None:
            parts.append(plots.figure_html(fig, "lookup time percentiles", caption))
        parts.append(lookups)
    return "".join(parts)
