"""The report page's sections as HTML strings: header, what was measured, figures, summary,
engine time, per query, I/O, device limits and the simulator. The notebook template calls
these, and the call-outs (``callouts``), the Methods (``methods``) and the appendix
(``appendix``) beside them.

Everything shown is derived from the stored rows, the sweep file and (optionally) the
calibration and simulator files, so rendering again gives the same page.
"""

from __future__ import annotations

import dataclasses
import html
import json
from pathlib import Path
from typing import Any

import pandas as pd

from tunelab.analysis import figures, hostspeed, stats
from tunelab.analysis.claims import css_class, word_of
from tunelab.host.units import parse_size
from tunelab.report import (
    checks,
    contexts,
    evidence,
    locking,
    marks,
    plots,
    reads,
    sources,
    sweep_figures,
    tables,
)
from tunelab.report.data import ReportData, effective_knobs, sha256
from tunelab.report.fragments import esc, note, reps_per_point, script_json, unique
from tunelab.report.labels import (
    MB_TEXT,
    figures_text,
    fmt,
    fmt_bytes,
    fmt_percent,
    fmt_selectivity_percent,
    label,
    page_mb,
    unit_text,
)
from tunelab.store.results import KNOB_PREFIX, WORKLOAD_PREFIX
from tunelab.sweep import claimspec, spec

SUMMARY_ID = "tunelab-summary"  # the JSON block the index page reads


# -- what the index needs -----------------------------------------------------------------
def summary(data: ReportData, title: str = "") -> dict[str, Any]:
    frame = data.results
    reps = reps_per_point(data)
    started = sorted(frame["started_at"].dropna().astype(str)) if "started_at" in frame else []
    cache = (
        sorted(frame["cache_requested"].dropna().astype(str).unique())
        if ("cache_requested" in frame)
        else []
    )
    return {
        "sweep": data.name,
        "title": title or data.name,
        "description": str(data.sweep.get("description", "") or "").strip(),
        "engine": data.engine,
        "engine_versions": unique(frame, "engine_version"),
        "swept": [label(c, data.engine) for c in data.dims],
        "points": int(len(reps)),
        "rows": int(len(frame)),
        "reps_min": int(reps.min()),
        "reps_max": int(reps.max()),
        "cache": cache,
        "first_started": started[0] if started else "",
        "last_started": started[-1] if started else "",
        "hosts": checks.hosts(frame),
        "results_csv": data.results_csv,
        "results_sha256": sha256(data.results_csv),
    }


def header_html(data: ReportData, title: str = "") -> str:
    s = summary(data, title)
    reps = (
        str(s["reps_min"])
        if s["reps_min"] == s["reps_max"]
        else (f"{s['reps_min']}–{s['reps_max']}")
    )
    engine = data.engine + (f" {', '.join(s['engine_versions'])}" if s["engine_versions"] else "")
    facts = [
        f"<b>{html.escape(engine)}</b>",
        f"{s['points']} points × {reps} repetitions ({s['rows']} rows)",
    ]
    if s["cache"]:
        facts.append("cache: " + html.escape(" & ".join(s["cache"])))
    if s["first_started"]:
        facts.append(f"measured {html.escape(s['first_started'][:10])}")
    return (
        f'<header class="tl-header"><h1>{html.escape(s["title"])}</h1>'
        f'<p class="tl-facts">{" · ".join(facts)}</p></header>'
        f'<script type="application/json" id="{SUMMARY_ID}">{script_json(s)}</script>'
    )


# -- does the time measure the engine ----------------------------------------------------------
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


# -- what was measured -------------------------------------------------------------------------
def _inline(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_inline(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{esc(k)}={_inline(v)}" for k, v in value.items())
    return esc(value)


def measured_html(data: ReportData) -> str:
    sw = data.sweep
    parts = []
    if sw.get("description"):
        parts.append(f'<p class="tl-lead">{html.escape(str(sw["description"]).strip())}</p>')
    engine_note = (sw.get("notes") or {}).get(data.engine)
    if engine_note:  # where this engine legitimately differs from the experiment's expectation
        text = html.escape(str(engine_note).strip())
        parts.append(f'<p class="tl-lead"><b>On {esc(data.engine)}:</b> {text}</p>')
    rows: list[tuple[str, str]] = [
        ("sweep", f"{esc(data.name)} <code>{esc(data.sweep_file)}</code>")
    ]
    rows.append(("engine", esc(data.engine)))
    if isinstance(sw.get("dataset"), dict):
        rows.append(("dataset", _inline(sw["dataset"])))
    knobs, fixed = effective_knobs(sw, data.engine)
    for name, values in knobs.items():
        text = _inline(values) + (_as_pages(data, values) if name == "buffer_pool" else "")
        rows.append((f"knob: {label('knob_' + name, data.engine)}", text))
    if fixed:
        pool = _as_pages(data, fixed["buffer_pool"]) if "buffer_pool" in fixed else ""
        rows.append(("fixed", _inline(fixed) + pool))
    for i, wl in enumerate(sw.get("workloads") or [], start=1):
        if isinstance(wl, dict):
            params = {k: v for k, v in wl.items() if k != "type"}
            text = esc(wl.get("type", "?")) + (f" ({_inline(params)})" if params else "")
            rows.append((f"workload {i}", text))
    if "cache" in sw:
        rows.append(("cache", esc(sw["cache"])))
    if (asked := _repetitions_asked(data)) is not None:
        rows.append(("repetitions asked", esc(asked)))
    reps = reps_per_point(data)
    got = f"{len(reps)} points, {fmt(int(reps.min()))}–{fmt(int(reps.max()))} repetitions each"
    rows.append(("measured", got + f", {len(data.results)} rows"))
    parts.append(tables.key_value(rows, "sweep"))
    parts.extend(note(w, "warn") for w in warnings(data))
    return "".join(parts)


def _as_pages(data: ReportData, values: Any) -> str:
    """Pool sizes given in bytes, as the pages the rows carry: " (= 384, 1,024 pages of 16 KiB)"."""
    values = values if isinstance(values, list) else [values]
    sizes = marks.page_sizes(data.results)
    nbytes = [parse_size(v) for v in values]
    if len(sizes) != 1 or any(b is None for b in nbytes):
        return ""
    pages = ", ".join(fmt(max(1, b // sizes[0])) for b in nbytes if b is not None)
    return html.escape(f" (= {pages} pages of {fmt_bytes(sizes[0])}; KiB, MiB: 2¹⁰, 2²⁰ B)")


def _repetitions_asked(data: ReportData) -> Any:
    """The sweep's ``repetitions`` for the report's engine (its override first); None where
    the sweep names none."""
    over = (data.sweep.get("overrides") or {}).get(data.engine) or {}
    if "repetitions" not in data.sweep and "repetitions" not in over:
        return None
    return spec.repetitions_asked(data.sweep)


def warnings(data: ReportData) -> list[str]:
    """What the rows show went differently from what the sweep asked."""
    out = []
    frame = data.results
    asked = _repetitions_asked(data)
    reps = reps_per_point(data)
    if isinstance(asked, int) and int(reps.min()) < asked:
        short = int((reps < asked).sum())
        out.append(f"{short} point(s) have fewer than the {asked} repetitions asked.")
    for col in [c for c in frame if c.startswith("knob_")]:
        applied = "applied_" + col[len("knob_") :]
        if applied in frame:
            a, b = frame[col].astype(str), frame[applied].astype(str)
            differ = frame[col].notna() & frame[applied].notna() & (a != b)
            if differ.any():
                pairs = sorted({f"{x} → {y}" for x, y in zip(a[differ], b[differ], strict=True)})
                said = (
                    f"{label(col, data.engine)}: the engine applied other values than asked "
                    f"in {int(differ.sum())} row(s): {', '.join(pairs[:6])}."
                )
                out.append(html.escape(said))
    if {"cache_requested", "cache_achieved"} <= set(frame.columns):
        off = frame["cache_requested"].astype(str) != frame["cache_achieved"].astype(str)
        if off.any():
            out.append(
                f"{int(off.sum())} of {len(frame)} rows did not achieve the cache state asked "
                "(see provenance: cache states achieved)."
            )
    if reps.min() < 6:
        out.append(
            f"With {int(reps.min())} repetition(s) per point no interval for the median reaches "
            "95 % coverage; the intervals shown are [min, max] and each is labelled with its "
            "true level. Six or more repetitions give an interval of at least 95 %."
        )
    return out


# -- figures ---------------------------------------------------------------------------------
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


def stored_verdicts(path: str | Path) -> list[dict[str, Any]]:
    """The verdicts of a `tunelab check --json` file (one sweep's)."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    for entry in doc.values() if isinstance(doc, dict) else []:
        if isinstance(entry, dict) and isinstance(entry.get("verdicts"), list):
            return entry["verdicts"]
    return []


def claims_html(verdicts: list[dict[str, Any]]) -> str:
    """The sweep's findings as ``tunelab check`` judged them (``Verdict.to_json``): each the
    finding in words, its source's figure beside this engine's, the verdict, the evidence and,
    where it did not reproduce, the likely cause; its explanations beneath it."""
    if not verdicts:
        return note(
            "No finding is stated for this sweep (workflows/findings.yaml) and the "
            "sweep states no claims (`expect:`)."
        )
    items = ""
    for i, v in enumerate(verdicts):
        said = word_of(v)
        # one plain sentence, each side's median the page's figure of it (``evidence``)
        figures = evidence.sentence(v)
        if not figures and figures_text(v):  # a file from before sides were stored
            level = evidence.levels_text(v)
            figures = "; ".join(figures_text(v)) + (f" ({level})" if level else "")
        here = f"here: {figures}" if figures else ""
        source = f"source ({v['source']}): {v['reported']}" if v.get("reported") else ""
        if v.get("source_ratio") is not None:
            source += f" — ratio {float(v['source_ratio']):.3g}"
        if v.get("kind") == "similar" and v.get("margin"):
            here += f"; similar means the equivalence interval within ±{float(v['margin']):.0%}"
        elif v.get("window"):
            lo, hi = v["window"]
            here += f"; window {fmt_selectivity_percent(lo)} to {fmt_selectivity_percent(hi)}"
        explains = v.get("role") == "explains"
        head = (
            f'<span class="tl-explains">↳ why: {esc(str(v.get("claim", "")))}</span>'
            if explains
            else f"<strong>{esc(str(v.get('claim', '')))}</strong>"
        )
        # a finding's reading gives its contexts' counts; an explanation's are shown alone
        counted = [
            contexts.tally(v) if explains else "",
            contexts.rule_text(v),
            *contexts.curves(v),
        ]
        read = ""
        if not explains:  # its explanations follow it (``claims.evaluate_sweep``'s order)
            below = [x for x in verdicts[i + 1 :] if x.get("finding") == v.get("finding")]
            mine = [x for x in below if x.get("role") == "explains"] if v.get("finding") else []
            read = contexts.reading(v, mine)
        lines = [
            x
            for x in (read, source, here if figures else "", *counted, v.get("other_version"))
            if x
        ]
        items += (
            f'<li><span class="tl-verdict {css_class(said)}">{esc(said)}</span>{head}'
            + "".join(f'<div class="tl-evidence">{esc(x)}</div>' for x in lines)
            + f'<details><summary class="tl-evidence">test detail</summary>'
            f'<div class="tl-evidence">{esc(evidence.detail(v))}</div></details></li>'
        )
    return f'<ul class="tl-claims">{items}</ul>'


def summary_html(data: ReportData) -> str:
    text = html.escape("Per point: " + stats.METHOD + ".")
    if checks.plans_recorded(data.results):
        text += (
            " Access path: the plan of the timed statements as the engine reported it "
            f"({checks.MISMATCH_MARK}: not what the index knob built)."
        )
    if checks.engine_time_recorded(data.results):
        text += (
            " Client share: 1 − engine time / response time; client-bound above "
            f"{fmt_percent(checks.CLIENT_BOUND)}."
        )
    return note(text) + tables.summary_html(data)


def prefetch_on(data: ReportData) -> bool:
    frame = data.results
    for knob in ("knob_prefetch_size", "knob_io_concurrency"):
        if knob in frame:
            values = pd.to_numeric(frame[knob], errors="coerce")
            if (values > 0).any() or frame[knob].astype(str).str.lower().eq("automatic").any():
                return True
    if "c_prefetch_reads" in frame:
        return bool((pd.to_numeric(frame["c_prefetch_reads"], errors="coerce") > 0).any())
    return False


def io_rows(data: ReportData) -> tuple[ReportData, dict[str, str]]:
    """The rows the I/O section shows (with the rate of their device bytes) and the words of
    their read counter (``reads.words``)."""
    data = dataclasses.replace(data, results=reads.with_device_rate(data.results))
    return data, reads.words(data.results, data.engine)


def io_html(data: ReportData) -> str:
    """The engine's reads in the words its declaration earns (``reads``), their rates and
    the hit ratios, beside the bytes that reached the device; the page's MB, said once."""
    data, names = io_rows(data)
    frame = data.results
    counted = names["c_physical_reads"].split(" (")[0]
    parts = [
        note(
            "A hit ratio is the share of page requests the pool served; it says nothing about "
            "how many reads reached the device or how fast they came. It is shown here only "
            f"beside the {counted} and their rate per second. "
            + html.escape(reads.counter_text(frame, data.engine))
            + f" Rates are in MB/s of a million bytes ({MB_TEXT}), the one megabyte of this "
            "page."
        )
    ]
    if "hit_ratio_sys" in frame:
        parts.append(
            note(
                f"Application hit ratio: 1 − ({counted} − prefetch reads) / logical reads; "
                f"system hit ratio: 1 − {counted} / logical reads, counting the pages prefetch "
                "read too. "
                "The system ratio goes negative when more pages are read into the pool than "
                "the application asks for, prefetch reading pages it never uses: the axes are "
                "not clipped, and a line marks 0 %."
            )
        )
    if prefetch_on(data) and "hit_ratio_sys" not in frame:
        parts.append(
            note("Prefetch is on but the engine gave no system hit ratio for these rows.", "warn")
        )
    if "c_physical_reads" not in frame and "physical_reads_per_s" not in frame:
        parts.append(note("The engine gave no read counters for these rows.", "warn"))
    caption = html.escape(figure_caption(data))
    for x in figure_order(data):
        if (skipped := not_drawn(data, x)) is not None:
            parts.append(skipped)
            continue
        fig = sweep_figures.io_figure(data, x, names)
        if fig is not None:
            name = label(x, data.engine)
            parts.append(f"<h3>I/O versus {html.escape(name)}</h3>")
            parts.append(
                plots.figure_html(
                    fig, f"{counted} and hit ratios vs {name}", caption + axis_notes(data, x)
                )
            )
    table = tables.io_html(data, names)
    if table:
        parts.append("<h3>Medians per point</h3>" + table)
    return "".join(parts)


# -- optional sections from other helpers ------------------------------------------------
def _helper_output(obj: Any, table_id: str, alt: str) -> str:
    from matplotlib.figure import Figure

    if isinstance(obj, Figure):
        return plots.figure_html(obj, alt)
    if isinstance(obj, tuple):
        return "".join(_helper_output(o, f"{table_id}-{i}", alt) for i, o in enumerate(obj))
    return tables.any_table(obj, table_id)


def device_html(data: ReportData, calibration_json: str) -> str | None:
    """Achieved MB/s as a fraction of the device's measured limits (fio calibration)."""
    if not calibration_json:
        return None
    head = "<h2>Against the device's own limits</h2>"
    try:
        from tunelab.calibrate import load as load_calibration
        from tunelab.report.device import achieved_vs_device
    except ImportError:
        return head + note("The calibration helpers are not installed; section left out.")
    if not Path(calibration_json).is_file():
        return head + note(f"{html.escape(calibration_json)}: calibration file not found.", "warn")
    try:
        cal = load_calibration(calibration_json)
        rows = achieved_vs_device(data.results, cal)
    except Exception as exc:  # a broken helper must not hide the rest of the report
        return head + note(html.escape(f"{calibration_json}: {type(exc).__name__}: {exc}"), "warn")
    parts = [head, note(_calibration_source(cal, calibration_json))]
    if not isinstance(rows, pd.DataFrame) or "device_fraction" not in rows:
        return "".join(parts) + _helper_output(rows, "device", "achieved vs device limits")
    # The calibration's MB/s, in its own MB, in the page's (the Methods say so once).
    for col in ("achieved_mb_s", "device_mb_s"):
        rows[col] = page_mb(1.0, cal.mb_bytes) * pd.to_numeric(rows[col], errors="coerce")
    with_device = dataclasses.replace(data, results=rows)
    if not pd.to_numeric(rows["device_fraction"], errors="coerce").notna().any():
        parts.append(note("No workload of this sweep has a device limit to compare with."))
        return "".join(parts)
    parts.append(
        note(
            "Achieved MB/s is the data the workload had to read (or wrote) per second of "
            "response time. Above 100 % of the device's rate, the pages came from memory "
            "(the engine's pool or the OS cache), not from the device."
        )
    )
    caption = html.escape(figure_caption(data))
    fig = sweep_figures.device_figure(with_device)
    parts.append(plots.figure_html(fig, "achieved MB/s as a fraction of the device", caption))
    parts.append(tables.device_html(with_device))
    return "".join(parts)


def _calibration_source(cal: Any, path: str) -> str:
    where = getattr(cal, "device", "") or getattr(cal, "filesystem", "")
    mode = "direct I/O" if getattr(cal, "direct_io", False) else "buffered I/O"
    text = f"Calibration <code>{html.escape(path)}</code>"
    if getattr(cal, "host", ""):
        text += f" of {html.escape(str(where))} on {html.escape(str(cal.host))} ({mode})"
    bits = [text]
    rate = getattr(cal, "device_read_rate_mb_s", None)
    if rate is not None:
        bits.append(f"device read rate {html.escape(fmt(page_mb(rate, cal.mb_bytes)))} MB/s")
    if getattr(cal, "created_at", ""):
        quick = ", quick plan" if getattr(cal, "quick", False) else ""
        bits.append(f"measured {html.escape(str(cal.created_at))}{quick}")
    bits.append(f"sha256 <code>{sha256(path)[:16]}</code>")
    return "; ".join(bits) + "."


def _measured_reads(rows: pd.DataFrame) -> pd.DataFrame:
    """Reads into the pool per pool size of the cold runs: the simulator starts from an empty
    pool."""
    pool = "applied_buffer_pool" if "applied_buffer_pool" in rows else "knob_buffer_pool"
    if "cache_requested" in rows:
        rows = rows[rows["cache_requested"] == "cold"]
    return pd.DataFrame({"pool_pages": rows[pool], "physical_reads": rows["c_physical_reads"]})


def simulator_html(data: ReportData, bpsim_csv: str) -> str | None:
    """The buffer-pool simulator's predicted curve beside the measured points."""
    if not bpsim_csv:
        return None
    head = "<h2>Simulated versus measured</h2>"
    try:
        from tunelab.bpsim.compare import plot_predicted_vs_measured, predicted_vs_measured
    except ImportError:
        return head + note("The simulator helpers are not installed; section left out.")
    if not Path(bpsim_csv).is_file():
        return head + note(f"{html.escape(bpsim_csv)}: simulator curve not found.", "warn")
    try:
        frame = predicted_vs_measured(pd.read_csv(bpsim_csv), _measured_reads(data.results))
        with plots.style():
            fig, (ax,) = plots._figure(1)
            fig.set_size_inches(plots.PANEL_W * 1.6, plots.PANEL_H * 1.2)
            plot_predicted_vs_measured(frame, ax)
    except Exception as exc:  # a broken helper must not hide the rest of the report
        return head + note(html.escape(f"{bpsim_csv}: {type(exc).__name__}: {exc}"), "warn")
    source = f"Simulated curve: <code>{html.escape(bpsim_csv)}</code>."
    return (
        head
        + note(source)
        + plots.figure_html(fig, "simulated vs measured")
        + tables.any_table(frame, "bpsim")
    )
