"""Engine registry, the one place that lists the engines: name -> module path and class,
imported lazily so that an engine's driver (ibm_db, mysqlclient, psycopg, docker) is only
needed when that engine is used. The sweep schema, the workflow's config check, the CLI and
``lab`` (through ``python -m tunelab.engines``) take the names from here."""

from __future__ import annotations

import importlib
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
