"""`tunelab bpsim TRACE`: buffer-pool curves from a page-reference trace.

Self-contained: ``main(argv)`` parses its own arguments (without the leading ``bpsim``) and
returns an exit status; errors in the arguments or the trace are one line on stderr and
status 2. A closed output pipe or a full disk is raised on to the caller: the `tunelab`
command ends those (quietly, or "disk full" and status 1), also for ``python -m``.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from tunelab.bpsim.curves import (
    CSV_COLUMNS,
    SizesError,
    curve_from_histograms,
    knee,
    parse_sizes,
    summary,
)
from tunelab.bpsim.policies import POLICIES, policy_curve
from tunelab.bpsim.shards import sample as shards_sample
from tunelab.bpsim.shards import shards_error
from tunelab.bpsim.stackdist import distance_histograms
from tunelab.bpsim.traces import TraceFormatError, read_trace
from tunelab.host import atomic

PROG = "tunelab bpsim"
DEFAULT_POLICY_SIZES = "log:20"
MAX_POLICY_SIZES = 1000
_SHOWN_ROWS = 12


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description=(
            "Buffer-pool simulation from a page-reference trace: hits, misses (physical "
            "reads), reads per second, application and system hit ratio for every pool size "
            "(exact LRU in one pass), other policies at chosen sizes, the knee and the "
            "working set."
        ),
        epilog=(
            "TRACE: text (one page number per line, optional second column 1 = brought in "
            "by prefetch, '# duration_s=...' header lines), .npy or .npz. "
            "SIZES: all | N,M,... | A:B[:STEP] | log:K."
        ),
    )
    p.add_argument("trace", metavar="TRACE", help="page-reference trace file")
    p.add_argument(
        "--sizes",
        metavar="SIZES",
        help=f"pool sizes in pages (default: all for lru, {DEFAULT_POLICY_SIZES} otherwise)",
    )
    p.add_argument("--policy", default="lru", choices=POLICIES, help="replacement policy")
    p.add_argument(
        "--seq-threshold",
        type=float,
        default=0.8,
        metavar="SHARE",
        help="lru-seqthreshold: share of the pool prefetched pages may hold (VPSEQT/100)",
    )
    p.add_argument("--csv", action="store_true", help="print pool_pages,hits,misses,hit_ratio")
    p.add_argument("--out", metavar="FILE", help="write the full curve table as CSV")
    p.add_argument("--summary", metavar="FILE", help="write the headline figures as JSON")
    p.add_argument("--force", action="store_true", help="overwrite --out/--summary files")
    p.add_argument(
        "--duration",
        type=float,
        metavar="SECONDS",
        help="wall time of the traced workload (default: duration_s from the trace)",
    )
    p.add_argument(
        "--knee-share",
        type=float,
        default=0.05,
        metavar="SHARE",
        help="knee: smallest pool where growing to the working set saves < SHARE of its reads",
    )
    p.add_argument(
        "--sample-rate",
        type=float,
        metavar="R",
        help="SHARDS spatial sampling at rate R in (0, 1] (lru only)",
    )
    p.add_argument("--salt", type=int, default=0, help="hash salt for --sample-rate")
    p.add_argument(
        "--check-exact",
        action="store_true",
        help="with --sample-rate: also compute the exact curve and report the sampling error",
    )
    return p


def _check_args(args) -> None:
    if not 0 <= args.seq_threshold <= 1:
        raise UsageError(f"--seq-threshold {args.seq_threshold}: must be within [0, 1]")
    if not 0 <= args.knee_share < 1:
        raise UsageError(f"--knee-share {args.knee_share}: must be within [0, 1)")
    if args.duration is not None and not args.duration > 0:
        raise UsageError(f"--duration {args.duration}: must be a positive number of seconds")
    if args.sample_rate is not None:
        if not 0 < args.sample_rate <= 1:
            raise UsageError(f"--sample-rate {args.sample_rate}: must be within (0, 1]")
        if args.policy != "lru":
            raise UsageError("--sample-rate works with --policy lru only")
    if args.check_exact and args.sample_rate is None:
        raise UsageError("--check-exact needs --sample-rate")
    for option in ("out", "summary"):
        target = getattr(args, option)
        if target and Path(target).exists() and not args.force:
            raise UsageError(f"--{option} {target}: file exists; pass --force to overwrite")


def _shown_rows(curve: pd.DataFrame, marks: list[int | None]) -> pd.DataFrame:
    if len(curve) <= _SHOWN_ROWS:
        return curve
    pos = np.unique(np.geomspace(1, len(curve), _SHOWN_ROWS).round().astype(int) - 1)
    keep = set(curve["pool_pages"].to_numpy()[pos]) | {m for m in marks if m is not None}
    return curve[curve["pool_pages"].isin(keep)]


def _report(trace_path: str, curve: pd.DataFrame, info: dict, extra: list[str]) -> None:
    out = sys.stdout
    duration = info["duration_s"]
    pace = f", {duration:g} s" if duration else ", pace unknown (--duration)"
    out.write(
        f"trace {trace_path}: {info['references']} references ({info['logical_reads']} "
        f"getpages, {info['prefetch_requests']} prefetch){pace}\n"
    )
    if "shards" in info:
        out.write(f"distinct pages ~{info['distinct_pages']} (estimated from the sample)\n")
    else:
        out.write(
            f"distinct pages {info['distinct_pages']}; working set "
            f"{info['working_set_pages']} pages (smallest pool with only the "
            f"{info['compulsory_misses']} compulsory misses)\n"
        )
    share = info["knee_share"]
    if info["knee_pages"] is not None:
        out.write(
            f"knee {info['knee_pages']} pages: beyond it, growing the pool to "
            f"{int(curve['pool_pages'].max())} pages saves less than {share:.0%} of the reads "
            "left\n"
        )
    for line in extra:
        out.write(line + "\n")
    shown = _shown_rows(curve, [info["knee_pages"], info["working_set_pages"]])
    table = pd.DataFrame(
        {
            "pool_pages": shown["pool_pages"],
            "hit_ratio": shown["hit_ratio"].map("{:.4f}".format),
            "misses": shown["misses"],
            "reads/s": shown["physical_reads_per_s"].map(
                lambda v: "-" if not math.isfinite(v) else f"{v:.1f}"
            ),
            "app_hit": shown["hit_ratio_app"].map("{:.4f}".format),
            "sys_hit": shown["hit_ratio_sys"].map("{:.4f}".format),
        }
    )
    out.write(table.to_string(index=False) + "\n")


def run(args) -> int:
    trace = read_trace(args.trace)
    if not len(trace):  # every figure would be 0/0
        raise TraceFormatError(f"{args.trace}: trace has no references")
    duration = args.duration if args.duration is not None else trace.duration_s
    extra: list[str] = []
    if args.sample_rate is not None:
        sampled = shards_sample(trace, args.sample_rate, args.salt)
        sizes = parse_sizes(args.sizes, sampled.estimated_distinct)
        curve = sampled.curve(sizes, duration)
        sinfo = sampled.info()
        info = {
            "references": len(trace),
            "logical_reads": sampled.logical,
            "prefetch_requests": sampled.prefetch_rows,
            "distinct_pages": sampled.estimated_distinct,
            "compulsory_misses": None,
            "working_set_pages": None,
            "knee_pages": knee(curve, args.knee_share),
            "knee_share": args.knee_share,
            "duration_s": duration,
            "shards": sinfo,
        }
        extra.append(
            f"SHARDS rate {args.sample_rate:g}: {sinfo['sampled_references']} references to "
            f"{sinfo['sampled_pages']} sampled pages; sizes below "
            f"{sinfo['resolution_pages']} pages are unresolved; stated bound: the exact miss "
            f"ratio lies within {sinfo['bound_se']:g} x miss_ratio_se at >= "
            f"{sinfo['bound_coverage']:.0%} of resolved sizes"
        )
        if args.check_exact:
            hist, _ = distance_histograms(trace.pages, trace.prefetch)
            err = shards_error(curve, curve_from_histograms(hist, sizes, duration))
            info["shards_error"] = err
            extra.append(
                f"against the exact curve ({err['sizes']} resolved sizes): mean abs error "
                f"{err['mae']:.4f}, max {err['max_abs_error']:.4f} = {err['max_z']:.2f} SE; "
                f"{err['within_bound']:.1%} of sizes within the bound"
            )
    else:
        hist, distinct = distance_histograms(trace.pages, trace.prefetch)
        if args.policy == "lru":
            sizes = parse_sizes(args.sizes, distinct)
            curve = curve_from_histograms(hist, sizes, duration)
        else:
            spec = args.sizes if args.sizes is not None else DEFAULT_POLICY_SIZES
            sizes = parse_sizes(spec, distinct)
            if sizes.size > MAX_POLICY_SIZES:
                raise UsageError(
                    f"--policy {args.policy} simulates every size separately; {sizes.size} "
                    f"sizes is more than {MAX_POLICY_SIZES}: choose fewer (e.g. --sizes log:50)"
                )
            curve = policy_curve(trace, sizes, args.policy, args.seq_threshold, duration)
            extra.append(
                f"policy {args.policy}"
                + (
                    f" (sequential threshold {args.seq_threshold:g})"
                    if args.policy == "lru-seqthreshold"
                    else ""
                )
                + f", simulated at {len(sizes)} sizes"
            )
        info = summary(hist, curve, distinct, args.knee_share, duration)
    info["policy"] = args.policy
    info["trace"] = str(args.trace)

    if args.out:
        atomic.write_text(args.out, curve.to_csv(index=False, lineterminator="\n"))
    if args.summary:
        atomic.write_text(args.summary, json.dumps(info, indent=2, default=str) + "\n")
    if args.csv:
        sys.stdout.write(
            curve[CSV_COLUMNS].to_csv(index=False, lineterminator="\n", float_format="%.6f")
        )
    else:
        _report(args.trace, curve, info, extra)
    return 0


def workflow_args(config: dict, name: str) -> str:
    """Extra `tunelab bpsim` options for trace ``name`` from a Snakemake config.

    ``config["bpsim"][name]`` if present, else ``config["bpsim"]["args"]``, else none.
    """
    section = config.get("bpsim") or {}
    value = section.get(name, section.get("args", ""))
    return " ".join(value) if isinstance(value, list) else str(value)


def _not_input(exc: BaseException) -> bool:
    """A closed output pipe or a full disk is no fault of the input: `tunelab`'s own handling
    of those (a quiet end, "disk full", exit 1) applies, not status 2."""
    return isinstance(exc, BrokenPipeError) or (
        isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
    )


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        _check_args(args)
        return run(args)
    except (UsageError, TraceFormatError, SizesError, ValueError, OSError) as exc:
        if _not_input(exc):
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        sys.stderr.write(f"{PROG}: error: {message}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


if __name__ == "__main__":
    # As `tunelab bpsim` runs: beside other jobs, never beside a measurement (the bench lock
    # tunelab.cli takes for it), without importing the CLI, a layer above this one.
    from tunelab.host import benchlock

    with benchlock.shared(benchlock.job_name(["bpsim", *sys.argv[1:]])):
        sys.exit(main())
