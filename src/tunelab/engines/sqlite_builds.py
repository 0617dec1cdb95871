"""SQLite's tables kept across points and runs: copies of the database file, as built and as
loaded before its index, in ``tables/`` of the lab's work directory."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from pathlib import Path

import apsw

from tunelab.engines.base import IndexPlan
from tunelab.engines.builds import TABLE_BUILD, Builds
from tunelab.store.dataset import Dataset

# Below the lab's work directory: the tables runs keep (``SQLiteBuilds.place``).
KEPT_TABLES = "tables"


@functools.cache
def build_fingerprint() -> str:
    """What a kept table's bytes come from beyond its key: the SQLite library and the code
    that builds it (the SQLite engine's modules, the engines' base, build and dialect, the
    data set's generator), so a table built by other code is never taken for this one's."""
    from tunelab.engines import base, builds, dialect
    from tunelab.store import dataset

    here = Path(__file__)
    h = hashlib.sha1(apsw.sqlite_lib_version().encode())
    for path in (
        here.with_name("sqlite.py"),
        here.with_name("sqlite_sql.py"),
        here.with_name("sqlite_setup.py"),
        here,
        base.__file__,
        builds.__file__,
        dialect.__file__,
        dataset.__file__,
    ):
        h.update(Path(path).read_bytes())
    return h.hexdigest()[:12]


build_fingerprint()  # as the module loads: of the code that runs (a forked job's too)


class SQLiteBuilds(Builds):
    """A workflow run's SQLite tables, kept as files: a reading point links to the kept file
    (its connections are query-only), a writing point copies it; the file right after its
    load is kept too, so the index layouts over the same rows load them once."""

    def place(self, key: str, stage: str = "sqlite-tables") -> Path | None:
        """Where workflow runs keep the database file of a table built (``sqlite-tables``) or
        loaded (``sqlite-loads``) under ``key``: ``tables/`` of the lab's work directory, beside
        the runs, for later runs too (the key names everything its bytes come from:
        ``build_fingerprint``). None outside a workflow run: nothing is kept."""
        if self.engine.run_dir is None:
            return None
        return self.engine.run_dir.resolve().parents[1] / KEPT_TABLES / stage / f"{key}.db"

    def key(self, table: str, index: IndexPlan, data: Dataset) -> str:
        text = f"{super().key(table, index, data)} {build_fingerprint()}"
        return hashlib.sha1(text.encode()).hexdigest()[:12]

    def load_key(self, table: str, index: IndexPlan, data: Dataset) -> str | None:
        # Every layout but the clustered one (a WITHOUT ROWID table on its key) loads the same
        # rowid table; its secondary index comes after the load, as in a build from scratch.
        shape = ["clustered", *index.key] if index.kind == "clustered" else ["rowid"]
        text = json.dumps(
            [
                TABLE_BUILD,
                "loaded",
                table,
                data.key,
                shape,
                int(self.engine.knobs["page_size"]),
                build_fingerprint(),
            ]
        )
        return hashlib.sha1(text.encode()).hexdigest()[:12]

    def reuse_loaded(self, table: str, key: str) -> bool:
        return self._copy_in(self.place(key, "sqlite-loads"))

    def keep_loaded(self, table: str, key: str) -> None:
        self._copy_out(self.place(key, "sqlite-loads"))

    def reuse(self, table: str, key: str, changes: bool = True) -> bool:
        kept, path = self.place(key), self.engine.path
        if changes or kept is None or not kept.exists() or self.engine.disk is not None:
            # On a device of its own the file is read from that device: a copy, not a link
            # to the kept file on the host's disk.
            return self._copy_in(kept)
        # A workload that only reads measures the kept file itself, through a link, and its
        # connections are query-only: the same bytes as a copy, without writing the file
        # anew for every point (and the kernel writing it back during timed repetitions).
        path.unlink(missing_ok=True)
        path.symlink_to(kept.resolve())
        return True

    def forget(self, table: str) -> None:
        path = self.engine.path
        if path.is_symlink():  # a kept table read by an earlier point: build beside it
            path.unlink()
            self.engine.new_file()

    def keep(self, table: str, key: str, changes: bool) -> None:
        self._copy_out(self.place(key))

    def _copy_in(self, kept: Path | None) -> bool:
        if kept is None or not kept.exists():
            return False
        # The file as it was right after its build: a byte copy (no connection is open;
        # the cold procedure evicts the copy's pages like those of a file just loaded).
        path = self.engine.path
        tmp = path.with_name(".lab.db.copy")
        shutil.copyfile(kept, tmp)
        tmp.replace(path)  # replaces a link to a kept table, never the table
        return True

    def _copy_out(self, kept: Path | None) -> None:
        if kept is None or kept.exists():
            return
        from tunelab.host import ownership

        # Copied within the run's directory first (a killed run's half copy is reaped with
        # it: its owner goes with it), then put in place whole.
        run_dir = self.engine.run_dir.resolve()
        ownership.claim(run_dir, ownership.Owner.current(run_dir.parents[1]))
        tmp = run_dir / "tables-in-progress" / f"{kept.name}.{os.getpid()}"
        tmp.parent.mkdir(parents=True, exist_ok=True)
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.engine.path, tmp)  # taken before the workload: a pristine copy
        tmp.replace(kept)  # runs/ and tables/ are both in the work directory
