"""Who owns a run: the record that tells a live run's leftovers from a killed one's; and the
stamp that tells the lab's folders from anyone else's.

Every container and run network the lab starts, and every run directory under the work
directory (``runs/<run id>/owner.json``), names its owner: the host, the boot, the pid of the
process that runs the workflow (Snakemake, which exports ``TUNELAB_OWNER_PID``; else the
process itself), that process's start time (so a reused pid is not taken for the owner) and
the checkout's work directory. ``tunelab.run.recovery`` reaps what an owner that is gone left.

Every folder the lab makes for its engines' data (``make_dir``: the work directory, a run's,
a point's) holds a stamp (``.tunelab-made``) written as it is made: ``tunelab recover`` and
``tunelab clean`` remove only stamped folders, never one the lab found there.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

OWNER_PID_ENV = "TUNELAB_OWNER_PID"  # the pid of the process that owns the run (Snakemake)
WORKDIR_ENV = "TUNELAB_WORKDIR"  # the checkout's work directory, when no run directory says it
OWNER_FILE = "owner.json"
STAMP = ".tunelab-made"  # in each folder the lab made (make_dir)

HOST_LABEL = "tunelab.owner.host"
BOOT_LABEL = "tunelab.owner.boot"
PID_LABEL = "tunelab.owner.pid"
START_LABEL = "tunelab.owner.start"
WORKDIR_LABEL = "tunelab.workdir"


# -- processes -------------------------------------------------------------------------------
def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def start_time(pid: int) -> int | None:
    """The start time of a live process (clock ticks after boot, /proc/<pid>/stat field 22);
    None when there is no such process or it has exited (a zombie)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    rest = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces
    if rest[0] in ("Z", "X"):
        return None
    return int(rest[19])


@dataclass(frozen=True)
class Proc:
    pid: int
    argv: tuple[str, ...]
    cwd: Path | None  # None: not readable (another user's process)

    def names(self) -> set[str]:
        """The program names of the command line: the interpreter's and its script's."""
        names = {os.path.basename(a) for a in self.argv[:2]}
        if "-m" in self.argv[:-1]:
            names.add(self.argv[self.argv.index("-m") + 1])
        return names

    def names_run(self, run_id: str) -> bool:
        args = self.argv
        return f"--run-id={run_id}" in args or any(
            a == "--run-id" and b == run_id for a, b in zip(args, args[1:])
        )


def processes() -> list[Proc]:
    """Every live process but this one."""
    out = []
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            raw = Path(entry.path, "cmdline").read_bytes()
        except OSError:
            continue  # exited meanwhile
        if not raw:
            continue  # a kernel thread or a zombie: holds nothing
        argv = tuple(a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0"))
        try:
            cwd: Path | None = Path(os.readlink(Path(entry.path, "cwd")))
        except PermissionError:
            cwd = None
        except OSError:
            continue
        out.append(Proc(int(entry.name), argv, cwd))
    return out


# -- owners ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Owner:
    """The process a run belongs to, and the checkout's work directory."""

    host: str
    boot: str
    pid: int
    start: int
    workdir: str = ""  # absolute; empty when not known

    @classmethod
    def current(cls, workdir: Path | str | None = None) -> Owner:
        """This run's owner: ``$TUNELAB_OWNER_PID`` when it names a live process, else this
        process; the work directory given, else ``$TUNELAB_WORKDIR``."""
        pid = os.getpid()
        named = os.environ.get(OWNER_PID_ENV, "")
        if named.isdigit() and start_time(int(named)) is not None:
            pid = int(named)
        wd = workdir or os.environ.get(WORKDIR_ENV) or ""
        return cls(
            socket.gethostname(),
            boot_id(),
            pid,
            start_time(pid) or 0,
            str(Path(wd).resolve()) if wd else "",
        )

    def state(self) -> str:
        """``alive``, ``gone`` (exited, or the host rebooted) or ``elsewhere`` (another host's:
        not this host's to judge)."""
        if self.host != socket.gethostname():
            return "elsewhere"
        if self.boot != boot_id() or start_time(self.pid) != self.start:
            return "gone"
        return "alive"

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"

    def labels(self) -> dict[str, str]:
        out = {
            HOST_LABEL: self.host,
            BOOT_LABEL: self.boot,
            PID_LABEL: str(self.pid),
            START_LABEL: str(self.start),
        }
        if self.workdir:
            out[WORKDIR_LABEL] = self.workdir
        return out

    @classmethod
    def from_labels(cls, labels: dict[str, str]) -> Owner | None:
        try:
            return cls(
                labels[HOST_LABEL],
                labels[BOOT_LABEL],
                int(labels[PID_LABEL]),
                int(labels[START_LABEL]),
                labels.get(WORKDIR_LABEL, ""),
            )
        except (KeyError, ValueError):
            return None  # started before the lab recorded owners

    @classmethod
    def read(cls, run_dir: Path) -> Owner | None:
        try:
            data = json.loads((Path(run_dir) / OWNER_FILE).read_text())
            fields = {k: data[k] for k in ("host", "boot", "pid", "start")}
            return cls(**fields, workdir=data.get("workdir", ""))
        except (OSError, ValueError, KeyError, TypeError):
            return None


def claim(run_dir: Path, owner: Owner) -> None:
    """Record ``owner`` in the run directory (atomically), unless it is already there, so
    engine data and secrets can be reaped without Docker."""
    run_dir = make_dir(run_dir)
    if Owner.read(run_dir) == owner:
        return
    tmp = run_dir / f".{OWNER_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(asdict(owner), sort_keys=True) + "\n")
    tmp.replace(run_dir / OWNER_FILE)


# -- the lab's folders -----------------------------------------------------------------------
def make_dir(path: Path | str) -> Path:
    """Make the folder and its missing parents, stamping each one made here (a folder that
    was there already, or that another process made meanwhile, is not stamped)."""
    path = Path(path)
    missing = []
    at = path
    while not os.path.lexists(at) and at != at.parent:
        missing.append(at)
        at = at.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            continue
        stamp(d)
    return path


def made_by_lab(path: Path | str) -> bool:
    """Whether the lab made the folder: a folder (not a link to one) holding the stamp."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode) and stat.S_ISREG(
            os.lstat(Path(path) / STAMP).st_mode
        )
    except OSError:
        return False


def stamp(path: Path | str) -> None:
    """Stamp a folder as the lab's: one the lab made, or its default work directory (made
    before the lab stamped its folders)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with contextlib.suppress(FileExistsError):
        os.close(os.open(Path(path) / STAMP, flags, 0o644))
