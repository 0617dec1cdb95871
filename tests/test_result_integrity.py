"""Results are verified: every point file has a check file written after it, `tunelab merge`
refuses a point file that fails verification, names it and sets it aside, and the next run
measures exactly that point again. Real SQLite measurements throughout."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import workflow_failure
from tunelab import cli
from tunelab.measure import runner
from tunelab.store import results
from tunelab.sweep import spec

SWEEP = """\
name: {name}
description: three pool sizes, a scan and a multipoint query, warm
engines: [sqlite]
dataset: {{rows: 2000, seed: 31}}
knobs:
  buffer_pool: [10, 100, 1000]
workloads:
  - type: scan
  - type: multipoint
    queries: 2
cache: warm
repetitions: 3
"""
REPS = 3
SUFFIX = "; it will be measured again on the next run"


def _cut(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _change_one_value(data: bytes) -> bytes:
    """The same file with one digit of the second row's elapsed_s changed: same size, same
    row count, a different measurement."""
    text = data.decode()
    lines = text.split("\n")
    header = next(csv.reader([lines[0]]))
    value = next(csv.reader([lines[2]]))[header.index("elapsed_s")]
    at = max(i for i, ch in enumerate(value) if ch.isdigit())
    changed = value[:at] + ("1" if value[at] != "1" else "2") + value[at + 1 :]
    lines[2] = lines[2].replace(f",{value},", f",{changed},", 1)
    out = "\n".join(lines).encode()
    assert len(out) == len(data) and out != data
    return out


# -- the verification function, on points measured for real -------------------------------


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> list[Path]:
    """Three real SQLite points (two scans, one multipoint) with their check files."""
    root = tmp_path_factory.mktemp("measured")
    path = root / "sweep.yaml"
    path.write_text(SWEEP.format(name="unit"))
    points, errors = spec.expand(path)
    assert not errors
    chosen = [p for p in points if p.workload.type == "scan"][:2]
    chosen += [p for p in points if p.workload.type == "multipoint"][:1]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TUNELAB_LOCK_DIR", str(root / "lock"))
        mp.delenv("TUNELAB_JOB_LOG", raising=False)
        return [
            runner.run_point(p, root / "points" / f"{p.point_id}.csv", root / "w", root / "d")
            for p in chosen
        ]


@pytest.fixture
def points(measured, tmp_path) -> list[Path]:
    """A fresh copy of the measured points (and check files) for one test."""
    out = []
    for src in measured:
        for f in (src, results.check_path(src)):
            shutil.copy2(f, tmp_path / f.name)
        out.append(tmp_path / src.name)
    return out


def _problem(path: Path) -> str | None:
    return results.verify_point(path).problem


def _forge(path: Path, data: bytes, record: dict, **changes) -> None:
    """Write ``data`` as the point file with a check file (``record`` with ``changes``) that
    vouches for it, as a faulty writer would, so the checks after the checksum are reached."""
    record = {**record, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), **changes}
    path.write_bytes(data)
    results.check_path(path).write_text(json.dumps(record))


def test_a_measured_point_has_a_check_file_that_vouches_for_it(points):
    for p in points:
        record = json.loads(results.check_path(p).read_text())
        data = p.read_bytes()
        frame = results.read_csv(p)  # the lab's reader: text provenance as text
        assert record["sha256"] == hashlib.sha256(data).hexdigest()
        assert record["bytes"] == len(data)
        assert record["rows"] == record["repetitions"] == REPS == len(frame)
        assert record["columns"] == list(frame.columns)
        assert record["point_id"] == p.stem == frame["point_id"].iloc[0]
        checked = results.verify_point(p)
        assert checked.problem is None and checked.frame.equals(frame)
    assert all(c.problem is None for c in results.verify_points(points))


@pytest.mark.parametrize(
    "damage, expected",
    [
        (_cut, "truncated: {half} of {size} bytes"),
        (lambda d: d[:40], "truncated: 40 of {size} bytes"),  # inside the header
        (lambda d: b"", "truncated: 0 of {size} bytes"),
        (lambda d: d + b"x,y\n", "{more} bytes, {size} were written"),
        (_change_one_value, "changed after it was written"),
    ],
    ids=["half", "header", "empty", "longer", "one-value"],
)
def test_a_damaged_point_file_is_caught_by_its_check_file(points, damage, expected):
    p = points[0]
    data = p.read_bytes()
    p.write_bytes(damage(data))
    want = expected.format(half=len(data) // 2, size=len(data), more=len(data) + 4)
    assert want in _problem(p)


def test_a_point_file_without_its_check_file_was_never_verified(points):
    results.check_path(points[0]).unlink()
    assert _problem(points[0]).startswith(f"no check file {points[0].stem}.check.json")
    results.check_path(points[1]).write_text("{not json")
    assert "check file" in _problem(points[1]) and "cannot be read" in _problem(points[1])
    points[2].unlink()
    assert _problem(points[2]) == "missing"


def test_what_the_check_file_vouches_for_is_checked_too(points):
    p = points[0]
    text = p.read_text()
    frame = pd.read_csv(p)
    record = json.loads(results.check_path(p).read_text())

    _forge(p, b'sweep,rep\nx,"unterminated\n', record)
    assert _problem(p).startswith("cannot be parsed")

    _forge(p, text.encode(), record, columns=[*frame.columns, "extra"])
    assert _problem(p) == "columns differ from its check file's: missing extra"

    _forge(p, text.encode(), record, rows=REPS, repetitions=REPS + 1)
    assert _problem(p).startswith(f"{REPS} rows, expected {REPS + 1}")

    renumbered = frame.assign(rep=[1, 2, 3]).to_csv(index=False, lineterminator="\n").encode()
    _forge(p, renumbered, record)
    assert _problem(p) == "repetitions (rep) are 1, 2, 3; expected 0..2 in order"

    twice = frame.assign(rep=[0, 0, 1]).to_csv(index=False, lineterminator="\n").encode()
    _forge(p, twice, record)
    assert _problem(p) == "repetitions (rep) are 0, 0, 1; expected 0..2 in order"

    dropped = frame.drop(columns=["elapsed_s"])
    _forge(
        p,
        dropped.to_csv(index=False, lineterminator="\n").encode(),
        record,
        columns=list(dropped.columns),
    )
    assert _problem(p) == "required column(s) missing: elapsed_s"

    other = frame.assign(point_id="another").to_csv(index=False, lineterminator="\n")
    _forge(p, other.encode(), record)
    assert _problem(p) == f"rows are of point another, its check file says {p.stem}"


def test_points_of_one_workload_must_share_their_columns(points, tmp_path):
    scan_a, scan_b, multipoint = points
    # a third scan point, written by a writer that added a column: the odd one out
    odd = tmp_path / "odd" / "buffer_pool-1000_scan_warm_odd.csv"
    frame = pd.read_csv(scan_a).assign(point_id=odd.stem, added=1.0)
    results.write_point(frame.to_dict("records"), odd, REPS)
    checked = {c.path: c.problem for c in results.verify_points([scan_a, scan_b, multipoint, odd])}
    assert checked[odd] == "columns differ from the sweep's other scan points: extra added"
    assert checked[scan_a] is checked[scan_b] is checked[multipoint] is None  # other workload

    # two scan points, two column sets: neither is the usual one
    checked = {c.path: c.problem for c in results.verify_points([scan_a, odd])}
    assert all("no column set is shared by most" in checked[p] for p in (scan_a, odd))

    # a point measured by a newer lab, beside points of an older one: the columns a newer lab
    # adds (results.ADDED_COLUMNS) do not make it the odd one out, so the sweep merges
    newer = tmp_path / "newer" / "buffer_pool-1000_scan_warm_new.csv"
    added = {c: "x" for c in results.ADDED_COLUMNS}
    frame = pd.read_csv(scan_a).assign(point_id=newer.stem, **added)
    results.write_point(frame.to_dict("records"), newer, REPS)
    checked = {c.path: c.problem for c in results.verify_points([scan_a, scan_b, newer])}
    assert set(checked.values()) == {None}

    # the same point twice
    copy = tmp_path / "copy" / scan_a.name
    copy.parent.mkdir()
    shutil.copy2(scan_a, copy)
    shutil.copy2(results.check_path(scan_a), results.check_path(copy))
    checked = {c.path: c.problem for c in results.verify_points([scan_a, copy])}
    assert checked[scan_a] is None and checked[copy] == f"point {scan_a.stem} is in {scan_a} too"


def test_a_file_set_aside_is_kept_and_never_overwritten(points):
    p = points[0]
    data, check = p.read_bytes(), results.check_path(p).read_bytes()
    assert [m.name for m in results.set_aside(p)] == [
        f"{p.name}.rejected",
        f"{p.stem}.check.json.rejected",
    ]
    assert not p.exists() and not results.check_path(p).exists()
    p.write_bytes(b"second")
    assert [m.name for m in results.set_aside(p)] == [f"{p.name}.rejected.2"]
    assert Path(f"{p}.rejected").read_bytes() == data
    assert Path(f"{results.check_path(p)}.rejected").read_bytes() == check
    assert Path(f"{p}.rejected.2").read_bytes() == b"second"


def test_writing_a_point_sets_an_unverified_file_aside_but_never_a_verified_one(points):
    p = points[0]
    rows = pd.read_csv(p).to_dict("records")
    with pytest.raises(results.ResultExistsError, match="results exist already"):
        results.write_point(rows, p, REPS)
    results.check_path(p).unlink()  # e.g. killed between the CSV and its check file
    old = p.read_bytes()
    results.write_point(rows, p, REPS)
    assert Path(f"{p}.rejected").read_bytes() == old
    assert _problem(p) is None


# -- `tunelab merge` -----------------------------------------------------------------------


def _merge(points: list[Path], out: Path, capsys) -> tuple[int, str]:
    code = cli.main(["merge", *map(str, points), "--out", str(out)])
    return code, capsys.readouterr().err


def test_merge_refuses_bad_points_names_each_and_writes_nothing(
    points, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("TUNELAB_LOCK_DIR", str(tmp_path / "lock"))
    monkeypatch.delenv("TUNELAB_JOB_LOG", raising=False)
    good, empty, cut = points
    sizes = {p: p.stat().st_size for p in points}
    empty.write_bytes(b"")
    cut.write_bytes(cut.read_bytes()[:30])  # inside the header
    stamp = good.stat().st_mtime_ns
    out = tmp_path / "merged.csv"
    code, err = _merge(points, out, capsys)
    assert code == 1
    lines = err.strip().splitlines()
    assert lines[:2] == [
        f"{empty}: truncated: 0 of {sizes[empty]} bytes{SUFFIX} (kept as {empty.name}.rejected)",
        f"{cut}: truncated: 30 of {sizes[cut]} bytes{SUFFIX} (kept as {cut.name}.rejected)",
    ]
    assert lines[2] == f"{out}: not written: 2 of 3 point file(s) failed"
    assert "Traceback" not in err and not out.exists()
    for bad in (empty, cut):
        assert not bad.exists() and not results.check_path(bad).exists()
        assert Path(f"{bad}.rejected").exists()
        assert Path(f"{results.check_path(bad)}.rejected").exists()
    assert good.stat().st_mtime_ns == stamp and _problem(good) is None  # nothing valid lost


def test_merge_of_verified_points_has_every_repetition_once(points, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TUNELAB_LOCK_DIR", str(tmp_path / "lock"))
    monkeypatch.delenv("TUNELAB_JOB_LOG", raising=False)
    out = tmp_path / "merged.csv"
    code, err = _merge(points, out, capsys)
    assert code == 0, err
    merged = pd.read_csv(out)
    assert len(merged) == len(points) * REPS
    assert not merged.duplicated(["point_id", "rep"]).any()
    assert merged.groupby("point_id")["rep"].apply(sorted).tolist() == [[0, 1, 2]] * len(points)


# -- through the workflow ------------------------------------------------------------------


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    """A small sweep run through the real workflow: six points, three repetitions each."""
    from test_workflow_e2e import snakemake

    work = tmp_path_factory.mktemp("integrity")
    (work / "sweeps").mkdir()
    (work / "sweeps" / "integrity.yaml").write_text(SWEEP.format(name="integrity"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TUNELAB_LOCK_DIR", str(work / "lock"))
        mp.delenv("TUNELAB_JOB_LOG", raising=False)  # the Snakefile's default, logs/jobs.jsonl
        proc = snakemake(work, "--cores", "2")
        assert proc.returncode == 0, workflow_failure(work, proc)
        yield work


def _points(pack: Path) -> list[Path]:
    return sorted((pack / "results" / "sqlite" / "integrity").glob("*.csv"))


def _merged(pack: Path) -> Path:
    return pack / "results" / "sqlite" / "integrity.csv"


def _report(pack: Path) -> Path:
    return pack / "reports" / "sqlite" / "integrity.html"


def _stamps(pack: Path) -> dict[str, int]:
    return {f.name: f.stat().st_mtime_ns for p in _points(pack) for f in (p, results.check_path(p))}


def _run(pack: Path):
    """One workflow run; returns it and what it measured (from the job log): a sweep is
    measured whole, in rounds, so the target of each measurement is its rounds file."""
    from test_workflow_e2e import snakemake

    log = pack / "logs" / "jobs.jsonl"
    seen = len(log.read_text().splitlines())
    proc = snakemake(pack, "--cores", "2")
    spans = [json.loads(line) for line in log.read_text().splitlines()[seen:]]
    measured = sorted(
        Path(s["job"].split()[1]).name for s in spans if s["job"].startswith("run-sweep")
    )
    return proc, measured


def _assert_complete(pack: Path) -> None:
    merged = pd.read_csv(_merged(pack))
    ids = sorted(p.stem for p in _points(pack))
    assert len(ids) == 6 and sorted(merged["point_id"].unique()) == ids
    assert len(merged) == 6 * REPS and not merged.duplicated(["point_id", "rep"]).any()
    assert all(sorted(r) == [0, 1, 2] for r in merged.groupby("point_id")["rep"].apply(list))
    assert all(results.verify_point(p).problem is None for p in _points(pack))


def _refused_then_measured_again(pack: Path, index: int, damage, problem: str) -> None:
    """Damage one point file: the next run's merge refuses it, naming it, and exits 1; the
    run after measures its sweep again (every point, in rounds: their rows stay paired) and
    merges every point."""
    point = _points(pack)[index]
    rel = point.relative_to(pack)
    data = point.read_bytes()
    point.write_bytes(damage(data))
    others = {k: v for k, v in _stamps(pack).items() if not k.startswith(point.stem)}

    proc, measured = _run(pack)
    assert proc.returncode != 0 and measured == []
    log = (pack / "logs" / "sqlite" / "integrity.merge.log").read_text()
    assert f"{rel}: {problem}{SUFFIX} (kept as {point.name}.rejected)" in log
    assert "Traceback" not in log
    assert not _merged(pack).exists()
    assert Path(f"{point}.rejected").read_bytes() == damage(data)  # kept for inspection

    proc, measured = _run(pack)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert measured == ["rounds.csv.gz"]
    assert point.read_bytes() != data  # a new measurement
    stamps = _stamps(pack)
    assert all(stamps[k] != v for k, v in others.items())  # the whole sweep, measured anew
    _assert_complete(pack)
    for f in point.parent.glob("*.rejected"):  # leave the pack as a later test expects it
        f.unlink()


@pytest.mark.slow
def test_a_point_cut_to_half_is_refused_then_measured_again(pack):
    size = _points(pack)[0].stat().st_size
    _refused_then_measured_again(pack, 0, _cut, f"truncated: {size // 2} of {size} bytes")


@pytest.mark.slow
def test_a_point_cut_inside_its_header_is_refused_then_measured_again(pack):
    size = _points(pack)[1].stat().st_size
    _refused_then_measured_again(pack, 1, lambda d: d[:25], f"truncated: 25 of {size} bytes")


@pytest.mark.slow
def test_an_empty_point_file_is_refused_then_measured_again(pack):
    size = _points(pack)[2].stat().st_size
    _refused_then_measured_again(pack, 2, lambda d: b"", f"truncated: 0 of {size} bytes")


@pytest.mark.slow
def test_a_changed_value_is_refused_then_measured_again(pack):
    problem = "changed after it was written: its sha256 differs from its check file's"
    _refused_then_measured_again(pack, 3, _change_one_value, problem)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["point file", "check file"])
def test_a_deleted_point_file_is_measured_again_and_its_report_rendered(pack, which):
    point = _points(pack)[4]
    others = {k: v for k, v in _stamps(pack).items() if not k.startswith(point.stem)}
    report = _report(pack).stat().st_mtime_ns
    (point if which == "point file" else results.check_path(point)).unlink()

    proc, measured = _run(pack)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nothing to be done" not in proc.stdout + proc.stderr
    assert measured == ["rounds.csv.gz"]  # its sweep, whole
    stamps = _stamps(pack)
    assert all(stamps[k] != v for k, v in others.items())
    assert _report(pack).stat().st_mtime_ns > report
    _assert_complete(pack)
    assert not list(point.parent.glob("*.rejected"))


@pytest.mark.slow
def test_a_verified_pack_is_left_alone_on_the_next_run(pack):
    stamps, merged = _stamps(pack), _merged(pack).stat().st_mtime_ns
    proc, measured = _run(pack)
    assert proc.returncode == 0 and measured == []
    assert _stamps(pack) == stamps and _merged(pack).stat().st_mtime_ns == merged
    assert "Nothing to be done" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_point_added_to_the_sweep_is_measured_and_merged(pack):
    sweep = pack / "sweeps" / "integrity.yaml"
    text = sweep.read_text()
    stamps = _stamps(pack)
    sweep.write_text(text.replace("[10, 100, 1000]", "[10, 100, 1000, 50]"))
    try:
        proc, measured = _run(pack)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert measured == ["rounds.csv.gz"]  # the sweep again: every point in rounds
        assert sum(k.startswith("buffer_pool-50_") for k in _stamps(pack)) == 4  # 2 + checks
        assert all(_stamps(pack)[k] != v for k, v in stamps.items())
        merged = pd.read_csv(_merged(pack))
        assert merged["point_id"].nunique() == 8 and len(merged) == 8 * REPS
    finally:  # leave the pack as it was for any later test
        sweep.write_text(text)
        for p in _points(pack):
            if p.stem.startswith("buffer_pool-50_"):
                p.unlink()
                results.check_path(p).unlink()
