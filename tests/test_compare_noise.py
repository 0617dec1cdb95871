"""`tunelab compare` against the host's noise: the spread of a point over the run's rounds and
the A/A floor of earlier runs of one commit, on synthetic result directories whose answer is
known by construction."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunelab import cli
from tunelab.report import compare as cmp
from tunelab.report import noise

ROUNDS = 30


def spread(n: int, half: float, seed: int) -> np.ndarray:
    """n factors spread evenly over [1 - half, 1 + half], in a seeded order (the rounds of a
    run whose host wandered by ±half)."""
    return np.random.default_rng(seed).permutation(np.linspace(1 - half, 1 + half, n))


def rows(
    points: dict[str, np.ndarray], *, commit: str = "c0ffee123456", host: str = "lab1",
    rounds: bool = True, run: str = "r1", sweep: str = "cmp",
) -> pd.DataFrame:  # fmt: skip
    """Result rows of a sweep: per point name its elapsed seconds, one per repetition."""
    out = []
    for i, (name, values) in enumerate(points.items()):
        for r, elapsed in enumerate(values):
            row = {
                "sweep": sweep,
                "point_id": name,
                "rep": r,
                "engine": "sqlite",
                "workload": "point",
                "knob_buffer_pool": 100 * (i + 1),
                "elapsed_s": elapsed,
                "throughput_rows_s": 5000 / elapsed,
                "host_name": host,
                "git_commit": commit,
                "started_at": f"{run}-{i}-{r}",
            }
            if rounds:
                row["round"] = r
            out.append(row)
    return pd.DataFrame(out)


def write_set(root: Path, frame: pd.DataFrame) -> Path:
    (root / "sqlite").mkdir(parents=True, exist_ok=True)
    frame.to_csv(root / "sqlite" / f"{frame['sweep'].iloc[0]}.csv", index=False)
    return root


@pytest.fixture
def run(capsys, tmp_path, monkeypatch):
    """`tunelab compare OLD NEW ARGS...` in this process: (exit code, stdout, stderr lines)."""
    monkeypatch.chdir(tmp_path)  # compare.html goes here

    def compare(old: Path, new: Path, *args: str):
        capsys.readouterr()
        code = cli.main(["compare", str(old), str(new), *args])
        captured = capsys.readouterr()
        return code, captured.out.splitlines(), captured.err.splitlines()

    return compare


LINE = re.compile(
    r"^sqlite/cmp (?P<point>\S+): (?P<metric>\w+)"
    r"(?P<scaled> \(1 CPU speed\))? (?P<ratio>[\d.]+)x \[[\d.]+, [\d.]+\] "
    r"p=\S+, noise ±(?P<noise>[\d.]+) % \((?P<source>rounds|repetitions)\)"
    r"(?: \+ (?P<excess>[\d.]+) % between runs \((?P<excess_from>[^)]*)\))?"
    r"(?: / ±(?P<aa>[\d.]+) % \(A/A, (?P<aa_n>\d+) comparisons?\))?(?: ×[\d.]+)?"
    r"(?:, at least (?P<apart>\d+) apart)?: (?P<verdict>.+)$"
)


def parsed(out: list[str]) -> dict[tuple[str, str], re.Match]:
    lines = [LINE.match(line) for line in out[:-1]]
    assert all(lines), out
    return {(m["point"], m["metric"]): m for m in lines}


# -- the in-run estimate ------------------------------------------------------------------------


def test_in_run_noise_is_the_width_of_the_central_80_percent_on_the_wider_side():
    rng = np.random.default_rng(1)
    sigma = 0.05
    old, new = np.exp(rng.normal(0, sigma, 4000)), 2 * np.exp(rng.normal(0, 2 * sigma, 4000))
    # a normal's central 80 % spans ±1.2816 sigma; the wider side counts, not the levels
    assert noise.in_run(old, new) == pytest.approx(2 * 1.2816 * 2 * sigma, rel=0.05)
    assert noise.in_run(old, old) == pytest.approx(2 * 1.2816 * sigma, rel=0.05)
    even = spread(ROUNDS, 0.15, 2)  # uniform on ±15 %: its central 80 % is ±12 %
    assert noise.in_run(even, even) == pytest.approx(math.log(1.12 / 0.88), rel=0.02)
    # robust: two disturbed repetitions of thirty barely move it
    disturbed = even.copy()
    disturbed[:2] *= 5
    assert noise.in_run(disturbed, even) == pytest.approx(noise.in_run(even, even), rel=0.1)


def test_in_run_noise_spans_two_clusters_of_values():
    """A host whose disk is fast for a while and slow for a while: values in two clusters, a
    third of them in the other. Two runs' medians can sit in either cluster, so the floor is
    the distance between them, not the spread within the larger one."""
    slow = np.array([0.45, 0.31, 0.24, 0.41, 0.41, 0.46])
    fast = np.array([0.24, 0.23, 0.39, 0.22, 0.39, 0.21])
    ratio = np.median(fast) / np.median(slow)
    assert abs(math.log(ratio)) > math.log(1.5)
    assert noise.in_run(slow, fast) > abs(math.log(ratio))


def test_counters_that_stayed_at_zero_have_no_in_run_estimate():
    assert math.isnan(noise.in_run(np.zeros(6), np.zeros(6)))
    assert noise.Noise(float("nan"), noise.ROUNDS).floor == 0.0
    assert noise.Noise(float("nan"), noise.ROUNDS).text() == "noise n/a (rounds)"


def test_the_noise_bar_is_the_larger_estimate_times_the_multiplier():
    n = noise.Noise(0.05, noise.ROUNDS, aa=0.08, aa_count=3, multiplier=1.5)
    assert n.floor == 0.08 and n.bar == pytest.approx(0.12)
    assert n.text() == "noise ±5.1 % (rounds) / ±8.3 % (A/A, 3 comparisons) ×1.5"
    # the between-run allowance adds to the in-run width, not to the A/A floor
    n = noise.Noise(0.05, noise.ROUNDS, aa=0.08, aa_count=3, excess=0.04, excess_count=40)
    assert n.floor == pytest.approx(0.09)
    assert n.text() == ("noise ±5.1 % (rounds) + 4.1 % between runs (this host's A/A, 40) / "
                        "±8.3 % (A/A, 3 comparisons)")  # fmt: skip


def test_a_point_moving_past_its_in_run_width_by_less_than_the_allowance_is_noise(tmp_path, run):
    """A point that moves past its in-run width (rounds spreading ±4 %) by 60 % of the default
    between-run allowance is within the noise; the same change at a point spreading ±0.5 %
    is worse. The allowance is the one measured in the lab's own A/A comparisons."""
    allowance = noise.DEFAULT_EXCESS["elapsed_s"]
    width = noise.in_run(spread(ROUNDS, 0.04, 1), spread(ROUNDS, 0.04, 3))
    change = math.exp(width + 0.6 * allowance)
    assert change > 1.1  # past the default threshold
    old = {"some": spread(ROUNDS, 0.04, 1), "tight": spread(ROUNDS, 0.005, 2)}
    new = {"some": change * spread(ROUNDS, 0.04, 3), "tight": change * spread(ROUNDS, 0.005, 4)}
    a = write_set(tmp_path / "a", rows(old, commit="aaaa11112222", run="a"))
    b = write_set(tmp_path / "b", rows(new, commit="bbbb11112222", run="b"))
    code, out, _ = run(a, b)
    found = parsed(out)
    some, tight = found[("some", "elapsed_s")], found[("tight", "elapsed_s")]
    assert some["verdict"] == "worse, within the noise"
    assert some["excess"] + " %" == noise.percent(allowance)[1:]
    assert some["excess_from"] == "default"
    assert tight["verdict"] == "worse" and code == 1
    code, out, _ = run(a, b, "--noise-multiplier", "0")
    assert parsed(out)[("some", "elapsed_s")]["verdict"] == "worse"


def test_a_counter_that_moves_a_few_pages_is_noise_whatever_its_ratio(tmp_path, run):
    """A cold point's physical reads at a handful of pages (the pool's first misses) moving
    eight-fold moves fewer pages than the counter's floor: within the noise. The same ratio
    on hundreds of pages is worse."""
    floor = cmp.COUNT_FLOOR["c_physical_reads"]
    few, many = 3 * spread(ROUNDS, 0.3, 1), 300 * spread(ROUNDS, 0.3, 2)
    old = rows({"few": spread(ROUNDS, 0.01, 5), "many": spread(ROUNDS, 0.01, 6)}, run="a")
    new = rows({"few": 1.5 * spread(ROUNDS, 0.01, 7), "many": spread(ROUNDS, 0.01, 8)}, run="b")
    old["c_physical_reads"] = np.concatenate([few, many])
    new["c_physical_reads"] = 8 * np.concatenate([spread(ROUNDS, 0.3, 3) * 3,
                                                  spread(ROUNDS, 0.3, 4) * 300])  # fmt: skip
    assert 8 * 3 * 1.3 - 3 * 0.7 < floor < 8 * 300 * 0.7 - 300 * 1.3
    a = write_set(tmp_path / "a", old.assign(git_commit="aaaa11112222"))
    b = write_set(tmp_path / "b", new.assign(git_commit="bbbb11112222"))
    code, out, _ = run(a, b)
    found = parsed(out)
    reads_few, reads_many = found[("few", "c_physical_reads")], found[("many", "c_physical_reads")]
    assert float(reads_few["ratio"]) > 7 and reads_few["apart"] == str(floor)
    assert reads_few["verdict"] == "worse, within the noise"
    assert reads_many["verdict"] == "worse" and code == 1
    # times have no such floor: 1.5 s against 1 s is worse, and its line says nothing of one
    assert found[("few", "elapsed_s")]["verdict"] == "worse"
    assert found[("few", "elapsed_s")]["apart"] is None


def aa_history(
    floor: noise.FloorFile, engine: str, moves: list[tuple[float, float]], prefix: str = "p"
) -> None:
    """A/A observations of one comparison: per point (|log ratio|, in-run width)."""
    for i, (moved, width) in enumerate(moves):
        obs = noise.observation(math.exp(moved), "c", ("r1", "r2"), (6, 6), noise.ROUNDS,
                                "a", "b", in_run_width=width)  # fmt: skip
        floor.add("lab1", f"{engine}/s/{prefix}{i}", "elapsed_s", obs)


def test_the_host_s_own_allowance_replaces_the_default_once_it_has_enough_points(tmp_path):
    floor = noise.FloorFile(tmp_path / "f.json")
    aa_history(floor, "sqlite", [(0.03, 0.05)] * (noise.MIN_EXCESS_POINTS - 2) + [(0.09, 0.06)])
    # too few observations: the default
    assert floor.excess("lab1", "sqlite", "elapsed_s") == (noise.DEFAULT_EXCESS["elapsed_s"], 0)
    aa_history(floor, "sqlite", [(0.0, 0.1)] * 5, prefix="q")  # more points
    value, count = floor.excess("lab1", "sqlite", "elapsed_s")
    assert count >= noise.MIN_EXCESS_POINTS and value == pytest.approx(0.03)  # 0.09 - 0.06
    # another engine, another host, a counter: their own figures
    assert floor.excess("lab1", "mariadb", "elapsed_s")[1] == 0
    assert floor.excess("lab2", "sqlite", "elapsed_s")[1] == 0
    assert floor.excess("lab1", "sqlite", "c_physical_reads") == (0.0, 0)
    # observations recorded before the in-run width was kept do not count
    for kept in floor.hosts["lab1"].values():
        for o in kept["elapsed_s"]:
            o.pop("in_run")
    assert floor.excess("lab1", "sqlite", "elapsed_s")[1] == 0


# -- the flag rule ------------------------------------------------------------------------------


def test_a_drift_inside_the_rounds_spread_is_not_flagged(tmp_path, run):
    """12 % slower while the point's rounds spread ±15 % over each run: significant and past
    the 10 % threshold, but within the point's noise; 20 % on a tight point is worse (past
    its in-run width and the between-run allowance)."""
    old = {"wide": spread(ROUNDS, 0.15, 1), "tight": spread(ROUNDS, 0.01, 2)}
    new = {"wide": 1.12 * spread(ROUNDS, 0.15, 3), "tight": 1.2 * spread(ROUNDS, 0.01, 4)}
    a = write_set(tmp_path / "a", rows(old, commit="aaaa11112222", run="a"))
    b = write_set(tmp_path / "b", rows(new, commit="bbbb11112222", run="b"))
    code, out, err = run(a, b)
    assert code == 1, err  # the tight point got worse
    found = parsed(out)
    wide, tight = found[("wide", "elapsed_s")], found[("tight", "elapsed_s")]
    assert float(wide["ratio"]) == pytest.approx(1.12, abs=0.02)
    assert wide["verdict"] == "worse, within the noise"
    # the central 80 % of ±15 % spans 0.88 to 1.12 (×1.27)
    assert 25 < float(wide["noise"]) < 30 and wide["source"] == "rounds"
    assert tight["verdict"] == "worse" and float(tight["noise"]) < 2
    assert found[("wide", "throughput_rows_s")]["verdict"] == "worse, within the noise"
    assert out[-1].startswith("2 point(s) compared (4 metrics): 2 worse, 0 better")
    assert "2 within the noise" in out[-1]
    # the rule is the test's verdict as well: the wide point's change is significant
    result = cmp.compare(a, b)
    change = next(c for s, p, c in result.changes() if p.point == "wide")
    assert change.test.significant(0.05) and change.test.p < 0.001
    # without the noise floor (multiplier 0) both are worse, as before
    code, out, _ = run(a, b, "--noise-multiplier", "0")
    assert parsed(out)[("wide", "elapsed_s")]["verdict"] == "worse"


def test_the_html_prints_the_noise_floor_beside_the_ratio(tmp_path, run):
    old = {"wide": spread(ROUNDS, 0.15, 1)}
    new = {"wide": 1.12 * spread(ROUNDS, 0.15, 3)}
    a = write_set(tmp_path / "a", rows(old, commit="aaaa11112222", run="a"))
    b = write_set(tmp_path / "b", rows(new, commit="bbbb11112222", run="b"))
    code, out, _ = run(a, b, "--html", str(tmp_path / "c.html"))
    assert code == 0
    page = (tmp_path / "c.html").read_text()
    head = re.search(r"<thead>(.*?)</thead>", page).group(1)
    assert re.search(r"interval</th><th>noise floor</th>", head)
    line = parsed(out)[("wide", "elapsed_s")]
    assert f"±{line['noise']} % (rounds) + {line['excess']} % between runs (default)</td>" in page
    assert "worse, within the noise" in page


def test_rows_without_round_fall_back_to_the_repetitions_spread_and_say_so(tmp_path, run):
    old = {"p": spread(10, 0.01, 1)}
    new = {"p": 1.2 * spread(10, 0.01, 2)}
    a = write_set(tmp_path / "a", rows(old, rounds=False, commit="aaaa11112222", run="a"))
    b = write_set(tmp_path / "b", rows(new, commit="bbbb11112222", run="b"))
    code, out, err = run(a, b, "--html", str(tmp_path / "c.html"))
    assert code == 1
    assert parsed(out)[("p", "elapsed_s")]["source"] == "repetitions"
    assert any("spread of the repetitions, which hides drift" in line for line in err)
    assert "spread of the repetitions, which hides drift" in (tmp_path / "c.html").read_text()


# -- the A/A floor ------------------------------------------------------------------------------


def test_the_aa_floor_is_recorded_read_and_changes_a_verdict(tmp_path, run):
    """Two runs of one commit on one host differ by 20 % at a tight point: that is recorded;
    a later commit 17 % slower there is then within the noise, and worse without the floor
    (past the in-run width and the default between-run allowance)."""
    tight = {"p": spread(10, 0.01, 1), "q": spread(10, 0.01, 9)}
    a1 = write_set(tmp_path / "a1", rows(tight, run="a1"))
    a2 = write_set(
        tmp_path / "a2", rows({"p": 1.2 * spread(10, 0.01, 2), "q": tight["q"]}, run="a2")
    )
    code, out, err = run(a1, a2)
    assert code == 1  # nothing known yet: the A/A difference itself is flagged
    floor_file = a2 / noise.FLOOR_NAME
    assert f"tunelab compare: 4 A/A observation(s) of commit c0ffee123456 recorded in " \
        f"{floor_file}" in err  # fmt: skip
    data = json.loads(floor_file.read_text())
    kept = data["hosts"]["lab1"]["sqlite/cmp/p"]["elapsed_s"]
    assert len(kept) == 1 and kept[0]["commit"] == "c0ffee123456"
    assert kept[0]["abs_log_ratio"] == pytest.approx(math.log(1.2), abs=0.01)
    assert kept[0]["rows"] == "rounds" and kept[0]["n"] == [10, 10]

    # the same pair again adds nothing
    run(a1, a2)
    again = json.loads(floor_file.read_text())["hosts"]["lab1"]["sqlite/cmp/p"]["elapsed_s"]
    assert again == kept

    later = {"p": 1.17 * 1.2 * spread(10, 0.01, 3), "q": tight["q"]}
    b = write_set(tmp_path / "b", rows(later, commit="beef00001111", run="b"))
    code, out, err = run(a2, b)
    assert code == 0, out
    line = parsed(out)[("p", "elapsed_s")]
    assert line["verdict"] == "worse, within the noise"
    assert (line["aa"], line["aa_n"]) == ("20", "1")
    assert not any("recorded" in e for e in err)  # two commits: no A/A observation
    # the floor travelled: b's results directory now carries a2's observations
    assert json.loads((b / noise.FLOOR_NAME).read_text())["hosts"] == data["hosts"]

    code, out, _ = run(a2, b, "--noise-floor", str(tmp_path / "none.json"))
    assert code == 1 and parsed(out)[("p", "elapsed_s")]["verdict"] == "worse"
    assert parsed(out)[("p", "elapsed_s")]["aa"] is None


def test_a_run_compared_with_a_copy_of_itself_records_nothing(tmp_path, run):
    a = write_set(tmp_path / "a", rows({"p": spread(8, 0.02, 1)}))
    b = write_set(tmp_path / "b", rows({"p": spread(8, 0.02, 1)}))
    code, out, err = run(a, b)
    assert code == 0 and not (b / noise.FLOOR_NAME).exists()


@pytest.mark.parametrize("commit", ["c0ffee123456-dirty", "unknown"])
def test_a_dirty_or_unknown_commit_records_nothing(tmp_path, run, commit):
    a = write_set(tmp_path / "a", rows({"p": spread(8, 0.02, 1)}, commit=commit, run="a"))
    b = write_set(tmp_path / "b", rows({"p": spread(8, 0.02, 2)}, commit=commit, run="b"))
    code, _, err = run(a, b)
    assert code == 0 and not (b / noise.FLOOR_NAME).exists(), err


def test_the_floor_keeps_the_last_observations(tmp_path):
    floor = noise.FloorFile(tmp_path / "f.json")
    for i in range(noise.KEEP + 3):
        when = pd.Timestamp("2026-01-01", tz="UTC") + pd.Timedelta(hours=i)
        obs = noise.observation(
            1 + (i + 1) / 100, "c", (f"r{i}", f"r{i + 1}"), (6, 6), noise.ROUNDS, "a", "b",
            when.to_pydatetime(),
        )  # fmt: skip
        floor.add("h", "sqlite/s/p", "elapsed_s", obs)
    floor.save()
    back = noise.load(tmp_path / "f.json")
    kept = back.observations("h", "sqlite/s/p", "elapsed_s")
    assert [o["runs"][0] for o in kept] == [f"r{i}" for i in range(3, noise.KEEP + 3)]
    value, count = back.floor("h", "sqlite/s/p", "elapsed_s")
    assert count == noise.KEEP and value == pytest.approx(math.log(1 + (noise.KEEP + 3) / 100))
    assert back.floor("other-host", "sqlite/s/p", "elapsed_s") == (pytest.approx(math.nan,
           nan_ok=True), 0)  # fmt: skip


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not readable JSON"),
        ('{"format": 2, "hosts": {}}', "format: must be 1, not 2"),
        ('{"format": 1, "hosts": []}', "hosts: must be a mapping of host names"),
        (
            '{"format": 1, "hosts": {"h": {"sqlite/s/p": {"elapsed_s": [{"abs_log_ratio": -1,'
            ' "runs": ["a", "b"], "recorded": "x"}]}}}}',
            'hosts["h"]["sqlite/s/p"]["elapsed_s"][0].abs_log_ratio: must be finite and >= 0',
        ),
        (
            '{"format": 1, "hosts": {"h": {"sqlite/s/p": {"elapsed_s": [{"abs_log_ratio": 0.1,'
            ' "in_run": "wide", "runs": ["a", "b"], "recorded": "x"}]}}}}',
            'hosts["h"]["sqlite/s/p"]["elapsed_s"][0].in_run: must be a number >= 0',
        ),
        (
            '{"format": 1, "hosts": {"h": {"sqlite/s/p": {"elapsed_s": [{"abs_log_ratio": 0.1,'
            ' "runs": "ab", "recorded": "x"}]}}}}',
            'hosts["h"]["sqlite/s/p"]["elapsed_s"][0].runs: must be a list of two run names',
        ),
    ],
)
def test_a_bad_floor_file_is_one_line_and_exit_2(tmp_path, run, content, message):
    a = write_set(tmp_path / "a", rows({"p": spread(8, 0.02, 1)}, run="a"))
    b = write_set(tmp_path / "b", rows({"p": spread(8, 0.02, 2)}, run="b"))
    bad = b / noise.FLOOR_NAME
    bad.write_text(content)
    code, out, err = run(a, b)
    assert (code, out) == (2, []) and len(err) == 1
    assert err[0].startswith(f"{bad}: {message}"), err
    assert bad.read_text() == content  # left as it was


def test_a_bad_noise_multiplier_is_one_line_and_exit_2(tmp_path, run):
    a = write_set(tmp_path / "a", rows({"p": spread(8, 0.02, 1)}, run="a"))
    code, out, err = run(a, a, "--noise-multiplier", "-1")
    assert code == 2 and out == [] and len(err) == 1 and "--noise-multiplier" in err[0]


def test_an_unwritable_floor_is_a_warning_not_a_failure(tmp_path, run):
    a = write_set(tmp_path / "a", rows({"p": spread(8, 0.02, 1)}, run="a"))
    b = write_set(tmp_path / "b", rows({"p": spread(8, 0.02, 2)}, run="b"))
    blocked = tmp_path / "file"
    blocked.write_text("")
    code, out, err = run(a, b, "--noise-floor", str(blocked / "floor.json"))
    assert code == 0 and out[-1].startswith("1 point(s) compared")
    assert any(line.endswith("(A/A noise floor not saved)") for line in err), err


# -- A/A: two runs of one drifting host ----------------------------------------------------------

POINTS = 24


def drifting_run(seed: int, rounds: bool) -> pd.DataFrame:
    """One run of a 24-point sweep, 8 repetitions a point, on a host whose speed drifts over
    the run (a linear drift of random slope, sd 30 % over the run, and a jitter of 4 % per
    step, shared by every point) with 1 % noise of each value's own. In rounds, repetition r
    of every point is measured at step r; back to back, a point's repetitions are measured in a
    row, so each point sees a different moment of the drift."""
    rng = np.random.default_rng(seed)
    reps = 8
    steps = reps if rounds else POINTS * reps
    host = np.exp(rng.normal(0, 0.3) * np.linspace(-0.5, 0.5, steps))
    host *= np.exp(rng.normal(0, 0.04, steps))
    points = {}
    for p in range(POINTS):
        when = np.arange(reps) if rounds else p * reps + np.arange(reps)
        points[f"p{p:02}"] = 0.01 * (p + 1) * host[when] * np.exp(rng.normal(0, 0.01, reps))
    return rows(points, rounds=rounds, run=f"s{seed}")


def test_aa_runs_of_one_drifting_host_flag_nothing_when_measured_in_rounds(tmp_path):
    """Five A/A pairs drawn from one process: in rounds nothing is flagged; the same host
    measured back to back (each point at one moment of the drift) gets points flagged, which
    is what the rounds are for."""
    flagged = {True: 0, False: 0}
    for rounds in (True, False):
        for k in range(5):
            a = write_set(tmp_path / f"{rounds}{k}a", drifting_run(2 * k, rounds))
            b = write_set(tmp_path / f"{rounds}{k}b", drifting_run(2 * k + 1, rounds))
            result = cmp.compare(a, b, resamples=500)
            assert len(result.points()) == POINTS
            flagged[rounds] += result.count(cmp.WORSE, cmp.BETTER)
    assert flagged[True] == 0
    assert flagged[False] > 0


# -- the host's CPU speed ---------------------------------------------------------------------


def with_cpu(frame: pd.DataFrame, probe_s: float, cpu_share: float) -> pd.DataFrame:
    """The rows of an engine in the measuring process, each with the CPU reference timed around
    it (``probe_s``) and ``cpu_share`` of its time spent on the CPU."""
    return frame.assign(
        cpus_engine="client", noise_cpu_probe_s=probe_s,
        noise_client_cpu_s=cpu_share * frame["elapsed_s"],
    )  # fmt: skip


def test_a_change_no_larger_than_the_host_s_cpu_slowdown_is_noise(tmp_path, run):
    """NEW measured while the CPU reference ran 1.4x slower and the point's CPU-bound time
    rose 1.5x (more than the reference says, as seen on a shared host): within the noise,
    with the CPU term printed. The same rise with the reference unchanged is worse."""
    old = {"p": spread(ROUNDS, 0.02, 1)}
    new = {"p": 1.5 * spread(ROUNDS, 0.02, 2)}
    base = with_cpu(rows(old, commit="aaaa11112222", run="a"), 0.002, 0.9)
    a = write_set(tmp_path / "a", base)
    slow = write_set(
        tmp_path / "slow", with_cpu(rows(new, commit="bbbb1111", run="b"), 0.0028, 0.9)
    )
    same = write_set(tmp_path / "same", with_cpu(rows(new, commit="cccc1111", run="c"), 0.002, 0.9))
    code, out, _ = run(a, slow)
    line = next(x for x in out if x.startswith("sqlite/cmp p: elapsed_s"))
    assert line.endswith("worse, within the noise") and code == 0, line
    shown = float(re.search(r"\+ ([\d.]+) % CPU speed", line)[1])
    assert shown == pytest.approx(100 * (1.4**0.9 - 1), abs=1.5)  # the model's slowdown
    code, out, _ = run(a, same)
    line = next(x for x in out if x.startswith("sqlite/cmp p: elapsed_s"))
    assert line.endswith(": worse") and "CPU speed:" not in line and code == 1, line
