"""Several contexts, several chances to err: how often a finding judged in k contexts (cold
and warm, each selectivity) comes out reproduced or not reproduced under each rule that makes
one word of the contexts' verdicts (``analysis.decisions.combine``; the findings file's
``rules.contexts``), by simulation of the lab's own decision code.

    python benchmarks/context_rule.py                     # 200 packs per k, truth and rule
    python benchmarks/context_rule.py --packs 50 --contexts 1 8 --rules all-bonferroni all

Each pack is one sweep of a server engine as ``benchmarks/verdict_error_rates.py`` draws it
(blocked order, run, pass and round effects on the log time; ``sweeprun.claims_rule`` stops
it at the looks of ``repetitions: {min: 6, max: 12}``), with a ``lower`` claim a/b and a
swept key the claim does not name, with k values: the claim is judged within each value (a
context) and ``claims.evaluate_sweep`` gives the one word under the rule. Truths, the same
in every context: a/b at the margin (0.95: "reproduced" is a false positive) and at twice it
(0.90: "reproduced" is power, "not reproduced" a false refutation). The lab's rule,
``all-bonferroni``, beside ``all`` (one context against the claim at alpha refutes it) shows
what refuting at alpha over the contexts costs and gains; the rows of a pack are the same
under every rule.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from tunelab.analysis import claim_verdict, claims, decisions  # noqa: E402
from tunelab.measure import sweeprun  # noqa: E402


def _load_sim():
    spec = importlib.util.spec_from_file_location(
        "verdict_error_rates", HERE / "verdict_error_rates.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


sim = _load_sim()
MARGIN = sim.MARGIN
# Pass and round effects where twelve rounds decide one context with about 95 % power
# (``tests/test_verdict_error_rates.py``'s DECIDABLE): the rule's cost shows, not the noise's.
NOISE = sim.Noise(pass_=0.015, round=0.015)
CONTEXTS = (1, 2, 4, 8)
RULES = decisions.CONTEXT_RULES


def points_of(k: int, ratio: float, own_blocks: bool = False) -> list:
    """a and b in each of k contexts (a knob ``mix`` the claim does not name). Each layout
    one block, as index layouts are, whose pass effects every context then shares (as
    selectivities, or cold and warm, share their index's block); ``own_blocks``: each
    context's a and b blocks of their own, so the contexts err independently (as pool
    sizes, each a restart, would)."""
    out = []
    for j in range(k):
        suffix = str(j) if own_blocks else ""
        for side, log_mean in (("a", math.log(ratio)), ("b", 0.0)):
            knobs = {"layout": side, "mix": j}
            out.append(
                sim.SimPoint(
                    f"{side}{j}", sim.ENGINE, sim.N_MAX, sim.N_MIN, knobs, side + suffix, log_mean
                )
            )
    return out


def pack(
    k: int, ratio: float, rule: str, seed: int, noise: sim.Noise = NOISE, own_blocks: bool = False
) -> claim_verdict.Verdict:
    """One simulated sweep measured until the stop rule ends it: the claim's verdict."""
    import numpy as np

    rng = np.random.default_rng([seed, k, int(ratio * 1000)])  # the same rows for each rule
    points = points_of(k, ratio, own_blocks)
    expect = [{"kind": "lower", "a": {"layout": "a"}, "b": {"layout": "b"}, "contexts": rule}]
    stop = sweeprun.claims_rule(points, expect)  # type: ignore[arg-type]
    effects = sim.pass_effects(points, rng, noise)
    run = float(rng.normal(0, noise.run))
    active, rows, first = list(range(len(points))), [], 0
    while first < sim.N_MAX:
        last = min(sim.N_MAX, first + sweeprun.PASS_ROUNDS)
        rows += sim.round_rows(points, active, first, last, effects, run, noise, rng, False)
        first = last
        decision = stop(pd.DataFrame(rows), first)
        if decision.stop:
            break
        wanted = decision.points
        active = [i for i, p in enumerate(points) if wanted is None or p.point_id in wanted]
        if not active:
            break
    (verdict,) = claims.evaluate_sweep(expect, pd.DataFrame(rows), sim.ENGINE)
    assert len(verdict.contexts) == k, verdict.contexts
    return verdict


def shares(
    k: int,
    ratio: float,
    rule: str,
    packs: int,
    noise: sim.Noise = NOISE,
    own_blocks: bool = False,
    seed: int = 0,
) -> dict[str, float]:
    """The share of ``packs`` whose one word is each of holds, against, undecided."""
    found = {"holds": 0, "against": 0, "undecided": 0}
    for i in range(packs):
        v = pack(k, ratio, rule, seed + i, noise, own_blocks).verdict
        key = (
            "holds"
            if v == decisions.HOLDS
            else "undecided"
            if v not in decisions.DECIDED
            else ("against")
        )
        found[key] += 1
    return {key: n / packs for key, n in found.items()}


def mc_error(share: float, n: int) -> float:
    return math.sqrt(max(share * (1 - share), 1e-12) / n)


def table(
    contexts: Sequence[int],
    packs: int,
    rules: Sequence[str] = RULES,
    noise: sim.Noise = NOISE,
    own_blocks: bool = False,
) -> list[dict]:
    """Per rule and k: at the margin (a true effect of exactly 5 %, where either word is an
    error of the boundary: the least favourable case for both) the shares reproduced and not
    reproduced; at twice the margin, the shares reproduced (power) and not reproduced."""
    out = []
    for rule in rules:
        for k in contexts:
            null = shares(k, 1 - MARGIN, rule, packs, noise, own_blocks)
            effect = shares(k, 1 - 2 * MARGIN, rule, packs, noise, own_blocks)
            out.append({"rule": rule, "k": k, "margin": null, "twice": effect})
            print(
                f"{rule:14} k={k}: at the margin reproduced {null['holds']:6.1%}, not "
                f"reproduced {null['against']:6.1%}; at twice it reproduced "
                f"{effect['holds']:6.1%}, not reproduced {effect['against']:6.1%}, undecided "
                f"{effect['undecided']:6.1%} (±{mc_error(0.5, packs):.1%} at most)",
                flush=True,
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packs", type=int, default=200, help="simulated sweeps per k, truth, rule")
    ap.add_argument("--contexts", type=int, nargs="+", default=list(CONTEXTS))
    ap.add_argument("--rules", nargs="+", default=list(RULES), choices=RULES)
    ap.add_argument("--pass-sd", type=float, default=NOISE.pass_)
    ap.add_argument("--round-sd", type=float, default=NOISE.round)
    ap.add_argument(
        "--own-blocks",
        action="store_true",
        help="each context's sides in blocks of their own: contexts err independently",
    )
    args = ap.parse_args(argv)
    noise = sim.Noise(NOISE.run, args.pass_sd, args.round_sd)
    print(
        f"lower a/b, alpha {sim.ALPHA}, margin {MARGIN:.0%}, repetitions {{min: {sim.N_MIN}, "
        f"max: {sim.N_MAX}}}, effects run {noise.run:.0%}, pass {noise.pass_:.1%}, round "
        f"{noise.round:.1%}; {args.packs} packs per k, truth and rule; contexts "
        f"{'in blocks of their own' if args.own_blocks else 'sharing their blocks'}"
    )
    table(args.contexts, args.packs, args.rules, noise, args.own_blocks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
