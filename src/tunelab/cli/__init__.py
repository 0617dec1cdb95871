"""The `tunelab` command. Bad input gets one line per problem on stderr and exit code 2;
engine failures exit 1 with the engine's message; neither prints a traceback.

Every other failure also ends with one line on stderr, the last one, saying what happened
and what to do, and exit code 1: a full disk, an unreachable Docker engine, or any other
exception (``tunelab COMMAND: TYPE: MESSAGE``). Its traceback is printed before that line
only when stderr is not a terminal (a job's log, where it helps whoever reads it later) or
when ``TUNELAB_DEBUG=1``. Ctrl-C prints "interrupted" and exits 130; output cut short by a
closed pipe (``tunelab plan FILE | head``) ends quietly with 141, as a command killed by
SIGPIPE does, so ``set -o pipefail`` scripts see what they see with any other tool.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import os
import sys

from tunelab import engines

# This module parses the command line and dispatches; the subcommands that live in no other
# part are the modules beside it, one per group, with how a failed command ends (failures).
from tunelab.cli import data, engine_info, failures, points, sweeps
from tunelab.cli.exits import err
from tunelab.host import benchlock, clockstep, jobs
from tunelab.sweep import spec

# Subcommands whose implementation lives in their own module: name -> "module:function".
DELEGATED = {
    "calibrate": "tunelab.calibrate.cli:main",
    "bpsim": "tunelab.bpsim.cli:main",
    "bpsim-shared": "tunelab.bpsim.shared_cli:main",
    "report": "tunelab.report.cli:report_main",
    "report-shared-pools": "tunelab.report.cli:shared_pools_main",
    "index": "tunelab.report.cli:index_main",
    "report-all": "tunelab.run.report_all:main",
    "guide": "tunelab.report.guide:guide_main",
    "compare": "tunelab.cli.compare:compare_main",
    "check": "tunelab.run.check:check_main",
    "clean": "tunelab.run.recovery:clean_main",
    "recover": "tunelab.run.recovery:recover_main",
    "progress": "tunelab.run.progress:progress_main",
    "hadr-calc": "tunelab.cli.hadr_calc:hadr_calc_main",
    "logscan": "tunelab.report.logscan:main",
    "probe": "tunelab.probes.cli:main",
}

# How the commands Snakemake runs hold the host-wide bench lock for their whole run
# (tunelab.host.jobs); run-point and trace-point hold it around the measurement (runner.bench_slot).
_LOCKS = {jobs.EXCLUSIVE: benchlock.exclusive, jobs.SHARED: benchlock.shared}
BENCH_LOCK = {name: _LOCKS[mode] for name, mode in jobs.JOB_COMMANDS.items() if mode in _LOCKS}


@functools.cache  # built once where the job server preloads it (its forks reuse it)
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tunelab", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--engine", choices=engines.names(), help="engine to validate/plan for")
        sp.add_argument("--calibration", help="calibration JSON for 'calibrated' knob values")

    def measuring(sp: argparse.ArgumentParser) -> None:
        """The arguments of a command that measures points (Snakemake's jobs)."""
        sp.add_argument("--workdir", default=".tunelab", help="engine data directories")
        sp.add_argument(
            "--run-id",
            help="a workflow run whose points may share one server engine "
            "(removed when the run ends; `tunelab recover` after a kill)",
        )
        sp.add_argument("--data-dir", default="data", help="cached generated data sets")
        common(sp)

    sp = sub.add_parser("validate", help="validate sweep files (every error, one line each)")
    sp.add_argument("files", nargs="+", metavar="FILE")
    sp.add_argument(
        "--skip-other-engines",
        action="store_true",
        help="with --engine: skip sweeps that do not list that engine",
    )
    sp.add_argument(
        "--data-dir",
        default=str(spec.DATA_DIR),
        help="where the data sets go: each must fit its free space",
    )
    common(sp)
    sp.set_defaults(func=sweeps.cmd_validate)

    sp = sub.add_parser("plan", help="print a sweep's points, one JSON object per line")
    sp.add_argument("file", metavar="FILE")
    sp.add_argument("--sql", action="store_true", help="print every statement each point runs")
    common(sp)
    sp.set_defaults(func=sweeps.cmd_plan)

    sp = sub.add_parser("engines", help="list engines and the knobs and values they support")
    sp.add_argument("--json", action="store_true")
    sp.add_argument(
        "--run-list",
        metavar="LIST",
        help="check an engine list of `./lab run "
        "--config engine=LIST` (all, or names joined by commas) and print it, one "
        "engine a line",
    )
    sp.set_defaults(func=engine_info.cmd_engines)

    sp = sub.add_parser("run-point", help="measure one point of a sweep (Snakemake calls this)")
    sp.add_argument("file", metavar="FILE")
    sp.add_argument("point", metavar="POINT_ID")
    sp.add_argument("--out", required=True, help="results CSV to write")
    measuring(sp)
    sp.set_defaults(func=points.cmd_run_point)

    sp = sub.add_parser(
        "run-sweep", help="measure every point of a sweep in rounds (Snakemake calls this)"
    )
    sp.add_argument("file", metavar="FILE")
    sp.add_argument("--out", required=True, help="the sweep's rounds file (every row)")
    measuring(sp)
    sp.set_defaults(func=points.cmd_run_sweep)

    sp = sub.add_parser(
        "point-results",
        help="one point's rows of a sweep's rounds file, verified, to its results file",
    )
    sp.add_argument("rounds", metavar="ROUNDS_CSV")
    sp.add_argument("point", metavar="POINT_ID")
    sp.add_argument("--out", required=True, help="the point's results CSV")
    sp.set_defaults(func=points.cmd_point_results)

    sp = sub.add_parser("trace-point", help="a point's page-reference trace (engines that trace)")
    sp.add_argument("file", metavar="FILE")
    sp.add_argument("point", metavar="POINT_ID")
    sp.add_argument("--out", required=True, help="trace file to write (.npz, .npy or text)")
    sp.add_argument("--workdir", default=".tunelab")
    sp.add_argument("--data-dir", default="data")
    common(sp)
    sp.set_defaults(func=points.cmd_trace_point)

    sp = sub.add_parser("preflight", help="check this host can run an engine, before starting")
    sp.add_argument("engine", choices=engines.names())
    sp.set_defaults(func=engine_info.cmd_preflight)

    sp = sub.add_parser(
        "image",
        help="the container image an engine runs with here, built "
        "first where the lab builds it (containers/ENGINE/build.sh)",
    )
    sp.add_argument("engines", nargs="+", choices=engines.names(), metavar="ENGINE")
    sp.add_argument(
        "--version",
        help="one of the engine's versions (knob engine_version, "
        "`tunelab engines`); default: its default one",
    )
    sp.set_defaults(func=engine_info.cmd_image)

    sp = sub.add_parser("datagen", help="generate and cache a data set by its key")
    sp.add_argument("key", help="e.g. accounts-v1-r100000-s42")
    sp.add_argument("--data-dir", default="data")
    sp.set_defaults(func=data.cmd_datagen)

    sp = sub.add_parser(
        "merge",
        help="verify per-point result files, then concatenate them into one CSV",
        description="Verify every point file against its check file (<point>.check.json) "
        "and the other points, then concatenate them. A file that fails is named, set aside "
        "as <file>.rejected (its point is measured again on the next run) and nothing is "
        "written: exit 1.",
    )
    sp.add_argument("inputs", nargs="+", metavar="CSV")
    sp.add_argument("--out", required=True)
    sp.set_defaults(func=data.cmd_merge)

    for name in DELEGATED:
        sub.add_parser(name, help=f"see `tunelab {name} --help`", add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    hold = BENCH_LOCK.get(argv[0]) if argv else None
    if hold is None or {"-h", "--help"} & set(argv):  # help never waits for a measurement
        lock = contextlib.nullcontext()
    else:
        lock = hold(benchlock.job_name(argv))
    command = f"tunelab {argv[0]}" if argv and not argv[0].startswith("-") else "tunelab"
    try:
        with lock:
            code = _dispatch(argv)
        if code == 0 and (roots := clockstep.roots_from_env()):  # a job of a run ended
            clockstep.date_future_files_now([*roots, *(a for a in argv if os.path.isfile(a))])
        return code
    except KeyboardInterrupt:  # also while waiting for the lock
        err("interrupted")
        return 130
    except BrokenPipeError as exc:
        if not failures.stdout_gone():
            return failures.failed(command, exc, failures.unexpected(exc))
        failures.quiet_stdout()
        return failures.EXIT_BROKEN_PIPE
    except Exception as exc:
        return failures.failed(command, exc, failures.summary(exc, argv))


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] in DELEGATED:
        module, _, func = DELEGATED[argv[0]].partition(":")
        return getattr(importlib.import_module(module), func)(argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)
