"""Recovery from killed runs (`tunelab recover`): owners, reaping what a dead owner left, and
Snakemake's lock. The container tests run the real Docker engine and the lab's MariaDB
image, and skip with the reason where either is missing."""

from __future__ import annotations

import base64
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tunelab.host import containers, ownership
from tunelab.host.ownership import Owner
from tunelab.run import recovery


@pytest.fixture(autouse=True)
def private_env(tmp_path, monkeypatch):
    # A bench lock of this test's own: measurements elsewhere on the host never make recover
    # wait. No owner inherited from a workflow that runs the tests.
    monkeypatch.setenv("TUNELAB_LOCK_DIR", str(tmp_path / "lock"))
    monkeypatch.delenv(ownership.OWNER_PID_ENV, raising=False)
    monkeypatch.delenv(ownership.WORKDIR_ENV, raising=False)


def _recover(workdir: Path, checkout: Path) -> list[str]:
    lines: list[str] = []
    recovery.recover(workdir, checkout, say=lines.append)
    return lines


def _sleeper(tmp_path: Path, program: str, cwd: Path, *args: str) -> subprocess.Popen:
    """A live process that looks like ``program`` (its script has that name) working in
    ``cwd``."""
    script = tmp_path / "bin" / program
    script.parent.mkdir(exist_ok=True)
    script.write_text("import time\nprint('up', flush=True)\ntime.sleep(120)\n")
    proc = subprocess.Popen(
        [sys.executable, str(script), *args], cwd=cwd, stdout=subprocess.PIPE, text=True
    )
    # Running, not only started: right after exec its command line may still read empty.
    assert proc.stdout.readline() == "up\n"
    return proc


def _kill_to_zombie(proc: subprocess.Popen) -> None:
    """SIGKILL, left unreaped (a zombie, as a killed process is until its parent waits)."""
    proc.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while ownership.start_time(proc.pid) is not None:
        assert time.monotonic() < deadline, "the killed process did not exit"
        time.sleep(0.01)


# -- owners ----------------------------------------------------------------------------------
def test_owner_is_alive_only_while_its_very_process_runs(tmp_path):
    me = Owner.current()
    assert (me.pid, me.host, me.state()) == (os.getpid(), socket.gethostname(), "alive")
    proc = _sleeper(tmp_path, "python-sleeper", tmp_path)
    try:
        owner = Owner(me.host, me.boot, proc.pid, ownership.start_time(proc.pid) or -1)
        assert owner.state() == "alive"
        assert dataclasses.replace(owner, start=owner.start + 1).state() == "gone"  # pid reused
        assert dataclasses.replace(owner, boot="another-boot").state() == "gone"  # rebooted
        assert dataclasses.replace(owner, host="another-host").state() == "elsewhere"
        _kill_to_zombie(proc)
        assert owner.state() == "gone"
    finally:
        proc.kill()
        proc.wait()
    assert owner.state() == "gone"


def test_owner_is_the_workflow_process_and_is_recorded_in_the_run_directory(tmp_path, monkeypatch):
    monkeypatch.setenv(ownership.OWNER_PID_ENV, str(os.getppid()))
    assert Owner.current().pid == os.getppid()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    monkeypatch.setenv(ownership.OWNER_PID_ENV, gone.strip())
    assert Owner.current().pid == os.getpid()  # a gone process cannot own a new container

    run_dir = tmp_path / "w" / "runs" / "r1"
    containers.run_secret(run_dir)
    owner = Owner.read(run_dir)
    assert owner == containers.run_owner(run_dir)
    assert owner.workdir == str((tmp_path / "w").resolve())
    assert oct((run_dir / "secret").stat().st_mode & 0o777) == "0o600"


# -- Snakemake's lock ------------------------------------------------------------------------
def _locked_checkout(tmp_path: Path) -> Path:
    checkout = tmp_path / "checkout"
    locks = checkout / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text(f"{checkout}/data/x.parquet\n")
    (locks / "0.output.lock").write_text(f"{checkout}/results/x.csv\n")
    return checkout


def _locks(checkout: Path) -> list[str]:
    return sorted(p.name for p in (checkout / ".snakemake" / "locks").glob("*"))


@pytest.mark.parametrize(
    "program, args",
    [
        ("snakemake", ("--profile", "workflows/profile")),
        ("tunelab", ("run-point", "s.yaml", "p1", "--run-id", "r1")),
    ],
)
def test_a_live_process_of_the_checkout_keeps_the_lock_a_dead_one_does_not(tmp_path, program, args):
    """Snakemake, or a job a killed Snakemake left running, in the checkout: the lock
    stays while it lives and goes once it is dead."""
    checkout = _locked_checkout(tmp_path)
    proc = _sleeper(tmp_path, program, checkout, *args)
    try:
        with pytest.raises(recovery.RunInProgress) as held:
            _recover(tmp_path / "w", checkout)
        assert f"another run is in progress in this checkout (pid {proc.pid}, started " in str(
            held.value
        )
        assert "--unlock" not in str(held.value)
        assert _locks(checkout) == ["0.input.lock", "0.output.lock"]
        _kill_to_zombie(proc)
        lines = _recover(tmp_path / "w", checkout)
        assert len(lines) == 1 and "removed a stale Snakemake lock (2 file(s)" in lines[0]
        assert _locks(checkout) == []
    finally:
        proc.kill()
        proc.wait()


def _job_server_stand_in(cwd: Path, owner: int) -> subprocess.Popen:
    """A process that looks like a run's job server (``python -m tunelab.jobserver SOCKET
    --owner PID``) working in ``cwd``, and ends on SIGTERM as one does."""
    code = "import time; print('up', flush=True); time.sleep(120)"
    argv = [sys.executable, "-c", code, "-m", "tunelab.jobserver", "jobs.sock", "--owner"]
    proc = subprocess.Popen([*argv, str(owner)], cwd=cwd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "up\n"
    return proc


def test_a_killed_runs_job_server_is_stopped_then_the_lock_goes(tmp_path):
    """A run killed at once (kill -9 of its process group) leaves its job server ending its
    jobs for a moment: recover stops it and waits, rather than keep the lock."""
    checkout = _locked_checkout(tmp_path)
    gone = subprocess.Popen(["true"])
    gone.wait()
    server = _job_server_stand_in(checkout, gone.pid)
    try:
        lines = _recover(tmp_path / "w", checkout)
        assert server.wait(timeout=10) == -signal.SIGTERM
        assert lines[0] == (
            f"stopped the job server of a killed run (pid {server.pid}) and the jobs it still ran"
        )
        assert "removed a stale Snakemake lock" in lines[-1]
        assert _locks(checkout) == []
    finally:
        server.kill()
        server.wait()


def test_a_live_runs_job_server_keeps_the_lock(tmp_path):
    checkout = _locked_checkout(tmp_path)
    server = _job_server_stand_in(checkout, os.getpid())
    try:
        with pytest.raises(recovery.RunInProgress, match=f"in progress .*pid {server.pid}"):
            _recover(tmp_path / "w", checkout)
        assert server.poll() is None
    finally:
        server.kill()
        server.wait()


def test_the_job_server_lab_started_for_its_run_does_not_keep_the_lock(tmp_path, monkeypatch):
    """`./lab run` starts its run's job server before it recovers (tunelab.host.jobs's
    STANDBY_ENV names it): that server is no killed run's, and holds nothing yet."""
    from tunelab.host import jobs

    checkout = _locked_checkout(tmp_path)
    server = _job_server_stand_in(checkout, os.getpid())
    try:
        monkeypatch.setenv(jobs.STANDBY_ENV, f"{server.pid}:9")
        lines = _recover(tmp_path / "w", checkout)
        assert len(lines) == 1 and "removed a stale Snakemake lock" in lines[0], lines
        assert _locks(checkout) == [] and server.poll() is None
    finally:
        server.kill()
        server.wait()


def test_a_tunelab_command_that_is_no_job_does_not_hold_the_lock(tmp_path):
    """`tunelab validate` in another terminal of the checkout never runs under the lock."""
    checkout = _locked_checkout(tmp_path)
    proc = _sleeper(tmp_path, "tunelab", checkout, "validate", "--engine", "sqlite", "s.yaml")
    try:
        lines = _recover(tmp_path / "w", checkout)
        assert len(lines) == 1 and "removed a stale Snakemake lock" in lines[0]
        assert _locks(checkout) == []
    finally:
        proc.kill()
        proc.wait()


def test_a_snakemake_working_elsewhere_does_not_hold_this_checkouts_lock(tmp_path, capsys):
    checkout = _locked_checkout(tmp_path)
    (tmp_path / "other").mkdir()
    proc = _sleeper(tmp_path, "snakemake", tmp_path / "other")
    try:
        argv = ["--workdir", str(tmp_path / "w"), "--checkout", str(checkout)]
        assert recovery.recover_main(argv) == 0
        assert "removed a stale Snakemake lock" in capsys.readouterr().out
        assert _locks(checkout) == []
        assert recovery.recover_main(argv) == 0
        assert capsys.readouterr().out == ""  # nothing left to do: nothing said
    finally:
        proc.kill()
        proc.wait()


def test_a_run_directory_is_reaped_only_when_its_owner_is_gone(tmp_path):
    workdir = (tmp_path / "w").resolve()
    proc = _sleeper(tmp_path, "python-sleeper", tmp_path)
    try:
        owner = dataclasses.replace(
            Owner.current(workdir), pid=proc.pid, start=ownership.start_time(proc.pid) or -1
        )
        live, elsewhere = workdir / "runs" / "live", workdir / "runs" / "elsewhere"
        ownership.claim(live, owner)
        ownership.claim(elsewhere, dataclasses.replace(owner, host="another-host"))
        ownership.make_dir(workdir / "points" / "p1" / "engine")  # as runner.provisioned does
        assert _recover(workdir, tmp_path) == [
            "left alone: run elsewhere belongs to host another-host"
        ]
        assert live.exists() and (workdir / "points" / "p1").exists()
        _kill_to_zombie(proc)
        lines = _recover(workdir, tmp_path)
        assert any(f"removed engine data and secret in {live}" in line for line in lines)
        assert not live.exists()
        # Another host's run (a shared work directory) is not this host's to judge, nor are
        # point directories it may be measuring in.
        assert elsewhere.exists() and (workdir / "points" / "p1").exists()
        shutil.rmtree(elsewhere)
        lines = _recover(workdir, tmp_path)
        assert lines == [f"removed engine data of 1 killed point job(s) in {workdir}/points"]
        assert not (workdir / "points" / "p1").exists()
    finally:
        proc.kill()
        proc.wait()


def test_a_run_whose_job_still_runs_is_left_alone_though_its_owner_is_gone(tmp_path):
    workdir = (tmp_path / "w").resolve()
    gone = dataclasses.replace(Owner.current(workdir), pid=1, start=-1)
    ownership.claim(workdir / "runs" / "r7", gone)
    job = _sleeper(
        tmp_path, "tunelab", tmp_path / "w", "run-point", "s.yaml", "p", "--run-id", "r7"
    )
    try:
        lines = _recover(workdir, tmp_path)
        assert len(lines) == 1 and f"pid {job.pid} still runs it" in lines[0]
        assert (workdir / "runs" / "r7" / "owner.json").exists()
    finally:
        job.kill()
        job.wait()
    _recover(workdir, tmp_path)
    assert not (workdir / "runs" / "r7").exists()


# -- a really killed run ---------------------------------------------------------------------
_OWNER = """
import sys, time
from pathlib import Path
from tunelab.host import ownership
from tunelab.engines.mariadb import MariaDBEngine
workdir, run_id, image = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
ownership.make_dir(workdir / "points" / "p1" / "engine")
eng = MariaDBEngine(workdir / "points" / "p1" / "engine", run_id)
eng.image = image
eng.run_dir = workdir / "runs" / run_id
eng.provision({"page_size": 16384, "buffer_pool": 512})
print(eng.container.id, flush=True)
time.sleep(600)
"""


@pytest.mark.docker
def test_killed_run_with_a_kept_mariadb_server_recovers(image, tmp_path):
    """A kept MariaDB server started through the engine by a process that is then killed
    with SIGKILL: left alone while its owner lives, removed with its network, data directory
    and secret once it is dead."""
    workdir = (tmp_path / "w").resolve()
    run_id = f"rec-{uuid.uuid4().hex[:8]}"
    run_dir = workdir / "runs" / run_id
    owner = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_OWNER), str(workdir), run_id, image],
        stdout=subprocess.PIPE,
        text=True,
    )
    client = containers.client()
    try:
        cid = owner.stdout.readline().strip()
        assert cid, "the owner did not start its server"
        server = client.containers.get(cid)
        labels = server.labels
        assert labels[ownership.PID_LABEL] == str(owner.pid)
        assert labels[ownership.START_LABEL] == str(ownership.start_time(owner.pid))
        assert labels[ownership.HOST_LABEL] == socket.gethostname()
        assert labels[ownership.WORKDIR_LABEL] == str(workdir)
        assert Owner.from_labels(labels) == Owner.read(run_dir)
        network = containers.network_name(run_id)
        assert set(server.attrs["NetworkSettings"]["Networks"]) == {network}
        assert (run_dir / "secret").exists() and list(
            run_dir.glob("hosts/*/mariadb-*/datadir/ibdata1")
        )

        said = _recover(workdir, tmp_path)
        assert said == [], said  # a live owner's run: nothing touched
        server.reload()
        assert server.status == "running" and (run_dir / "secret").exists()
        assert (workdir / "points" / "p1").exists()

        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
        said = "\n".join(_recover(workdir, tmp_path))
        assert f"removed container {server.name}" in said, said
        assert f"owner gone: pid {owner.pid}" in said, said
        assert f"removed network {network}" in said, said
        assert f"removed engine data and secret in {run_dir}" in said, said
        assert client.containers.list(all=True, filters={"id": cid}) == []
        assert [n for n in client.networks.list(names=[network]) if n.name == network] == []
        assert not run_dir.exists() and not (workdir / "points" / "p1").exists()
        assert _recover(workdir, tmp_path) == []
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        recovery.clean(run_id)


_TWO_CHECKOUTS = """
import os, signal, sys
from pathlib import Path
from tunelab.host import containers
spec = containers.ContainerSpec(image=sys.argv[1], port=3306,
    command=["sh", "-c", "echo up; exec sleep 300"], ready_log="^up$")
for workdir, run_id in zip(sys.argv[2::2], sys.argv[3::2]):
    run_dir = Path(workdir) / "runs" / run_id
    containers.run_secret(run_dir)
    containers.start(spec, run_id, "p", keep_key="k", run_dir=run_dir)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.docker
def test_recover_touches_only_its_own_checkout(image, tmp_path):
    a, b = (tmp_path / "a").resolve(), (tmp_path / "b").resolve()
    run_a, run_b = f"rec-a-{uuid.uuid4().hex[:6]}", f"rec-b-{uuid.uuid4().hex[:6]}"
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_TWO_CHECKOUTS), image, str(a), run_a, str(b), run_b]
    )
    assert child.returncode == -signal.SIGKILL
    client = containers.client()

    def left(run_id: str) -> list:
        return client.containers.list(
            all=True, filters={"label": f"{containers.RUN_LABEL}={run_id}"}
        )

    try:
        assert len(left(run_a)) == 1 and len(left(run_b)) == 1
        lines = _recover(a, tmp_path)
        assert len(lines) == 3, lines  # container, network, run directory
        assert left(run_a) == [] and not (a / "runs" / run_a).exists()
        assert len(left(run_b)) == 1 and (b / "runs" / run_b / "secret").exists()
        assert len(_recover(b, tmp_path)) == 3
        assert left(run_b) == [] and not (b / "runs" / run_b).exists()
    finally:
        recovery.clean(run_a)
        recovery.clean(run_b)


def test_a_stale_lock_goes_with_the_outputs_the_killed_run_had_not_finished(tmp_path):
    """An output Snakemake marked incomplete that exists is removed with a stale lock (else
    Snakemake 9 reruns that job alone and ends); outputs not marked stay."""
    checkout = _locked_checkout(tmp_path)
    (checkout / "data").mkdir()
    started = checkout / "data" / "a.csv"
    done = checkout / "data" / "b.csv"
    started.write_text("half\n")
    done.write_text("whole\n")
    marks = checkout / ".snakemake" / "incomplete"
    marks.mkdir()
    for name in ("data/a.csv", "data/never-written.csv"):
        (marks / base64.urlsafe_b64encode(name.encode()).decode()).write_text("{}")
    lines = _recover(tmp_path / "w", checkout)
    assert "removed a stale Snakemake lock" in lines[0]
    assert len(lines) == 2 and "removed 1 output(s)" in lines[1] and str(started) in lines[1]
    assert not started.exists() and done.exists()


# -- only the lab's folders ------------------------------------------------------------------
def test_recover_refuses_a_work_directory_the_lab_did_not_make(tmp_path, capsys):
    """`--config workdir=~/experiments`: the user's folder, with their data in runs/, is
    refused in one line (exit 2) and nothing in it goes."""
    experiments = tmp_path / "experiments"
    thesis = experiments / "runs" / "thesis-data"
    thesis.mkdir(parents=True)
    (thesis / "results.csv").write_text("the user's\n")
    argv = ["--workdir", str(experiments), "--checkout", str(tmp_path)]
    assert recovery.recover_main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"tunelab recover: config workdir: {experiments} holds files")
    assert (thesis / "results.csv").read_text() == "the user's\n"
    assert not (experiments / ownership.STAMP).exists()
    assert recovery.clean_main(["--workdir", str(experiments)]) == 2
    assert "config workdir" in capsys.readouterr().err
    assert (thesis / "results.csv").exists()


def test_a_new_or_empty_work_directory_becomes_the_labs(tmp_path):
    new, empty = tmp_path / "new" / "w", tmp_path / "empty"
    empty.mkdir()
    for workdir in (new, empty):
        _recover(workdir, tmp_path)
        assert ownership.made_by_lab(workdir)


def test_recover_leaves_a_folder_the_lab_did_not_stamp_and_says_so(tmp_path):
    """In the lab's own work directory, a run's and a point's folders that the lab did not
    make stay (named); a killed run's and point's that it made go."""
    workdir = (tmp_path / "w").resolve()
    gone = dataclasses.replace(Owner.current(workdir), pid=1, start=-1)
    ownership.claim(workdir / "runs" / "killed", gone)
    ownership.make_dir(workdir / "points" / "p1" / "engine")
    users = [workdir / "runs" / "thesis-data", workdir / "points" / "notes"]
    for d in users:
        d.mkdir()
        (d / "file").write_text("the user's")
    lines = _recover(workdir, tmp_path)
    for d in users:
        assert (d / "file").read_text() == "the user's"
        assert f"left alone: {d}: the lab did not make it" in "\n".join(lines)
    assert not (workdir / "runs" / "killed").exists()
    assert not (workdir / "points" / "p1").exists()
    assert ownership.made_by_lab(workdir)


def test_the_checkouts_default_work_directory_is_the_labs_its_old_runs_are_left(tmp_path):
    """A work directory made before the lab stamped its folders: the default one, inside the
    checkout, is the lab's; a run folder in it without the stamp stays, named."""
    checkout = tmp_path / "checkout"
    old_run = checkout / ".tunelab" / "runs" / "r0"
    old_run.mkdir(parents=True)
    Path(old_run / ownership.OWNER_FILE).write_text("{}")
    lines = _recover(checkout / ".tunelab", checkout)
    assert ownership.made_by_lab(checkout / ".tunelab")
    assert old_run.exists() and lines == [
        f"left alone: {old_run.resolve()}: the lab did not make it (no {ownership.STAMP} in it); "
        "remove it yourself if it is engine data"
    ]


def test_a_link_in_runs_is_not_followed(tmp_path):
    workdir = tmp_path / "w"
    ownership.make_dir(workdir / "runs")
    elsewhere = tmp_path / "elsewhere"
    ownership.make_dir(elsewhere)  # stamped, yet not the lab's folder of this run
    (elsewhere / "file").write_text("kept")
    (workdir / "runs" / "r1").symlink_to(elsewhere)
    _recover(workdir, tmp_path)
    assert (elsewhere / "file").exists()


def test_a_default_work_directory_kept_elsewhere_through_a_link_is_the_labs(tmp_path):
    checkout, elsewhere = tmp_path / "checkout", tmp_path / "big-disk" / "tunelab"
    (elsewhere / "runs" / "r0").mkdir(parents=True)
    checkout.mkdir()
    (checkout / ".tunelab").symlink_to(elsewhere)
    _recover(checkout / ".tunelab", checkout)
    assert ownership.made_by_lab(elsewhere) and (elsewhere / "runs" / "r0").exists()
