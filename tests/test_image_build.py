"""An engine's image built from Debian's packages the way a run builds it
(tunelab.engines.images.ensure_image, which `./lab run`, `tunelab image` and a point use):
with any TMPDIR of the caller, under the names ``TUNELAB_IMAGE_PREFIX`` gives (beside the
lab's own ``tunelab/<engine>:local``, which these tests never touch), and its build lock in
the checkout's own folder, never followed through a planted symbolic link."""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tunelab import engines
from tunelab.engines import images
from tunelab.host import containers

REPO = Path(__file__).resolve().parents[1]
PREFIX_ENV = "TUNELAB_IMAGE_PREFIX"
VICTIM = "another user's file\n"


def _docker_or_skip() -> None:
    if reason := containers.docker_unavailable_reason():
        pytest.skip(reason)


@pytest.fixture
def prefix(monkeypatch):
    """A repository prefix of this test alone; every image under it is removed after."""
    name = f"tunelab-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(PREFIX_ENV, name)
    yield name
    if containers.docker_unavailable_reason():
        return
    client = containers.client()
    for image in client.images.list():
        if any(tag.startswith(f"{name}/") for tag in image.tags):
            client.images.remove(image.id, force=True)


def _failing_build(tmp_path: Path) -> Path:
    """A stand-in build script that records it ran and fails (the lock is taken before)."""
    script = tmp_path / "build.sh"
    script.write_text(f"#!/bin/sh\ntouch '{tmp_path}/built'\nexit 3\n")
    script.chmod(0o755)
    return script


def _lock_dirs(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """The shared temporary folder (where the lock used to be) and the checkout's own state
    folder (where it is), both private to the test."""
    shared, own = tmp_path / "tmp", tmp_path / "state"
    shared.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    monkeypatch.setattr(images, "LOCK_DIR", own, raising=False)
    return shared, own


@pytest.mark.docker
def test_a_planted_symlink_at_the_build_lock_is_not_followed(tmp_path, monkeypatch, prefix):
    _docker_or_skip()
    shared, own = _lock_dirs(tmp_path, monkeypatch)
    own.mkdir()
    victim = tmp_path / "victim"
    victim.write_text(VICTIM)
    for planted in (shared / "tunelab-image-postgres.lock", own / "image-postgres.lock"):
        planted.symlink_to(victim)
    src = images.ImageSource(None, f"{prefix}/postgres:local", str(_failing_build(tmp_path)))
    with pytest.raises(containers.ContainerError) as refused:
        images.ensure_image("postgres", src)
    assert victim.read_text() == VICTIM  # neither truncated nor written
    assert "a symbolic link: remove it" in str(refused.value)
    assert not (tmp_path / "built").exists()  # no build without the lock


@pytest.mark.docker
def test_the_build_lock_is_a_0600_file_of_the_checkouts_own_folder(tmp_path, monkeypatch, prefix):
    _docker_or_skip()
    shared, own = _lock_dirs(tmp_path, monkeypatch)
    src = images.ImageSource(None, f"{prefix}/postgres:local", str(_failing_build(tmp_path)))
    with pytest.raises(containers.ContainerError, match="failed \\(exit 3\\)"):
        images.ensure_image("postgres", src)
    assert (tmp_path / "built").exists()
    lock = own / "image-postgres.lock"
    assert stat.S_IMODE(lock.lstat().st_mode) == 0o600 and stat.S_ISREG(lock.lstat().st_mode)
    assert list(shared.iterdir()) == []  # nothing in the shared /tmp


def test_a_bad_image_prefix_is_one_line_and_exit_2_before_any_build(tmp_path):
    env = {**os.environ, PREFIX_ENV: "Tunelab Test"}
    done = subprocess.run(
        [sys.executable, "-m", "tunelab.cli", "image", "postgres"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "engine postgres: TUNELAB_IMAGE_PREFIX='Tunelab Test' is not an image repository "
        "name; allowed: lowercase letters and digits, '.', '_' or '-' between them, parts "
        "joined by '/'"
    ]
    script = REPO / "containers" / "postgres" / "build.sh"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert "TUNELAB_IMAGE_PREFIX 'Tunelab Test' makes the repository" in done.stderr


@pytest.mark.docker
@pytest.mark.slow
def test_postgres_image_builds_with_a_tmpdir_whose_name_has_a_space(tmp_path, monkeypatch, prefix):
    """The caller's TMPDIR (a run's own, a SLURM job's, a Mac's) names a folder the build's
    chroot does not have: its packages' scripts must not see it. About a minute."""
    _docker_or_skip()
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        pytest.skip("building an image needs root and debootstrap (./lab setup test)")
    tmpdir = tmp_path / "a b"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    builds = set(Path("/var/tmp").glob("tunelab-postgres-build.*"))
    # Without the official image, whether or not this host has it: the build is the point.
    src = dataclasses.replace(engines.info("postgres").image, official=None)
    tag = images.ensure_image("postgres", src)
    assert tag.startswith(f"{prefix}/postgres:bookworm-15."), tag
    image = containers.client().images.get(f"{prefix}/postgres:local")
    assert tag in image.tags
    assert image.labels[images.FILES_LABEL] == images.files_hash("postgres")
    assert set(Path("/var/tmp").glob("tunelab-postgres-build.*")) == builds  # cleaned up
    assert images.ensure_image("postgres", src) == tag  # found, not built again


def test_the_chroot_sees_a_clean_environment_with_the_hosts_apt_proxy(tmp_path):
    """debootstrap's and the chroot's commands get none of the caller's TMPDIR or locale,
    and the proxy the host's apt uses (its configuration first, else the environment)."""
    script = """set -euo pipefail
        apt-config() { echo 'Acquire::https::Proxy "http://apt.invalid:3142";'; }
        . "$1/containers/lib/debian-image.sh"
        host_proxy
        printf '%s\\n' "${clean_env[@]}"
    """
    env = {
        "PATH": os.environ["PATH"],
        "TMPDIR": str(tmp_path / "a b"),
        "LANG": "de_DE.UTF-8",
        "http_proxy": "http://env.invalid:1",
    }
    done = subprocess.run(
        ["bash", "-c", script, "env", str(REPO)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert done.stdout.splitlines() == [
        "env",
        "-i",
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/root",
        "LANG=C.UTF-8",
        "DEBIAN_FRONTEND=noninteractive",
        "http_proxy=http://env.invalid:1",
        "https_proxy=http://apt.invalid:3142",
    ]


@pytest.mark.docker
@pytest.mark.slow
def test_a_second_postgres_version_builds_from_the_next_release_and_runs(tmp_path, prefix):
    """``engine_version: 17``: the image of the Debian release that packages it (trixie),
    beside the default one's names, and a server whose version string reads back as 17 (a
    point that asked 15 of it fails its knob check). About two minutes."""
    _docker_or_skip()
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        pytest.skip("building an image needs root and debootstrap (./lab setup test)")
    from tunelab.engines.base import EngineError
    from tunelab.engines.postgres import PostgresEngine
    from tunelab.measure import runner
    from tunelab.sweep import spec

    src = engines.info("postgres").image
    if images.version_refusal("postgres", src, "17") is not None:
        pytest.skip("the apt mirror does not serve Debian trixie")
    eng = PostgresEngine(tmp_path / "points" / "pt" / "engine", f"test-{uuid.uuid4().hex[:8]}")
    # Without the official image, whether or not this host has it: the build is the point.
    one, _ = images.for_version(src, "17")
    if containers.client().images.list(name=one.official):
        pytest.skip(f"{one.official} is here: the lab would run it rather than build")
    try:
        eng.provision({"engine_version": "17", "buffer_pool": 1024})  # builds on first use
        assert eng.image is not None and eng.image.startswith(f"{prefix}/postgres:trixie-17."), (
            eng.image
        )
        image = containers.client().images.get(f"{prefix}/postgres:local-trixie")
        assert eng.image in image.tags
        assert image.labels[images.FILES_LABEL] == images.files_hash("postgres")
        assert image.labels["org.tunelab.debian-suite"] == "trixie"
        assert eng.version().startswith("PostgreSQL 17.")
        applied = eng.applied_knobs()
        assert applied["engine_version"] == "17"
        sweep = tmp_path / "sweep.yaml"
        sweep.write_text(
            "name: v\nengines: [postgres]\ndataset: {rows: 1000}\n"
            "knobs: {engine_version: [15, 17]}\nworkloads: [{type: scan}]\n"
        )
        points, errors = spec.expand(sweep)
        assert errors == []
        runner.check_applied(points[1], applied, complete=False)
        with pytest.raises(EngineError, match="engine_version: asked '15', engine reports '17'"):
            runner.check_applied(points[0], applied, complete=False)
        # The default version keeps its own names: no 15 image was built for this.
        assert not containers.client().images.list(name=f"{prefix}/postgres:local")
    finally:
        eng.teardown()
