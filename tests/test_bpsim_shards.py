"""SHARDS sampling: error within the stated bound on Zipf traces."""

import numpy as np
import pytest

from tunelab.bpsim import generators
from tunelab.bpsim.curves import lru_curve
from tunelab.bpsim.shards import BOUND_COVERAGE, sample, sample_mask, shards_curve, shards_error


@pytest.fixture(scope="module")
def zipf_traces():
    return {
        (pages, alpha): generators.zipf(pages, refs, alpha, seed=pages + int(alpha * 10))
        for pages, refs, alpha in [
            (100_000, 2_000_000, 0.8),
            (50_000, 2_000_000, 1.0),
            (20_000, 1_000_000, 0.7),
        ]
    }


@pytest.mark.parametrize("key", [(100_000, 0.8), (50_000, 1.0), (20_000, 0.7)])
@pytest.mark.parametrize("rate", [0.1, 0.01])
def test_sampling_error_within_stated_bound_on_zipf(zipf_traces, key, rate):
    trace = zipf_traces[key]
    distinct = len(np.unique(trace.pages))
    sizes = np.unique(np.linspace(1, distinct, 200).astype(int))
    exact = lru_curve(trace.pages, sizes=sizes)
    for salt in range(4):
        sampled, info = shards_curve(trace, rate, sizes, salt=salt)
        assert info["sampled_pages"] < 3 * rate * distinct  # it is a sample
        err = shards_error(sampled, exact)
        assert err["sizes"] > 50
        assert err["within_bound"] >= BOUND_COVERAGE, err
        # the bound is informative: typical errors are a few hundredths at most
        assert err["mae"] < 0.05
        assert sampled.loc[sampled["resolved"], "miss_ratio_se"].mean() < 0.1


def test_rate_one_is_exact():
    trace = generators.zipf(2000, 50_000, 0.9, seed=3)
    sizes = np.arange(1, 2001)
    sampled, info = shards_curve(trace, 1.0, sizes)
    exact = lru_curve(trace.pages, sizes=sizes)
    assert (sampled["misses"].to_numpy() == exact["misses"].to_numpy()).all()
    assert np.allclose(sampled["miss_ratio_se"], 0)
    assert info["sampled_pages"] == len(np.unique(trace.pages))


def test_sample_keeps_whole_pages_and_about_the_rate():
    trace = generators.uniform(100_000, 400_000, seed=5)
    mask = sample_mask(trace.pages, 0.05, salt=9)
    chosen = set(np.unique(trace.pages[mask]).tolist())
    left_out = set(np.unique(trace.pages[~mask]).tolist())
    assert not chosen & left_out  # a page is in the sample with all its references or not
    assert 0.04 < len(chosen) / 100_000 < 0.06
    s = sample(trace, 0.05, salt=9)
    assert abs(s.estimated_distinct - 100_000) < 0.2 * 100_000


def test_bad_rate():
    trace = generators.uniform(10, 100)
    with pytest.raises(ValueError, match="within"):
        shards_curve(trace, 0.0)
