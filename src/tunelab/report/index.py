"""reports/index.html: one line per sweep report, linking the report and its rows.

Each report carries a JSON summary (sweep, engine, points, repetitions, when measured) that
the notebook computed from the rows; the index reads it back, so the index needs no kernel
and says the same as the reports. A report without the block (an older page) is still
listed, with its results looked up in ``results_dir``.

When the claims were checked over several runs of the same sweeps (``tunelab check RUN...
--stability-out``), the file it wrote, ``stability.json`` beside the index by default, adds
per sweep whether each claim reached the same verdict in every run.
"""

from __future__ import annotations

import html
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tunelab.analysis.claim_verdict import WORDS, css_class, word_of
from tunelab.host import atomic
from tunelab.report import across_engines, across_runs, evidence, questions
from tunelab.report.fragments import esc
from tunelab.report.page.header_section import SUMMARY_ID

# nbconvert may reorder the tag's attributes: match on the id alone.
_SUMMARY_RE = re.compile(r'<script[^>]*\bid="' + SUMMARY_ID + r'"[^>]*>(.*?)</script>', re.S)

INDEX_CSS = """
body { background: #f4f5f7; margin: 0; }
main { max-width: 1180px; margin: 24px auto 64px; padding: 28px 44px 48px; background: #fff;
  border-radius: 10px; box-shadow: 0 1px 3px rgba(0,0,0,.07), 0 6px 24px rgba(0,0,0,.04); }
body { font-family: -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "DejaVu Sans", Arial,
  sans-serif; color: #1f2328; font-size: 15px; line-height: 1.5; }
h1 { font-size: 1.9rem; margin: 0 0 .2rem; }
table.tl-index { border-collapse: collapse; width: 100%; font-size: 14px; margin-top: 18px;
  font-variant-numeric: tabular-nums; }
table.tl-index th { text-align: left; font-weight: 600; color: #444c56; background: #f6f8fa;
  border-bottom: 1px solid #d8dce1; padding: 8px 10px; }
table.tl-index td { border-bottom: 1px solid #eceef1; padding: 10px; vertical-align: top; }
table.tl-index a.tl-sweep { font-weight: 600; font-size: 15px; color: #0b5cad;
  text-decoration: none; }
table.tl-index a.tl-sweep:hover { text-decoration: underline; }
.tl-desc { color: #57606a; font-size: 13px; margin-top: 2px; max-width: 36rem; }
.tl-muted { color: #57606a; }
a { color: #0b5cad; }
.tl-headline { font-size: 13px; margin-top: 4px; color: #1f2328; }
.tl-hosts { font-size: 12px; color: #a40e26; margin-top: 2px; }
.tl-verdict { display: inline-block; font-size: 12px; font-weight: 600; padding: 0 7px;
  border-radius: 9px; margin: 0 4px 3px 0; white-space: nowrap; }
.tl-reproduced, .tl-holds { background: #dafbe1; color: #116329; }
.tl-not-reproduced, .tl-does-not-hold { background: #ffebe9; color: #a40e26; }
.tl-undecided { background: #fff8c5; color: #7d4e00; }
.tl-cannot-run { background: #eaeef2; color: #424a53; }
.tl-explains { color: #57606a; font-size: 12.5px; padding-left: 12px; display: block; }
details.tl-claims summary { cursor: pointer; }
details.tl-claims li { font-size: 12.5px; color: #444c56; margin: 3px 0; }
"""


def read_verdicts(files: list[Path]) -> dict[tuple[str, str], dict[str, Any]]:
    """(engine, sweep) -> {verdicts, headline} from `tunelab check --json` files."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for f in files:
        try:
            doc = json.loads(Path(f).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for entry in doc.values() if isinstance(doc, dict) else []:
            if isinstance(entry, dict) and entry.get("sweep"):
                found[(str(entry.get("engine", "")), str(entry["sweep"]))] = entry
    return found


def _claims_cell(entry: dict[str, Any] | None) -> str:
    """Counts of verdicts as badges, each claim with its evidence behind a click: one plain
    sentence, the test's detail folded beneath it (``evidence``)."""
    if not entry or not entry.get("verdicts"):
        return '<span class="tl-muted">—</span>'
    esc = html.escape
    verdicts = entry["verdicts"]
    counts = {k: sum(word_of(v) == k for v in verdicts) for k in WORDS}
    badges = "".join(
        f'<span class="tl-verdict {css_class(k)}">{n} {k}</span>' for k, n in counts.items() if n
    )
    items = "".join(
        f'<li><span class="tl-verdict {css_class(word_of(v))}">{esc(word_of(v))}</span>'
        f"{esc(v['claim'])}"
        + evidence.html_block(v, "tl-muted")
        + (
            f" — rows from {len(v['hosts'])} hosts compared: {esc(', '.join(v['hosts']))}"
            if len(v.get("hosts") or []) > 1
            else ""
        )
        + "</li>"
        for v in verdicts
    )
    return f'<details class="tl-claims"><summary>{badges}</summary><ul>{items}</ul></details>'


def read_summary(report: Path) -> dict[str, Any] | None:
    """The JSON summary embedded in a rendered report, or None."""
    try:
        text = Path(report).read_text(encoding="utf-8")
    except OSError:
        return None
    match = _SUMMARY_RE.search(text)
    if not match:
        return None
    try:
        return json.loads(match.group(1))
    except json.JSONDecodeError:
        return None


def _rel(target: Path, base: Path) -> str:
    return Path(os.path.relpath(Path(target).resolve(), Path(base).resolve())).as_posix()


def _results_link(summary: dict[str, Any], report: Path, results_dir: Path) -> Path | None:
    candidates = []
    if summary.get("results_csv"):
        given = Path(summary["results_csv"])
        candidates += [given, report.parent / given]
    name = summary.get("sweep") or report.stem
    candidates += [Path(results_dir) / f"{name}.csv", Path(results_dir) / name / "results.csv"]
    return next((c for c in candidates if c.is_file()), None)


def _row(
    report: Path,
    out: Path,
    results_dir: Path,
    verdicts: dict[tuple[str, str], dict] | None = None,
    stability: tuple[list[str], dict[tuple[str, str], dict]] = ([], {}),
) -> tuple[str, str]:
    s = read_summary(report) or {"sweep": report.stem}
    key = (str(s.get("engine", report.parent.name)), str(s.get("sweep") or report.stem))
    checked = (verdicts or {}).get(key)
    stable = _stability_block(stability[1].get(key), len(stability[0]))
    name = s.get("title") or s.get("sweep") or report.stem
    link = f'<a class="tl-sweep" href="{esc(_rel(report, out.parent))}">{esc(name)}</a>'
    if s.get("description"):
        link += f'<div class="tl-desc">{esc(s["description"])}</div>'
    if checked and checked.get("headline"):
        link += f'<div class="tl-headline">{esc(checked["headline"])}</div>'
    engine = esc(s.get("engine", "—"))
    if s.get("engine_versions"):
        engine += f' <span class="tl-muted">{esc(", ".join(s["engine_versions"]))}</span>'
    swept = esc(", ".join(s.get("swept", [])) or "—")
    if "points" in s:
        reps = (
            s["reps_min"] if s["reps_min"] == s["reps_max"] else f"{s['reps_min']}–{s['reps_max']}"
        )
        size = esc(f"{s['points']} × {reps}")
    else:
        size = "—"
    cache = esc(" & ".join(s.get("cache", [])) or "—")
    first, last = s.get("first_started", "")[:10], s.get("last_started", "")[:10]
    when = esc(first if first == last else f"{first} – {last}") if first else "—"
    hosts = s.get("hosts") or []
    if len(hosts) > 1:  # the report says so at its top; the index too
        when += (
            f'<div class="tl-hosts" title="{esc(", ".join(hosts))}">on {len(hosts)} '
            "hosts: medians of different hosts compared</div>"
        )
    csv = _results_link(s, report, results_dir)
    rows = f'<a href="{esc(_rel(csv, out.parent))}">CSV</a>' if csv else "—"
    cells = [link, _claims_cell(checked) + stable, engine, swept, size, cache, when, rows]
    return str(s.get("sweep") or report.stem), "<tr>" + "".join(
        f"<td>{c}</td>" for c in cells
    ) + "</tr>"


def write_index(
    reports: list[Path],
    out: Path,
    results_dir: Path,
    verdict_files: list[Path] | None = None,
    stability_file: Path | None = None,
) -> Path:
    """Write the index page linking ``reports`` (sorted by sweep name), with each sweep's
    claim verdicts and headline finding where ``verdict_files`` hold them, and their
    stability over runs where ``stability_file`` (default: ``stability.json`` beside
    ``out``) holds it. A cross-engine page that cannot be made is named on the page, which
    is written all the same, and then raises ``across_engines.PagesError``."""
    out = Path(out)
    # Every engine's verdicts beside its reports, not only this run's engine.
    found = sorted(out.parent.glob("*/*.verdicts.json"))
    verdicts = read_verdicts(found + list(verdict_files or []))
    answers, matrix, side, failed = _cross_engine(Path(results_dir), out)
    matrix = _engines_run(out.parent / ENGINES_RUN_FILE, Path(results_dir)) + matrix
    stability = read_stability(stability_file or out.parent / STABILITY_FILE)
    rows = sorted(
        (_row(Path(r), out, Path(results_dir), verdicts, stability), str(r)) for r in reports
    )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "Sweep",
            "Claims",
            "Engine",
            "Swept",
            "Points × reps",
            "Cache",
            "Measured",
            "Rows",
        )
    )
    body = "".join(r[0][1] for r in rows)
    count = f"{len(rows)} sweep report{'s' if len(rows) != 1 else ''}"
    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>tunelab reports</title>\n<style>{INDEX_CSS}{across_engines.GRID_CSS}"
        f"{questions.CSS}{STABILITY_CSS}</style>\n"
        "</head>\n<body>\n<main>\n"
        f'<h1>tunelab reports</h1>\n<p class="tl-muted">{count}. Each report shows the median '
        "and an interval for every point, every raw repetition, the engine's reads beside "
        "hit ratios (physical reads only where they reached the device), and where the "
        "numbers came from.</p>\n"
        f"{answers}{matrix}{side}"
        f"{_stability_note(*stability)}"
        f"{_simulations(out)}"
        '<h2 id="reports">Each engine\'s reports</h2>'
        f'<table class="tl-index"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>\n'
        f"{questions.glossary_html()}\n"
        "</main>\n</body>\n</html>\n"
    )
    written = atomic.write_text(out, page)
    if failed:
        raise failed
    return written


SHARED_POOLS_PAGE = "shared-pools.html"  # `tunelab report-shared-pools`, beside the index


def _simulations(out: Path) -> str:
    """A link to the simulated shared-pools page where it lies beside the index."""
    if not (out.parent / SHARED_POOLS_PAGE).is_file():
        return ""
    return (
        '<h2 id="simulations">Simulated</h2>\n'
        f'<p><a href="{SHARED_POOLS_PAGE}">Shared-data buffer pools</a>: pureScale LBP and '
        "GBP sizing curves from synthetic traces (no engine), with the GBP knee against the "
        "slides' rule of thumb.</p>\n"
    )


ENGINES_RUN_FILE = "engines-run.tsv"  # `./lab run --config engine=all`: engine, status, detail


def _engines_run(path: Path, results_dir: Path) -> str:
    """What the last run of several engines did with each: ran, failed (and where its log
    is) or skipped (and why); an engine that failed or was skipped there and has merged rows
    measured after that run's account was run again since (on its own), and says so
    instead. The time it shows is the rows', not a file's: rendered again, the page is
    the same."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        then = path.stat().st_mtime
    except OSError:
        return ""
    esc, items = html.escape, []
    for line in lines:
        engine, _, rest = line.partition("\t")
        status, _, detail = rest.partition("\t")
        if not (engine and status):
            continue
        newest = _newest_rows(results_dir / engine) if status != "ran" else None
        if newest is not None and newest.timestamp() > then:
            status, detail = "run again since", f"its newest rows {_when(newest)}"
        items.append(
            f"<li><strong>{esc(engine)}</strong> {esc(status)}"
            + (f": {esc(detail)}" if detail else "")
            + "</li>"
        )
    if not items:
        return ""
    return (
        f'<div id="engines-run"><p>The last run of several engines:</p>'
        f"<ul>{''.join(items)}</ul></div>"
    )


def _newest_rows(folder: Path) -> datetime | None:
    """When the newest of an engine's merged rows (``<sweep>.csv``) was measured."""
    import pandas as pd

    newest = None
    for csv in folder.glob("*.csv"):
        try:
            started = pd.read_csv(csv, usecols=["started_at"])["started_at"]
        except (OSError, ValueError):  # no such column, or not a file of rows
            continue
        latest = pd.to_datetime(started, utc=True, errors="coerce").max()
        if not pd.isna(latest) and (newest is None or latest > newest):
            newest = latest.to_pydatetime()
    return newest


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _cross_engine(
    results_dir: Path, out: Path
) -> tuple[str, str, str, across_engines.PagesError | None]:
    """The questions answered (``questions.answers_html``), the claim × engine matrix and
    links to the pages that put each sweep's engines side by side (written here, under
    ``engines/`` beside the index), and the error naming the pages that could not be made
    (their sweeps listed as not made, never a stale page)."""
    experiments = across_runs.gather(results_dir, out.parent)
    experiments += across_runs.sweeps_not_run(experiments)
    failed = None
    try:
        across_engines.write_pages(experiments, out.parent / across_engines.PAGES_DIR)
    except across_engines.PagesError as exc:
        failed = exc
    if not experiments:
        return "", "", "", failed
    esc = html.escape
    links = " · ".join(
        (
            f"{esc(e.sweep)} <strong>not made</strong>"
            if failed and e.sweep in failed.failed
            else f'<a href="{esc(across_engines.PAGES_DIR)}/{esc(e.sweep)}.html">{esc(e.sweep)}</a>'
        )
        + f' <span class="tl-muted">({esc(", ".join(r.engine for r in e.runs) or "no rows")})'
        "</span>"
        for e in experiments
    )
    side = f'<h2 id="side-by-side">Each experiment, engines side by side</h2><p>{links}</p>'
    if failed:
        side += f'<p class="tl-hosts">{esc(str(failed))}</p>'
    answers = questions.answers_html(experiments, out.parent)
    return answers, across_engines.matrix_html(experiments, out.parent), side, failed


# -- stability over runs (``tunelab check RUN... --stability-out``) ---------------------------
STABILITY_FILE = "stability.json"  # beside the index, read when present

STABILITY_CSS = """
.tl-stability { font-size: 12px; margin-top: 3px; }
.tl-stable { color: #116329; }
.tl-unstable { color: #a40e26; font-weight: 600; }
ul.tl-unstable-claims { margin: 2px 0 0; padding-left: 18px; font-size: 12px; color: #444c56; }
"""


def read_stability(path: Path | None) -> tuple[list[str], dict[tuple[str, str], dict]]:
    """(the runs pooled, (engine, sweep) -> its claims' verdicts per run) from a
    ``tunelab check --stability-out`` file; nothing when it is missing, unreadable, or
    pools fewer than two runs."""
    if path is None:
        return [], {}
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [], {}
    runs = doc.get("runs") if isinstance(doc, dict) else None
    if not isinstance(runs, list) or len(runs) < 2:
        return [], {}
    sweeps = {
        (str(e.get("engine", "")), str(e.get("sweep", ""))): e
        for e in doc.get("sweeps") or []
        if isinstance(e, dict) and isinstance(e.get("claims"), list)
    }
    return [str(r) for r in runs], sweeps


def _stability_block(entry: dict[str, Any] | None, runs: int) -> str:
    """Under a sweep's verdicts: the same in every run, or which claims changed and how."""
    if not entry or not entry["claims"]:
        return ""
    esc = html.escape
    unstable = [c for c in entry["claims"] if not c.get("stable")]
    if not unstable:
        return f'<div class="tl-stability tl-stable">same verdicts in {runs} of {runs} runs</div>'
    items = "".join(
        f"<li>{esc(str(c.get('claim', '')))}: {esc(str(c.get('pooled', '')))}</li>"
        for c in unstable
    )
    return (
        f'<div class="tl-stability tl-unstable">{len(unstable)} of {len(entry["claims"])} '
        f"claim{'s' if len(entry['claims']) != 1 else ''} unstable over {runs} runs</div>"
        f'<ul class="tl-unstable-claims">{items}</ul>'
    )


def _stability_note(runs: list[str], sweeps: dict[tuple[str, str], dict]) -> str:
    """The page's sentence on stability, or "" when a single run is shown."""
    if not runs:
        return ""
    every = [c for e in sweeps.values() for c in e["claims"]]
    stable = sum(bool(c.get("stable")) for c in every)
    names = html.escape(", ".join(runs))
    return (
        f'<p class="tl-stability">Claims checked over {len(runs)} runs '
        f'(<span class="tl-muted">{names}</span>): {stable} of {len(every)} reached the '
        "same verdict in every run.</p>\n"
    )
