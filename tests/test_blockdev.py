"""The lab's loop devices against another local user: the lab runs as root to attach them,
and a record or backing file planted where it looks must never make it detach, or set the
read-ahead of, a device of another's choosing. Real loop devices (root and CAP_SYS_ADMIN)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tunelab.host import blockdev

no_device = blockdev.unavailable_reason()
needs_device = pytest.mark.skipif(no_device is not None, reason=f"no device here: {no_device}")
NOBODY = 65534
VICTIM_KB = 384  # a read-ahead no kernel default gives


@pytest.fixture
def victim(tmp_path):
    """Another program's loop device (over a file outside the lab's folders), with a
    read-ahead of its own."""
    image = tmp_path / "elsewhere" / "their.img"
    image.parent.mkdir()
    with open(image, "wb") as f:
        f.truncate(8 << 20)
    loop = Path(
        subprocess.run(
            ["losetup", "--find", "--show", str(image)], check=True, capture_output=True, text=True
        ).stdout.strip()
    ).name
    read_ahead = blockdev._sys(loop, "queue", "read_ahead_kb")
    try:
        read_ahead.write_text(f"{VICTIM_KB}\n")
        yield loop, image
    finally:
        subprocess.run(["losetup", "--detach", f"/dev/{loop}"], check=False)
        read_ahead.write_text(f"{blockdev.KERNEL_DEFAULT_KB}\n")  # as it had before


def plant(root: Path, loop: str, image: Path, owner: int | None = None) -> None:
    """A record naming the victim's loop device, and device.img a link to its file."""
    root.mkdir(parents=True)
    record = root / blockdev.RECORD
    record.write_text(
        json.dumps(
            {
                "loop": loop,
                "backing": str(image),
                "state": "mounted",
                "mountpoint": str(image.parent),
                "read_ahead_before_kb": 4096,
                "attached_kb": 4096,
            }
        )
    )
    (root / blockdev.BACKING).symlink_to(image)
    if owner is not None:
        os.chown(record, owner, owner, follow_symlinks=False)


def untouched(loop: str, image: Path) -> bool:
    return (
        blockdev.backing_file(loop) == str(image)
        and blockdev.read_ahead_kb(loop) == VICTIM_KB
        and image.exists()
    )


@needs_device
@pytest.mark.parametrize("owner", [None, NOBODY], ids=["lab-owned-record", "another-users"])
def test_release_refuses_a_planted_link_and_record(tmp_path, victim, owner):
    loop, image = victim
    root = tmp_path / "work" / "points" / "p" / "engine" / "sqlite-device"
    plant(root, loop, image, owner)
    with pytest.raises(blockdev.BlockDeviceError, match="not the lab's device"):
        blockdev.release(root)
    assert untouched(loop, image)
    said: list[str] = []
    blockdev.release_under(tmp_path / "work", said.append)
    assert untouched(loop, image) and len(said) == 1 and "left alone" in said[0]
    assert blockdev.reopen(root) is None


@needs_device
def test_release_refuses_a_record_others_may_write_or_a_swapped_backing_file(tmp_path):
    root = tmp_path / "dev"
    dev = blockdev.create(root, tmp_path / "mnt", 64 << 20)
    try:
        record = root / blockdev.RECORD
        assert oct(record.stat().st_mode & 0o777) == "0o644"
        doc = json.loads(record.read_text())
        assert (doc["backing_dev"], doc["backing_ino"]) == dev.backing_id != (0, 0)
        assert blockdev.reopen(root) is not None
        record.chmod(0o666)
        with pytest.raises(blockdev.BlockDeviceError, match="writable by others"):
            blockdev.release(root)
        assert blockdev.reopen(root) is None
        record.chmod(0o644)
        doc["backing_ino"] += 1  # the record names another file than device.img
        record.write_text(json.dumps(doc))
        with pytest.raises(blockdev.BlockDeviceError, match="not the file the record names"):
            blockdev.release(root)
        assert blockdev.backing_file(dev.loop) == str(dev.backing)
    finally:
        doc["backing_ino"] = dev.backing_id[1]
        record.write_text(json.dumps(doc))
        blockdev.release(root)
    assert blockdev.backing_file(dev.loop) != str(dev.backing) and not root.exists()


@needs_device
def test_create_does_not_follow_a_planted_backing_link(tmp_path):
    target = tmp_path / "theirs"
    target.write_text("another's file")
    root = tmp_path / "dev"
    root.mkdir()
    (root / blockdev.BACKING).symlink_to(target)
    with pytest.raises(blockdev.BlockDeviceError, match="left alone"):
        blockdev.create(root, tmp_path / "mnt", 64 << 20)
    assert target.read_text() == "another's file"
