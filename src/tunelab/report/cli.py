"""`tunelab report`, `tunelab report-shared-pools` and `tunelab index`: argument parsing and
one-line errors (exit 2; 1 for an index whose cross-engine pages could not all be made)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tunelab.report.across_engines import PagesError
from tunelab.report.data import ReportInputError, load
from tunelab.report.index import write_index
from tunelab.report.render import DEFAULT_TIMEOUT_S, RenderError, render

TEMPLATE = Path("reports") / "sweep_report.py"
SHARED_POOLS_TEMPLATE = "shared_pools_report.py"  # beside TEMPLATE


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (no usage block)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{self.prog}: {message}")


class _UsageError(Exception):
    pass


def default_template() -> Path:
    """reports/sweep_report.py of the working directory, else of the source checkout."""
    if TEMPLATE.is_file():
        return TEMPLATE
    return Path(__file__).resolve().parents[3] / TEMPLATE


def _report_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tunelab report", description="Render one sweep's HTML report.")
    p.add_argument("--results", required=True, type=Path, help="result rows (CSV)")
    p.add_argument("--sweep", required=True, type=Path, help="the sweep file (YAML)")
    p.add_argument("--out", required=True, type=Path, help="HTML file to write")
    p.add_argument("--calibration", type=Path, help="fio calibration (JSON) of the device")
    p.add_argument("--bpsim", type=Path, help="buffer-pool simulator curve (CSV)")
    p.add_argument("--verdicts", type=Path, help="its verdicts (`tunelab check --json`)")
    p.add_argument("--name", default="", help="sweep name in the rows (default: the file's)")
    p.add_argument("--title", default="", help="page title (default: the sweep name)")
    p.add_argument("--template", type=Path, default=None, help="notebook template (.py)")
    p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S, help="seconds per cell")
    return p


def _index_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tunelab index", description="Write the page linking sweep reports.")
    p.add_argument("--out", required=True, type=Path, help="index HTML to write")
    p.add_argument("--results-dir", type=Path, default=Path("results"), help="result CSVs")
    p.add_argument("reports", nargs="+", type=Path, help="rendered report pages")
    p.add_argument(
        "--verdicts",
        nargs="*",
        type=Path,
        default=[],
        help="verdict files of `tunelab check --json` (shown per sweep)",
    )
    return p


def _optional_file(path: Path | None, flag: str) -> str:
    if path is None:
        return ""
    if not path.is_file():
        raise ReportInputError(f"{flag} {path}: no such file")
    return str(path)


def _check_calibration(path: str) -> None:
    """Load the calibration now when its helpers exist, so a bad file fails before a kernel
    starts (the report would otherwise only show a warning box)."""
    if not path:
        return
    try:
        from tunelab.calibrate import CalibrationError, load
    except ImportError:
        return
    try:
        load(path)
    except CalibrationError as exc:
        raise ReportInputError(str(exc)) from None


def report_main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _report_parser().parse_args(argv)
        # Check the inputs here so that bad ones fail before a kernel starts.
        data = load(args.results, args.sweep, args.name)
        params = {
            "results_csv": str(args.results),
            "sweep_name": data.name,
            "sweep_file": str(args.sweep),
            "calibration_json": _optional_file(args.calibration, "--calibration"),
            "bpsim_csv": _optional_file(args.bpsim, "--bpsim"),
            "verdicts_json": _optional_file(args.verdicts, "--verdicts"),
            "title": args.title or data.name,
        }
        _check_calibration(params["calibration_json"])
        start = time.perf_counter()
        out = render(args.template or default_template(), params, args.out, timeout=args.timeout)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except (_UsageError, ReportInputError, RenderError) as exc:
        print(f"tunelab report: error: {exc}", file=sys.stderr)
        return 2
    print(f"tunelab report: wrote {out} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


def _shared_pools_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tunelab report-shared-pools",
        description="Render the shared-pools page from `tunelab bpsim-shared --out`.",
    )
    p.add_argument("--curves", required=True, type=Path, help="curves (CSV)")
    p.add_argument("--out", required=True, type=Path, help="HTML file to write")
    p.add_argument("--title", default="shared-pools", help="page title")
    p.add_argument("--template", type=Path, default=None, help="notebook template (.py)")
    p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S, help="seconds per cell")
    return p


def shared_pools_main(argv: Sequence[str] | None = None) -> int:
    """`tunelab report-shared-pools`: the simulated shared-pool curves as a page."""
    from tunelab.report import shared_pools

    try:
        args = _shared_pools_parser().parse_args(argv)
        shared_pools.load(args.curves)  # bad input fails before a kernel starts
        params = {"curves_csv": str(args.curves), "title": args.title}
        start = time.perf_counter()
        template = args.template or default_template().with_name(SHARED_POOLS_TEMPLATE)
        out = render(template, params, args.out, timeout=args.timeout)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except (_UsageError, ReportInputError, RenderError) as exc:
        print(f"tunelab report-shared-pools: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"tunelab report-shared-pools: wrote {out} in {time.perf_counter() - start:.1f} s",
        file=sys.stderr,
    )
    return 0


def index_main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _index_parser().parse_args(argv)
        missing = [str(r) for r in args.reports if not r.is_file()]
        if missing:
            raise ReportInputError(f"report(s) not found: {', '.join(missing)}")
        out = write_index(args.reports, args.out, args.results_dir, args.verdicts)
    except SystemExit as exc:
        return int(exc.code or 0)
    except (_UsageError, ReportInputError) as exc:
        print(f"tunelab index: error: {exc}", file=sys.stderr)
        return 2
    except PagesError as exc:  # the index is written and names them; the run fails
        print(f"tunelab index: error: {exc}", file=sys.stderr)
        return 1
    print(f"tunelab index: wrote {out} ({len(args.reports)} reports)", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(report_main())
