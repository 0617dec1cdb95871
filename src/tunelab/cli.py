"""The `tunelab` command. Bad input gets one line per problem on stderr and exit code 2;
engine failures exit 1 with the engine's message; neither prints a traceback."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
from pathlib import Path

from tunelab import benchlock, engines, spec, workloads

EXIT_USAGE = 2
EXIT_FAILED = 1

# Subcommands whose implementation lives in their own module: name -> "module:function".
DELEGATED = {
    "calibrate": "tunelab.calibrate.cli:main",
    "bpsim": "tunelab.bpsim.cli:main",
    "report": "tunelab.report.cli:report_main",
    "index": "tunelab.report.cli:index_main",
    "clean": "tunelab.containers:clean_main",
}

# How the commands Snakemake runs hold the host-wide bench lock (tunelab.benchlock) for
# their whole run: measurements alone, every other job beside the others but never beside a
# measurement. run-point and trace-point hold it around the measurement (runner.bench_slot).
BENCH_LOCK = {
    "calibrate": benchlock.exclusive,
    "datagen": benchlock.shared,
    "merge": benchlock.shared,
    "bpsim": benchlock.shared,
    "report": benchlock.shared,
    "index": benchlock.shared,
}


def _err(msg: str) -> None:
    print(msg, file=sys.stderr)


def _calibration(path: str | None):
    if not path:
        return None
    from tunelab import calibrate

    return calibrate.load(Path(path))


def cmd_validate(args: argparse.Namespace) -> int:
    found = spec.validate_files(
        [Path(f) for f in args.files],
        args.engine,
        _calibration(args.calibration),
        skip_other_engines=args.skip_other_engines,
    )
    for f, why in found.skipped.items():
        print(f"{f}: skipped ({why})")
    for e in found.errors:
        _err(str(e))
    if found.errors:
        return EXIT_USAGE
    n = len(args.files) - len(found.skipped)
    print(f"{n} sweep file(s) valid" + (f" for {args.engine}" if args.engine else ""))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    points, errors = spec.expand(Path(args.file), args.engine, _calibration(args.calibration))
    for e in errors:
        _err(str(e))
    if errors:
        return EXIT_USAGE
    for p in points:
        if args.sql:
            eng = engines.engine_class(p.engine)
            print(f"-- point {p.point_id}")
            plan = p.workload.index_plan(p.knobs.get("index", "none"))
            offline = eng(Path("/nonexistent"), "plan")
            for stmt in offline.planned_sql(p.knobs, p.dataset, plan):
                print(stmt)
            for stmt in workloads.timed_sql(offline, p.workload, plan, p.access, p.dataset):
                print(stmt)
        else:
            print(json.dumps(p.to_json(), sort_keys=True))
    return 0


def cmd_engines(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    rows = []
    for name in engines.names():
        info = engines.info(name)
        for k in info.knobs.values():
            rows.append({"engine": name, "knob": k.name, "allowed": k.allowed_text(),
                         "default": k.default, "meaning": k.meaning})  # fmt: skip
        for k, why in info.notes.items():
            rows.append({"engine": name, "knob": k, "allowed": "not a knob", "default": None,
                         "meaning": why})  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    table = Table(title="Engines and the knobs they express", show_lines=False)
    cols = ("engine", "knob", "allowed", "default", "meaning")
    for col in cols:
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(*(str(r[c]) if r[c] is not None else "" for c in cols))
    Console().print(table)
    return 0


def _one_point(args: argparse.Namespace) -> tuple[spec.Point | None, int]:
    points, errors = spec.expand(Path(args.file), args.engine, _calibration(args.calibration))
    for e in errors:
        _err(str(e))
    if errors:
        return None, EXIT_USAGE
    chosen = [p for p in points if p.point_id == args.point]
    if not chosen:
        _err(f"{args.file}: no point with id {args.point!r} (see `tunelab plan {args.file}`)")
        return None, EXIT_USAGE
    return chosen[0], 0


def _on_point(args: argparse.Namespace, action) -> int:
    """Run ``action(point)`` on the point named by the arguments; engine failures and
    existing results become one line on stderr."""
    from tunelab.engines.base import EngineError
    from tunelab.results import ResultExistsError

    point, code = _one_point(args)
    if point is None:
        return code
    try:
        action(point)
    except ResultExistsError as exc:
        _err(str(exc))
        return EXIT_USAGE
    except EngineError as exc:
        _err(f"{args.file}: point {args.point}: {exc}")
        return EXIT_FAILED
    return 0


def cmd_run_point(args: argparse.Namespace) -> int:
    from tunelab import runner

    dirs = (Path(args.workdir), Path(args.data_dir))
    return _on_point(args, lambda p: runner.run_point(p, Path(args.out), *dirs, args.run_id))


def cmd_trace_point(args: argparse.Namespace) -> int:
    from tunelab import runner

    dirs = (Path(args.workdir), Path(args.data_dir))
    return _on_point(args, lambda p: print(runner.trace_point(p, Path(args.out), *dirs)))


def cmd_preflight(args: argparse.Namespace) -> int:
    from tunelab.engines.base import EngineError

    try:
        engines.engine_class(args.engine).preflight()
    except EngineError as exc:
        _err(f"engine {args.engine}: {exc}")
        return EXIT_USAGE
    print(f"engine {args.engine}: ready to run here")
    return 0


def cmd_datagen(args: argparse.Namespace) -> int:
    from tunelab import dataset
    from tunelab.pipeline import dataset_of_key

    try:
        ds = dataset_of_key(args.key)
    except ValueError as exc:
        _err(f"datagen: {exc}")
        return EXIT_USAGE
    path = dataset.materialise(ds, Path(args.data_dir))
    print(f"{path} sha256={dataset.sha256(path)}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from tunelab import results

    frame = results.read_results(args.inputs)
    results.write_rows(frame.to_dict("records"), Path(args.out), overwrite=True)
    print(f"{args.out}: {len(frame)} rows from {len(args.inputs)} point file(s)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tunelab", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--engine", choices=engines.names(), help="engine to validate/plan for")
        sp.add_argument("--calibration", help="calibration JSON for 'calibrated' knob values")

    sp = sub.add_parser("validate", help="validate sweep files (every error, one line each)")
    sp.add_argument("files", nargs="+", metavar="FILE")
    sp.add_argument("--skip-other-engines", action="store_true",
                    help="with --engine: skip sweeps that do not list that engine")  # fmt: skip
    common(sp)
    sp.set_defaults(func=cmd_validate)

    sp = sub.add_parser("plan", help="print a sweep's points, one JSON object per line")
    sp.add_argument("file", metavar="FILE")
    sp.add_argument("--sql", action="store_true", help="print every statement each point runs")
    common(sp)
    sp.set_defaults(func=cmd_plan)

    sp = sub.add_parser("engines", help="list engines and the knobs and values they support")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=cmd_engines)

    sp = sub.add_parser("run-point", help="measure one point of a sweep (Snakemake calls this)")
    sp.add_argument("file", metavar="FILE")
    sp.add_argument("point", metavar="POINT_ID")
    sp.add_argument("--out", required=True, help="results CSV to write")
    sp.add_argument("--workdir", default=".tunelab", help="engine data directories")
    sp.add_argument("--run-id", help="a workflow run whose points may share one server engine "
                    "(kept until `tunelab clean --run RUN_ID`)")  # fmt: skip
    sp.add_argument("--data-dir", default="data", help="cached generated data sets")
    common(sp)
    sp.set_defaults(func=cmd_run_point)

    sp = sub.add_parser("trace-point", help="capture a point's page-reference trace (SQLite)")
    sp.add_argument("file", metavar="FILE")
    sp.add_argument("point", metavar="POINT_ID")
    sp.add_argument("--out", required=True, help="trace file to write (.npz, .npy or text)")
    sp.add_argument("--workdir", default=".tunelab")
    sp.add_argument("--data-dir", default="data")
    common(sp)
    sp.set_defaults(func=cmd_trace_point)

    sp = sub.add_parser("preflight", help="check this host can run an engine, before starting")
    sp.add_argument("engine", choices=engines.names())
    sp.set_defaults(func=cmd_preflight)

    sp = sub.add_parser("datagen", help="generate and cache a data set by its key")
    sp.add_argument("key", help="e.g. accounts-v1-r100000-s42")
    sp.add_argument("--data-dir", default="data")
    sp.set_defaults(func=cmd_datagen)

    sp = sub.add_parser("merge", help="concatenate per-point result files into one CSV")
    sp.add_argument("inputs", nargs="+", metavar="CSV")
    sp.add_argument("--out", required=True)
    sp.set_defaults(func=cmd_merge)

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
    try:
        with lock:
            return _dispatch(argv)
    except KeyboardInterrupt:  # also while waiting for the lock
        _err("interrupted")
        return 130


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] in DELEGATED:
        module, _, func = DELEGATED[argv[0]].partition(":")
        return getattr(importlib.import_module(module), func)(argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
