"""The newcomer's path, walked from nothing: `./lab run --config engine=all` where the lab has
no image, with a TMPDIR whose name has a space. The run itself builds every image it needs
(under other names, beside the lab's own: TUNELAB_IMAGE_PREFIX), measures each engine,
writes the index with the findings matrix and the page that puts the engines side by side,
and touches nothing outside its own folders."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.docker]

SWEEP = """\
name: newcomer-index
description: Warm look-ups through an index against none, on every engine.
dataset: {rows: 3000, seed: 11}
knobs:
  index: [none, nonclustered]
workloads:
  - type: multipoint
    queries: 3
cache: warm
repetitions: 2
expect:
  - says: warm, the index beats a scan
    kind: lower
    a: {index: nonclustered}
    b: {index: none}
"""

# Engines whose image the lab builds from Debian's packages (containers/*/build.sh).
BUILT = sorted(p.parent.name for p in (REPO / "containers").glob("*/build.sh"))


def _skip_reason() -> str | None:
    from tunelab.host import containers

    if reason := containers.docker_unavailable_reason():
        return reason
    if os.geteuid() != 0:
        return "building an image from Debian's packages needs root (debootstrap, chroot)"
    if shutil.which("debootstrap") is None:
        return "debootstrap is not installed (./lab test installs it as root on Debian)"
    return None


def _remove_images(prefix: str) -> None:
    from tunelab.host import containers

    client = containers.client()
    for image in client.images.list():
        for tag in image.tags:
            if tag.startswith(f"{prefix}/"):
                client.images.remove(tag, force=True)


def test_engine_all_from_nothing_builds_measures_and_compares(tmp_path):
    if reason := _skip_reason():
        pytest.skip(reason)
    prefix = f"tunelab-newcomer-{os.getpid()}"
    work, sweeps = tmp_path / "work", tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "newcomer-index.yaml").write_text(SWEEP)
    # A neighbour whose name is the space-split TMPDIR's first word: it must survive.
    tmpdir, neighbour = tmp_path / "keep x", tmp_path / "keep"
    tmpdir.mkdir()
    neighbour.mkdir()
    (neighbour / "thesis.csv").write_text("precious\n")
    env = {**os.environ, "TMPDIR": str(tmpdir), "TUNELAB_IMAGE_PREFIX": prefix}
    _remove_images(prefix)
    try:
        done = subprocess.run(
            [
                str(REPO / "lab"),
                "run",
                "--directory",
                str(work),
                "--cores",
                "2",
                "--config",
                "engine=all",
                f"sweeps={sweeps}/*.yaml",
                "calibrate=off",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=1500,
        )
    finally:
        _remove_images(prefix)
    assert done.returncode == 0, done.stderr[-4000:]
    for engine in BUILT:  # each image built by the run itself, under the test's names
        assert f"building {prefix}/{engine}:local" in done.stderr, done.stderr[-4000:]
    status = dict(
        line.split("\t")[:2]
        for line in (work / "reports" / "engines-run.tsv").read_text().splitlines()
    )
    for engine in ("sqlite", *BUILT):
        assert status.get(engine) == "ran", status
    index = (work / "reports" / "index.html").read_text()
    assert 'id="matrix"' in index  # every finding on every engine
    page = (work / "reports" / "engines" / "newcomer-index.html").read_text()
    for engine in ("sqlite", *BUILT):
        assert engine in page
    assert (neighbour / "thesis.csv").read_text() == "precious\n"
    assert not list(tmpdir.glob("tunelab-lab.*"))  # the run's own temporary files are gone
