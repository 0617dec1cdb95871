"""Whether a point's time is the engine's work, from its rows: the access path the engine
took against the one the index knob built, the engine's own time against the client's
clock, and per-statement times (the first query of a cold repetition apart from the rest).

Result files written before these columns existed lack them; every function here then
returns an empty frame or says "not recorded" instead of failing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from tunelab.analysis import figures
from tunelab.report.data import ReportData
from tunelab.report.labels import fmt, label

CLIENT_BOUND = 0.5  # a median client share above this: the client set the time, not the engine
MISMATCH_MARK = "⊗"  # the same sign in figures, tables and callouts
FIRST_REST = ("q_first_s", "q_rest_median_s")
# The device bytes of a cold repetition's first statement and, median, of its later ones.
FIRST_REST_BYTES = ("q_first_read_bytes", "q_rest_median_read_bytes")
PERCENTILES = ("q_p50_s", "q_p95_s", "q_p99_s")
LOOKUP_WORKLOADS = ("point",)

_TRUE = {"true", "1", "yes", "t"}
_FALSE = {"false", "0", "no", "f"}


def as_bool(series: pd.Series) -> pd.Series:
    """True/False/None per value; CSVs give bools, or text once a missing value is mixed in."""

    def one(value: Any) -> bool | None:
        if isinstance(value, bool | np.bool_):
            return bool(value)
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return None
        text = str(value).strip().lower()
        return True if text in _TRUE else False if text in _FALSE else None

    return series.map(one).astype(object)


def is_false(value: Any) -> bool:
    """A recorded False (numpy's too); None and NaN are "not recorded", not False."""
    return isinstance(value, bool | np.bool_) and not value


def _base(path: Any) -> str:
    return str(path).split(";", 1)[0].strip()


def row_matches(frame: pd.DataFrame) -> pd.Series:
    """Per row: did the plan match what the index knob built (None: not recorded)."""
    if "access_matches" in frame:
        return as_bool(frame["access_matches"])
    if {"access_path", "access_expected"} <= set(frame.columns):
        # Several plans in one point are joined by " | ": all of them must be the one built.
        def one(path: Any, expected: Any) -> bool | None:
            if pd.isna(path) or pd.isna(expected):
                return None
            return all(_base(p) == _base(expected) for p in str(path).split(" | "))

        return pd.Series(
            [one(p, e) for p, e in zip(frame["access_path"], frame["access_expected"])],
            index=frame.index,
            dtype=object,
        )
    return pd.Series(None, index=frame.index, dtype=object)


def row_mismatch(frame: pd.DataFrame) -> pd.Series:
    """True where the plan is known to differ from what the index knob built."""
    return row_matches(frame).map(is_false).astype(bool)


def plans_recorded(frame: pd.DataFrame) -> bool:
    return "access_path" in frame and frame["access_path"].notna().any()


def engine_time_recorded(frame: pd.DataFrame) -> bool:
    return "engine_elapsed_s" in frame and _numeric(frame, "engine_elapsed_s").notna().any()


def _numeric(frame: pd.DataFrame, col: str) -> pd.Series:
    if col not in frame:
        return pd.Series(np.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[col], errors="coerce")


def row_client_share(frame: pd.DataFrame) -> pd.Series:
    """Per row: 1 − engine time / response time, from the stored column where present."""
    computed = 1 - _numeric(frame, "engine_elapsed_s") / _numeric(frame, "elapsed_s")
    computed = computed.where(np.isfinite(computed))
    if "client_share" not in frame:
        return computed
    return _numeric(frame, "client_share").fillna(computed)


# -- per point ---------------------------------------------------------------------------------
def _groups(data: ReportData, frame: pd.DataFrame) -> Iterator[tuple[dict, pd.DataFrame]]:
    by = [c for c in data.point_columns if c in frame]
    if not by:
        if not frame.empty:
            yield {}, frame
        return
    for key, group in frame.groupby(by, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        yield dict(zip(by, key, strict=True)), group


def point_name(data: ReportData, point: dict | pd.Series) -> str:
    """A point as a reader names it: "index type = covering, cache = cold"."""
    items = [(c, point[c]) for c in data.point_columns if c in point]
    if not items:
        return "the only point"
    return ", ".join(f"{label(c, data.engine)} = {fmt(v)}" for c, v in items)


def _distinct(values: pd.Series) -> str | None:
    seen = [str(v) for v in dict.fromkeys(values.dropna())]
    return " | ".join(seen) if seen else None


def point_access(data: ReportData) -> pd.DataFrame:
    """Per point: the plan(s) its rows recorded, what the knob built, the mode, and whether
    every row matched (False if any did not; None when no row recorded it)."""
    frame = data.results
    matches = row_matches(frame)
    out = []
    for key, group in _groups(data, frame):
        m = [v for v in matches.loc[group.index] if v is not None]
        out.append(
            {
                **key,
                "access_path": _distinct(group["access_path"]) if "access_path" in group else None,
                "access_expected": (
                    _distinct(group["access_expected"]) if "access_expected" in group else None
                ),
                "access_mode": _distinct(group["access_mode"]) if "access_mode" in group else None,
                "matches": all(m) if m else None,
            }
        )
    return pd.DataFrame(out)


def mismatched_points(data: ReportData) -> pd.DataFrame:
    access = point_access(data)
    if access.empty:
        return access
    return access[access["matches"].map(is_false)].reset_index(drop=True)


def access_modes(frame: pd.DataFrame) -> list[str]:
    return sorted({str(v) for v in frame["access_mode"].dropna()}) if "access_mode" in frame else []


def point_times(data: ReportData) -> pd.DataFrame:
    """Per point: medians of the response time, the engine's time and the client share, and
    whether the point is client-bound (median share above CLIENT_BOUND)."""
    frame = data.results
    share = row_client_share(frame)
    shown = figures.at_one_speed(frame)  # the response time every page quotes
    out = []
    for key, group in _groups(data, frame):
        s = share.loc[group.index].dropna()
        median_share = float(s.median()) if len(s) else np.nan
        out.append(
            {
                **key,
                "n": len(group),
                "elapsed_s": float(_numeric(shown.loc[group.index], "elapsed_s").median()),
                "engine_elapsed_s": float(_numeric(group, "engine_elapsed_s").median()),
                "client_share": median_share,
                "client_bound": bool(median_share > CLIENT_BOUND),
                "fetch": _distinct(group["wl_fetch"]) if "wl_fetch" in group else None,
            }
        )
    return pd.DataFrame(out)


def client_bound_points(data: ReportData) -> pd.DataFrame:
    times = point_times(data)
    return times[times["client_bound"]].reset_index(drop=True) if not times.empty else times


def _medians(data: ReportData, frame: pd.DataFrame, cols: tuple[str, ...]) -> pd.DataFrame:
    out = []
    for key, group in _groups(data, frame):
        row = {**key, "n": len(group), "queries": float(_numeric(group, "queries").median())}
        row.update({c: float(_numeric(group, c).median()) for c in cols})
        out.append(row)
    return pd.DataFrame(out)


def first_query_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of cold repetitions that ran more than one timed statement."""
    if not {"queries", "q_first_s", "cache_requested"} <= set(frame.columns):
        return frame.iloc[0:0]
    keep = (frame["cache_requested"].astype(str) == "cold") & (_numeric(frame, "queries") > 1)
    return frame[keep & _numeric(frame, "q_first_s").notna()]


def cold_each_query(frame: pd.DataFrame) -> pd.Series:
    """Per row: whether each of its timed statements met a cold cache of its own (rows that
    record ``cold_queries``); rows measured before that met one with their first only."""
    return _numeric(frame, "cold_queries").notna()


def cold_read_bytes(data: ReportData) -> pd.DataFrame:
    """Per cold point whose rows record it: the median device bytes of a repetition's first
    statement (each met a cold cache of its own), and the median size of its data files."""
    frame = data.results
    if "cache_requested" not in frame:
        return pd.DataFrame()
    cold = frame[(frame["cache_requested"].astype(str) == "cold") & cold_each_query(frame)]
    out = _medians(data, cold, ("q_first_read_bytes", "data_bytes"))
    return out[out["q_first_read_bytes"].notna()].reset_index(drop=True) if not out.empty else out


def first_vs_rest(data: ReportData) -> pd.DataFrame:
    """Per cold point with several statements: median first-query time, median of the later
    queries' per-repetition medians, how many times slower the first one was, the median of
    each repetition's per-query median (a cold query's time), and the device bytes of the
    first and the later queries where the rows record them."""
    rows = first_query_rows(data.results)
    out = _medians(data, rows, (*FIRST_REST, "q_p50_s", *FIRST_REST_BYTES))
    if not out.empty:
        out["first_over_rest"] = out["q_first_s"] / out["q_rest_median_s"]
    return out


def lookup_rows(frame: pd.DataFrame) -> pd.DataFrame:
    if "workload" not in frame or not set(PERCENTILES) <= set(frame.columns):
        return frame.iloc[0:0]
    keep = frame["workload"].astype(str).isin(LOOKUP_WORKLOADS)
    return frame[keep & _numeric(frame, "q_p50_s").notna()]


def lookup_percentiles(data: ReportData) -> pd.DataFrame:
    """Per point-lookup point: medians over repetitions of each repetition's p50/p95/p99."""
    return _medians(data, lookup_rows(data.results), (*PERCENTILES, "q_max_s"))


def multi_query_without_timings(frame: pd.DataFrame) -> bool:
    """Rows of workloads that run several statements but carry no per-statement times (a
    result file from before they were recorded)."""
    if "q_first_s" in frame:
        return False
    many = pd.Series(False, index=frame.index)
    for col in ("wl_queries", "wl_lookups"):
        many |= _numeric(frame, col) > 1
    return bool(many.any())


# -- hosts -----------------------------------------------------------------------------------
HOST_COLUMN = "host_name"


def row_hosts(frame: pd.DataFrame) -> pd.Series:
    """Per row: the name of the host that measured it ("" where none was recorded)."""
    if HOST_COLUMN not in frame:
        return pd.Series("", index=frame.index, dtype=object)
    return frame[HOST_COLUMN].map(lambda v: "" if pd.isna(v) else str(v).strip())


def hosts(frame: pd.DataFrame) -> list[str]:
    """The hosts the rows were measured on, by name (none when no row recorded one)."""
    return sorted({h for h in row_hosts(frame) if h})


def points_per_host(frame: pd.DataFrame) -> dict[str, int]:
    """How many points each host measured (a point measured on two hosts counts on both)."""
    if "point_id" not in frame:
        return {h: 0 for h in hosts(frame)}
    named = frame.assign(_host=row_hosts(frame))
    named = named[named["_host"] != ""]
    return {str(h): int(g["point_id"].nunique()) for h, g in named.groupby("_host")}


def points_on_several_hosts(frame: pd.DataFrame) -> list[str]:
    """Points whose repetitions come from more than one host: their medians pool hosts."""
    if "point_id" not in frame:
        return []
    named = frame.assign(_host=row_hosts(frame))
    named = named[named["_host"] != ""]
    counts = named.groupby("point_id")["_host"].nunique()
    return sorted(str(p) for p in counts[counts > 1].index)


def cluster_jobs(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The SLURM jobs and nodes the rows were measured in (empty outside SLURM)."""

    def distinct(col: str) -> list[str]:
        if col not in frame:
            return []
        values = {str(v).strip() for v in frame[col].dropna()}
        values = {v[:-2] if v.endswith(".0") else v for v in values if v}  # ids read as floats
        return sorted(values, key=lambda v: (len(v), v))

    return distinct("slurm_job_id"), distinct("slurm_node")
