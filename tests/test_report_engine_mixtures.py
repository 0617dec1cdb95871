"""The findings matrix and the cross-engine pages for any mixture of engines and knobs.

The prefetch sweep (workflows/sweeps/scan-vs-prefetch.yaml) asks one question in each
engine's words: SQLite and PostgreSQL vary the kernel's read-ahead, MariaDB its own
read-ahead threshold beside it, so their rows differ in their knob columns. Every pair of
the three open engines, and all three, must give the matrix, the side-by-side page and an
index command that succeeds; a page that cannot be made fails the command in one line and
leaves no page of the lab's standing as if current.

The rows: SQLite's, measured here (a tiny cold scan through tunelab.measure.runner, about a second),
made into each engine's rows of the prefetch sweep by giving them that engine's name and
knob columns (its defaults, the sweep's fixed knobs and two values of each knob the sweep
varies for it, by the sweep's own rule, checks.knob_lists). The page code under test reads
columns, not engines; MariaDB's and PostgreSQL's own rows need their containers. Each
engine's verdicts come from `tunelab check` on its rows.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pandas as pd
import pytest

from tunelab import engines as registry
from tunelab.measure import runner
from tunelab.report import across_engines, across_figures, across_runs, cli, index
from tunelab.run.check import check_main
from tunelab.sweep import checks, loading, spec

REPO = Path(__file__).resolve().parents[1]
PREFETCH = REPO / "workflows" / "sweeps" / "scan-vs-prefetch.yaml"
SWEEP = "scan-vs-prefetch"
# Little and much prefetching, as the finding (workflows/findings.yaml, scan-prefetch) says.
VALUES = {"os_read_ahead": (16, 1024), "read_ahead_threshold": (0, 8)}
OPEN_ENGINES = ("sqlite", "mariadb", "postgres")
MIXTURES = [m for n in (2, 3) for m in itertools.combinations(OPEN_ENGINES, n)]

TINY_SCAN = """
name: tiny-scan
dataset: {rows: 3000, seed: 11}
knobs:
  buffer_pool: [16, 1024]
workloads:
  - type: scan
cache: cold
repetitions: 3
"""


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> list[pd.DataFrame]:
    """SQLite's rows of a cold scan, one frame per point: the small pool's, then the big."""
    work = tmp_path_factory.mktemp("tiny-scan")
    (work / "tiny-scan.yaml").write_text(TINY_SCAN)
    points, errors = spec.expand(work / "tiny-scan.yaml", "sqlite")
    assert errors == []
    return [
        pd.read_csv(
            runner.run_point(p, work / "points" / f"{p.point_id}.csv", work / "w", work / "d")
        )
        for p in sorted(points, key=lambda p: p.knobs["buffer_pool"])
    ]


def prefetch_rows(measured: list[pd.DataFrame], engine: str) -> pd.DataFrame:
    """The measured rows as ``engine``'s rows of the prefetch sweep, a point per combination
    of its knobs' values (as the sweep's grid): the kernel's little read-ahead gets the small
    pool's rows, its much the big pool's."""
    doc = loading.load_yaml(PREFETCH)[0]
    swept, fixed = checks.knob_lists(doc, engine)
    assert "os_read_ahead" in swept and set(swept) <= set(VALUES), swept
    for knob in swept:
        assert set(VALUES[knob]) <= set(swept[knob]), (engine, knob)
    frames = []
    for values in itertools.product(*(VALUES[k] for k in swept)):
        combo = dict(zip(swept, values, strict=True))
        rows = measured[VALUES["os_read_ahead"].index(combo["os_read_ahead"])]
        knobs = {**registry.info(engine).defaults(), **fixed, **combo}
        slug = "_".join(f"{k}-{v}" for k, v in combo.items())
        frames.append(
            rows.drop(columns=[c for c in rows if c.startswith("knob_")]).assign(
                engine=engine,
                sweep=SWEEP,
                sweep_file=str(PREFETCH),
                point_id=f"{slug}_scan_cold",
                **{f"knob_{k}": v for k, v in knobs.items()},
                **{f"applied_{k}": v for k, v in combo.items()},
            )
        )
    return pd.concat(frames, ignore_index=True)


def store(measured, root: Path, mixture: tuple[str, ...]) -> tuple[Path, Path, list[Path]]:
    """Each engine's rows, its verdicts (`tunelab check`) and its report page, where a run
    leaves them; returns (results dir, reports dir, report pages)."""
    results, reports = root / "results", root / "reports"
    pages = []
    for engine in mixture:
        csv = results / engine / f"{SWEEP}.csv"
        csv.parent.mkdir(parents=True, exist_ok=True)
        prefetch_rows(measured, engine).to_csv(csv, index=False)
        verdicts = reports / engine / f"{SWEEP}.verdicts.json"
        verdicts.parent.mkdir(parents=True, exist_ok=True)
        argv = ["--no-fail", "--sweep", str(PREFETCH), "--json", str(verdicts), str(csv)]
        assert check_main(argv) == 0
        page = reports / engine / f"{SWEEP}.html"
        page.write_text("<html></html>")  # the report itself is tested elsewhere
        pages.append(page)
    return results, reports, pages


@pytest.mark.parametrize("mixture", MIXTURES, ids="+".join)
def test_every_mixture_of_engines_gets_the_matrix_and_the_side_by_side_page(
    measured, tmp_path, capsys, mixture
):
    results, reports, pages = store(measured, tmp_path, mixture)
    out = reports / "index.html"
    argv = ["--out", str(out), "--results-dir", str(results), *map(str, pages)]
    assert cli.index_main(argv) == 0, capsys.readouterr().err
    text = out.read_text()
    matrix = text[text.index('id="matrix"') : text.index("</table>", text.index('id="matrix"'))]
    for engine in mixture:
        assert f"<th>{engine}</th>" in matrix
    at = matrix.index("a scan with little prefetching")
    finding = matrix[at : matrix.index("</tr>", at)]
    assert finding.count('class="tl-verdict') == len(mixture)  # a verdict from every engine
    side = text[text.index('id="side-by-side"') :]
    assert f'href="engines/{SWEEP}.html"' in side and f"({', '.join(mixture)})" in side
    page = (reports / "engines" / f"{SWEEP}.html").read_text()
    assert page.count("<img ") == 2  # shared axes, and each against its own first point
    plans = page[page.index('id="plans"') : page.index("</table>", page.index('id="plans"'))]
    assert "".join(f"<th>{e}</th>" for e in mixture) in plans
    assert ("<th>read-ahead threshold</th>" in plans) == ("mariadb" in mixture)


@pytest.mark.parametrize("mixture", [m for m in MIXTURES if "mariadb" in m], ids="+".join)
def test_an_engine_without_a_knob_is_drawn_in_every_panel_of_it(measured, tmp_path, mixture):
    """MariaDB's read-ahead threshold is no setting of SQLite or PostgreSQL: one panel per
    threshold, each with MariaDB's curve at it and the others' curves."""
    results, reports, _ = store(measured, tmp_path, mixture)
    (exp,) = across_runs.gather(results, reports)
    x = across_figures.main_x(exp)
    assert x == "knob_os_read_ahead"  # the knob every engine varies
    assert across_figures.panel_columns(exp, x) == ["knob_read_ahead_threshold"]
    fig = across_figures.engines_figure(exp, x, normalised=False)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["read-ahead threshold 0", "read-ahead threshold 8"]
    for ax in fig.axes[: len(titles)]:
        drawn = [c.get_label() for c in ax.containers]
        assert drawn == [r.engine for r in exp.runs], drawn


def test_a_page_that_cannot_be_made_fails_the_index_in_one_line(measured, tmp_path, capsys):
    """Where the page cannot be written (its path is a folder), the index is written naming
    it, the command exits 1 with one line, and the lab's page of a sweep that has no rows
    any more is removed; a file the lab did not make stays."""
    results, reports, pages = store(measured, tmp_path, ("sqlite", "mariadb"))
    folder = reports / "engines"
    (folder / f"{SWEEP}.html").mkdir(parents=True)
    gone = folder / "gone.html"
    gone.write_text(f"<html><head>{across_engines.GENERATOR}</head></html>")
    old = folder / "old.html"  # a page the lab wrote before it marked its pages
    old.write_text('<title>old: sqlite side by side</title><div class="tl-side"></div>')
    mine = folder / "mine.html"
    mine.write_text("<html>notes of my own</html>")
    out = reports / "index.html"
    argv = ["--out", str(out), "--results-dir", str(results), *map(str, pages)]
    assert cli.index_main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(
        f"tunelab index: error: cross-engine page not made: {SWEEP}: rows of sqlite, mariadb: "
        "IsADirectoryError"
    )
    assert f"{SWEEP} <strong>not made</strong>" in out.read_text()
    assert not gone.exists() and not old.exists() and mine.exists()


def test_an_engine_run_again_since_is_no_longer_failed(measured, tmp_path):
    """The last run of several engines failed on PostgreSQL; it was run alone since (its
    rows were measured after that run's account), MariaDB was not. The time shown is the
    rows': rendered again later, the page is the same."""
    results, reports, pages = store(measured, tmp_path, ("sqlite", "mariadb", "postgres"))
    account = reports / index.ENGINES_RUN_FILE
    account.write_text(
        "sqlite\tran\t\nmariadb\tfailed\tits log: /x/logs/mariadb/\n"
        "postgres\tfailed\tits log: /x/logs/postgres/\n"
    )
    measured_at = max(pd.Timestamp(f["started_at"].max()) for f in measured).timestamp()
    os.utime(account, (measured_at + 60, measured_at + 60))
    again = results / "postgres" / f"{SWEEP}.csv"
    rows = pd.read_csv(again)
    rows["started_at"] = "2100-01-02T03:04:05+00:00"
    rows.to_csv(again, index=False)
    text = index.write_index(pages, reports / "index.html", results).read_text()
    told = text[
        text.index('id="engines-run"') : text.index("</div>", text.index('id="engines-run"'))
    ]
    assert "<strong>mariadb</strong> failed: its log: /x/logs/mariadb/" in told
    assert "<strong>postgres</strong> failed" not in told
    since = "<strong>postgres</strong> run again since: its newest rows 2100-01-02 03:04 UTC"
    assert since in told
    for page in pages:  # rendered again: the pages' own times say nothing
        os.utime(page, (measured_at + 7200, measured_at + 7200))
    assert index.write_index(pages, reports / "index.html", results).read_text() == text
