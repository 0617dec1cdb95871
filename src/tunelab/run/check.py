"""``tunelab check``: each sweep's claims (``expect:``) checked on its merged results, one
line per claim (``tunelab.analysis.claims`` gives the verdicts).

Given several result directories of the same sweeps (runs of one pack), it checks each run
and pools the verdicts per claim: the same verdict in every run ("holds in 5 of 5 runs") or
unstable ("unstable: holds 3, inconclusive 2"), so that a finding can be told from noise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tunelab.analysis import claim_verdict, claims
from tunelab.analysis.claim_verdict import Verdict
from tunelab.store.results import read_csv as read_rows_csv
from tunelab.sweep import claimspec, loading

STABILITY_FORMAT = 1  # the --stability-out file's layout


def _sweep_doc(path: Path) -> tuple[dict | None, str | None]:
    if not path.is_file():
        return None, f"{path}: sweep file not found"
    doc, errors = loading.load_yaml(path)
    if errors or not isinstance(doc, dict):
        return None, str(errors[0]) if errors else f"{path}: not a sweep file"
    return doc, None


def _read(csv: Path) -> pd.DataFrame:
    try:
        frame = read_rows_csv(csv)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise ValueError(f"{csv}: cannot read results: {exc}") from None
    if frame.empty or "sweep_file" not in frame or "engine" not in frame:
        raise ValueError(f"{csv}: not a merged results file (no rows, or no sweep_file/engine)")
    return frame


@dataclass
class Checked:
    """One merged results file and its claims' verdicts."""

    csv: Path
    engine: str
    sweep: str
    verdicts: list[Verdict]
    headline: str | None

    @property
    def key(self) -> str:
        return f"{self.engine}/{self.sweep}"

    def to_json(self) -> dict[str, Any]:
        return {
            "sweep": self.sweep,
            "engine": self.engine,
            "verdicts": [v.to_json() for v in self.verdicts],
            "headline": self.headline,
        }


def check_csv(csv: Path, sweep: Path | None = None) -> Checked:
    """One merged results file checked; raises ValueError with a one-line message."""
    frame = _read(csv)
    sweep_file = sweep or Path(str(frame["sweep_file"].iloc[0]))
    doc, err = _sweep_doc(sweep_file)
    if err:
        raise ValueError(err)
    name = str(frame["sweep"].iloc[0]) if "sweep" in frame else csv.stem
    engine = str(frame["engine"].iloc[0])
    judged_by, errors = claimspec.sweep_claims(doc, sweep_file, engine)
    if errors:
        raise ValueError(": ".join(x for x in errors[0][:3] if x))
    verdicts = claims.evaluate_sweep(judged_by, frame, engine)
    return Checked(csv, engine, name, verdicts, claims.headline(frame, verdicts))


def default_results(results_dir: Path = Path("results")) -> list[Path]:
    """Every merged sweep file of every engine: results/<engine>/<sweep>.csv."""
    return sorted(p for p in results_dir.glob("*/*.csv") if p.is_file())


def run_files(path: Path) -> list[Path]:
    """The merged sweep files of one run's results directory: ``results/`` (its
    ``<engine>/<sweep>.csv``) or one engine's ``results/<engine>/``."""
    from tunelab.report.results_dir import ResultsDirError, result_files

    if not path.is_dir():
        raise ValueError(f"{path}: no such results directory")
    try:
        return result_files(path)
    except ResultsDirError as exc:
        raise ValueError(str(exc)) from None


def check_run(path: Path, sweep: Path | None = None) -> dict[str, Checked]:
    """Every sweep of one run's results directory checked, by ``engine/sweep``."""
    out: dict[str, Checked] = {}
    for csv in run_files(path):
        checked = check_csv(csv, sweep)
        if checked.key in out:
            raise ValueError(f"{csv}: {checked.key} again (also in {out[checked.key].csv})")
        out[checked.key] = checked
    return out


# -- stability over runs --------------------------------------------------------------------
def _verdict_order(names: list[str]) -> list[str]:
    """``claim_verdict.WORDS``' order, then any other name as met."""
    known = [v for v in claim_verdict.WORDS if v in names]
    return known + [v for v in dict.fromkeys(names) if v not in known]


@dataclass
class ClaimStability:
    """One claim's verdicts, one per run (in the runs' order)."""

    engine: str
    sweep: str
    claim: str
    kind: str
    verdicts: list[str]
    causes: list[list[str]] = field(default_factory=list)  # per run: the likely causes named

    @property
    def counts(self) -> dict[str, int]:
        n = Counter(self.verdicts)
        return {v: n[v] for v in _verdict_order(self.verdicts)}

    @property
    def stable(self) -> bool:
        return len(set(self.verdicts)) == 1

    @property
    def agreement(self) -> float:
        """The share of runs that reached the most frequent verdict (1.0: all the same)."""
        return max(self.counts.values()) / len(self.verdicts)

    @property
    def pooled(self) -> str:
        k = len(self.verdicts)
        if self.stable:
            return f"{self.verdicts[0]} in {k} of {k} run{'s' if k != 1 else ''}"
        return "unstable: " + ", ".join(f"{v} {n}" for v, n in self.counts.items())

    def line(self) -> str:
        text = f"{self.engine}/{self.sweep}: {self.claim}: {self.pooled}"
        if not self.stable:
            text += " (" + ", ".join(f"run {i} {v}" for i, v in enumerate(self.verdicts, 1))
            text += ")"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "kind": self.kind,
            "verdicts": self.verdicts,
            "counts": self.counts,
            "stable": self.stable,
            "agreement": self.agreement,
            "pooled": self.pooled,
            "causes": self.causes,
        }


def stability(runs: list[dict[str, Checked]], names: list[str]) -> list[ClaimStability]:
    """Per claim, its verdict in each run. The runs must hold the same sweeps with the same
    claims; raises ValueError naming the first run that does not."""
    first = runs[0]
    for name, run in zip(names[1:], runs[1:]):
        missing, extra = sorted(set(first) - set(run)), sorted(set(run) - set(first))
        if missing or extra:
            what = "; ".join(
                f"{label}: {', '.join(keys)}"
                for label, keys in (("missing", missing), ("not in the first", extra))
                if keys
            )
            raise ValueError(f"{name}: not the same sweeps as {names[0]} ({what})")
    out = []
    for key in sorted(first):
        says = [v.claim.says for v in first[key].verdicts]
        for run in runs[1:]:
            if [v.claim.says for v in run[key].verdicts] != says:
                raise ValueError(
                    f"{run[key].csv}: other claims than {first[key].csv} (another sweep file?)"
                )
        for i, v in enumerate(first[key].verdicts):
            out.append(
                ClaimStability(
                    first[key].engine,
                    first[key].sweep,
                    v.claim.says,
                    v.claim.kind,
                    [run[key].verdicts[i].word for run in runs],
                    [run[key].verdicts[i].causes for run in runs],
                )
            )
    return out


def stability_summary(claims_: list[ClaimStability], runs: int) -> str:
    stable = [c for c in claims_ if c.stable]
    counts = Counter(c.verdicts[0] for c in stable)
    detail = ", ".join(f"{counts[v]} {v}" for v in _verdict_order(list(counts)))
    text = f"claims stable in all {runs} runs: {len(stable)} of {len(claims_)}"
    return f"{text} ({detail})" if detail else text


def stability_json(claims_: list[ClaimStability], names: list[str]) -> dict[str, Any]:
    """The --stability-out document (the index reads it: ``report.index``)."""
    sweeps: dict[str, dict[str, Any]] = {}
    for c in claims_:
        entry = sweeps.setdefault(
            f"{c.engine}/{c.sweep}", {"engine": c.engine, "sweep": c.sweep, "claims": []}
        )
        entry["claims"].append(c.to_json())
    return {
        "format": STABILITY_FORMAT,
        "runs": names,
        "claims": len(claims_),
        "stable": sum(c.stable for c in claims_),
        "sweeps": list(sweeps.values()),
    }


def _write_json(path: Path, doc: Any) -> None:
    from tunelab.host import atomic

    atomic.write(path, lambda f: f.write(json.dumps(doc, indent=2).encode()))


# -- command --------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tunelab check",
        description="Check each sweep's findings (workflows/findings.yaml) and its own claims "
        "(`expect:`) on its merged results: one line per claim, exit 1 when a finding is not "
        "reproduced (or a claim does not hold). Given several results directories "
        "(runs of the same sweeps): each claim's verdict in every run and pooled, exit 1 "
        "when a claim's verdict differs between runs. Exit 2 for bad input.",
    )
    parser.add_argument(
        "results",
        nargs="*",
        type=Path,
        metavar="RESULTS",
        help="merged result CSVs, or results directories (a run's results/ "
        "or results/<engine>/); default: results/*/*.csv",
    )
    parser.add_argument("--sweep", type=Path, help="the sweep file (default: from the rows)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the verdicts here")
    parser.add_argument(
        "--stability-out",
        type=Path,
        metavar="OUT",
        help="write each claim's verdict per run here (JSON; the index shows "
        "it when it lies beside it as stability.json)",
    )
    parser.add_argument(
        "--no-fail",
        action="store_true",
        help="exit 0 even when a finding is not reproduced (or, over several runs, unstable)",
    )
    return parser


def _inputs(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """(result CSVs, results directories) named on the command line; one kind only."""
    for p in paths:
        if not p.exists():
            raise ValueError(f"{p}: no such file or directory")
    dirs = [p for p in paths if p.is_dir()]
    if dirs and len(dirs) != len(paths):
        raise ValueError(f"{dirs[0]}: give result CSVs or results directories, not both")
    return ([], dirs) if dirs else (paths, [])


def _check_one(files: list[Path], name: str, args: argparse.Namespace) -> int:
    checked = []
    for csv in files:
        c = check_csv(csv, args.sweep)
        if not c.verdicts:
            print(f"{c.sweep}: no claims")
        for v in c.verdicts:
            print(v.line(c.sweep))
        checked.append(c)
    if args.json:
        _write_json(args.json, {str(c.csv): c.to_json() for c in checked})
    if args.stability_out:  # one run: every claim trivially stable, as the index expects
        pooled = stability([{c.key: c for c in checked}], [name])
        _write_json(args.stability_out, stability_json(pooled, [name]))
    failed = (claim_verdict.NOT_REPRODUCED, claim_verdict.FAILS_WORD)
    contradicted = sum(v.word in failed for c in checked for v in c.verdicts)
    return 1 if contradicted and not args.no_fail else 0


def _check_runs(dirs: list[Path], args: argparse.Namespace) -> int:
    names = [str(d) for d in dirs]
    runs = [check_run(d, args.sweep) for d in dirs]
    pooled = stability(runs, names)
    for i, name in enumerate(names, 1):
        print(f"run {i}: {name}")
    for c in pooled:
        print(c.line())
    print(stability_summary(pooled, len(runs)))
    if args.json:
        _write_json(args.json, {str(c.csv): c.to_json() for run in runs for c in run.values()})
    if args.stability_out:
        _write_json(args.stability_out, stability_json(pooled, names))
    return 1 if any(not c.stable for c in pooled) and not args.no_fail else 0


def check_main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        files, dirs = _inputs(args.results)
        if len(dirs) > 1:
            return _check_runs(dirs, args)
        if dirs:
            return _check_one(run_files(dirs[0]), str(dirs[0]), args)
        if not files:
            files = default_results()
            if not files:
                raise ValueError("tunelab check: no results to check (results/*/*.csv is empty)")
        return _check_one(files, "results" if not args.results else str(files[0].parent), args)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
