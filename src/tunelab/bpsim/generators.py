"""Synthetic page-reference traces, all seeded and reproducible.

- ``sequential_scan``: a table scanned front to back, again and again (a cyclic scan);
- ``uniform``: random access spread evenly over the pages;
- ``zipf``: random access where page of popularity rank r is chosen with weight 1/r**alpha
  (pages shuffled so popularity is unrelated to page number);
- ``scan_mixed``: the talk's monopolised pool, a hot randomly read object sharing the pool
  with a large object read by sequential prefetch; each prefetch brings a block of pages in
  (prefetch rows) before the scan reads them (getpages).
"""

from __future__ import annotations

import numpy as np

from tunelab.bpsim.traces import Trace


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


def sequential_scan(pages: int, references: int, first_page: int = 0) -> Trace:
    """Pages first_page .. first_page+pages-1 in order, repeated up to ``references`` rows."""
    _check_positive(pages=pages, references=references)
    seq = first_page + (np.arange(references, dtype=np.uint64) % np.uint64(pages))
    return Trace(seq, None, {"generator": "sequential_scan", "pages": pages})


def uniform(pages: int, references: int, seed: int = 0, first_page: int = 0) -> Trace:
    _check_positive(pages=pages, references=references)
    rng = np.random.default_rng(seed)
    seq = rng.integers(0, pages, references, dtype=np.uint64) + np.uint64(first_page)
    return Trace(seq, None, {"generator": "uniform", "pages": pages, "seed": seed})


def zipf_ranks(pages: int, references: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """Popularity ranks 0..pages-1 drawn with P(rank r) proportional to 1/(r+1)**alpha."""
    weights = np.arange(1, pages + 1, dtype=np.float64) ** -float(alpha)
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(references)), pages - 1)


def zipf(
    pages: int, references: int, alpha: float = 0.9, seed: int = 0, first_page: int = 0
) -> Trace:
    _check_positive(pages=pages, references=references)
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    rng = np.random.default_rng(seed)
    ranks = zipf_ranks(pages, references, alpha, rng)
    page_of_rank = rng.permutation(pages).astype(np.uint64) + np.uint64(first_page)
    meta = {"generator": "zipf", "pages": pages, "alpha": alpha, "seed": seed}
    return Trace(page_of_rank[ranks], None, meta)


def scan_mixed(
    random_pages: int,
    scan_pages: int,
    references: int,
    scan_share: float = 0.5,
    prefetch_block: int = 32,
    alpha: float = 0.0,
    seed: int = 0,
) -> Trace:
    """A randomly read object (pages 0..random_pages-1) and a scanned one after it.

    About ``scan_share`` of the getpages belong to the scan, which walks its object
    cyclically in blocks of ``prefetch_block`` pages; every block is first brought in by
    prefetch (one prefetch row per page), then read. ``prefetch_block=0`` makes the scan
    plain getpages. Random reads pick pages uniformly (``alpha=0``) or Zipf-skewed.
    Returns about ``references`` getpages plus the prefetch rows.
    """
    _check_positive(random_pages=random_pages, scan_pages=scan_pages, references=references)
    if not 0 <= scan_share <= 1:
        raise ValueError(f"scan_share must be within [0, 1], got {scan_share}")
    if prefetch_block < 0:
        raise ValueError(f"prefetch_block must be >= 0, got {prefetch_block}")
    rng = np.random.default_rng(seed)
    block = max(prefetch_block, 1)
    n_blocks = int(round(references * scan_share / block))
    n_random = max(references - n_blocks * block, 0)
    # interleave: each unit is one random getpage or one scan block, in random order
    is_block = np.zeros(n_random + n_blocks, dtype=bool)
    is_block[rng.choice(is_block.size, n_blocks, replace=False)] = True
    rows_per_block = block * (2 if prefetch_block else 1)
    unit_rows = np.where(is_block, rows_per_block, 1)
    starts = np.concatenate(([0], np.cumsum(unit_rows)[:-1]))
    total = int(unit_rows.sum())
    pages = np.empty(total, dtype=np.uint64)
    flags = np.zeros(total, dtype=bool)

    random_starts = starts[~is_block]
    if alpha > 0:
        ranks = zipf_ranks(random_pages, n_random, alpha, rng)
        pages[random_starts] = rng.permutation(random_pages).astype(np.uint64)[ranks]
    else:
        pages[random_starts] = rng.integers(0, random_pages, n_random, dtype=np.uint64)

    block_starts = starts[is_block]
    offsets = np.arange(block)
    first = (np.arange(n_blocks) * block)[:, None] + offsets[None, :]
    scan_page = np.uint64(random_pages) + (first % scan_pages).astype(np.uint64)
    if prefetch_block:
        pages[(block_starts[:, None] + offsets).ravel()] = scan_page.ravel()
        flags[(block_starts[:, None] + offsets).ravel()] = True
        pages[(block_starts[:, None] + block + offsets).ravel()] = scan_page.ravel()
    else:
        pages[(block_starts[:, None] + offsets).ravel()] = scan_page.ravel()
    meta = {
        "generator": "scan_mixed",
        "random_pages": random_pages,
        "scan_pages": scan_pages,
        "scan_share": scan_share,
        "prefetch_block": prefetch_block,
        "alpha": alpha,
        "seed": seed,
    }
    return Trace(pages, flags if prefetch_block else None, meta)
