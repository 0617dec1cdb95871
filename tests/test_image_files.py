"""The hash of what an engine's image is built from is computed twice: by the build script
(containers/lib/debian-image.sh, which labels the image with it) and by the lab
(tunelab.engines.images.files_hash, which decides whether the image present is current). They must
agree, or every run would build the image again and then find it missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tunelab.engines import images

ENGINES = sorted(p.parent.name for p in images.CONTAINERS_DIR.glob("*/build.sh"))


def _shell_hash(containers: Path, engine: str) -> str:
    script = '. "$1/lib/debian-image.sh"; here="$1/$2"; files_hash'
    out = subprocess.run(
        ["bash", "-c", script, "hash", str(containers), engine],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert len(out) == 16, out
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_the_build_script_and_the_lab_hash_the_same_files(engine):
    assert _shell_hash(images.CONTAINERS_DIR, engine) == images.files_hash(engine)


@pytest.mark.parametrize(
    "changed", ["lib/supervise.sh", "lib/debian-image.sh", "{e}/entrypoint.sh"]
)
def test_a_changed_file_changes_both_hashes_alike(tmp_path, monkeypatch, changed):
    engine = ENGINES[0]
    copy = tmp_path / "containers"
    shutil.copytree(images.CONTAINERS_DIR, copy)
    monkeypatch.setattr(images, "CONTAINERS_DIR", copy)
    before = images.files_hash(engine)
    with open(copy / changed.format(e=engine), "a") as f:
        f.write("\n# changed\n")
    after = images.files_hash(engine)
    assert after != before
    assert _shell_hash(copy, engine) == after
