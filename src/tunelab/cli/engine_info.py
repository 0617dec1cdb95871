"""The lab's engines and whether this host runs them: `tunelab engines` (their knobs, a run's
engine list), `tunelab preflight` and `tunelab image`."""

from __future__ import annotations

import argparse
import json

from tunelab import engines
from tunelab.cli.exits import EXIT_FAILED, EXIT_USAGE, err


def run_list(text: str) -> list[str]:
    """The engines of ``engine=all`` (every engine, in the lab's order) or ``engine=a,b``;
    ValueError naming the bad entry and the allowed values."""
    allowed = engines.names()
    if text.strip() == "all":
        return allowed
    names = [n.strip() for n in text.split(",")]
    for i, name in enumerate(names):
        if name not in allowed:
            raise ValueError(
                f"engine={text}: unknown engine {name!r} (allowed: {', '.join(allowed)}, or all)"
            )
        if name in names[:i]:
            raise ValueError(f"engine={text}: {name} is listed twice (each engine runs once)")
    return names


def cmd_engines(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    if args.run_list is not None:
        try:
            print("\n".join(run_list(args.run_list)))
        except ValueError as exc:
            err(str(exc))
            return EXIT_USAGE
        return 0
    rows = []
    for name in engines.names():
        info = engines.info(name)
        for k in info.knobs.values():
            rows.append(
                {
                    "engine": name,
                    "knob": k.name,
                    "allowed": k.allowed_text(),
                    "default": k.default,
                    "meaning": k.meaning,
                }
            )
        for k, why in info.notes.items():
            rows.append(
                {
                    "engine": name,
                    "knob": k,
                    "allowed": "not a knob",
                    "default": None,
                    "meaning": why,
                }
            )
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    table = Table(title="Engines and the knobs they express", show_lines=False)
    cols = ("engine", "knob", "allowed", "default", "meaning")
    for col in cols:
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(*(str(r[c]) if r[c] is not None else "" for c in cols))
    Console().print(table)
    return 0


def cmd_preflight(args: argparse.Namespace) -> int:
    return preflight(args.engine)


def preflight(engine: str) -> int:
    """``tunelab preflight``: one line, 0 when this host can run the engine, else 2."""
    from tunelab.engines.base import EngineError

    try:
        engines.engine_class(engine).preflight()
    except EngineError as exc:
        err(f"engine {engine}: {exc}")
        return EXIT_USAGE
    print(f"engine {engine}: ready to run here")
    return 0


def cmd_image(args: argparse.Namespace) -> int:
    return max(image(engine, args.version) for engine in args.engines)


def image(engine: str, version: str | None = None) -> int:
    """``tunelab image``: the image the engine runs with here (at ``version``, one of those it
    declares: knob ``engine_version``; None: its default), built first where the lab builds
    it (``tunelab.engines.images.ensure_image``, as a run's points ask); one line. 0, 2 for a
    bad ``TUNELAB_IMAGE_PREFIX`` or a version the engine does not have, 1 when there is no
    image."""
    from tunelab.engines.images import ensure_image
    from tunelab.host.containers import ContainerError

    src = engines.info(engine).image
    names = [v.version for v in src.versions] if src is not None else []
    if version is not None and version not in names:
        err(
            f"engine {engine}: --version {version} not allowed (allowed: "
            f"{', '.join(names) or 'none: it has one version'})"
        )
        return EXIT_USAGE
    if src is None:
        print(f"engine {engine}: runs without a container image")
        return 0
    try:
        tag = ensure_image(engine, src, version=version)
    except ValueError as exc:
        err(f"engine {engine}: {exc}")
        return EXIT_USAGE
    except ContainerError as exc:
        err(f"engine {engine}: {exc}")
        return EXIT_FAILED
    print(f"engine {engine}: image {tag}")
    return 0
