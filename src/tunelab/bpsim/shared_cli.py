"""`tunelab bpsim-shared`: GBP and LBP sizing curves for a shared-data cluster on synthetic
traces (``tunelab.bpsim.shared_curves``), printed against the pureScale slides' rules of thumb.

Errors in the arguments are one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from tunelab.bpsim import shared_curves
from tunelab.bpsim.members import POLICIES, shared_trace_pieces

PROG = "tunelab bpsim-shared"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise UsageError(message)


def _list(kind, low, name: str):
    def parse(text: str):
        try:
            values = [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a comma list") from None
        if not values or min(values) < low:
            raise argparse.ArgumentTypeError(f"{text!r}: each {name} must be >= {low}")
        if kind is float and max(values) > 1:
            raise argparse.ArgumentTypeError(f"{text!r}: each {name} must be within [0, 1]")
        return sorted(set(values))

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=50_000, help="distinct pages in the database")
    p.add_argument("--references", type=int, default=500_000, help="per trace")
    p.add_argument("--alpha", default="0.9", help="Zipf skew of page popularity, or 'uniform'")
    p.add_argument(
        "--affinity",
        type=float,
        default=0.8,
        help="share of a member's references to its own partition",
    )
    p.add_argument("--members", type=_list(int, 1, "member count"), default=[1, 2, 4])
    p.add_argument("--write-share", type=_list(float, 0, "write share"), default=[0.05, 0.2, 0.5])
    p.add_argument(
        "--lbp",
        type=_list(int, 1, "LBP size"),
        help="LBP sizes in pages (default 2, 5 and 10 %% of --pages)",
    )
    p.add_argument(
        "--gbp",
        type=_list(int, 1, "GBP size"),
        help="GBP sizes in pages (default 10 from 1 to 100 %% of --pages)",
    )
    p.add_argument("--policy", choices=POLICIES, default="lru", help="the LBPs' policy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="write every simulated point as CSV")
    p.add_argument("--force", action="store_true", help="overwrite --out")
    return p


def _alpha(text: str) -> float | None:
    if text == "uniform":
        return None
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--alpha {text!r}: a number >= 0 or 'uniform'") from None
    if not value >= 0:
        raise UsageError(f"--alpha {text!r}: a number >= 0 or 'uniform'")
    return value


def _check(args) -> None:
    if args.pages < 1 or args.references < 1:
        raise UsageError("--pages and --references must be >= 1")
    if not 0 <= args.affinity <= 1:
        raise UsageError(f"--affinity {args.affinity}: must be within [0, 1]")
    if args.affinity > 0 and args.pages < max(args.members):
        raise UsageError(
            f"--pages {args.pages}: must be >= the largest member count "
            f"({max(args.members)}) when --affinity > 0"
        )
    if args.out and Path(args.out).exists() and not args.force:
        raise UsageError(f"--out {args.out}: file exists; pass --force to overwrite")


def check_args(words: list[str]) -> str | None:
    """What is wrong with these arguments, in one line; None when they would run (for a
    run's configuration, checked before anything starts)."""
    try:
        args = build_parser().parse_args(words)
        if args.out:
            raise UsageError("--out is the workflow's to set")
        _check(args)
        _alpha(args.alpha)
    except (UsageError, ValueError) as exc:
        return str(exc)
    except SystemExit:  # --help
        return "--help does not run"
    return None


def _pct(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0%}"


def run(args) -> int:
    _check(args)
    alpha = _alpha(args.alpha)
    lbp = args.lbp or sorted({max(1, args.pages * p // 100) for p in (2, 5, 10)})
    gbp = args.gbp or sorted(
        {int(x) for x in np.geomspace(max(1, args.pages // 100), args.pages, 10).round()}
    )

    def trace_for(members: int, share: float):
        return shared_trace_pieces(
            args.pages, args.references, members, share, args.affinity, alpha, args.seed
        )

    frame = shared_curves.curves(trace_for, args.members, args.write_share, lbp, gbp, args.policy)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        trace = {
            "pages": args.pages,
            "alpha": args.alpha,
            "affinity": args.affinity,
            "policy": args.policy,
            "seed": args.seed,
        }
        frame.assign(**trace).to_csv(args.out, index=False)
    knees = shared_curves.knees(frame)
    print(
        f"{args.pages} pages, {args.references} references per trace, alpha {args.alpha}, "
        f"affinity {args.affinity:g}, {args.policy} LBPs; GBP sizes {gbp[0]}..{gbp[-1]}"
    )
    print(
        "GBP knee (reads within 5 % of the largest GBP's), as a share of the LBPs' sum, "
        "against the slides' rule:"
    )
    print(
        f"  {'members':>7} {'writes':>6} {'LBP':>8} {'knee':>8} {'share':>6} {'rule':>5} "
        f"{'reads':>9}"
    )
    for k in knees.itertuples():
        knee = "-" if math.isnan(k.gbp_knee_pages) else f"{int(k.gbp_knee_pages)}"
        print(
            f"  {k.members:>7} {k.write_share:>6g} {k.lbp_pages:>8} {knee:>8} "
            f"{_pct(k.gbp_knee_share):>6} {_pct(k.rule_share):>5} {int(k.reads_at_largest):>9}"
        )
    print("LBP at the largest GBP: references a valid copy served / found their copy invalid:")
    top = frame[frame["gbp_pages"] == frame["gbp_pages"].max()]
    for (m, w), g in top.groupby(["members", "write_share"]):
        cells = ", ".join(
            f"{r.lbp_pages}: {r.valid_lbp_ratio:.1%} / {r.invalid_ratio:.1%}"
            for r in g.sort_values("lbp_pages").itertuples()
        )
        print(f"  {m} members, writes {w:g}: {cells}")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return run(build_parser().parse_args(argv))
    except (UsageError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
