"""The per-point statistics: median and order-statistic interval."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import quantile_test

from tunelab.report import stats

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=1, max_size=60))
def test_interval_contains_median_and_is_deterministic(values):
    a = stats.median_interval(values)
    b = stats.median_interval(list(values))
    assert a == b
    assert a.n == len(values)
    assert a.low <= a.median <= a.high
    assert a.median == pytest.approx(float(np.median(values)))


@settings(max_examples=100, deadline=None)
@given(st.lists(finite, min_size=6, max_size=60))
def test_interval_matches_scipy_quantile_test_from_six_repetitions(values):
    mi = stats.median_interval(values)
    ci = quantile_test(values, q=float(np.median(values)), p=0.5).confidence_interval(0.95)
    assert (mi.low, mi.high) == (ci.low, ci.high)
    assert mi.reaches(0.95)


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_too_few_repetitions_give_the_range_with_its_true_coverage(n):
    values = [float(v) for v in range(10, 10 + n)][::-1]
    mi = stats.median_interval(values)
    assert (mi.low, mi.high) == (min(values), max(values))
    assert mi.coverage == pytest.approx(1 - 2 * 0.5**n)
    assert not mi.reaches(0.95)


def test_exact_coverage_of_known_ranks():
    # n = 10: the 2nd smallest to the 2nd largest, coverage 1 - 2 * (1 + 10) / 1024.
    assert stats.order_ranks(10) == (2, 9)
    assert stats.coverage(10, 2) == pytest.approx(1 - 22 / 1024)
    assert stats.order_ranks(1) == (1, 1)
    assert stats.median_interval([4.0]).coverage == 0.0


def test_non_finite_values_are_left_out():
    mi = stats.median_interval([1.0, math.nan, 3.0, math.inf])
    assert mi.n == 2 and mi.median == 2.0
    assert math.isnan(stats.median_interval([]).median)


def test_summarize_groups_points_sorted_and_keeps_missing_levels():
    frame = pd.DataFrame(
        {
            "knob_x": [2, 2, 2, 1, 1, 1, np.nan],
            "elapsed_s": [0.3, 0.1, 0.2, 1.0, 3.0, 2.0, 5.0],
        }
    )
    s = stats.summarize(frame, ["knob_x"], "elapsed_s")
    assert list(s["knob_x"].iloc[:2]) == [1, 2]
    assert s["n"].tolist() == [3, 3, 1]
    assert s["median"].tolist() == [2.0, 0.2, 5.0]
    assert (s["low"] <= s["median"]).all() and (s["median"] <= s["high"]).all()
    pd.testing.assert_frame_equal(
        s, stats.summarize(frame.sample(frac=1, random_state=1), ["knob_x"], "elapsed_s")
    )
