"""The call-outs at the top of a report: rows from several hosts, plans against the index
knob, client-bound points."""

from __future__ import annotations

import html

import pandas as pd

from tunelab.report import checks, tables
from tunelab.report.data import ReportData
from tunelab.report.fragments import esc, note
from tunelab.report.labels import fmt_percent


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
    listed = ", ".join(
        f"{html.escape(h)}: {n} point{'s' if n != 1 else ''}" for h, n in per_host.items()
    )
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
