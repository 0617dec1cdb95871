"""Speed of the exact all-sizes LRU curve against its previous kernel and per-size LRU runs.

    python benchmarks/bpsim_bench.py [--references 10000000] [--pages 1000000] [--alpha 0.9]

Prints references per second for the exact curve over every pool size (one pass, stack
distances; with the page keys indexed directly, and with the hash map the kernel uses for
sparse keys), for the previous kernel (``bpsim_previous_kernel.py``, the same curve by a
Fenwick tree), checking that all three give the same curve, and for the baseline (a plain
O(1)-per-reference LRU simulation run once per pool size, for 100 sizes), with the ratios.
All are compiled numba code, run on one core; JIT compilation is excluded (all are warmed up
first); every exact rate includes turning the histogram into the curve table. The baseline
gets its page ids mapped once, untimed (in its favour). With --prefix it runs on the first
references only and its time is scaled to the whole trace (its cost is linear in the
references); the output says so.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
from bpsim_previous_kernel import previous_scan

from tunelab.bpsim import generators
from tunelab.bpsim.curves import curve_from_histograms
from tunelab.bpsim.policies import naive_lru_misses
from tunelab.bpsim.stackdist import (
    _NO_DIST,
    _NO_FLAGS,
    _direct_universe,
    _new_hist,
    dense_ids,
    distance_histograms,
)


def _best(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def state_bytes(distinct: int) -> int:
    """Working memory of the hash-map kernel for ``distinct`` pages (grows by doubling)."""
    slots = 1 << max(12, int(np.ceil(np.log2(2 * max(distinct, 1)))))
    axis = 4 * distinct + 2**15
    hist = 2 * 4 * (1 << int(np.ceil(np.log2(distinct + 2))))  # int32 counts
    return 8 * slots + axis // 8 + 2 * (axis // 512) + hist


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--references", type=int, default=10_000_000)
    p.add_argument("--pages", type=int, default=1_000_000, help="Zipf universe (pages)")
    p.add_argument("--alpha", type=float, default=0.9, help="Zipf exponent")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sizes", type=int, default=100, help="pool sizes for the baseline")
    p.add_argument(
        "--prefix", type=int, default=0, help="run the baseline on this many references (0: all)"
    )
    p.add_argument("--repeat", type=int, default=3, help="timings per method (best kept)")
    args = p.parse_args()

    trace = generators.zipf(args.pages, args.references, args.alpha, args.seed)
    pages = trace.pages.astype(np.uint32)
    n = pages.size
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}; one core used"
    )
    print(
        f"trace: Zipf alpha={args.alpha} over {args.pages} pages, {n} references, seed {args.seed}"
    )

    # warm up (JIT compile or load from cache) on a small slice
    distance_histograms(pages[:1000])
    distance_histograms(pages[:1000], direct=False)
    previous_scan(pages[:1000], _NO_FLAGS, _NO_DIST, _new_hist(pages[:1000]), 0)
    ids_small, m_small = dense_ids(pages[:1000])
    naive_lru_misses(ids_small, m_small, [1, 10])

    def exact(direct: bool):
        hist, distinct = distance_histograms(pages, direct=direct)
        return curve_from_histograms(hist, np.arange(1, distinct + 1)), distinct

    def previous():
        hist, distinct = previous_scan(
            pages, _NO_FLAGS, _NO_DIST, _new_hist(pages), _direct_universe(pages)
        )
        return curve_from_histograms(hist.astype(np.int64), np.arange(1, distinct + 1))

    t_prev, curve_prev = _best(previous, args.repeat)
    t_hash, (curve_hash, distinct) = _best(lambda: exact(False), args.repeat)
    t_exact, (curve, _) = _best(lambda: exact(True), args.repeat)
    rate_exact = n / t_exact
    print(
        f"distinct pages: {distinct}; hash-map kernel state ~"
        f"{state_bytes(distinct) / 2**20:.1f} MiB "
        f"({state_bytes(distinct) / distinct:.0f} bytes per distinct page)"
    )
    print(
        f"exact LRU curve, all {distinct} sizes, one pass, hash map: {t_hash:.3f} s "
        f"(best of {args.repeat}) = {n / t_hash / 1e6:.2f} M references/s"
    )
    print(
        f"exact LRU curve, all {distinct} sizes, one pass, keys indexed directly "
        f"(range {int(pages.max()) + 1}): {t_exact:.3f} s (best of {args.repeat}) = "
        f"{rate_exact / 1e6:.2f} M references/s; {t_hash / t_exact:.2f}x the hash map"
    )
    print(
        f"previous kernel (Fenwick tree), keys indexed directly: {t_prev:.3f} s "
        f"(best of {args.repeat}) = {n / t_prev / 1e6:.2f} M references/s"
    )
    print(f"ratio (exact, keys indexed directly / previous kernel): {t_prev / t_exact:.2f}x")
    if not curve.equals(curve_hash):
        raise SystemExit("the direct and the hash-map kernels disagree")
    if not curve.equals(curve_prev):
        raise SystemExit("the current and the previous kernels disagree")

    prefix = pages[: args.prefix] if 0 < args.prefix < n else pages
    ids, m = dense_ids(prefix)
    sizes = np.unique(np.linspace(1, m, args.sizes).round().astype(np.int64))
    t_naive, naive = _best(lambda: naive_lru_misses(ids, m, sizes), 1)
    scale = n / prefix.size
    t_naive_full = t_naive * scale
    rate_naive = n / t_naive_full
    where = (
        "the whole trace"
        if prefix.size == n
        else f"the first {prefix.size} references, scaled x{scale:g} to {t_naive_full:.1f} s"
    )
    print(
        f"baseline, plain LRU once per size for {sizes.size} sizes: {t_naive:.2f} s on "
        f"{where} = {rate_naive / 1e6:.3f} M references/s "
        f"({prefix.size * sizes.size / t_naive / 1e6:.0f} M simulated requests/s per size)"
    )

    # the two methods agree on the prefix
    hist_p, _ = distance_histograms(prefix)
    check = curve_from_histograms(hist_p, sizes)["misses"].to_numpy()
    agree = bool((check == naive).all())
    print(f"check: baseline misses equal the one-pass curve at all {sizes.size} sizes: {agree}")
    print(f"ratio (exact all-sizes rate / baseline rate): {rate_exact / rate_naive:.0f}x")
    if not agree:
        raise SystemExit("the baseline and the one-pass curve disagree")


if __name__ == "__main__":
    main()
