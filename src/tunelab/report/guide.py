"""The numbers of the students' guide (``docs/assignment.md``), kept in step with a run.

The guide's prose explains each question of the assignment; every number it quotes sits
between markers, ``<!-- guide: SWEEP -->`` and ``<!-- /guide -->``, and is generated from a
file of numbers taken from a run's stored verdicts and rows (``docs/data/assignment.json``):
each claim's verdict with its ratio and interval per engine, and each engine's version, host
and measuring dates. ``tunelab guide --from-run`` takes the numbers from ``results/`` and
``reports/`` (the engines it measured; the stored numbers of the others are kept) and fills
the guide, ``tunelab guide`` fills it from the stored numbers, and
``tunelab guide --check`` fails when the guide says anything else (the tests run it): a
number in the guide is never other than the file that vouches for it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunelab import engines as registry
from tunelab.analysis.claim_verdict import word_of
from tunelab.report import across_runs, across_tables, evidence
from tunelab.report.fragments import unique
from tunelab.report.labels import figures_text

DOC = Path("docs/assignment.md")
NUMBERS = Path("docs/data/assignment.json")
_BLOCK_RE = re.compile(r"(<!-- guide: ([a-z0-9_-]+) -->\n)(.*?)(<!-- /guide -->)", re.S)


def numbers_from_run(results_dir: Path, reports_dir: Path) -> dict[str, Any]:
    """Per sweep and engine, each finding's verdict in words with its figure per context
    (ratio [interval], or the crossing), and why an engine cannot run it; per engine what ran
    where and when."""
    sweeps: dict[str, dict[str, Any]] = {}
    measured: dict[str, dict[str, Any]] = {}
    for exp in across_runs.gather(results_dir, reports_dir):
        rows = across_tables.claim_rows(exp)
        entry = sweeps.setdefault(exp.sweep, {"claims": rows, "engines": {}, "cannot": {}})
        missing = exp.missing.items()
        entry["cannot"] = {e: why for e, why in missing if not why.startswith("not run")}
        for run in exp.runs:
            entry["engines"][run.engine] = [
                {
                    "claim": str(v.get("claim")),
                    "word": word_of(v),
                    "figures": figures_text(v),
                    "level": min(evidence.levels(v), default=None),
                }
                for v in run.verdicts
            ]
            frame = run.data.results
            started = (
                sorted(frame["started_at"].dropna().astype(str)) if ("started_at" in frame) else []
            )
            seen = measured.setdefault(
                run.engine, {"versions": set(), "hosts": set(), "first": None, "last": None}
            )
            seen["versions"].update(unique(frame, "engine_version"))
            seen["hosts"].update(unique(frame, "host_cpu"))
            if started:
                seen["first"] = min(filter(None, [seen["first"], started[0][:10]]))
                seen["last"] = max(filter(None, [seen["last"], started[-1][:10]]))
    for seen in measured.values():
        seen["versions"], seen["hosts"] = sorted(seen["versions"]), sorted(seen["hosts"])
    return {"engines": measured, "sweeps": sweeps}


def merged(stored: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """``run``'s numbers over ``stored``: the engines the run measured take the run's, the
    others keep theirs (a run of one engine fills its column, never empties the rest); each
    sweep's findings are the run's (the findings file it was judged by)."""
    measured = set(run.get("engines", {}))
    out = {
        "engines": {
            **{e: v for e, v in stored.get("engines", {}).items() if e not in measured},
            **run.get("engines", {}),
        },
        "sweeps": {},
    }
    for sweep in sorted({*stored.get("sweeps", {}), *run.get("sweeps", {})}):
        old, new = stored.get("sweeps", {}).get(sweep, {}), run.get("sweeps", {}).get(sweep)
        if new is None:
            out["sweeps"][sweep] = old
            continue
        engines = {
            **{e: v for e, v in (old.get("engines") or {}).items() if e not in measured},
            **new["engines"],
        }
        cannot = {**(old.get("cannot") or {}), **new["cannot"]}
        out["sweeps"][sweep] = {
            "claims": new["claims"] or old.get("claims", []),
            "engines": engines,
            "cannot": {e: why for e, why in cannot.items() if e not in engines},
        }
    return out


def _cell(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return ""
    figures = "; ".join(entry.get("figures") or [])
    return f"**{entry['word']}**" + (f" {figures}" if figures else "")


def _in_lab_order(by_engine: dict[str, Any]) -> dict[str, Any]:
    """The engines in the lab's order (as stored, the file sorts them by name)."""
    order = {e: i for i, e in enumerate(registry.names())}
    return dict(sorted(by_engine.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def block(numbers: dict[str, Any], sweep: str) -> str:
    """The Markdown table of one sweep's findings by engine: the source's figure, then each
    engine's verdict with its figures; an explanation beneath its finding, marked "↳ why";
    an engine that cannot run the sweep, why."""
    entry = numbers.get("sweeps", {}).get(sweep) or {}
    by_engine = _in_lab_order(entry.get("engines") or {})
    if not by_engine:
        return f"*No stored run of `{sweep}` yet.*\n"
    cannot = _in_lab_order(entry.get("cannot") or {})
    cols = [*by_engine, *cannot]
    head = "| finding | source | " + " | ".join(cols) + " |\n|---|---|" + "---|" * len(cols) + "\n"
    rows = ""
    for row in entry.get("claims") or []:
        name = row["says"]
        label = name
        if row["role"] == "explains":
            about = f" ({row['engine']})" if row.get("engine") else ""
            label = f"↳ why{about}: {name}"
        cells = []
        for e in cols:
            if e in cannot:
                cells.append(f"cannot run here: {cannot[e]}" if row["role"] != "explains" else "")
            elif row.get("engine") and row["engine"] != e:
                cells.append("")
            else:
                found = next((c for c in by_engine[e] if c["claim"] == name), None)
                cells.append(_cell(found))
        source = (row.get("reported") or "") if row["role"] != "explains" else ""
        rows += f"| {label} | {source} | " + " | ".join(cells) + " |\n"
    return head + rows


def measured_line(numbers: dict[str, Any]) -> str:
    parts = []
    for engine, seen in _in_lab_order(numbers.get("engines", {})).items():
        when = (
            seen["first"] if seen["first"] == seen["last"] else f"{seen['first']} to {seen['last']}"
        )
        parts.append(f"{engine} ({', '.join(seen['versions'])}; {when})")
    return "Measured: " + "; ".join(parts) + "." if parts else ""


def fill(text: str, numbers: dict[str, Any]) -> str:
    """The guide with every marked block generated from ``numbers``."""

    def one(m: re.Match) -> str:
        name = m.group(2)
        body = measured_line(numbers) + "\n" if name == "measured" else block(numbers, name)
        return m.group(1) + body + m.group(4)

    return _BLOCK_RE.sub(one, text)


def guide_main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="tunelab guide",
        description="Fill the numbers of the students' guide from a run, or check them.",
    )
    p.add_argument("--doc", type=Path, default=DOC)
    p.add_argument("--numbers", type=Path, default=NUMBERS)
    how = p.add_mutually_exclusive_group()
    how.add_argument(
        "--from-run",
        nargs=2,
        type=Path,
        metavar=("RESULTS", "REPORTS"),
        help="take the numbers from a run's results and reports directories",
    )
    how.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when the guide differs from what the stored numbers give",
    )
    args = p.parse_args(argv)
    try:
        text = args.doc.read_text(encoding="utf-8")
        if args.from_run:
            numbers = numbers_from_run(*args.from_run)
            if args.numbers.exists():
                numbers = merged(json.loads(args.numbers.read_text(encoding="utf-8")), numbers)
            args.numbers.parent.mkdir(parents=True, exist_ok=True)
            args.numbers.write_text(json.dumps(numbers, indent=1, sort_keys=True) + "\n")
        else:
            numbers = json.loads(args.numbers.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"tunelab guide: {exc}", file=sys.stderr)
        return 2
    filled = fill(text, numbers)
    if args.check:
        if filled != text:
            print(
                f"tunelab guide: {args.doc} quotes numbers other than {args.numbers} gives; "
                "fill it with `tunelab guide`",
                file=sys.stderr,
            )
            return 1
        return 0
    args.doc.write_text(filled, encoding="utf-8")
    print(f"tunelab guide: {args.doc} filled from {args.numbers}", file=sys.stderr)
    return 0
