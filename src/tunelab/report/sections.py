"""The report's sections as HTML strings; the notebook template only calls these.

Everything shown is derived from the stored rows, the sweep file and (optionally) the
calibration and simulator files, so rendering again gives the same page.
"""

from __future__ import annotations

import dataclasses
import html
import json
import platform
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tunelab.cache import WARM_BY_PREVIOUS
from tunelab.report import checks, marks, plots, stats, tables
from tunelab.report.data import ReportData, effective_knobs, sha256
from tunelab.report.labels import (
    MB_DECIMAL,
    fmt,
    fmt_bytes,
    fmt_percent,
    ibm_mb_label,
    label,
    unit_text,
)
from tunelab.units import parse_size

SUMMARY_ID = "tunelab-summary"  # the JSON block the index page reads


def show(fragment: str | None) -> None:
    """Display an HTML fragment in the notebook (nothing for None)."""
    if fragment:
        from IPython.display import HTML, display

        display(HTML(fragment))


def esc(value: Any) -> str:
    return html.escape(fmt(value) if not isinstance(value, str) else value)


def note(text: str, kind: str = "note") -> str:
    """A call-out box; ``kind`` is note or warn. ``text`` is HTML."""
    return f'<div class="tl-{kind}">{text}</div>'


# -- what the index needs -----------------------------------------------------------------
def reps_per_point(data: ReportData) -> pd.Series:
    frame = data.results
    by = ["point_id"] if "point_id" in frame else data.point_columns
    if not by:
        return pd.Series([len(frame)])
    return frame.groupby(by, dropna=False).size()


def summary(data: ReportData, title: str = "") -> dict[str, Any]:
    frame = data.results
    reps = reps_per_point(data)
    started = sorted(frame["started_at"].dropna().astype(str)) if "started_at" in frame else []
    cache = sorted(frame["cache_requested"].dropna().astype(str).unique()) if (
        "cache_requested" in frame
    ) else []  # fmt: skip
    return {
        "sweep": data.name,
        "title": title or data.name,
        "description": str(data.sweep.get("description", "") or "").strip(),
        "engine": data.engine,
        "engine_versions": _unique(frame, "engine_version"),
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


def _unique(frame: pd.DataFrame, col: str) -> list[str]:
    if col not in frame:
        return []
    return sorted({str(v) for v in frame[col].dropna()})


def header_html(data: ReportData, title: str = "") -> str:
    s = summary(data, title)
    reps = str(s["reps_min"]) if s["reps_min"] == s["reps_max"] else (
        f"{s['reps_min']}–{s['reps_max']}"
    )  # fmt: skip
    engine = data.engine + (f" {', '.join(s['engine_versions'])}" if s["engine_versions"] else "")
    facts = [
        f"<b>{html.escape(engine)}</b>",
        f"{s['points']} points × {reps} repetitions ({s['rows']} rows)",
    ]
    if s["cache"]:
        facts.append("cache: " + " & ".join(s["cache"]))
    if s["first_started"]:
        facts.append(f"measured {html.escape(s['first_started'][:10])}")
    meta = json.dumps(s, sort_keys=True).replace("</", "<\\/")
    return (
        f'<header class="tl-header"><h1>{html.escape(s["title"])}</h1>'
        f'<p class="tl-facts">{" · ".join(facts)}</p></header>'
        f'<script type="application/json" id="{SUMMARY_ID}">{meta}</script>'
    )


# -- does the time measure the engine ----------------------------------------------------------
def _records(data: ReportData, points: pd.DataFrame) -> list[dict]:
    return tables.sort_points(points, data.point_columns, data.orders).to_dict("records")


def _points_list(data: ReportData, points: pd.DataFrame, detail) -> str:
    items = "".join(
        f"<li>{html.escape(checks.point_name(data, r))}: {detail(r)}</li>"
        for r in _records(data, points)
    )
    return f"<ul>{items}</ul>"


def access_note(data: ReportData) -> str:
    """Did every point run the access path its index knob built? One line when it did."""
    frame = data.results
    if not checks.plans_recorded(frame):
        return note(
            "Plans were not recorded in these results (they predate plan capture): whether "
            "each point ran the access path its index knob built is unknown."
        )
    modes = checks.access_modes(frame)
    mode = f" (access: {html.escape(' | '.join(modes))})" if modes else ""
    bad = checks.mismatched_points(data)
    if not bad.empty:
        mark = checks.MISMATCH_MARK
        listed = _points_list(
            data,
            bad,
            lambda r: (
                f"ran <code>{esc(r['access_path'])}</code>, the knob built "
                f"<code>{esc(r['access_expected'])}</code>"
            ),
        )
        text = (
            f"<b>{mark} These points did not run the access path their index knob built"
            f"</b>{mode}:{listed}Their times measure the plan the engine chose, not the index "
            f"type they are shown at; the figures mark them with {mark}."
        )
        if "optimizer" in modes:
            text += (
                " With <code>access: optimizer</code> the engine's optimizer picks the plan; "
                "<code>access: forced</code> pins the plan the knob built (a point whose plan "
                "still differs then fails instead of measuring something else)."
            )
        return note(text, "warn")
    access = checks.point_access(data)
    unknown = access[access["matches"].map(lambda v: v is None or v != v)]
    if not unknown.empty:
        return note(
            f"Every point whose plan was recorded ran the access path its index knob built"
            f"{mode}; plans were not recorded for {len(unknown)} point(s): "
            + html.escape("; ".join(checks.point_name(data, r) for r in _records(data, unknown)))
            + "."
        )
    return note(f"Every point ran the access path its index knob built{mode}.")


def client_note(data: ReportData) -> str | None:
    """Points whose response time went mostly to the client; None without engine times."""
    if not checks.engine_time_recorded(data.results):
        return None
    bound = checks.client_bound_points(data)
    limit = fmt_percent(checks.CLIENT_BOUND)
    if bound.empty:
        return note(
            f"At every point with an engine time, the engine's own time is at least half of "
            f"the response time (median client share at most {limit})."
        )
    fetch = bound["fetch"].map(lambda v: v if isinstance(v, str) else "")
    listed = _points_list(
        data,
        bound.assign(fetch=fetch),
        lambda r: (
            f"client share {fmt_percent(r['client_share'])}"
            + (f", rows to the client: {esc(r['fetch'])}" if r["fetch"] else "")
        ),
    )
    text = (
        f"<b>Client-bound:</b> at these points more than {limit} of the response time went "
        "to the client, not to the engine — fetching rows and building them in the driver "
        f"and in Python, or preparing and sending statements:{listed}Their response time "
        "says more about the client than about the engine's access path or buffer pool."
    )
    if fetch.str.contains("all").any():
        text += (
            " To time the engine's work, let the engine aggregate: <code>fetch: count</code> "
            "in the workload still reads every row but returns only a count."
        )
    if fetch.eq("count").any():
        text += (
            " Points that already fetch only a count spend their client time per statement "
            "(round trips, preparing and stepping each statement): many short statements, "
            "such as single lookups, are dominated by it."
        )
    return note(text, "warn")


def hosts_note(data: ReportData) -> str | None:
    """A warning when the sweep's rows come from more than one host: its figures and tables
    then set medians of different hosts side by side (None for one host, or none recorded)."""
    frame = data.results
    per_host = checks.points_per_host(frame)
    if len(per_host) < 2:
        return None
    listed = ", ".join(f"{html.escape(h)}: {n} point{'s' if n != 1 else ''}"
                       for h, n in per_host.items())  # fmt: skip
    text = (
        f"<b>Measured on {len(per_host)} hosts</b> ({listed}). The figures and tables set "
        "medians measured on different hosts side by side, so a difference between points "
        "may be a difference between their hosts."
    )
    pooled = checks.points_on_several_hosts(frame)
    if pooled:
        names = "; ".join(html.escape(str(p)) for p in pooled[:12])
        more = f" and {len(pooled) - 12} more" if len(pooled) > 12 else ""
        text += f" These points pool repetitions from several hosts in one median: {names}{more}."
    text += (
        " Measure a sweep on one host; on a cluster, one cluster job per sweep "
        "(<code>workflows/profile/slurm</code>)."
    )
    return note(text, "warn")


def checks_html(data: ReportData) -> str:
    """Call-outs for the top of the page: rows from several hosts, plans against the index
    knob, client-bound points."""
    parts = (hosts_note(data), access_note(data), client_note(data))
    return "".join(n for n in parts if n)


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
    for engine in _unique(frame, "engine"):
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
    for x in data.dims:
        fig = plots.engine_time_figure(data, x)
        if fig is not None:
            name = label(x, data.engine)
            parts.append(f"<h3>Versus {html.escape(name)}</h3>")
            alt = f"engine time and client share vs {name}"
            parts.append(plots.figure_html(fig, alt, caption + axis_notes(data, x)))
    table = tables.engine_time_html(data)
    if table:
        parts.append("<h3>Medians per point</h3>" + table)
    return "".join(parts)


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
        parts.append(
            note(
                "Only the first query of a cold repetition meets a cold cache: it reads the "
                "pages (index root and inner pages, table pages) the later queries of the same "
                "repetition then find in memory. A cold repetition's response time mixes one "
                "cold query with warmer ones; here they are apart. First: median over "
                "repetitions of the first query's time; later: median over repetitions of the "
                "median of the other queries."
            )
        )
        fig = plots.first_query_figure(data)
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
        fig = plots.lookup_figure(data)
        if fig is not None:
            parts.append(plots.figure_html(fig, "lookup time percentiles", caption))
        parts.append(lookups)
    return "".join(parts)


# -- what was measured -------------------------------------------------------------------------
def _inline(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_inline(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={_inline(v)}" for k, v in value.items())
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
    if "repetitions" in sw:
        rows.append(("repetitions asked", esc(sw["repetitions"])))
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


def warnings(data: ReportData) -> list[str]:
    """What the rows show went differently from what the sweep asked."""
    out = []
    frame = data.results
    asked = data.sweep.get("repetitions")
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
                out.append(
                    f"{label(col, data.engine)}: the engine applied other values than asked "
                    f"in {int(differ.sum())} row(s): {html.escape(', '.join(pairs[:6]))}."
                )
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
            "95 % coverage; the intervals shown are [min, max] and the tables give their true "
            "coverage. Six or more repetitions give a real 95 % interval."
        )
    return out


# -- methods ---------------------------------------------------------------------------------
# The steps a cache_method names, in the words of a methods section.
COLD_STEPS = {
    "close": "every connection was closed (SQLite's page cache lives in the connection)",
    "restart": "the server was restarted, with no buffer-pool dump or load",
    "force": "applications were forced off",
    "deactivate": "the database was deactivated, emptying its buffer pools",
    "fadvise": "the data files were evicted from the OS page cache (fsync, then "
    "posix_fadvise DONTNEED per file)",
    "drop_caches": "the kernel's page cache was dropped (drop_caches)",
    "activate": "the database was activated again",
}
FETCH_MODES = {
    "all": "every result row was fetched to the client through the driver's own C path",
    "count": "the engine returned one row of aggregates (COUNT(*) and an aggregate of every "
    "selected column), so it still read every row but none crossed to the client",
}


def _engine_text(frame: pd.DataFrame, engine: str) -> str:
    """The engine as a methods section names it: its version, and the container image it ran
    from (the parenthesis of engine_version) or that it ran embedded in the lab's process."""
    versions = _unique(frame, "engine_version") or [engine or "an unrecorded engine"]
    try:
        from tunelab import engines

        contained = engines.info(engine).needs_container
    except Exception:  # engine drivers are optional; fall back to the version's shape
        contained = engine not in ("", "sqlite")
    out = []
    for v in versions:
        name, _, rest = v.partition(" (")
        if contained and rest.endswith(")"):
            out.append(f"{name}, run from the container image {rest[:-1]}")
        elif contained:
            out.append(f"{v}, in a container (image not recorded)")
        else:
            out.append(f"{v}, embedded in the measuring process (no container)")
    return "; ".join(out)


def _cold_text(frame: pd.DataFrame) -> str:
    rows = frame[frame["cache_requested"].astype(str) == "cold"]
    if rows.empty:
        return ""
    methods = _unique(rows, "cache_method")
    steps = []
    for m in methods:
        words = [COLD_STEPS.get(t, t) for t in m.split("+")]
        steps.append(", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0])
    text = f"Before each of the {len(rows)} cold repetitions, " + (
        "; or ".join(steps) if steps else "the cache was emptied (method not recorded)"
    )
    text += "; then the data files' residency in the OS page cache was checked (mincore)."
    if "cache_achieved" in rows:
        cold = int((rows["cache_achieved"].astype(str) == "cold").sum())
        text += f" {cold} of {len(rows)} reached a cold cache"
        if cold < len(rows):
            text += f" ({len(rows) - cold} only partially)"
        res = pd.to_numeric(rows.get("resident_fraction", pd.Series()), errors="coerce").dropna()
        if len(res):
            text += (
                f"; resident share of the data files after eviction: median "
                f"{fmt_percent(float(res.median()))}, at most {fmt_percent(float(res.max()))}"
            )
        text += "."
    return text


def _warm_text(frame: pd.DataFrame) -> str:
    rows = frame[frame["cache_requested"].astype(str) == "warm"]
    if rows.empty:
        return ""
    methods = rows["cache_method"].astype(str) if "cache_method" in rows else pd.Series()
    by_previous = int((methods == WARM_BY_PREVIOUS).sum())
    own = len(rows) - by_previous
    text = (
        f"Before each of {own} of the {len(rows)} warm repetitions the same workload ran once, "
        "untimed, on the same connections"
        if by_previous
        else f"Before each of the {len(rows)} warm repetitions the same workload ran once, "
        "untimed, on the same connections"
    )
    if "workload" in rows and rows["workload"].astype(str).isin(("insert", "update")).any():
        text += " (a write workload, which cannot run twice on the same table, read the whole "
        text += "table instead)"
    if by_previous:
        text += (
            f"; the other {by_previous} followed the repetition before them, which ran the same "
            "read workload on the same connections and the same unchanged table just before: "
            "that run was their warm-up"
        )
    return text + "."


def _access_text(data: ReportData) -> str:
    frame = data.results
    modes = checks.access_modes(frame)
    if not modes:
        return "The access path of the timed statements was not recorded."
    how = []
    if "forced" in modes:
        how.append(
            "each timed statement carried the engine's hint for the access path the index knob "
            "built (access: forced; a plan that still differed would have failed the point)"
        )
    if "optimizer" in modes:
        how.append("the engine's optimizer chose each plan (access: optimizer)")
    text = "Where " + "; where ".join(how) if len(how) > 1 else how[0][:1].upper() + how[0][1:]
    text += ". The plan of every timed statement was captured before timing"
    if checks.plans_recorded(frame):
        bad = checks.mismatched_points(data)
        text += (
            f"; {len(bad)} point(s) ran another plan than the index knob built."
            if len(bad)
            else " and was the one the index knob built at every point."
        )
    return text + ("" if text.endswith(".") else ".")


def _fetch_text(frame: pd.DataFrame) -> str:
    modes = _unique(frame, "wl_fetch")
    said = [
        f"{FETCH_MODES.get(m, m)[:1].upper()}{FETCH_MODES.get(m, m)[1:]} (fetch: {m})"
        for m in modes
    ]
    return "; ".join(said) + "." if said else ""


def _lock_text(frame: pd.DataFrame) -> str:
    """What the rows show of the bench lock: their timed sections, on one monotonic clock."""
    if not {"timed_start_ns", "timed_end_ns"} <= set(frame.columns):
        return (
            "The rows do not record their timed intervals, so whether timed sections "
            "overlapped cannot be checked from them."
        )
    spans = frame[["timed_start_ns", "timed_end_ns"]].apply(pd.to_numeric, errors="coerce")
    # Each host has its own monotonic clock: sections are compared within a host only.
    spans = spans.assign(_host=checks.row_hosts(frame)).dropna()
    if len(spans) == 0:
        return ""
    overlaps = 0
    for _, one in spans.groupby("_host"):
        times = one.sort_values("timed_start_ns")[["timed_start_ns", "timed_end_ns"]].to_numpy()
        ends = np.maximum.accumulate(times[:, 1])
        overlaps += int((times[1:, 0] < ends[:-1]).sum())
    n_hosts = spans["_host"].nunique()
    clock = "CLOCK_MONOTONIC" + (f", compared within each of the {n_hosts} hosts" if (
        n_hosts > 1) else "")  # fmt: skip
    text = (
        "Each measurement held tunelab's host-wide bench lock exclusively, so no other job of "
        f"the lab ran beside it; the {len(spans)} timed sections recorded in the rows "
        f"({clock}) "
    )
    if overlaps:
        return text + f"overlap in {overlaps} case(s): those timings shared the host."
    return text + "do not overlap."


def _calibration_text(data: ReportData, calibration_json: str) -> str:
    frame = data.results
    costs = [
        f"{name} {', '.join(_unique(frame, col))} ms"
        for name, col in (("OVERHEAD", "applied_overhead_ms"), ("TRANSFERRATE",
                          "applied_transferrate_ms"))
        if _unique(frame, col)
    ]  # fmt: skip
    cost = f" The table space's optimizer I/O costs were {' and '.join(costs)}." if costs else ""
    if not calibration_json or not Path(calibration_json).is_file():
        return "No device calibration is part of this report." + cost
    try:
        from tunelab.calibrate import load as load_calibration

        cal = load_calibration(calibration_json)
    except Exception:  # a calibration that does not load is reported in its own section
        return f"Device calibration: {calibration_json} (not readable)." + cost
    mode = "direct I/O" if getattr(cal, "direct_io", False) else "buffered I/O"
    where = getattr(cal, "device", "") or getattr(cal, "filesystem", "")
    text = (
        f"The device was calibrated with fio ({mode}) on {where}: device read rate "
        f"{fmt(cal.device_read_rate_mb_s)} MB/s ({ibm_mb_label(getattr(cal, 'mb_bytes', None))}),"
        f" overhead {fmt(cal.overhead_ms)} ms"
    )
    if getattr(cal, "created_at", ""):
        text += f", measured {cal.created_at}"
    text += "."
    measured_on, hosts = str(getattr(cal, "host", "") or ""), checks.hosts(frame)
    if measured_on and hosts and measured_on not in hosts:
        text += (
            f" The calibration was measured on {measured_on}, not on the host of these rows "
            f"({', '.join(hosts)}): its device limits are another host's."
        )
    return text + cost


def methods_text(data: ReportData, calibration_json: str = "") -> list[str]:
    """The report's method as citable paragraphs (plain text: what ran where, the protocol,
    device and statistics), from the rows' provenance columns."""
    frame = data.results
    reps = reps_per_point(data)
    n = f"{int(reps.min())}" if reps.min() == reps.max() else f"{int(reps.min())}–{int(reps.max())}"
    code = ", ".join(_unique(frame, "tunelab_version")) or "an unrecorded version"
    commit = ", ".join(_unique(frame, "git_commit"))
    hosts, named = _hosts(frame), len(checks.hosts(frame))
    where = (
        f"on {named} hosts: {'; '.join(hosts)}" if named > 1
        else f"on {'host ' if named else 'a host with '}{'; '.join(hosts)}" if hosts
        else "on an unrecorded host"
    )  # fmt: skip
    setup = [
        f"Measured with tunelab {code}" + (f" (commit {commit})" if commit else "")
        + f" on {_engine_text(frame, data.engine)}, {where}."
    ]  # fmt: skip
    jobs, nodes = checks.cluster_jobs(frame)
    if jobs:
        setup.append(
            f"The points ran in SLURM job{'s' if len(jobs) > 1 else ''} {', '.join(jobs)}"
            + (f" on node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}" if nodes else "")
            + "."
        )
    if named > 1:
        setup.append(
            "Points measured on different hosts are compared in this report: a difference "
            "between them may be a difference between the hosts."
        )
    rows_ = ", ".join(fmt(int(v)) for v in _numbers(frame, "dataset_rows"))
    seeds = ", ".join(_unique(frame, "seed"))
    if rows_:
        seed = f" (seed {seeds})" if seeds else ""
        setup.append(f"The data set held {rows_} generated rows{seed}.")
    started = sorted(frame["started_at"].dropna().astype(str)) if "started_at" in frame else []
    when = f", between {started[0]} and {started[-1]}" if started else ""
    protocol = [
        f"Each of the {len(reps)} points was measured {n} times ({len(frame)} repetitions in "
        f"all{when}); only the workload was timed, with a monotonic nanosecond clock, and the "
        "engine's counters were read just before and after it."
    ]
    writes = _unique(frame, "workload")
    writes = [w for w in ("insert", "update") if w in writes]
    if writes:
        built = {"insert": "inserts: an empty table with its index", "update": "updates: the "
                 "table reloaded and indexed"}  # fmt: skip
        protocol.append(
            "Every repetition of a write started from the table built again, untimed ("
            + "; ".join(built[w] for w in writes)
            + ")."
        )
    if "cache_requested" in frame:
        protocol += [t for t in (_cold_text(frame), _warm_text(frame)) if t]
    protocol += [t for t in (_access_text(data), _fetch_text(frame), _lock_text(frame)) if t]
    cov = stats.coverage(int(reps.min()), stats.order_ranks(int(reps.min()))[0])
    analysis = [
        _calibration_text(data, calibration_json),
        "Per point, the report gives the median of the repetitions with a distribution-free "
        f"order-statistic interval for it (coverage {fmt_percent(cov)} with n = "
        f"{int(reps.min())}).",
    ]
    return [" ".join(part) for part in (setup, protocol, analysis)]


def _numbers(frame: pd.DataFrame, col: str) -> list[float]:
    if col not in frame:
        return []
    return sorted(set(pd.to_numeric(frame[col], errors="coerce").dropna()))


def methods_html(data: ReportData, calibration_json: str = "") -> str:
    paragraphs = "".join(
        f'<p class="tl-methods">{html.escape(t)}</p>' for t in methods_text(data, calibration_json)
    )
    return f'<div id="methods">{paragraphs}</div>' + note(
        "Generated from the rows' provenance columns (engine version, host, cache states "
        "achieved, access mode, fetch mode, timed intervals) and the calibration file: it "
        "can be quoted as the method of exactly these measurements."
    )


# -- figures ---------------------------------------------------------------------------------
def figure_caption(data: ReportData) -> str:
    reps = reps_per_point(data)
    cov = stats.coverage(int(reps.min()), stats.order_ranks(int(reps.min()))[0])
    text = (
        "Line or marker: median over repetitions; band or bar: order-statistic interval "
        f"for the median (coverage {fmt_percent(cov)} with n = {int(reps.min())}); "
        "dots: every repetition (jittered sideways)."
    )
    if checks.row_mismatch(data.results).any():
        text += (
            f" {checks.MISMATCH_MARK}: the plan differed from what the index knob built "
            "(see the warning at the top)."
        )
    return text


def figures_html(data: ReportData) -> str:
    """One figure per swept dimension: response time and throughput."""
    if not data.dims:
        return note("Nothing varies in this sweep: see the summary table.")
    parts = []
    caption = html.escape(figure_caption(data))
    if len(data.dims) > 2:  # with one or two, the per-dimension figures say it all
        fig = plots.overview_figure(data, "elapsed_s")
        notes = "".join(axis_notes(data, x, crossover=True) for x in data.dims)
        parts.append("<h3>At a glance: response time versus every swept dimension</h3>")
        parts.append(
            plots.figure_html(fig, "response time versus each swept dimension", caption + notes)
        )
    for x in data.dims:
        name = label(x, data.engine)
        parts.append(f"<h3>{html.escape(name[:1].upper() + name[1:])}</h3>")
        fig = plots.knob_figure(data, x)
        notes = axis_notes(data, x, crossover=True)
        parts.append(
            plots.figure_html(fig, f"response time and throughput versus {name}", caption + notes)
        )
    return "".join(parts)


def lock_caption() -> str:
    return (
        "Marker: the ratio of the median throughput (rows per second) with row locks to the "
        "median throughput with a table lock, per workload and number of client threads; "
        f"bar: {stats.LEVEL:.0%} percentile bootstrap interval for the ratio "
        f"({stats.DEFAULT_RESAMPLES:,} resamples of each side's repetitions); dashed line: "
        "1, the same throughput either way. Above 1, row locks gave more rows per second than "
        "a table lock (for instance clients that a table lock makes wait for each other); "
        "below 1, the table lock gave more (for instance a lock per row costing more than it "
        "saves when nothing runs beside it). An interval that contains 1 shows no difference "
        "these repetitions can tell."
    )


def locking_html(data: ReportData) -> str | None:
    """Throughput with row locks over throughput with a table lock, per write workload and
    thread count; None unless the sweep measured both (a lock_granularity of row and table)."""
    ratios = plots.lock_ratios(data)
    if ratios is None:
        return None
    keys = plots.ratio_keys(ratios)
    fig = plots.lock_figure(data, ratios)
    caption = html.escape(lock_caption())
    shown = ratios[keys].map(fmt).rename(columns=lambda c: label(c, data.engine))
    shown["throughput, row locks (rows/s): median"] = ratios["row_median"].map(fmt)
    shown["throughput, table lock (rows/s): median"] = ratios["table_median"].map(fmt)
    shown["row / table"] = ratios["ratio"].map(lambda v: f"{v:.3f}")
    shown[f"{stats.LEVEL:.0%} interval"] = [
        f"[{lo:.3f}, {hi:.3f}]" for lo, hi in zip(ratios["low"], ratios["high"], strict=True)
    ]
    shown["p (Mann–Whitney U)"] = ratios["p"].map(lambda v: f"{v:.3g}")
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
    return "".join(" " + html.escape(t) for t in out)


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


def io_html(data: ReportData) -> str:
    parts = [
        note(
            "A hit ratio is the share of page requests the pool served; it says nothing about "
            "how many reads reached the device or how fast they came. It is shown here only "
            "beside the physical reads and their rate per second."
        )
    ]
    frame = data.results
    if "hit_ratio_sys" in frame:
        parts.append(
            note(
                "Application hit ratio: 1 − (physical − prefetch reads) / logical reads; system "
                "hit ratio: 1 − physical / logical reads, counting the pages prefetch read too. "
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
        parts.append(note("The engine gave no physical-read counters for these rows.", "warn"))
    caption = html.escape(figure_caption(data))
    for x in data.dims:
        fig = plots.io_figure(data, x)
        if fig is not None:
            name = label(x, data.engine)
            parts.append(f"<h3>I/O versus {html.escape(name)}</h3>")
            parts.append(
                plots.figure_html(
                    fig, f"physical reads and hit ratios vs {name}", caption + axis_notes(data, x)
                )
            )
    table = tables.io_html(data)
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
        from tunelab.calibrate.report import achieved_vs_device
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
    with_device = dataclasses.replace(data, results=rows)
    if not pd.to_numeric(rows["device_fraction"], errors="coerce").notna().any():
        parts.append(note("No workload of this sweep has a device limit to compare with."))
        return "".join(parts)
    mb = html.escape(ibm_mb_label(getattr(cal, "mb_bytes", None)))
    parts.append(
        note(
            "Achieved MB/s is the data the workload had to read (or wrote) per second of "
            "response time. Above 100 % of the device's rate, the pages came from memory "
            "(the engine's pool or the OS cache), not from the device. MB/s here are the "
            f"calibration's ({mb}, the MB of DB2's TRANSFERRATE formula); the rows' own "
            f"rates (read rate, data rate) use {MB_DECIMAL}."
        )
    )
    caption = html.escape(figure_caption(data))
    fig = plots.device_figure(with_device)
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
        unit = html.escape(ibm_mb_label(getattr(cal, "mb_bytes", None)))
        bits.append(f"device read rate {html.escape(fmt(rate))} MB/s ({unit})")
    if getattr(cal, "created_at", ""):
        quick = ", quick plan" if getattr(cal, "quick", False) else ""
        bits.append(f"measured {html.escape(str(cal.created_at))}{quick}")
    bits.append(f"sha256 <code>{sha256(path)[:16]}</code>")
    return "; ".join(bits) + "."


def _measured_reads(rows: pd.DataFrame) -> pd.DataFrame:
    """Physical reads per pool size of the cold runs: the simulator starts from an empty pool."""
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


# -- raw rows and provenance ------------------------------------------------------------------
def raw_html(data: ReportData) -> str:
    frame = data.results
    return (
        f"<details class='tl-raw-rows'><summary>All {len(frame)} rows, {frame.shape[1]} columns "
        f"(as stored in <code>{esc(data.results_csv)}</code>)</summary>"
        f"<div class='tl-scroll'>{tables.raw_html(frame)}</div></details>"
    )


def _hosts(frame: pd.DataFrame) -> list[str]:
    """One line per host (its name first, where recorded) and hardware of the rows."""
    cols = [
        c
        for c in ("host_cpu", "host_cores", "host_mem_gib", "host_kernel", "host_fs")
        if c in frame
    ]
    if not cols:
        return []
    named = checks.HOST_COLUMN in frame
    if named:
        frame = frame.assign(**{checks.HOST_COLUMN: checks.row_hosts(frame)})
        cols = [checks.HOST_COLUMN, *cols]
    out = []
    for row in frame[cols].drop_duplicates().itertuples(index=False):
        d = dict(zip(cols, row, strict=True))
        bits = [str(d.get("host_cpu", ""))]
        if "host_cores" in d:
            bits.append(f"{fmt(d['host_cores'])} cores")
        if "host_mem_gib" in d:
            bits.append(f"{fmt(d['host_mem_gib'])} GiB")
        if "host_kernel" in d:
            bits.append(f"Linux {d['host_kernel']}" if d["host_kernel"] else "")
        if "host_fs" in d:
            bits.append(f"{d['host_fs']} file system")
        text = ", ".join(b for b in bits if b and b != "nan")
        name = d.get(checks.HOST_COLUMN, "")
        out.append(f"{name} ({text})" if name else text)
    return sorted(out)


def _list(values: Iterable[str]) -> str:
    values = [html.escape(v) for v in values]
    return "<br>".join(values) if values else "—"


def cache_states_html(frame: pd.DataFrame) -> str:
    if "cache_requested" not in frame:
        return "—"
    cols = [c for c in ("cache_requested", "cache_achieved", "cache_method") if c in frame]
    g = frame.groupby(cols, dropna=False)
    t = g.size().rename("rows").reset_index()
    if "resident_fraction" in frame:
        res = g["resident_fraction"].median().reset_index(drop=True)
        t["median resident fraction"] = res.map(fmt_percent)
    t = t.rename(columns={c: label(c) for c in cols})
    return tables.html_table(t.map(lambda v: fmt(v) if not isinstance(v, str) else v), "cache")


def provenance_html(data: ReportData) -> str:
    frame = data.results
    seeds = _unique(frame, "seed") or [str((data.sweep.get("dataset") or {}).get("seed", "—"))]
    rows = [
        (
            "sweep file",
            f"<code>{esc(data.sweep_file)}</code><br>sha256 <code>{sha256(data.sweep_file)}</code>",
        ),
        (
            "results file",
            f"<code>{esc(data.results_csv)}</code> ({len(frame)} rows)<br>"
            f"sha256 <code>{sha256(data.results_csv)}</code>",
        ),
        ("engine", _list(sorted(set(frame["engine"].astype(str)))) if "engine" in frame else "—"),
        ("engine version", _list(_unique(frame, "engine_version"))),
        ("host", _list(_hosts(frame))),
        *_cluster_rows(frame),
        ("tunelab version", _list(_unique(frame, "tunelab_version"))),
        ("git commit", _list(_unique(frame, "git_commit"))),
        ("dataset rows", _list(_unique(frame, "dataset_rows"))),
        ("seeds", _list(seeds)),
    ]
    if "started_at" in frame:
        started = sorted(frame["started_at"].dropna().astype(str))
        if started:
            rows.append(("measured between", html.escape(f"{started[0]} and {started[-1]}")))
    if "engine_starts" in frame:
        # A row holds the starts its point had needed so far: the point's last row counts.
        per_point = pd.to_numeric(frame["engine_starts"]).groupby(frame["point_id"]).max()
        rows.append(("engine starts (whole sweep)", esc(int(per_point.sum()))))
    rows.append(("cache states achieved", cache_states_html(frame)))
    rows.append(("statistics", html.escape(stats.METHOD)))
    rows.append(("rendered with", html.escape(_versions())))
    return tables.key_value(rows, "provenance")


def _cluster_rows(frame: pd.DataFrame) -> list[tuple[str, str]]:
    jobs, nodes = checks.cluster_jobs(frame)
    if not jobs:
        return []
    return [("SLURM jobs", _list(jobs)), ("SLURM nodes", _list(nodes))]


def _versions() -> str:
    import matplotlib
    import numpy
    import scipy
    import seaborn

    return (
        f"Python {platform.python_version()}, pandas {pd.__version__}, numpy {numpy.__version__}, "
        f"scipy {scipy.__version__}, matplotlib {matplotlib.__version__}, "
        f"seaborn {seaborn.__version__}"
    )
