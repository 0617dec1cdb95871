"""The short-lived connection a point's untimed set-up opens on SQLite's database file."""

from __future__ import annotations

from pathlib import Path

import apsw


class SetupConnection:
    """A short-lived autocommit connection for schema changes and loads: the setup of a
    point, never timed. It does not wait for the device at each commit: what it writes is
    synced before any cold repetition reads it (``cache.evict``), and a run that dies
    builds its tables anew. The timed connections keep SQLite's default."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> apsw.Connection:
        self.db = apsw.Connection(str(self.path))
        self.db.execute("PRAGMA synchronous=OFF")
        return self.db

    def __exit__(self, *exc: object) -> None:
        self.db.close()
