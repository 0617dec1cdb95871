"""A point's figure, computed once: per point and metric, the median of its repetitions, the
order-statistic interval for it and that interval's real coverage (``stats.median_interval``),
from the values the verdicts compare.

Times and rates of an engine whose rows carry the CPU reference are taken at one CPU speed
(``hostspeed``), with the weight the whole sweep bears out within the unit its claims pair by
(``sequential.pairing``) and the median slowdown of all the sweep's rows as the reference:
the same correction the verdicts apply, so a ratio of two figures is a ratio the claims
test, and one point has one value wherever it is quoted (tables, figures, evidence, the
index, the pages across engines). The reference is the sweep's, not each comparison's: a
comparison's ratio does not depend on it, while a point's value would (each pair of sides had
its own reference, and one point came out at 49.4 to 49.9 ms on one page). The values as
measured stay in the stored rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from tunelab.analysis import hostspeed, sequential, stats

TIMED = tuple(hostspeed.SCALED)  # the metrics a CPU's speed moves
# Added by ``at_one_speed``: the weight of the correction (NaN: the rows are as measured).
# Its presence says the frame's timed metrics are already the figures' values.
ONE_SPEED = "one_speed_weight"


def at_one_speed(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with each timed metric at one CPU speed where ``hostspeed`` applies to all of
    them (otherwise as measured) and ``ONE_SPEED``; unchanged if it is there already."""
    if ONE_SPEED in frame or frame.empty:
        return frame
    (annotated,) = hostspeed.annotate([frame], sequential.pairing(frame)[0])
    scaled = {m: hostspeed.values([annotated], m) for m in TIMED if m in frame}
    columns = {m: v[0] for m, v in scaled.items() if v is not None}
    weight = hostspeed.weight_of(annotated) if columns else None
    columns[ONE_SPEED] = np.full(len(frame), math.nan if weight is None else weight)
    # A copy first: a frame built a column at a time (a page's derived columns) is fragmented,
    # and pandas warns on the user's terminal when one more is added to it.
    return frame.copy().assign(**columns)


def corrected(frame: pd.DataFrame) -> bool:
    """Whether the timed metrics of ``frame`` (from ``at_one_speed``) are at one CPU speed."""
    rows = at_one_speed(frame)
    return bool(len(rows)) and bool(np.isfinite(rows[ONE_SPEED].to_numpy(float)).all())


def weight(frame: pd.DataFrame) -> float | None:
    rows = at_one_speed(frame)
    return float(rows[ONE_SPEED].iloc[0]) if corrected(rows) else None


def summarize(frame: pd.DataFrame, by: Sequence[str], metric: str) -> pd.DataFrame:
    """``stats.summarize`` of the figures' values: by..., n, median, low, high, coverage."""
    return stats.summarize(at_one_speed(frame), by, metric)


def of_points(frame: pd.DataFrame, points: Iterable[str], metric: str) -> stats.MedianInterval:
    """The figure of the rows of ``points`` (point ids) in ``frame``, which carries every row
    of the sweep (``at_one_speed`` takes its weight and reference from all of them)."""
    rows = at_one_speed(frame)
    wanted = {str(p) for p in points}
    mine = rows[rows["point_id"].astype(str).isin(wanted)] if "point_id" in rows else rows
    if metric not in mine:
        return stats.median_interval([])
    return stats.median_interval(pd.to_numeric(mine[metric], errors="coerce").to_numpy(float))


def level_text(coverage: float) -> str:
    """An interval's level as a page states it: "96.9 %"."""
    return f"{coverage * 100:.3g} %" if math.isfinite(coverage) else "unknown level"
