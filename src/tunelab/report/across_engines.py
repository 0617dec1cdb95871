"""One experiment on every engine that ran it: ``reports/engines/<sweep>.html``, and the
claim × engine matrix the index leads with.

Everything comes from what the runs stored: each engine's rows
(``<results>/<engine>/<sweep>.csv``), its claims' verdicts (``<reports>/<engine>/<sweep>
.verdicts.json``, written by ``tunelab check``) and its report page. Nothing is measured
again, so a page can compare an engine run today with one run last week: the page then
says when and where each engine's rows were measured, and rows from different hosts are
compared in shape only (each engine's time against its own first point).

Engines answer the same question differently (a bitmap heap scan, a clustered primary key,
a scan-resistant LRU): the page puts their curves on shared axes, their verdicts, plans and
notes side by side, and lists the settings they did not share (pool in bytes and as a share
of the table, page size, access and fetch mode), since those explain as many differences.

Engines also set different knobs for the same question (InnoDB's own read-ahead beside the
kernel's): a column that one engine's rows have and another's lack is no setting of the
other, whose rows then stand for every value of it (drawn in each panel of it).
"""

from __future__ import annotations

import html
from pathlib import Path

from tunelab import engines
from tunelab.host import atomic
from tunelab.report import plots
from tunelab.report.across_figures import METRIC, engines_figure, interval_levels, main_x, x_label
from tunelab.report.across_runs import EngineRun, Experiment, with_pool_bytes
from tunelab.report.across_tables import (
    claim_label,
    claim_names,
    claim_rows,
    differences,
    plans_html,
    verdict_cell,
    verdict_of,
)
from tunelab.report.labels import label
from tunelab.report.methods import methods_text

PAGES_DIR = "engines"  # beside the index

PAGE_CSS = """
body { background: #f4f5f7; margin: 0; font-family: -apple-system, "Segoe UI", Roboto,
  "Helvetica Neue", "DejaVu Sans", Arial, sans-serif; color: #1f2328; font-size: 15px;
  line-height: 1.5; }
main { max-width: 1180px; margin: 24px auto 64px; padding: 28px 44px 48px; background: #fff;
  border-radius: 10px; box-shadow: 0 1px 3px rgba(0,0,0,.07), 0 6px 24px rgba(0,0,0,.04); }
h1 { font-size: 1.9rem; margin: 0 0 .2rem; }
h2 { font-size: 1.25rem; margin: 1.6rem 0 .4rem; }
a { color: #0b5cad; }
.tl-muted { color: #57606a; }
"""
# The claim tables, here and in the index.
GRID_CSS = """
table.tl-grid { border-collapse: collapse; font-size: 13.5px; margin: 10px 0;
  font-variant-numeric: tabular-nums; }
table.tl-grid th { text-align: left; font-weight: 600; color: #444c56; background: #f6f8fa;
  border-bottom: 1px solid #d8dce1; padding: 6px 10px; }
table.tl-grid td { border-bottom: 1px solid #eceef1; padding: 6px 10px; vertical-align: top; }
.tl-verdict { display: inline-block; font-size: 12px; font-weight: 600; padding: 0 7px;
  border-radius: 9px; margin: 0 4px 3px 0; white-space: nowrap; }
.tl-reproduced, .tl-holds { background: #dafbe1; color: #116329; }
.tl-not-reproduced, .tl-does-not-hold { background: #ffebe9; color: #a40e26; }
.tl-undecided { background: #fff8c5; color: #7d4e00; }
.tl-cannot-run { background: #eaeef2; color: #424a53; }
.tl-explains { color: #57606a; font-size: 12.5px; padding-left: 12px; display: block; }
.tl-cell a { text-decoration: none; }
.tl-ratio { font-size: 12px; color: #57606a; white-space: nowrap; }
tr.tl-sweep-row td { background: #f6f8fa; padding-top: 10px; }
"""
PAGE_CSS += (
    GRID_CSS
    + """
.tl-diff { background: #fff8c5; padding: 8px 12px; border-radius: 6px; font-size: 14px; }
.tl-side { display: grid; gap: 16px; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); }
.tl-side > div { font-size: 13.5px; }
figure.tl-figure { margin: 12px 0; } figure.tl-figure img { max-width: 100%; }
figcaption { font-size: 13px; color: #57606a; max-width: 60rem; }
"""
)


# -- the page ------------------------------------------------------------------------------
def claims_html(exp: Experiment, page_dir: Path) -> str:
    rows = claim_rows(exp)
    if not rows:
        return '<p class="tl-muted">The sweep states no findings.</p>'
    cols = [r.engine for r in exp.runs] + sorted(exp.missing)
    runs = {r.engine: r for r in exp.runs}
    head = "<th>Finding</th>" + "".join(f"<th>{html.escape(e)}</th>" for e in cols)
    body = ""
    for row in rows:
        cells = "".join(f"<td>{_cell(exp, runs.get(e), e, row, page_dir)}</td>" for e in cols)
        body += f"<tr><td>{claim_label(row)}</td>{cells}</tr>"
    return (
        f'<table class="tl-grid" id="claims"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>" + LEGEND
    )


LEGEND = (
    '<p class="tl-muted">Each cell: the finding on that engine\'s rows: reproduced (direction '
    "and size as the source states them), not reproduced (the other way, or shown absent), "
    "undecided (the rounds did not decide), cannot run here (the engine cannot vary the "
    "sweep's knobs). Beside it, a/b's ratio per context with its interval at the level of the "
    "look that decided (for a time, below 1 means a is faster; for a throughput, above 1), or "
    "where the curves cross. ↳ why: an explanation, checked on the same rows, never counted "
    "as the finding's verdict.</p>"
)


def _cell(exp: Experiment, run: EngineRun | None, engine: str, row: dict, page_dir: Path) -> str:
    if row.get("engine") and row["engine"] != engine:
        return ""  # an explanation about another engine
    if run is None:
        return verdict_cell(None, missing=exp.missing.get(engine, ""))
    return verdict_cell(verdict_of(run, row["says"]), _rel(run.report, page_dir))


def _rel(path: Path | None, base: Path) -> str:
    if path is None:
        return ""
    import os

    return Path(os.path.relpath(Path(path).resolve(), Path(base).resolve())).as_posix()


def _side_by_side(items: list[tuple[str, str]]) -> str:
    return (
        '<div class="tl-side">'
        + "".join(f"<div><strong>{html.escape(e)}</strong>{body}</div>" for e, body in items)
        + "</div>"
    )


def page_html(exp: Experiment, page_dir: Path) -> str:
    esc = html.escape
    x = main_x(exp)
    ran = ", ".join(r.engine for r in exp.runs)
    title = f"{exp.sweep}: {ran} side by side" if ran else f"{exp.sweep}: not run here"
    parts = [
        f"<h1>{esc(exp.sweep)}</h1>",
        f'<p class="tl-muted">{esc(str(exp.doc.get("description", "")).strip())}</p>',
    ]
    links = ", ".join(
        f'<a href="{esc(_rel(r.report, page_dir))}">{esc(r.engine)}</a>'
        if r.report
        else esc(r.engine)
        for r in exp.runs
    )
    parts.append(f"<p>Engines: {links or 'none has rows of this sweep'}.")
    if exp.missing:
        parts.append(
            " Not here: " + "; ".join(f"{esc(e)}, {esc(w)}" for e, w in exp.missing.items()) + "."
        )
    parts.append("</p>")
    parts += ['<h2 id="claims-head">Claims</h2>', claims_html(exp, page_dir)]
    diffs = differences(exp)
    if diffs or exp.shape_only:
        lines = [esc(d) for d in diffs]
        if exp.shape_only:
            hosts = sorted({h for r in exp.runs for h in r.hosts})
            lines.insert(
                0,
                f"rows from {len(hosts)} hosts ({esc(', '.join(hosts))}): compared "
                "in shape only, each engine against its own first point",
            )
        parts.append(
            '<div class="tl-diff"><strong>Not the same for every engine</strong><ul>'
            + "".join(f"<li>{d}</li>" for d in lines)
            + "</ul></div>"
        )
    if x:
        absent = [r.engine for r in exp.runs if x not in with_pool_bytes(r.data.results)]
        if absent:  # its own knob for the question: its report draws it
            parts.append(
                f'<p class="tl-muted">Not in the figures: {esc(", ".join(absent))}, '
                f"whose rows do not set {esc(x_label(x))}.</p>"
            )
        for normalised in [True] if exp.shape_only else [False, True]:
            fig = engines_figure(exp, x, normalised)
            if fig is None:
                continue
            what = (
                "each engine's median divided by its own at the smallest value: the "
                "shapes compare where the absolute times do not"
                if normalised
                else f"median and {interval_levels(exp)} interval for it (order statistics) "
                "of each engine's repetitions, shared axes; times at one CPU speed where an "
                "engine's verdicts compare them so"
            )
            parts.append(
                plots.figure_html(
                    fig,
                    f"{label(METRIC)} against {x_label(x)}",
                    esc(f"{label(METRIC)} against {x_label(x)}: {what}."),
                )
            )
    parts.append(plans_html(exp, x or ""))
    notes = [
        (r.engine, f"<p>{esc(str(n).strip())}</p>")
        for r in exp.runs
        if (n := (exp.doc.get("notes") or {}).get(r.engine))
    ]
    if notes:
        parts += ['<h2 id="notes">What each engine does here</h2>', _side_by_side(notes)]
    if exp.runs:
        parts.append('<h2 id="methods">Versions, hosts and methods</h2>')
        parts.append(
            _side_by_side(
                [
                    (r.engine, "".join(f"<p>{esc(t)}</p>" for t in methods_text(r.data)))
                    for r in exp.runs
                ]
            )
        )
    body = "\n".join(p for p in parts if p)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n{GENERATOR}\n'
        f"<title>{esc(title)}</title>\n<style>{PAGE_CSS}</style>\n</head>\n<body>\n<main>\n"
        f"{body}\n</main>\n</body>\n</html>\n"
    )


GENERATOR = '<meta name="generator" content="tunelab cross-engine page">'


class PagesError(RuntimeError):
    """Cross-engine pages that could not be made: ``failed`` maps each sweep to why."""

    def __init__(self, failed: dict[str, str]) -> None:
        self.failed = failed
        super().__init__(
            "cross-engine page"
            + ("s" if len(failed) > 1 else "")
            + " not made: "
            + "; ".join(f"{s}: {why}" for s, why in failed.items())
        )


def made_here(path: Path) -> bool:
    """Whether a file under the pages' folder is a page this module wrote (pages written
    before it carried ``GENERATOR`` are told by their title and side-by-side blocks)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return GENERATOR in text or ("side by side</title>" in text and 'class="tl-side"' in text)


def write_pages(experiments: list[Experiment], out_dir: Path) -> list[Path]:
    """A page per experiment under ``out_dir``; then the pages this module made before that
    are not current (a sweep without rows now, or one whose page failed) are removed, so that
    none stands as if it were. A page that cannot be made raises PagesError, naming each with
    its engines and the cause, once the others are written."""
    out_dir = Path(out_dir)
    written, failed = [], {}
    for e in experiments:
        try:
            written.append(atomic.write_text(out_dir / f"{e.sweep}.html", page_html(e, out_dir)))
        except Exception as exc:  # any page's fault fails the index, named, after the others
            engines_ = ", ".join(r.engine for r in e.runs)
            failed[e.sweep] = f"rows of {engines_}: {type(exc).__name__}: {exc}"
    for old in sorted(out_dir.glob("*.html")):
        if old not in written and made_here(old):
            old.unlink()
    if failed:
        raise PagesError(failed)
    return written


# -- the matrix the index leads with --------------------------------------------------------
def matrix_html(experiments: list[Experiment], index_dir: Path) -> str:
    """Every finding of every sweep (its explanations beneath it) by every engine with rows
    of any sweep, in words, each cell linking to the cross-engine page's findings; an engine
    without rows of a sweep says why (cannot run here, or not run yet)."""
    cols = [e for e in engines.names() if any(e in {r.engine for r in x.runs} for x in experiments)]
    experiments = [x for x in experiments if claim_names(x)]
    if not cols or not experiments:
        return ""
    esc = html.escape
    head = "<th>Finding</th>" + "".join(f"<th>{esc(e)}</th>" for e in cols)
    body = ""
    for exp in experiments:
        page = f"{PAGES_DIR}/{exp.sweep}.html"
        span = len(cols) + 1
        body += (
            f'<tr class="tl-sweep-row"><td colspan="{span}"><a href="{esc(page)}">'
            f"<strong>{esc(exp.sweep)}</strong></a></td></tr>"
        )
        runs = {r.engine: r for r in exp.runs}
        for row in claim_rows(exp):
            cells = ""
            for e in cols:
                run = runs.get(e)
                if row.get("engine") and row["engine"] != e:
                    cells += "<td></td>"
                elif run is None:
                    cells += f"<td>{verdict_cell(None, missing=exp.missing.get(e, ''))}</td>"
                else:
                    cells += (
                        f"<td>{verdict_cell(verdict_of(run, row['says']), page + '#claims')}</td>"
                    )
            body += f"<tr><td>{claim_label(row)}</td>{cells}</tr>"
    return (
        f'<h2 id="matrix">Every finding on every engine</h2><table class="tl-grid tl-matrix">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>" + LEGEND
    )
