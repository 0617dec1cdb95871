"""The workflow through Snakemake's SLURM executor on a real SLURM cluster of this host.

A module fixture starts Debian's ``munged``, ``slurmctld`` and ``slurmd`` as root, with a
configuration of their own in a temporary directory (one node entry: this host, its real
CPUs and memory; no accounting, no cgroups), and stops every one of them after this module's
tests; a suite killed meanwhile takes them with it. A tiny
SQLite sweep then runs once on this machine (``workflows/profile``) and once through SLURM
(``workflows/profile`` then ``workflows/profile/slurm``, as ``./lab run --profile
workflows/profile/slurm`` runs it), and the two are compared. Where SLURM cannot start (not
root, packages missing, a daemon that does not come up) the tests skip, saying why.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

DAEMONS = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd"}
CLIENTS = {
    "sbatch": "slurm-client",
    "squeue": "slurm-client",
    "sinfo": "slurm-client",
    "srun": "slurm-client",
    "scancel": "slurm-client",
}
START_TIMEOUT_S = 30

SWEEP = """\
name: tiny
description: two pool sizes, a cold scan
engines: [sqlite]
dataset: {rows: 2000, seed: 5}
knobs:
  buffer_pool: [10, 1000]
workloads:
  - type: scan
cache: cold
repetitions: 2
"""
POINTS = 2  # pool sizes

SLURM_CONF = """\
ClusterName=tunelabtest
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
MinJobAge=600
InactiveLimit=0
KillWait=5
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory} State=UNKNOWN
PartitionName=lab Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""
# No cgroup plugin is used (proctrack/linuxproc, task/none); the file keeps slurmd from
# looking for systemd's.
CGROUP_CONF = "CgroupPlugin=autodetect\nIgnoreSystemd=yes\n"


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def _why_not() -> str | None:
    """Why no SLURM cluster can start here (None: try)."""
    if os.geteuid() != 0:
        return "slurmd runs jobs as their user and needs root"
    missing = sorted({pkg for name, pkg in {**DAEMONS, **CLIENTS}.items() if not _tool(name)})
    if missing:
        return (
            f"SLURM is not installed: apt-get install {' '.join(missing)} "
            "(./lab test installs them)"
        )
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        return "snakemake-executor-plugin-slurm is not installed: pip install -e '.[slurm]'"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


@dataclass
class Cluster:
    root: Path
    node: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self) -> dict[str, str]:
        # The job-step executor drops SLURM_* variables (SLURM_CONF among them) before its
        # srun; the wrapper first on PATH gives srun this cluster's configuration again, as
        # /etc/slurm/slurm.conf would on a real cluster.
        path = f"{self.root / 'bin'}:{Path(sys.executable).parent}:{os.environ['PATH']}"
        return {**os.environ, "SLURM_CONF": str(self.conf), "PATH": path}

    def run(self, *cmd: str) -> str:
        proc = subprocess.run(cmd, env=self.env(), capture_output=True, text=True, timeout=30)
        return proc.stdout

    def state(self) -> str:
        return self.run("sinfo", "-h", "-N", "-o", "%T").strip()

    def stop(self) -> None:
        """Cancel what is left of the jobs, then stop every daemon this fixture started."""
        if "slurmctld" in self.procs:
            self.run("scancel", "--user", "root")
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def _node() -> tuple[str, int, int]:
    """This host as slurmd sees it: node name, CPUs, memory (MB)."""
    out = subprocess.run([_tool("slurmd"), "-C"], capture_output=True, text=True, timeout=30)
    facts = dict(re.findall(r"(\w+)=(\S+)", out.stdout))
    return facts["NodeName"], int(facts["CPUs"]), int(facts["RealMemory"])


def _dies_with_the_tests() -> None:
    """In a daemon, before its exec: SIGTERM once the tests' process ends, however it ends
    (a killed suite left all three running)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _start(cluster: Cluster) -> str | None:
    """Start munged, slurmctld and slurmd; None once the node is idle, else why not."""
    root = cluster.root
    for d in ("munge", "state", "spool", "log", "bin"):
        (root / d).mkdir(mode=0o700, exist_ok=True)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    socket_path = root / "munge" / "munge.socket"
    cluster.procs["munged"] = subprocess.Popen(
        [
            _tool("munged"),
            "--foreground",
            "--force",
            f"--socket={socket_path}",
            f"--key-file={key}",
            f"--log-file={root / 'log' / 'munged.log'}",
            f"--pid-file={root / 'munge' / 'munged.pid'}",
            f"--seed-file={root / 'munge' / 'munged.seed'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        preexec_fn=_dies_with_the_tests,
    )
    deadline = time.monotonic() + 10
    while not socket_path.exists():
        if cluster.procs["munged"].poll() is not None or time.monotonic() > deadline:
            return f"munged did not start: {_tail(root / 'log' / 'munged.log')}"
        time.sleep(0.1)
    node, cpus, memory = cluster.node, *_node()[1:]
    cluster.conf.write_text(
        SLURM_CONF.format(
            ctld_port=_free_port(),
            d_port=_free_port(),
            munge_socket=socket_path,
            root=root,
            node=node,
            cpus=cpus,
            memory=memory,
        )
    )
    (root / "cgroup.conf").write_text(CGROUP_CONF)
    srun = root / "bin" / "srun"
    srun.write_text(f'#!/bin/sh\nSLURM_CONF={cluster.conf} exec {_tool("srun")} "$@"\n')
    srun.chmod(0o755)
    for name, args in (("slurmctld", ["-D", "-c", "-i"]), ("slurmd", ["-D"])):
        with open(root / "log" / f"{name}.out", "w") as out:  # the child keeps its own copy
            cluster.procs[name] = subprocess.Popen(
                [_tool(name), *args],
                env=cluster.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_dies_with_the_tests,
            )
    deadline = time.monotonic() + START_TIMEOUT_S
    state = ""
    while time.monotonic() < deadline:
        for name in ("slurmctld", "slurmd"):
            if cluster.procs[name].poll() is not None:
                why = _tail(root / "log" / f"{name}.log") or _tail(root / "log" / f"{name}.out")
                return f"{name} exited: {why}"
        state = cluster.state()
        if state == "idle":
            return None
        time.sleep(0.3)
    return f"the node did not become idle within {START_TIMEOUT_S} s (sinfo: {state or 'nothing'})"


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    why = _why_not()
    if why:
        pytest.skip(f"no local SLURM cluster: {why}")
    try:
        node = _node()[0]
    except (OSError, KeyError, ValueError, subprocess.SubprocessError) as exc:
        pytest.skip(f"no local SLURM cluster: slurmd -C does not describe this host ({exc})")
    cluster = Cluster(tmp_path_factory.mktemp("slurm"), node)
    try:
        why = _start(cluster)
    except Exception:
        cluster.stop()
        raise
    if why:
        cluster.stop()
        pytest.skip(f"no local SLURM cluster: {why}")
    yield cluster
    cluster.stop()


def snakemake(work: Path, profiles: list[str], *args: str, env=None, timeout=600):
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(work),
        *(a for p in profiles for a in ("--profile", str(REPO / "workflows" / "profile" / p))),
        "--config",
        f"sweeps={work / 'sweeps'}/*.yaml",
        "calibrate=off",
        *args,
    ]
    env = env or {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, timeout=timeout)


# This cluster has no accounting (so no sacct) and keeps finished jobs for MinJobAge: the
# status comes from squeue. Short polling keeps the test quick; job logs are kept to look at.
SLURM_TEST_ARGS = (
    "--slurm-status-command",
    "squeue",
    "--slurm-init-seconds-before-status-checks",
    "1",
    "--seconds-between-status-checks",
    "1",
    "--slurm-keep-successful-logs",
    "--slurm-no-account",
    "--latency-wait",
    "5",
)


@dataclass
class Runs:
    local: Path
    cluster: Path
    seconds: dict[str, float]
    jobs_seen: dict[str, tuple[str, str, str]]  # job id -> (state, node, comment), from squeue
    stderr: str


@pytest.fixture(scope="module")
def runs(slurm_cluster, tmp_path_factory):
    dirs = {}
    for kind in ("local", "cluster"):
        dirs[kind] = tmp_path_factory.mktemp(kind)
        (dirs[kind] / "sweeps").mkdir()
        (dirs[kind] / "sweeps" / "tiny.yaml").write_text(SWEEP)
    seconds = {}
    start = time.monotonic()
    proc = snakemake(dirs["local"], ["."], "--cores", "2")
    seconds["local"] = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr[-3000:]

    seen: dict[str, tuple[str, str, str]] = {}
    done = threading.Event()

    def watch() -> None:  # what squeue shows while the run goes on
        while not done.is_set():
            for line in slurm_cluster.run(
                "squeue", "-h", "--states=all", "-o", "%i|%T|%N|%k"
            ).splitlines():
                job, state, node, comment = (line.split("|", 3) + ["", "", ""])[:4]
                seen[job] = (state, node, comment)
            done.wait(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    start = time.monotonic()
    try:
        proc = snakemake(dirs["cluster"], [".", "slurm"], *SLURM_TEST_ARGS, env=slurm_cluster.env())
    finally:
        seconds["cluster"] = time.monotonic() - start
        done.set()
        watcher.join(timeout=10)
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(f"\nlocal run {seconds['local']:.1f} s, SLURM run {seconds['cluster']:.1f} s")
    return Runs(dirs["local"], dirs["cluster"], seconds, seen, proc.stderr)


def merged(work: Path) -> pd.DataFrame:
    return pd.read_csv(work / "results" / "sqlite" / "tiny.csv")


def test_the_cluster_measures_the_same_points_and_repetitions_as_this_machine(runs):
    local, cluster = merged(runs.local), merged(runs.cluster)
    assert len(local) == len(cluster) == POINTS * 2
    reps = ["point_id", "rep"]
    keys = [sorted(map(tuple, f[reps].to_numpy())) for f in (local, cluster)]
    assert keys[0] == keys[1]
    for col in ("knob_buffer_pool", "applied_buffer_pool", "cache_requested", "rows_touched"):
        pair = [f.sort_values(reps)[col].tolist() for f in (local, cluster)]
        assert pair[0] == pair[1], col
    assert set(local.columns) == set(cluster.columns)  # SLURM's columns are there, empty
    assert cluster["elapsed_s"].gt(0).all()


def test_every_row_records_its_host_slurm_job_and_node(runs, slurm_cluster):
    local, cluster = merged(runs.local), merged(runs.cluster)
    assert set(cluster["host_name"]) == {platform.node()} == set(local["host_name"])
    assert local["slurm_job_id"].isna().all() and local["slurm_node"].isna().all()
    assert set(cluster["slurm_node"]) == {slurm_cluster.node}
    assert cluster["slurm_job_id"].nunique() == 1  # the whole sweep in one cluster job
    assert cluster["slurm_job_id"].notna().all()


def test_one_cluster_job_measures_the_whole_sweep_on_one_node(runs, slurm_cluster):
    job = str(int(merged(runs.cluster)["slurm_job_id"].iloc[0]))
    logs = runs.cluster / ".snakemake" / "slurm_logs"
    (log,) = logs.glob(f"group_measure-tiny_*/{job}.log")
    # The group job ran the sweep's points, its merge, report and claim check.
    for rule in ("measure_point", "merge_sweep", "sweep_report", "check_sweep"):
        assert rule in log.parent.name
    text = log.read_text(errors="replace")
    points = set(merged(runs.cluster)["point_id"])
    assert {p for p in points if f"point={p}" in text} == points
    assert not list(logs.glob("rule_measure_point*"))  # no cluster job of a single point
    state, node, comment = runs.jobs_seen[job]
    assert node == slurm_cluster.node and comment.startswith("rule_measure-tiny_")
    submitted = re.findall(
        r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/([a-z]+)_", runs.stderr
    )
    assert [j for j, kind in submitted if kind == "group"] == [job], submitted


def test_timed_sections_of_the_cluster_job_never_overlap(runs):
    rows = merged(runs.cluster).sort_values("timed_start_ns")
    starts, ends = rows["timed_start_ns"].to_numpy(), rows["timed_end_ns"].to_numpy()
    assert (starts[1:] >= ends[:-1]).all()


def test_results_logs_and_reports_land_in_the_run_directory_as_on_one_machine(runs):
    for work in (runs.local, runs.cluster):
        assert (work / "reports" / "index.html").is_file()
        assert 'href="sqlite/tiny.html"' in (work / "reports" / "index.html").read_text()
        assert len(list((work / "results" / "sqlite" / "tiny").glob("*.check.json"))) == POINTS
        assert len(list((work / "logs" / "sqlite" / "tiny").glob("*.log"))) == POINTS
        assert (work / "reports" / "sqlite" / "tiny.verdicts.json").is_file()
    job = str(int(merged(runs.cluster)["slurm_job_id"].iloc[0]))
    report = (runs.cluster / "reports" / "sqlite" / "tiny.html").read_text()
    assert f"The points ran in SLURM job {job} on node " in report
    assert "Measured on 2 hosts" not in report
