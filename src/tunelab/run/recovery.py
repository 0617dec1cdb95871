"""Recovery from killed runs: removing what runs whose owner is gone left (the owner record:
``tunelab.host.ownership``).

``tunelab recover`` removes, for one checkout, the containers, volumes, networks, engine data
and secrets of runs whose owner is gone, and Snakemake's lock when no live process of the
checkout can hold it. A run whose owner is alive, or owned by another host, or still named
by a live job (``--run-id``), is never touched.

``tunelab clean`` removes the lab's containers, networks and volumes of one run, of this
checkout or of every checkout on the host, live runs' too, and the engine data they left.

Both remove folders only in a work directory the lab made, and of its runs' and points'
folders only those the lab stamped as it made them (``ownership.make_dir``); one it did not
make is left alone and named. A work directory that holds files but no stamp (say
``--config workdir=~/experiments``) is refused, in one line.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunelab.host import blockdev, containers, jobs, ownership
from tunelab.host.ownership import WORKDIR_LABEL, Owner, Proc, processes, start_time

# What `tunelab` does as a workflow job (tunelab.host.jobs).
JOB_COMMANDS = frozenset(jobs.JOB_COMMANDS)


def is_snakemake(p: Proc) -> bool:
    """Snakemake, as a user starts it or as `./lab run` does."""
    return bool({"snakemake", *jobs.SNAKEMAKE_MODULES} & p.names())


def lock_holders(checkout: Path, procs: Iterable[Proc]) -> list[Proc]:
    """Live processes that may hold this checkout's Snakemake lock: Snakemake, or a lab job
    (a killed Snakemake's jobs run on), working in the checkout. A Snakemake whose working
    directory cannot be read counts too: it cannot be told apart."""
    checkout = Path(checkout).resolve()

    def may_hold(p: Proc) -> bool:
        names = p.names()
        if p.cwd is None:
            return is_snakemake(p)
        if p.cwd != checkout:
            return False
        if jobs.SERVER_MODULE in names:  # a run's job server stands for the jobs it forked
            return True
        return is_snakemake(p) or ("tunelab" in names and bool(JOB_COMMANDS & set(p.argv)))

    return [p for p in procs if may_hold(p)]


def orphaned_job_servers(checkout: Path, procs: Iterable[Proc]) -> list[Proc]:
    """Job servers (``jobs.SERVER_MODULE``) of this checkout whose workflow, the process named
    by their ``--owner``, is gone: a killed run's, still ending its jobs."""
    checkout = Path(checkout).resolve()
    found = []
    for p in procs:
        if jobs.SERVER_MODULE not in p.names() or p.cwd != checkout:
            continue
        owner = next((b for a, b in zip(p.argv, p.argv[1:]) if a == "--owner"), "")
        if owner.isdigit() and start_time(int(owner)) is None:
            found.append(p)
    return found


def _stop_job_servers(servers: list[Proc], say: Callable[[str], None], wait_s: float = 30) -> None:
    """Stop a killed run's job servers (each stops its jobs first: SIGTERM, so a measurement
    removes its containers) and wait for them, so their jobs hold no lock after this."""
    for p in servers:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while any(start_time(p.pid) is not None for p in servers) and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = ", ".join(str(p.pid) for p in servers)
    say(f"stopped the job server of a killed run (pid {pids}) and the jobs it still ran")


# -- the work directory ----------------------------------------------------------------------
DEFAULT_WORKDIR = ".tunelab"  # workflows/config.yaml's, relative to the checkout


class ForeignWorkdir(ValueError):
    """The work directory holds files but the lab did not make it: one line."""


def own_workdir(workdir: Path, checkout: Path, make: bool = True) -> bool:
    """Whether ``workdir`` is the lab's: made (and stamped) now when missing (``make``) or
    empty, stamped already, or the default one in the checkout (the lab's before it stamped
    its folders). False when it is missing and not made; ForeignWorkdir when it is another's."""
    workdir = Path(workdir).resolve()  # a link to it (a default .tunelab kept elsewhere) too
    if not os.path.lexists(workdir):
        if make:
            ownership.make_dir(workdir)
        return make
    if ownership.made_by_lab(workdir):
        return True
    default = (Path(checkout) / DEFAULT_WORKDIR).resolve()
    if workdir.is_dir() and (workdir == default or not any(workdir.iterdir())):
        ownership.stamp(workdir)
        return True
    raise ForeignWorkdir(
        f"config workdir: {workdir} holds files the lab did not make (no {ownership.STAMP} "
        f"in it): name a new or empty folder, or the lab's own (default {DEFAULT_WORKDIR}); a "
        f"work directory an older lab made takes `touch {workdir / ownership.STAMP}`"
    )


def _not_made(d: Path) -> str:
    return (
        f"left alone: {d}: the lab did not make it (no {ownership.STAMP} in it); remove it "
        "yourself if it is engine data"
    )


# -- reaping ---------------------------------------------------------------------------------
@dataclass
class _Run:
    run_id: str
    directory: Path | None = None
    owners: set[Owner] = field(default_factory=set)
    containers: list[Any] = field(default_factory=list)
    networks: list[Any] = field(default_factory=list)
    volumes: list[Any] = field(default_factory=list)


def _docker_leftovers(workdir: Path, runs: dict[str, _Run]) -> None:
    """Add this checkout's containers, networks and volumes to ``runs`` (none when Docker
    does not answer: then only the work directory is looked at)."""
    try:
        c = containers.client()
    except containers.ContainerError:
        return
    mine = {"label": [f"{containers.LABEL}=1", f"{WORKDIR_LABEL}={workdir}"]}
    found: list[tuple[str, Any]] = [
        *(("containers", x) for x in c.containers.list(all=True, filters=mine)),
        *(("networks", x) for x in c.networks.list(filters=mine)),
        *(("volumes", x) for x in c.volumes.list(filters=mine)),
    ]
    # Runs with a directory here but no labelled work directory: started before owners
    # were recorded.
    for run_id, run in runs.items():
        if not run.owners:
            of_run = {"label": [f"{containers.LABEL}=1", f"{containers.RUN_LABEL}={run_id}"]}
            found += [("containers", x) for x in c.containers.list(all=True, filters=of_run)]
    seen = set()
    for kind, obj in found:
        key = getattr(obj, "id", None) or obj.name
        if key in seen:
            continue
        seen.add(key)
        labels = obj.attrs.get("Labels") if kind != "containers" else obj.labels
        labels = labels or {}
        run_id = labels.get(containers.RUN_LABEL)
        if not run_id:
            continue
        run = runs.setdefault(run_id, _Run(run_id))
        getattr(run, kind).append(obj)
        if (owner := Owner.from_labels(labels)) is not None:
            run.owners.add(owner)


def _why_kept(run: _Run, procs: list[Proc], holders: list[Proc]) -> str | None:
    """Why ``run`` must be left alone (None: its owner is gone and nothing runs it). Silent
    (empty) when its owner is simply alive."""
    states = {o.state() for o in run.owners}
    if "alive" in states:
        return ""
    if "elsewhere" in states:
        hosts = sorted(o.host for o in run.owners if o.state() == "elsewhere")
        return f"left alone: run {run.run_id} belongs to host {', '.join(hosts)}"
    for p in procs:
        if p.names_run(run.run_id):
            return (
                f"left alone: run {run.run_id} has lost its owner but pid {p.pid} still runs "
                f"it ({' '.join(p.argv)[:120]})"
            )
    if not run.owners and holders:
        # No owner recorded (an older run): only safe when nothing of the checkout runs.
        return ""
    return None


def _remove(kind: str, obj: Any) -> None:
    if kind == "container":
        obj.remove(force=True, v=True)  # with its anonymous volumes
    elif kind == "volume":
        obj.remove(force=True)
    else:
        containers.remove_network(obj)


def _reap(run: _Run, say: Callable[[str], None]) -> None:
    from docker.errors import NotFound

    owners = ", ".join(sorted(o.describe() for o in run.owners)) or "no owner recorded"
    why = f"run {run.run_id}, owner gone: {owners}"
    # Containers first: a network cannot go while a container is on it.
    for kind, objs in (
        ("container", run.containers),
        ("volume", run.volumes),
        ("network", run.networks),
    ):
        for obj in objs:
            try:
                _remove(kind, obj)
            except NotFound:
                continue
            except Exception as exc:  # keep removing the rest; say what stays
                say(f"could not remove {kind} {obj.name}: {' '.join(str(exc).split())}")
                continue
            say(f"removed {kind} {obj.name} ({why})")
    if run.directory is None or not run.directory.exists():
        return
    if not ownership.made_by_lab(run.directory):
        say(_not_made(run.directory))
        return
    blockdev.release_under(run.directory, say)  # its devices, before their files go
    shutil.rmtree(run.directory, ignore_errors=True)
    if run.directory.exists():
        say(f"could not remove all of {run.directory} (files of another user?)")
    else:
        say(f"removed engine data and secret in {run.directory} ({why})")


def _inside(folder: Path) -> list[Path]:
    """What a folder of the work directory holds, but the lab's stamp."""
    return sorted(d for d in folder.glob("*") if d.name != ownership.STAMP)


def _point_dirs(workdir: Path) -> list[Path]:
    return [d for n in ("points", "trace") for d in _inside(workdir / n)]


def _stray_devices(workdir: Path) -> list[Path]:
    """Where the lab's devices (os_read_ahead) lie outside the runs' directories: those of
    points measured without a run (``points/``) or of a sweep's points (``sweeps/``), whose
    measurement holds the bench lock while they exist. Their records (a file left after a
    reboot), and the loop devices attached to a file there."""
    found = {
        root for n in ("points", "trace", "sweeps") for root in blockdev.records_under(workdir / n)
    }
    for loop in blockdev.loops_backed_under(workdir):
        backing = Path(blockdev.backing_file(loop) or "")
        if not backing.is_relative_to(workdir / "runs"):
            found.add(backing.parent)
    return sorted(found)


def _others() -> list[Proc]:
    """The processes, but for the job server `./lab run` started for the run it prepares
    (jobs.STANDBY_ENV): no run's yet, it holds nothing."""
    own = os.environ.get(jobs.STANDBY_ENV, "").partition(":")[0]
    return [p for p in processes() if str(p.pid) != own]


def recover(workdir: Path, checkout: Path, say: Callable[[str], None] = print) -> None:
    """Remove what killed runs of this checkout left: see the module's description."""
    from tunelab.host import benchlock

    workdir, checkout = Path(workdir).resolve(), Path(checkout).resolve()
    own_workdir(workdir, checkout)
    # Snakemake's lock files are listed before the processes are read: one that a Snakemake
    # starting meanwhile writes is not in the list, so it stays.
    lockdir = checkout / ".snakemake" / "locks"
    lock_files = sorted(p for p in lockdir.glob("*.lock") if p.is_file())
    procs = _others()
    servers = orphaned_job_servers(checkout, procs)
    if servers:  # they end by themselves within a second or two; not beside this
        _stop_job_servers(servers, say)
        procs = _others()
    holders = lock_holders(checkout, procs)
    runs: dict[str, _Run] = {}
    for d in sorted((workdir / "runs").glob("*")):
        if d.is_dir():
            run = runs.setdefault(d.name, _Run(d.name))
            run.directory = d
            if (owner := Owner.read(d)) is not None:
                run.owners.add(owner)
    _docker_leftovers(workdir, runs)
    dead, kept = [], 0
    for run in runs.values():
        why = _why_kept(run, procs, holders)
        if why is None:
            dead.append(run)
            continue
        kept += 1
        if why:
            say(why)
    # Point and trace directories exist only while their measurement holds the bench lock:
    # with no job and no live run of the checkout, the ones there were left by killed jobs.
    idle = not holders and not kept
    strays = _stray_devices(workdir)
    found = _point_dirs(workdir) if idle else []
    points = [d for d in found if ownership.made_by_lab(d)]
    for d in found:
        if d not in points:
            say(_not_made(d))
    reap_points = idle and bool(points or strays)
    if dead or reap_points:
        if benchlock.held_exclusively():
            say("waiting for the measurement that holds the bench lock to end")
        with benchlock.shared("recover"):  # removing during a timed section would disturb it
            for run in dead:
                _reap(run, say)
            for root in strays if reap_points else []:
                blockdev.release_under(root, say)
            points = points if reap_points else []
            for d in points:
                shutil.rmtree(d, ignore_errors=True)
            if points:
                where = ", ".join(sorted({str(d.parent) for d in points}))
                say(f"removed engine data of {len(points)} killed point job(s) in {where}")
    _unlock(lockdir, lock_files, holders, say)


class RunInProgress(RuntimeError):
    """Snakemake's lock of this checkout is held by a live run: one line naming it."""

    def __init__(self, holders: list[Proc]):
        first = next((p for p in holders if is_snakemake(p)), holders[0])
        started = _started_at(first.pid)
        since = f", started {started}" if started else ""
        super().__init__(
            f"another run is in progress in this checkout (pid {first.pid}{since}): wait for it "
            f"to end, or stop it (kill {first.pid}), then run again; its lock is not stale"
        )


def _started_at(pid: int) -> str:
    """When a live process started, as local wall-clock time ("" when unknown)."""
    ticks = start_time(pid)
    try:
        boot = next(
            int(x.split()[1])
            for x in Path("/proc/stat").read_text().splitlines()
            if x.startswith("btime ")
        )
    except (OSError, StopIteration, ValueError):
        return ""
    if ticks is None:
        return ""
    at = boot + ticks / os.sysconf("SC_CLK_TCK")
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _unlock(
    lockdir: Path, files: list[Path], holders: list[Proc], say: Callable[[str], None]
) -> None:
    """Remove Snakemake's lock files when no live process of the checkout can hold them."""
    if not files:
        return
    if holders:
        raise RunInProgress(holders)
    for f in files:
        with contextlib.suppress(FileNotFoundError):
            f.unlink()
    say(f"removed a stale Snakemake lock ({len(files)} file(s) in {lockdir}) left by a killed run")
    # An output the killed run had started is marked incomplete, and Snakemake reruns it; but
    # where that output exists (its job ended, the run was killed before it noted so), it
    # schedules that one job and nothing else (9.27: after a kill right after a data set was
    # generated, the next run generated it again and stopped). Without the file, the job is
    # simply missing and the whole workflow runs.
    started = incomplete_outputs(lockdir.parent.parent)
    for f in started:
        with contextlib.suppress(FileNotFoundError):
            f.unlink()
    if started:
        names = ", ".join(str(f) for f in started[:3]) + (" …" if len(started) > 3 else "")
        say(f"removed {len(started)} output(s) a killed run had not finished: {names}")


def incomplete_outputs(checkout: Path) -> list[Path]:
    """The existing files that Snakemake marked incomplete in the checkout (one marker file
    per output: its path, base64-encoded, split into directories where it is long)."""
    markers = checkout / ".snakemake" / "incomplete"
    found = []
    for marker in sorted(markers.rglob("*")):
        if not marker.is_file():
            continue
        try:
            name = base64.urlsafe_b64decode("".join(marker.relative_to(markers).parts)).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue  # not a marker of Snakemake's
        path = Path(name) if os.path.isabs(name) else checkout / name
        if path.is_file():
            found.append(path)
    return found


def recover_main(argv: list[str] | None = None) -> int:
    """``tunelab recover [--workdir DIR] [--checkout DIR]``."""
    parser = argparse.ArgumentParser(
        prog="tunelab recover",
        description="Remove what killed runs of this checkout left: containers, networks, "
        "volumes, engine data and secrets of runs whose owning process is gone, and a stale "
        "Snakemake lock. Runs whose owner is alive (or on another host) are left alone. "
        "`./lab run` does this before every run.",
    )
    parser.add_argument("--workdir", default=".tunelab", help="the engine data directory")
    parser.add_argument(
        "--checkout", default=".", help="the directory Snakemake runs in (its lock is there)"
    )
    args = parser.parse_args(argv)
    try:
        recover(Path(args.workdir), Path(args.checkout))
    except ForeignWorkdir as exc:
        print(f"tunelab recover: {exc}", file=sys.stderr)
        return 2
    except RunInProgress as exc:
        print(f"tunelab recover: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # Docker errors and the like: one line, no traceback
        why = " ".join(str(exc).split()) or type(exc).__name__
        print(f"tunelab recover: {why}", file=sys.stderr)
        return 1
    return 0


# -- clean-up of whatever the lab left behind, live runs' too --------------------------------
def clean(
    run_id: str | None = None, *, workdir: Path | None = None, everything: bool = False
) -> list[str]:
    """Remove the containers, volumes and networks carrying the lab's label: one run's, one
    checkout's (labelled with its work directory, or of a run whose directory is in it), or,
    with ``everything``, every checkout's on this host. Returns the names of what was
    removed (volumes as ``volume:<name>``, networks as ``network:<name>``)."""
    from docker.errors import APIError, NotFound

    c = containers.client()
    if run_id:
        scopes = [[f"{containers.LABEL}=1", f"{containers.RUN_LABEL}={run_id}"]]
    elif everything:
        scopes = [[f"{containers.LABEL}=1"]]
    elif workdir is not None:
        wd = Path(workdir).resolve()
        runs = sorted(d.name for d in (wd / "runs").glob("*") if ownership.made_by_lab(d))
        scopes = [[f"{containers.LABEL}=1", f"{WORKDIR_LABEL}={wd}"]]
        scopes += [[f"{containers.LABEL}=1", f"{containers.RUN_LABEL}={r}"] for r in runs]
    else:
        raise ValueError("clean: name a run, a work directory or everything")

    def found(collection: Any, **kw: Any) -> list[Any]:
        seen: dict[str, Any] = {}
        for labels in scopes:
            for obj in collection.list(filters={"label": labels}, **kw):
                seen.setdefault(obj.id, obj)
        return list(seen.values())

    removed = []
    for container in found(c.containers, all=True):
        try:
            container.remove(force=True, v=True)
        except NotFound:
            continue
        removed.append(container.name)
        containers.forget(container.id)
    for volume in found(c.volumes):
        try:
            volume.remove(force=True)
        except NotFound:
            continue
        removed.append(f"volume:{volume.name}")
    for network in found(c.networks):
        try:
            containers.remove_network(network)
        except NotFound:
            continue
        except APIError as exc:
            why = " ".join(str(exc).split()) or type(exc).__name__
            print(f"tunelab: network {network.name} left: {why}", file=sys.stderr)
            continue
        removed.append(f"network:{network.name}")
    return removed


def clean_main(argv: list[str] | None = None) -> int:
    """``tunelab clean [--run RUN | --all [--yes]] [--workdir DIR]``."""
    parser = argparse.ArgumentParser(
        prog="tunelab clean",
        description="Remove this checkout's lab containers, networks and volumes (labelled "
        f"{containers.LABEL}=1 and with its work directory), live runs' too, and the engine "
        "data left in its work directory. For what killed runs left, `tunelab recover` is "
        "enough: it leaves live runs alone.",
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--run", metavar="RUN", help="only that run's (and its engine data)")
    scope.add_argument(
        "--all",
        action="store_true",
        help="every checkout's on this host, live runs' too (asks first; --yes when not on a "
        "terminal)",
    )
    parser.add_argument("--yes", action="store_true", help="with --all: do not ask")
    parser.add_argument(
        "--workdir", default=".tunelab", help="this checkout's engine data directory"
    )
    args = parser.parse_args(argv)
    workdir = Path(args.workdir)
    try:
        if not args.run:  # one run's folder goes only when stamped, in any work directory
            own_workdir(workdir, Path.cwd(), make=False)
    except ForeignWorkdir as exc:
        print(f"tunelab clean: {exc}", file=sys.stderr)
        return 2
    try:
        if args.all and not args.yes and not _confirm_all():
            return 2
        removed = clean(args.run, workdir=workdir, everything=args.all)
    except containers.ContainerError as exc:
        print(f"tunelab clean: {exc}", file=sys.stderr)
        return 1
    if args.run:
        where = f" of run {args.run}"
    elif args.all:
        where = " on this host"
    else:
        where = f" of the checkout working in {workdir.resolve()}"
    if removed:
        print(f"removed {len(removed)}{where}: {', '.join(removed)}")
    else:
        print(f"nothing to remove{where}")
    print(_clean_workdir(workdir, args.run))
    return 0


def _confirm_all() -> bool:
    """Ask on a terminal; elsewhere refuse (one line) without ``--yes``."""
    if not sys.stdin.isatty():
        print(
            "tunelab clean: --all removes every checkout's lab containers on this host, live "
            "runs' too: add --yes to confirm",
            file=sys.stderr,
        )
        return False
    count = len(
        containers.client().containers.list(all=True, filters={"label": f"{containers.LABEL}=1"})
    )
    answer = input(
        f"remove the lab's {count} container(s), networks and volumes of every checkout on "
        "this host, live runs' too? [y/N] "
    )
    if answer.strip().lower() in ("y", "yes"):
        return True
    print("nothing removed", file=sys.stderr)
    return False


def _clean_workdir(workdir: Path, run_id: str | None = None) -> str:
    """Remove engine data left by points and runs (only ``run_id``'s when given), unless a
    measurement holds the host-wide bench lock (removing would disturb its timed sections).
    Of the runs', points' and traces' folders, only those the lab made go."""
    from tunelab.host import benchlock

    folders = [workdir / n for n in ("points", "trace", "runs")]
    if run_id:
        found = [workdir / "runs" / run_id]
    else:  # the tables runs keep for later runs (SQLite's files) and sweeps' data go too
        found = [d for f in folders for d in _inside(f)]
        found += [workdir / n for n in ("tables", "sweeps")]
    found = [d for d in found if os.path.lexists(d)]
    leftovers = [d for d in found if ownership.made_by_lab(d) or d.parent == workdir]
    kept = [str(d) for d in found if d not in leftovers]
    said = f"; left alone, not made by the lab: {', '.join(kept)}" if kept else ""
    if not leftovers:
        return f"no engine data left in {workdir}{said}"
    if benchlock.held_exclusively():
        return f"a measurement is running: engine data in {workdir} left alone"
    with benchlock.shared("clean"):  # no measurement starts while the data goes
        for d in leftovers:
            blockdev.release_under(d, lambda _: None)  # the devices first: files on them go
            shutil.rmtree(d, ignore_errors=True)
        for f in folders if not run_id else []:
            if ownership.made_by_lab(f) and not _inside(f):  # emptied: it goes too
                shutil.rmtree(f, ignore_errors=True)
    return f"removed engine data left in {', '.join(map(str, leftovers))}{said}"
