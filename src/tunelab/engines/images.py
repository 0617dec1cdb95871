"""Which container image an engine runs: the official image, pinned by tag, where it is in the
local Docker engine (pulled on a host that reaches a registry), else the image built locally
from the distribution's packages by ``containers/<engine>/build.sh``, built on first use.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tunelab.containers import ContainerError, client
from tunelab.engines.base import ImageSource

CONTAINERS_DIR = Path(__file__).resolve().parents[3] / "containers"


FILES_LABEL = "org.tunelab.files"


def files_hash(engine: str) -> str:
    """What ``containers/<engine>/build.sh`` builds the image from, hashed as its
    ``files_hash`` does (containers/lib/debian-image.sh): the label of an image built from
    these very files."""
    import hashlib

    here = CONTAINERS_DIR / engine
    h = hashlib.sha256()
    names = sorted(p.name for p in here.iterdir() if p.is_file())
    for name in [n for n in names if n not in ("README.md", "host-packages")]:
        h.update(name.encode() + b"\0" + (here / name).read_bytes())
    for name in ("debian-image.sh", "supervise.sh"):
        h.update(f"lib/{name}\0".encode() + (CONTAINERS_DIR / "lib" / name).read_bytes())
    return h.hexdigest()[:16]


def _present(tag: str, engine: str | None = None) -> list[str] | None:
    """The image's tags if ``tag`` is in the local engine (with ``engine``: and was built
    from the engine's present files), else None."""
    from docker.errors import ImageNotFound

    try:
        image = client().images.get(tag)
    except ImageNotFound:
        return None
    if engine is not None and (image.labels or {}).get(FILES_LABEL) != files_hash(engine):
        return None
    return list(image.tags)


def _pinned(tags: list[str], alias: str) -> str:
    """Prefer the versioned tag over the moving alias, so results name what really ran."""
    versioned = sorted(t for t in tags if t != alias and t.split(":")[0] == alias.split(":")[0])
    return versioned[-1] if versioned else alias


def ensure_image(engine: str, src: ImageSource | None, build: bool = True) -> str:
    """The image tag to run ``engine`` with, from its declared image (``EngineInfo.image``);
    builds the local image once if neither is there."""
    if src is None:
        raise ContainerError(f"no container image is defined for engine '{engine}'")
    if src.official and _present(src.official) is not None:
        return src.official
    if src.local and (tags := _present(src.local, engine)) is not None:
        return _pinned(tags, src.local)
    script = CONTAINERS_DIR / src.build_script if src.build_script else None
    if not (build and script and script.exists()):
        raise ContainerError(
            f"no image for {engine}: {src.official or '-'} is not in the local Docker engine"
            + (f" and {src.local} is not built ({script} missing)" if src.local else "")
            + "; see containers/README.md"
        )
    # Two points may ask at once: one builds, the other waits and then finds the image.
    lock = Path(tempfile.gettempdir()) / f"tunelab-image-{engine}.lock"
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        if (tags := _present(src.local, engine)) is None:
            print(
                f"tunelab: building {src.local} with {script} (once, and again when its files"
                " change; a minute or two)",
                file=sys.stderr,
            )
            t0 = time.monotonic()
            proc = subprocess.run([str(script)], capture_output=True, text=True)
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
                raise ContainerError(f"{script} failed (exit {proc.returncode}):\n{tail}")
            print(f"tunelab: built {src.local} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
            tags = _present(src.local, engine)
            if tags is None:
                raise ContainerError(
                    f"{script} finished but {src.local}, built from the present files, is not there"
                )
    return _pinned(tags, src.local)
