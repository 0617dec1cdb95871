"""The arithmetic of calibration: IBM's conversions, the per-write disk model, run-to-run spread.

Units. DB2 turns DEVICE READ RATE into TRANSFERRATE with

    TRANSFERRATE [ms/page] = (1 / DEVICE READ RATE) * 1000 / 1024000 * PAGESIZE [bytes]

so the "MB" of DEVICE READ RATE is 1,024,000 bytes (1000 KiB). Every MB/s in a calibration
uses that unit (``MB_BYTES``), so the DEVICE READ RATE written into ``ALTER STOGROUP`` gives
back exactly the measured time per page, and achieved rates compare like with like.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MB_BYTES = 1_024_000
DB2_PAGE_SIZES = (4096, 8192, 16384, 32768)
DB2_DEFAULT_OVERHEAD_MS = 6.725
DB2_DEFAULT_DEVICE_READ_RATE_MB_S = 100.0
# PostgreSQL: seq_page_cost 1.0 and random_page_cost 4.0 by default; its documentation reads
# 4.0 as random access 40 times slower than sequential with 90% of random reads cached.
PG_PAGE_BYTES = 8192
PG_DEFAULT_RANDOM_PAGE_COST = 4.0
PG_ASSUMED_CACHED = 0.9
# Coefficient of variation across repetitions above which a measurement is flagged.
CV_WARN = 0.10


def transferrate_ms(device_read_rate_mb_s: float, page_bytes: int) -> float:
    """IBM's conversion from DEVICE READ RATE (MB/s) to TRANSFERRATE (ms per page)."""
    return (1.0 / device_read_rate_mb_s) * 1000.0 / MB_BYTES * page_bytes


def mb_per_s(bytes_per_s: float) -> float:
    return bytes_per_s / MB_BYTES


def overhead_ms(random_read_ms: float, device_read_rate_mb_s: float, page_bytes: int) -> float:
    """OVERHEAD: a random read's time less the time to transfer the page it read."""
    return random_read_ms - transferrate_ms(device_read_rate_mb_s, page_bytes)


@dataclass(frozen=True)
class Spread:
    mean: float
    std: float  # sample standard deviation (n - 1)
    cv: float  # std / mean; NaN with one value

    @property
    def high(self) -> bool:
        return not math.isnan(self.cv) and self.cv > CV_WARN


def spread(values: Sequence[float]) -> Spread:
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("no values to summarise")
    mean = float(arr.mean())
    std = float(arr.std(ddof=1)) if arr.size > 1 else math.nan
    cv = std / mean if arr.size > 1 and mean else math.nan
    return Spread(mean, std, cv)


@dataclass(frozen=True)
class WriteFit:
    """write_time = overhead_s + bytes / rate_bytes_s, fitted by least squares.

    ``rate_bytes_s`` is None when the time does not grow with the size (slope <= 0): the
    device (or a cache in front of it) shows no measurable transfer cost.
    """

    overhead_s: float
    rate_bytes_s: float | None
    r2: float
    points: int

    def seconds(self, bytes_per_write: float) -> float:
        per_byte = 0.0 if self.rate_bytes_s is None else 1.0 / self.rate_bytes_s
        return self.overhead_s + bytes_per_write * per_byte

    def throughput_bytes_s(self, bytes_per_write: float) -> float:
        """What back-to-back synchronous writes of this size can reach under the model."""
        return bytes_per_write / self.seconds(bytes_per_write)


def fit_write_model(bytes_per_write: Sequence[float], seconds: Sequence[float]) -> WriteFit:
    """Least-squares line through (size, time) points, with the coefficient of determination."""
    x = np.asarray(bytes_per_write, dtype=float)
    y = np.asarray(seconds, dtype=float)
    if x.shape != y.shape or x.size < 2 or np.unique(x).size < 2:
        raise ValueError("the write model needs at least two distinct write sizes")
    design = np.column_stack([np.ones_like(x), x])
    (intercept, slope), *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = y - design @ np.array([intercept, slope])
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((residual**2).sum()) / total if total > 0 else 1.0
    rate = 1.0 / slope if slope > 0 else None
    return WriteFit(float(intercept), rate, r2, int(x.size))


def pg_random_seq_ratio(random_read_ms_8k: float, device_read_rate_mb_s: float) -> float:
    """Uncached random 8K page read time over the sequential time per 8K page."""
    return random_read_ms_8k / transferrate_ms(device_read_rate_mb_s, PG_PAGE_BYTES)


def pg_random_page_cost(ratio: float, cached: float = PG_ASSUMED_CACHED) -> float:
    """random_page_cost under PostgreSQL's own caching assumption, never below seq_page_cost."""
    return max(1.0, (1.0 - cached) * ratio)
