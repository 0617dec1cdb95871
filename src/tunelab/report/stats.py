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

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
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


@cache  # a report asks for the same few n hundreds of times
def coverage(n: int, k: int) -> float:
    """Coverage of [x_(k), x_(n+1-k)] (1-based ranks) for the median of n samples."""
    if n < 1 or k < 1 or 2 * k > n + 1:
        return float("nan")
    if 2 * k == n + 1:  # both bounds are the sample median itself
        return 0.0
    # Exact: 1 - 2 * sum_{i<k} C(n, i) / 2^n, in integers (n is a handful of repetitions).
    tail = Fraction(sum(comb(n, i) for i in range(k)), 2**n)
    return float(1 - 2 * tail)


@cache
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
    values = pd.to_numeric(frame[metric], errors="coerce").to_numpy(dtype=float)
    # Row positions per group, not a sub-frame each: a report summarizes hundreds of groups.
    for key, where in frame.groupby(by, dropna=False, sort=True).indices.items():
        key = key if isinstance(key, tuple) else (key,)
        mi = median_interval(values[where], level)
        rows.append([*key, mi.n, mi.median, mi.low, mi.high, mi.coverage])
    out = pd.DataFrame(rows, columns=[*by, *cols])
    out["n"] = out["n"].astype(int)
    return out


# -- two sets of repetitions: the ratio of their medians ---------------------------------
# Shared by `tunelab compare` (run against run) and the sweep's claims (point against point).
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
EXACT_LIMIT = 20_000  # tied samples up to this many splits get an exact permutation test


@dataclass(frozen=True)
class RatioTest:
    n_old: int
    n_new: int
    old_median: float
    new_median: float
    ratio: float  # median(new) / median(old); 1 when both are 0
    low: float
    high: float
    p: float  # two-sided Mann–Whitney U
    min_p: float  # the smallest p these sample sizes allow

    def significant(self, alpha: float) -> bool:
        return (self.low > 1 or self.high < 1) and self.p < alpha


def finite_values(values: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(pd.to_numeric(pd.Series(values), errors="coerce"), dtype=float)
    return x[np.isfinite(x)]


def _ratio(new: np.ndarray | float, old: np.ndarray | float) -> np.ndarray:
    new, old = np.asarray(new, dtype=float), np.asarray(old, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = new / old
    return np.where((new == 0) & (old == 0), 1.0, r)  # nothing before, nothing now: no change


def ratio_interval(
    old: np.ndarray, new: np.ndarray, level: float, resamples: int, rng: np.random.Generator
) -> tuple[float, float, float]:
    """Ratio of medians new/old and its percentile bootstrap interval at ``level``."""
    old, new = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
    ratio = float(_ratio(np.median(new), np.median(old)))
    old_b = np.median(old[rng.integers(0, old.size, size=(resamples, old.size))], axis=1)
    new_b = np.median(new[rng.integers(0, new.size, size=(resamples, new.size))], axis=1)
    # inverted_cdf picks resampled values, never interpolates (a resample may give inf)
    tail = (1 - level) / 2
    low, high = np.quantile(_ratio(new_b, old_b), [tail, 1 - tail], method="inverted_cdf")
    return ratio, float(low), float(high)


def mann_whitney_p(old: np.ndarray, new: np.ndarray) -> float:
    """Two-sided p: exact without ties for small samples (scipy's choice), exact by
    permutation with ties where the splits are few (counters often tie), else the normal
    approximation."""
    from scipy import stats

    old, new = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
    both = np.concatenate([old, new])
    if np.all(both == both[0]):
        return 1.0
    permutation = getattr(stats, "PermutationMethod", None)
    if (
        permutation is not None
        and np.unique(both).size < both.size
        and comb(both.size, old.size) <= EXACT_LIMIT
    ):
        try:  # every split when they are fewer than the resamples: exact
            method = permutation(n_resamples=EXACT_LIMIT)
            return float(
                stats.mannwhitneyu(new, old, alternative="two-sided", method=method).pvalue
            )
        except (TypeError, ValueError):  # a scipy whose test takes no permutation method
            pass
    return float(stats.mannwhitneyu(new, old, alternative="two-sided").pvalue)


def min_p(n_old: int, n_new: int) -> float:
    """The smallest two-sided p a rank test can give with these sample sizes."""
    return min(1.0, 2 / comb(n_old + n_new, n_old))


def compare_samples(
    old: Sequence[float] | np.ndarray,
    new: Sequence[float] | np.ndarray,
    alpha: float = 1 - LEVEL,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    key: str = "",
) -> RatioTest:
    """Compare two sets of repetitions; ``key`` (point and metric) seeds the bootstrap
    together with ``seed``, so a point's interval does not depend on the other points."""
    x, y = finite_values(old), finite_values(new)
    if x.size == 0 or y.size == 0:
        raise ValueError("both sides need at least one finite value")
    rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
    ratio, low, high = ratio_interval(x, y, 1 - alpha, resamples, rng)
    return RatioTest(
        n_old=int(x.size),
        n_new=int(y.size),
        old_median=float(np.median(x)),
        new_median=float(np.median(y)),
        ratio=ratio,
        low=low,
        high=high,
        p=mann_whitney_p(x, y),
        min_p=min_p(int(x.size), int(y.size)),
    )
