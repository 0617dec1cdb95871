"""An engine's version as a knob (``engine_version``): the versions an engine declares, each
built from the Debian release that packages it, validated against the apt mirror before
anything starts, measured as blocks of its own in every round, and read back from the
server. No Docker here: the mirror is a folder (``TUNELAB_APT_MIRROR=file://...``) that
serves the releases a test gives it; tests/test_image_build.py builds and runs the second
version."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tunelab.engines import images
from tunelab.engines.base import EngineError, version_applied, version_text
from tunelab.engines.postgres import INFO
from tunelab.host import containers
from tunelab.measure import runner, sweeprun
from tunelab.sweep import spec

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "containers" / "lib" / "debian-image.sh"

SWEEP = """
    name: versions
    engines: [postgres]
    dataset: {rows: 1000, seed: 7}
    knobs:
      engine_version: VERSIONS
    workloads:
      - type: scan
    cache: warm
    repetitions: 3
    expect:
      - kind: similar
        a: {engine_version: 17}
        b: {engine_version: 15}
"""


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A mirror serving the releases given (their dists/<release>/Release), the lab's images
    under a prefix no image has: what a version needs is asked of the mirror alone."""

    def serve(*releases: str) -> Path:
        root = tmp_path / f"mirror-{uuid.uuid4().hex[:6]}"
        for release in releases:
            (root / "dists" / release).mkdir(parents=True)
            (root / "dists" / release / "Release").write_text(f"Codename: {release}\n")
        monkeypatch.setenv(images.MIRROR_ENV, f"file://{root}")
        monkeypatch.setenv("TUNELAB_IMAGE_PREFIX", f"tunelab-test-{uuid.uuid4().hex[:8]}")
        return root

    return serve


def _validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tunelab.cli", "validate", str(path), "--engine", "postgres"],
        capture_output=True,
        text=True,
        env=os.environ,
        timeout=120,
    )


def test_a_sweep_of_two_versions_is_two_points_as_the_engine_declares_them(write_sweep, mirror):
    mirror("bookworm", "trixie")
    points, errors = spec.expand(write_sweep(SWEEP.replace("VERSIONS", "[15, 17]")))
    assert errors == []
    assert [p.knobs["engine_version"] for p in points] == ["15", "17"]  # YAML's 15: the text
    assert points[0].point_id.startswith("engine_version-15_")
    assert points[1].point_id.startswith("engine_version-17_")


def test_the_two_versions_are_blocks_of_their_own_measured_in_every_round(write_sweep, mirror):
    mirror("bookworm", "trixie")
    points, _ = spec.expand(write_sweep(SWEEP.replace("VERSIONS", "[15, 17]")))
    blocks = [sweeprun.block_of(p) for p in points]
    assert blocks[0] != blocks[1]  # a server of its own: a fresh knob
    visits = list(sweeprun.schedule(len(points), 0, 4, "blocked", 1, blocks))
    for r in range(4):
        assert sorted(v.point for v in visits if v.round == r) == [0, 1]


def test_a_version_the_engine_does_not_declare_is_one_line_and_exit_2(write_sweep, mirror):
    mirror("bookworm", "trixie")
    path = write_sweep(SWEEP.replace("VERSIONS", "[15, 16]"))
    done = _validate(path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"{path}: knobs.engine_version: '16' not allowed (allowed: 15, 17)"
    ]


def test_a_version_whose_release_the_mirror_lacks_is_refused_before_anything_starts(
    write_sweep, mirror
):
    if containers.docker_unavailable_reason() is None:
        from docker.errors import ImageNotFound

        try:
            containers.client().images.get("postgres:17")
            pytest.skip("this host has the official postgres:17: no build is needed")
        except ImageNotFound:
            pass
    mirror("bookworm")
    path = write_sweep(SWEEP.replace("VERSIONS", "[15, 17]"))
    done = _validate(path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{path}: knobs.engine_version: postgres 17 cannot run here: ")
    assert "Debian trixie" in lines[0] and "does not serve Debian 'trixie'" in lines[0]
    assert lines[0].endswith("(allowed: 15)")


def test_a_sweep_of_the_default_version_alone_needs_the_default_release(write_sweep, mirror):
    mirror("trixie")  # a mirror without bookworm: 15 is refused, 17 is what remains
    path = write_sweep(SWEEP.replace("VERSIONS", "[15]").split("    expect:")[0])
    _, errors = spec.expand(path)
    assert [e.path for e in errors] == ["knobs.engine_version"]
    assert errors[0].allowed == "17" and "Debian bookworm" in errors[0].message


def test_an_engine_without_versions_cannot_express_the_knob(write_sweep):
    text = SWEEP.replace("VERSIONS", "[15, 17]").replace("[postgres]", "[sqlite]")
    _, errors = spec.expand(write_sweep(text.split("    expect:")[0]), "sqlite")
    assert [(e.path, e.message) for e in errors] == [
        ("knobs.engine_version", "sqlite cannot express knob 'engine_version'")
    ]


def test_versions_as_yaml_reads_them_become_the_declared_text():
    assert version_text(15) == "15" and version_text(10.11) == "10.11"
    assert version_text(" 17 ") == "17"
    assert version_text(True) is True and version_text([15]) == [15]  # refused by the knob


def test_the_server_version_is_read_back_as_the_declared_version_it_is_a_release_of():
    assert version_applied(INFO, "17.12") == "17"
    assert version_applied(INFO, "15") == "15"
    assert version_applied(INFO, "16.4") == "16.4"  # none declared: the number itself
    assert version_applied(INFO, "170.1") == "170.1"  # 17 is not a prefix of 170


def test_a_point_whose_server_is_another_version_fails_its_knob_check(write_sweep, mirror):
    mirror("bookworm", "trixie")
    points, _ = spec.expand(write_sweep(SWEEP.replace("VERSIONS", "[15, 17]")))
    read = {"engine_version": version_applied(INFO, "17.12")}
    runner.check_applied(points[1], read, complete=False)
    with pytest.raises(EngineError, match="engine_version: asked '17', engine reports '15'"):
        runner.check_applied(
            points[1], {"engine_version": version_applied(INFO, "15.14")}, complete=False
        )


def test_each_version_has_its_own_image_names():
    default, suite = images.for_version(INFO.image, "15")
    assert (default, suite) == (INFO.image, "bookworm")
    other, suite = images.for_version(INFO.image, "17")
    assert suite == "trixie"
    assert (other.official, other.local) == ("postgres:17", "tunelab/postgres:local-trixie")
    with pytest.raises(KeyError, match="allowed: 15, 17"):
        images.for_version(INFO.image, "16")


def _lib(script: str, entries: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``script`` with the build library sourced and the host's apt entries as given."""
    text = f"""set -euo pipefail
        . {LIB}
        host_apt_entries() {{ printf '%s\\n' {entries}; }}
        {script}
    """
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    return subprocess.run(["bash", "-c", text], capture_output=True, text=True, env=env)


def test_a_release_the_host_does_not_list_is_read_from_the_hosts_own_mirrors(tmp_path):
    entries = (
        "'http://m.invalid/debian bookworm' 'http://m.invalid/debian bookworm-updates' "
        "'http://s.invalid/debian-security bookworm-security'"
    )
    done = _lib("suite=trixie; suite_entries", entries, tmp_path)
    assert done.stdout.splitlines() == [
        "http://m.invalid/debian trixie",
        "http://m.invalid/debian trixie-updates",
        "http://s.invalid/debian-security trixie-security",
    ]
    listed = _lib("suite=bookworm; suite_entries", entries, tmp_path)  # the host's own: as is
    assert listed.stdout.splitlines()[0] == "http://m.invalid/debian bookworm"


def test_the_build_scripts_check_asks_the_mirror_for_the_release(tmp_path, mirror):
    root = mirror("trixie")
    script = REPO / "containers" / "postgres" / "build.sh"
    env = {"PATH": os.environ["PATH"], images.MIRROR_ENV: f"file://{root}"}
    served = subprocess.run(
        [str(script), "--suite", "trixie", "--check"], capture_output=True, text=True, env=env
    )
    assert (served.returncode, served.stdout, served.stderr) == (0, "", "")
    lacking = subprocess.run([str(script), "--check"], capture_output=True, text=True, env=env)
    assert lacking.returncode == 1
    assert lacking.stderr.strip().splitlines() == [
        "build.sh: the apt mirror does not serve Debian 'bookworm' (no dists/bookworm/Release)"
    ]
    bad = subprocess.run(
        [str(script), "--suite", "Trixie", "--check"], capture_output=True, text=True, env=env
    )
    assert bad.returncode == 2 and "is not a Debian release name" in bad.stderr


def test_the_example_sweep_of_two_postgres_versions_is_valid(mirror):
    mirror("bookworm", "trixie")
    path = REPO / "examples" / "sweeps" / "postgres-versions.yaml"
    points, errors = spec.expand(path, "postgres")
    assert errors == []
    assert sorted({p.knobs["engine_version"] for p in points}) == ["15", "17"]


def test_mariadb_declares_10_11_and_11_8_and_reads_its_server_back():
    from tunelab.engines.mariadb_info import INFO as MARIADB

    assert version_applied(MARIADB, "11.8.9") == "11.8"
    assert version_applied(MARIADB, "10.11.19") == "10.11"
    other, suite = images.for_version(MARIADB.image, "11.8")
    assert suite == "trixie" and other.local == "tunelab/mariadb:local-trixie"


def test_the_example_sweep_of_two_mariadb_versions_is_valid(mirror):
    mirror("bookworm", "trixie")
    path = REPO / "examples" / "sweeps" / "mariadb-versions.yaml"
    points, errors = spec.expand(path, "mariadb")
    assert errors == []
    assert sorted({p.knobs["engine_version"] for p in points}) == ["10.11", "11.8"]
