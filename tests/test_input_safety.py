"""Sweep files and their names never run code, and bad input is refused at once: one line,
exit code 2. Real runs of `tunelab validate`, the workflow and `./lab run`."""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, workflow_failure
from tunelab.host import yamlfile
from tunelab.run import pipeline
from tunelab.sweep import spec

# Shell commands hidden in file names; each would leave a file of this name where it ran.
MARKERS = ("pwned-semi", "pwned-pipe", "pwned-subst", "pwned-tick")
NAMES = (
    "with space café ñ.yaml",
    """it's "quoted" x;touch pwned-semi;.yaml""",
    "x||touch pwned-pipe||.yaml",
    "$(touch pwned-subst) `touch pwned-tick`.yaml",
)

TINY = """\
name: {name}
description: one point, one repetition
engines: [sqlite]
dataset: {{rows: 200, seed: 5}}
knobs:
  buffer_pool: [10]
workloads:
  - type: scan
cache: cold
repetitions: 1
"""


def write_pack(sweeps: Path) -> list[Path]:
    sweeps.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, name in enumerate(NAMES):
        path = sweeps / name
        path.write_text(TINY.format(name=f"odd-{i}"))
        paths.append(path)
    return paths


def injected(*dirs: Path) -> list[Path]:
    found = [p for d in dirs for p in d.rglob("*") if p.name in MARKERS]
    return found + [d / m for d in (REPO, Path.cwd()) for m in MARKERS if (d / m).exists()]


def validate(*args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """`tunelab validate ARGS` in a child held to 1 GiB of address space (a bomb that got
    through would fail, not swap), and its wall time."""

    def bounded() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tunelab.cli", "validate", *args],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=bounded,
        env={**os.environ, **(env or {})},
    )
    return proc, time.monotonic() - start


def one_line(proc: subprocess.CompletedProcess, path: Path) -> str:
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith(f"{path}: ") and "Traceback" not in proc.stderr
    return lines[0]


# Bad input, each refused in one line within a second or so.


def alias_bomb() -> str:
    """Nine levels of nine aliases: a list that a plain YAML loader grows into 9**9 items."""
    levels = ["&a [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for prev, name in zip("abcdefgh", "bcdefghi"):
        levels.append(f"&{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "[" + ", ".join(levels) + "]"


def billion_laughs(where: str) -> str:
    """687 bytes of a sweep with an alias bomb at ``where``."""
    bomb = alias_bomb()
    head = "name: lol\ndataset: {rows: 1000}\n"
    if where == "lookups":
        return head + f"workloads:\n  - type: point\n    lookups: {bomb}\n"
    return head + f"knobs:\n  buffer_pool: {bomb}\nworkloads: [{{type: scan}}]\n"


def grid(values: int) -> str:
    listed = ", ".join(str(v) for v in range(1, values + 1))
    return (
        "name: huge\nengines: [sqlite]\ndataset: {rows: 1000}\n"
        f"knobs:\n  buffer_pool: [{listed}]\n"
        f"workloads:\n  - type: point\n    lookups: [{listed}]\ncache: cold\n"
    )


@pytest.mark.parametrize(
    ("where", "field"),
    [("lookups", "workloads[0].lookups"), ("buffer_pool", "knobs.buffer_pool")],
)
def test_an_alias_bomb_is_refused_before_it_grows(tmp_path, where, field):
    path = tmp_path / "lol.yaml"
    path.write_text(billion_laughs(where))
    assert len(path.read_bytes()) < 800
    proc, took = validate(str(path))
    line = one_line(proc, path)
    assert proc.returncode == 2 and took < 2
    assert line.startswith(f"{path}: {field}") and "anchors and aliases are not allowed" in line


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path):
    path = tmp_path / "big.yaml"
    body = "name: big\ndataset: {rows: 1000}\nworkloads: [{type: scan}]\n"
    path.write_text(body + "# padding\n" * (yamlfile.MAX_FILE_BYTES // 10))
    assert path.stat().st_size > yamlfile.MAX_FILE_BYTES
    proc, took = validate(str(path))
    line = one_line(proc, path)
    assert proc.returncode == 2 and took < 2
    assert f"file too large: {path.stat().st_size} bytes (allowed: at most 1 MiB)" in line


def test_a_grid_of_a_million_points_is_refused_before_it_is_expanded(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text(grid(1000))
    proc, took = validate(str(path))
    line = one_line(proc, path)
    assert proc.returncode == 2 and took < 2
    assert "the sweep expands to 1000000 points, more than the limit of 10000" in line
    assert spec.MAX_POINTS_ENV in line


def test_a_file_that_is_not_utf8_names_the_byte(tmp_path):
    path = tmp_path / "latin1.yaml"
    head = b"name: x\ndescription: caf"
    path.write_bytes(head + b"\xe9\ndataset: {rows: 1000}\nworkloads: [{type: scan}]\n")
    proc, took = validate(str(path))
    line = one_line(proc, path)
    assert proc.returncode == 2 and took < 2
    assert line == f"{path}: byte {len(head)}: not UTF-8 text: invalid continuation byte 0xe9"


def test_a_list_longer_than_the_limit_is_refused_before_the_schema_reads_it(tmp_path):
    path = tmp_path / "many.yaml"
    path.write_text("name: x\ndataset: {rows: 1000}\nworkloads:\n" + "  - {type: scan}\n" * 10001)
    proc, took = validate(str(path))
    line = one_line(proc, path)
    assert proc.returncode == 2 and took < 2
    assert line.startswith(f"{path}: workloads: 10001 values: the sweep would expand to more")


def test_a_mixed_list_is_checked_for_repeats_in_linear_time(write_sweep):
    values = ", ".join(["'a'", *map(str, range(9000)), "5"])
    path = write_sweep(
        f"name: x\ndataset: {{rows: 1000}}\nknobs: {{buffer_pool: [{values}]}}\n"
        "workloads: [{type: scan}]\n"
    )
    start = time.monotonic()
    _, errors = spec.expand(path, "sqlite")
    assert time.monotonic() - start < 2
    assert [e.path for e in errors] == ["knobs.buffer_pool"]
    assert str(errors[0]).endswith("is not valid (allowed: a list or null)")
    assert len(str(errors[0])) < 300


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("d: " + "[" * 40 + "]" * 40 + "\n", "nested more than 32 levels deep"),
        ("d: " + "9" * 5000 + "\n", "a value cannot be read: Exceeds the limit (4300 digits)"),
        ("description: '\x01'\n", "not valid YAML: character #x0001: control characters"),
        ("a: *nowhere\n", "a: YAML anchors and aliases are not allowed (found *nowhere)"),
    ],
)
def test_other_unreadable_files_get_one_line(write_sweep, body, expected):
    path = write_sweep("name: x\ndataset: {rows: 1000}\nworkloads: [{type: scan}]\n" + body)
    _, errors = spec.expand(path, "sqlite")
    assert len(errors) == 1 and "\n" not in str(errors[0])
    assert expected in str(errors[0])


def test_the_point_limit_is_set_by_the_environment(write_sweep, monkeypatch):
    path = write_sweep(grid(3))  # 9 points
    monkeypatch.setenv(spec.MAX_POINTS_ENV, "8")
    (error,) = spec.expand(path, "sqlite")[1]
    assert str(error) == (
        f"{path}: knobs.buffer_pool: the sweep expands to 9 points, more than the limit of 8"
        f" (allowed: at most 8 points; {spec.MAX_POINTS_ENV} sets the limit)"
    )
    monkeypatch.setenv(spec.MAX_POINTS_ENV, "9")
    assert len(spec.expand(path, "sqlite")[0]) == 9
    assert len(spec.expand(path, "sqlite", point_limit=100)[0]) == 9
    proc, _ = validate(str(path), env={spec.MAX_POINTS_ENV: "lots"})
    assert proc.returncode == 2
    assert one_line(proc, path).endswith("is not a number of points (allowed: an integer >= 1)")


def test_a_path_with_braces_is_refused_since_the_workflow_reads_them_as_wildcards(write_sweep):
    path = write_sweep(TINY.format(name="b"), "{b}.yaml")
    (error,) = spec.expand(path)[1]
    assert str(error).startswith(f"{path}: a sweep file's path may not hold '{{' or '}}'")


# Odd file names: valid, and they run through the real workflow; nothing in them runs.


def test_odd_names_validate_and_nothing_in_them_runs(tmp_path):
    paths = write_pack(tmp_path / "sweeps")
    proc, _ = validate("--engine", "sqlite", "--", *map(str, paths))
    assert proc.returncode == 0, proc.stderr
    assert f"{len(NAMES)} sweep file(s) valid" in proc.stdout
    assert not injected(tmp_path)


def test_a_file_name_with_glob_characters_is_that_file(tmp_path):
    odd = tmp_path / "a[1]*.yaml"
    odd.write_text(TINY.format(name="a"))
    (tmp_path / "a1x.yaml").write_text(TINY.format(name="b"))
    assert pipeline.sweep_files(str(odd)) == [odd]
    assert len(pipeline.sweep_files(str(tmp_path / "*.yaml"))) == 2


@pytest.fixture(scope="module")
def odd_pack(tmp_path_factory):
    from test_workflow_e2e import snakemake

    work = tmp_path_factory.mktemp("odd names")
    write_pack(work / "sweeps")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TUNELAB_LOCK_DIR", str(work / "lock"))
        mp.delenv("TUNELAB_JOB_LOG", raising=False)
        proc = snakemake(work, "--cores", "2")
    assert proc.returncode == 0, workflow_failure(work, proc)
    return work


@pytest.mark.slow
def test_odd_names_run_through_the_whole_workflow(odd_pack):
    import pandas as pd

    for i in range(len(NAMES)):
        rows = pd.read_csv(odd_pack / "results" / "sqlite" / f"odd-{i}.csv")
        assert len(rows) == 1 and rows["sweep"].tolist() == [f"odd-{i}"]
        assert (odd_pack / "reports" / "sqlite" / f"odd-{i}.html").is_file()
    assert not injected(odd_pack)


@pytest.mark.slow
def test_the_workflow_refuses_an_invalid_sweep_set_in_one_line_per_error(tmp_path):
    from test_workflow_e2e import snakemake

    (tmp_path / "sweeps").mkdir()
    bad = tmp_path / "sweeps" / "a;touch pwned-semi;.yaml"
    bad.write_text(grid(1000))
    proc = snakemake(tmp_path, "-n")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith(f"{bad}: knobs.buffer_pool: the sweep expands")
    assert "WorkflowError" not in proc.stderr and "Traceback" not in proc.stderr
    assert not injected(tmp_path)


# ./lab run: the files the run will use are validated before Snakemake starts.


def lab_installed() -> str | None:
    """Why `./lab run` would install something first (then these tests skip), or None."""
    stamp = Path(os.environ.get("TUNELAB_VENV", REPO / ".venv")) / ".tunelab-installed"
    want = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()[:16]
    try:
        digest = stamp.read_text().split()[0]  # then the extras: a SQLite run needs none
    except (OSError, IndexError):
        return f"no lab environment ({stamp})"
    if digest != want:
        return "the lab environment is not installed from this pyproject.toml"
    if not shutil.which("fio"):
        return "fio is missing: ./lab run would install it first"
    return None


def lab(*args: str, work: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TUNELAB_LOCK_DIR": str(work / "lock")}
    env.pop("TUNELAB_JOB_LOG", None)
    return subprocess.run(
        [str(REPO / "lab"), "run", *args], capture_output=True, text=True, timeout=600, env=env
    )


def errors_of(proc: subprocess.CompletedProcess) -> list[str]:
    """stderr without the lab's own progress lines."""
    return [ln for ln in proc.stderr.splitlines() if "[lab]" not in ln]


@pytest.fixture
def lab_ready():
    if reason := lab_installed():
        pytest.skip(reason)


@pytest.mark.parametrize("content", ["bomb", "grid", "latin1"])
def test_lab_run_refuses_a_bad_sweep_in_one_line_before_snakemake_starts(
    tmp_path, lab_ready, content
):
    bad = tmp_path / "sweeps" / "bad;touch pwned-semi;.yaml"
    bad.parent.mkdir()
    if content == "latin1":
        bad.write_bytes(b"name: caf\xe9\n")
    else:
        bad.write_text(billion_laughs("lookups") if content == "bomb" else grid(1000))
    start = time.monotonic()
    proc = lab("--directory", str(tmp_path), "--config", f"sweeps={bad}", work=tmp_path)
    assert proc.returncode == 2
    assert time.monotonic() - start < 60  # the venv is checked, nothing is installed
    (line,) = errors_of(proc)
    assert line.startswith(f"{bad}: ")
    assert not (tmp_path / ".snakemake").exists() and "Building DAG" not in proc.stdout
    assert not injected(tmp_path)


def test_lab_run_validates_the_files_the_config_names_not_the_default_pack(tmp_path, lab_ready):
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "good.yaml").write_text(TINY.format(name="good"))
    bad = tmp_path / "other" / "bad.yaml"
    bad.parent.mkdir()
    bad.write_text(TINY.format(name="bad").replace("[10]", "[0]"))
    args = ("--directory", str(tmp_path), "--config", "calibrate=off")
    proc = lab(*args, "sweeps=[sweeps/good.yaml, other/bad.yaml]", work=tmp_path)
    assert proc.returncode == 2
    (line,) = errors_of(proc)
    assert line.startswith(f"{tmp_path}/other/bad.yaml: knobs.buffer_pool: 0 out of range")
    proc = lab(*args, "sweeps=nothing/*.yaml", work=tmp_path)
    assert proc.returncode == 2
    assert errors_of(proc) == [
        f"config sweeps: no sweep files match 'nothing/*.yaml' under --directory {tmp_path} "
        "(a relative glob is read there)"
    ]
    proc = lab("--no-such-option", work=tmp_path)
    assert proc.returncode == 2
    assert errors_of(proc) == ["snakemake: error: unrecognized arguments: --no-such-option"]


@pytest.mark.slow
def test_lab_run_dry_runs_a_pack_of_odd_names(tmp_path, lab_ready):
    write_pack(tmp_path / "sweeps")
    config = ("--config", "sweeps=sweeps/*.yaml", "calibrate=off")
    proc = lab("-n", "--directory", str(tmp_path), *config, work=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"validating the run's {len(NAMES)} sweep file(s) for engine sqlite" in proc.stderr
    assert f"{len(NAMES)} sweep file(s) valid for sqlite" in proc.stdout
    assert "measure_point" in proc.stdout + proc.stderr
    assert not injected(tmp_path)


def test_the_run_resolves_config_files_directory_and_config_as_snakemake_does(tmp_path):
    (tmp_path / "work" / "sweeps").mkdir(parents=True)
    for name in ("a b.yaml", "c.yaml"):
        (tmp_path / "work" / "sweeps" / name).write_text(TINY.format(name="x"))
    extra = tmp_path / "extra.yaml"
    extra.write_text("engine: db2\nsweeps: [sweeps/c.yaml]\n")
    base = ["--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path / "work")]
    run = pipeline.resolve_run([*base, "--configfile", str(extra)])
    assert (run.engine, run.files) == ("db2", [tmp_path / "work" / "sweeps" / "c.yaml"])
    run = pipeline.resolve_run(
        [*base, "--configfile", str(extra), "--config", "engine=mariadb", "sweeps=sweeps/*.yaml"]
    )
    assert run.engine == "mariadb" and [f.name for f in run.files] == ["a b.yaml", "c.yaml"]
    command = [sys.executable, "-m", "tunelab.run.pipeline", *base]
    # The default glob is read in the run's directory, as the workflow reads it.
    proc = subprocess.run(command, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr == (
        "config sweeps: no sweep files match 'workflows/sweeps/*.yaml' under --directory "
        f"{tmp_path / 'work'} (a relative glob is read there)\n"
    )
    command += ["--config", "sweeps=sweeps/*.yaml"]
    out = subprocess.run(command, capture_output=True, check=True).stdout
    engine, calibration, directory, workdir, size, index, results, logs, *files = out.split(b"\0")[
        :-1
    ]
    assert size == b"quick" and index.endswith(b"/work/reports/index.html")
    assert results.endswith(b"/work/results") and logs.endswith(b"/work/logs")
    assert engine == b"sqlite" and calibration == b""
    assert Path(os.fsdecode(directory)) == tmp_path / "work"
    assert Path(os.fsdecode(workdir)) == tmp_path / "work" / ".tunelab"
    assert [Path(os.fsdecode(f)).name for f in files] == ["a b.yaml", "c.yaml"]
    with pytest.raises(pipeline.RunArgsInvalid, match="config engine: 'oracle' not allowed"):
        pipeline.resolve_run([*base, "--config", "engine=oracle"])


def test_values_reach_the_shell_as_separate_quoted_words():
    assert pipeline.option("--calibration", []) == []
    assert pipeline.option("--calibration", ["a b.json"]) == ["--calibration", "a b.json"]
    assert pipeline.option("--bpsim", "x;y") == ["--bpsim", "x;y"]
    assert pipeline.words("--sizes '1, 2' --policy lru") == ["--sizes", "1, 2", "--policy", "lru"]
