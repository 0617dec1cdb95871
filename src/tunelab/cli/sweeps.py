"""Sweep files checked and shown: `tunelab validate` and `tunelab plan`, and the calibration
a command is given for 'calibrated' knob values."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tunelab import engines
from tunelab.cli.exits import EXIT_USAGE, err
from tunelab.sweep import spec, workloads


def load_calibration(path: str | None):
    if not path:
        return None
    from tunelab import calibrate

    return calibrate.load(Path(path))


def cmd_validate(args: argparse.Namespace) -> int:
    return validate(
        args.files,
        args.engine,
        args.calibration,
        args.skip_other_engines,
        data_dir=Path(args.data_dir),
    )


def validate(
    files: list[str],
    engine: str | None,
    calibration: str | None,
    skip_other_engines: bool,
    size: str | None = None,
    data_dir: Path = spec.DATA_DIR,
) -> int:
    """``tunelab validate``: every error, one line each; 0 when the files are valid, else 2."""
    found = spec.validate_files(
        [Path(f) for f in files],
        engine,
        load_calibration(calibration),
        skip_other_engines=skip_other_engines,
        size=size,
        data_dir=data_dir,
    )
    for f, why in found.skipped.items():
        print(f"{f}: skipped ({why})")
    for w in found.warnings:  # allowed: they never change the exit code
        err(str(w))
    for e in found.errors:
        err(str(e))
    if found.errors:
        return EXIT_USAGE
    n = len(files) - len(found.skipped)
    print(f"{n} sweep file(s) valid" + (f" for {engine}" if engine else ""))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from tunelab.engines import abilities

    points, errors = spec.expand(Path(args.file), args.engine, load_calibration(args.calibration))
    for e in errors:
        err(str(e))
    if errors:
        return EXIT_USAGE
    for p in points:
        if args.sql:
            eng = engines.engine_class(p.engine)
            print(f"-- point {p.point_id} ({p.workload.type}, {p.cache}, {p.repetitions} reps)")
            plan = p.workload.index_plan(p.knobs.get("index", "none"))
            offline = eng(Path("/nonexistent"), "plan")
            # The point's own order (an insert indexes the empty table and loads nothing) and
            # only its cache state's steps.
            point = {"workload": p.workload.type, "cache": p.cache}
            for stmt in abilities.planned_sql(offline, p.knobs, p.dataset, plan, **point):
                print(stmt)
            timed = workloads.timed_sql(offline.dialect, p.workload, plan, p.access, p.dataset)
            for stmt in timed:
                print(stmt)
        else:
            print(json.dumps(p.to_json(), sort_keys=True))
    return 0
