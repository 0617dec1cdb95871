"""The shared-pool simulator against a formula that shares no code with it (Che's
approximation extended for cross-invalidation and the group pool: tunelab.bpsim.analytic),
under the independent reference model it assumes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tunelab.bpsim import members as mb
from tunelab.bpsim.analytic import shared_ratios, trace_rates
from tunelab.bpsim.curves import lru_curve

PAGES = 5000


def simulated(trace, lbp: int, gbp: int) -> dict[str, float]:
    """The ratios of the trace's second half: the pools warmed on its first half (the
    simulator is deterministic, so the second half's counters are the whole's less the
    first half's)."""
    whole = mb.simulate_shared(trace, lbp, gbp).table().iloc[-1]
    first = mb.simulate_shared(trace.iloc[: len(trace) // 2], lbp, gbp).table().iloc[-1]
    d = {k: float(whole[k] - first[k]) for k in mb.COUNTERS}
    return {
        "lbp_hit_ratio": d["pool_data_lbp_pages_found"] / d["pool_data_l_reads"],
        "gbp_hit_ratio": 1 - d["pool_data_gbp_p_reads"] / d["pool_data_gbp_l_reads"],
        "invalid": d["pool_data_gbp_invalid_pages"] / d["pool_data_l_reads"],
    }


CASES = list(itertools.product((2, 4), (0.05, 0.2), (0.0, 0.5), (0.8, None)))


@pytest.mark.parametrize(("members", "write_share", "affinity", "alpha"), CASES)
def test_simulated_hit_ratios_agree_with_the_formula(members, write_share, affinity, alpha):
    trace = mb.shared_trace(PAGES, 600_000, members, write_share, affinity, alpha, seed=4)
    rates = trace_rates(PAGES, members, affinity, alpha, seed=4)
    for lbp, gbp in ((250, 250), (500, 1000), (1000, 200)):
        sim = simulated(trace, lbp, gbp)
        formula = shared_ratios(rates, write_share, lbp, gbp)
        where = f"LBP {lbp}, GBP {gbp}"
        assert sim["lbp_hit_ratio"] == pytest.approx(formula.lbp_hit_ratio, abs=0.02), where
        assert sim["gbp_hit_ratio"] == pytest.approx(formula.gbp_hit_ratio, abs=0.02), where
        assert sim["invalid"] == pytest.approx(formula.invalid, abs=0.005), where


def test_one_member_is_one_pool():
    """No invalidations, and the LBP's hit ratio is the exact single-pool LRU curve's."""
    trace = mb.shared_trace(PAGES, 400_000, 1, 0.2, 0.0, 0.8, seed=5)
    formula = shared_ratios(trace_rates(PAGES, 1, 0.0, 0.8, seed=5), 0.2, 500, 1000)
    assert formula.invalid == 0
    curve = lru_curve(trace["page"].to_numpy())
    exact = 1 - curve.loc[curve["pool_pages"] == 500, "misses"].item() / len(trace)
    assert formula.lbp_hit_ratio == pytest.approx(exact, abs=0.015)  # cold misses: 1.25 %


def test_more_writers_mean_more_invalid_copies_and_a_larger_gbp_more_gbp_hits():
    rates = {m: trace_rates(PAGES, m, 0.0, 0.8) for m in (2, 4)}
    two, four = (shared_ratios(rates[m], 0.2, 500, 500) for m in (2, 4))
    assert four.invalid > two.invalid > 0
    small, large = (shared_ratios(rates[4], 0.2, 500, g) for g in (200, 2000))
    assert large.gbp_hit_ratio > small.gbp_hit_ratio
    assert large.lbp_hit_ratio == small.lbp_hit_ratio  # the GBP does not change the LBPs


def test_a_gbp_that_holds_every_changed_page_finds_every_written_one():
    rates = trace_rates(200, 2, 0.0, None)
    everything = shared_ratios(rates, 0.3, 20, 200)
    assert everything.gbp_hit_ratio == pytest.approx(1.0)


def test_bad_rates_are_refused():
    with pytest.raises(ValueError, match="summing to 1"):
        shared_ratios(np.ones((2, 10)), 0.1, 5, 5)
    with pytest.raises(ValueError, match="write_share"):
        shared_ratios(trace_rates(10, 2, 0.0, None), 1.5, 5, 5)
