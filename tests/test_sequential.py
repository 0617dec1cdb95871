"""Decide, then stop: the looks, the alpha they spend, the stopping rule, its false-positive
rate under repeated looks, and the sweep files' ``repetitions: {min, max}``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from tunelab.analysis import sequential, stats
from tunelab.cli import main
from tunelab.store import results
from tunelab.sweep import loading, spec

BODY = "name: s\ndataset: {rows: 1000}\nworkloads: [{type: scan}]\n"


# -- looks and alpha ---------------------------------------------------------------------


@pytest.mark.parametrize("n_min, n_max", [(6, 30), (6, 25), (6, 13), (2, 100), (10, 30), (6, 7)])
def test_looks_run_from_min_to_max_few_and_growing(n_min, n_max):
    looks = sequential.looks(n_min, n_max)
    assert looks[0] == n_min and looks[-1] == n_max
    steps = np.diff(looks)
    assert (steps > 0).all()
    assert (steps[:-1] <= looks[:-2]).all()  # a step never more than doubles the rounds
    assert len(looks) <= 2 + np.log2(n_max / n_min)


def test_a_fixed_number_of_repetitions_is_one_look_with_the_whole_alpha():
    assert sequential.looks(6, 6) == [6]
    assert sequential.look_alpha(0.05, 0, [6]) == 0.05
    assert sequential.decide({"a": "inconclusive"}, 5, [6]) == (False, "fixed repetitions")
    assert sequential.decide({"a": "inconclusive"}, 6, [6]) == (True, "fixed repetitions")
    assert sequential.decide({"a": "holds"}, 3, [6]).stop is False  # no look before the end


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1])
@pytest.mark.parametrize("n_min, n_max", [(6, 30), (6, 12), (3, 100), (8, 9)])
def test_the_looks_spend_at_most_alpha_in_all(alpha, n_min, n_max):
    looks = sequential.looks(n_min, n_max)
    spent = [sequential.look_alpha(alpha, k, looks) for k in range(len(looks))]
    assert all(a > 0 for a in spent)
    assert sum(spent) <= alpha * (1 + 1e-12)
    assert [sequential.alpha_at(alpha, n, looks) for n in looks] == spent
    assert sequential.alpha_at(alpha, n_min + 1, looks) is None or n_min + 1 in looks


def test_six_rounds_that_all_agree_decide_at_the_first_look():
    looks = sequential.looks(6, 30)
    floor = scipy_stats.wilcoxon(np.arange(1.0, 7.0), method="exact").pvalue  # smallest p: 2/2**6
    assert floor == 2 / 2**6
    assert floor < sequential.look_alpha(0.05, 0, looks)


def test_bad_looks_and_alphas_are_refused():
    for args in ((0, 5), (7, 6)):
        with pytest.raises(ValueError):
            sequential.looks(*args)
    with pytest.raises(ValueError):
        sequential.look_alpha(0.05, 3, [6, 12, 24])
    with pytest.raises(ValueError):
        sequential.look_alpha(0, 0, [6])


# -- the stopping rule -------------------------------------------------------------------


def test_measuring_stops_when_every_claim_is_decided_at_a_look():
    looks = [6, 12, 24, 30]
    decided = {"a": "holds", "b": "similar", "c": "contradicted"}
    assert sequential.decide(decided, 6, looks) == (True, "decided at round 6")
    assert sequential.decide(decided, 7, looks) == (False, "next look at round 12")
    stop = sequential.decide({**decided, "d": "inconclusive"}, 12, looks)
    assert stop == (False, "claims undecided at round 12: d")
    undecided = {"a": "holds", "d": "inconclusive", "e": "inconclusive"}
    stop = sequential.decide(undecided, 30, looks)
    assert stop == (True, "budget of 30 rounds reached (claims undecided: d, e)")
    assert sequential.decide({}, 6, looks) == (True, "no claims to decide: minimum of 6 rounds")


def test_a_claim_the_budget_cannot_decide_ends_measuring_at_a_look():
    looks = [6, 12, 24, 30]
    names = {"a": "holds", "d": "inconclusive", "e": "inconclusive"}
    stop = sequential.decide(names, 6, looks, {"d": 45})
    assert stop == (False, "claims undecided at round 6: e")  # e may still be decided
    stop = sequential.decide(names, 12, looks, {"d": 45, "e": 31})
    assert stop.stop and stop.reason == (
        "stopped at round 12: every other claim decided; these would need more rounds than "
        "the budget of 30: d (~45), e (~31)"
    )
    # at the budget every undecided claim is named, those given up on as well
    assert sequential.decide(names, 30, looks, {"d": 45}) == (
        True,
        "budget of 30 rounds reached (claims undecided: d, e)",
    )
    # a claim decided meanwhile is no longer beyond the budget
    assert sequential.decide({"a": "holds", "d": "holds"}, 12, looks, {"d": 45}) == (
        True,
        "decided at round 12",
    )


def test_a_decided_claim_keeps_its_verdict():
    earlier = {"a": "holds", "b": "inconclusive"}
    assert sequential.settle(earlier, {"a": "inconclusive", "b": "similar"}) == {
        "a": "holds",
        "b": "similar",
    }


def test_rounds_needed_grow_with_noise_and_shrink_with_the_effect():
    base = sequential.rounds_needed(0.1, 0.05, 0.05)
    assert sequential.rounds_needed(0.2, 0.05, 0.05) > base
    assert sequential.rounds_needed(0.1, 0.2, 0.05) < base
    # (1.96 + 0.84)² (0.1 / ln 1.05)² = 33: the textbook figure
    assert base == pytest.approx(33, abs=1)
    assert sequential.rounds_needed(0.0, 0.05, 0.05) == 2


# -- the unit of analysis (error rates: tests/test_verdict_error_rates.py) -------------------


def test_a_large_effect_stops_at_the_first_look():
    looks = sequential.looks(6, 30)
    rng = np.random.default_rng(5)
    alpha = sequential.look_alpha(0.05, 0, looks)
    for _ in range(50):  # 20 % slower, 5 % noise: six rounds that all agree
        old = np.exp(rng.normal(0, 0.05, 6))
        new = old * 1.2 * np.exp(rng.normal(0, 0.05, 6))
        t = stats.compare_samples(old, new, alpha=alpha, old_rounds=range(6), new_rounds=range(6))
        verdict = "holds" if t.significant(alpha) else "inconclusive"
        assert sequential.decide({"x": verdict}, 6, looks).stop


def _order_rows(blocks, passes=None, mode="blocked"):
    rows = pd.DataFrame({"round": range(len(blocks)), "order_mode": mode, "block": blocks})
    if passes is not None:
        rows["pass"] = passes
    return rows


def test_the_unit_is_the_round_within_a_block_and_the_pass_between_blocks():
    a, b = _order_rows([7, 7, 7, 7], [0, 0, 1, 1]), _order_rows([7, 7, 7, 7], [0, 0, 1, 1])
    units, unit = sequential.pairing(a, b)
    assert unit == "round" and list(units[0]) == [0, 1, 2, 3]
    units, unit = sequential.pairing(a, _order_rows([8, 8, 8, 8], [0, 0, 1, 1]))
    assert unit == "pass" and list(units[0]) == [0, 0, 1, 1]
    # rounds order: every round takes every point side by side
    units, unit = sequential.pairing(
        _order_rows([0, 0], mode="rounds"), _order_rows([1, 1], mode="rounds")
    )
    assert unit == "round"
    # blocked rows that do not record their block or pass: passes of three, between blocks
    old = pd.DataFrame({"round": range(6), "order_mode": "blocked"})
    units, unit = sequential.pairing(old, old)
    assert unit == "pass" and list(units[0]) == [0, 0, 0, 1, 1, 1]
    assert sequential.pairing(pd.DataFrame({"x": [1]}), old) == ([None, None], "round")


def test_a_comparison_between_blocks_pairs_the_medians_of_its_passes():
    """Three rounds a pass, two passes: two pairs, too few for the signed-rank test."""
    a = _order_rows([1] * 6, [0, 0, 0, 1, 1, 1]).assign(elapsed_s=[1.0, 1.1, 1.2, 2.0, 2.1, 2.2])
    b = _order_rows([2] * 6, [0, 0, 0, 1, 1, 1]).assign(elapsed_s=1.0)
    (ub, ua), unit = sequential.pairing(b, a)
    t = stats.compare_samples(
        b["elapsed_s"], a["elapsed_s"], old_rounds=ub, new_rounds=ua, unit=unit
    )
    assert t.paired and t.n == 2 and t.unit == "pass"
    assert t.new_median == pytest.approx(1.6) and not t.can_decide(0.05)


# -- sweep files ---------------------------------------------------------------------------


def test_a_mapping_sets_the_minimum_and_the_budget(write_sweep):
    points, errors = spec.expand(write_sweep(BODY + "repetitions: {min: 6, max: 30}\n"))
    assert errors == []
    assert {(p.repetitions_min, p.repetitions) for p in points} == {(6, 30)}
    points, _ = spec.expand(write_sweep(BODY + "repetitions: 6\n"))
    assert {(p.repetitions_min, p.repetitions) for p in points} == {(6, 6)}
    points, _ = spec.expand(write_sweep(BODY))
    assert {(p.repetitions_min, p.repetitions) for p in points} == {(3, 3)}


@pytest.mark.parametrize(
    "value, message",
    [
        ("{min: 12, max: 6}", "repetitions: min 12 is above max 6 (allowed: min <= max)"),
        ("{min: 6, max: 200}", "repetitions.max: 200 out of range (allowed: <= 100)"),
        ("{min: 1, max: 30}", "repetitions.min: 1 out of range (allowed: >= 2)"),
        ("{min: 6, max: 30, step: 2}", "repetitions.step: unknown key (allowed: max, min)"),
        ("{min: 6.5, max: 30}", "repetitions.min: 6.5 has the wrong type (allowed: integer)"),
        ("{min: 6.0, max: 30}", "repetitions.min: 6.0 has the wrong type (allowed: integer)"),
        ("{min: 6}", "repetitions.max: missing"),
        ("6.0", "repetitions: 6.0 has the wrong type (allowed: integer)"),
        ("101", "repetitions: 101 out of range (allowed: <= 100)"),
    ],
)
def test_bad_repetitions_are_refused_naming_file_and_field(write_sweep, value, message, capsys):
    path = write_sweep(BODY + f"repetitions: {value}\n")
    points, errors = spec.expand(path)
    assert points == [] and [str(e) for e in errors] == [f"{path}: {message}"]
    assert main(["validate", str(path)]) == 2
    assert f"{path}: {message}" in capsys.readouterr().err


def test_the_cap_on_repetitions_is_the_schemas():
    reps = loading.schema()["$defs"]["repetitions"]
    caps = {reps["then"]["maximum"]} | {v["maximum"] for v in reps["else"]["properties"].values()}
    assert caps == {spec.MAX_REPETITIONS}


# -- a point's file with the rounds it got --------------------------------------------------


def _rows(n):
    return [
        {
            "sweep": "s",
            "point_id": "p",
            "rep": r,
            "engine": "e",
            "workload": "scan",
            "elapsed_s": 1.0 + r,
        }
        for r in range(n)
    ]


def test_a_point_may_end_with_any_count_of_rounds_between_min_and_max(tmp_path):
    for n in (6, 11, 30):
        path = results.write_point(_rows(n), tmp_path / f"p{n}.csv", 30, 6)
        assert results.verify_point(path).problem is None
        assert json.loads(results.check_path(path).read_text())["repetitions_asked"] == [6, 30]
    for n in (5, 31):
        with pytest.raises(ValueError, match=f"{n} rows, expected 6 to 30"):
            results.write_point(_rows(n), tmp_path / f"q{n}.csv", 30, 6)
    with pytest.raises(ValueError, match="5 rows, expected 6 "):
        results.write_point(_rows(5), tmp_path / "fixed.csv", 6)


def test_a_check_file_whose_count_lies_outside_the_range_asked_fails(tmp_path):
    path = results.write_point(_rows(8), tmp_path / "p.csv", 30, 6)
    check = results.check_path(path)
    record = json.loads(check.read_text())
    check.write_text(json.dumps({**record, "repetitions_asked": [10, 30]}))
    assert results.verify_point(path).problem == "8 repetitions, its check file asked 10 to 30"
    assert len(pd.read_csv(path)) == 8


def test_a_budget_for_one_engine_is_refused_the_same_budget_runs_on_every_engine(write_sweep):
    """No ``overrides.<engine>.repetitions``: a budget raised for the engine where a claim was
    undecided is optional stopping across runs."""
    body = (
        BODY + "repetitions: {min: 6, max: 12}\noverrides:\n  sqlite:\n"
        "    repetitions: {min: 6, max: 24}\n"
    )
    path = write_sweep(body)
    points, errors = spec.expand(path, engine="sqlite")
    assert points == [] and [str(e) for e in errors] == [
        f"{path}: overrides.sqlite.repetitions: unknown key (allowed: fixed, knobs)"
    ]
    path = write_sweep(BODY + "repetitions: {min: 6, max: 12}\n")
    for engine in ("sqlite", "mariadb"):
        points, errors = spec.expand(path, engine=engine)
        assert errors == [] and {(p.repetitions_min, p.repetitions) for p in points} == {(6, 12)}
