"""The page's header, and the summary of the sweep that the index page reads from it."""

from __future__ import annotations

import html
from typing import Any

from tunelab.report import checks
from tunelab.report.data import ReportData, sha256
from tunelab.report.fragments import reps_per_point, script_json, unique
from tunelab.report.labels import label

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
