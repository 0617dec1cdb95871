"""How often two or three packs give a finding the same verdict, by the finding's true
effect, its spread and the budget: the lab's own decision code on simulated sweeps.

    python benchmarks/verdict_agreement.py                       # 200 packs per cell
    python benchmarks/verdict_agreement.py --packs 400 --budgets 12 24 48 --round-sd 0.085

A finding "a is at least 5 % faster than b" (a ``lower`` claim, alpha 0.05, the lab's
``repetitions: {min: 6, max: N}``) is judged on sweeps simulated as
``verdict_error_rates.py`` draws them (a server engine's ``blocked`` order, its stop rule
``sweeprun.claims_rule``, its verdict ``analysis.claims.evaluate_sweep``), at true ratios
a/b from well below the margin to above 1. Per cell it prints the shares of the three
words (reproduced, not reproduced, undecided) and the chance that two and three
independent packs say the same word (the sum of the shares' squares and cubes).

What it shows: where the true ratio lies near a boundary between two words (the margin,
0.95, and the edge where "not reproduced" starts), the verdict of one pack is a draw, and
no rule fixed before the run can make two packs agree there: more rounds narrow that band
(by the square root of their number) but never close it. The stability of a pack's
verdicts is then a property of where the engine's true effects lie on the host, besides
the lab.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tunelab.analysis import claim_verdict  # noqa: E402
from tunelab.sweep.findings import FINDING  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import verdict_error_rates as sim  # noqa: E402

WORDS = (claim_verdict.REPRODUCED, claim_verdict.NOT_REPRODUCED, claim_verdict.UNDECIDED)
RATIOS = tuple(round(x, 3) for x in np.arange(0.80, 1.045, 0.01))


@contextlib.contextmanager
def budget(n_max: int) -> Iterator[None]:
    """The simulated sweeps measure with ``repetitions: {min: 6, max: n_max}``."""
    saved = sim.N_MAX
    sim.N_MAX = n_max
    try:
        yield
    finally:
        sim.N_MAX = saved


def shares(ratio: float, noise: sim.Noise, packs: int, seed: int = 0) -> dict[str, float]:
    """The share of each word over ``packs`` sweeps whose true a/b is ``ratio``."""
    found = Counter(
        claim_verdict.word(sim.pack("lower", False, noise, seed + i, ratio=ratio), FINDING)
        for i in range(packs)
    )
    return {w: found[w] / packs for w in WORDS}


def agreement(share: dict[str, float], k: int) -> float:
    """The chance that ``k`` independent packs all say the same word."""
    return sum(p**k for p in share.values())


def table(
    budgets: Sequence[int], round_sd: float, packs: int, ratios: Sequence[float] = RATIOS
) -> list[dict]:
    noise = sim.Noise(run=0.05, pass_=0.0, round=round_sd)
    found = []
    for n_max in budgets:
        t0 = time.perf_counter()
        with budget(n_max):
            for r in ratios:
                s = shares(r, noise, packs)
                found.append(
                    {
                        "budget": n_max,
                        "ratio": r,
                        **s,
                        "agree2": agreement(s, 2),
                        "agree3": agreement(s, 3),
                    }
                )
                print(
                    f"max {n_max:3}  a/b {r:5.3f}  "
                    + "  ".join(f"{w} {s[w]:5.1%}" for w in WORDS)
                    + f"  two agree {found[-1]['agree2']:5.1%}  three {found[-1]['agree3']:5.1%}",
                    flush=True,
                )
        band = [row["ratio"] for row in found if row["budget"] == n_max and row["agree2"] < 0.9]
        print(
            f"max {n_max}: two packs agree less than 90 % of the time at "
            f"{len(band)} of {len(ratios)} true ratios"
            + (f" ({', '.join(f'{r:.2f}' for r in band)})" if band else "")
            + f"; {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packs", type=int, default=200, help="simulated sweeps per cell")
    ap.add_argument("--budgets", type=int, nargs="+", default=[12, 24], help="max rounds")
    ap.add_argument(
        "--round-sd",
        type=float,
        default=0.027,
        help="a row's SD around its round (log; 0.027: SQLite's median)",
    )
    args = ap.parse_args(argv)
    print(
        f"a 'lower' finding, margin {sim.MARGIN:.0%}, alpha {sim.ALPHA}, repetitions "
        f"{{min: {sim.N_MIN}, max: N}}; round SD {args.round_sd:.1%} (a pair's per-round "
        f"log ratio {args.round_sd * 2**0.5:.1%}); {args.packs} packs per cell"
    )
    table(args.budgets, args.round_sd, args.packs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
