"""The verdicts' false-positive rate and power, by simulating the lab's own decision code:
``sweeprun.claims_rule`` stops the simulated sweeps at the looks of ``analysis.sequential``,
``analysis.claims.evaluate_sweep`` judges the rows kept (``benchmarks/verdict_error_rates.py``
draws them, with run-, pass- and round-level effects, and prints the table; by default for
2,000 packs a kind, which takes hours). Here fewer packs, so each bound is widened by ``Z``
Monte Carlo standard errors (``TUNELAB_ERROR_RATE_PACKS`` sets the count; ``pytest -s``
prints the figures)."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path

import pytest

from tunelab.analysis import sequential

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "verdict_error_rates.py"
PACKS = int(os.environ.get("TUNELAB_ERROR_RATE_PACKS", "100"))
Z = 3.0
ALPHA = 0.05
POWER = 0.8
# Where the power is asserted: pass and round effects of 1.5 % each, so that a comparison
# between blocks sees per-round log ratios spread by 3 %. At 2 % each twelve rounds reach
# 74-94 % by kind, at 3 % each 10-57 % (the benchmark prints them; similar 100 % in all).
DECIDABLE = {"pass_": 0.015, "round": 0.015}


def _load():
    spec = importlib.util.spec_from_file_location("verdict_error_rates", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


sim = _load()


def _bound(p: float, n: int) -> float:
    return Z * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("kind", sim.KINDS)
def test_false_positives_stay_within_alpha_and_twice_the_margin_is_found(kind):
    """At the margin (the least favourable null) a claim holds in at most alpha of the
    packs, with pass and round effects of 3 % each; at twice the margin it holds in 80 %
    where they are ``DECIDABLE``."""
    fpr = sim.rate(kind, True, sim.Noise(), PACKS)
    power = sim.rate(kind, False, sim.Noise(**DECIDABLE), PACKS)
    print(
        f"\n{kind}: passes of {sequential.PASS_ROUNDS}: false positives {fpr} (3 % effects), "
        f"power {power} ({DECIDABLE['pass_']:.1%} effects)"
    )
    assert fpr.share <= ALPHA + _bound(ALPHA, PACKS)
    assert power.share >= POWER - _bound(POWER, PACKS)


def test_rounds_of_a_pass_taken_as_independent_declare_false_findings(kind="similar"):
    """The test can fail: with passes of three rounds and a pass effect of 5 %, pairing the
    rounds as independent (rows whose pass is their round) makes a claim at the margin hold
    far more often than alpha, while pairing by pass keeps it within alpha (and, with two to
    four passes, decides nothing). (A ``lower`` claim: 11 % of 100 packs naive, too close to
    the widened bound to assert.)"""
    noise = sim.Noise(pass_=0.05, round=0.02)
    with sim.passes_of(3):
        naive = sim.rate(kind, True, noise, PACKS, naive=True)
        honest = sim.rate(kind, True, noise, PACKS)
    print(f"\n{kind}, passes of 3: false positives {naive} naive, {honest} by pass")
    assert naive.share > ALPHA + _bound(ALPHA, PACKS)
    assert honest.share <= ALPHA + _bound(ALPHA, PACKS)
