"""`tunelab calibrate [--dir PATH] [--quick] [--json] [--out FILE] [--force]`.

Measures the storage under the lab's data directory with fio and writes one calibration per
host and data directory. An existing calibration is reused until ``--force`` asks again.
Errors are one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tunelab.calibrate import measure, tables
from tunelab.calibrate.calibration import (
    DEFAULT_DATA_DIR,
    Calibration,
    CalibrationError,
    default_path,
    load,
    save,
)
from tunelab.calibrate.fio import FioError, fio_binary
from tunelab.calibrate.parse import FioOutputError

PROG = "tunelab calibrate"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + message
        raise UsageError(message)


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description="Measure OVERHEAD, DEVICE READ RATE/TRANSFERRATE and the write model "
        "of the storage under the data directory (fio, direct I/O).",
    )
    p.add_argument(
        "--dir",
        type=Path,
        default=None,
        help=f"directory that holds the engine's data (default: {DEFAULT_DATA_DIR}/, created)",
    )
    p.add_argument(
        "--quick", action="store_true", help="a shorter run (about 15 s) with fewer sizes"
    )
    p.add_argument("--json", action="store_true", help="print the calibration as JSON")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="calibration file (default: calibration/<host>-<hash>.json)",
    )
    p.add_argument("--force", action="store_true", help="measure again even if the file exists")
    return p


def _note(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def _run(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    if args.dir is None:
        data_dir = DEFAULT_DATA_DIR
        data_dir.mkdir(parents=True, exist_ok=True)
    else:
        data_dir = args.dir
        if not data_dir.is_dir():
            raise CalibrationError(f"--dir {data_dir}: no such directory")
    out = args.out or default_path(data_dir)

    cal: Calibration
    if out.exists() and not args.force:
        cal = load(out)
        _note(f"using {out} (measured {cal.created_at}); --force measures again")
    else:
        fio_binary()  # before announcing a measurement that cannot start
        plan = measure.QUICK_PLAN if args.quick else measure.DEFAULT_PLAN
        _note(f"measuring {data_dir.resolve()} with fio, about {plan.expected_s():.0f} s")
        cal = measure.calibrate(data_dir, plan, quick=args.quick, note=_note)
        save(cal, out)
        _note(f"wrote {out} in {cal.elapsed_s:.1f} s")
    sys.stdout.write(cal.to_json() if args.json else tables.text(cal))
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(argv)
    except (UsageError, CalibrationError, FioError, FioOutputError, OSError) as exc:
        message = (
            str(exc) if not isinstance(exc, OSError) else f"{exc.filename or ''}: {exc.strerror}"
        )
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
