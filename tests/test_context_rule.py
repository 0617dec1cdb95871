"""A claim judged in several contexts: each context's verdict is kept and shown ("holds warm;
does not hold cold"), and one word follows from them by the findings file's rule
(``rules.contexts``, ``decisions.combine``), the same for every finding and engine: under
``all-bonferroni`` a context refutes only at alpha over the contexts. Real rows:
SQLite scans, cold and warm, whose reads from the OS are a count (the same every run)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tunelab.analysis import claim_verdict, claims, decisions
from tunelab.measure import runner
from tunelab.report import across_tables, contexts
from tunelab.report.page import findings_section
from tunelab.sweep import findings, spec

ROUNDS = 6
WORKFLOWS = Path(__file__).resolve().parents[1] / "workflows"


@pytest.fixture(scope="module")
def scans(tmp_path_factory) -> pd.DataFrame:
    """A scan of a 20,000-row table with a 16-page cache and one that holds it, cold and
    warm, measured in rounds: warm, the large cache reads nothing from the OS; cold, both
    read the whole table."""
    tmp = tmp_path_factory.mktemp("ctx")
    path = tmp / "t.yaml"
    path.write_text(
        "name: t\nengines: [sqlite]\ndataset: {rows: 20000, seed: 7}\n"
        "knobs: {buffer_pool: [16, 4096]}\nworkloads: [{type: scan}]\ncache: both\n"
        f"repetitions: {ROUNDS}\n"
    )
    points, errors = spec.expand(path)
    assert not errors, errors
    rows = []
    for i, point in enumerate(points):
        with runner.PointSession(point, tmp / f"w{i}", tmp / "data") as session:
            for r in range(ROUNDS):
                rows.append(session.repetition(r, {"round": r, "order_mode": "rounds"}))
    return pd.DataFrame(rows)


def reads_fall(rule: str) -> dict:
    return {
        "kind": "lower",
        "metric": "physical_reads",
        "a": {"buffer_pool": 4096},
        "b": {"buffer_pool": 16},
        "contexts": rule,
    }


def test_each_context_keeps_its_verdict_and_the_page_counts_them(scans):
    (v,) = claims.evaluate_sweep([reads_fall("all")], scans, "sqlite")
    by_cache = {c["label"]: c["word"] for c in v.contexts}
    assert by_cache == {
        "cache warm": claim_verdict.HOLDS_WORD,
        "cache cold": claim_verdict.FAILS_WORD,
    }
    assert v.verdict != decisions.HOLDS  # all: one context against it is enough
    stored = v.to_json()
    assert stored["contexts_rule"] == "all"
    assert contexts.tally(stored) == "holds warm; does not hold cold"
    assert "rules.contexts: all" in contexts.rule_text(stored)


def test_a_context_refutes_only_at_alpha_over_the_contexts(scans):
    """Cold, both pools read the whole table: the claim is shown absent at alpha 0.05 by six
    rounds (smallest p 0.031), but not at 0.025, alpha over the two contexts, which six
    rounds cannot reach: under ``all-bonferroni`` that context is undecided, and so is the
    word; ``all`` refutes the claim with it."""
    (old,) = claims.evaluate_sweep([reads_fall("all")], scans, "sqlite")
    (new,) = claims.evaluate_sweep([reads_fall("all-bonferroni")], scans, "sqlite")
    assert old.verdict in decisions.AGAINST
    assert new.verdict == decisions.INCONCLUSIVE
    by_cache = {c["label"]: c["word"] for c in new.contexts}
    assert by_cache == {
        "cache warm": claim_verdict.HOLDS_WORD,
        "cache cold": claim_verdict.UNDECIDED,
    }
    assert any("at alpha 0.05 only, not at alpha 0.025" in c for c in new.causes), new.causes
    stored = new.to_json()
    assert stored["contexts_rule"] == "all-bonferroni"
    assert contexts.tally(stored) == "undecided cold; holds warm"
    assert "at alpha / k" in contexts.rule_text(stored)
    # one context: the refuting level is alpha itself
    cold = scans[scans["cache_requested"] == "cold"]
    (one,) = claims.evaluate_sweep([reads_fall("all-bonferroni")], cold, "sqlite")
    assert one.verdict in decisions.AGAINST


def test_the_refuting_level_and_a_context_against_only_at_alpha():
    assert decisions.refuting_alpha(0.05, 8, "all-bonferroni") == pytest.approx(0.00625)
    assert decisions.refuting_alpha(0.05, 1, "all-bonferroni") == 0.05
    assert decisions.refuting_alpha(0.05, 8, "all") == 0.05
    assert decisions.strict("short", "inconclusive") == "inconclusive"
    assert decisions.strict("contradicted", "short") == "contradicted"
    assert decisions.strict("holds", None) == "holds"


def test_the_rule_decides_the_one_word(scans):
    (v,) = claims.evaluate_sweep([reads_fall("majority")], scans, "sqlite")
    assert v.verdict == decisions.INCONCLUSIVE  # one of two is no majority
    warm_only = scans[scans["cache_requested"] == "warm"]
    (v,) = claims.evaluate_sweep([reads_fall("all")], warm_only, "sqlite")
    assert v.verdict == decisions.HOLDS and contexts.tally(v.to_json()) == ""


def test_every_finding_follows_the_rule_of_the_findings_file():
    book = findings.load(WORKFLOWS / "findings.yaml")
    assert book.rules.contexts in decisions.CONTEXT_RULES
    for sweep in {f["sweep"] for f in book.entries}:
        for t in findings.claims_for(book, sweep, "sqlite"):
            assert t.missing is not None or t.claim["contexts"] == book.rules.contexts


@pytest.mark.parametrize(
    ("verdicts", "all_", "majority"),
    [
        (["holds"] * 7 + ["inconclusive"], "inconclusive", "holds"),
        (["holds", "short", "holds"], "short", "holds"),
        (["holds", "contradicted", "short", "short"], "contradicted", "short"),
        (["holds", "holds", "short", "inconclusive"], "short", "inconclusive"),
        (["short", "short", "contradicted"], "contradicted", "short"),
        (["holds", "holds"], "holds", "holds"),
    ],
)
def test_all_and_majority(verdicts, all_, majority):
    assert decisions.combine(verdicts, "all") == all_
    # the verdicts against at alpha / k already: combined as by ``all``
    assert decisions.combine(verdicts, "all-bonferroni") == all_
    assert decisions.combine(verdicts, "majority") == majority


def test_the_counts_are_on_the_matrix_cell_and_the_sweep_page(scans):
    finding = {**reads_fall("all"), "role": "finding", "finding": "f", "says": "reads fall"}
    (v,) = claims.evaluate_sweep([finding], scans, "sqlite")
    stored = v.to_json()
    cell = across_tables.verdict_cell(stored, "t.html#claims")
    assert "not reproduced" in cell and "reproduced warm; not reproduced cold" in cell
    page = findings_section.claims_html([stored])
    assert "This run: not reproduced (reproduced warm; not reproduced cold)" in page
    assert "rules.contexts: all" in page
