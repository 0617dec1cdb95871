"""The fault matrix: the real `./lab run` broken at random moments in every way a user, a CI
runner or a host breaks it, each fault followed by one plain rerun that must heal it
(tests/faults/harness.py says what "healed" checks).

TUNELAB_FAULT_MATRIX picks the part that runs:
- ``quick`` (the default, in every ``./lab test``): SQLite, every fault kind, one seed each,
  the kills ten in a row on one checkout (in every phase of a run);
- ``full``: that, and on SQLite, MariaDB and PostgreSQL ten cells of a SIGKILL at a random
  moment and three of each stop signal per engine, and the server engines' own faults (a
  container killed from outside, the Docker daemon restarted); run it for a change to
  running or recovery;
- ``off``: none.

Each cell prints one line (``fault-matrix: ENGINE KIND seed N: ... healed in S s``), so
`pytest -s` shows the figures. The faults' moments are drawn over the whole of a clean run's
duration (measured first, per engine): data generation, table build, a timed section, a
merge, a report.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from faults import harness
from faults.harness import Lab

from tunelab.host import ownership
from tunelab.store import results
from tunelab.sweep import spec

MODE = os.environ.get("TUNELAB_FAULT_MATRIX", "quick")
if MODE not in ("quick", "full", "off"):
    raise pytest.UsageError(f"TUNELAB_FAULT_MATRIX={MODE!r}: allowed quick, full, off")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(MODE == "off", reason="TUNELAB_FAULT_MATRIX=off"),
]

ENGINES = ["sqlite"] if MODE == "quick" else ["sqlite", "mariadb", "postgres"]
# Quick: the kills are those in a row on one checkout (below), not cells of their own.
SEEDS = {"kill": 10, "term": 3, "int": 3} if MODE == "full" else {"kill": 0, "term": 1, "int": 1}
KILLS_IN_A_ROW = 10 if MODE == "full" else 4  # quick: one in each phase

# Small: the quick part must fit in minutes, yet a run passes through every stage.
SWEEPS = {
    "sqlite": [{"name": "fm-scan", "rows": 30000, "seed": 11, "pools": "[20, 2000]", "reps": 3}],
    "mariadb": [
        {"name": "fm-scan", "rows": 20000, "seed": 11, "pools": '["6MiB", "16MiB"]', "reps": 2}
    ],
    "postgres": [
        {"name": "fm-scan", "rows": 20000, "seed": 11, "pools": '["1MiB", "8MiB"]', "reps": 2}
    ],
}


def ready(engine: str) -> None:
    from test_input_safety import lab_installed

    if reason := lab_installed():
        pytest.skip(reason)
    if engine != "sqlite":
        from tunelab.host import containers

        if reason := containers.docker_unavailable_reason():
            pytest.skip(reason)


class Reference:
    """A clean run per engine: what every healed run must equal, and how long a run lasts."""

    def __init__(self, root: Path):
        self.root = root
        self.done: dict[str, tuple[dict, float]] = {}

    def of(self, engine: str) -> tuple[dict, float]:
        if engine not in self.done:
            lab = Lab(self.root / engine, engine, self.root / "lock", SWEEPS[engine])
            t0 = time.monotonic()
            code, said = lab.run()
            assert code == 0, said[-4000:]
            self.done[engine] = (harness.outcome(lab), time.monotonic() - t0)
        return self.done[engine]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Reference:
    return Reference(tmp_path_factory.mktemp("fault-reference"))


def cell_lab(tmp_path: Path, engine: str, **kw) -> Lab:
    return Lab(tmp_path / "w", engine, tmp_path / "lock", SWEEPS[engine], **kw)


def report(engine: str, kind: str, seed: int, what: str, heal_s: float) -> None:
    print(f"fault-matrix: {engine} {kind} seed {seed}: {what}; healed in {heal_s:.1f} s")


def cells(kind: str) -> list:
    return [pytest.param(e, s, id=f"{e}-{s}") for e in ENGINES for s in range(SEEDS[kind])]


# -- SIGKILL of the whole run at any moment ----------------------------------------------------
@pytest.mark.parametrize(("engine", "seed"), cells("kill"))
def test_a_run_killed_at_a_random_moment_is_healed_by_one_rerun(engine, seed, tmp_path, reference):
    ready(engine)
    expected, clean_s = reference.of(engine)
    host = harness.read_ahead()
    lab = cell_lab(tmp_path, engine)
    rng = harness.seeded("kill", engine, seed)
    at = rng.uniform(0.05, 0.95) * clean_s
    proc = lab.start()
    alive = harness.sleep_into(proc, at)
    harness.kill_session(proc) if alive else proc.wait()
    took = harness.healed(lab, expected, host)
    report(
        engine, "kill", seed, f"SIGKILL at {at:.1f} s" + ("" if alive else " (ended first)"), took
    )


# What a kill waits for (a command of the run's session), then up to how many seconds after.
PHASES = {
    "point": ("tunelab run-sweep", 1.5),
    "merge": ("tunelab merge", 0.3),
    "report": ("tunelab report", 3.0),
    "anytime": (None, None),
}


def kill_in(lab: Lab, phase: str, clean_s: float, rng) -> bool:
    """Start a run and SIGKILL its session once ``phase`` is under way, a random part of its
    delay later or as its command ends, whichever comes first ("anytime": a moment in the
    first half of a clean run's duration); False when the run ended first."""
    marker, delay = PHASES[phase]
    proc = lab.start()
    if marker and not harness.wait_for_command(proc, marker):
        return False
    # "anytime": within half the reference run, which generated the data set and built the
    # tables that a rerun finds kept, and so lasts longer than the run killed here.
    if not harness.sleep_into(proc, rng.uniform(0, delay or 0.5 * clean_s), marker):
        return False
    harness.kill_session(proc)
    return True


def test_a_run_killed_again_and_again_in_every_phase_is_healed_by_one_rerun(tmp_path, reference):
    """SIGKILLs in a row on one checkout (ten; four in the quick part), each run killed
    before it could finish what the last left (measuring a point, merging, rendering a
    report, any moment), then one plain rerun heals. A run that ends before its moment loses
    its finished point files, as a user re-measuring them would, so that the next run has
    a clean run's work to be killed in."""
    ready("sqlite")
    expected, clean_s = reference.of("sqlite")
    host = harness.read_ahead()
    lab = cell_lab(tmp_path, "sqlite")
    rng = harness.seeded("kills-in-a-row", "sqlite")
    plan = [
        "point",
        "merge",
        "report",
        "anytime",
        "point",
        "merge",
        "report",
        "anytime",
        "point",
        "report",
    ][:KILLS_IN_A_ROW]
    hit: list[str] = []
    for phase in plan:
        for _ in range(3):  # a run that ended first: the same phase again
            if kill_in(lab, phase, clean_s, rng):
                hit.append(phase)
                break
            done = [
                p
                for p in sorted((lab.results / "sqlite").glob("*/*.csv"))
                if not p.name.endswith(".partial.csv")
            ]
            assert done, f"a run ended with no point measured:\n{lab.out_since(0)[-3000:]}"
            for victim in done:  # the next run as long as a clean one
                victim.unlink()
                results.check_path(victim).unlink(missing_ok=True)
    assert hit == plan, (hit, lab.out_since(0)[-3000:])
    took = harness.healed(lab, expected, host)
    report("sqlite", "kills-in-a-row", 0, f"SIGKILL in {', '.join(hit)}", took)


# -- a clean stop: SIGTERM or SIGINT ----------------------------------------------------------
STOPS = {"term": (signal.SIGTERM, 143), "int": (signal.SIGINT, 130)}


def stop_cells() -> list:
    return [
        pytest.param(e, k, s, id=f"{e}-{k}-{s}")
        for k in STOPS
        for e in ENGINES
        for s in range(SEEDS[k])
    ]


@pytest.mark.parametrize(("engine", "kind", "seed"), stop_cells())
def test_a_stop_at_a_random_moment_says_what_is_kept_and_one_rerun_heals(
    engine, kind, seed, tmp_path, reference
):
    """SIGTERM or SIGINT to the run's process group (a terminal's Ctrl-C, a CI runner's
    cancel), at a random moment: the run stops within a minute, its last line says what is
    kept and what the next run measures, exit 130/143; one plain rerun heals."""
    ready(engine)
    expected, clean_s = reference.of(engine)
    host = harness.read_ahead()
    lab = cell_lab(tmp_path, engine)
    sig, code = STOPS[kind]
    at = harness.seeded(kind, engine, seed).uniform(0.05, 0.95) * clean_s
    mark = lab.out_size()
    proc = lab.start()
    if harness.sleep_into(proc, at):
        before = harness.finished_points(lab)
        t0 = time.monotonic()
        os.killpg(proc.pid, sig)
        got = proc.wait(90)
        stop_s = time.monotonic() - t0
        said = lab.out_since(mark)
        if got != 0:  # 0: it had just finished
            assert got == code, said[-4000:]
            last = harness.last_lab_line(said)
            said_why = (
                ": finished points are kept",
                ": every point is measured",
                " before the sweeps started: nothing was measured",
            )
            assert any(last.startswith(f"[lab] stopped by {sig.name}{w}") for w in said_why), said[
                -4000:
            ]
            assert "Traceback" not in said, said[-4000:]
            harness.kept_as_it_was(lab, before)
        what = f"{sig.name} at {at:.1f} s, stopped in {stop_s:.1f} s (exit {got})"
    else:
        what = f"{sig.name} at {at:.1f} s: the run ended first"
    took = harness.healed(lab, expected, host)
    report(engine, kind, seed, what, took)


def test_a_stop_as_snakemake_starts_leaves_no_temporary_directory(tmp_path):
    """SIGTERM to the group while Snakemake starts: Snakemake dies before its own clean-up,
    and its temporary directory (made at its start) must still go with the run."""
    ready("sqlite")
    lab = cell_lab(tmp_path, "sqlite")
    proc = lab.start()
    # its temporary directory made (under the run's TMPDIR, wherever the lab puts it)
    assert harness.wait_for_file(proc, "**/snakemake*", lab.work / "tmp"), lab.out_since(0)
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(90) in (143, 0), lab.out_since(0)[-3000:]
    assert (left := harness.leftovers(lab)) == [], left


def test_sigterm_to_the_lab_alone_stops_the_run_too(tmp_path, reference):
    """`kill PID` of ./lab only (a cron job's timeout, a supervisor): the stop reaches the
    workflow and its jobs, which end at once, rather than the sweep measuring on without its
    terminal. Its sweep measures for several seconds (its length in the rerun that heals
    it): a stop that waited for it would take most of that. The
    run starts as cron or a script's `./lab run &` starts it, with SIGINT ignored for good
    (a stop passed on as SIGINT would reach nothing); a run that takes SIGINT is stopped
    alike."""
    ready("sqlite")
    reference.of("sqlite")
    host = harness.read_ahead()
    long = {**SWEEPS["sqlite"][0], "reps": 60}
    lab = Lab(tmp_path / "w", "sqlite", tmp_path / "lock", [long])
    mark = lab.out_size()
    proc = lab.start(sigint_ignored=True)
    assert harness.wait_for_command(proc, "tunelab run-sweep"), lab.out_since(mark)
    time.sleep(1)  # into its rounds
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    got = proc.wait(90)
    stop_s = time.monotonic() - t0
    said = lab.out_since(mark)
    assert got == 143, said[-4000:]
    assert harness.last_lab_line(said).startswith("[lab] stopped by SIGTERM"), said[-3000:]
    deadline = time.monotonic() + 30  # the run's processes end with it
    while [c for c in harness.commands_in(proc.pid) if "snakemake" in c or "tunelab" in c]:
        assert time.monotonic() < deadline, harness.commands_in(proc.pid)
        time.sleep(0.1)
    took = harness.healed(lab, with_points({}, lab, long["name"]), host)
    sweep_s = sweep_spans(lab)[-1]  # the rerun's: the whole sweep, none of it kept
    assert stop_s < 0.5 * sweep_s, f"stopped in {stop_s:.1f} s of a {sweep_s:.1f}-s sweep"
    what = f"SIGTERM to ./lab alone (SIGINT ignored), stopped in {stop_s:.1f} s"
    what += f" of a {sweep_s:.1f}-s sweep"
    report("sqlite", "term-lab-only", 0, what, took)


# -- a full disk -------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 64 MiB tmpfs for the results: room for the run, then filled mid-run."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(directory: Path) -> Path:
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(fd, b"x" * 65536):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


@pytest.mark.parametrize("engine", ENGINES)
def test_the_results_disk_filled_mid_run_is_one_line_and_loses_nothing(
    engine, tmp_path, reference, small_disk
):
    ready(engine)
    expected, _ = reference.of(engine)
    host = harness.read_ahead()
    lab = cell_lab(tmp_path, engine, results_dir=small_disk / "results")
    mark = lab.out_size()
    proc = lab.start()
    # once the sweep is measuring: its first round's rows, its points and the merge are
    # still to be written
    assert harness.wait_for_command(proc, "tunelab run-sweep"), lab.out_since(mark)
    filler = fill(small_disk)
    got = proc.wait(600)
    said = lab.out_since(mark)
    assert got == 1, said[-4000:]
    last = harness.last_lab_line(said)
    assert "disk full" in last and str(small_disk) in last, said[-4000:]
    assert last.endswith("finished points are kept"), last
    # no partial row file is taken for a whole one: each is verified or absent
    for csv in (small_disk / "results").rglob("*.csv"):
        if results.check_path(csv).exists():
            assert results.verify_point(csv).problem is None, csv
    filler.unlink()
    took = harness.healed(lab, expected, host)
    report(engine, "disk-full", 0, "results disk filled while the sweep measured", took)


# -- the sweep file edited ---------------------------------------------------------------------
def with_points(expected: dict, lab: Lab, sweep: str) -> dict:
    """``expected`` with the points the sweep file now has (each with all its repetitions)."""
    points, errors = spec.expand(lab.work / "sweeps" / f"{sweep}.yaml", lab.engine)
    assert not errors, errors
    reps = {p.point_id: p.repetitions for p in points}
    return {**expected, sweep: sorted((pid, r) for pid, n in reps.items() for r in range(n))}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_sweep_edited_mid_run_then_between_runs(engine, tmp_path, reference):
    """A value added while the run measures: the run finishes what it planned, the next one
    measures the new point. A value removed between runs: its point is set aside, saying
    so, the rest kept. A typo: the next run stops before anything starts, one line naming
    the file and the field, exit 2, nothing measured lost; fixed, one run heals."""
    ready(engine)
    reference.of(engine)
    host = harness.read_ahead()
    lab = cell_lab(tmp_path, engine)
    sweep = dict(SWEEPS[engine][0])
    proc = lab.start()
    assert harness.wait_for_command(proc, "tunelab run-sweep")
    sweep["pools"] = sweep["pools"].replace(
        "[", "[" + ("500, " if engine == "sqlite" else '"10MiB", ')
    )
    lab.write_sweep(sweep)
    assert proc.wait(600) == 0, lab.out_since(0)[-4000:]
    took = harness.healed(lab, with_points({}, lab, sweep["name"]), host)
    report(engine, "edit-added-mid-run", 0, "a value added while measuring", took)

    # a value removed between runs
    removed = sweep["pools"]
    sweep["pools"] = "[" + removed.strip("[]").split(", ", 1)[1] + "]"
    lab.write_sweep(sweep)
    mark = lab.out_size()
    took = harness.healed(lab, with_points({}, lab, sweep["name"]), host)
    said = lab.out_since(mark)
    assert re.search(r"fm-scan: 1 point\(s\) no longer in .* set aside as .*\.csv\.retired", said)
    assert list((lab.results / engine / "fm-scan").glob("*.csv.retired")), "not kept"
    report(engine, "edit-removed", 0, "a value removed between runs", took)

    # a typo
    before = harness.finished_points(lab)
    good = (lab.work / "sweeps" / "fm-scan.yaml").read_text()
    (lab.work / "sweeps" / "fm-scan.yaml").write_text(good.replace("cache: cold", "cache: colld"))
    mark = lab.out_size()
    t0 = time.monotonic()
    code, said = lab.run()
    errors = [ln for ln in said.splitlines() if "colld" in ln]
    assert code == 2, said[-3000:]
    assert len(errors) == 1 and "fm-scan.yaml" in errors[0] and "cache" in errors[0], said
    assert "warm" in errors[0] and "cold" in errors[0], errors  # the allowed values
    assert "Traceback" not in said and "running the sweeps" not in said, said
    harness.kept_as_it_was(lab, before)
    assert (left := harness.leftovers(lab)) == [], left
    typo_s = time.monotonic() - t0
    (lab.work / "sweeps" / "fm-scan.yaml").write_text(good)
    took = harness.healed(lab, with_points({}, lab, sweep["name"]), host)
    report(engine, "edit-typo", 0, f"a typo refused in {typo_s:.1f} s", took)


def job_spans(lab: Lab) -> list[dict]:
    """The spans the checkout's runs' jobs held the bench lock (logs/jobs.jsonl)."""
    log = lab.work / "logs" / "jobs.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()]


def sweep_spans(lab: Lab) -> list[float]:
    """The seconds each measured sweep (a `run-sweep` job) of the checkout's runs took."""
    return [
        (s["end_ns"] - s["start_ns"]) / 1e9
        for s in job_spans(lab)
        if s["job"].startswith("run-sweep")
    ]


# -- two runs at once --------------------------------------------------------------------------
def exclusive_spans(lab: Lab) -> list[tuple[int, int]]:
    return [(s["start_ns"], s["end_ns"]) for s in job_spans(lab) if s["kind"] == "exclusive"]


def test_two_checkouts_on_one_host_at_once_both_finish_and_never_overlap(tmp_path, reference):
    """Two checkouts run their packs at once: the host-wide bench lock serialises their timed
    work (no exclusive span of one overlaps one of the other), and both end as clean runs."""
    ready("sqlite")
    expected, _ = reference.of("sqlite")
    host = harness.read_ahead()
    shared_lock = tmp_path / "lock"
    a = Lab(tmp_path / "a", "sqlite", shared_lock, SWEEPS["sqlite"])
    b = Lab(tmp_path / "b", "sqlite", shared_lock, SWEEPS["sqlite"])
    t0 = time.monotonic()
    pa, pb = a.start(), b.start()
    assert pa.wait(900) == 0, a.out_since(0)[-3000:]
    assert pb.wait(900) == 0, b.out_since(0)[-3000:]
    took = time.monotonic() - t0
    for lab in (a, b):
        assert harness.outcome(lab) == expected
        assert (left := harness.leftovers(lab)) == [], left
    assert harness.read_ahead() == host
    for s0, e0 in exclusive_spans(a):
        for s1, e1 in exclusive_spans(b):
            assert e0 <= s1 or e1 <= s0, "two checkouts measured at once"
    report("sqlite", "two-checkouts", 0, "two packs at once", took)


# -- the wall clock stepped back during a timed section ------------------------------------------
def test_the_wall_clock_stepped_back_an_hour_mid_run_is_healed(tmp_path, reference):
    """An NTP step of the wall clock back an hour while the sweep's rounds run: every file
    written before the step is then dated an hour after "now", and Snakemake compares the
    files' dates (an output older than its input is refused, and measured again next time).
    Emulated by dating every file of the run an hour ahead mid-sweep: libfaketime (Debian's
    0.9.10), which could step the wall clock alone, breaks Python 3.11's time.sleep
    (clock_nanosleep fails with EINVAL, wolfcw/libfaketime#426). Timings read CLOCK_MONOTONIC,
    which a step leaves alone. The run ends well and one rerun measures nothing again."""
    ready("sqlite")
    expected, _ = reference.of("sqlite")
    host = harness.read_ahead()
    lab = cell_lab(tmp_path, "sqlite")
    proc = lab.start()
    assert harness.wait_for_command(proc, "tunelab run-sweep"), lab.out_since(0)
    ahead = time.time() + 3600  # at once: the sweep of this small run takes about a second
    for f in lab.work.rglob("*"):
        if f.is_file() and not f.is_symlink():
            with contextlib.suppress(OSError):  # a file the run just replaced
                os.utime(f, (ahead, ahead))
    assert proc.wait(900) == 0, lab.out_since(0)[-4000:]
    mark = lab.out_size()
    took = harness.healed(lab, expected, host)
    assert "run-sweep" not in lab.out_since(mark)  # nothing measured again
    report("sqlite", "clock-step", 0, "files dated 1 h ahead mid-sweep", took)


# -- the server engines' own faults -------------------------------------------------------------
SERVERS = [e for e in ENGINES if e != "sqlite"]


def lab_containers(lab: Lab) -> list:
    from tunelab.host import containers

    c = containers.client()
    return [
        x
        for x in c.containers.list(filters={"label": "tunelab=1"})
        if x.labels.get("tunelab.workdir", "").startswith(str(lab.work))
    ]


@pytest.mark.docker
@pytest.mark.parametrize("engine", SERVERS)
def test_a_server_killed_from_outside_mid_point_fails_in_one_line(engine, tmp_path, reference):
    ready(engine)
    expected, _ = reference.of(engine)
    host = harness.read_ahead()
    lab = cell_lab(tmp_path, engine)
    mark = lab.out_size()
    proc = lab.start()
    deadline = time.monotonic() + 300
    while not lab_containers(lab):
        assert proc.poll() is None and time.monotonic() < deadline, lab.out_since(mark)
        time.sleep(0.2)
    time.sleep(harness.seeded("docker-kill", engine).uniform(0.5, 3))
    for x in lab_containers(lab):
        subprocess.run(["docker", "kill", x.name], capture_output=True)
    got = proc.wait(600)
    said = lab.out_since(mark)
    assert "Traceback" not in said[-2000:], said[-4000:]
    if got != 0:
        assert got == 1, said[-4000:]
        assert harness.last_lab_line(said).startswith("[lab] failed: "), said[-3000:]
    took = harness.healed(lab, expected, host)
    report(engine, "docker-kill", 0, f"its server killed (run exit {got})", took)


def restart_docker(log: Path) -> None:
    """Restart the Docker daemon as this host runs it: its service, else its process (a host
    whose init starts dockerd itself): SIGTERM, then the same command line again."""
    if (
        shutil.which("systemctl")
        and subprocess.run(["systemctl", "is-active", "--quiet", "docker"]).returncode == 0
    ):
        subprocess.run(["systemctl", "restart", "docker"], check=True, timeout=120)
        return
    if (
        shutil.which("service")
        and subprocess.run(["service", "docker", "status"], capture_output=True).returncode == 0
    ):
        subprocess.run(["service", "docker", "restart"], check=True, timeout=120)
        return
    pids = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True).stdout
    if len(pids.split()) != 1:
        pytest.skip(f"no one dockerd process to restart here (found {pids.split()})")
    pid = int(pids)
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while ownership.start_time(pid) is not None:  # gone, or a zombie
        assert time.monotonic() < deadline, "dockerd did not stop"
        time.sleep(0.1)
    with log.open("ab") as out:  # the daemon outlives the test: its first words kept here
        # setsid -f: its own session, and init its parent (which reaps it), not this test
        subprocess.run(
            ["setsid", "-f", *(a.decode() for a in argv)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=True,
        )
    while subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline + 60, f"dockerd did not come back: {log}"
        time.sleep(0.2)


@pytest.mark.docker
@pytest.mark.parametrize("engine", SERVERS)
def test_the_docker_daemon_restarted_mid_point_is_healed(engine, tmp_path, reference):
    ready(engine)
    expected, _ = reference.of(engine)
    host = harness.read_ahead()
    lab = cell_lab(tmp_path, engine)
    mark = lab.out_size()
    proc = lab.start()
    deadline = time.monotonic() + 300
    while not lab_containers(lab):
        assert proc.poll() is None and time.monotonic() < deadline, lab.out_since(mark)
        time.sleep(0.2)
    restart_docker(tmp_path / "dockerd.log")
    got = proc.wait(600)
    said = lab.out_since(mark)
    assert "Traceback" not in said[-2000:], said[-4000:]
    took = harness.healed(lab, expected, host)
    report(engine, "docker-restart", 0, f"daemon restarted (run exit {got})", took)
