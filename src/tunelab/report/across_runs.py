"""What each engine's run of a sweep stored (rows, verdicts, report page), gathered by sweep."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tunelab import engines
from tunelab.report.data import ReportData, ReportInputError, load
from tunelab.report.fragments import unique
from tunelab.store.results import read_csv as read_rows_csv
from tunelab.sweep import checks, claimspec, findings, loading

POOL_BYTES = "pool_bytes"  # derived: the pool in bytes, so that engines share the axis


@dataclass
class EngineRun:
    """One engine's stored rows of a sweep, its verdicts and its report page."""

    engine: str
    data: ReportData
    verdicts: list[dict[str, Any]]
    report: Path | None

    @property
    def hosts(self) -> list[str]:
        return unique(self.data.results, "host_name")


@dataclass
class Experiment:
    sweep: str
    doc: dict[str, Any]
    runs: list[EngineRun]
    missing: dict[str, str] = field(default_factory=dict)  # engine -> why it has no rows
    sweep_file: str = ""

    @property
    def claims(self) -> list[dict[str, Any]]:
        """The claims the sweep is judged by (its findings, their explanations, its own)."""
        return claimspec.sweep_claims(self.doc, self.sweep_file, None)[0]

    @property
    def shape_only(self) -> bool:
        """Rows from more than one host: times of different machines are not compared."""
        return len({h for r in self.runs for h in r.hosts}) > 1


def _sweep_doc(frame: pd.DataFrame, sweep: str, sweeps_dir: Path | None) -> tuple[dict, Path]:
    """The sweep file the rows name (relative to the checkout), else ``sweeps_dir``'s."""
    named = [Path(p) for p in unique(frame, "sweep_file")]
    candidates = named + ([Path(sweeps_dir) / f"{sweep}.yaml"] if sweeps_dir else [])
    for path in candidates:
        if path.is_file():
            return loading.load_yaml(path)[0] or {"name": sweep}, path
    return {"name": sweep}, candidates[0] if candidates else Path(f"{sweep}.yaml")


def _verdicts(path: Path) -> list[dict[str, Any]]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    for entry in doc.values() if isinstance(doc, dict) else []:
        if isinstance(entry, dict) and isinstance(entry.get("verdicts"), list):
            return entry["verdicts"]
    return []


def why_missing(doc: dict[str, Any], engine: str) -> str:
    """Why an engine has no rows of a sweep: it cannot vary a swept knob (as its knobs are
    declared, whether or not the sweep lists it), the sweep is not for it, or it was not run
    here."""
    listed = checks.engines_of(doc)
    if engine not in listed:
        return checks.knob_refusal(doc, engine) or f"the sweep runs on {', '.join(listed)} only"
    reason = checks.cannot_vary(doc, engine) or checks.host_refuses(doc, engine)
    if reason:
        return reason
    return f"not run yet: ./lab run --config engine={engine}"


def gather(
    results_dir: Path, reports_dir: Path, sweeps_dir: Path | None = None
) -> list[Experiment]:
    """Every sweep with stored rows of at least one engine, each engine's run of it."""
    results_dir, reports_dir = Path(results_dir), Path(reports_dir)
    found: dict[str, list[tuple[str, Path]]] = {}
    for engine in engines.names():
        for csv in sorted((results_dir / engine).glob("*.csv")):
            found.setdefault(csv.stem, []).append((engine, csv))
    out = []
    for sweep, items in sorted(found.items()):
        runs, doc = [], None
        for engine, csv in items:
            try:
                frame = read_rows_csv(csv, nrows=1)
                doc, path = _sweep_doc(frame, sweep, sweeps_dir)
                if not path.is_file():
                    continue
                data = load(csv, path, sweep)
            except (ReportInputError, pd.errors.ParserError, pd.errors.EmptyDataError, OSError):
                continue  # a file no report could read: the engine's own page says why
            page = reports_dir / engine / f"{sweep}.html"
            verdicts = _verdicts(reports_dir / engine / f"{sweep}.verdicts.json")
            runs.append(EngineRun(engine, data, verdicts, page if page.is_file() else None))
        if runs and doc is not None:
            have = {r.engine for r in runs}
            missing = {e: why_missing(doc, e) for e in engines.names() if e not in have}
            out.append(Experiment(sweep, doc, runs, missing, str(path)))
    return out


def sweeps_not_run(experiments: list[Experiment]) -> list[Experiment]:
    """The sweeps with findings that none of ``experiments`` is, in the findings files that
    judge theirs (``findings.path_for``), each with why every engine has no rows of it: a
    finding never vanishes from the index because no engine here could run it."""
    have = {x.sweep for x in experiments}
    books: dict[Path, Path] = {}  # findings file -> the folder of the sweeps it judges
    for x in experiments:
        if book := findings.path_for(x.sweep_file):
            books.setdefault(book, Path(x.sweep_file).resolve().parent)
    out = []
    for book, folder in books.items():
        try:
            entries = findings.load(book).entries
        except findings.FindingsError:
            continue  # the verdicts of its sweeps say what is wrong with it
        for sweep in dict.fromkeys(str(f["sweep"]) for f in entries):
            path = folder / f"{sweep}.yaml"
            doc = loading.load_yaml(path)[0] if sweep not in have and path.is_file() else None
            if isinstance(doc, dict):
                have.add(sweep)
                missing = {e: why_missing(doc, e) for e in engines.names()}
                out.append(Experiment(sweep, doc, [], missing, str(path)))
    return sorted(out, key=lambda x: x.sweep)


def with_pool_bytes(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with ``pool_bytes``: the pool as applied (pages) times the page size."""
    frame = frame.copy()  # one block: rows built column by column warn on every assign
    pages = pd.to_numeric(frame.get("applied_buffer_pool"), errors="coerce")
    size = pd.to_numeric(frame.get("page_size_bytes"), errors="coerce")
    if isinstance(pages, pd.Series) and isinstance(size, pd.Series):
        return frame.assign(**{POOL_BYTES: pages * size})
    return frame.assign(**{POOL_BYTES: np.nan})
