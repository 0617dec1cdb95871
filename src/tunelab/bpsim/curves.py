"""Pool-size curves from stack-distance histograms: hits, misses, reads/s, hit ratios, knee.

Every row of a trace is one request to the pool. A row without the prefetch flag is a
logical read (a getpage); a row with it is a page brought in by prefetch, which reads the
page from disk only if it is not already in the pool. For a pool of C pages:

- ``misses``: rows that had to read their page (physical reads): ``sync_reads`` (getpage
  misses, the application waits) plus ``prefetch_reads`` (prefetch rows that read a page);
- ``hits``/``hit_ratio``: rows found in the pool, over all rows;
- ``hit_ratio_app`` = (logical_reads - sync_reads) / logical_reads, the application hit ratio:
  the share of getpages that did not wait for a read;
- ``hit_ratio_sys`` = (logical_reads - (sync_reads + prefetch_reads)) / logical_reads, the
  system hit ratio: every page read, synchronous or prefetched, counts against it, so pages
  prefetched and never read by the application can make it negative;
- ``physical_reads_per_s`` = misses / duration of the traced workload.

Without prefetch rows the three ratios are equal.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

CURVE_COLUMNS = [
    "pool_pages",
    "hits",
    "misses",
    "hit_ratio",
    "logical_reads",
    "prefetch_requests",
    "sync_reads",
    "prefetch_reads",
    "hit_ratio_app",
    "hit_ratio_sys",
    "physical_reads_per_s",
]
CSV_COLUMNS = ["pool_pages", "hits", "misses", "hit_ratio"]


class SizesError(ValueError):
    """A --sizes specification that cannot be read."""


def parse_sizes(spec: str | None, distinct: int) -> np.ndarray:
    """Pool sizes from a specification, sorted and unique, each >= 1.

    ``all`` (or None): 1..distinct; ``N,M,...``: a list; ``A:B`` or ``A:B:STEP``: an
    inclusive range; ``log:K``: K sizes spaced evenly in log scale from 1 to distinct.
    Sizes beyond the distinct page count are allowed (the curve is flat there).
    """
    top = max(int(distinct), 1)
    if spec is None or spec.strip() == "all":
        return np.arange(1, top + 1, dtype=np.int64)
    text = spec.strip()
    try:
        if text.startswith("log:"):
            count = int(text[4:])
            if count < 1:
                raise ValueError
            sizes = np.geomspace(1, top, count).round().astype(np.int64)
        elif ":" in text:
            parts = [int(p) for p in text.split(":")]
            if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] < 1):
                raise ValueError
            step = parts[2] if len(parts) == 3 else 1
            sizes = np.arange(parts[0], parts[1] + 1, step, dtype=np.int64)
        else:
            sizes = np.array([int(p) for p in text.split(",") if p.strip()], dtype=np.int64)
    except ValueError:
        raise SizesError(
            f"--sizes {spec!r}: expected all, a list N,M,..., a range A:B[:STEP] or log:K"
        ) from None
    if sizes.size == 0 or sizes.min() < 1:
        raise SizesError(f"--sizes {spec!r}: pool sizes must be whole numbers >= 1")
    return np.unique(sizes)


def curve_frame(
    sizes: np.ndarray,
    sync_misses: np.ndarray,
    prefetch_misses: np.ndarray,
    logical_reads: int,
    prefetch_requests: int,
    duration_s: float | None,
) -> pd.DataFrame:
    """The curve table from per-size misses of each row class (shared by every policy)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    sync = np.asarray(sync_misses, dtype=np.int64)
    pre = np.asarray(prefetch_misses, dtype=np.int64)
    rows = logical_reads + prefetch_requests
    misses = sync + pre
    with np.errstate(invalid="ignore", divide="ignore"):
        hit_ratio = (rows - misses) / rows if rows else np.full(sizes.size, np.nan)
        app = (logical_reads - sync) / logical_reads if logical_reads else np.nan
        sys_ = (logical_reads - misses) / logical_reads if logical_reads else np.nan
    rate = misses / duration_s if duration_s and duration_s > 0 else np.nan
    return pd.DataFrame(
        {
            "pool_pages": sizes,
            "hits": rows - misses,
            "misses": misses,
            "hit_ratio": hit_ratio,
            "logical_reads": logical_reads,
            "prefetch_requests": prefetch_requests,
            "sync_reads": sync,
            "prefetch_reads": pre,
            "hit_ratio_app": app,
            "hit_ratio_sys": sys_,
            "physical_reads_per_s": rate,
        },
        columns=CURVE_COLUMNS,
    )


def misses_from_histogram(row: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Misses at each size from one class's distance histogram (column 0 = first refs)."""
    total = int(row.sum())
    if row.size <= 1:
        return np.full(len(sizes), total, dtype=np.int64)
    hits_upto = np.cumsum(row[1:])  # hits_upto[c-1] = references at distance <= c
    idx = np.minimum(np.asarray(sizes, dtype=np.int64), row.size - 1) - 1
    return total - hits_upto[idx]


def curve_from_histograms(
    hist: np.ndarray, sizes: np.ndarray, duration_s: float | None = None
) -> pd.DataFrame:
    """Exact LRU curve at ``sizes`` from the (2, M+1) histograms of ``distance_histograms``."""
    return curve_frame(
        sizes,
        misses_from_histogram(hist[0], sizes),
        misses_from_histogram(hist[1], sizes),
        int(hist[0].sum()),
        int(hist[1].sum()),
        duration_s,
    )


def lru_curve(pages, prefetch=None, sizes=None, duration_s: float | None = None) -> pd.DataFrame:
    """Exact LRU curve for every size in ``sizes`` (default 1..distinct pages), one pass."""
    from tunelab.bpsim.stackdist import distance_histograms

    hist, distinct = distance_histograms(pages, prefetch)
    if sizes is None:
        sizes = np.arange(1, max(distinct, 1) + 1)
    return curve_from_histograms(hist, np.asarray(sizes), duration_s)


def working_set_pages(hist: np.ndarray) -> int:
    """The smallest pool with only compulsory misses: the largest finite stack distance."""
    used = np.flatnonzero(hist[:, 1:].sum(axis=0))
    return int(used[-1] + 1) if used.size else (1 if hist.sum() else 0)


def knee(curve: pd.DataFrame, share: float = 0.05) -> int | None:
    """The smallest pool past which more pages save less than ``share`` of its I/O.

    That is the smallest listed size C with misses(C) - misses(largest listed size)
    <= share * misses(C): growing the pool from C to the largest size in the curve (the
    working set, for a full curve) would remove less than ``share`` of the reads left at C.
    """
    if not 0 <= share < 1:
        raise ValueError("knee share must be in [0, 1)")
    if curve.empty:
        return None
    ordered = curve.sort_values("pool_pages")
    misses = ordered["misses"].to_numpy(dtype=float)
    saving = misses - misses[-1]
    ok = np.flatnonzero(saving <= share * misses)
    return int(ordered["pool_pages"].to_numpy()[ok[0]])


def summary(
    hist: np.ndarray, curve: pd.DataFrame, distinct: int, share: float, duration_s: float | None
) -> dict:
    """Headline figures for a trace: sizes of the working set and the knee, reads at both."""
    logical, prefetch = int(hist[0].sum()), int(hist[1].sum())
    return {
        "references": logical + prefetch,
        "logical_reads": logical,
        "prefetch_requests": prefetch,
        "distinct_pages": int(distinct),
        "compulsory_misses": int(hist[0, 0] + hist[1, 0]),
        "working_set_pages": working_set_pages(hist),
        "knee_pages": knee(curve, share),
        "knee_share": share,
        "duration_s": duration_s,
    }
