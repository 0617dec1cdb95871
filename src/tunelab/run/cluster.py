"""A workflow run whose jobs run on a cluster (Snakemake's SLURM or Kubernetes executor).

There every job is a Snakemake process of its own, on some node, started from the submitting
run with the run's environment (a SLURM job inherits it; the Snakefile declares the variables
a Kubernetes job needs). What a run keeps across its processes:

- **one run id** (``$TUNELAB_RUN_ID``, set by the submitting run): the points of one cluster
  job share a kept server and the run's built tables as the points of a local run do, and
  the run's end removes what carries its id;
- **one owner per node**: the outermost job process of the run on a node (a group job, which
  measures one sweep's points one after the other) names itself the owner of what the points
  start there (``$TUNELAB_OWNER_PID``), so `tunelab recover` on that node tells a live job
  from a killed one; at its end it removes the containers it owns there and, once no
  container of the run is left on the node, the node's part of the run directory
  (``<workdir>/runs/<run id>/hosts/<host>``, see ``tunelab.engines.server.host_dir``). The
  submitting run's end removes the rest, as on one machine.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import sys
import uuid
from pathlib import Path

from tunelab.host import ownership

RUN_ID_ENV = "TUNELAB_RUN_ID"
NODE_JOB_ENV = "TUNELAB_NODE_JOB"  # the pid of the run's outermost job process on this node


def run_id() -> str:
    """The run's id: the submitting run's, when this process is one of its jobs."""
    return os.environ.setdefault(RUN_ID_ENV, uuid.uuid4().hex[:12])


def own_node_job(run: str, workdir: str | Path) -> bool:
    """In a job process on a cluster node: make the outermost one of the run the owner of
    what its points start on this node, and have it release them when it ends. False (and
    nothing done) in a job that such a process started."""
    if os.environ.get(NODE_JOB_ENV):
        return False
    os.environ[NODE_JOB_ENV] = str(os.getpid())
    os.environ[ownership.OWNER_PID_ENV] = str(os.getpid())
    atexit.register(release_host, run, workdir)
    return True


def release_host(run: str, workdir: str | Path) -> list[str]:
    """Remove the containers this process owns for ``run`` on this host's Docker (those its
    points started, by their owner labels) and, when no container of the run is left here,
    this host's part of the run directory and the run's network. Returns what was removed."""
    from tunelab.engines.server import host_dir

    removed: list[str] = []
    left = 0
    try:
        from tunelab.host import containers

        c = containers.client()
        of_run = [f"{containers.LABEL}=1", f"{containers.RUN_LABEL}={run}"]
        owned = [
            *of_run,
            f"{ownership.PID_LABEL}={os.getpid()}",
            f"{ownership.HOST_LABEL}={socket.gethostname()}",
        ]
        for container in c.containers.list(all=True, filters={"label": owned}):
            container.remove(force=True, v=True)
            removed.append(container.name)
        left = len(c.containers.list(all=True, filters={"label": of_run}))
        if not left:
            containers._drop_network(run)
    except Exception:  # no Docker on this node: no container of it either
        pass
    mine = host_dir(Path(workdir) / "runs" / run)
    if not left and mine.exists():
        from tunelab.host import blockdev

        blockdev.release_under(mine, lambda _: None)  # os_read_ahead devices, before their files
        shutil.rmtree(mine, ignore_errors=True)
        removed.append(str(mine))
    if removed:
        print(f"tunelab: released run {run} on this node: {', '.join(removed)}", file=sys.stderr)
    return removed
