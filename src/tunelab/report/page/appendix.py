"""The report's appendix: every stored row, and the provenance of the page (files and
their hashes, engine, hosts, versions, cache states achieved)."""

from __future__ import annotations

import html
import platform
from collections.abc import Iterable

import pandas as pd

from tunelab.analysis import stats
from tunelab.report import checks, tables
from tunelab.report.data import ReportData, sha256
from tunelab.report.fragments import esc, unique
from tunelab.report.labels import fmt, fmt_percent, label


def raw_html(data: ReportData) -> str:
    """Every stored row: the columns whose value is the same in every row once, the others
    as a table, each value as stored (a page stays small enough to open at once)."""
    frame = data.results
    shown = frame.map(lambda v: "" if pd.isna(v) else str(v))
    same = [c for c in shown if shown[c].nunique() <= 1]
    varied = shown.drop(columns=same)
    common = "; ".join(f"{c} {shown[c].iloc[0] if len(shown) else ''}" for c in same)
    return (
        f"<details class='tl-raw-rows'><summary>All {len(frame)} rows, {frame.shape[1]} columns "
        f"(as stored in <code>{esc(data.results_csv)}</code>)</summary>"
        f"<p class='tl-muted'>The same in every row: {esc(common)}.</p>"
        f"<div class='tl-scroll'>{tables.raw_html(varied)}</div></details>"
    )


def host_lines(frame: pd.DataFrame) -> list[str]:
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
    seeds = unique(frame, "seed") or [str((data.sweep.get("dataset") or {}).get("seed", "—"))]
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
        ("engine version", _list(unique(frame, "engine_version"))),
        ("host", _list(host_lines(frame))),
        *_cluster_rows(frame),
        ("tunelab version", _list(unique(frame, "tunelab_version"))),
        ("git commit", _list(unique(frame, "git_commit"))),
        ("dataset rows", _list(unique(frame, "dataset_rows"))),
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
