"""Replacement policies simulated one pool size at a time: LRU, CLOCK, LRU with VPSEQT.

Every trace row is a request to the pool and touches the page (a prefetch row for a page
already in the pool counts as a reference, as it does in the stack-distance curve, so the
``lru`` policy here and the one-pass curve agree exactly). The prefetch flag decides how a
read is counted (synchronous or prefetch) and, for ``lru-seqthreshold``, which pages count as
sequential.

- ``lru``: evict the least recently used page.
- ``clock``: second chance; every reference sets the page's bit, the hand clears set bits
  and evicts the first page whose bit is clear.
- ``lru-seqthreshold``: a cap on the buffers sequential pages may hold, like DB2's
  sequential steal threshold (VPSEQT). Pages read by prefetch are sequential, pages read by
  a getpage random, for as long as they stay in the pool. Sequential pages never hold more
  than ``floor(share * pool)`` buffers: a sequential read when they hold that many replaces
  the least recently used sequential page (even if free buffers remain, so a scan cannot
  fill an empty pool either); any other read that needs a buffer takes the least recently
  used page of either kind. With share 0 prefetched pages are not kept; with share 1 the
  policy is plain LRU. (DB2 checks VPSEQT when it steals a buffer for a sequential page.)
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from numba import njit

from tunelab.bpsim.curves import curve_frame, misses_from_histogram
from tunelab.bpsim.stackdist import dense_ids, distance_histograms
from tunelab.bpsim.traces import Trace

POLICIES = ("lru", "clock", "lru-seqthreshold")


@njit(cache=True)
def _lru_one(ids, flags, m, size):
    """Misses (getpage, prefetch) of an LRU pool of ``size`` pages; a linked list, O(1)/row."""
    n = ids.shape[0]
    use_flags = flags.shape[0] == n
    head = m
    prev = np.empty(m + 1, np.int32)
    nxt = np.empty(m + 1, np.int32)
    prev[head] = head
    nxt[head] = head
    resident = np.zeros(m, np.uint8)
    count = 0
    miss_sync = 0
    miss_pre = 0
    for k in range(n):
        x = ids[k]
        if resident[x]:
            p = prev[x]
            q = nxt[x]
            nxt[p] = q
            prev[q] = p
        else:
            if use_flags and flags[k] != 0:
                miss_pre += 1
            else:
                miss_sync += 1
            if count == size:
                victim = prev[head]
                p = prev[victim]
                nxt[p] = head
                prev[head] = p
                resident[victim] = 0
            else:
                count += 1
            resident[x] = 1
        first = nxt[head]
        nxt[x] = first
        prev[first] = x
        prev[x] = head
        nxt[head] = x
    return miss_sync, miss_pre


@njit(cache=True)
def _clock_one(ids, flags, m, size):
    n = ids.shape[0]
    use_flags = flags.shape[0] == n
    frame_of = np.full(m, -1, np.int32)
    page_in = np.empty(size, np.int32)
    ref = np.zeros(size, np.uint8)
    hand = 0
    filled = 0
    miss_sync = 0
    miss_pre = 0
    for k in range(n):
        x = ids[k]
        f = frame_of[x]
        if f < 0:
            if use_flags and flags[k] != 0:
                miss_pre += 1
            else:
                miss_sync += 1
            if filled < size:
                f = filled
                filled += 1
            else:
                while ref[hand]:
                    ref[hand] = 0
                    hand += 1
                    if hand == size:
                        hand = 0
                f = hand
                frame_of[page_in[f]] = -1
                hand += 1
                if hand == size:
                    hand = 0
            page_in[f] = x
            frame_of[x] = f
        ref[f] = 1
    return miss_sync, miss_pre


@njit(cache=True)
def _lru_seq_one(ids, flags, m, size, seq_cap):
    n = ids.shape[0]
    use_flags = flags.shape[0] == n
    heads = np.array([m, m + 1])  # list sentinels: 0 random pages, 1 sequential pages
    prev = np.empty(m + 2, np.int32)
    nxt = np.empty(m + 2, np.int32)
    for c in range(2):
        prev[heads[c]] = heads[c]
        nxt[heads[c]] = heads[c]
    resident = np.zeros(m, np.uint8)
    klass = np.zeros(m, np.uint8)
    stamp = np.zeros(m, np.int64)
    count = 0
    nseq = 0
    miss_sync = 0
    miss_pre = 0
    for k in range(n):
        x = ids[k]
        seq = use_flags and flags[k] != 0
        if resident[x]:
            p = prev[x]
            q = nxt[x]
            nxt[p] = q
            prev[q] = p
        else:
            if seq:
                miss_pre += 1
                if seq_cap == 0:
                    continue  # VPSEQT=0: a prefetched page is not kept
            else:
                miss_sync += 1
            tail_r = prev[heads[0]]
            tail_s = prev[heads[1]]
            if seq and nseq >= seq_cap:
                victim = tail_s  # sequential pages are at their cap: replace the oldest
            elif count == size:
                # the least recently used page of either kind
                steal_seq = tail_r == heads[0]
                if not steal_seq and tail_s != heads[1]:
                    steal_seq = stamp[tail_s] < stamp[tail_r]
                victim = tail_s if steal_seq else tail_r
            else:
                victim = -1  # a free buffer
            if victim >= 0:
                p = prev[victim]
                q = nxt[victim]
                nxt[p] = q
                prev[q] = p
                resident[victim] = 0
                if klass[victim] == 1:
                    nseq -= 1
                count -= 1
            resident[x] = 1
            klass[x] = 1 if seq else 0
            if seq:
                nseq += 1
            count += 1
        h = heads[klass[x]]
        first = nxt[h]
        nxt[x] = first
        prev[first] = x
        prev[x] = h
        nxt[h] = x
        stamp[x] = k
    return miss_sync, miss_pre


def _flags(trace: Trace) -> np.ndarray:
    if trace.prefetch is None:
        return np.zeros(0, np.uint8)
    return trace.prefetch.astype(np.uint8)


def simulate(
    trace: Trace, size: int, policy: str = "lru", seq_threshold: float = 0.8, ids=None
) -> tuple[int, int]:
    """(synchronous reads, prefetch reads) of one pool size under ``policy``."""
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r}: allowed values are {', '.join(POLICIES)}")
    if size < 1:
        raise ValueError("pool size must be >= 1")
    if not 0 <= seq_threshold <= 1:
        raise ValueError("sequential threshold must be within [0, 1]")
    if ids is None:
        ids = dense_ids(trace.pages)
    dense, m = ids
    flags = _flags(trace)
    if len(trace) == 0:
        return 0, 0
    if policy == "lru":
        sync, pre = _lru_one(dense, flags, m, int(size))
    elif policy == "clock":
        sync, pre = _clock_one(dense, flags, m, int(size))
    else:
        seq_cap = math.floor(seq_threshold * size)
        sync, pre = _lru_seq_one(dense, flags, m, int(size), int(seq_cap))
    return int(sync), int(pre)


def policy_curve(
    trace: Trace,
    sizes,
    policy: str = "lru",
    seq_threshold: float = 0.8,
    duration_s: float | None = None,
) -> pd.DataFrame:
    """The curve table at ``sizes`` under ``policy`` (``lru`` in one pass; others per size)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    logical = int(len(trace) - (trace.prefetch.sum() if trace.prefetch is not None else 0))
    prefetch_rows = len(trace) - logical
    if policy == "lru":
        hist, _ = distance_histograms(trace.pages, trace.prefetch)
        sync = misses_from_histogram(hist[0], sizes)
        pre = misses_from_histogram(hist[1], sizes)
    else:
        ids = dense_ids(trace.pages)
        results = [simulate(trace, int(s), policy, seq_threshold, ids) for s in sizes]
        sync = np.array([r[0] for r in results], dtype=np.int64)
        pre = np.array([r[1] for r in results], dtype=np.int64)
    return curve_frame(sizes, sync, pre, logical, prefetch_rows, duration_s)


def naive_lru_misses(ids: np.ndarray, distinct: int, sizes) -> np.ndarray:
    """Baseline: one plain LRU simulation per pool size (misses per size).

    ``ids`` are dense page ids below ``distinct`` (as from ``dense_ids``).
    """
    ids = np.ascontiguousarray(ids, dtype=np.int32)
    if ids.size and (ids.min() < 0 or ids.max() >= distinct):
        raise ValueError("ids must be dense page ids in [0, distinct)")
    if min(sizes, default=1) < 1:
        raise ValueError("pool sizes must be >= 1")
    flags = np.zeros(0, np.uint8)
    return np.array([sum(_lru_one(ids, flags, distinct, int(s))) for s in sizes], np.int64)
