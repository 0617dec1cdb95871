"""`tunelab compare`: the ratio statistics on samples with a known answer, then two result
sets from real SQLite measurements.

The measured sweep has two points: warm unique-key lookups through an index with a pool of
4000 pages (the table and index fit) and with a pool of 4 pages (every lookup reads its
pages again from the OS). A "slower" NEW set is the OLD set whose 4000-page point carries
the rows measured with 4 pages, as a change that broke the pool setting would leave them:
every number in it was measured, only the labels say 4000.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunelab import cli, spec
from tunelab.report import compare as cmp

# -- statistics on synthetic samples -----------------------------------------------------------


def lognormal(n: int, seed: int, scale: float = 1.0) -> np.ndarray:
    return scale * np.random.default_rng(seed).lognormal(mean=0.0, sigma=0.05, size=n)


def test_samples_twice_as_large_give_ratio_two_inside_the_interval():
    old = lognormal(10, 1)
    t = cmp.compare_samples(old, 2 * old, key="x2")
    assert t.ratio == pytest.approx(2.0)
    assert t.low <= 2.0 <= t.high
    assert t.low > 1 and t.high < 3  # excludes 1, and not absurdly wide
    assert t.p < 0.001
    assert cmp.verdict(t, +1, 0.05, 0.10) == cmp.WORSE  # a time doubled
    assert cmp.verdict(t, -1, 0.05, 0.10) == cmp.BETTER  # a throughput doubled


def test_independent_draws_scaled_by_two_cover_the_true_ratio():
    t = cmp.compare_samples(lognormal(30, 2), lognormal(30, 3, scale=2.0), key="draws")
    assert t.low < 2.0 < t.high
    assert t.significant(0.05)


def test_identical_samples_are_no_change():
    old = lognormal(8, 4)
    t = cmp.compare_samples(old, old.copy(), key="same")
    assert t.ratio == 1.0 and t.p == 1.0
    assert t.low <= 1.0 <= t.high
    assert cmp.verdict(t, +1, 0.05, 0.10) == cmp.SAME


def test_the_interval_is_seeded_per_point():
    old, new = lognormal(8, 5), lognormal(8, 6, scale=1.2)
    a = cmp.compare_samples(old, new, seed=7, key="p1/elapsed_s")
    assert a == cmp.compare_samples(old, new, seed=7, key="p1/elapsed_s")
    other = cmp.compare_samples(old, new, seed=7, key="p2/elapsed_s")
    assert (other.low, other.high) != (a.low, a.high)
    assert other.ratio == a.ratio


def test_three_repetitions_a_side_cannot_be_significant():
    old = lognormal(3, 8)
    t = cmp.compare_samples(old, 5 * old, key="few")
    assert t.ratio == pytest.approx(5.0)
    assert t.min_p == pytest.approx(0.1) and t.p == pytest.approx(0.1)
    assert cmp.verdict(t, +1, 0.05, 0.10) == cmp.TOO_FEW


def test_a_small_significant_change_is_within_the_threshold():
    old = lognormal(20, 9, scale=1.0)
    t = cmp.compare_samples(old, old * 1.05, key="small")
    assert t.significant(0.05)
    assert cmp.verdict(t, +1, 0.05, 0.10) == cmp.WORSE_WITHIN
    assert cmp.verdict(t, +1, 0.05, 0.02) == cmp.WORSE
    # throughput down by the same change: 1/1.05 is past 1/(1 + 2 %) but within 10 %
    back = cmp.compare_samples(old, old / 1.05, key="small-throughput")
    assert cmp.verdict(back, -1, 0.05, 0.10) == cmp.WORSE_WITHIN
    assert cmp.verdict(back, -1, 0.05, 0.02) == cmp.WORSE


def test_tied_counters_get_an_exact_permutation_p():
    assert cmp.mann_whitney_p(np.full(4, 63.0), np.full(4, 70.0)) == pytest.approx(2 / 70)
    assert cmp.mann_whitney_p(np.full(4, 63.0), np.full(4, 63.0)) == 1.0


def test_zero_medians():
    same = cmp.compare_samples([0, 0, 0, 0], [0, 0, 0, 0], key="zero")
    assert same.ratio == 1.0 and cmp.verdict(same, +1, 0.05, 0.1) == cmp.SAME
    grew = cmp.compare_samples([0, 0, 0, 0, 0], [9, 9, 9, 9, 9], key="grew")
    assert grew.ratio == np.inf and cmp.verdict(grew, +1, 0.05, 0.1) == cmp.WORSE
    assert cmp.times_text(grew.ratio) == "inf"


def test_csv_values_compare_whatever_their_type():
    assert cmp.canon(10) == cmp.canon(10.0) == cmp.canon("10") == "10"
    assert cmp.canon(0.1) == cmp.canon("0.10")
    assert cmp.canon(float("nan")) == cmp.canon(None) == ""
    assert cmp.canon(True) == cmp.canon("True") == "true"
    assert cmp.canon("8MiB") == "8MiB"


# -- real measurements ------------------------------------------------------------------------

SWEEP = """\
name: cmp
description: warm point lookups through an index, with a pool that holds them and one that cannot
engines: [sqlite]
dataset: {rows: 20000, seed: 11}
knobs:
  buffer_pool: [4, 4000]
fixed:
  index: nonclustered
  page_size: 65536     # each page the 4-page pool misses is a 64 KiB copy: about 3.5x slower
workloads:
  - type: point
    lookups: 5000
    fetch: count
cache: warm
repetitions: 8
"""

LINE = re.compile(
    r"^sqlite/cmp (?P<point>\S+): (?P<metric>\w+)"
    r"(?P<scaled> \(1 CPU speed\))? (?P<ratio>[\d.]+x|inf) "
    r"\[(?P<low>[\d.]+|inf), (?P<high>[\d.]+|inf)\] p=(?P<p>[\d.e+-]+), "
    r"noise (?P<noise>[^:]+): (?P<verdict>.+)$"
)


def measure(sweep: Path, root: Path, work: Path) -> Path:
    """Every point of the sweep measured by `tunelab run-point`, merged as the workflow does
    into ``root/sqlite/<sweep>.csv``."""
    points, errors = spec.expand(sweep)
    assert not errors
    outs = []
    for p in points:
        out = work / "points" / f"{p.point_id}.csv"
        args = ["run-point", str(sweep), p.point_id, "--out", str(out)]
        args += ["--workdir", str(work / "engine"), "--data-dir", str(work / "data")]
        assert cli.main(args) == 0
        outs.append(str(out))
    merged = root / "sqlite" / "cmp.csv"
    assert cli.main(["merge", *outs, "--out", str(merged)]) == 0
    return merged


def write_set(root: Path, frame: pd.DataFrame) -> Path:
    (root / "sqlite").mkdir(parents=True, exist_ok=True)
    frame.to_csv(root / "sqlite" / "cmp.csv", index=False)
    return root


def slowed(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows measured with 4 pages, labelled as the 4000-page point they replace."""
    small = frame[frame["knob_buffer_pool"] == 4].copy()
    large = frame[frame["knob_buffer_pool"] == 4000]
    for col in ("knob_buffer_pool", "applied_buffer_pool", "point_id"):
        small[col] = large[col].iloc[0]
    return pd.concat([frame[frame["knob_buffer_pool"] == 4], small], ignore_index=True)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    work = tmp_path_factory.mktemp("compare")
    sweep = work / "cmp.yaml"
    sweep.write_text(SWEEP)
    old = measure(sweep, work / "old", work)
    rows = pd.read_csv(old)
    assert len(rows) == 16
    medians = rows.groupby("knob_buffer_pool")["elapsed_s"].median()
    assert medians[4] > 1.5 * medians[4000], medians  # the controlled change is real
    return {"work": work, "sweep": sweep, "old": work / "old", "rows": rows}


@pytest.fixture
def run(capsys):
    """`tunelab compare OLD NEW ARGS...` through the command's dispatch, in this process:
    (exit code, stdout lines, stderr lines)."""

    def compare(old: Path, new: Path, *args: str):
        capsys.readouterr()
        code = cli.main(["compare", str(old), str(new), *args])
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
def test_identical_runs_show_no_significant_change(lab, tmp_path, run, monkeypatch):
    same = tmp_path / "same"
    shutil.copytree(lab["old"], same)
    monkeypatch.chdir(tmp_path)
    code, out, err = run(lab["old"], same)
    assert code == 0, err
    assert len(out) == 1  # only the counts
    assert out[0].startswith("2 point(s) compared (6 metrics): 0 worse, 0 better")
    assert "6 unchanged; 0 incomparable" in out[0]
    page = (tmp_path / "compare.html").read_text()
    assert "same provenance at every common point" in page


@pytest.mark.slow
def test_a_point_really_made_slower_is_worse_and_exits_1(lab, tmp_path, run):
    new = write_set(tmp_path / "new", slowed(lab["rows"]))
    html = tmp_path / "out" / "c.html"
    code, out, err = run(lab["old"], new, "--html", str(html))
    assert code == 1, err
    large = lab["rows"].loc[lab["rows"]["knob_buffer_pool"] == 4000, "point_id"].iloc[0]
    lines = [LINE.match(line) for line in out[:-1]]
    assert all(lines), out
    found = {(m["point"], m["metric"]): m for m in lines}
    assert {p for p, _ in found} == {large}  # the 4-page point did not change
    elapsed = found[(large, "elapsed_s")]
    assert elapsed["verdict"] == "worse"
    # SQLite runs in the measuring process: its time is compared at one CPU speed, its reads not
    assert elapsed["scaled"] and not found[(large, "c_physical_reads")]["scaled"]
    assert float(elapsed["ratio"][:-1]) > 1.5
    assert float(elapsed["low"]) > 1.1 and float(elapsed["p"]) < 0.05
    assert found[(large, "throughput_rows_s")]["verdict"] == "worse"
    assert found[(large, "c_physical_reads")]["verdict"] == "worse"  # 0 pages read before
    assert re.match(r"2 point\(s\) compared \(6 metrics\): 3 worse, 0 better", out[-1])
    assert err[-1] == f"tunelab compare: wrote {html}"
    tables = tables_of(html.read_text())
    body = tables["compare-0"][1:]
    assert body[0][0] == large  # significant changes first
    assert body[0][-2] == "worse"
    ratio = float(body[0][5].rstrip("×"))
    assert ratio == pytest.approx(float(elapsed["ratio"][:-1]), abs=0.006)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("column", "value"),
    [("engine_version", "SQLite 3.0.0"), ("host_name", "elsewhere"), ("cache_method", "none")],
)
def test_other_version_host_or_cold_method_is_incomparable(lab, run, tmp_path, column, value):
    rows = slowed(lab["rows"])
    large = rows["knob_buffer_pool"] == 4000
    rows.loc[large, column] = value
    new = write_set(tmp_path / "new", rows)
    code, out, err = run(lab["old"], new, "--html", str(tmp_path / "c.html"))
    assert code == 0, err  # the slowed point is not compared, so nothing got worse
    point = rows.loc[large, "point_id"].iloc[0]
    before = lab["rows"][column].iloc[0]
    assert out[:-1] == [f"sqlite/cmp {point}: incomparable ({column}: {before} -> {value})"]
    assert "1 point(s) compared (3 metrics)" in out[-1] and "1 incomparable" in out[-1]
    page = tables_of((tmp_path / "c.html").read_text())
    provenance = {row[0]: row[1] for row in page["provenance-0"]}
    assert provenance[column].endswith("(1 of 2 points) (incomparable)")


@pytest.mark.slow
def test_another_code_version_is_listed_and_still_compared(lab, tmp_path, run):
    rows = slowed(lab["rows"]).assign(git_commit="0123456789ab")
    new = write_set(tmp_path / "new", rows)
    code, out, _ = run(lab["old"], new, "--html", str(tmp_path / "c.html"))
    assert code == 1
    provenance = {r[0]: r[1] for r in tables_of((tmp_path / "c.html").read_text())["provenance-0"]}
    assert provenance["git_commit"].startswith(f"{lab['rows']['git_commit'].iloc[0]} → 0123")


@pytest.mark.slow
def test_the_command_compares_merged_csvs_and_exits_1(lab, tmp_path):
    new = write_set(tmp_path / "new", slowed(lab["rows"]))
    cmd = [sys.executable, "-m", "tunelab.cli", "compare", str(lab["old"] / "sqlite" / "cmp.csv")]
    cmd.append(str(new / "sqlite" / "cmp.csv"))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert (tmp_path / "compare.html").is_file()  # the default place
    assert " 3 worse," in proc.stdout.splitlines()[-1]


@pytest.mark.slow
def test_a_rerun_is_not_twice_as_slow(lab, tmp_path, run):
    rerun = tmp_path / "rerun"
    measure(lab["sweep"], rerun, tmp_path)
    code, out, err = run(lab["old"], rerun, "--threshold", "100%", "--html", str(tmp_path / "c"))
    assert code == 0, out + err
    assert not [line for line in out if line.endswith(" worse")]
    assert out[-1].startswith("2 point(s) compared (6 metrics): 0 worse")


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

    code, _, err = run(lab["old"], lab["old"], "--threshold", "ten")
    assert code == 2 and len(err) == 1 and "--threshold" in err[0]


@pytest.mark.slow
def test_a_parameter_one_side_did_not_record_is_left_out_of_matching(lab, tmp_path):
    rows = lab["rows"].drop(columns=["wl_fetch"])
    old = write_set(tmp_path / "old", rows)
    result = cmp.compare(old, lab["old"])
    assert len(result.points()) == 2
    assert result.sweeps[0].one_sided == ["wl_fetch (NEW only: count)"]


def test_warmed_by_the_previous_repetition_compares_with_a_warm_up_run(
    lab, run, tmp_path, monkeypatch
):
    """A run whose later warm repetitions were warmed by the one before (same workload, same
    connections) compares with one that warmed every repetition with a run of its own: the
    same state, not an incomparable cache method."""
    from tunelab import cache

    monkeypatch.chdir(tmp_path)  # where compare.html goes
    old = lab["rows"].assign(cache_method=cache.WARM_UP)
    mixed = lab["rows"].assign(
        cache_method=[
            cache.WARM_UP if r == 0 else cache.WARM_BY_PREVIOUS for r in lab["rows"]["rep"]
        ]  # fmt: skip
    )
    code, out, err = run(write_set(tmp_path / "old", old), write_set(tmp_path / "new", mixed))
    assert code == 0, err
    assert not any("incomparable (" in line for line in out), out
    assert "0 incomparable" in out[-1]
