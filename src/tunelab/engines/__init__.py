"""Engine registry, the one place that lists the engines: name -> module path and class,
imported lazily so that an engine's driver (ibm_db, mysqlclient, psycopg, docker) is only
needed when that engine is used. The sweep schema, the workflow's config check, the CLI and
``lab`` (through ``python -m tunelab.engines``) take the names from here."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from tunelab.engines.base import Engine, EngineInfo

_ENGINES: dict[str, str] = {
    "sqlite": "tunelab.engines.sqlite:SQLiteEngine",
    "mariadb": "tunelab.engines.mariadb:MariaDBEngine",
    "db2": "tunelab.engines.db2:DB2Engine",
    "postgres": "tunelab.engines.postgres:PostgresEngine",
}


def names() -> list[str]:
    return list(_ENGINES)


def engine_class(name: str) -> type[Engine]:
    module, _, cls = _ENGINES[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def info(name: str) -> EngineInfo:
    return engine_class(name).info


def create(name: str, workdir: Path, run_id: str) -> Engine:
    return engine_class(name)(workdir, run_id)


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is one of an engine's ``full_errors`` (its driver saying the disk is
    full). Only the engines already loaded are asked: a driver's error comes from an engine
    that was imported, and the others' drivers need not be installed."""
    for path in _ENGINES.values():
        module, _, cls = path.partition(":")
        engine = getattr(sys.modules.get(module), cls, None)
        if engine is not None and isinstance(exc, engine.full_errors):
            return True
    return False
