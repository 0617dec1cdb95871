"""Timed workloads, written once for every engine (portable SQL, the engine's placeholder).

Each workload knows which column its predicate uses (so the ``index`` knob can build the
right index), how to reset the table before a repetition, how to warm up, and how to run.
Query arguments are drawn from a generator seeded by the dataset seed, so every repetition
and every engine sees the same queries.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tunelab.dataset import COLUMNS, DISTINCT_HUNDREDS
from tunelab.engines.base import Engine, IndexPlan

TABLE = "accounts"
FETCH_BATCH = 10_000

DEFAULTS: dict[str, dict[str, Any]] = {
    "insert": {"rows": 100_000, "threads": 1, "commit_every": 1_000},
    "update": {"rows": 100_000, "threads": 1, "commit_every": 1_000},
    "scan": {},
    "multipoint": {"queries": 5},
    "range": {"selectivity": 0.01, "queries": 1},
    "point": {"lookups": 1_000},
}
# The predicate column(s) an index on this workload is built on, and what the query selects.
PREDICATE: dict[str, tuple[str, ...]] = {
    "insert": ("id",),
    "update": ("id",),
    "scan": (),
    "multipoint": ("hundreds2",),
    "range": ("lat",),
    "point": ("id",),
}
SELECTED: dict[str, tuple[str, ...]] = {
    "multipoint": ("lat", "balance"),
    "range": ("id", "balance"),
    "point": tuple(c for c in COLUMNS if c != "id"),
}
WRITES = ("insert", "update")
INDEX_KINDS = ("none", "nonclustered", "clustered", "covering", "covering_wrong_order")


@dataclass(frozen=True)
class Workload:
    type: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def writes(self) -> bool:
        return self.type in WRITES

    def index_plan(self, kind: str) -> IndexPlan:
        key = PREDICATE[self.type]
        if not key or kind == "none":
            return IndexPlan("none", key)
        return IndexPlan(kind, key, SELECTED.get(self.type, ()))


def check_params(wtype: str, params: dict[str, Any], dataset_rows: int) -> list[tuple[str, str]]:
    """(field, message) pairs for parameter values the workload cannot honour."""
    errors = []
    if wtype in WRITES and params["rows"] > dataset_rows:
        errors.append(("rows", f"{params['rows']} exceeds dataset.rows ({dataset_rows})"))
    if wtype in WRITES and params["commit_every"] > params["rows"]:
        errors.append(("commit_every", "larger than rows"))
    if wtype == "range" and not 0 < params["selectivity"] <= 1:
        errors.append(
            ("selectivity", f"{params['selectivity']} out of range (allowed: 0 < s <= 1)")
        )
    return errors


# -- query arguments -----------------------------------------------------------------------


def _rng(seed: int, salt: int) -> np.random.Generator:
    return np.random.default_rng([seed, salt])


def query_args(w: Workload, rows: int, seed: int) -> list[tuple]:
    if w.type == "multipoint":
        values = _rng(seed, 1).choice(DISTINCT_HUNDREDS, size=w.params["queries"], replace=False)
        return [(int(v),) for v in values]
    if w.type == "range":
        width = max(1, round(w.params["selectivity"] * rows))
        starts = _rng(seed, 2).integers(0, rows - width + 1, size=w.params["queries"])
        return [(int(s), int(s) + width - 1) for s in starts]
    if w.type == "point":
        return [(int(i),) for i in _rng(seed, 3).integers(0, rows, size=w.params["lookups"])]
    if w.type == "update":
        return [(int(i),) for i in _rng(seed, 4).permutation(rows)[: w.params["rows"]]]
    return []


def query_sql(w: Workload, ph: str) -> str:
    if w.type == "scan":
        return f"SELECT * FROM {TABLE}"
    if w.type == "multipoint":
        return f"SELECT hundreds2, lat, balance FROM {TABLE} WHERE hundreds2 = {ph}"
    if w.type == "range":
        return f"SELECT id, lat, balance FROM {TABLE} WHERE lat BETWEEN {ph} AND {ph}"
    if w.type == "point":
        return f"SELECT * FROM {TABLE} WHERE id = {ph}"
    if w.type == "update":
        return f"UPDATE {TABLE} SET balance = balance + 1 WHERE id = {ph}"
    raise ValueError(w.type)


# -- running ------------------------------------------------------------------------------------


def _fetch_count(cur: Any) -> int:
    n = 0
    while batch := cur.fetchmany(FETCH_BATCH):
        n += len(batch)
    return n


def run_reads(w: Workload, conns: Sequence[Any], sql: str, args: list[tuple]) -> int:
    cur = conns[0].cursor()
    n = 0
    if not args:
        cur.execute(sql)
        n = _fetch_count(cur)
    for a in args:
        cur.execute(sql, a)
        n += _fetch_count(cur)
    cur.close()
    conns[
        0
    ].commit()  # ends the read transaction (releases share locks where the engine holds them)
    return n


def run_writes(
    engine: Engine,
    w: Workload,
    conns: Sequence[Any],
    sql: str,
    args: list[tuple],
    table_lock: bool,
) -> int:
    """Split ``args`` over the connections, one thread each, committing every N statements."""
    every = w.params["commit_every"]
    shares = [args[i :: len(conns)] for i in range(len(conns))]
    errors: list[BaseException] = []

    def work(conn: Any, share: list[tuple]) -> None:
        try:
            cur = conn.cursor()
            for start in range(0, len(share), every):
                if table_lock:
                    engine.lock_table(cur, TABLE)
                cur.executemany(sql, share[start : start + every])
                conn.commit()
                if table_lock:
                    engine.unlock_tables(cur)
            cur.close()
        except BaseException as exc:  # reported after join, from the main thread
            errors.append(exc)

    if len(conns) == 1:
        work(conns[0], shares[0])
    else:
        threads = [threading.Thread(target=work, args=(c, s)) for c, s in zip(conns, shares)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return len(args)


def runner(
    engine: Engine, w: Workload, insert_rows: list[tuple], rows: int, seed: int, table_lock: bool
) -> Callable[[Sequence[Any]], int]:
    """The timed callable for this workload; everything it needs is prepared here, untimed."""
    ph = engine.placeholder
    if w.type == "insert":
        sql = engine.insert_sql(TABLE)
        data = insert_rows[: w.params["rows"]]
        return lambda conns: run_writes(engine, w, conns, sql, data, table_lock)
    sql = query_sql(w, ph)
    args = query_args(w, rows, seed)
    if w.type == "update":
        return lambda conns: run_writes(engine, w, conns, sql, args, table_lock)
    return lambda conns: run_reads(w, conns, sql, args)


def warm_up(w: Workload, conns: Sequence[Any], run: Callable[[Sequence[Any]], int]) -> None:
    """Warm means the same work once, untimed, on the same connections. A write workload
    cannot be repeated without changing the table, so it warms with a full read instead."""
    if not w.writes:
        run(conns)
        return
    for conn in conns:
        cur = conn.cursor()
        cur.execute(f"SELECT * FROM {TABLE}")
        _fetch_count(cur)
        cur.close()
        conn.commit()
