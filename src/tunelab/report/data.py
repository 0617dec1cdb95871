"""The inputs of one report: result rows, the sweep they came from, and what varies in them."""

from __future__ import annotations

import hashlib
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tunelab.host import yamlfile
from tunelab.host.units import parse_size
from tunelab.store.results import KNOB_PREFIX, WORKLOAD_PREFIX, read_results, swept_columns
from tunelab.sweep.checks import knob_lists

REQUIRED = ("elapsed_s",)
# Dimensions that are not knobs but still separate points when they vary in a sweep.
GROUPING = ("workload", "cache_requested", "access_mode")


class ReportInputError(ValueError):
    """Bad report input; the message is one line naming the file and what is wrong."""


@dataclass
class ReportData:
    results: pd.DataFrame
    sweep: dict[str, Any]
    results_csv: str
    sweep_file: str
    name: str
    engine: str
    dims: list[str]  # swept knob and workload-parameter columns
    groups: list[str]  # other varying columns that separate points (workload, cache)
    orders: dict[str, list[Any]] = field(default_factory=dict)  # value order from the sweep

    @property
    def point_columns(self) -> list[str]:
        return [*self.dims, *self.groups]

    def hue_for(self, x: str) -> list[str]:
        """The varying dimensions other than ``x`` (shown as colours in x's figures)."""
        return [c for c in self.point_columns if c != x]


def magnitude(value: Any) -> tuple[str, float] | None:
    """("number", x) for a number or numeric text, ("bytes", n) for a size such as "64MiB",
    None for anything else (categories, missing values)."""
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, numbers.Real):
        return None if math.isnan(float(value)) else ("number", float(value))
    if isinstance(value, str):
        try:
            x = float(value.replace(",", ""))
        except ValueError:
            nbytes = parse_size(value)
            return None if nbytes is None else ("bytes", float(nbytes))
        return None if math.isnan(x) else ("number", x)
    return None


def numeric_order(values: list[Any]) -> list[Any] | None:
    """The values ascending when every one is a number, or every one a size; else None (a
    listed order then stands). Text order would put 16384 before 2048 before 384."""
    keyed = [magnitude(v) for v in values]
    if not values or any(k is None for k in keyed) or len({k[0] for k in keyed}) > 1:
        return None
    return [v for _, v in sorted(zip(keyed, values, strict=True), key=lambda t: t[0][1])]


def order_key(orders: dict[str, list[Any]], col: str):
    """Sort key for one column's values: the order of ``orders`` first, then numbers
    ascending, then sizes ascending, then anything else as text."""
    order = orders.get(col)
    position = {v: i for i, v in enumerate(order)} if order else {}

    def key(value: Any) -> tuple:
        if value in position:
            return (0, position[value], "")
        found = magnitude(value)
        if found is not None:
            return (1 if found[0] == "number" else 2, found[1], "")
        return (3, 0.0, str(value))

    return key


def effective_knobs(sweep: dict[str, Any], engine: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(swept knob lists, fixed knobs) for one engine, by the sweep expansion's own rule."""
    return knob_lists(sweep, engine)


def sha256(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_sweep(path: Path | str) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ReportInputError(f"{path}: sweep file not found")
    try:
        sweep = yamlfile.load(path)
    except yamlfile.YamlFileError as exc:
        raise ReportInputError(str(exc)) from None
    if not isinstance(sweep, dict) or "name" not in sweep:
        raise ReportInputError(f"{path}: a sweep is a mapping with at least a 'name' key")
    return sweep


def read_rows(path: Path | str) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise ReportInputError(f"{path}: results file not found")
    try:
        frame = read_results([path])
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ReportInputError(f"{path}: not a readable CSV ({type(exc).__name__})") from None
    except pd.errors.EmptyDataError:
        frame = pd.DataFrame()
    if frame.empty:
        raise ReportInputError(f"{path}: no result rows")
    missing = [c for c in REQUIRED if c not in frame]
    if missing:
        raise ReportInputError(f"{path}: missing column(s) {', '.join(missing)}")
    return frame


def _orders(sweep: dict[str, Any], frame: pd.DataFrame, engine: str) -> dict[str, list[Any]]:
    """Category order as the sweep lists it (none < nonclustered < clustered reads better
    than alphabetical), values only in the rows appended sorted; numbers and sizes
    ascending."""
    orders: dict[str, list[Any]] = {}
    listed: dict[str, list[Any]] = {}
    for name, values in effective_knobs(sweep, engine)[0].items():
        if isinstance(values, list):
            listed[KNOB_PREFIX + name] = values
    for wl in sweep.get("workloads") or []:
        if isinstance(wl, dict):
            for key, values in wl.items():
                if isinstance(values, list):
                    listed.setdefault(WORKLOAD_PREFIX + key, []).extend(values)
    for col in frame.columns:
        present = [v for v in pd.unique(frame[col].dropna())]
        ascending = numeric_order(present) if col in listed or col in GROUPING else None
        if ascending is not None:
            # Numbers and sizes ascend whatever the sweep's listing (rows carry buffer
            # pools in pages even where the sweep gave sizes, so the listing may not match).
            orders[col] = ascending
        elif col in listed:
            order = [v for v in dict.fromkeys(listed[col]) if v in set(present)]
            order += sorted((v for v in present if v not in set(order)), key=str)
            orders[col] = order
        elif col in GROUPING:
            orders[col] = sorted(present, key=str)
    return orders


def load(results_csv: str | Path, sweep_file: str | Path, sweep_name: str = "") -> ReportData:
    """Read and check a report's inputs; rows of other sweeps in the same CSV are left out."""
    sweep = read_sweep(sweep_file)
    frame = read_rows(results_csv)
    name = sweep_name or str(sweep["name"])
    if "sweep" in frame and name in set(frame["sweep"].astype(str)):
        frame = frame[frame["sweep"].astype(str) == name].reset_index(drop=True)
    elif "sweep" in frame:
        found = ", ".join(sorted(set(frame["sweep"].astype(str))))
        raise ReportInputError(f"{results_csv}: no rows of sweep '{name}' (found: {found})")
    # A workload parameter that only one workload has is constant where it is defined; the
    # workload column already separates those points.
    dims = [c for c in swept_columns(frame) if frame[c].nunique(dropna=True) > 1]
    groups = [c for c in GROUPING if c in frame and frame[c].nunique(dropna=False) > 1]
    engines = sorted(set(frame["engine"].astype(str))) if "engine" in frame else []
    engine = ", ".join(engines) or str(sweep.get("engine", ""))
    # A knob the sweep fixes (a pool given in bytes) may still vary in the rows' units (pages
    # of each page size): it follows the swept knob and is no dimension of its own.
    fixed = effective_knobs(sweep, engines[0] if len(engines) == 1 else engine)[1]
    dims = [c for c in dims if not (c.startswith(KNOB_PREFIX) and c[len(KNOB_PREFIX) :] in fixed)]
    return ReportData(
        results=frame,
        sweep=sweep,
        results_csv=str(results_csv),
        sweep_file=str(sweep_file),
        name=name,
        engine=engine,
        dims=dims,
        groups=groups,
        orders=_orders(sweep, frame, engine),
    )
