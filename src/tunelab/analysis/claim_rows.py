"""How a claim reads a sweep's rows: a key's or metric's column, the rows it selects, the values."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from tunelab.store import results
from tunelab.sweep.claimspec import COUNTERS, as_number, same

SPECIAL_KEYS = {"cache": "cache_requested", "workload": "workload"}


def metric_column(name: str) -> str:
    return f"{results.COUNTER_PREFIX}{name}" if name in COUNTERS else name


def column(frame: pd.DataFrame, key: str) -> str | None:
    """The rows' column a claim's key names (``index`` → ``knob_index``)."""
    for col in (
        SPECIAL_KEYS.get(key),
        f"{results.KNOB_PREFIX}{key}",
        f"{results.WORKLOAD_PREFIX}{key}",
    ):
        if col and col in frame:
            return col
    return None


def select(frame: pd.DataFrame, conditions: dict[str, Any]) -> pd.DataFrame:
    mask = pd.Series(True, index=frame.index)
    for key, value in conditions.items():
        col = column(frame, key)
        if col is None:
            return frame.iloc[0:0]
        mask &= frame[col].map(lambda cell, v=value: same(cell, v))
    return frame[mask]


def _uses_index(path: Any) -> float:
    """1 for a plan through an index (``index:`` or ``index-only:``), 0 for any other, NaN
    when no plan was recorded."""
    if not isinstance(path, str) or path.strip() in ("", "unknown"):
        return math.nan
    return 1.0 if path.strip().startswith("index") else 0.0


def _metric(rows: pd.DataFrame, metric: str) -> pd.Series | None:
    """The metric per row: its column, or derived from the plan (uses_index)."""
    col = metric_column(metric)
    if col in rows:
        return pd.to_numeric(rows[col], errors="coerce")
    if metric == "uses_index" and "access_path" in rows:
        return rows["access_path"].map(_uses_index).astype(float)
    return None


def metric_values(rows: pd.DataFrame, metric: str) -> np.ndarray:
    values = _metric(rows, metric)
    return np.array([]) if values is None else values.to_numpy(dtype=float)


def sorted_along(rows: pd.DataFrame, col: str) -> list[Any]:
    vals = list(pd.unique(rows[col].dropna()))
    return sorted(vals, key=lambda v: (as_number(v) is None, as_number(v) or 0, str(v)))


def rows_at(rows: pd.DataFrame, col: str, value: Any) -> pd.DataFrame:
    return rows[rows[col].map(lambda c: same(c, value))]
