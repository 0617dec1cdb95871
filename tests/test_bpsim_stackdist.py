"""The one-pass LRU curve against brute-force LRU simulation."""

from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunelab.bpsim import generators
from tunelab.bpsim.curves import lru_curve, working_set_pages
from tunelab.bpsim.policies import naive_lru_misses
from tunelab.bpsim.stackdist import (
    DIRECT_LIMIT,
    _direct_universe,
    dense_ids,
    distance_histograms,
    stack_distances,
)


def brute_lru(pages, flags, size):
    """(getpage misses, prefetch misses) of an LRU pool of ``size`` pages, by simulation."""
    pool: OrderedDict = OrderedDict()
    misses = [0, 0]
    for page, flag in zip(pages, flags, strict=True):
        if page in pool:
            pool.move_to_end(page)
            continue
        misses[int(flag)] += 1
        if len(pool) == size:
            pool.popitem(last=False)
        pool[page] = True
    return misses


def brute_distances(pages):
    stack: list = []
    out = []
    for page in pages:
        if page in stack:
            i = stack.index(page)
            out.append(len(stack) - i)
            stack.pop(i)
        else:
            out.append(0)
        stack.append(page)
    return out


traces = st.lists(st.integers(0, 40), min_size=1, max_size=400)


@settings(max_examples=150, deadline=None)
@given(pages=traces, data=st.data())
def test_curve_equals_brute_force_lru_at_every_size(pages, data):
    flags = data.draw(st.lists(st.booleans(), min_size=len(pages), max_size=len(pages)))
    distinct = len(set(pages))
    curve = lru_curve(np.array(pages), np.array(flags), sizes=np.arange(1, distinct + 3))
    for row in curve.itertuples():
        sync, pre = brute_lru(pages, flags, row.pool_pages)
        assert (row.sync_reads, row.prefetch_reads) == (sync, pre)
        assert row.misses == sync + pre
        assert row.hits + row.misses == len(pages)


@settings(max_examples=100, deadline=None)
@given(pages=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=300), spread=st.booleans())
def test_distances_equal_brute_force_for_any_page_numbers(pages, spread):
    # large page numbers take the dense-id path; small ones the direct 32-bit path
    arr = np.array(pages, dtype=np.uint64)
    if not spread:
        arr = arr % np.uint64(17)
    assert stack_distances(arr).tolist() == brute_distances(arr.tolist())


def test_long_random_trace_crosses_compactions_and_rehashes():
    # far more references than the initial time axis and hash table hold
    rng = np.random.default_rng(7)
    pages = rng.integers(0, 3000, 60_000)
    pages[::7] = rng.integers(0, 50, pages[::7].size)  # some hot pages, short reuse
    expected = brute_distances(pages[:6000].tolist())
    assert stack_distances(pages)[:6000].tolist() == expected
    curve = lru_curve(pages, sizes=[1, 17, 400, 2999, 3000, 5000])
    for row in curve.itertuples():
        assert row.misses == brute_lru(pages.tolist(), [False] * pages.size, row.pool_pages)[0]
    hashed, _ = distance_histograms(pages, direct=False)  # the hash map grows and rehashes
    assert (hashed == distance_histograms(pages)[0]).all()


@settings(max_examples=100, deadline=None)
@given(pages=traces, data=st.data())
def test_direct_table_and_hash_map_give_the_same_histograms(pages, data):
    flags = np.array(data.draw(st.lists(st.booleans(), min_size=len(pages), max_size=len(pages))))
    arr = np.array(pages, dtype=np.uint32)
    direct, m1 = distance_histograms(arr, flags, direct=True)
    hashed, m2 = distance_histograms(arr, flags, direct=False)
    assert m1 == m2 and direct.tolist() == hashed.tolist()
    sync = [brute_lru(pages, flags.tolist(), size)[0] for size in (1, 3)]
    assert [int(direct[0, 0] + direct[0, size + 1 :].sum()) for size in (1, 3)] == sync


def test_direct_table_through_compactions_with_prefetch_flags():
    # a Zipf trace long enough to compact the time axis many times, with a third of the
    # references flagged as prefetches: both kernels agree on every count of both classes
    trace = generators.zipf(50_000, 400_000, 0.9, 3)
    flags = np.random.default_rng(5).random(trace.pages.size) < 0.3
    direct, m1 = distance_histograms(trace.pages, flags, direct=True)
    hashed, m2 = distance_histograms(trace.pages, flags, direct=False)
    assert m1 == m2 > 10_000
    assert (direct == hashed).all()


def test_keys_are_indexed_directly_only_when_their_range_is_small():
    n = 1000
    assert _direct_universe(np.arange(n, dtype=np.uint32)) == n
    # a range up to four keys per reference (or 65,536) is direct; beyond it the hash map
    assert _direct_universe(np.array([0, 65_535], dtype=np.uint32)) == 65_536
    assert _direct_universe(np.array([0, 70_000], dtype=np.uint32)) == 0
    big = np.zeros(DIRECT_LIMIT // 2, np.uint32)
    big[-1] = DIRECT_LIMIT - 1
    assert _direct_universe(big) == DIRECT_LIMIT
    big[-1] = DIRECT_LIMIT
    assert _direct_universe(big) == 0
    assert _direct_universe(np.zeros(0, np.uint32)) == 0
    # sparse keys (hash map) give the same distances as their dense ids (direct)
    sparse = np.array([7, 4_000_000_000, 7, 123_456_789, 4_000_000_000, 7], dtype=np.uint64)
    ids, _ = dense_ids(sparse)
    assert stack_distances(sparse).tolist() == stack_distances(ids).tolist() == [0, 0, 2, 0, 3, 3]


def test_every_distance_across_several_levels_of_counts():
    # 0..M-1 twice, then M-1..0: the second pass re-references at distance M, the third at
    # every distance 1..M, from the newest position to the oldest; the time axis then spans
    # many blocks and more than one super-block (2**21 positions each)
    m = 1_500_000
    forward = np.arange(m, dtype=np.uint32)
    d = stack_distances(np.concatenate([forward, forward, forward[::-1]]))
    assert (d[:m] == 0).all()
    assert (d[m : 2 * m] == m).all()
    assert (d[2 * m :] == np.arange(1, m + 1)).all()


def test_large_random_trace_matches_per_size_lru_simulation():
    # many distinct pages and reuse intervals of every length, through several compactions
    rng = np.random.default_rng(11)
    pages = np.concatenate([rng.integers(0, 700_000, 1_500_000), rng.integers(0, 2_000, 300_000)])
    rng.shuffle(pages)
    ids, m = dense_ids(pages)
    sizes = [1, 1_000, 65_537, 400_000, m - 1, m]
    curve = lru_curve(pages, sizes=sizes)
    assert curve["misses"].tolist() == naive_lru_misses(ids, m, sizes).tolist()


def test_cyclic_scan_longer_than_pool_gets_no_hits():
    trace = generators.sequential_scan(pages=500, references=5000)
    curve = lru_curve(trace.pages, sizes=[1, 10, 250, 499, 500])
    by_size = curve.set_index("pool_pages")
    assert (by_size.loc[[1, 10, 250, 499], "hits"] == 0).all()
    # once the whole scan fits, only the first pass misses
    assert by_size.loc[500, "misses"] == 500


def test_histogram_counts_first_references_and_distinct_pages():
    pages = np.array([5, 6, 5, 7, 6, 6, 5])
    hist, distinct = distance_histograms(pages)
    assert distinct == 3
    assert hist[0, 0] == 3  # first references of 5, 6, 7
    assert hist[0].sum() == pages.size
    assert hist[0, 1] == 1  # 6 right after 6
    assert working_set_pages(hist) == 3


def test_dense_ids_follow_first_reference_order():
    ids, m = dense_ids(np.array([40, 10, 40, 99, 10]))
    assert m == 3
    assert ids.tolist() == [0, 1, 0, 2, 1]


def test_empty_and_bad_input():
    hist, distinct = distance_histograms(np.array([], dtype=np.uint32))
    assert distinct == 0 and hist.sum() == 0
    with pytest.raises(ValueError, match="non-negative"):
        distance_histograms(np.array([3, -1]))
    with pytest.raises(ValueError, match="one entry per reference"):
        distance_histograms(np.array([1, 2]), prefetch=np.array([True]))
