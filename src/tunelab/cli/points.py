"""A sweep's points measured, as the workflow's jobs ask: `tunelab run-point`, `run-sweep`,
`point-results` and `trace-point`."""

from __future__ import annotations

import argparse
from pathlib import Path

from tunelab.cli.exits import EXIT_FAILED, EXIT_USAGE, err
from tunelab.cli.sweeps import load_calibration
from tunelab.sweep import claimspec, loading, spec


def _points(args: argparse.Namespace) -> list[spec.Point] | None:
    """The sweep file's points on the arguments' engine; None (each error said) when the file
    is not valid."""
    points, errors = spec.expand(
        Path(args.file),
        args.engine,
        load_calibration(args.calibration),
        data_dir=Path(args.data_dir),
    )
    for e in errors:
        err(str(e))
    return None if errors else points


def _one_point(args: argparse.Namespace) -> tuple[spec.Point | None, int]:
    if (points := _points(args)) is None:
        return None, EXIT_USAGE
    chosen = [p for p in points if p.point_id == args.point]
    if not chosen:
        err(f"{args.file}: no point with id {args.point!r} (see `tunelab plan {args.file}`)")
        return None, EXIT_USAGE
    return chosen[0], 0


def _on_point(args: argparse.Namespace, action) -> int:
    """Run ``action(point)`` on the point named by the arguments; engine failures and
    existing results become one line on stderr."""
    from tunelab.engines.base import EngineError
    from tunelab.store.results import ResultExistsError

    point, code = _one_point(args)
    if point is None:
        return code
    try:
        action(point)
    except ResultExistsError as exc:
        err(str(exc))
        return EXIT_USAGE
    except EngineError as exc:
        err(f"{args.file}: point {args.point}: {exc}")
        return EXIT_FAILED
    return 0


def cmd_run_point(args: argparse.Namespace) -> int:
    from tunelab.measure import runner

    dirs = (Path(args.workdir), Path(args.data_dir))
    return _on_point(args, lambda p: runner.run_point(p, Path(args.out), *dirs, args.run_id))


def cmd_run_sweep(args: argparse.Namespace) -> int:
    """Every point of a sweep, in rounds (tunelab.measure.sweeprun), to one rounds file."""
    from tunelab.engines.base import EngineError
    from tunelab.measure import sweeprun

    if (points := _points(args)) is None:
        return EXIT_USAGE
    if not points:
        err(f"{args.file}: no point runs on engine {args.engine}")
        return EXIT_USAGE
    dirs = (Path(args.workdir), Path(args.data_dir))
    doc, _ = loading.load_yaml(Path(args.file))  # read and checked by expand above
    judged_by, _ = claimspec.sweep_claims(doc, args.file, args.engine)
    try:
        sweeprun.run_sweep(
            points,
            Path(args.out),
            *dirs,
            args.run_id,
            judged_by,
            log=lambda line: print(line, flush=True),
        )
    except EngineError as exc:
        err(f"{args.file}: {exc}")
        return EXIT_FAILED
    return 0


def cmd_point_results(args: argparse.Namespace) -> int:
    from tunelab.measure import sweeprun
    from tunelab.store.results import ResultExistsError

    try:
        sweeprun.point_results(Path(args.rounds), args.point, Path(args.out))
    except (ResultExistsError, ValueError, OSError) as exc:
        err(str(exc))
        return EXIT_USAGE
    return 0


def cmd_trace_point(args: argparse.Namespace) -> int:
    from tunelab.measure import runner

    dirs = (Path(args.workdir), Path(args.data_dir))
    return _on_point(args, lambda p: print(runner.trace_point(p, Path(args.out), *dirs)))
