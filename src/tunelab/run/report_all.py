"""``tunelab report-all`` (``./lab report``): every page a run renders — each sweep's report
and verdicts, the shared-pools page, the pages across engines and the index — rendered
again from the stored results alone, with the commands the workflow's rules run
(workflows/report.smk). Nothing is measured and no data set is made: the rows of every sweep
under ``results/<engine>/`` are verified first (each point file against its check file, and
the merged file against its points), and a sweep whose rows are missing or fail is named on
one line, exit 1, before any page is written.

It takes the arguments of the run that measured (``--directory DIR``, ``--config ...``), read
as Snakemake reads them (``tunelab.run.pipeline.run_config``): the results, reports, size,
calibration and shared-pools settings are that run's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tunelab import engines
from tunelab.calibrate import workflow as calibration_config
from tunelab.host import benchlock
from tunelab.report import cli as report_cli
from tunelab.run import check, pipeline
from tunelab.store import results
from tunelab.sweep import loading

TEMPLATES = Path(__file__).resolve().parents[3] / "reports"  # the workflow's, as its rules'
PROG = "tunelab report-all"
EXIT_FAILED = 1


class NotRendered(Exception):
    """Stored results missing or failing verification, or a page not made: one line."""


@dataclass
class Sweep:
    engine: str
    name: str
    csv: Path  # results/<engine>/<sweep>.csv
    sweep_file: str  # as the rows name it (relative to the run's directory)
    bpsim: Path | None  # the simulated curve of its first point, for a sweep that traces

    def page(self, reports: Path) -> Path:
        return reports / self.engine / f"{self.name}.html"

    def verdicts(self, reports: Path) -> Path:
        return reports / self.engine / f"{self.name}.verdicts.json"


def stored_sweeps(results_dir: Path) -> list[Sweep]:
    """Every sweep with stored rows under ``results_dir`` (``<engine>/<sweep>.csv`` or a
    ``<engine>/<sweep>/`` folder), in the engines' order; NotRendered for the first whose rows
    are missing or fail verification, or whose sweep file is gone."""
    found = []
    for engine in engines.names():
        folder = results_dir / engine
        if not folder.is_dir():
            continue
        names = {p.stem for p in folder.glob("*.csv")} | {
            d.name for d in folder.iterdir() if d.is_dir()
        }
        found += [_stored(engine, folder / f"{name}.csv") for name in sorted(names)]
    if not found:
        where = results_dir.resolve()
        raise NotRendered(f"{where}: no stored results (results/<engine>/<sweep>.csv)")
    return found


def _stored(engine: str, csv: Path) -> Sweep:
    problem = results.verify_merged(csv)
    if problem:
        raise NotRendered(problem)
    first = results.read_csv(csv, nrows=1).iloc[0]
    sweep_file = str(first.get("sweep_file", ""))
    doc, errors = loading.load_yaml(Path(sweep_file))
    if errors or not isinstance(doc, dict):
        why = errors[0] if errors else f"{sweep_file}: not a sweep file"
        raise NotRendered(f"{why} (the sweep file of {csv})")
    bpsim = None
    if doc.get("trace") and engines.info(engine).traces:
        bpsim = csv.with_suffix("") / f"{first['point_id']}.bpsim.csv"
        if not bpsim.is_file():
            raise NotRendered(f"{bpsim}: missing (the simulated curve its sweep's report shows)")
    return Sweep(engine, csv.stem, csv, sweep_file, bpsim)


def _run(what: str, command, argv: list[str]) -> None:
    """One of the workflow's commands, in this process; NotRendered naming ``what`` when it
    fails (its own line has said why)."""
    if command(argv) != 0:
        raise NotRendered(f"{what}: not made (the line above says why)")


def render_all(config: dict) -> Path:
    """Every page of the run ``config`` describes, from its stored results, in the working
    directory (the run's); the index page's path."""
    size = pipeline.check_size(config)
    results_dir = Path(pipeline.sized_dir(str(config.get("results_dir", "results")), size))
    reports = Path(pipeline.sized_dir(str(config.get("reports_dir", "reports")), size))
    try:
        calibrated = calibration_config.mode(config) != "off"
    except ValueError as exc:
        raise pipeline.RunArgsInvalid(str(exc)) from None
    try:
        sweeps = stored_sweeps(results_dir)  # every one verified before a page is written
    except NotRendered as exc:
        raise NotRendered(f"{exc}; nothing rendered") from None
    calibration = []
    if calibrated:  # the file the run's rules pass (workflows/calibrate.smk), if it is kept
        cal = calibration_config.output_path(config)
        if Path(cal).is_file():
            calibration = ["--calibration", cal]
        else:
            print(f"{PROG}: no calibration {cal}: no device limits shown", file=sys.stderr)
    template = str(TEMPLATES / report_cli.TEMPLATE.name)
    for sweep in sweeps:
        verdicts, page = str(sweep.verdicts(reports)), str(sweep.page(reports))
        _run(
            verdicts,
            check.check_main,
            ["--no-fail", "--sweep", sweep.sweep_file, "--json", verdicts, str(sweep.csv)],
        )
        bpsim = ["--bpsim", str(sweep.bpsim)] if sweep.bpsim else []
        _run(
            page,
            report_cli.report_main,
            [
                "--results",
                str(sweep.csv),
                "--sweep",
                sweep.sweep_file,
                "--template",
                template,
                *calibration,
                *bpsim,
                "--verdicts",
                verdicts,
                "--out",
                page,
            ],
        )
    curves = results_dir / "shared-pools.csv"
    if pipeline.shared_pools_args(config) is not None and curves.is_file():
        page = str(reports / "shared-pools.html")
        template = str(TEMPLATES / report_cli.SHARED_POOLS_TEMPLATE)
        argv = ["--curves", str(curves), "--template", template, "--out", page]
        _run(page, report_cli.shared_pools_main, argv)
    index = reports / "index.html"
    pages = [str(s.page(reports)) for s in sweeps]
    judged = [str(s.verdicts(reports)) for s in sweeps]
    argv = ["--out", str(index), "--results-dir", str(results_dir), *pages, "--verdicts", *judged]
    _run(str(index), report_cli.index_main, argv)
    return index


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 with every page written; 2 for arguments the run would refuse; 1 with one line
    when stored results are missing or fail verification, or a page cannot be made."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(argv):
        print(f"usage: {PROG} [--directory DIR] [--config KEY=VALUE ...]\n\n{__doc__}")
        return 0
    try:
        config, directory = pipeline.run_config(argv)
    except pipeline.RunArgsInvalid as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return pipeline.EXIT_INVALID
    try:
        os.chdir(directory)  # the rows name their files relative to the run's directory
    except OSError as exc:
        print(f"{PROG}: --directory {directory}: {exc.strerror}", file=sys.stderr)
        return pipeline.EXIT_INVALID
    try:
        with benchlock.shared(f"report-all {directory}"):  # never beside a measurement
            index = render_all(config)
    except pipeline.RunArgsInvalid as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return pipeline.EXIT_INVALID
    except NotRendered as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{PROG}: done: {index.resolve()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
