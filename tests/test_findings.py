"""The findings file (tunelab.sweep.findings): each finding stated once and judged alike on every
engine that can run its sweep; bad findings refused before anything starts, one line each."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tunelab import engines
from tunelab.sweep import checks, claimspec, findings, loading

REPO = Path(__file__).resolve().parents[1]
FINDINGS = REPO / "workflows" / "findings.yaml"
SWEEPS = sorted((REPO / "workflows" / "sweeps").glob("*.yaml"))


def _runs_on(doc: dict) -> list[str]:
    return [e for e in checks.engines_of(doc) if not checks.cannot_vary(doc, e)]


def test_every_default_sweep_is_judged_by_the_findings_file_alone():
    book = findings.load(FINDINGS)
    named = {f["sweep"] for f in book.entries}
    for path in SWEEPS:
        doc, errors = loading.load_yaml(path)
        assert not errors
        assert "expect" not in doc, (
            f"{path.name}: a default sweep states its findings in {FINDINGS}"
        )
        for engine, over in (doc.get("overrides") or {}).items():
            assert "repetitions" not in (over or {}), f"{path.name}: a budget for {engine} alone"
    names = {loading.load_yaml(p)[0]["name"] for p in SWEEPS}
    assert named <= names


def test_a_finding_is_the_same_claim_on_every_engine_that_can_run_its_sweep():
    """Filtering a finding to some engines, or changing its margin, window or alpha for one,
    fails here: the claims of a sweep differ between engines only in translated names."""
    book = findings.load(FINDINGS)
    for path in SWEEPS:
        doc, _ = loading.load_yaml(path)
        per_engine = {}
        for engine in _runs_on(doc):
            found, errors = claimspec.sweep_claims(doc, path, engine)
            assert not errors, errors
            per_engine[engine] = [c for c in found if c["role"] == findings.FINDING]
        expected = [f["id"] for _, f in book.of_sweep(doc["name"])]
        for engine, found in per_engine.items():
            assert [c["finding"] for c in found] == expected, (path.name, engine)
            for c in found:
                rule = book.rules
                margin = rule.similar_within if c["kind"] == "similar" else rule.margin
                assert (c["alpha"], c["min_effect"]) == (rule.alpha, margin), (path.name, c)
        shapes = {
            e: [
                (c["kind"], c.get("metric"), c.get("along"), c.get("within"), c["min_effect"])
                for c in found
            ]
            for e, found in per_engine.items()
        }
        assert len({repr(s) for s in shapes.values()}) <= 1, (path.name, shapes)


def test_the_rules_are_the_findings_files_and_a_crossover_window_follows_from_its_figure():
    book = findings.load(FINDINGS)
    assert book.rules == findings.Rules(0.05, 0.05, 0.15, 3.0)
    (cold,) = [
        t.claim
        for t in findings.claims_for(book, "range-index-vs-scan", "sqlite")
        if t.claim.get("finding") == "range-cold-crossover"
    ]
    assert cold["within"] == pytest.approx([0.10 / 3, 0.30])
    (warm,) = [
        t.claim
        for t in findings.claims_for(book, "range-index-vs-scan", "sqlite")
        if t.claim.get("finding") == "range-warm-crossover"
    ]
    assert warm["within"] == pytest.approx([0.35 / 3, 1.0])  # not 105 % of the rows


def test_explanations_are_about_their_engine_and_never_a_finding():
    book = findings.load(FINDINGS)
    on_sqlite = findings.claims_for(book, "insert-vs-page-size", "sqlite")
    roles = [(t.claim["role"], t.claim.get("finding")) for t in on_sqlite]
    assert roles == [("finding", "insert-page-size"), ("explains", "insert-page-size")]
    on_maria = [
        t.claim["says"] for t in findings.claims_for(book, "insert-vs-page-size", "mariadb")
    ]
    assert "InnoDB" in on_maria[1] and "SQLite" not in " ".join(on_maria)


def test_a_per_engine_value_names_the_engines_mode_and_must_name_each_engine():
    book = findings.load(FINDINGS)
    (pg,) = [
        t
        for t in findings.claims_for(book, "log-shipping", "postgres")
        if t.claim["finding"] == "hadr-sync-rtt"
    ]
    assert pg.claim["where"] == {"sync_mode": "on"}
    selector = {"sync_mode": {"db2": "SYNC"}}
    assert findings.resolve(selector, "mariadb") == ({}, "db2")


def _copy_pack(tmp_path: Path) -> Path:
    root = tmp_path / "lab"
    shutil.copytree(REPO / "workflows" / "sweeps", root / "sweeps")
    shutil.copy(FINDINGS, root / "findings.yaml")
    return root


def _validate(root: Path, engine: str = "sqlite") -> subprocess.CompletedProcess:
    files = [str(p) for p in sorted((root / "sweeps").glob("*.yaml"))]
    cmd = [
        sys.executable,
        "-m",
        "tunelab.cli",
        "validate",
        "--engine",
        engine,
        "--skip-other-engines",
        "--",
        *files,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("edit", "field", "said"),
    [
        ("    kind: similar\n", "findings[0]", "unknown key(s): engines"),
        (
            "    a: {page_size: 4096, buffer_pool: 4096}\n",
            "findings[0].a.page_size",
            "value 2048 not in the sweep on sqlite",
        ),
        (
            "    kind: rises\n    metric: throughput_rows_s\n",
            "findings[1].metric",
            "unknown metric 'throughput'",
        ),
        ("    kind: similar\n", "findings[0]", "unknown key(s): min_effect"),
    ],
)
def test_a_bad_finding_is_one_line_naming_the_file_and_field_exit_2(tmp_path, edit, field, said):
    root = _copy_pack(tmp_path)
    text = (root / "findings.yaml").read_text()
    if "engines" in said:
        new = edit + "    engines: [db2]\n"
    elif "min_effect" in said:
        new = edit + "    min_effect: 0.3\n"
    elif "2048" in said:
        new = edit.replace("4096,", "2048,", 1)
    else:
        new = edit.replace("throughput_rows_s", "throughput")
    assert edit in text
    (root / "findings.yaml").write_text(text.replace(edit, new, 1))
    proc = _validate(root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [x for x in (proc.stdout + proc.stderr).splitlines() if x.strip()]
    mine = [x for x in lines if f"findings.yaml: {field}" in x]
    assert len(mine) == 1 and said in mine[0], lines
    assert "Traceback" not in proc.stderr


def test_a_finding_of_a_sweep_that_is_not_there_is_refused(tmp_path):
    root = _copy_pack(tmp_path)
    (root / "sweeps" / "pool-simulation.yaml").unlink()
    proc = _validate(root)
    assert proc.returncode == 2
    docs = findings.load(root / "findings.yaml").entries
    at = next(i for i, f in enumerate(docs) if f["sweep"] == "pool-simulation")
    assert f"findings.yaml: findings[{at}].sweep: no sweep named 'pool-simulation'" in proc.stderr


def test_a_translation_missing_for_an_engine_that_runs_the_sweep_is_refused(tmp_path):
    root = _copy_pack(tmp_path)
    text = (root / "findings.yaml").read_text()
    old = '    where: {sync_mode: {db2: SYNC, postgres: "on", mariadb: AFTER_SYNC}}\n'
    assert old in text
    (root / "findings.yaml").write_text(text.replace(old, "    where: {sync_mode: {db2: SYNC}}\n"))
    proc = _validate(root, "postgres")
    assert proc.returncode == 2
    docs = findings.load(root / "findings.yaml").entries
    at = next(
        i for i, f in enumerate(docs) if f.get("where", {}).get("sync_mode") == {"db2": "SYNC"}
    )
    assert f"findings[{at}].where: gives no value for postgres" in proc.stderr


def test_the_digest_names_the_version_of_the_file(tmp_path):
    root = _copy_pack(tmp_path)
    before = findings.digest_for(root / "sweeps" / "scan-vs-page-size.yaml")
    assert before == findings.load(FINDINGS).digest and len(before) == 16
    path = root / "findings.yaml"
    path.write_text(path.read_text().replace("margin: 0.05 ", "margin: 0.10 "))
    assert findings.digest_for(root / "sweeps" / "scan-vs-page-size.yaml") != before
    assert findings.load(path).rules.margin == 0.10


def test_engine_names_in_the_findings_are_the_registrys():
    book = findings.load(FINDINGS)
    names = set(engines.names())
    for f in book.entries:
        for x in f.get("explains") or []:
            assert x.get("engine", "sqlite") in names
