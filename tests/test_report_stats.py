"""The per-point statistics: median and order-statistic interval."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import quantile_test

from tunelab.analysis import stats

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


# -- two sets of repetitions: paired by round where the rows carry it ----------------------
def drifting(n: int, ratio: float, drift: float, noise: float, seed: int):
    """``n`` rounds of old and new whose level drifts by ``drift`` per round (both sides
    alike), new = ratio * old in expectation; returns (old, new, rounds)."""
    rng = np.random.default_rng(seed)
    level = 1 + drift * np.arange(n)
    old = level * rng.lognormal(0, noise, n)
    new = ratio * level * rng.lognormal(0, noise, n)
    return old, new, np.arange(n)


def test_pairing_by_round_cancels_drift_that_swamps_the_unpaired_test():
    old, new, rounds = drifting(8, 1.10, drift=0.05, noise=0.01, seed=3)
    unpaired = stats.compare_samples(old, new, key="drift")
    paired = stats.compare_samples(old, new, key="drift", old_rounds=rounds, new_rounds=rounds)
    assert not unpaired.paired and not unpaired.significant(0.05)
    assert paired.paired and paired.n == 8 and paired.method == stats.PAIRED
    assert paired.significant(0.05) and paired.low < 1.10 < paired.high
    assert paired.high - paired.low < (unpaired.high - unpaired.low) / 4
    logs = np.log(new / old)  # Hodges–Lehmann: the median of the Walsh averages
    walsh = [(a + b) / 2 for i, a in enumerate(logs) for b in logs[i:]]
    assert paired.ratio == pytest.approx(float(np.exp(np.median(walsh))))
    # the exact signed-rank test on the log ratios, and its floor for eight pairs
    from scipy.stats import wilcoxon

    assert paired.p == pytest.approx(wilcoxon(np.log(new / old), method="exact").pvalue)
    assert paired.min_p == pytest.approx(2 / 2**8)


def test_paired_comparison_is_deterministic_and_ignores_row_order():
    old, new, rounds = drifting(6, 0.9, drift=0.02, noise=0.03, seed=5)
    a = stats.compare_samples(old, new, key="k", old_rounds=rounds, new_rounds=rounds)
    back = rounds[::-1]
    b = stats.compare_samples(old[::-1], new[::-1], key="k", old_rounds=back, new_rounds=back)
    assert a == b


def test_a_round_takes_the_median_of_its_rows_and_only_shared_rounds_pair():
    old = [1.0, 3.0, 2.0, 2.0, 9.0]  # round 0 twice (median 2), round 1, round 2, round 7
    old_rounds = [0, 0, 1, 2, 7]
    new = [4.0, 4.0, 6.0]
    new_rounds = [0, 1, 2]
    t = stats.compare_samples(old, new, old_rounds=old_rounds, new_rounds=new_rounds)
    assert t.paired and t.n == 3  # round 7 has no partner
    # per round: 4/2, 4/2, 6/2; the Hodges–Lehmann estimate of their logs' centre
    walsh = np.log([2, 2, 3, 2, 6**0.5, 6**0.5])
    assert t.ratio == pytest.approx(float(np.exp(np.median(walsh))))


@pytest.mark.parametrize(
    "old_rounds, new_rounds",
    [
        (None, None),
        ([0, 1, 2, 3], None),
        ([0, 0, 0, 0], [0, 0, 0, 0]),
        ([math.nan] * 4, [math.nan] * 4),
    ],
)
def test_without_two_shared_rounds_the_comparison_is_unpaired(old_rounds, new_rounds):
    old, new = [1.0, 1.1, 0.9, 1.05], [2.0, 2.1, 1.9, 2.2]
    t = stats.compare_samples(old, new, old_rounds=old_rounds, new_rounds=new_rounds)
    assert not t.paired and t.method == stats.UNPAIRED
    assert t == stats.compare_samples(old, new)


def test_an_infinite_per_round_ratio_falls_back_to_the_unpaired_test():
    t = stats.compare_samples([0.0] * 6, [1.0] * 6, old_rounds=range(6), new_rounds=range(6))
    assert not t.paired and t.ratio == math.inf


def test_the_equivalence_interval_is_narrower_than_the_test_interval():
    old, new, rounds = drifting(10, 1.01, drift=0.0, noise=0.02, seed=1)
    t = stats.compare_samples(old, new, old_rounds=rounds, new_rounds=rounds)
    assert t.low <= t.eq_low <= t.ratio <= t.eq_high <= t.high
    assert t.equivalent(0.05) and not t.equivalent(0.001)


def _decides(old, new, rounds, margin=0.05, alpha=0.05) -> bool:
    t = stats.compare_samples(old, new, old_rounds=rounds, new_rounds=rounds)
    clears = t.low >= 1 + margin or t.high <= 1 - margin  # shown beyond the margin
    return (t.significant(alpha) and clears) or t.equivalent(margin)


@pytest.mark.parametrize("ratio", [1.12, 1.0])
def test_the_repetitions_needed_decide_most_comparisons_at_that_spread(ratio):
    # the first of these samples that 6 rounds of this spread leave undecided, and whose
    # estimate is not so near the margin that thousands of rounds would be needed ...
    needed = None
    for i in range(40):
        old, new, rounds = drifting(6, ratio, 0.0, 0.08, 100 + i)
        if _decides(old, new, rounds):
            continue
        t = stats.compare_samples(old, new, old_rounds=rounds, new_rounds=rounds)
        needed = stats.repetitions_needed(t, 0.05, 0.05)
        if needed is not None and needed <= 100:
            break
    assert needed is not None and 6 < needed <= 100
    # ... is decided in most fresh samples of the size it says (80 % aimed at), fewer at 6
    at_needed = [_decides(*drifting(needed, ratio, 0.0, 0.08, s)) for s in range(20)]
    at_six = [_decides(*drifting(6, ratio, 0.0, 0.08, s)) for s in range(20)]
    assert sum(at_needed) >= 14 and sum(at_six) < sum(at_needed)


@pytest.mark.parametrize("seed", range(1, 6))
def test_one_disturbed_round_hardly_moves_the_repetitions_needed(seed):
    """The projection discounts what outlying rounds add to the interval: at six rounds its
    ends are the extreme rounds, so one round 60 % slow would multiply the rounds it says."""
    old, new, rounds = drifting(6, 1.12, 0.0, 0.03, seed)
    clean = stats.compare_samples(old, new, old_rounds=rounds, new_rounds=rounds)
    new = new.copy()
    new[2] *= 1.6
    hit = stats.compare_samples(old, new, old_rounds=rounds, new_rounds=rounds)
    assert hit.high > 1.3 * clean.high and hit.sd > 2 * hit.spread  # the round shows
    few, more = (stats.repetitions_needed(t, 0.05, 0.05) for t in (clean, hit))
    assert few and more and more <= 2 * few, (few, more)


def test_no_repetitions_are_needed_without_spread_and_never_fewer_than_the_test_allows():
    same = stats.compare_samples([1.0] * 4, [1.0] * 4)
    assert stats.repetitions_needed(same, 0.05, 0.05) is None
    few = stats.compare_samples([1.0, 1.2, 0.9], [2.0, 2.3, 1.8])  # min p 0.1 with 3 and 3
    assert stats.repetitions_needed(few, 0.05, 0.05) >= 4
    assert stats.min_p(4, 4) < 0.05 <= stats.min_p(3, 3)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=2, max_size=12))
def test_the_signed_rank_test_is_exact_with_ties_and_zeros(steps):
    from scipy.stats import PermutationMethod, wilcoxon

    d = np.array(steps, dtype=float) / 10  # ties and zeros are common
    nonzero = d[d != 0]
    ours = stats.signed_rank_p(d)
    if nonzero.size < 2:
        assert ours == (1.0 if nonzero.size == 0 else pytest.approx(1.0))
        return
    every_flip = wilcoxon(nonzero, method=PermutationMethod(n_resamples=10_000)).pvalue
    assert ours == pytest.approx(every_flip, abs=1e-12)


@pytest.mark.parametrize("n", [6, 8, 12, 24])
def test_the_paired_interval_covers_the_true_ratio_at_least_at_its_level(n):
    """The signed-rank (Walsh) interval over 4,000 simulated paired comparisons of a true
    ratio 1.07 with 10 % spread covers it at its level, 95 % (90 % for the equivalence
    interval), within a point of sampling error (three standard errors); a percentile
    bootstrap of the rounds covered 92 % and 87 %."""
    rng = np.random.default_rng(n)
    covered = eq_covered = 0
    for _ in range(4000):
        logs = np.log(1.07) + rng.normal(0, 0.1, n)
        est, low, high = stats.walsh_interval(logs, 0.95)
        covered += low <= np.log(1.07) <= high
        _, eq_low, eq_high = stats.walsh_interval(logs, 0.90)
        eq_covered += eq_low <= np.log(1.07) <= eq_high
    assert covered / 4000 >= 0.94 and eq_covered / 4000 >= 0.89


def test_the_paired_interval_excludes_1_exactly_when_the_signed_rank_test_is_significant():
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(6, 20))
        logs = rng.normal(0.03, 0.05, n)
        _, low, high = stats.walsh_interval(logs, 0.95)
        assert (low > 0 or high < 0) == (stats.signed_rank_p(logs) < 0.05)
