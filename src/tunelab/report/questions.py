"""The answer first: the index opens with one table, a row per question of the sources (the
assignment's parts, the book, the talk, IBM's notes), each with the findings that answer it
(their ``question:`` in the findings file), the source's figure, this run's figure in the
same unit, the verdict and one line of why, per engine; and a glossary of the words the
verdicts use.

Everything is read from what the checks stored: the verdict's word as stored (never judged
again here), the two sides' medians the test compared (a context's ``sides``), the
explanations checked on the same rows, or why an engine cannot run the sweep.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from tunelab import engines
from tunelab.analysis.claim_evidence import figure_text
from tunelab.analysis.claim_rows import metric_column
from tunelab.analysis.claim_verdict import CANNOT_RUN, css_class, word_of
from tunelab.report import evidence, reads
from tunelab.report.across_engines import PAGES_DIR
from tunelab.report.across_runs import EngineRun, Experiment
from tunelab.report.labels import fmt_bytes, fmt_selectivity_percent, knob_unit, label
from tunelab.sweep import findings

CSS = """
table.tl-answers { border-collapse: collapse; width: 100%; font-size: 13.5px; margin: 10px 0;
  font-variant-numeric: tabular-nums; table-layout: fixed; overflow-wrap: anywhere; }
table.tl-answers th { text-align: left; font-weight: 600; color: #444c56; background: #f6f8fa;
  border-bottom: 1px solid #d8dce1; padding: 6px 8px; }
table.tl-answers td { border-bottom: 1px solid #eceef1; padding: 5px 8px; vertical-align: top; }
table.tl-answers td.tl-question { background: #f6f8fa; border-bottom: 2px solid #d8dce1; }
.tl-figure-ratio { font-size: 12px; color: #57606a; }
.tl-asks { color: #57606a; font-size: 12.5px; }
.tl-source { color: #57606a; font-size: 12.5px; }
.tl-why { color: #444c56; font-size: 12.5px; }
dl.tl-glossary { display: grid; grid-template-columns: max-content 1fr; gap: 4px 14px;
  font-size: 13.5px; }
dl.tl-glossary dt { font-weight: 600; }
dl.tl-glossary dd { margin: 0; color: #444c56; }
"""

# Every word a verdict, its evidence or its causes use, in the reader's words. Each entry:
# the term as the glossary shows it, what it means, and the words of the pages it covers
# (tests/test_report_questions.py fails on a word the verdicts use that no entry covers).
GLOSSARY: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "reproduced",
        "this engine's rows show what the source states, in direction and size "
        "(the whole interval past the margin, or within the similarity bounds).",
        ("reproduced",),
    ),
    (
        "not reproduced",
        "the rows show the other way round, or show the effect absent (the "
        "interval within the margin, or the crossing outside its window).",
        ("not", "found", "instead", "shown", "absent"),
    ),
    (
        "undecided",
        "the rounds measured did not decide either way; the causes say what was "
        "missing (too few repetitions for the spread seen, a trend not significant).",
        ("undecided",),
    ),
    (
        "cannot run here",
        "the engine cannot vary the sweep's knob (an engine that locks the whole "
        "database has no row locks; a page size fixed when the server is built): the reason "
        "is given.",
        ("cannot", "run", "here"),
    ),
    (
        "holds / does not hold",
        "the verdict of an explanation (↳ why): a statement about the "
        "engine's mechanism checked on the same rows, never counted as the finding's verdict.",
        ("holds", "does", "hold", "why"),
    ),
    (
        "a, b",
        "the finding's two sides (e.g. a = 32K pages, b = 4K pages), as the findings "
        "file states them.",
        ("a", "b", "vs"),
    ),
    (
        "median",
        "the middle of a point's repetitions: the figure quoted for each side.",
        ("median", "medians"),
    ),
    (
        "ratio a/b",
        "how many times b's value a's is: for a time, below 1 means a is faster; for "
        'a throughput, above 1 means a does more. "1.3x" is a ratio of 1.3. Where the '
        "rounds pair the sides, it is estimated from each round's own a/b (their "
        "Hodges–Lehmann estimate), so drift of the host between rounds cancels: it can "
        "differ from the ratio of the two medians quoted beside it.",
        ("ratio", "x"),
    ),
    (
        "interval and its level",
        "the range the ratio lies in with the stated probability, its level: at "
        "least one minus the alpha of the look that decided, and stated as the level the "
        "interval really has (a signed-rank interval over paired rounds reaches 96.9 % with "
        "six rounds); a median's interval is of order statistics, at its own level.",
        ("interval", "intervals", "level"),
    ),
    (
        "p",
        "the chance of a difference at least this large if the two sides did not differ "
        '(a sign test over the paired rounds); "smallest possible p": the least p so few '
        "rounds can give.",
        ("p", "smallest", "possible"),
    ),
    (
        "rounds, paired",
        "round r measures repetition r of every point in a random order; two "
        "sides are compared round by round (paired), so that drift of the host over the run "
        "falls on both. n=6/6: unpaired, six repetitions a side.",
        ("round", "rounds", "paired", "n", "repetition", "repetitions"),
    ),
    (
        "passes",
        "a server engine measures in blocks of points; a pass visits every block "
        "once, and points of two blocks pair by pass.",
        ("pass", "passes"),
    ),
    (
        "look, alpha",
        "the rows are judged at a few planned looks (after 6 rounds, after 12); "
        "each look spends part of the finding's alpha (0.05 in all: the chance of a wrong "
        "decision), so that looking twice does not double it.",
        ("look", "alpha"),
    ),
    (
        "margin",
        "how far from 1 the whole interval must lie for a difference to count (5 %): "
        "smaller effects are no difference seen.",
        ("margin", "reach", "within"),
    ),
    (
        "similar within",
        "a finding that two sides take about as long: reproduced when the "
        "whole interval lies within ±15 % of 1.",
        ("similar",),
    ),
    (
        "trend, Page's L, Kendall τ",
        "a falls/rises finding: the largest value of the knob against the "
        "smallest, and a trend test over every value (Page's L, ranking the values in each "
        "round; Kendall's τ where the rows have no complete rounds or fewer than three "
        "values); a step that goes the other way breaks it.",
        (
            "trend",
            "page's",
            "l",
            "kendall",
            "values",
            "value",
            "monotonic",
            "step",
            "steps",
            "go",
            "way",
        ),
    ),
    (
        "crossover, crossing",
        "where the scan's curve meets the index's as the selectivity "
        "grows; reproduced when it lies within a factor of 3 of the source's figure (its "
        "window), placed between the last value where the index is clearly faster and the "
        "first where the scan is.",
        (
            "crossing",
            "crosses",
            "cross",
            "crossover",
            "clearly",
            "lower",
            "tested",
            "range",
            "range's",
            "edge",
            "below",
            "above",
            "outside",
            "between",
            "once",
            "more",
            "than",
            "again",
            "already",
            "still",
            "largest",
            "swept",
            "sweep",
            "place",
        ),
    ),
    (
        "window",
        "the range a crossing may lie in and still reproduce the source's figure: "
        "from a third of it to three times it (e.g. 10 % → 3.3 % to 30 %).",
        ("window",),
    ),
    (
        "cold / warm",
        "cold: every timed query meets emptied caches (the engine's pool emptied, "
        "the files' pages evicted from the OS); warm: the same query run just before, so its "
        'pages are in memory. "cache not cold": the eviction did not succeed.',
        ("cold", "warm", "cache"),
    ),
    (
        "at one CPU speed",
        "each repetition's time corrected by a fixed CPU reference task "
        "timed around it, so a host that speeds up or slows down over the run does not bias a "
        "side; its weight (0 to 1) says how closely the times follow the reference.",
        (
            "times",
            "at",
            "one",
            "cpu",
            "speed",
            "corrected",
            "reference",
            "timed",
            "around",
            "weighted",
            "weight",
            "closely",
            "follow",
        ),
    ),
    (
        "physical reads vs reads from the OS",
        "physical reads reached the device (the row's "
        "device bytes) or an engine's own counter documented as such; other cache misses "
        "counted by an engine are reads from the OS: from its page cache or the device.",
        ("physical", "reads", "os"),
    ),
    (
        "access: forced",
        "the sweep forces the plan it compares (an index or a scan) instead "
        'of leaving the choice to the optimizer; "plan not the one asked for" flags a point '
        "where the engine chose otherwise.",
        ("access", "forced", "plan", "asked", "expected"),
    ),
    (
        "client share, client-bound",
        "the share of a repetition's time spent in the client "
        "(fetching and building rows); above one half the engine is not what is timed.",
        ("client", "share", "client-bound", "bound"),
    ),
    (
        "too few repetitions",
        "an undecided comparison whose spread would need about N "
        'repetitions to decide at this margin ("needs ~N").',
        ("too", "few", "needs", "observed", "variance", "give", "no", "difference", "seen", "same"),
    ),
    (
        "curve: falls, rises, level, no clear step",
        "a trend's medians at every value swept, and each step between neighbours in "
        "words: falls or rises where the step is past the margin, level where it lies within "
        "±margin, no clear step where the rounds did not decide (runs of one word merged).",
        ("curve", "falls", "rises", "level", "clear", "step", "then"),
    ),
    (
        "several contexts",
        "a finding judged at several settings (each selectivity, cold and warm) is "
        "reproduced where every context reproduces it, and not reproduced where one context "
        "shows it absent or reversed at alpha divided by the number of contexts; the counts "
        'say how each came out ("reproduced at 7 of 8 selectivities").',
        ("contexts", "context", "against", "only", "over"),
    ),
    (
        "rows from several hosts",
        "rows measured on different machines: times compared in shape only.",
        ("hosts", "host", "rows", "compared", "warning"),
    ),
)


def glossary_words() -> set[str]:
    """Every word some glossary entry covers (lower case)."""
    return {w for _, _, words in GLOSSARY for w in words}


def glossary_html() -> str:
    items = "".join(
        f'<dt id="g-{html.escape("-".join(term.split()))}">{html.escape(term)}</dt>'
        f"<dd>{html.escape(text)}</dd>"
        for term, text, _ in GLOSSARY
    )
    return f'<h2 id="glossary">The words of the verdicts</h2><dl class="tl-glossary">{items}</dl>'


# -- the table -------------------------------------------------------------------------------
def _book(experiments: list[Experiment]) -> findings.Findings | None:
    """The findings file that judges the experiments' sweeps (the first that reads)."""
    for x in experiments:
        path = findings.path_for(x.sweep_file)
        if path is None:
            continue
        try:
            return findings.load(path)
        except findings.FindingsError:
            continue  # the verdicts of its sweeps say what is wrong with it
    return None


def _verdicts_of(run: EngineRun, finding: dict[str, Any]) -> tuple[dict | None, list[dict]]:
    """The finding's stored verdict on a run, and its explanations' verdicts there."""
    own = [v for v in run.verdicts if v.get("finding") == finding["id"]]
    main = next((v for v in own if v.get("role", "finding") == findings.FINDING), None)
    if main is None:  # a verdict file written before verdicts named their finding
        main = next((v for v in run.verdicts if v.get("claim") == finding["says"]), None)
    return main, [v for v in own if v.get("role") == findings.EXPLAINS]


def _items(at: str) -> list[str]:
    """A side's settings ("index covering, cache cold"), a parenthesis kept whole."""
    return [i.strip() for i in re.split(r", (?![^(]*\))", str(at)) if i.strip()]


def _readable(text: str, engine: str = "") -> str:
    """A side or context in words: no underscores, a selectivity in percent, a knob's value
    in the unit the engine declares for it (pages, KiB; bytes in a binary unit)."""
    percent = lambda m: f"selectivity {fmt_selectivity_percent(float(m.group(1)))}"  # noqa: E731
    text = re.sub(r"selectivity ([0-9.e-]+)", percent, text)
    if engine:
        text = re.sub(r"\b([a-z][a-z_]*) (\d+(?:\.\d+)?)\b", lambda m: _with_unit(m, engine), text)
    return text.replace("_", " ").replace("cache cold", "cold").replace("cache warm", "warm")


def _with_unit(m: re.Match, engine: str) -> str:
    name, value = m.group(1), m.group(2)
    unit = knob_unit(engine, name)
    if unit == "bytes":
        return f"{name} {fmt_bytes(float(value))}"
    return f"{name} {value} {unit}" if unit else m.group(0)


def _context_figure(c: dict[str, Any], unit: str, engine: str = "") -> str:
    """A context's two medians (the settings both sides share left out), or its crossing."""
    label = _readable(str(c.get("label") or ""), engine)
    if c.get("sides"):
        sides = [_items(s.get("label", s.get("at", ""))) for s in c["sides"]]
        shared = set.intersection(*map(set, sides)) if sides else set()
        metric = str(c.get("metric") or "")
        own = [
            ", ".join(i for i in items if i not in shared) or ", ".join(items) for items in sides
        ]
        text = " vs ".join(
            f"{_readable(words, engine)} {figure_text(float(s['median']), metric)}"
            for words, s in zip(own, c["sides"], strict=True)
        )
        text += f" {unit}" if unit else ""
    elif c.get("crossing") is not None:
        text = f"crossing ≈{fmt_selectivity_percent(float(c['crossing']))}"
    elif c.get("ratio"):
        text = f"ratio {c['ratio'][0]:.3g}"
    else:
        return ""
    return f"{label}: {text}" if label else text


def unit_of(v: dict[str, Any], run: EngineRun | None) -> str:
    """The words of a count or a rate the medians are in ("" for a time, shown in ms or s;
    "(a/b)" for the ratios a finding with ``than`` compares): an engine's read counter as
    its page names it."""
    metric = next((str(c.get("metric") or "") for c in v.get("contexts") or []), "")
    if not metric:  # a ratio of ratios: a/b on each side
        return "(a/b)" if any(c.get("sides") for c in v.get("contexts") or []) else ""
    if metric == "elapsed_s":
        return ""
    column = metric_column(metric)
    if run is not None:
        named = reads.words(run.data.results, run.engine).get(column)
        if named:
            return named
    return label(column)


# question, finding, engine, this run's figure, verdict, why
WIDTHS = "<colgroup>" + "".join(f'<col style="width:{w}%">' for w in (16, 20, 7, 20, 15, 22))
WIDTHS += "</colgroup>"
SHOWN_CONTEXTS = 3  # beyond these, the first and the last, the rest on the sweep's page


def run_figure(v: dict[str, Any], unit: str = "", engine: str = "") -> str:
    """This run's figure, from the stored verdict: each context's two medians (or the
    crossing), in the metric's unit (``unit``: the words of a count), the knobs' values in
    ``engine``'s units."""
    parts = [p for c in v.get("contexts") or [] if (p := _context_figure(c, unit, engine))]
    if len(parts) > SHOWN_CONTEXTS:
        parts = [parts[0], f"… {len(parts) - 2} more …", parts[-1]]
    return "; ".join(parts)


def _ratio_line(v: dict[str, Any]) -> str:
    """The ratio and its interval at its level, for a verdict of one context."""
    contexts = v.get("contexts") or []
    if len(contexts) != 1 or not contexts[0].get("ratio"):
        return ""
    r, lo, hi = contexts[0]["ratio"]
    level = evidence.levels_text(v)  # the level the interval really has
    at = f", {level}" if level else ""
    if r == lo == hi == 0:  # a count, none on side a: the figure beside it says so
        return f"none at a{at}"
    return f"ratio a/b {r:.3g}x [{lo:.3g}, {hi:.3g}]{at}"


def why_line(v: dict[str, Any] | None, explained: list[dict[str, Any]], missing: str) -> str:
    """One line of why: the explanations checked on the same rows, else the verdict's first
    cause, else why the engine has no verdict."""
    if v is None:
        return missing
    if explained:
        return "; ".join(f"{x.get('claim')}: {word_of(x)}" for x in explained)
    causes = v.get("causes") or []
    return str(causes[0]) if causes else ""


def _badge(word: str, href: str = "") -> str:
    badge = f'<span class="tl-verdict {css_class(word)}">{html.escape(word)}</span>'
    return f'<a href="{html.escape(href)}">{badge}</a>' if href else badge


def _engine_cells(exp: Experiment | None, engine: str, f: dict, index_dir: Path) -> list[str]:
    """This run's figure, the verdict and why, for one engine."""
    esc = html.escape
    run = next((r for r in exp.runs if r.engine == engine), None) if exp else None
    if run is None:
        missing = exp.missing.get(engine, "") if exp else "no sweep file of it here"
        if missing.startswith("not run yet"):
            return [
                "",
                '<span class="tl-muted">not run</span>',
                f'<span class="tl-why">{esc(missing)}</span>',
            ]
        return ["", _badge(CANNOT_RUN), f'<span class="tl-why">{esc(missing)}</span>']
    v, explained = _verdicts_of(run, f)
    if v is None:
        return ["", '<span class="tl-muted">no verdict stored</span>', ""]
    href = _rel(run.report, index_dir) if run.report else ""
    ratio = _ratio_line(v)
    verdict = _badge(word_of(v), href) + (
        f'<div class="tl-figure-ratio">{esc(ratio)}</div>' if ratio else ""
    )
    why = _readable(why_line(v, explained, ""))
    return [
        esc(run_figure(v, unit_of(v, run), engine)),
        verdict,
        f'<span class="tl-why">{esc(why)}</span>',
    ]


def _rel(path: Path, base: Path) -> str:
    import os

    return Path(os.path.relpath(Path(path).resolve(), Path(base).resolve())).as_posix()


def answers_html(experiments: list[Experiment], index_dir: Path) -> str:
    """The table the index opens with: a row per question of the findings file, per finding
    that answers it and per engine with rows of any sweep (every engine, when none has)."""
    book = _book(experiments)
    if book is None or not book.questions:
        return ""
    by_sweep = {x.sweep: x for x in experiments}
    ran = {r.engine for x in experiments for r in x.runs}
    cols = [e for e in engines.names() if e in ran] or list(engines.names())
    esc, body = html.escape, ""
    for q in book.questions:
        answered = book.of_question(str(q["id"]))
        if not answered:
            continue
        span = len(answered) * len(cols)
        sweeps = list(dict.fromkeys(str(f["sweep"]) for f in answered))
        links = ", ".join(f'<a href="{PAGES_DIR}/{esc(s)}.html">{esc(s)}</a>' for s in sweeps)
        question = (
            f'<td class="tl-question" rowspan="{span}" id="q-{esc(str(q["id"]))}">'
            f"<strong>{esc(str(q.get('name') or q['id']))}</strong>"
            f'<div class="tl-asks">{esc(str(q["asks"]))}</div>'
            f'<div class="tl-asks">sweeps: {links}</div></td>'
        )
        for f in answered:
            exp = by_sweep.get(str(f["sweep"]))
            page = f"{PAGES_DIR}/{f['sweep']}.html#claims"
            source = (
                f'<td rowspan="{len(cols)}"><a href="{esc(page)}">{esc(str(f["says"]))}</a>'
                f'<div class="tl-source">{esc(str(f["source"]))}: '
                f"<strong>{esc(str(f['reported']))}</strong></div></td>"
            )
            for i, engine in enumerate(cols):
                cells = "".join(f"<td>{c}</td>" for c in _engine_cells(exp, engine, f, index_dir))
                lead = (question if f is answered[0] and i == 0 else "") + (
                    source if i == 0 else ""
                )
                body += f'<tr class="tl-answer">{lead}<td>{esc(engine)}</td>{cells}</tr>'
    if not body:
        return ""
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "Question",
            "Finding, and the source's figure",
            "Engine",
            "This run's figure",
            "Verdict",
            "Why",
        )
    )
    return (
        '<h2 id="answers">The questions, answered</h2>'
        '<p class="tl-muted">Each question of the sources with the findings that answer it: '
        "what the source reported, this run's medians of the same sides in the same unit, "
        "the verdict on each engine and why (the explanations checked on the same rows, the "
        'verdict\'s cause, or why the engine cannot run it). The words: <a href="#glossary">'
        "glossary</a>.</p>"
        f'<table class="tl-answers">{WIDTHS}<thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
        "</table>"
    )
