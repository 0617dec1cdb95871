from __future__ import annotations

import os
import re
import signal
import subprocess
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    # Started from a background job, nohup or cron, the tests may inherit SIGINT as ignored,
    # and an ignored signal stays ignored across exec: every child would ignore the SIGINT a
    # test sends it. A handler, unlike SIG_IGN, is reset to the default in a child.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


SESSION_CPUS = frozenset(os.sched_getaffinity(0))


@pytest.fixture(autouse=True)
def _session_cpus_after_each_test():
    """A test measuring a server engine in this process pins it to the client's CPU (once per
    measuring process: tunelab.measure.runner), and every later test, with every `./lab run` it
    starts, inherited one CPU of two: the fault matrix's runs took 1.4x as long in the suite
    as alone. The CPUs go back after each test, and the next one pins anew."""
    yield
    if frozenset(os.sched_getaffinity(0)) != SESSION_CPUS:
        from tunelab.host import noise
        from tunelab.measure import runner

        noise.unpin_client(noise.Placement(tuple(sorted(SESSION_CPUS))))
        runner._PLACEMENT.clear()
        assert frozenset(os.sched_getaffinity(0)) == SESSION_CPUS


def workflow_failure(work: Path, proc: subprocess.CompletedProcess) -> str:
    """The end of a failed workflow's stderr and of each failed job's own log, where the
    job's error is (Snakemake's stderr names the log, not what is in it)."""
    text = proc.stderr[-3000:]
    for log in dict.fromkeys(re.findall(r"> (logs/\S+\.log) 2>&1' returned non-zero", proc.stderr)):
        path = work / log
        if path.is_file():
            text += f"\n--- {log}:\n" + path.read_text(errors="replace")[-3000:]
    return text


@pytest.fixture
def write_sweep(tmp_path: Path):
    """Write a sweep YAML (dedented) into tmp_path and return its path."""

    def write(text: str, name: str = "sweep.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture(scope="session")
def image() -> str:
    """The lab's MariaDB image (built from Debian's packages when missing); skips with the
    reason when no Docker engine is reachable."""
    from tunelab.host import containers

    reason = containers.docker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    from tunelab import engines
    from tunelab.engines.images import ensure_image

    return ensure_image("mariadb", engines.info("mariadb").image)


def tiny_fio_plan():
    """A short calibration plan: every kind of fio measurement, two repetitions, about 5 s."""
    from tunelab.calibrate import measure

    return measure.Plan(
        file_bytes=16 << 20,
        runtime_ms=100,
        repetitions=2,
        random_pages=(4096, 8192),
        seq_pages=(4096, 32768),
        write_pages=(1, 8, 64),
    )


def _server_run(rc, program: str) -> tuple[str, set[str]]:
    from tunelab.host import containers

    started = containers.client().containers.get(rc.id).attrs["State"]["StartedAt"]
    code, out = rc.exec(["sh", "-c", "grep -lx '" + program + "' /proc/[0-9]*/comm || true"])
    assert code == 0, out
    return started, {line.split("/")[2] for line in out.split() if line.startswith("/proc/")}


@pytest.fixture
def server_run():
    """``server_run(running_container, program)``: the container's start time (docker's)
    and the pids, inside it, of ``program``; a restart in place keeps the first and changes
    the second."""
    return _server_run
