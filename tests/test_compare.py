"""`tunelab compare` on real SQLite measurements: a tiny sweep measured three times, twice
unchanged and once with a change that makes one point slower, as a regression of the system
under test leaves it.

The sweep has three points: warm unique-key lookups through an index with pools of 2000,
4000 and 8000 pages (the table and index fit in each). The regression leaves a hook on the
4000-page point's connections (a progress callback at every step of SQLite's virtual
machine, as a cancellation hook left on would be): measured, that point's lookups take about
1.5-1.8x their time; nothing else changes, and its point still matches.
"""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from tunelab import cli
from tunelab.engines.sqlite import SQLiteEngine
from tunelab.report import compare as cmp
from tunelab.report.compare.match import canon

# -- matching ---------------------------------------------------------------------------------


def test_csv_values_compare_whatever_their_type():
    assert canon(10) == canon(10.0) == canon("10") == "10"
    assert canon(0.1) == canon("0.10")
    assert canon(float("nan")) == canon(None) == ""
    assert canon(True) == canon("True") == "true"
    assert canon("8MiB") == "8MiB"


# -- real measurements ------------------------------------------------------------------------

SWEEP = """\
name: cmp
description: warm point lookups through an index, with pools that hold them
engines: [sqlite]
dataset: {rows: 20000, seed: 11}
knobs:
  buffer_pool: [2000, 4000, 8000]
fixed:
  index: nonclustered
  page_size: 65536     # each page a 4-page pool misses is a 64 KiB copy: about 3.5x slower
workloads:
  - type: point
    lookups: 5000
    fetch: count
cache: warm
repetitions: 8
"""
BROKEN = 4000  # the pool whose setting the regression loses

LINE = re.compile(
    r"^sqlite/cmp (?P<point>\S+): (?P<metric>\w+)"
    r"(?P<scaled> \(1 CPU speed\))? (?P<ratio>[\d.]+x|inf), (?P<beyond>[\d.]+x|inf) beyond "
    r"its block's shift \[(?P<low>[\d.]+|inf), (?P<high>[\d.]+|inf)\], could have detected >= "
    r"(?P<detect>[\d.]+) %: (?P<verdict>[^(]+?)(?: \((?P<why>.*)\))?$"
)


def measure(sweep: Path, root: Path, work: Path) -> Path:
    """The sweep measured in rounds by `tunelab run-sweep`, its rows written as the merged
    ``root/sqlite/cmp.csv``."""
    rounds = work / f"{root.name}.rounds.csv.gz"
    args = ["run-sweep", str(sweep), "--out", str(rounds), "--workdir", str(work / "engine")]
    assert cli.main([*args, "--data-dir", str(work / "data")]) == 0
    merged = root / "sqlite" / "cmp.csv"
    merged.parent.mkdir(parents=True, exist_ok=True)
    pd.read_csv(rounds, low_memory=False).to_csv(merged, index=False)
    return root


def write_set(root: Path, frame: pd.DataFrame) -> Path:
    (root / "sqlite").mkdir(parents=True, exist_ok=True)
    frame.to_csv(root / "sqlite" / "cmp.csv", index=False)
    return root


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    work = tmp_path_factory.mktemp("compare")
    sweep = work / "cmp.yaml"
    sweep.write_text(SWEEP)
    old = measure(sweep, work / "old", work)
    rerun = measure(sweep, work / "rerun", work)
    connect = SQLiteEngine.connect

    def hooked(self):  # a cancellation hook left on: a callback at every VM step
        conn = connect(self)
        if int(self.knobs.get("buffer_pool", 0)) == BROKEN:
            conn.raw.set_progress_handler(lambda: False, 1)
        return conn

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SQLiteEngine, "connect", hooked)
        broken = measure(sweep, work / "broken", work)
    rows = pd.read_csv(old / "sqlite" / "cmp.csv")
    assert len(rows) == 24
    slow = pd.read_csv(broken / "sqlite" / "cmp.csv")
    before = rows.groupby("knob_buffer_pool")["elapsed_s"].median()
    after = slow.groupby("knob_buffer_pool")["elapsed_s"].median()
    assert after[BROKEN] > 1.3 * before[BROKEN], (before, after)  # the regression is real
    return {
        "work": work,
        "sweep": sweep,
        "old": old,
        "rerun": rerun,
        "broken": broken,
        "rows": rows,
    }


@pytest.fixture
def run(capsys):
    """`tunelab compare OLD NEW ARGS...` through the command's dispatch, in this process:
    (exit code, stdout lines, stderr lines)."""

    def compare(old: Path, new: Path, *args: str):
        capsys.readouterr()
        code = cli.main(["compare", str(old), str(new), "--no-record", *args])
        captured = capsys.readouterr()
        return code, captured.out.splitlines(), captured.err.splitlines()

    return compare


class _Tables(HTMLParser):
    """Cells of every <table id=...> in a page: {id: [[cell, ...], ...]}."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = dict(attrs).get("id") or f"t{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table:
            self.tables[self._table][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def tables_of(page: str) -> dict[str, list[list[str]]]:
    parser = _Tables()
    parser.feed(page)
    return parser.tables


@pytest.mark.slow
def test_the_sweep_measured_twice_unchanged_is_not_flagged(lab, tmp_path, run):
    html = tmp_path / "c.html"
    code, out, err = run(lab["old"], lab["rerun"], "--html", str(html))
    assert code == 0, out + err
    assert not [line for line in out if ": worse" in line], out
    assert out[-1].startswith("3 point(s) compared (9 metrics, 6 hypotheses")
    assert " 0 worse, " in out[-1]
    page = html.read_text()
    assert "same provenance at every common point" not in page or "git_commit" not in page


@pytest.mark.slow
def test_the_sweep_measured_again_with_a_lost_pool_setting_is_flagged(lab, tmp_path, run):
    html = tmp_path / "out" / "c.html"
    code, out, err = run(lab["old"], lab["broken"], "--html", str(html))
    assert code == 1, out + err
    broken = lab["rows"].loc[lab["rows"]["knob_buffer_pool"] == BROKEN, "point_id"].iloc[0]
    found = {(m["point"], m["metric"]): m for m in map(LINE.match, out) if m}
    elapsed = found[(broken, "elapsed_s")]
    assert elapsed["verdict"] == "worse" and elapsed["scaled"]
    assert float(elapsed["ratio"][:-1]) > 1.3 and float(elapsed["low"]) > 1.1
    assert found[(broken, "throughput_rows_s")]["verdict"] == "worse"
    assert {p for p, _ in found if found[(p, _)]["verdict"] == "worse"} == {broken}
    assert err[-1] == f"tunelab compare: wrote {html}"
    tables = tables_of(html.read_text())
    body = tables["compare-0"][1:]
    assert body[0][0] == broken  # flagged changes first
    assert body[0][-2] == "worse"


@pytest.mark.slow
def test_a_rerun_and_the_regression_against_the_rerun(lab, tmp_path, run):
    """The regression is caught against either unchanged run."""
    code, out, err = run(lab["rerun"], lab["broken"], "--html", str(tmp_path / "c.html"))
    assert code == 1, out + err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("column", "value"),
    [("engine_version", "SQLite 3.0.0"), ("host_name", "elsewhere"), ("cache_method", "none")],
)
def test_other_version_host_or_cold_method_is_incomparable(lab, run, tmp_path, column, value):
    rows = pd.read_csv(lab["broken"] / "sqlite" / "cmp.csv")
    large = rows["knob_buffer_pool"] == BROKEN
    rows.loc[large, column] = value
    new = write_set(tmp_path / "new", rows)
    code, out, err = run(lab["old"], new, "--html", str(tmp_path / "c.html"))
    assert code == 0, err  # the slowed point is not compared, so nothing got worse
    point = rows.loc[large, "point_id"].iloc[0]
    before = lab["rows"][column].iloc[0]
    lines = [line for line in out if ": incomparable (" in line]
    assert lines == [f"sqlite/cmp {point}: incomparable ({column}: {before} -> {value})"]
    assert "2 point(s) compared (6 metrics" in out[-1] and "1 incomparable" in out[-1]
    page = tables_of((tmp_path / "c.html").read_text())
    provenance = {row[0]: row[1] for row in page["provenance-0"]}
    assert provenance[column].endswith("(1 of 3 points) (incomparable)")


@pytest.mark.slow
def test_another_code_version_is_listed_and_still_compared(lab, tmp_path, run):
    rows = pd.read_csv(lab["broken"] / "sqlite" / "cmp.csv").assign(git_commit="0123456789ab")
    new = write_set(tmp_path / "new", rows)
    code, out, _ = run(lab["old"], new, "--html", str(tmp_path / "c.html"))
    assert code == 1
    provenance = {r[0]: r[1] for r in tables_of((tmp_path / "c.html").read_text())["provenance-0"]}
    assert provenance["git_commit"].startswith(f"{lab['rows']['git_commit'].iloc[0]} → 0123")


@pytest.mark.slow
def test_the_command_compares_merged_csvs_and_exits_1(lab, tmp_path):
    new = lab["broken"]
    cmd = [sys.executable, "-m", "tunelab.cli", "compare", str(lab["old"] / "sqlite" / "cmp.csv")]
    cmd.append(str(new / "sqlite" / "cmp.csv"))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert (tmp_path / "compare.html").is_file()  # the default place
    assert " 2 worse," in proc.stdout.splitlines()[-1]  # its time and throughput


@pytest.mark.slow
def test_bad_input_is_one_line_and_exit_2(lab, tmp_path, run):
    missing = tmp_path / "missing"
    code, out, err = run(lab["old"], missing)
    assert (code, out, err) == (2, [], [f"{missing}: no such file or directory"])

    bad = tmp_path / "bad.csv"
    bad.write_text("sweep,engine\ncmp,sqlite\n")
    code, out, err = run(bad, lab["old"])
    assert (code, out, err) == (2, [], [f"{bad}: missing column(s) elapsed_s"])

    garbage = tmp_path / "garbage" / "sqlite"
    garbage.mkdir(parents=True)
    (garbage / "cmp.csv").write_bytes(bytes(range(256)) * 8)
    code, out, err = run(lab["old"], garbage.parent)
    assert code == 2 and out == [] and len(err) == 1
    assert err[0].startswith(f"{garbage / 'cmp.csv'}: not a readable CSV")

    other = write_set(tmp_path / "other", lab["rows"].assign(knob_index="covering"))
    code, out, err = run(lab["old"], other)
    assert code == 2 and out == [] and len(err) == 1
    assert err[0].startswith(f"{other}: no point in common with {lab['old']}")

    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(empty, lab["old"])
    assert code == 2 and len(err) == 1 and err[0].startswith(f"{empty}: no result CSVs")

    code, _, err = run(lab["old"], lab["old"], "--fdr", "ten")
    assert code == 2 and len(err) == 1 and "--fdr" in err[0]


@pytest.mark.slow
def test_a_parameter_one_side_did_not_record_is_left_out_of_matching(lab, tmp_path):
    rows = lab["rows"].drop(columns=["wl_fetch"])
    old = write_set(tmp_path / "old", rows)
    result = cmp.compare(old, lab["old"])
    assert len(result.points()) == 3
    assert result.sweeps[0].one_sided == ["wl_fetch (NEW only: count)"]


def test_warmed_by_the_previous_repetition_compares_with_a_warm_up_run(
    lab, run, tmp_path, monkeypatch
):
    """A run whose later warm repetitions were warmed by the one before (same workload, same
    connections) compares with one that warmed every repetition with a run of its own: the
    same state, not an incomparable cache method."""
    from tunelab.host import cache

    monkeypatch.chdir(tmp_path)  # where compare.html goes
    old = lab["rows"].assign(cache_method=cache.WARM_UP)
    mixed = lab["rows"].assign(
        cache_method=[
            cache.WARM_UP if r == 0 else cache.WARM_BY_PREVIOUS for r in lab["rows"]["rep"]
        ]
    )
    code, out, err = run(write_set(tmp_path / "old", old), write_set(tmp_path / "new", mixed))
    assert code == 0, err
    assert not any("incomparable (" in line for line in out), out
    assert "0 incomparable" in out[-1]
