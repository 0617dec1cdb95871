"""Median and a distribution-free 95 % interval for the median, per measured point.

The interval is the classic order-statistic one: with n sorted repetitions, the median lies
between the k-th smallest and the k-th largest with probability
1 - 2 * P(Binomial(n, 1/2) <= k - 1), whatever the distribution of the timings. k is the
largest rank that keeps this at or above the level. No randomness is involved, so the
numbers are the same on every render.

Below six repetitions no pair of ranks reaches 95 % (five give 93.75 % for [min, max]);
then the full range is returned with its true, lower coverage, and the report says so
rather than calling it a 95 % interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import comb

import numpy as np
import pandas as pd

LEVEL = 0.95
METHOD = (
    "median with a distribution-free order-statistic interval (binomial ranks, no resampling); "
    "where there are too few repetitions to reach 95 %, the interval is [min, max] and its "
    "true coverage is shown"
)


@dataclass(frozen=True)
class MedianInterval:
    n: int
    median: float
    low: float
    high: float
    coverage: float  # probability that [low, high] contains the true median

    def reaches(self, level: float = LEVEL) -> bool:
        return self.coverage >= level - 1e-12


def coverage(n: int, k: int) -> float:
    """Coverage of [x_(k), x_(n+1-k)] (1-based ranks) for the median of n samples."""
    if n < 1 or k < 1 or 2 * k > n + 1:
        return float("nan")
    if 2 * k == n + 1:  # both bounds are the sample median itself
        return 0.0
    # Exact: 1 - 2 * sum_{i<k} C(n, i) / 2^n, in integers (n is a handful of repetitions).
    tail = Fraction(sum(comb(n, i) for i in range(k)), 2**n)
    return float(1 - 2 * tail)


def order_ranks(n: int, level: float = LEVEL) -> tuple[int, int]:
    """1-based ranks (k, n+1-k) of the narrowest symmetric interval reaching ``level``,
    or (1, n) when none does."""
    best = 1
    for k in range(1, (n + 1) // 2 + 1):
        if coverage(n, k) >= level - 1e-12:
            best = k
        else:
            break
    return best, n + 1 - best


def median_interval(values: Sequence[float] | np.ndarray, level: float = LEVEL) -> MedianInterval:
    """Median and order-statistic interval of the finite values; NaN fields when there are none."""
    x = np.sort(np.asarray(values, dtype=float))
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        nan = float("nan")
        return MedianInterval(0, nan, nan, nan, nan)
    k, j = order_ranks(n, level)
    return MedianInterval(
        n=n,
        median=float(np.median(x)),
        low=float(x[k - 1]),
        high=float(x[j - 1]),
        coverage=coverage(n, k) if n > 1 else 0.0,
    )


def summarize(
    frame: pd.DataFrame, by: Sequence[str], metric: str, level: float = LEVEL
) -> pd.DataFrame:
    """One row per distinct ``by`` combination: by..., n, median, low, high, coverage.

    Groups keep missing values as their own level (a workload without a parameter), and come
    out sorted, so the same rows always give the same table.
    """
    cols = ["n", "median", "low", "high", "coverage"]
    by = list(by)
    if frame.empty or metric not in frame:
        return pd.DataFrame(columns=[*by, *cols])
    if not by:
        mi = median_interval(frame[metric].to_numpy(), level)
        return pd.DataFrame([[mi.n, mi.median, mi.low, mi.high, mi.coverage]], columns=cols)
    rows = []
    for key, group in frame.groupby(by, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        mi = median_interval(pd.to_numeric(group[metric], errors="coerce").to_numpy(), level)
        rows.append([*key, mi.n, mi.median, mi.low, mi.high, mi.coverage])
    out = pd.DataFrame(rows, columns=[*by, *cols])
    out["n"] = out["n"].astype(int)
    return out
