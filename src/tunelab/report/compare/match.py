"""Matching two runs' points for `tunelab compare`: reading each side's result files, telling
which rows measured the same point, and which provenance differences make a point's times
incomparable (listed, not compared) or are only listed.

Points match on every column that says what was measured (engine, sweep, knobs as asked,
workload and its parameters, cache state asked, access mode, data set); the point id only
names them, so results written under another id scheme still match.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tunelab.analysis import stats
from tunelab.host.cache import method_family
from tunelab.report.results_dir import ResultsDirError
from tunelab.store.results import APPLIED_PREFIX, KNOB_PREFIX, WORKLOAD_PREFIX

# Columns beside knob_* and wl_* that say what a point measured.
IDENTITY = (
    "engine",
    "sweep",
    "workload",
    "cache_requested",
    "access_mode",
    "dataset_rows",
    "seed",
)
# Differences that make a point's times incomparable: (what, columns). Hosts are told apart
# by name where both sides recorded one, else by their hardware.
INCOMPARABLE = (
    ("engine version", ("engine_version",)),
    ("host", ("host_name",)),
    ("host", ("host_cpu", "host_cores", "host_mem_gib")),
    ("cache state achieved", ("cache_achieved", "cache_method")),
)
# Differences that are listed but do not stop the comparison (applied_* are added: the
# values the engine applied, calibrated knob values among them).
LISTED = (
    "image",
    "host_cpu",
    "host_cores",
    "host_mem_gib",
    "host_kernel",
    "host_fs",
    "tunelab_version",
    "git_commit",
    "access_path",
    "client_route",
)


class CompareInputError(ResultsDirError):
    """Bad input to the comparison; the message is one line ``file: message``."""


def canon(value: object) -> str:
    """One text per value whatever type a CSV column got (10, 10.0 and "10" are the same
    knob value; a missing value is "")."""
    if value is None:
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value)).lower()
    if isinstance(value, numbers.Real):
        f = float(value)
        if math.isnan(f):
            return ""
        return str(int(f)) if f.is_integer() and abs(f) < 1e15 else repr(f)
    text = str(value)
    if text.lower() in ("true", "false"):
        return text.lower()
    try:
        f = float(text)
    except ValueError:
        return text
    return canon(f) if math.isfinite(f) else text


def column(frame: pd.DataFrame, metric: str) -> np.ndarray:
    return stats.finite_values(frame[metric]) if metric in frame else np.array([])


def present(frame: pd.DataFrame, col: str) -> bool:
    return col in frame and frame[col].notna().any()


def values_text(frame: pd.DataFrame, col: str) -> str:
    """The distinct values of a column, sorted, as one text ("—" when not recorded); warm-up
    methods that leave the same state count as one (``cache.method_family``)."""
    if not present(frame, col):
        return "—"
    values = frame[col].dropna()
    if col == "cache_method":
        values = values.astype(str).map(method_family)
    return ", ".join(sorted({canon(v) for v in values}))


@dataclass(frozen=True)
class Difference:
    what: str  # engine version, host, cache state achieved
    column: str
    old: str
    new: str

    def text(self, arrow: str = "->") -> str:
        return f"{self.column}: {self.old} {arrow} {self.new}"


def identity(old: pd.DataFrame, new: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(columns to match on, columns left out because one side lacks them). A column only
    one side recorded and that takes one value there (a parameter added with its default)
    cannot tell points apart: it is left out and listed; one that varies stays, so its
    points only match where both sides agree."""
    cols = []
    for frame in (old, new):
        for c in frame.columns:
            if (c in IDENTITY or c.startswith((KNOB_PREFIX, WORKLOAD_PREFIX))) and c not in cols:
                cols.append(c)
    keep, one_sided = [], []
    for c in cols:
        in_old, in_new = present(old, c), present(new, c)
        if in_old and in_new:
            keep.append(c)
        elif in_old or in_new:
            side = old if in_old else new
            if side[c].map(canon).nunique() > 1:
                keep.append(c)
            else:
                one_sided.append(f"{c} ({'OLD' if in_old else 'NEW'} only: {values_text(side, c)})")
    return keep, one_sided


def groups(frame: pd.DataFrame, cols: list[str]) -> dict[tuple[str, ...], pd.DataFrame]:
    """The frame's rows per distinct value of ``cols`` (compared as canonical text)."""
    parts = [frame[c].map(canon) if c in frame else pd.Series("", frame.index) for c in cols]
    index: dict[tuple[str, ...], list[int]] = {}
    for i, key in enumerate(zip(*parts)):
        index.setdefault(key, []).append(i)
    return {k: frame.iloc[rows].reset_index(drop=True) for k, rows in index.items()}


def point_name(rows: pd.DataFrame, key: tuple[str, ...], cols: list[str]) -> str:
    if present(rows, "point_id"):
        return str(rows["point_id"].dropna().iloc[0])
    named = [f"{c}={v}" for c, v in zip(cols, key) if c not in ("engine", "sweep") and v]
    return ",".join(named) or "(the only point)"


def provenance(old: pd.DataFrame, new: pd.DataFrame) -> tuple[list[Difference], dict]:
    """(why the point is incomparable, listed differences {column: (old, new)})."""
    reasons: list[Difference] = []
    used: set[str] = set()
    for what, cols in INCOMPARABLE:
        both = [c for c in cols if present(old, c) and present(new, c)]
        if not both or (what == "host" and "host_name" in used):
            continue
        used.update(both)
        for c in both:
            a, b = values_text(old, c), values_text(new, c)
            if a != b:
                reasons.append(Difference(what, c, a, b))
    listed = [c for c in LISTED if c not in used]
    listed += sorted({c for c in [*old.columns, *new.columns] if c.startswith(APPLIED_PREFIX)})
    differences = {}
    for c in listed:
        a, b = values_text(old, c), values_text(new, c)
        if a != b:
            differences[c] = (a, b)
    return reasons, differences


def one(frame: pd.DataFrame, col: str) -> str:
    """The column's only value ("" when it is missing or takes several)."""
    if col not in frame:
        return ""
    values = {canon(v) for v in frame[col]}
    return values.pop() if len(values) == 1 else ""


def _in_rounds(frame: pd.DataFrame) -> bool:
    """Whether every row says its round: repetitions spread over the run, not back to back."""
    return "round" in frame and bool(frame["round"].notna().all())


@dataclass
class Matched:
    """One sweep's points on both sides: per common point its rows, and what only one side
    has."""

    engine: str
    sweep: str
    old: pd.DataFrame
    new: pd.DataFrame
    cols: list[str]
    common: list[tuple[tuple[str, ...], pd.DataFrame, pd.DataFrame]] = field(default_factory=list)
    only_old: list[str] = field(default_factory=list)
    only_new: list[str] = field(default_factory=list)
    one_sided: list[str] = field(default_factory=list)


def match_sweep(engine: str, sweep: str, old: pd.DataFrame, new: pd.DataFrame) -> Matched:
    """The sweep's points matched between OLD and NEW (rows as given)."""
    cols, one_sided = identity(old, new)
    old_groups, new_groups = groups(old, cols), groups(new, cols)
    common = sorted(set(old_groups) & set(new_groups))
    return Matched(
        engine,
        sweep,
        old,
        new,
        cols,
        [(k, old_groups[k], new_groups[k]) for k in common],
        sorted(point_name(old_groups[k], k, cols) for k in set(old_groups) - set(common)),
        sorted(point_name(new_groups[k], k, cols) for k in set(new_groups) - set(common)),
        one_sided,
    )


def sweeps(
    old: pd.DataFrame, new: pd.DataFrame
) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(engine/sweep keys on both sides, only in OLD, only in NEW)."""
    by = ["engine", "sweep"]
    a, b = set(groups(old, by)), set(groups(new, by))
    return (
        sorted(a & b),
        [f"{e}/{s}" for e, s in sorted(a - b)],
        [f"{e}/{s}" for e, s in sorted(b - a)],
    )


def by_sweep(frame: pd.DataFrame) -> dict[tuple[str, ...], pd.DataFrame]:
    return groups(frame, ["engine", "sweep"])
