"""Which container image an engine runs: the official image, pinned by tag, where it is in the
local Docker engine (pulled on a host that reaches a registry), else the image built locally
from the distribution's packages by ``containers/<engine>/build.sh``, built on first use.

``TUNELAB_IMAGE_PREFIX`` replaces the local image's first part (``tunelab/postgres:local``
becomes ``PREFIX/postgres:local``), here and in the build scripts alike: a build under other
names beside the lab's own images.

An engine that declares versions (``ImageSource.versions``, the knob ``engine_version``)
builds each from the Debian release that packages it; the image of a release other than the
default is ``<repo>:local-<release>`` beside ``<repo>:local``. Whether the apt mirror serves
that release is asked of the build script (``--check``) before a sweep that names the
version starts (``version_refusal``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tunelab.engines.base import ImageSource, ImageVersion
from tunelab.host.containers import ContainerError, client, docker_unavailable_reason

CONTAINERS_DIR = Path(__file__).resolve().parents[3] / "containers"
# The checkout's own state folder (.gitignore'd): the build locks, out of the shared /tmp.
LOCK_DIR = CONTAINERS_DIR.parent / ".tunelab"

PREFIX_ENV = "TUNELAB_IMAGE_PREFIX"
# A repository name as docker takes it (containers/lib/debian-image.sh checks the same).
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REPOSITORY = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")

FILES_LABEL = "org.tunelab.files"
# The release the build scripts build from unless told another (containers/lib/debian-image.sh).
DEFAULT_SUITE = "bookworm"
MIRROR_ENV = "TUNELAB_APT_MIRROR"


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


def local_tag(local: str) -> str:
    """The local image's tag as the build script names it: ``local`` with its first part
    replaced by ``$TUNELAB_IMAGE_PREFIX`` where that is set. ValueError names a bad one."""
    prefix = os.environ.get(PREFIX_ENV, "")
    if not prefix:
        return local
    if not REPOSITORY.fullmatch(prefix):
        raise ValueError(
            f"{PREFIX_ENV}={prefix!r} is not an image repository name; allowed: lowercase "
            "letters and digits, '.', '_' or '-' between them, parts joined by '/'"
        )
    return f"{prefix}/{local.rsplit('/', 1)[-1]}"


@contextlib.contextmanager
def _build_lock(engine: str) -> Iterator[None]:
    """Held while one process builds ``engine``'s image: in the checkout's own folder, never
    through a symbolic link, never truncating what is there."""
    path = LOCK_DIR / f"image-{engine}.lock"
    LOCK_DIR.mkdir(exist_ok=True)  # shared with the engine data (a run's workdir): umask's mode
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        why = "a symbolic link: remove it" if exc.errno == errno.ELOOP else exc.strerror
        raise ContainerError(f"cannot open the image build lock {path}: {why}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def for_version(src: ImageSource, version: str | None) -> tuple[ImageSource, str]:
    """The image source of one of the engine's versions (None: the default) and the Debian
    release it is built from: its own official image, and the alias the build script gives
    that release (``local`` for the default one, ``local-<release>`` for another).
    KeyError names the allowed versions."""
    if version is None or not src.versions:
        if version is not None:
            raise KeyError(f"{version} (the engine has one version only)")
        return src, DEFAULT_SUITE
    v: ImageVersion = src.version(version)
    if v.suite == DEFAULT_SUITE:
        return src, v.suite
    local = f"{src.local.rsplit(':', 1)[0]}:local-{v.suite}" if src.local else None
    return dataclasses.replace(src, official=v.official, local=local), v.suite


# (script, release, mirror) the mirror served: asked once per process. A refusal is asked
# again, so that a process that outlives a mirror's outage (the warm job server) sees it end.
_served: set[tuple[str, str, str]] = set()


def _mirror_refusal(script: str, suite: str, mirror: str) -> str | None:
    """Why the apt mirror does not serve ``suite`` (the build script's ``--check``), or None."""
    if (script, suite, mirror) in _served:
        return None
    try:
        proc = subprocess.run(
            [script, "--suite", suite, "--check"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{script} --check did not answer: {exc}"
    if proc.returncode == 0:
        _served.add((script, suite, mirror))
        return None
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return lines[-1].removeprefix("build.sh: ") if lines else f"exit {proc.returncode}"


def version_refusal(engine: str, src: ImageSource, version: str) -> str | None:
    """Why this host cannot run ``engine`` at ``version``, one of its declared versions: None
    when the apt mirror serves the release it is built from, or its image (official or built)
    is in the local Docker engine already; else what is missing. Asks the mirror, and Docker
    only where the mirror says no; nothing is built."""
    one, suite = for_version(src, version)
    script = CONTAINERS_DIR / one.build_script if one.build_script else None
    why = "the lab does not build its image"
    if script is not None and script.exists():
        why = _mirror_refusal(str(script), suite, os.environ.get(MIRROR_ENV, ""))
        if why is None:
            return None
    if docker_unavailable_reason() is not None:
        return f"it is built from Debian {suite}: {why}"
    local = local_tag(one.local) if one.local else None
    if (one.official and _present(one.official) is not None) or (
        local and _present(local, engine) is not None
    ):
        return None
    return f"it is built from Debian {suite}: {why}; no image of it is in the local Docker engine"


def ensure_image(
    engine: str, src: ImageSource | None, build: bool = True, version: str | None = None
) -> str:
    """The image tag to run ``engine`` with, from its declared image (``EngineInfo.image``) at
    ``version`` (None: the default); builds the local image once if neither is there."""
    if src is None:
        raise ContainerError(f"no container image is defined for engine '{engine}'")
    try:
        src, suite = for_version(src, version)
    except KeyError as exc:
        raise ContainerError(f"{engine} has no version {exc.args[0]}") from None
    local = local_tag(src.local) if src.local else None
    if src.official and _present(src.official) is not None:
        return src.official
    if local and (tags := _present(local, engine)) is not None:
        return _pinned(tags, local)
    script = CONTAINERS_DIR / src.build_script if src.build_script else None
    if not (build and local and script and script.exists()):
        raise ContainerError(
            f"no image for {engine}: {src.official or '-'} is not in the local Docker engine"
            + (f" and {local} is not built ({script} missing)" if local else "")
            + "; see containers/README.md"
        )
    command = [str(script)] + (["--suite", suite] if suite != DEFAULT_SUITE else [])
    # Two points may ask at once: one builds, the other waits and then finds the image.
    with _build_lock(engine):
        if (tags := _present(local, engine)) is None:
            print(
                f"tunelab: building {local} with {' '.join(command)} (once, and again when its"
                " files change; a minute or two)",
                file=sys.stderr,
            )
            t0 = time.monotonic()
            proc = subprocess.run(command, capture_output=True, text=True)
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
                raise ContainerError(f"{script} failed (exit {proc.returncode}):\n{tail}")
            print(f"tunelab: built {local} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
            tags = _present(local, engine)
            if tags is None:
                raise ContainerError(
                    f"{script} finished but {local}, built from the present files, is not there"
                )
    return _pinned(tags, local)
