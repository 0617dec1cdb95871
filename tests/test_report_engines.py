"""One experiment across engines (tunelab.report.across_engines) and the index that leads with the
claim × engine matrix, from stored rows, verdicts and reports as the runs leave them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunelab.report import across_engines, across_figures, across_runs, across_tables, index

SWEEP = """
name: tiny-range
description: A range query through an index or a scan, as the selectivity grows.
notes:
  sqlite: SQLite's note.
  postgres: PostgreSQL's note.
dataset: {rows: 1000, seed: 1}
knobs:
  index: [none, nonclustered]
workloads:
  - type: range
    selectivity: [0.01, 0.1, 0.5]
fixed:
  buffer_pool: 64
cache: cold
repetitions: 6
expect:
  - says: the scan overtakes the index
    kind: crossover
    a: {index: nonclustered}
    b: {index: none}
    along: selectivity
    within: [0.01, 0.5]
  - says: the index beats a scan at 1 %
    kind: lower
    a: {index: nonclustered, selectivity: 0.01}
    b: {index: none, selectivity: 0.01}
"""


def _rows(
    engine: str,
    sweep_file: Path,
    host: str,
    pool_pages: int,
    page: int,
    scale: float,
    index_path: str,
) -> pd.DataFrame:
    rng = np.random.default_rng(len(engine))
    rows = []
    for index_kind in ("none", "nonclustered"):
        for sel in (0.01, 0.1, 0.5):
            base = 1.0 if index_kind == "none" else sel * 4
            point = f"index-{index_kind}_range_selectivity-{sel}_cold"
            for r in range(6):
                rows.append(
                    {
                        "sweep": "tiny-range",
                        "sweep_file": str(sweep_file),
                        "point_id": point,
                        "engine": engine,
                        "knob_index": index_kind,
                        "wl_selectivity": sel,
                        "workload": "range",
                        "cache_requested": "cold",
                        "round": r,
                        "rep": r,
                        "elapsed_s": scale * base * float(np.exp(rng.normal(0, 0.02))),
                        "access_path": "scan" if index_kind == "none" else index_path,
                        "applied_buffer_pool": pool_pages,
                        "page_size_bytes": page,
                        "data_bytes": 4 * 1024 * 1024,
                        "host_name": host,
                        "dataset_rows": 1000,
                        "engine_version": f"{engine} 1.0",
                        "access_mode": "forced",
                        "started_at": f"2026-11-26T07:00:{r:02d}",
                    }
                )
    return pd.DataFrame(rows)


def _verdicts(path: Path, engine: str, crossover: str, lower: str, ratio: str) -> None:
    entries = [
        {
            "claim": "the scan overtakes the index",
            "verdict": crossover,
            "evidence": "crossing near 0.25",
            "causes": [],
            "hosts": [],
        },
        {
            "claim": "the index beats a scan at 1 %",
            "verdict": lower,
            "evidence": f"index nonclustered vs none: ratio {ratio}, p=0.031",
            "causes": [],
            "hosts": [],
        },
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"x": {"sweep": "tiny-range", "engine": engine, "verdicts": entries}})
    )


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, Path]:
    """Two engines' runs of one sweep: SQLite with a 256 KiB pool, PostgreSQL with 512 KiB
    and a bitmap scan for its index points; PostgreSQL's verdicts differ."""
    sweep = tmp_path / "tiny-range.yaml"
    sweep.write_text(SWEEP)
    results, reports = tmp_path / "results", tmp_path / "reports"
    for engine, pages, path in (("sqlite", 64, "index"), ("postgres", 64, "bitmap heap scan")):
        (results / engine).mkdir(parents=True)
        page = 4096 if engine == "sqlite" else 8192
        _rows(engine, sweep, "vm", pages, page, 1.0 if engine == "sqlite" else 2.0, path).to_csv(
            results / engine / "tiny-range.csv", index=False
        )
    _verdicts(
        reports / "sqlite" / "tiny-range.verdicts.json",
        "sqlite",
        "holds",
        "holds",
        "0.04 [0.039, 0.041]",
    )
    _verdicts(
        reports / "postgres" / "tiny-range.verdicts.json",
        "postgres",
        "contradicted",
        "holds",
        "0.041 [0.04, 0.043]",
    )
    return results, reports


def test_gather_finds_each_engine_and_says_why_the_others_have_no_rows(stored):
    results, reports = stored
    (exp,) = across_runs.gather(results, reports)
    assert [r.engine for r in exp.runs] == ["sqlite", "postgres"]
    assert set(exp.missing) == {"mariadb", "db2"}
    assert exp.missing["mariadb"] == "not run yet: ./lab run --config engine=mariadb"
    assert across_figures.main_x(exp) == "wl_selectivity"  # the crossover's along
    assert not exp.shape_only


def test_the_page_lists_settings_the_engines_did_not_share(stored):
    (exp,) = across_runs.gather(*stored)
    diffs = across_tables.differences(exp)
    pool = next(d for d in diffs if d.startswith("buffer pool"))
    assert "sqlite 256 KiB (6.2 % of the table" in pool and "postgres 512 KiB (12.5 %" in pool
    assert any(d.startswith("page size: sqlite 4 KiB; postgres 8 KiB") for d in diffs)
    assert not any(d.startswith("cache") for d in diffs)  # shared: not listed


def test_the_page_puts_verdicts_plans_notes_and_both_figures_side_by_side(stored, tmp_path):
    (exp,) = across_runs.gather(*stored)
    (page,) = across_engines.write_pages([exp], tmp_path / "reports" / "engines")
    text = page.read_text()
    claims = text[text.index('id="claims"') : text.index("</table>", text.index('id="claims"'))]
    assert claims.count("tl-verdict tl-holds") == 3 and claims.count("tl-does-not-hold") == 1
    assert "0.041x [0.04, 0.043]" in claims
    assert "bitmap heap scan" in text and "different access paths" in text
    assert "SQLite&#x27;s note." in text and "PostgreSQL&#x27;s note." in text
    assert text.count("<img ") == 2  # shared axes, and each against its own first point
    assert "Not here: mariadb, not run yet" in text


def test_rows_from_two_hosts_are_compared_in_shape_only(stored, tmp_path):
    results, reports = stored
    csv = results / "postgres" / "tiny-range.csv"
    pd.read_csv(csv).assign(host_name="other").to_csv(csv, index=False)
    (exp,) = across_runs.gather(results, reports)
    assert exp.shape_only
    text = across_engines.page_html(exp, tmp_path)
    assert "compared in shape only" in text and text.count("<img ") == 1


def test_the_index_leads_with_the_matrix_and_shows_every_engines_verdicts(stored):
    results, reports = stored
    for engine in ("sqlite", "postgres"):  # report pages as the runs leave them
        (reports / engine / "tiny-range.html").write_text("<html></html>")
    out = reports / "index.html"
    pages = [reports / "sqlite" / "tiny-range.html", reports / "postgres" / "tiny-range.html"]
    # only this run's engine's verdicts given, as the workflow does
    index.write_index(pages, out, results, [reports / "sqlite" / "tiny-range.verdicts.json"])
    text = out.read_text()
    assert text.index('id="matrix"') < text.index('id="reports"')
    matrix = text[text.index('id="matrix"') : text.index("</table>", text.index('id="matrix"'))]
    assert matrix.count('href="engines/tiny-range.html#claims"') == 4
    assert "tl-does-not-hold" in matrix and ">mariadb<" not in matrix  # no rows: no column
    table = text[text.index('id="reports"') :]
    assert len(re.findall(r'<a class="tl-sweep"', table)) == 2
    assert table.count('<details class="tl-claims">') == 2  # postgres's row has its verdicts
    assert (reports / "engines" / "tiny-range.html").is_file()


def test_the_index_says_which_engine_failed_and_where_its_log_is(stored):
    results, reports = stored
    (reports / "sqlite" / "tiny-range.html").write_text("<html></html>")
    (reports / index.ENGINES_RUN_FILE).write_text(
        "sqlite\tran\t\nmariadb\tfailed\tits log: /x/logs/mariadb/\ndb2\tskipped\tno image\n"
    )
    out = index.write_index(
        [reports / "sqlite" / "tiny-range.html"], reports / "index.html", results
    )
    text = out.read_text()
    assert "<strong>mariadb</strong> failed: its log: /x/logs/mariadb/" in text
    assert "<strong>db2</strong> skipped: no image" in text


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("sqlite,nope", "unknown engine 'nope' (allowed: sqlite, mariadb, db2, postgres, or all)"),
        ("sqlite,postgres,sqlite", "sqlite is listed twice"),
    ],
)
def test_a_bad_engine_list_is_refused_before_anything_starts(given, message):
    import subprocess

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [str(root / "lab"), "run", "--config", f"engine={given}"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "engine sqlite" not in done.stderr  # no engine started


def test_engine_all_is_every_engine_in_the_labs_order():
    from tunelab.cli import engine_info

    assert engine_info.run_list("all") == ["sqlite", "mariadb", "db2", "postgres"]
    assert engine_info.run_list("postgres, sqlite") == ["postgres", "sqlite"]


def test_the_guide_is_filled_from_a_runs_verdicts(stored, tmp_path):
    from tunelab.report import guide

    numbers = guide.numbers_from_run(*stored)
    assert numbers["engines"]["postgres"]["versions"] == ["postgres 1.0"]
    text = "intro\n<!-- guide: tiny-range -->\nold numbers\n<!-- /guide -->\nend\n"
    filled = guide.fill(text, numbers)
    assert "old numbers" not in filled and filled.endswith("<!-- /guide -->\nend\n")
    assert "| finding | source | sqlite | postgres |" in filled
    assert (
        "| the index beats a scan at 1 % |  | **holds** 0.04x [0.039, 0.041] | **holds** 0.041x"
        in filled
    )
    assert "| the scan overtakes the index |  | **holds** | **does not hold** |" in filled
    assert guide.fill(filled, numbers) == filled  # filling again changes nothing


def test_a_run_of_one_engine_fills_its_column_and_keeps_the_others(stored):
    from tunelab.report import guide

    numbers = guide.numbers_from_run(*stored)
    only_pg = {
        "engines": {"postgres": numbers["engines"]["postgres"]},
        "sweeps": {
            s: {
                **e,
                "engines": {
                    "postgres": [{**c, "word": "reproduced"} for c in e["engines"]["postgres"]]
                },
                "cannot": {"sqlite": "not this engine"},
            }
            for s, e in numbers["sweeps"].items()
            if "postgres" in e["engines"]
        },
    }
    both = guide.merged(numbers, only_pg)
    assert set(both["engines"]) == {"sqlite", "postgres"}
    for sweep, entry in only_pg["sweeps"].items():
        assert both["sweeps"][sweep]["engines"]["postgres"] == entry["engines"]["postgres"]
        assert (
            both["sweeps"][sweep]["engines"]["sqlite"]
            == numbers["sweeps"][sweep]["engines"]["sqlite"]
        )
        assert "sqlite" not in both["sweeps"][sweep]["cannot"]  # measured: not "cannot run"


def test_the_guide_quotes_exactly_the_stored_numbers():
    """docs/assignment.md against docs/data/assignment.json, as `tunelab guide --check`."""
    from tunelab.report import guide

    root = Path(__file__).resolve().parents[1]
    doc, numbers = root / guide.DOC, root / guide.NUMBERS
    assert guide.guide_main(["--check", "--doc", str(doc), "--numbers", str(numbers)]) == 0
    stored = json.loads(numbers.read_text())
    text = doc.read_text()
    for sweep in ("insert-vs-buffer-pool", "multipoint-by-index", "range-index-vs-scan"):
        assert sweep in stored["sweeps"]  # the pack's questions have numbers
        for engine, claims in stored["sweeps"][sweep]["engines"].items():
            for c in claims:
                if c["figures"]:
                    assert f"**{c['word']}** {'; '.join(c['figures'])}" in text, engine


def test_engine_notes_explain_without_quoting_measured_figures():
    """A note sits on every run's page: a time, share or ratio it quoted would contradict
    the page's own numbers on the next run or host (the figures and tables give them)."""
    import yaml

    measured = re.compile(r"\d[\d,.]*\s?(s|ms|%|x|×)(?![\w])|twice the|three times|four times")
    root = Path(__file__).resolve().parents[1]
    for path in sorted((root / "workflows" / "sweeps").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        for engine, text in (doc.get("notes") or {}).items():
            found = measured.search(text)
            assert found is None, f"{path.name}: notes.{engine} quotes {found.group(0)!r}"


def test_methods_name_the_image_of_a_version_with_its_own_parenthesis():
    from tunelab.report import methods

    version = "PostgreSQL 15.20 (Debian 15.20-0+deb12u1) (tunelab/postgres:bookworm-15.20)"
    frame = pd.DataFrame({"engine_version": [version]})
    assert methods._engine_text(frame, "postgres") == (
        "PostgreSQL 15.20 (Debian 15.20-0+deb12u1), run from the container image "
        "tunelab/postgres:bookworm-15.20"
    )
