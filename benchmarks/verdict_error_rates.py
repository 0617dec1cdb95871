"""False-positive rate and power of the lab's verdicts, by simulation of the lab's own
decision code on synthetic rows of a server engine's sweep.

    python benchmarks/verdict_error_rates.py                 # 2,000 packs per kind and case
    python benchmarks/verdict_error_rates.py --packs 500 --kinds lower falls
    python benchmarks/verdict_error_rates.py --packs 300 --cases "naive, passes of 3"

A pack takes 0.05-0.4 s (crossover and the trends the most), so the default of 2,000 per
kind, truth and case takes hours on one core; the figures in docs/measurement.md are of
150 to 300 packs.

Each simulated pack is one sweep of a server engine (``blocked`` order) with one claim,
measured with ``repetitions: {min: 6, max: 12}``: its rows are drawn round by round as
``tunelab.measure.sweeprun`` measures them (the blocks' order is ``sweeprun.schedule``'s, every row
records its ``round``, ``pass`` and ``block``), the stop rule ``sweeprun.claims_rule``
decides after each pass whether measuring goes on and which points it measures, and the
verdict is what ``analysis.claims.evaluate_sweep`` reaches on the rows kept. The compared
sides lie in different blocks (index layouts, page sizes, pool sizes: a restart or a build
apart), which is where passes matter.

A row's log time is the point's true log mean plus three random effects, normal on the log
scale (log-normal times): the run's (``run``, shared by every row of the pack), the pass's
(``pass_``, one per block and pass: what the host, the server's start and the table's build
did while a block measured its rounds of a pass) and the round's (``round``, one per row).
Defaults: 5 %, 3 % and 3 % (stored results to take them from were not at hand; the docs'
cases, 1.5x in one pass on PostgreSQL and 18 % in one burst on MariaDB, are larger).

Per kind two truths: the null at the least favourable place, the margin (``lower`` a/b
0.95, ``higher`` 1.05, ``similar`` 1.15 with its margin of 15 %, ``crossover`` 0.95 below
the crossing and 1.05 above it, ``falls``/``rises`` the largest value 0.95/1.05 times the
smallest, linear in between, ``ratio`` (``lower`` with ``than``) the a/b ratio at one mix
0.95 times that at the other), where a ``holds`` is a false positive; and an effect of twice
the margin (0.90, 1.10, ``similar`` 1.0), where ``holds`` is power. Cases (``CASES``): the
analysis the lab does (rows with their ``pass``), with and without a pass effect (the lab
sets a block up anew where it ends one pass and begins the next, so each block's part of a
pass has its own effect), and as it was before that, a block measuring on across a turn
keeping its pass effect; and with passes of three, the
lab's analysis and the naive one (each round taken as its own pass, so that rounds pair as
independent). With passes of one round the two analyses are the same.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tunelab.analysis import claims, sequential  # noqa: E402
from tunelab.measure import sweeprun  # noqa: E402

# "ratio": ``lower`` with ``than``: the a/b ratio at mix x below the a/b ratio at mix y
KINDS = ("lower", "higher", "similar", "crossover", "falls", "rises", "ratio")
ENGINE = "mariadb"  # a server engine: blocked order
ALPHA, MARGIN, SIMILAR_MARGIN = 0.05, 0.05, 0.15
N_MIN, N_MAX = 6, 12
SELECTIVITY = (0.001, 0.01, 0.1, 1.0)  # along for crossover, within one block per layout
POOLS = (16, 32, 64, 128)  # along for falls/rises: each its own block (a restart)


@dataclass(frozen=True)
class Noise:
    """SDs of the log time: the run's, a block's pass's, a row's; ``turns``: a block that
    ends one pass and starts the next (the order reverses) keeps its pass effect, measuring
    on without a set-up in between."""

    run: float = 0.05
    pass_: float = 0.03
    round: float = 0.03
    turns: bool = False


@dataclass(frozen=True)
class SimPoint:
    """What ``sweeprun.claims_rule`` reads of a point."""

    point_id: str
    engine: str
    repetitions: int
    repetitions_min: int
    knobs: dict
    block: str
    log_mean: float


def expect_of(kind: str) -> list[dict]:
    if kind == "ratio":
        return [
            {
                "kind": "lower",
                "a": {"layout": "a"},
                "b": {"layout": "b"},
                "where": {"mix": "x"},
                "than": {"mix": "y"},
            }
        ]
    if kind in ("lower", "higher"):
        return [{"kind": kind, "a": {"layout": "a"}, "b": {"layout": "b"}}]
    if kind == "similar":
        return [
            {"kind": kind, "a": {"layout": "a"}, "b": {"layout": "b"}, "min_effect": SIMILAR_MARGIN}
        ]
    if kind == "crossover":
        return [
            {
                "kind": kind,
                "a": {"layout": "a"},
                "b": {"layout": "b"},
                "along": "selectivity",
                "within": [0.005, 0.5],
            }
        ]
    return [{"kind": kind, "along": "pool"}]


def truth(kind: str, null: bool) -> float:
    """The true ratio the claim is about: at the margin (null) or at twice it."""
    if kind == "similar":
        return 1 + SIMILAR_MARGIN if null else 1.0
    effect = MARGIN if null else 2 * MARGIN
    return 1 - effect if kind in ("lower", "falls", "ratio") else 1 + effect


def points_of(kind: str, ratio: float) -> list[SimPoint]:
    def point(i: int, knobs: dict, block: str, log_mean: float) -> SimPoint:
        return SimPoint(f"p{i}", ENGINE, N_MAX, N_MIN, knobs, block, log_mean)

    if kind in ("lower", "higher", "similar"):
        return [point(0, {"layout": "a"}, "a", math.log(ratio)), point(1, {"layout": "b"}, "b", 0)]
    if kind == "ratio":  # each layout a block; a/b is ``ratio`` at mix x, 1 at mix y
        return [
            point(0, {"layout": "a", "mix": "x"}, "a", math.log(ratio)),
            point(1, {"layout": "b", "mix": "x"}, "b", 0.0),
            point(2, {"layout": "a", "mix": "y"}, "a", 0.0),
            point(3, {"layout": "b", "mix": "y"}, "b", 0.0),
        ]
    if kind == "crossover":  # a/b: 1/ratio... below the crossing, ratio above (ratio > 1)
        r = math.log(ratio if ratio > 1 else 1 / ratio)
        out = []
        for j, s in enumerate(SELECTIVITY):
            sign = -1 if j < len(SELECTIVITY) // 2 else 1
            out.append(point(2 * j, {"layout": "a", "selectivity": s}, "a", sign * r))
            out.append(point(2 * j + 1, {"layout": "b", "selectivity": s}, "b", 0.0))
        return out
    steps = np.linspace(0, math.log(ratio), len(POOLS))
    return [point(j, {"pool": v}, f"pool{v}", float(steps[j])) for j, v in enumerate(POOLS)]


@contextlib.contextmanager
def passes_of(rounds: int) -> Iterator[None]:
    """The lab's measuring and analysis with passes of ``rounds`` rounds (a what-if)."""
    saved = sequential.PASS_ROUNDS, sweeprun.PASS_ROUNDS
    sequential.PASS_ROUNDS = sweeprun.PASS_ROUNDS = rounds
    try:
        yield
    finally:
        sequential.PASS_ROUNDS, sweeprun.PASS_ROUNDS = saved


def pass_effects(
    points: Sequence[SimPoint], rng: np.random.Generator, noise: Noise
) -> dict[tuple[str, int], float]:
    """(block, pass) -> the log effect of that block's part of that pass."""
    blocks = list(dict.fromkeys(p.block for p in points))  # in the schedule's order
    n_passes = -(-N_MAX // sweeprun.PASS_ROUNDS)
    draws = rng.normal(0, noise.pass_, (len(blocks), n_passes))
    found = {}
    for k in range(n_passes):
        order = blocks[::-1] if k % 2 else blocks
        for i, b in enumerate(blocks):
            turn = noise.turns and k > 0 and b == order[0]
            found[(b, k)] = found[(b, k - 1)] if turn else float(draws[i, k])
    return found


def round_rows(
    points: Sequence[SimPoint],
    active: Sequence[int],
    first: int,
    last: int,
    effects: dict[tuple[str, int], float],
    run: float,
    noise: Noise,
    rng: np.random.Generator,
    naive: bool,
) -> list[dict]:
    """Rows of rounds ``first`` .. ``last - 1`` of the ``active`` points, in the lab's order."""
    rows = []
    blocks = [points[i].block for i in active]
    for v in sweeprun.schedule(len(active), first, last, "blocked", 0, blocks):
        p = points[active[v.point]]
        k = sweeprun.pass_of(v.round, "blocked")
        log_t = p.log_mean + run + effects[(p.block, k)] + rng.normal(0, noise.round)
        rows.append(
            {
                "sweep": "sim",
                "point_id": p.point_id,
                "engine": ENGINE,
                "workload": "scan",
                "cache_requested": "cold",
                "round": v.round,
                "order_in_round": v.order,
                "order_mode": "blocked",
                "pass": v.round if naive else k,
                "block": p.block,
                "repetitions_min": N_MIN,
                "repetitions_max": N_MAX,
                "elapsed_s": math.exp(-3 + log_t),
                **{
                    f"knob_{key}" if key != "selectivity" else "wl_selectivity": val
                    for key, val in p.knobs.items()
                },
            }
        )
    return rows


def pack(
    kind: str, null: bool, noise: Noise, seed: int, naive: bool = False, ratio: float | None = None
) -> str:
    """One simulated sweep measured until the stop rule ends it: the claim's verdict.
    ``ratio``: the true ratio instead of ``truth(kind, null)``."""
    rng = np.random.default_rng([seed, KINDS.index(kind), int(null), int(naive)])
    points = points_of(kind, truth(kind, null) if ratio is None else ratio)
    expect = expect_of(kind)
    stop = sweeprun.claims_rule(points, expect)  # type: ignore[arg-type]
    effects = pass_effects(points, rng, noise)
    run = float(rng.normal(0, noise.run))
    active, rows, first = list(range(len(points))), [], 0
    while first < N_MAX:
        last = min(N_MAX, first + sweeprun.PASS_ROUNDS)
        rows += round_rows(points, active, first, last, effects, run, noise, rng, naive)
        first = last
        decision = stop(pd.DataFrame(rows), first)
        if decision.stop:
            break
        wanted = decision.points
        active = [i for i, p in enumerate(points) if wanted is None or p.point_id in wanted]
        if not active:
            break
    (verdict,) = claims.evaluate_sweep(expect, pd.DataFrame(rows), ENGINE)
    return verdict.verdict


@dataclass(frozen=True)
class Rate:
    share: float
    n: int

    @property
    def error(self) -> float:
        """The Monte Carlo standard error of ``share``."""
        return math.sqrt(max(self.share * (1 - self.share), 1e-12) / self.n)

    def __str__(self) -> str:
        return f"{self.share:6.1%} ±{self.error:.1%}"


def rate(
    kind: str, null: bool, noise: Noise, packs: int, naive: bool = False, seed: int = 0
) -> Rate:
    """The share of ``packs`` simulated sweeps whose claim holds."""
    held = sum(pack(kind, null, noise, seed + i, naive) == "holds" for i in range(packs))
    return Rate(held / packs, packs)


# name -> (passes of, naive analysis, pass effect, turns keep it). With passes of one
# round the naive analysis is the lab's: a pass is a round.
CASES = {
    "lab": (None, False, True, False),
    "lab, no pass effect": (None, False, False, False),
    "turns not set up anew": (None, False, True, True),
    "lab, passes of 3": (3, False, True, False),
    "naive, passes of 3": (3, True, True, False),
}


def table(
    kinds: Sequence[str], packs: int, noise: Noise, cases: Sequence[str] = tuple(CASES)
) -> list[dict]:
    found = []
    for name in cases:
        rounds, naive, with_pass, turns = CASES[name]
        n = Noise(noise.run, noise.pass_ if with_pass else 0.0, noise.round, turns)
        with passes_of(rounds or sequential.PASS_ROUNDS):
            for kind in kinds:
                t0 = time.perf_counter()
                fpr, power = rate(kind, True, n, packs, naive), rate(kind, False, n, packs, naive)
                found.append(
                    {
                        "case": name,
                        "kind": kind,
                        "fpr": fpr,
                        "power": power,
                        "seconds": time.perf_counter() - t0,
                    }
                )
                print(
                    f"{name:22} {kind:10} false positives {fpr}  power {power}  "
                    f"({found[-1]['seconds']:.0f} s)",
                    flush=True,
                )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packs", type=int, default=2000, help="simulated sweeps per kind and case")
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--pass-sd", type=float, default=Noise.pass_)
    ap.add_argument("--round-sd", type=float, default=Noise.round)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    args = ap.parse_args(argv)
    print(
        f"passes of {sequential.PASS_ROUNDS} rounds in the lab; alpha {ALPHA}, margin "
        f"{MARGIN:.0%} (similar {SIMILAR_MARGIN:.0%}), repetitions {{min: {N_MIN}, max: "
        f"{N_MAX}}}, {args.packs} packs per kind and truth"
    )
    print(f"effects: run {Noise.run:.0%}, pass {args.pass_sd:.0%}, round {args.round_sd:.0%}")
    table(args.kinds, args.packs, Noise(pass_=args.pass_sd, round=args.round_sd), args.cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
