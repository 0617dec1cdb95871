"""Verdicts that rest on the right test: contradictions need an effect, similarity needs an
equivalence test, pairing by round cancels drift, falls/rises look at every value, crossings
outside the tested range say so, and the causes match the evidence."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tunelab.analysis import claim_verdict, claims, decisions, stats
from tunelab.store import results
from tunelab.sweep.claimspec import parse

BASE = {
    "cache_requested": "warm",
    "cache_achieved": "warm",
    "access_matches": True,
    "access_path": "scan",
    "access_expected": "scan",
    "client_share": 0.1,
}
LOWER = {"kind": "lower", "a": {"index": "covering"}, "b": {"index": "none"}}


def point(pid: str, values, rounds=None, **cols) -> list[dict]:
    out = []
    for i, v in enumerate(values):
        row = {**BASE, **cols, "point_id": pid, "rep": i, "elapsed_s": float(v)}
        if rounds is not None:
            row["round"] = int(rounds[i])
        out.append(row)
    return out


def pair(a_values, b_values, with_rounds: bool, **cols) -> pd.DataFrame:
    rounds = range(len(a_values)) if with_rounds else None
    return pd.DataFrame(
        point("a", a_values, rounds, knob_index="covering", **cols)
        + point("b", b_values, rounds, knob_index="none", **cols)
    )


def verdict(claim: dict, data: pd.DataFrame, alpha: float | None = None) -> claim_verdict.Verdict:
    (v,) = claims.evaluate_sweep([claim], data, "sqlite", alpha=alpha)
    return v


# -- a contradiction needs an effect of at least min_effect ---------------------------------
@pytest.mark.parametrize("with_rounds", [False, True])
@pytest.mark.parametrize("reps, sigma", [(6, 0.02), (12, 0.02), (24, 0.03)])
def test_a_three_percent_effect_against_a_five_percent_minimum_is_never_contradicted(
    with_rounds, reps, sigma
):
    seen = set()
    for seed in range(100):
        rng = np.random.default_rng(seed)
        b = rng.lognormal(np.log(0.1), sigma, reps)
        a = 1.03 * rng.lognormal(np.log(0.1), sigma, reps)  # the other way round by 3 %
        data = pair(a, b, with_rounds)
        for claim in (LOWER, {**LOWER, "kind": "similar"}):
            v = verdict(claim, data)
            assert v.verdict != "contradicted", (seed, v.evidence)
            seen.add(v.verdict)
    assert "inconclusive" in seen  # not a vacuous pass: the tests did run and decide
    assert {"similar", "holds"} & seen or reps == 6


@pytest.mark.parametrize("with_rounds", [False, True])
def test_with_a_wide_spread_a_three_percent_effect_rarely_contradicts(with_rounds):
    """Where the spread is wide, a sample can stray past the margin: contradictions stay
    below alpha / 2, the chance that the interval's near end misses the true ratio."""
    contradicted = 0
    for seed in range(300):
        rng = np.random.default_rng(1000 + seed)
        b = rng.lognormal(np.log(0.1), 0.1, 12)
        a = 1.03 * rng.lognormal(np.log(0.1), 0.1, 12)
        contradicted += verdict(LOWER, pair(a, b, with_rounds)).verdict == "contradicted"
    assert contradicted / 300 <= 0.025


def test_a_significant_difference_the_other_way_beyond_min_effect_contradicts():
    rng = np.random.default_rng(1)
    b = rng.lognormal(np.log(0.1), 0.01, 8)
    v = verdict(LOWER, pair(1.2 * b[::-1], b, with_rounds=True))
    assert v.verdict == "contradicted" and v.decided
    assert "8 rounds paired" in v.evidence


def test_an_effect_near_min_effect_holds_only_once_its_interval_clears_it():
    """The estimate past the margin is not enough: an effect about as large as min_effect
    would otherwise hold or not from run to run with its estimate; the whole interval must
    clear the margin, as it must for a contradiction, and the cause says so."""
    rng = np.random.default_rng(5)
    b = rng.lognormal(np.log(0.1), 0.01, 12)
    near = verdict(LOWER, pair(0.945 * b * rng.lognormal(0, 0.03, 12), b, with_rounds=True))
    assert near.verdict == "inconclusive", near.evidence
    assert any(c.startswith("a difference, not shown to reach ±5%") for c in near.causes)
    far = verdict(LOWER, pair(0.8 * b * rng.lognormal(0, 0.01, 12), b, with_rounds=True))
    assert far.verdict == "holds", far.evidence
    other_way = verdict(LOWER, pair(1.3 * b * rng.lognormal(0, 0.01, 12), b, with_rounds=True))
    assert other_way.verdict == "contradicted"
    assert not any(c.startswith("a difference") for c in other_way.causes)


def test_a_small_significant_difference_is_similar_for_a_directional_claim():
    rng = np.random.default_rng(2)
    b = rng.lognormal(np.log(0.1), 0.002, 12)
    v = verdict(LOWER, pair(1.02 * b * rng.lognormal(0, 0.002, 12), b, with_rounds=True))
    assert v.verdict == "similar", v.evidence
    assert "no difference seen (ratio 1.02, within ±5%)" in v.causes


def test_an_interval_wholly_short_of_the_claimed_margin_does_not_reproduce():
    """A claim of "a at least 5 % lower than b", found 1.06x with rounds spread by 4 %:
    neither within ±5 % nor wholly past 1.05, yet the claim is excluded (the interval lies
    above 0.95), so the finding did not reproduce, saying what was found; the same rows
    straddling 0.95 (found 0.97x) stay undecided, with the rounds the claimed margin needs."""
    rng = np.random.default_rng(7)
    b = rng.lognormal(np.log(0.1), 0.005, 12)
    spread = rng.lognormal(0, 0.04, 12)
    above = verdict({**LOWER, "role": "finding"}, pair(1.06 * b * spread, b, with_rounds=True))
    assert above.verdict == "short", above.evidence
    assert above.contexts[0]["word"] == "not reproduced"
    (ratio, low, high) = above.contexts[0]["ratio"]
    assert 0.95 < low < 1.05 < high, above.evidence  # the old rule's undecided gap
    assert any(
        c.startswith("found instead: ratio") and c.endswith("short of the claimed 5%")
        for c in above.causes
    ), above.causes
    straddling = verdict(LOWER, pair(0.97 * b * spread, b, with_rounds=True))
    assert straddling.verdict == "inconclusive", straddling.evidence
    assert straddling.needed and straddling.needed > 12


def test_the_rounds_a_directional_claim_needs_are_counted_from_its_claimed_margin():
    """1.04x [0.94, 1.15] after six rounds on a claim of "at least 5 % lower": 0.95 lies 9 %
    away, so a few rounds more decide it, within the futility stop's three times a budget
    of 12; the equivalence within ±5 % the old count aimed at lies 1 % away, far beyond."""
    t = stats.RatioTest(
        n_old=6,
        n_new=6,
        old_median=1.0,
        new_median=1.04,
        ratio=1.04,
        low=0.94,
        high=1.15,
        p=0.2,
        min_p=0.03125,
        paired=True,
        n=6,
        eq_low=0.96,
        eq_high=1.12,
    )
    toward_margin = stats.repetitions_needed(t, 0.05, 0.05, decisions.LOWER)
    equivalence = stats.repetitions_needed(t, 0.05, 0.05)
    assert toward_margin is not None and equivalence is not None
    assert toward_margin <= 3 * 12 < equivalence, (toward_margin, equivalence)


# -- drift: back-to-back repetitions against rounds -----------------------------------------
def test_linear_drift_makes_a_false_effect_back_to_back_and_none_in_rounds():
    """The same engine times both points alike, but the host slows by 2 % a repetition:
    measured a's six repetitions then b's, b looks slower; in rounds (a and b alternating
    in a seeded order within each round) the paired comparison sees no effect."""
    rng = np.random.default_rng(3)

    def timed(slot: float) -> float:
        return 0.1 * (1 + 0.02 * slot) * rng.lognormal(0, 0.002)

    back_to_back = pair([timed(i) for i in range(6)], [timed(6 + i) for i in range(6)], False)
    assert verdict(LOWER, back_to_back).verdict == "holds"  # the false effect
    a, b = [], []
    for r in range(6):
        first_a = rng.random() < 0.5
        a.append(timed(2 * r + (0 if first_a else 1)))
        b.append(timed(2 * r + (1 if first_a else 0)))
    v = verdict(LOWER, pair(a, b, with_rounds=True))
    assert v.verdict != "holds" and "rounds paired" in v.evidence


# -- alpha from the caller ---------------------------------------------------------------------
def test_alpha_given_to_evaluate_overrides_the_claims_own():
    rng = np.random.default_rng(4)
    b = rng.lognormal(np.log(0.1), 0.01, 6)
    data = pair(0.8 * b, b, with_rounds=True)
    assert verdict(LOWER, data).verdict == "holds"
    strict = verdict(LOWER, data, alpha=0.01)  # 6 rounds give no p below 2/64
    assert strict.verdict == "inconclusive"
    assert "too few repetitions: 6 rounds give no p below 0.031" in strict.causes
    assert strict.needed >= 8  # 2 / 2^8 < 0.01
    (claim,) = parse([LOWER])
    assert claims.evaluate(claim, data, alpha=0.01).verdict == "inconclusive"
    assert claim.alpha == 0.05  # the claim itself is left as it was


# -- falls / rises over every value ------------------------------------------------------------
def curve(medians: list[float], with_rounds: bool, sigma: float = 0.01) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    rounds = range(6) if with_rounds else None
    groups = [
        point(f"p{pool}", m * rng.lognormal(0, sigma, 6), rounds, knob_buffer_pool=pool)
        for pool, m in zip((16, 32, 64, 128, 256), medians)
    ]
    return pd.DataFrame([r for g in groups for r in g])


FALLS = {"kind": "falls", "along": "buffer_pool"}


@pytest.mark.parametrize("with_rounds", [False, True])
def test_falls_holds_on_a_curve_that_falls_then_levels(with_rounds):
    v = verdict(FALLS, curve([1.0, 0.6, 0.4, 0.4, 0.4], with_rounds))
    assert v.verdict == "holds", v.evidence
    test = "Page's L over 6 rounds, p=" if with_rounds else "Kendall τ=-"
    assert f"trend over 5 values: {test}" in v.evidence


def drifting(rng, medians, drift: float) -> pd.DataFrame:
    """Five pool sizes measured in six rounds around ``medians``; each round's host speed
    drifts by a factor of up to ``drift`` (the same for all its points)."""
    speed = rng.lognormal(0, drift, 6)
    rows = []
    for pool, m in zip((16, 32, 64, 128, 256), medians):
        rows += point(
            f"p{pool}", m * speed * rng.lognormal(0, 0.01, 6), range(6), knob_buffer_pool=pool
        )
    return pd.DataFrame(rows)


def test_the_trend_is_blocked_by_round_so_drift_does_not_hide_it():
    # a steady fall, 4 % a step, under round-to-round drift ten times the repetitions' own
    # noise: pooled over rounds the trend drowns in the drift, within each round it is plain
    data = drifting(np.random.default_rng(3), [1.0, 0.96, 0.92, 0.88, 0.85], drift=0.1)
    v = verdict(FALLS, data)
    assert v.verdict == "holds", v.evidence
    assert "Page's L over 6 rounds" in v.evidence
    unpaired = verdict(FALLS, data.drop(columns=["round"]))
    assert "Kendall" in unpaired.evidence and unpaired.verdict == "inconclusive"


def test_the_blocked_trend_keeps_its_error_rate_on_flat_curves():
    rng = np.random.default_rng(11)
    false = 0
    for _ in range(400):
        rows = drifting(rng, [1.0] * 5, drift=0.1)
        t = decisions.trend(
            np.log2(rows["knob_buffer_pool"].to_numpy()) - 4,
            rows["elapsed_s"].to_numpy(),
            rows["round"].to_numpy(),
        )
        false += t.p < 0.05
    assert false / 400 <= 0.05 + 2 * (0.05 * 0.95 / 400) ** 0.5  # alpha, within 2 SE


@pytest.mark.parametrize("with_rounds", [False, True])
def test_a_step_against_the_trend_is_named_and_contradicts(with_rounds):
    # the two ends alone would say "falls"
    v = verdict(FALLS, curve([1.0, 0.5, 0.8, 0.4, 0.3], with_rounds))
    assert v.verdict == "contradicted", v.evidence
    assert "against the trend: 32 → 64 ratio 1.5" in v.evidence  # 0.8 / 0.5, and no other step
    assert v.evidence.count("→") == 1
    assert "not monotonic: 1 step(s) go the other way" in v.causes
    assert verdict({**FALLS, "kind": "rises"}, curve([0.3, 0.4, 0.8, 0.5, 1.0], True)).verdict == (
        "contradicted"
    )


def test_a_step_back_within_min_effect_does_not_break_the_trend():
    v = verdict(FALLS, curve([1.0, 0.6, 0.61, 0.4, 0.3], True, sigma=0.002))
    assert v.verdict == "holds", v.evidence


# -- crossover outside or at the edge of the tested range ------------------------------------
def selectivity(index: list[float], scan: float, within_rounds: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(6)
    rounds = range(6) if within_rounds else None
    rows = []
    for s, ti in zip((0.001, 0.01, 0.05, 0.1, 0.5), index):
        rows += point(
            f"i{s}",
            ti * rng.lognormal(0, 0.01, 6),
            rounds,
            knob_index="nonclustered",
            wl_selectivity=s,
        )
        rows += point(
            f"s{s}", scan * rng.lognormal(0, 0.01, 6), rounds, knob_index="none", wl_selectivity=s
        )
    return pd.DataFrame(rows)


def cross(low: float, high: float) -> dict:
    return {
        "kind": "crossover",
        "a": {"index": "nonclustered"},
        "b": {"index": "none"},
        "along": "selectivity",
        "within": [low, high],
    }


ALREADY_SLOWER = [0.2, 0.5, 1.0, 2.0, 5.0]  # the scan (0.1) wins at every selectivity


def test_a_crossing_below_the_tested_range_is_reported_as_such():
    data = selectivity(ALREADY_SLOWER, 0.1)
    v = verdict(cross(0.0001, 0.5), data)  # the window reaches below what was swept
    assert v.verdict == "inconclusive", v.evidence
    assert "below the tested range: b already lower at the smallest value swept (0.1 %)" in (
        v.evidence
    )
    assert v.evidence.startswith("crossing (below the tested range")
    assert any("sweep down to 0.01 %" in c for c in v.causes)
    edge = verdict(cross(0.001, 0.5), data)  # the window starts where the sweep does
    assert edge.verdict == "contradicted"
    assert "below the tested range" in edge.evidence
    assert edge.causes == [
        "found instead: the crossing below the tested range: b already lower at the smallest "
        "value swept (0.1 %), below the window [0.1 %, 50 %]"
    ]


def test_a_crossing_above_the_tested_range_is_reported_as_such():
    data = selectivity([0.01, 0.02, 0.03, 0.05, 0.08], 0.1)  # the index wins everywhere
    v = verdict(cross(0.001, 0.9), data)
    assert v.verdict == "inconclusive"
    assert "above the tested range: a still lower at the largest value swept (50 %)" in v.evidence
    assert verdict(cross(0.001, 0.5), data).verdict == "contradicted"


def test_a_crossing_between_the_first_two_values_says_it_lies_at_the_range_edge():
    v = verdict(cross(0.001, 0.5), selectivity([0.05, 0.2, 0.4, 0.8, 2.0], 0.1))
    assert v.verdict == "holds"
    assert "between 0.1 % and 1 %, at the tested range's low edge" in v.evidence


# -- causes that match the evidence ----------------------------------------------------------
def test_identical_reads_say_no_difference_and_blame_no_client():
    rows = pair([1707] * 6, [1707] * 6, with_rounds=True, client_share=0.8)
    rows[f"{results.COUNTER_PREFIX}physical_reads"] = 1707
    v = verdict({**LOWER, "metric": "physical_reads"}, rows)
    assert v.verdict == "similar"
    assert v.causes == ["no difference seen (the same values on both sides)"]
    timed = verdict(LOWER, pair([0.1] * 6, [0.1] * 6, True, client_share=0.8))
    assert any(c.startswith("client-bound at a") for c in timed.causes)  # a time can be blurred


def test_the_evidence_gives_n_and_the_smallest_possible_p():
    rng = np.random.default_rng(8)
    b = rng.lognormal(np.log(0.1), 0.01, 5)
    unpaired = verdict(LOWER, pair(0.5 * b, b, with_rounds=False))
    assert "n=5/5, smallest possible p 0.0079" in unpaired.evidence
    paired = verdict(LOWER, pair(0.5 * b, b, with_rounds=True))
    assert "5 rounds paired, smallest possible p 0.062" in paired.evidence
    assert paired.verdict == "inconclusive" and paired.needed == 6
    assert "too few repetitions: 5 rounds give no p below 0.062" in paired.causes


def test_verdict_json_and_counts_know_similar():
    data = pair([0.1] * 6, [0.1] * 6, with_rounds=True)
    v = verdict(LOWER, data)
    assert v.to_json()["verdict"] == "similar" and v.to_json()["decided"] is True
    assert claims.summarize([v]) == {
        "holds": 0,
        "similar": 1,
        "short": 0,
        "contradicted": 0,
        "inconclusive": 0,
    }


# -- one interval: the report's lock table and a claim on the same points ---------------------
@pytest.mark.parametrize("with_rounds", [False, True])
def test_the_lock_table_and_a_claim_on_the_same_points_print_the_same_interval(with_rounds):
    from tunelab.report.data import ReportData
    from tunelab.report.page import locking

    rng = np.random.default_rng(9)
    rows = []
    for lock, level in (("row", 900.0), ("table", 1000.0)):
        rounds = range(6) if with_rounds else None
        values = level * rng.lognormal(0, 0.05, 6)
        for r in point(
            f"update-{lock}",
            values,
            rounds,
            knob_lock_granularity=lock,
            workload="update",
            wl_threads=1,
        ):
            r["throughput_rows_s"] = r.pop("elapsed_s")
            rows.append(r)
    frame = pd.DataFrame(rows)
    data = ReportData(frame, {}, "", "", "locking", "sqlite", ["knob_lock_granularity"], [])
    (table,) = locking.lock_ratios(data).to_dict("records")
    claim = {
        "kind": "higher",
        "metric": "throughput_rows_s",
        "a": {"lock_granularity": "row"},
        "b": {"lock_granularity": "table"},
        "where": {"workload": "update"},
    }
    v = verdict(claim, frame)
    shown = f"ratio {table['ratio']:.3g} [{table['low']:.3g}, {table['high']:.3g}]"
    assert shown in v.evidence
    assert table["method"] == (stats.PAIRED if with_rounds else stats.UNPAIRED)


def test_the_index_counts_verdicts_in_words_a_directional_claim_shown_absent_does_not_hold():
    from tunelab.report.index import INDEX_CSS, _claims_cell

    v = verdict(LOWER, pair([0.1] * 6, [0.1] * 6, with_rounds=True)).to_json()
    assert v["verdict"] == "similar" and v["word"] == "does not hold"
    held = {**v, "verdict": "holds", "word": "holds"}
    cell = _claims_cell({"verdicts": [v, held]})
    assert '<span class="tl-verdict tl-does-not-hold">1 does not hold</span>' in cell
    assert '<span class="tl-verdict tl-holds">1 holds</span>' in cell
    # a finding's words: equivalence shown against a directional finding is "not reproduced"
    assert claim_verdict.word("similar", "finding") == "not reproduced"
    assert claim_verdict.word("inconclusive", "finding") == "undecided"
    legacy = {k: x for k, x in v.items() if k != "word"}  # a file from before the words
    assert claim_verdict.word_of({**legacy, "role": "finding", "verdict": "holds"}) == "reproduced"
    for name in ("reproduced", "not-reproduced", "undecided", "cannot-run"):
        assert f".tl-{name}" in INDEX_CSS


# -- an interaction: one ratio against another ----------------------------------------------
RATIO_LOWER = {
    "kind": "lower",
    "metric": "throughput_rows_s",
    "a": {"lock_granularity": "row"},
    "b": {"lock_granularity": "table"},
    "where": {"workload": "insert"},
    "than": {"workload": "update"},
}


def locking(
    insert_ratio: float,
    update_ratio: float,
    seed: int,
    reps: int = 12,
    sigma: float = 0.03,
    drift: float = 0.0,
    cache: tuple = ("warm",),
) -> pd.DataFrame:
    """Rows of a locking sweep: per round, throughput with row and table locks for inserts
    and updates; the row/table ratios as given, ``drift`` a round effect shared by all."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in cache:
        for r in range(reps):
            shift = np.exp(drift * rng.standard_normal())
            for workload, ratio in (("insert", insert_ratio), ("update", update_ratio)):
                for lock, scale in (("row", ratio), ("table", 1.0)):
                    v = 1000 * scale * shift * rng.lognormal(0, sigma)
                    rows.append(
                        {
                            **BASE,
                            "cache_requested": c,
                            "cache_achieved": c,
                            "point_id": f"{workload}-{lock}-{c}",
                            "rep": r,
                            "round": r,
                            "workload": workload,
                            "knob_lock_granularity": lock,
                            "throughput_rows_s": v,
                            "elapsed_s": 1 / v,
                        }
                    )
    return pd.DataFrame(rows)


def test_a_lower_ratio_of_ratios_holds_and_the_reverse_is_contradicted():
    v = verdict(RATIO_LOWER, locking(0.8, 1.0, seed=1))
    assert v.verdict == "holds", v.evidence
    assert "lock_granularity row/lock_granularity table" in v.evidence
    assert "(workload insert) vs" in v.evidence and "(workload update)" in v.evidence
    assert 0.75 < v.contexts[0]["ratio"][0] < 0.85
    back = verdict(RATIO_LOWER, locking(1.0, 0.8, seed=2))
    assert back.verdict == "contradicted", back.evidence


def test_equal_ratios_are_not_a_lower_one_and_drift_shared_by_a_round_cancels():
    seen = set()
    for seed in range(40):
        v = verdict(RATIO_LOWER, locking(0.9, 0.9, seed=seed, drift=0.2))
        assert v.verdict != "holds" and v.verdict != "contradicted", (seed, v.evidence)
        seen.add(v.verdict)
    assert "similar" in seen  # shown equal: for a directional finding, not reproduced
    # the same drift hides nothing real: 20 % apart is found in every seed
    assert all(
        verdict(RATIO_LOWER, locking(0.72, 0.9, seed=s, drift=0.2)).verdict == "holds"
        for s in range(10)
    )


def test_a_ratio_of_ratios_is_judged_within_each_context():
    data = locking(0.8, 1.0, seed=3, cache=("cold", "warm"))
    v = verdict(RATIO_LOWER, data)
    assert [c["label"] for c in v.contexts] == ["cache cold", "cache warm"], v.contexts
    assert v.verdict == "holds"
    assert claims.compared_points([parse([RATIO_LOWER])[0]], data) == frozenset(data["point_id"])


def test_than_only_on_lower_or_higher_and_only_replacing_where_keys():
    from tunelab.sweep import claimspec

    class P:  # a point as claimspec.validate reads one
        def __init__(self, lock, workload):
            self.knobs = {"lock_granularity": lock}
            self.cache = "warm"
            self.workload = type("W", (), {"type": workload, "params": {}})()

    points = [P(lock, w) for lock in ("row", "table") for w in ("insert", "update")]
    assert claimspec.validate([RATIO_LOWER], points, "mariadb") == []
    wrong = [{**RATIO_LOWER, "kind": "similar"}, {**RATIO_LOWER, "than": {"cache": "cold"}}]
    errors = claimspec.validate(wrong, points, "mariadb")
    fields = [e[1] for e in errors]
    assert fields.count("expect.than") == 2, errors


@pytest.mark.parametrize(
    ("unit", "words"), [("round", "6 rounds paired"), ("pass", "6 passes paired")]
)
def test_the_paired_units_are_named_in_plain_plural(unit, words):
    from tunelab.analysis import claim_evidence, stats

    t = stats.RatioTest(
        n_old=6,
        n_new=6,
        old_median=1.0,
        new_median=0.9,
        ratio=0.9,
        low=0.8,
        high=0.95,
        p=0.03,
        min_p=0.031,
        paired=True,
        n=6,
        unit=unit,
    )
    assert claim_evidence.n_text(t).startswith(words)
