"""The report's Methods: citable paragraphs of what ran where, the protocol (cold and warm
cache, access path, fetch, bench lock), the device and the statistics, all from the rows'
provenance columns. The words for a cold cache's steps come from the engines and the cache
module, which take those steps."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from tunelab import engines
from tunelab.analysis import figures, hostspeed, stats
from tunelab.engines.base import EngineInfo
from tunelab.host import cache, noise
from tunelab.host.cache import WARM_BY_PREVIOUS
from tunelab.report import checks
from tunelab.report.data import ReportData
from tunelab.report.fragments import note, reps_per_point, unique
from tunelab.report.labels import MB_BYTES, fmt, fmt_percent, page_mb
from tunelab.report.page.appendix import host_lines

FETCH_MODES = {
    "all": "every result row was fetched to the client through the driver's own C path",
    "count": "the engine returned one row of aggregates (COUNT(*) and an aggregate of every "
    "selected column), so it still read every row but none crossed to the client",
}


def _info(engine: str) -> EngineInfo | None:
    """The registry's description of an engine, None for a name it does not know (an engine
    since removed, or several engines' names joined). Engine modules import their drivers
    only when they connect, so this works without the drivers installed."""
    try:
        return engines.info(engine)
    except Exception:  # a sentence of the methods is not worth failing the report for
        return None


def _engine_text(frame: pd.DataFrame, engine: str) -> str:
    """The engine as a methods section names it: its version, and the container image it ran
    from (the parenthesis of engine_version) or that it ran embedded in the lab's process."""
    versions = unique(frame, "engine_version") or [engine or "an unrecorded engine"]
    info = _info(engine)
    # A named engine the registry does not know ran in a container: the registry always
    # knows its embedded engines (their modules need no optional driver).
    contained = info.needs_container if info else bool(engine)
    out = []
    for v in versions:
        # the image is the last parenthesis: a version may carry its own ("(Debian ...)")
        name, _, rest = v.rpartition(" (") if v.endswith(")") else (v, "", "")
        if contained and rest.endswith(")"):
            out.append(f"{name}, run from the container image {rest[:-1]}")
        elif contained:
            out.append(f"{v}, in a container (image not recorded)")
        else:
            out.append(f"{v}, embedded in the measuring process (no container)")
    return "; ".join(out)


def _cold_steps(names: list[str]) -> dict[str, str]:
    """The steps a cache_method names, in the words of a methods section: the OS page cache's
    from the cache module, each engine's own as the engine describes them. A step no engine of
    the rows describes (an engine the registry does not know) keeps its name."""
    steps = dict(cache.EVICT_STEPS)
    for name in names:
        info = _info(name)
        if info:
            steps.update(info.cold_steps)
    return steps


def _cold_text(data: ReportData) -> str:
    frame, engine = data.results, data.engine
    rows = frame[frame["cache_requested"].astype(str) == "cold"]
    if rows.empty:
        return ""
    methods = unique(rows, "cache_method")
    named = _cold_steps(unique(rows, "engine") or [engine])
    steps = []
    for m in methods:
        words = [named.get(t, t) for t in m.split("+")]
        steps.append(", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0])
    text = f"Before {_cold_units(rows)}, " + (
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
    return text + _cold_reads_text(data, engine)


def _cold_units(rows: pd.DataFrame) -> str:
    """What each cold procedure came before: every timed statement of a read measured so
    (``cold_queries`` recorded), each repetition otherwise (a write, timed as one; rows of
    several statements from before, whose later statements met what the first read)."""
    each = checks.cold_each_query(rows)
    col = "queries" if "queries" in rows else "cold_queries"  # a cold read's statements
    queries = pd.to_numeric(rows[col], errors="coerce") if col in rows else each * np.nan
    statements = int(queries[each].sum())
    whole = rows[~each]
    several = int((queries[~each] > 1).sum())
    parts = []
    if statements:
        n = int(each.sum())
        parts.append(
            (
                f"each of the {statements} timed statements"
                if statements > 1
                else "the timed statement"
            )
            + f" of {n} cold repetition{'s' if n != 1 else ''} (each statement "
            "timed on its own: the steps between them stayed outside the clock)"
        )
    if len(whole):
        other = "other " if statements else ""
        parts.append(
            (
                f"each of the {len(whole)} {other}cold repetitions"
                if len(whole) > 1
                else f"the {other}cold repetition"
            )
            + (
                f" ({several} of several statements, measured before each statement had a "
                "cold cache of its own: only their first met it)"
                if several
                else ""
            )
        )
    return "; and before ".join(parts)


def _cold_reads_text(data: ReportData, engine: str) -> str:
    """How a cold read reaches the device on this engine, and what the rows' cold statements
    read from it: the range over points of their median device bytes per statement."""
    info = _info(engine)
    text = f" {info.cold_reads}." if info and info.cold_reads else ""
    read = checks.cold_read_bytes(data)
    if read.empty:
        return text
    first = read["q_first_read_bytes"]
    least, most = read.loc[first.idxmin()], read.loc[first.idxmax()]
    text += (
        " Per point, the median of what a cold repetition's first statement read from the "
        f"device (the rows' q_first_read_bytes) went from {fmt(least['q_first_read_bytes'] / 1e6)}"
        f" MB ({checks.point_name(data, least)}) to {fmt(most['q_first_read_bytes'] / 1e6)} MB "
        f"({checks.point_name(data, most)})"
    )
    size = read["data_bytes"].dropna() / 1e6
    if len(size):
        lo, hi = fmt(float(size.min())), fmt(float(size.max()))
        text += f", of a data file of {lo} MB" if lo == hi else f", of data files of {lo}-{hi} MB"
    return text + "."


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
    modes = unique(frame, "wl_fetch")
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
    clock = "CLOCK_MONOTONIC" + (
        f", compared within each of the {n_hosts} hosts" if (n_hosts > 1) else ""
    )
    text = (
        "Each measurement held tunelab's host-wide bench lock exclusively, so no other job of "
        f"the lab ran beside it; the {len(spans)} timed sections recorded in the rows "
        f"({clock}) "
    )
    if overlaps:
        return text + f"overlap in {overlaps} case(s): those timings shared the host."
    return text + "do not overlap."


def _cpu_set(value: object) -> str:
    """A row's CPU list as written ("" for none); a CSV may have read "0" as 0 or 0.0."""
    if isinstance(value, float):
        return "" if np.isnan(value) else f"{value:g}"
    return str(value)


def _cpus(values: list[str]) -> str:
    return " or ".join(f"CPU{'s' if ',' in v or '-' in v else ''} {v}" for v in values)


# How the measuring process reached a server engine (the rows' client_route)
ROUTE_TEXT = {
    "run network": "the server's own address on the run's network",
    "published port": "its port published on 127.0.0.1 (through Docker's userspace proxy)",
}


def _placement_text(frame: pd.DataFrame) -> str:
    """Where the client and the engine ran, from the rows' cpus_client and cpus_engine, and
    how the client reached the engine (client_route)."""
    if "cpus_client" not in frame:
        return ""
    clients = sorted(set(frame["cpus_client"].map(_cpu_set)) - {""})
    engine = frame["cpus_engine"] if "cpus_engine" in frame else pd.Series([""] * len(frame))
    engine = engine.map(_cpu_set)
    parts = ["the engine inside it"] if (engine == "client").any() else []
    if pinned := sorted(set(engine) - {"client", ""}):
        parts.append(f"the engine's processes on {_cpus(pinned)}")
    if (engine == "").any():
        parts.append("the engine's processes on any CPU")
    where = _cpus(clients) if clients else "CPUs not recorded"
    text = f"The measuring process ran on {where}, " + "; ".join(parts) + "."
    routes = frame["client_route"] if "client_route" in frame else pd.Series(dtype=str)
    if found := [
        ROUTE_TEXT[r] for r in sorted(set(routes.dropna().astype(str))) if r in ROUTE_TEXT
    ]:
        text += f" It reached the server through {' or '.join(found)}."
    return text


def _interference_text(frame: pd.DataFrame) -> str:
    """How noisy the host was: the repetitions marked as measured under interference, and the
    CPU time the hypervisor stole, from the rows' noise columns."""
    if "noise_interfered" not in frame:
        return ""
    marks = frame["noise_interfered"].dropna().astype(str).str.lower()
    if marks.empty:
        return ""
    hit = int(marks.isin(("true", "1", "1.0")).sum())
    text = (
        "What else competed for the CPUs was read from the kernel just before and after each "
        f"timed section: {hit} of {len(marks)} repetitions ({fmt_percent(hit / len(marks))}) "
        "ran under interference (the hypervisor took more than "
        f"{fmt_percent(noise.STEAL_LIMIT)} of the CPUs' time, the client waited for a CPU "
        f"more than {fmt_percent(noise.WAIT_LIMIT)} of the time)"
    )
    steal = pd.to_numeric(frame.get("noise_steal_share", pd.Series()), errors="coerce").dropna()
    if len(steal):
        text += (
            f"; CPU time stolen by the hypervisor: median {fmt_percent(float(steal.median()))}"
            f", at most {fmt_percent(float(steal.max()))}"
        )
    else:
        text += "; the host does not expose stolen CPU time"
    text += "."
    speed = hostspeed.spread(frame)
    if speed is not None:
        text += (
            f" A fixed piece of CPU work timed around each section took {speed[0] * 1e3:.2g} ms "
            f"(median), and its 90th percentile was {speed[1]:.2f} times its 10th: how far the "
            "client CPU's speed moved during the run"
        )
        if hostspeed.applies([frame], "elapsed_s"):
            text += (
                f". The claims compare times {hostspeed.NOTE}: a section's CPU seconds (the "
                "measuring process's, and a server engine's on its own CPUs, each scaled by "
                "the reference timed there) move with the CPU's speed, its other seconds "
                "(waiting for the device or the network) do not; the correction is weighted "
                "by how far each sweep's repetitions follow that prediction (the weight is in "
                "each claim's evidence)"
            )
        moved = correction_moves(frame)
        if moved is not None:
            text += (
                f". Every time this page gives (tables, figures, evidence) is taken so, with "
                f"weight {figures.weight(frame):.2f} here; the points' medians as measured "
                f"differ from them by {fmt_percent(moved[0])} at the median point and "
                f"{fmt_percent(moved[1])} at most (the rows as measured are in the appendix)"
            )
        text += "."
    return text


def correction_moves(frame: pd.DataFrame) -> tuple[float, float] | None:
    """How far the CPU-speed correction moved the points' median response times (median and
    largest share over the points); None where the times are as measured."""
    if "point_id" not in frame or not figures.corrected(frame):
        return None
    shown = figures.at_one_speed(frame)
    raw = pd.to_numeric(frame["elapsed_s"], errors="coerce").groupby(frame["point_id"]).median()
    one = pd.to_numeric(shown["elapsed_s"], errors="coerce").groupby(frame["point_id"]).median()
    share = (one / raw - 1).abs().dropna()
    return (float(share.median()), float(share.max())) if len(share) else None


def _device_text(frame: pd.DataFrame) -> str:
    """What the storage device gave during the run, from the probe before each round."""
    parts = []
    for col, what in (
        ("device_read_us", "a random 4 KiB read"),
        ("device_sync_us", "a 4 KiB write and its sync"),
    ):
        values = pd.to_numeric(frame.get(col, pd.Series()), errors="coerce").dropna()
        if len(values):
            parts.append(
                f"{what} took {fmt(float(values.median()))} µs (median of the probes; "
                f"{fmt(float(values.min()))}–{fmt(float(values.max()))})"
            )
    if not parts:
        return ""
    return (
        "The device holding the data was probed before each round with the same small job, "
        "the same for every engine: " + "; ".join(parts) + "."
    )


def _calibration_text(data: ReportData, calibration_json: str) -> str:
    frame = data.results
    costs = [
        f"{name} {', '.join(unique(frame, col))} ms"
        for name, col in (
            ("OVERHEAD", "applied_overhead_ms"),
            ("TRANSFERRATE", "applied_transferrate_ms"),
        )
        if unique(frame, col)
    ]
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
    # A calibration's MB is its own (DB2's, of 1,024,000 bytes): converted to the page's.
    rate, mb = cal.device_read_rate_mb_s, cal.mb_bytes
    converted = (
        ""
        if mb == MB_BYTES
        else f" (the calibration file's {fmt(rate)} MB/s of {fmt(int(mb))} bytes to the MB, "
        "converted, as are the device limits on this page)"
    )
    text = (
        f"The device was calibrated with fio ({mode}) on {where}: device read rate "
        f"{fmt(page_mb(rate, mb))} MB/s{converted}, overhead {fmt(cal.overhead_ms)} ms"
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
    code = ", ".join(unique(frame, "tunelab_version")) or "an unrecorded version"
    commit = ", ".join(unique(frame, "git_commit"))
    hosts, named = host_lines(frame), len(checks.hosts(frame))
    where = (
        f"on {named} hosts: {'; '.join(hosts)}"
        if named > 1
        else f"on {'host ' if named else 'a host with '}{'; '.join(hosts)}"
        if hosts
        else "on an unrecorded host"
    )
    setup = [
        f"Measured with tunelab {code}"
        + (f" (commit {commit})" if commit else "")
        + f" on {_engine_text(frame, data.engine)}, {where}."
    ]
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
    seeds = ", ".join(unique(frame, "seed"))
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
    writes = unique(frame, "workload")
    writes = [w for w in ("insert", "update") if w in writes]
    if writes:
        built = {
            "insert": "inserts: an empty table with its index",
            "update": "updates: the table reloaded and indexed",
        }
        protocol.append(
            "Every repetition of a write started from the table built again, untimed ("
            + "; ".join(built[w] for w in writes)
            + ")."
        )
    if "cache_requested" in frame:
        protocol += [t for t in (_cold_text(data), _warm_text(frame)) if t]
    protocol += [t for t in (_access_text(data), _fetch_text(frame), _lock_text(frame)) if t]
    protocol += [
        t for t in (_placement_text(frame), _interference_text(frame), _device_text(frame)) if t
    ]
    cov = stats.coverage(int(reps.min()), stats.order_ranks(int(reps.min()))[0])
    analysis = [
        _calibration_text(data, calibration_json),
        "Per point, the report gives the median of the repetitions with a distribution-free "
        f"order-statistic interval for it (a {fmt_percent(cov)} interval with n = "
        f"{int(reps.min())}), the same figure in every table, figure and verdict.",
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
