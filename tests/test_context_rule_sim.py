"""The contexts rule's error rate over several contexts, by the lab's own decision code
(``benchmarks/context_rule.py``; fewer packs here, the bound widened by the Monte Carlo
error): with four contexts whose effect sits at the margin, ``all`` says "reproduced" in
at most alpha of the packs."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "context_rule.py"
PACKS = 30
ALPHA = 0.05


def _load():
    spec = importlib.util.spec_from_file_location("context_rule", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_all_keeps_a_false_reproduced_within_alpha_over_four_contexts():
    sim = _load()
    found = sim.shares(4, 1 - sim.MARGIN, "all", PACKS)
    assert found["holds"] <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / PACKS), found
    v = sim.pack(4, 1 - 2 * sim.MARGIN, "all", 0)
    assert len(v.contexts) == 4
    assert v.to_json()["contexts_rule"] == "all"
