"""Speed of the exact all-sizes LRU curve against a per-size LRU baseline, in one run.

    python benchmarks/bpsim_bench.py [--references 10000000] [--pages 1000000] [--alpha 0.9]

Prints references per second for the exact curve over every pool size (one pass, stack
distances; with the page keys indexed directly, and with the hash map the kernel uses for
sparse keys, the earlier implementation, checking that both give the same curve), for the
baseline (a plain O(1)-per-reference LRU simulation run once per pool size, for 100 sizes),
and their ratio. Both are compiled numba code, run on one core; JIT compilation is excluded
(both are warmed up first). The baseline gets its page ids mapped once, untimed (in its
favour). With --prefix it runs on the first references only and its time is scaled to the
whole trace (its cost is linear in the references); the output says so.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from tunelab.bpsim import generators
from tunelab.bpsim.curves import curve_from_histograms
from tunelab.bpsim.policies import naive_lru_misses
from tunelab.bpsim.stackdist import dense_ids, distance_histograms


def _best(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def state_bytes(distinct: int) -> int:
    """Working memory of the one-pass kernel for ``distinct`` pages (grows by doubling)."""
    slots = 1 << max(12, int(np.ceil(np.log2(2 * max(distinct, 1)))))
    axis = 4 * distinct + 512
    hist = 2 * 4 * (1 << int(np.ceil(np.log2(distinct + 2))))  # int32 counts
    return 8 * slots + axis // 8 + 4 * (axis // 512) + hist


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
    ids_small, m_small = dense_ids(pages[:1000])
    naive_lru_misses(ids_small, m_small, [1, 10])

    def exact(direct: bool):
        hist, distinct = distance_histograms(pages, direct=direct)
        return curve_from_histograms(hist, np.arange(1, distinct + 1)), distinct

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
    if not curve.equals(curve_hash):
        raise SystemExit("the direct and the hash-map kernels disagree")

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
