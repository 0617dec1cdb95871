"""A server engine's run killed with SIGKILL while its server runs recovers by itself, and a
second run in a checkout names the first. (SIGKILL at any moment, ten times in a row, and the
other faults: the fault matrix, tests/test_fault_matrix.py.) After the kills the results must
hold exactly the points and repetitions of a clean run (nothing lost, nothing twice), every
point file verified, and nothing left behind: no container, network, engine data, secret,
Snakemake lock or bench-lock holder."""

from __future__ import annotations

import os
import random
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from faults.harness import commands_in, kill_session

from tunelab.host import ownership
from tunelab.store import results

REPO = Path(__file__).resolve().parent.parent

SWEEP = """\
name: {name}
description: killed and rerun
engines: [{engine}]
dataset: {{rows: {rows}, seed: {seed}}}
knobs:
  buffer_pool: {pools}
workloads:
  - type: scan
cache: cold
repetitions: {reps}
"""


def lab_run(work: Path, engine: str) -> subprocess.Popen:
    """`./lab run` on the pack in ``work``, in a session of its own (so every process of the
    run can be killed at once, as a closed terminal or an OOM kill would)."""
    env = {**os.environ, "TUNELAB_LOCK_DIR": str(work / "lock")}
    env.pop("TUNELAB_JOB_LOG", None)
    args = [
        str(REPO / "lab"),
        "run",
        "--directory",
        str(work),
        "--config",
        f"sweeps={work / 'sweeps'}/*.yaml",
        f"engine={engine}",
        "calibrate=off",
    ]
    log = (work / "lab.out").open("ab")
    return subprocess.Popen(
        args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )


# What to wait for before killing, and how long to wait after it appears (seconds).
PHASES = {
    "point": ("tunelab run-sweep", 2.5),  # loading, cold preparation or the timed section
    "merge": ("tunelab merge", 0.3),
    "report": ("tunelab report", 3.0),
    "anytime": (None, 12.0),
}


def kill_at(work: Path, engine: str, phase: str, rng: random.Random) -> str | None:
    """Start a run and SIGKILL all of it once ``phase`` is under way (after a random part of
    its delay). Returns the phase hit, or None when the run ended first."""
    marker, delay = PHASES[phase]
    proc = lab_run(work, engine)
    deadline = time.monotonic() + 300
    while marker and not any(marker in c for c in commands_in(proc.pid)):
        if proc.poll() is not None:
            return None
        assert time.monotonic() < deadline, f"{phase} never started"
        time.sleep(0.02)
    time.sleep(rng.uniform(0, delay))
    if proc.poll() is not None:
        return None
    kill_session(proc)
    return phase


def finish(work: Path, engine: str) -> None:
    proc = lab_run(work, engine)
    assert proc.wait(900) == 0, (work / "lab.out").read_text()[-4000:]


def outcome(work: Path, engine: str) -> dict[str, list[tuple[str, int]]]:
    """Per sweep: the (point, repetition) pairs of the merged results, after checking every
    point file against its check file."""
    found = {}
    for merged in sorted((work / "results" / engine).glob("*.csv")):
        for point in (work / "results" / engine / merged.stem).glob("*.csv"):
            if not point.name.endswith(".partial.csv"):
                assert results.verify_point(point).problem is None, point
        rows = pd.read_csv(merged)
        pairs = list(zip(rows["point_id"], rows["rep"]))
        assert len(pairs) == len(set(pairs)), f"{merged}: a repetition twice"
        found[merged.stem] = sorted(pairs)
    return found


def assert_nothing_left(work: Path) -> None:
    for left in ("runs", "points"):  # engine data and run directories (secrets among them)
        inside = [p for p in (work / ".tunelab" / left).glob("*") if p.name != ownership.STAMP]
        assert not inside, f".tunelab/{left} was left"
    assert not list(work.rglob("secret")), "a secret file was left"
    locks = work / ".snakemake" / "locks"
    assert not (locks.exists() and list(locks.iterdir())), "Snakemake's lock was left"
    for pid in Path("/proc").glob("[0-9]*"):  # no process of the run lives on
        try:
            cmd = (pid / "cmdline").read_bytes()
        except OSError:
            continue
        assert str(work).encode() not in cmd or b"pytest" in cmd, cmd
    from tunelab.host import containers

    if containers.docker_unavailable_reason() is None:
        c = containers.client()
        left = [
            x.name
            for x in c.containers.list(all=True, filters={"label": "tunelab=1"})
            if x.labels.get("tunelab.workdir", "").startswith(str(work))
        ]
        assert not left, f"containers left: {left}"
        nets = [
            n.name
            for n in c.networks.list(filters={"label": "tunelab=1"})
            if any(x.labels.get("tunelab.workdir", "").startswith(str(work)) for x in n.containers)
        ]
        assert not nets, f"networks left: {nets}"


def lab_ready() -> None:
    from test_input_safety import lab_installed

    if reason := lab_installed():
        pytest.skip(reason)


def pack(work: Path, engine: str, sweeps: list[dict]) -> Path:
    (work / "sweeps").mkdir(parents=True)
    for s in sweeps:
        (work / "sweeps" / f"{s['name']}.yaml").write_text(SWEEP.format(engine=engine, **s))
    return work


# Large enough that the first run is still measuring when the second starts.
SQLITE_PACK = [
    {"name": "killed-a", "rows": 200000, "seed": 3, "pools": "[10, 100, 1000, 4000]", "reps": 4},
]


@pytest.mark.slow
@pytest.mark.docker
def test_a_mariadb_run_killed_while_its_server_runs_leaves_nothing(tmp_path, image):
    lab_ready()
    sweeps = [
        {"name": "killed-m", "rows": 20000, "seed": 5, "pools": '["6MiB", "16MiB"]', "reps": 2}
    ]
    clean = pack(tmp_path / "clean", "mariadb", sweeps)
    finish(clean, "mariadb")
    killed = pack(tmp_path / "killed", "mariadb", sweeps)
    rng = random.Random(7)
    hit = [kill_at(killed, "mariadb", p, rng) for p in ("point", "point", "merge", "point")]
    assert hit.count("point") >= 2, hit
    finish(killed, "mariadb")
    assert outcome(killed, "mariadb") == outcome(clean, "mariadb")
    assert_nothing_left(killed)


@pytest.mark.slow
def test_a_second_run_in_the_same_checkout_names_the_first_in_one_line(tmp_path):
    """Two `./lab run` at once in one checkout: the second stops before measuring, with one
    line naming the first (its pid, when it started), never advice to --unlock a live run;
    the first finishes as if alone."""
    lab_ready()
    work = pack(tmp_path / "w", "sqlite", SQLITE_PACK)
    first = lab_run(work, "sqlite")
    try:
        deadline = time.monotonic() + 300
        while not any("tunelab run-sweep" in c for c in commands_in(first.pid)):
            assert first.poll() is None, (work / "lab.out").read_text()[-3000:]
            assert time.monotonic() < deadline, "the first run never measured"
            time.sleep(0.05)
        env = {**os.environ, "TUNELAB_LOCK_DIR": str(work / "lock")}
        second = subprocess.run(
            [
                str(REPO / "lab"),
                "run",
                "--directory",
                str(work),
                "--config",
                f"sweeps={work / 'sweeps'}/*.yaml",
                "engine=sqlite",
                "calibrate=off",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        said = [x for x in second.stderr.splitlines() if "in progress" in x]
        assert second.returncode == 1, second.stderr[-3000:]
        assert len(said) == 1 and "another run is in progress in this checkout (pid " in said[0]
        assert "started 20" in said[0]
        assert "unlock" not in second.stderr + second.stdout
        assert first.wait(600) == 0, (work / "lab.out").read_text()[-3000:]
    finally:
        kill_session(first) if first.poll() is None else None
    assert_nothing_left(work)
