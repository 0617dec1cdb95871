"""``tunelab check``: each sweep's claims (``expect:``) checked on its merged results, one
line per claim (``tunelab.claims`` gives the verdicts)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from tunelab import claims, spec
from tunelab.claims import Verdict


def _sweep_doc(path: Path) -> tuple[dict | None, str | None]:
    if not path.is_file():
        return None, f"{path}: sweep file not found"
    doc, errors = spec.load_yaml(path)
    if errors or not isinstance(doc, dict):
        return None, str(errors[0]) if errors else f"{path}: not a sweep file"
    return doc, None


def check_file(csv: Path, sweep: Path | None = None) -> tuple[str, list[Verdict], dict | None]:
    """The verdicts of one merged results file; raises ValueError with a one-line message."""
    try:
        frame = pd.read_csv(csv)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise ValueError(f"{csv}: cannot read results: {exc}") from None
    if frame.empty or "sweep_file" not in frame or "engine" not in frame:
        raise ValueError(f"{csv}: not a merged results file (no rows, or no sweep_file/engine)")
    path = sweep or Path(str(frame["sweep_file"].iloc[0]))
    doc, err = _sweep_doc(path)
    if err:
        raise ValueError(err)
    name = str(frame["sweep"].iloc[0]) if "sweep" in frame else csv.stem
    verdicts = claims.evaluate_sweep(doc.get("expect"), frame, str(frame["engine"].iloc[0]))
    return name, verdicts, doc


def default_results(results_dir: Path = Path("results")) -> list[Path]:
    """Every merged sweep file of every engine: results/<engine>/<sweep>.csv."""
    return sorted(p for p in results_dir.glob("*/*.csv") if p.is_file())


def check_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tunelab check",
        description="Check each sweep's expectations (`expect:`) on its merged results: one "
        "line per claim, exit 1 when one is contradicted.",
    )
    parser.add_argument("results", nargs="*", type=Path, metavar="RESULTS_CSV",
                        help="merged results (default: results/*/*.csv)")  # fmt: skip
    parser.add_argument("--sweep", type=Path, help="the sweep file (default: from the rows)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the verdicts here")
    parser.add_argument(
        "--no-fail", action="store_true", help="exit 0 even when a claim is contradicted"
    )
    args = parser.parse_args(argv)
    files = args.results or default_results()
    if not files:
        print("tunelab check: no results to check (results/*/*.csv is empty)", file=sys.stderr)
        return 2
    out: dict[str, Any] = {}
    contradicted = 0
    for csv in files:
        try:
            name, verdicts, _ = check_file(csv, args.sweep)
        except ValueError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        if not verdicts:
            print(f"{name}: no claims")
        for v in verdicts:
            print(v.line(name))
        contradicted += sum(v.verdict == "contradicted" for v in verdicts)
        frame = pd.read_csv(csv)
        out[str(csv)] = {
            "sweep": name,
            "engine": str(frame["engine"].iloc[0]),
            "verdicts": [v.to_json() for v in verdicts],
            "headline": claims.headline(frame, verdicts),
        }
    if args.json:
        from tunelab import atomic

        atomic.write(args.json, lambda f: f.write(json.dumps(out, indent=2).encode()))
    return 1 if contradicted and not args.no_fail else 0
