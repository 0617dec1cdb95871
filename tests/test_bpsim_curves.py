"""Hit ratios (application vs system), reads per second, knee, working set, sizes."""

import numpy as np
import pandas as pd
import pytest

from tunelab.bpsim import generators
from tunelab.bpsim.curves import SizesError, knee, lru_curve, parse_sizes, working_set_pages
from tunelab.bpsim.stackdist import distance_histograms


def test_prefetched_block_read_once_gives_full_app_and_zero_system_hit_ratio():
    # one prefetch brings 32 pages in, then the application reads each of them once
    pages = np.tile(np.arange(32), 2)
    flags = np.r_[np.ones(32, bool), np.zeros(32, bool)]
    row = lru_curve(pages, flags, sizes=[64]).iloc[0]
    assert row.logical_reads == 32 and row.prefetch_requests == 32
    assert row.sync_reads == 0 and row.prefetch_reads == 32
    assert row.hit_ratio_app == 1.0
    assert row.hit_ratio_sys == 0.0


def test_prefetched_pages_never_read_make_the_system_hit_ratio_negative():
    # 64 pages prefetched, the application reads only the first 32
    pages = np.r_[np.arange(64), np.arange(32)]
    flags = np.r_[np.ones(64, bool), np.zeros(32, bool)]
    row = lru_curve(pages, flags, sizes=[100]).iloc[0]
    assert row.hit_ratio_app == 1.0
    assert row.hit_ratio_sys == pytest.approx((32 - 64) / 32)
    # a pool too small to keep the prefetched pages until they are read: synchronous reads
    small = lru_curve(pages, flags, sizes=[16]).iloc[0]
    assert small.sync_reads == 32
    assert small.hit_ratio_app == 0.0


def test_without_prefetch_the_three_ratios_agree_and_reads_per_second_use_the_duration():
    trace = generators.zipf(500, 20_000, 1.0, seed=2)
    curve = lru_curve(trace.pages, sizes=[1, 50, 500], duration_s=4.0)
    assert np.allclose(curve["hit_ratio"], curve["hit_ratio_app"])
    assert np.allclose(curve["hit_ratio"], curve["hit_ratio_sys"])
    assert np.allclose(curve["physical_reads_per_s"], curve["misses"] / 4.0)
    assert (np.diff(curve["misses"]) <= 0).all()
    assert lru_curve(trace.pages, sizes=[5])["physical_reads_per_s"].isna().all()


def test_working_set_is_the_smallest_pool_with_only_compulsory_misses():
    trace = generators.sequential_scan(pages=300, references=900)
    hist, distinct = distance_histograms(trace.pages)
    ws = working_set_pages(hist)
    curve = lru_curve(trace.pages)
    assert ws == distinct == 300
    assert curve.set_index("pool_pages").loc[ws, "misses"] == 300
    assert curve.set_index("pool_pages").loc[ws - 1, "misses"] == 900


def test_knee_is_the_smallest_pool_where_the_rest_saves_less_than_the_share():
    curve = pd.DataFrame({"pool_pages": [10, 20, 30, 40, 50], "misses": [1000, 400, 130, 105, 100]})
    # at 30 pages the remaining saving is 30 of 130 reads (23%); at 40 it is 5 of 105 (4.8%)
    assert knee(curve, 0.05) == 40
    assert knee(curve, 0.25) == 30
    assert knee(curve, 0.0) == 50
    # a scan mixed with random access: no pool below the scan's size is a knee
    trace = generators.scan_mixed(200, 3000, 60_000, scan_share=0.5, prefetch_block=0, seed=4)
    full = lru_curve(trace.pages)
    assert knee(full, 0.05) > 3000


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("all", [1, 2, 3, 4, 5]), ("3,1,3", [1, 3]), ("2:9:3", [2, 5, 8]), ("log:3", [1, 2, 5])],
)
def test_parse_sizes(spec, expected):
    assert parse_sizes(spec, 5).tolist() == expected


@pytest.mark.parametrize("spec", ["", "0", "a,b", "5:1:0", "log:0", "1:2:3:4", "-3"])
def test_parse_sizes_rejects(spec):
    with pytest.raises(SizesError, match="--sizes"):
        parse_sizes(spec, 10)
