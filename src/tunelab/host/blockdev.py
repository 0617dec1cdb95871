"""A block device of the lab's own, whose kernel read-ahead a point may set.

The kernel reads ahead for a file read in sequence, up to its device's
``/sys/block/<dev>/queue/read_ahead_kb``. That setting belongs to a whole device: set on the
host's disk it would change every other program's reads too. So a point that sets it gets a
device of its own: a loop device over a file in the lab's work directory (``losetup
--direct-io=on``: the loop reads its file with O_DIRECT, so a page is cached once, above the
loop device, where the cold procedure evicts it), an ext4 file system on it, mounted where the
engine keeps its data files. Only that loop device's read-ahead changes.

Every device is described by a record (``device.json``) beside its backing file, written
before the loop device is attached, so that ``release`` (a point's end) and ``release_under``
(``tunelab recover`` after a killed run) find it: they unmount it, give the loop device back
the read-ahead it had before, detach it and delete the file. After a host reboot nothing is
attached any more and only the files are left; the same calls delete them. A loop device is
only ever detached when its backing file is the lab's (a reboot may give its number to
another program's file).

The lab runs as root to attach devices, and another local user may plant files where it
looks: a record is trusted only when it is a regular file (not a link) of the lab's own uid
that no one else may write, beside a backing file that is no link either and is the very file
the record names (its inode and file system, noted at attach); else ``release`` and
``reopen`` refuse it, and touch nothing it names.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat as stat_
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

RECORD = "device.json"
BACKING = "device.img"
SYS_BLOCK = Path("/sys/block")
LOOP_CONTROL = Path("/dev/loop-control")
MOUNTINFO = Path("/proc/self/mountinfo")
CAP_SYS_ADMIN = 21  # mount and losetup need it, root or not
# Where the tools live on Debian, whatever the caller's PATH (sbin is not on every user's).
_TOOL_PATH = os.pathsep.join(["/usr/sbin", "/sbin", "/usr/bin", "/bin"])
TOOLS = {"losetup": "util-linux", "mkfs.ext4": "e2fsprogs", "mount": "mount", "umount": "mount"}
# One inode per 256 KiB: engines keep few, large files, and mkfs writes the inode tables
# at once (lazy_itable_init=0), so that no background initialisation runs in a timed section.
MKFS_OPTIONS = (
    "-q",
    "-F",
    "-m",
    "0",
    "-i",
    "262144",
    "-E",
    "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
)
MOUNT_OPTIONS = "noatime"
# The kernel's read-ahead for a block device it creates (VM_READAHEAD_PAGES, 128 KiB): what a
# loop device the lab's attach created gets back.
KERNEL_DEFAULT_KB = 128


class BlockDeviceError(RuntimeError):
    """A device could not be made or removed; the message names the step and the tool's words."""


def _tool(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH", "") + os.pathsep + _TOOL_PATH)


def _has_capability(bit: int) -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError):
        pass
    return False


def unavailable_reason() -> str | None:
    """Why this host cannot give the lab a device of its own (None: it can), in a few words.
    Cheap and without side effects: validation asks it before anything starts."""
    if os.geteuid() != 0:
        return f"attaching a loop device needs root (the lab runs as uid {os.geteuid()})"
    if not _has_capability(CAP_SYS_ADMIN):
        return "attaching a loop device needs CAP_SYS_ADMIN, which this process lacks"
    if not LOOP_CONTROL.exists():
        return f"the kernel offers no loop devices ({LOOP_CONTROL} is missing)"
    for tool, package in TOOLS.items():
        if _tool(tool) is None:
            return f"{tool} is not installed (Debian package {package})"
    return None


def _run(step: str, *argv: str) -> str:
    tool = _tool(argv[0]) or argv[0]
    try:
        done = subprocess.run([tool, *argv[1:]], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BlockDeviceError(f"{step}: {exc}") from None
    if done.returncode != 0:
        words = " ".join((done.stderr or done.stdout).split())[:300]
        raise BlockDeviceError(f"{step}: {argv[0]} exited {done.returncode}: {words}")
    return done.stdout.strip()


# -- what the kernel says about loop devices and mounts --------------------------------------
def _sys(loop: str, *parts: str) -> Path:
    return SYS_BLOCK.joinpath(loop, *parts)


def backing_file(loop: str) -> str | None:
    """The file a loop device reads, as the kernel names it (None: not attached)."""
    try:
        name = _sys(loop, "loop", "backing_file").read_text().strip()
    except OSError:
        return None
    return name.removesuffix(" (deleted)") or None


def read_ahead_kb(dev: str) -> int:
    return int(_sys(dev, "queue", "read_ahead_kb").read_text())


def all_read_ahead() -> dict[str, int]:
    """Every block device's read_ahead_kb on the host, by name."""
    out = {}
    for d in sorted(SYS_BLOCK.iterdir()):
        with contextlib.suppress(OSError, ValueError):
            out[d.name] = read_ahead_kb(d.name)
    return out


def loops_backed_under(directory: Path) -> list[str]:
    """The attached loop devices whose backing file lies below ``directory``."""
    root = str(Path(directory).resolve()).rstrip("/") + "/"
    return sorted(
        d.name
        for d in SYS_BLOCK.glob("loop*")
        if (f := backing_file(d.name)) is not None and f.startswith(root)
    )


def _unescape(field: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are octal escapes there."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mounts_of(loop: str) -> list[Path]:
    """Where this process's mount namespace has the loop device mounted (latest first)."""
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = right.split()
        if len(fields) >= 2 and fields[1] == f"/dev/{loop}":
            found.append(Path(_unescape(left.split()[4])))
    return found[::-1]


def stat(loop: str) -> dict[str, float]:
    """The device's cumulative read counters (``/sys/block/<dev>/stat``): requests completed,
    bytes read (sectors of 512 bytes) and milliseconds spent reading."""
    fields = _sys(loop, "stat").read_text().split()
    return {
        "requests": float(fields[0]),
        "merged": float(fields[1]),
        "bytes": float(fields[2]) * 512,
        "ms": float(fields[3]),
    }


# -- one device ---------------------------------------------------------------------------
@dataclass
class Device:
    """A loop device of the lab's, over ``root/device.img``, mounted at ``mountpoint``."""

    root: Path
    mountpoint: Path
    loop: str  # e.g. "loop3"
    read_ahead_before_kb: int  # the loop device's read_ahead_kb before the lab attached it
    attached_kb: int = 0  # and once attached (the kernel's choice)
    backing_id: tuple[int, int] = (0, 0)  # the backing file's (st_dev, st_ino)

    @property
    def backing(self) -> Path:
        return self.root / BACKING

    def set_read_ahead(self, kb: int) -> int:
        """Set the device's read-ahead and return it as the kernel then reports it."""
        _sys(self.loop, "queue", "read_ahead_kb").write_text(f"{int(kb)}\n")
        return read_ahead_kb(self.loop)

    def read_ahead(self) -> int:
        return read_ahead_kb(self.loop)

    def direct_io(self) -> bool:
        try:
            return _sys(self.loop, "loop", "dio").read_text().strip() == "1"
        except OSError:
            return False

    def counters(self) -> dict[str, float]:
        return stat(self.loop)

    def describe(self) -> str:
        """How the knob was applied, for the rows: the same words wherever the device is (its
        number and path differ from run to run, and comparisons list what differs)."""
        limit = _sys(self.loop, "queue", "max_sectors_kb").read_text().strip()
        return (
            f"a loop device over a file in the work directory, direct I/O "
            f"{'on' if self.direct_io() else 'off'}, ext4; queue/read_ahead_kb "
            f"{self.read_ahead_before_kb} before it was attached, {self.attached_kb} once "
            f"attached; max_sectors_kb {limit}"
        )

    def _save(self, state: str) -> None:
        doc = {
            "loop": self.loop,
            "backing": str(self.backing),
            "mountpoint": str(self.mountpoint),
            "read_ahead_before_kb": self.read_ahead_before_kb,
            "attached_kb": self.attached_kb,
            "state": state,
            "backing_dev": self.backing_id[0],
            "backing_ino": self.backing_id[1],
        }
        tmp = self.root / f".{RECORD}.tmp"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as f:
            os.fchmod(fd, 0o644)  # whatever the umask: writable by the lab alone (_trusted)
            f.write(json.dumps(doc, sort_keys=True))
        tmp.replace(self.root / RECORD)


def create(root: Path, mountpoint: Path, size_bytes: int) -> Device:
    """A new device: the backing file (sparse) in ``root``, a loop device over it with direct
    I/O, ext4 on it, mounted at ``mountpoint`` (an empty directory afterwards: mkfs's
    lost+found is removed, so a server may initialise its data directory there). Whatever
    fails on the way is undone before the error is raised."""
    if (why := unavailable_reason()) is not None:
        raise BlockDeviceError(why)
    root, mountpoint = Path(root).resolve(), Path(mountpoint).resolve()
    root.mkdir(parents=True, exist_ok=True)
    info = os.lstat(root)
    if stat_.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
        os.chmod(root, stat_.S_IMODE(info.st_mode) & ~0o022)  # the lab's alone (_trusted)
    dev = Device(root, mountpoint, "", KERNEL_DEFAULT_KB)
    dev._save("creating")  # before anything is attached: recovery finds the file
    try:
        # Not through a link, and never another's file: a backing file left here by a killed
        # point is the lab's and is laid anew.
        try:
            fd = os.open(dev.backing, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:  # ELOOP: a link
            raise BlockDeviceError(f"{dev.backing}: {exc.strerror}; left alone") from None
        try:
            info = os.fstat(fd)
            if info.st_uid != os.geteuid() or info.st_nlink != 1:
                raise BlockDeviceError(f"{dev.backing}: not a file of the lab's; left alone")
            os.ftruncate(fd, 0)
            os.ftruncate(fd, int(size_bytes))
        finally:
            os.close(fd)
        dev.backing_id = (info.st_dev, info.st_ino)
        # Attaching sets the loop device's limits, its read-ahead too (here 2560 KiB where it
        # had 128): what it had before is what it gets back.
        before = all_read_ahead()
        path = _run(
            "attach the loop device",
            "losetup",
            "--find",
            "--show",
            "--direct-io=on",
            str(dev.backing),
        )
        dev.loop = Path(path).name
        dev.read_ahead_before_kb = before.get(dev.loop, KERNEL_DEFAULT_KB)
        dev.attached_kb = read_ahead_kb(dev.loop)
        dev._save("attached")
        if not dev.direct_io():
            raise BlockDeviceError(
                f"/dev/{dev.loop}: the kernel would not read {dev.backing} with direct I/O "
                "(pages would be cached twice, and a cold read could come from the cache)"
            )
        _run("make the file system", "mkfs.ext4", *MKFS_OPTIONS, f"/dev/{dev.loop}")
        mountpoint.mkdir(parents=True, exist_ok=True)
        _run(
            "mount it",
            "mount",
            "-t",
            "ext4",
            "-o",
            MOUNT_OPTIONS,
            f"/dev/{dev.loop}",
            str(mountpoint),
        )
        (mountpoint / "lost+found").rmdir()
        dev._save("mounted")
    except BaseException:
        with contextlib.suppress(Exception):
            release(root)
        raise
    return dev


def _owned(path: Path, info: os.stat_result, kind: int) -> str:
    """Why a file is not the lab's own ("": it is): of that kind (not a link), of this uid,
    writable by no one else."""
    if stat_.S_IFMT(info.st_mode) != kind:
        return f"{path}: a link or not a {'folder' if kind == stat_.S_IFDIR else 'file'}"
    if info.st_uid != os.geteuid():
        return f"{path}: owned by uid {info.st_uid}, not the lab's {os.geteuid()}"
    if info.st_mode & 0o022:
        return f"{path}: writable by others (mode {stat_.S_IMODE(info.st_mode):o})"
    return ""


def _trusted(root: Path) -> dict:
    """The record in ``root`` ({} when there is none or it was cut short), once its folder,
    itself and the backing file it names are the lab's own (see the module's description);
    else BlockDeviceError naming what is not."""
    root = Path(root)
    why = _owned(root, os.lstat(root), stat_.S_IFDIR)
    doc: dict = {}
    try:
        fd = os.open(root / RECORD, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        pass
    except OSError as exc:  # ELOOP: a link
        why = why or f"{root / RECORD}: {exc.strerror}"
    else:
        with os.fdopen(fd) as f:
            why = why or _owned(root / RECORD, os.fstat(fd), stat_.S_IFREG)
            with contextlib.suppress(ValueError):
                doc = json.loads(f.read()) if not why else {}
    try:
        backing = os.lstat(root / BACKING)
    except FileNotFoundError:
        backing = None
    if backing is not None and not why:
        why = _owned(root / BACKING, backing, stat_.S_IFREG)
        noted = (doc.get("backing_dev"), doc.get("backing_ino"))
        if not why and noted[1] and noted != (backing.st_dev, backing.st_ino):
            why = f"{root / BACKING}: not the file the record names (inode {noted[1]})"
    if why:
        raise BlockDeviceError(f"not the lab's device, left alone: {why}")
    return doc if isinstance(doc, dict) else {}


def reopen(root: Path) -> Device | None:
    """The device a record in ``root`` describes, when it is still attached to the lab's file
    and mounted where the record says (a kept server's, in a later process); else None."""
    try:
        doc = _trusted(root)
    except (OSError, BlockDeviceError):
        return None
    loop, mountpoint = str(doc.get("loop") or ""), Path(doc.get("mountpoint", ""))
    if not loop or backing_file(loop) != doc.get("backing") or mountpoint not in mounts_of(loop):
        return None
    return Device(
        Path(root).resolve(),
        mountpoint,
        loop,
        int(doc["read_ahead_before_kb"]),
        int(doc.get("attached_kb", 0)),
        (int(doc.get("backing_dev", 0)), int(doc.get("backing_ino", 0))),
    )


def _umount(path: Path, attempts: int = 50) -> None:
    """Unmount, waiting a little for the last users to go (a container just removed)."""
    for i in range(attempts):
        try:
            _run("unmount", "umount", str(path))
            return
        except BlockDeviceError:
            if i == attempts - 1:
                raise
            time.sleep(0.1)


def _set_read_ahead(loop: str, kb: int | None) -> None:
    if kb is not None:
        with contextlib.suppress(OSError):
            _sys(loop, "queue", "read_ahead_kb").write_text(f"{kb}\n")


def _detach(loop: str, backing: str, before_kb: int | None) -> None:
    """Unmount the lab's loop device everywhere here, detach it, give it back the read-ahead
    it had before the lab attached it (before detaching and after: detaching may set the
    device's limits again)."""
    for where in mounts_of(loop):
        _umount(where)
    if backing_file(loop) != backing:
        return
    _set_read_ahead(loop, before_kb)
    _run("detach the loop device", "losetup", "--detach", f"/dev/{loop}")
    if backing_file(loop) is None:  # not attached again meanwhile (by anyone)
        _set_read_ahead(loop, before_kb)


def release(root: Path) -> list[str]:
    """Remove the device recorded in ``root`` (unmount, read-ahead as before, detach, delete
    the backing file and the record); what was removed, in words. Nothing there: []."""
    root = Path(root)
    if not any(os.path.lexists(root / n) for n in (RECORD, BACKING)):
        return []
    said = []
    doc = _trusted(root)
    backing = str(root.resolve() / BACKING)  # the kernel names a loop's file by its real path
    loops = {str(doc.get("loop") or "")} - {""}
    loops |= {d for d in loops_backed_under(root) if backing_file(d) == backing}
    for loop in sorted(loops):
        if backing_file(loop) != backing:
            continue  # detached already (a reboot): the number may be another file's now
        before = doc.get("read_ahead_before_kb") if loop == doc.get("loop") else None
        _detach(loop, backing, before)
        said.append(f"/dev/{loop}")
    mountpoint = doc.get("mountpoint")
    shutil.rmtree(root, ignore_errors=True)
    if mountpoint and Path(mountpoint).is_dir() and not os.path.ismount(mountpoint):
        with contextlib.suppress(OSError):
            Path(mountpoint).rmdir()  # the empty mount point (its parent is the caller's)
    said.append(str(root / BACKING))
    return said


def records_under(directory: Path) -> Iterator[Path]:
    """The roots of every device record below ``directory``."""
    for record in Path(directory).rglob(RECORD):
        yield record.parent


def release_under(directory: Path, say: Callable[[str], None] = print) -> int:
    """Remove every lab device below ``directory`` (a killed run's; or, after a reboot, its
    files): by their records, and any loop device still attached to a file below it whose
    record is gone. Returns how many were removed."""
    directory = Path(directory)
    if not directory.exists():
        return 0
    count = 0
    for root in sorted(set(records_under(directory))):
        try:
            gone = release(root)
        except BlockDeviceError as exc:
            say(f"could not remove the lab's device in {root}: {exc}")
            continue
        if gone:
            count += 1
            say(f"removed the lab's device {', '.join(gone)}")
    for loop in loops_backed_under(directory):  # attached, its record never written or lost
        backing = backing_file(loop) or ""
        try:
            _detach(loop, backing, KERNEL_DEFAULT_KB)  # what it had is unknown: the default
        except BlockDeviceError as exc:
            say(f"could not remove /dev/{loop} (backed by {backing}): {exc}")
            continue
        count += 1
        say(f"removed the lab's device /dev/{loop} (backed by {backing})")
    return count
