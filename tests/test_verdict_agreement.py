"""Whether two packs give a finding the same verdict, by the finding's true effect
(``benchmarks/verdict_agreement.py``, the lab's own decision code on simulated sweeps):
far from the margin they do; where the true ratio lies at the edge between two words no
rule fixed before the run makes them, whatever the lab does."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "verdict_agreement.py"
PACKS = 60
ROUND_SD = 0.027  # SQLite's median round SD in the packs docs/speed.md reports


def _load():
    spec = importlib.util.spec_from_file_location("verdict_agreement", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


agree = _load()
NOISE = agree.sim.Noise(run=0.05, pass_=0.0, round=ROUND_SD)


def test_two_packs_agree_where_the_effect_is_far_from_the_margin():
    """A 15 % effect (three times the 5 % margin) and a 2 % slowdown: the same word in
    nearly every pack, reproduced and not reproduced."""
    faster = agree.shares(0.85, NOISE, PACKS)
    slower = agree.shares(1.02, NOISE, PACKS)
    print(f"\n0.85: {faster}\n1.02: {slower}")
    assert faster["reproduced"] >= 0.95
    assert slower["not reproduced"] >= 0.95
    assert min(agree.agreement(faster, 2), agree.agreement(slower, 2)) >= 0.9


def test_two_packs_disagree_often_where_the_effect_is_at_the_edge_of_a_word():
    """An 8 % effect lies where twelve rounds at this spread decide about half the packs:
    two packs say the same word about half the time, three far less."""
    edge = agree.shares(0.92, NOISE, PACKS)
    print(f"\n0.92: {edge}")
    assert agree.agreement(edge, 2) <= 0.75
    assert agree.agreement(edge, 3) < agree.agreement(edge, 2)


def test_at_the_margin_neither_word_is_said_more_often_than_alpha():
    """A true ratio of 0.95, the margin itself: "reproduced" and "not reproduced" are each
    an error there, and each stays within alpha (widened by three Monte Carlo errors)."""
    packs, alpha = 150, agree.sim.ALPHA
    at = agree.shares(0.95, NOISE, packs)
    print(f"\n0.95: {at}")
    bound = alpha + 3 * (alpha * (1 - alpha) / packs) ** 0.5
    assert at["reproduced"] <= bound and at["not reproduced"] <= bound, at
