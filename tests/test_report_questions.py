"""The index answers first: one row per question of the findings file, each finding with the
source's figure, this run's medians, the verdict and why, per engine; and a glossary that
covers every word the verdicts use. Rendered from real SQLite rows, judged by `tunelab
check` as the workflow does."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tunelab.analysis.claim_evidence import figure_text
from tunelab.analysis.claim_verdict import WORDS
from tunelab.measure import sweeprun
from tunelab.report import index, questions
from tunelab.report.labels import figures_text
from tunelab.run.check import check_main
from tunelab.sweep import findings, loading, spec

pytestmark = pytest.mark.slow

FINDINGS = """\
rules: {alpha: 0.05, margin: 0.05, similar_within: 0.15, crossover_factor: 3,
        contexts: all-bonferroni}
questions:
  - id: 2A
    name: "2A: scans"
    asks: How fast can you scan, and does the page size matter?
  - {id: 1B, name: "1B: locking", asks: What do row locks cost against a table lock?}
  - {id: 2B, asks: A question no finding answers is no row.}
findings:
  - id: scan-page-size
    sweep: q-scan
    source: assignment, part 2A
    question: 2A
    says: a warm scan is faster with 32K pages than with 4K
    reported: 6.7 s with 4K pages, just under 6 s with 32K
    kind: lower
    a: {page_size: 32768}
    b: {page_size: 4096}
    explains:
      - says: larger pages, fewer reads
        kind: falls
        metric: physical_reads
        along: page_size
  - id: scan-page-size-similar
    sweep: q-scan
    source: assignment, part 2A
    question: 2A
    says: a warm scan takes about as long with 4K pages as with 32K
    reported: about the same
    source_ratio: 1.0
    kind: similar
    a: {page_size: 4096}
    b: {page_size: 32768}
  - id: locking-one-client
    sweep: locking-row-vs-table
    source: assignment, part 1B
    question: 1B
    says: one client, updates run about as fast with row locks as with a table lock
    reported: the update throughput ratio row/table close to one
    source_ratio: 1.0
    kind: similar
    metric: throughput_rows_s
    a: {lock_granularity: row}
    b: {lock_granularity: table}
    where: {workload: update, threads: 1}
"""

SWEEP = """\
name: q-scan
description: a warm scan at two page sizes
dataset: {rows: 3000, seed: 5}
knobs:
  page_size: [4096, 32768]
fixed:
  buffer_pool: 64
workloads:
  - type: scan
cache: warm
repetitions: 6
"""

# Words of the verdicts that need no entry: plain English and the figures' units.
PLAIN = {
    "and",
    "or",
    "the",
    "of",
    "at",
    "by",
    "for",
    "in",
    "to",
    "is",
    "it",
    "its",
    "on",
    "with",
    "per",
    "over",
    "each",
    "every",
    "this",
    "that",
    "as",
    "from",
    "how",
    "ms",
    "s",
    "e",
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> tuple[Path, Path]:
    """A run's directory after a real SQLite sweep, its verdicts, and the index."""
    work = tmp_path_factory.mktemp("answers")
    (work / "sweeps").mkdir()
    (work / "findings.yaml").write_text(FINDINGS)
    (work / "sweeps" / "q-scan.yaml").write_text(SWEEP)
    shutil.copy(REPO / "workflows" / "sweeps" / "locking-row-vs-table.yaml", work / "sweeps")
    points, errors = spec.expand(work / "sweeps" / "q-scan.yaml", "sqlite")
    assert not errors, errors
    csv = work / "results" / "sqlite" / "q-scan.csv"
    csv.parent.mkdir(parents=True)
    sweeprun.run_sweep(points, csv, work / "w", work / "data", log=lambda _: None)
    reports = work / "reports"
    verdicts = reports / "sqlite" / "q-scan.verdicts.json"
    verdicts.parent.mkdir(parents=True)
    args = ["--no-fail", "--sweep", str(work / "sweeps" / "q-scan.yaml"), "--json", str(verdicts)]
    assert check_main([*args, str(csv)]) == 0
    page = reports / "sqlite" / "q-scan.html"
    page.write_text("<html></html>")  # the report page as a run leaves it
    return index.write_index([page], reports / "index.html", work / "results"), verdicts


def answer_rows(text: str) -> list[list[str]]:
    table = text[text.index('id="answers"') :]
    table = table[: table.index("</table>")]
    rows = []
    for row in re.findall(r'<tr class="tl-answer">(.*?)</tr>', table, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        rows.append([html.unescape(re.sub(r"<[^>]+>", " ", c)).strip() for c in cells])
    return rows


def test_the_index_opens_with_one_row_per_question_with_figures_and_verdicts(rendered):
    out, _ = rendered
    text = out.read_text()
    assert text.index('id="answers"') < text.index('id="matrix"') < text.index('id="reports"')
    questions_shown = re.findall(r'<td class="tl-question" rowspan="(\d+)" id="q-([^"]+)"', text)
    # in the file's order; a question no finding answers has no row
    assert [q for _, q in questions_shown] == ["2A", "1B"]
    rows = answer_rows(text)
    assert sum(int(n) for n, _ in questions_shown) == len(rows) == 3  # 3 findings, 1 engine
    scan, similar, locking = rows
    assert "2A: scans" in scan[0] and "How fast can you scan" in scan[0]
    assert "6.7 s with 4K pages, just under 6 s with 32K" in scan[1]  # the source's figure
    assert scan[2] == similar[1] == locking[2] == "sqlite"
    # this run's figure: both sides' medians in the unit of the source (a time), each
    # knob's value in the unit the engine declares for it (SQLite's page size: bytes)
    figure = re.fullmatch(
        r"page size 32 KiB ([\d.]+) (ms|s) vs page size 4 KiB ([\d.]+) (ms|s)", scan[3]
    )
    assert figure, scan[3]
    assert any(scan[4].startswith(w) for w in WORDS) and "% interval" in scan[4]
    assert "larger pages, fewer reads: " in scan[5]  # the explanation checked on the rows
    assert "the update throughput ratio row/table close to one" in locking[1]
    assert locking[3] == "" and locking[4] == "cannot run here"
    assert "SQLite locks the whole database file" in locking[5]
    assert 'href="engines/q-scan.html#claims"' in text and 'href="sqlite/q-scan.html"' in text


def test_the_figures_are_the_medians_the_verdict_compared(rendered):
    """The table quotes the two medians the verdict compared, as its evidence quotes them."""
    import json

    out, verdicts = rendered
    stored = next(iter(json.loads(verdicts.read_text()).values()))["verdicts"]
    v = next(v for v in stored if v["finding"] == "scan-page-size" and v["role"] == "finding")
    (context,) = v["contexts"]
    a, b = (figure_text(s["median"], context["metric"]) for s in context["sides"])
    assert v["evidence"].startswith(f"page_size 32768 {a} vs page_size 4096 {b}: ratio ")
    assert questions.run_figure(v, engine="sqlite") == answer_rows(out.read_text())[0][3]


def tokens(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z'_-]*", text)}


def test_every_word_the_verdicts_use_has_a_glossary_entry(rendered):
    """The evidence, causes, figures and words of every stored verdict, and the answer
    table's verdict and why cells: each word is plain English, a setting of the sweep, or
    covered by a glossary entry shown on the index."""
    import json

    out, verdicts = rendered
    doc = loading.load_yaml(Path(out).parents[1] / "sweeps" / "q-scan.yaml")[0]
    settings = tokens(" ".join(f"{k} {v}" for k, v in {**doc["knobs"], **doc["fixed"]}.items()))
    settings |= tokens(" ".join(str(k) for k in doc["knobs"]).replace("_", " "))
    used: set[str] = set()
    for v in next(iter(json.loads(verdicts.read_text()).values()))["verdicts"]:
        used |= tokens(" ".join([v["evidence"], *v["causes"], *figures_text(v), v["word"]]))
    for row in answer_rows(out.read_text()):
        verdict, why = row[-2:]
        if not verdict.startswith(("cannot run here", "not run")):  # not an engine's reason
            used |= tokens(f"{verdict} {why}")
    says = tokens(
        " ".join(
            f["says"]
            for f in findings.load(out.parents[1] / "findings.yaml").entries
            for f in [f, *f.get("explains", [])]
        )
    )
    unexplained = used - PLAIN - settings - says - questions.glossary_words()
    assert not unexplained, f"words without a glossary entry: {sorted(unexplained)}"
    text = out.read_text()
    for term, _, _ in questions.GLOSSARY:
        assert f">{html.escape(term)}</dt>" in text


def test_every_finding_of_the_lab_answers_a_question_listed():
    book = findings.load(REPO / "workflows" / "findings.yaml")
    asked = [q["id"] for q in book.questions]
    assert asked[:2] == ["1A", "1B"] and {"2A", "2B", "2C", "2D", "book", "talk"} <= set(asked)
    assert all(f.get("question") in asked for f in book.entries)


def test_a_finding_naming_no_listed_question_is_one_line_before_anything_starts(tmp_path):
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "findings.yaml").write_text(FINDINGS.replace("question: 1B", "question: 1E"))
    (tmp_path / "sweeps" / "q-scan.yaml").write_text(SWEEP)
    proc = subprocess.run(
        [sys.executable, "-m", "tunelab.cli", "validate", str(tmp_path / "sweeps" / "q-scan.yaml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line == (
        f"{tmp_path / 'findings.yaml'}: findings[2].question: no question '1E' in "
        "questions: (allowed: 2A, 1B, 2B)"
    )
