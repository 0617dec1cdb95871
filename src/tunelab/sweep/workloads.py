"""Timed workloads, written once for every engine (portable SQL in the engine's dialect).

Each workload knows which column its predicate uses (so the ``index`` knob can build the
right index), how to reset the table before a repetition, how to warm up, and how to run.
Query arguments are drawn from a generator seeded by the dataset seed, so every repetition
and every engine sees the same queries.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tunelab.engines.base import EXPLAIN_MAX, AccessPath, IndexPlan
from tunelab.engines.dialect import Dialect
from tunelab.store.dataset import COLUMN_TYPES, COLUMNS, DISTINCT_HUNDREDS, Dataset

TABLE = "accounts"
FETCH_BATCH = 10_000  # rows per fetchmany in untimed full reads (warm-up of writes)
FETCH_MODES = ("all", "count")

DEFAULTS: dict[str, dict[str, Any]] = {
    "insert": {"rows": 100_000, "threads": 1, "commit_every": 1_000},
    "update": {"rows": 100_000, "threads": 1, "commit_every": 1_000},
    "scan": {"fetch": "all"},
    "multipoint": {"queries": 5, "fetch": "all"},
    "range": {"selectivity": 0.01, "queries": 1, "fetch": "all"},
    # batch: keys per statement (1: a statement per key; more: see lookup_sql)
    "point": {"lookups": 1_000, "fetch": "all", "batch": 1},
}
MAX_BATCH = 10_000  # keys per statement: within every engine's limit on a statement's size
# Each thread is a connection of its own, and PostgreSQL admits 100 by default (MariaDB 151),
# some of them the lab's own; on a host of a few cores more threads measure the wait for a CPU.
MAX_THREADS = 64
# A million look-ups is ~100 s a round at a server engine's ~0.1 ms a statement (a point may
# get 100 rounds); their keys and per-statement times are held in memory (~100 MB).
MAX_LOOKUPS = 1_000_000
# Each range query reads selectivity x rows rows: 10,000 of 1 % of a million is 10^8 rows.
MAX_RANGE_QUERIES = 10_000
# A cold repetition of a read evicts before each of its statements, untimed (a server engine
# restarts: 0.3-1 s, or a few seconds for DB2's deactivation): past this many a repetition's
# evictions would take longer than hours of rounds are worth, so the sweep is refused.
MAX_COLD_STATEMENTS = 100
# The most each count may be (the schema asks for at least 1). Each multipoint query asks for
# another of the DISTINCT_HUNDREDS values of hundreds2 (query_args).
MOST: dict[str, dict[str, int]] = {
    "insert": {"threads": MAX_THREADS},
    "update": {"threads": MAX_THREADS},
    "multipoint": {"queries": DISTINCT_HUNDREDS},
    "range": {"queries": MAX_RANGE_QUERIES},
    "point": {"lookups": MAX_LOOKUPS, "batch": MAX_BATCH},
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
# Whose best plan depends on the argument values (how many rows match), not only the query.
VALUE_DEPENDENT = ("multipoint", "range")
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
    if "fetch" in params and params["fetch"] not in FETCH_MODES:
        errors.append(("fetch", f"{params['fetch']!r} not allowed (allowed: all, count)"))
    for fld, most in MOST.get(wtype, {}).items():
        if not 1 <= params[fld] <= most:
            errors.append((fld, f"{params[fld]} out of range (allowed: 1..{most})"))
    if wtype == "range" and not 0 < params["selectivity"] <= 1:
        errors.append(
            ("selectivity", f"{params['selectivity']} out of range (allowed: 0 < s <= 1)")
        )
    return errors


# -- query arguments -----------------------------------------------------------------------


def statement_count(w: Workload) -> int:
    """The timed statements of one repetition of a read workload (each timed on its own)."""
    if w.type in ("multipoint", "range"):
        return w.params["queries"]
    if w.type == "point":
        return -(-w.params["lookups"] // w.params.get("batch", 1))
    return 1


def cold_refusal(w: Workload) -> tuple[str, str, str] | None:
    """(field, message, allowed) when a read runs too many statements for each to meet a cold
    cache of its own (a cold repetition evicts before every one)."""
    n = statement_count(w)
    if w.writes or n <= MAX_COLD_STATEMENTS:
        return None
    fld = "lookups" if w.type == "point" else "queries"
    return (
        fld,
        f"{n} timed statements cannot each meet a cold cache (cache: cold evicts before "
        "every statement, untimed)",
        f"at most {MAX_COLD_STATEMENTS} statements a cold repetition: fewer {fld}"
        + (", a larger batch" if w.type == "point" else "")
        + ", or cache: warm",
    )


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


def _aggregates(columns: Sequence[str]) -> str:
    """COUNT(*) plus an aggregate of every selected column, so the engine still reads each
    row's values (an aggregate of nothing could be answered from a smaller index)."""
    aggs = [f"{'SUM' if COLUMN_TYPES[c] == 'integer' else 'MAX'}({c})" for c in columns]
    return ", ".join(["COUNT(*)", *aggs])


def query_sql(w: Workload, ph: str, table_ref: str = TABLE) -> str:
    """The timed statement in portable SQL; ``table_ref`` is the engine's FROM item (with its
    access hint). ``fetch: count`` returns one row of aggregates instead of every row."""
    count = w.params.get("fetch") == "count"
    if w.type == "scan":
        what = _aggregates(COLUMNS) if count else "*"
        return f"SELECT {what} FROM {table_ref}"
    if w.type == "multipoint":
        what = _aggregates(SELECTED["multipoint"]) if count else "hundreds2, lat, balance"
        return f"SELECT {what} FROM {table_ref} WHERE hundreds2 = {ph}"
    if w.type == "range":
        what = _aggregates(SELECTED["range"]) if count else "id, lat, balance"
        return f"SELECT {what} FROM {table_ref} WHERE lat BETWEEN {ph} AND {ph}"
    if w.type == "point":
        what = _aggregates(SELECTED["point"]) if count else "*"
        return f"SELECT {what} FROM {table_ref} WHERE id = {ph}"
    if w.type == "update":
        return f"UPDATE {table_ref} SET balance = balance + 1 WHERE id = {ph}"
    raise ValueError(w.type)


def lookup_sql(dialect: Dialect, w: Workload, table_ref: str, n: int) -> str:
    """A batched point look-up: ``n`` keys in one statement, joined to the table so that the
    engine looks each up in turn (``Dialect.key_join``): the same index descents as ``n``
    statements, without a round trip and a statement's overhead per key."""
    what = _aggregates(SELECTED["point"]) if w.params["fetch"] == "count" else f"{TABLE}.*"
    return f"SELECT {what} FROM {dialect.key_join(TABLE, table_ref, n)}"


def batched(w: Workload) -> bool:
    return w.type == "point" and w.params.get("batch", 1) > 1


@dataclass
class Statements:
    """A point's timed statements, bound the engine's way before anything is timed."""

    sql: str  # as written, with placeholders (shown in plans)
    bound: list[tuple[str, tuple]]  # (statement, arguments) in the order they run
    fetch: str = "all"
    rows: int | None = None  # rows they return, counted by the engine (see result_rows)

    def one_by_one(self) -> list[Statements]:
        """Each statement on its own (a cold repetition evicts before every one)."""
        return [replace(self, bound=[b], rows=None) for b in self.bound]

    def to_explain(self) -> list[tuple[str, tuple]]:
        """The distinct statements whose plans are captured (at most EXPLAIN_MAX)."""
        return list(dict.fromkeys(self.bound))[:EXPLAIN_MAX]


def statements(
    dialect: Dialect, w: Workload, index: IndexPlan, access: str, rows: int, seed: int
) -> Statements:
    if w.writes:  # one prepared statement for executemany; the plan is recorded, not forced
        sql = query_sql(w, dialect.placeholder) if w.type == "update" else dialect.insert_sql(TABLE)
        return Statements(sql, [(sql, a) for a in query_args(w, rows, seed)])
    table_ref = dialect.table_ref(TABLE, index, access)
    if batched(w):  # the same seeded keys in the same order, ``batch`` to a statement
        keys = [k for (k,) in query_args(w, rows, seed)]
        size = w.params["batch"]
        chunks = [keys[i : i + size] for i in range(0, len(keys), size)]
        sqls = {n: lookup_sql(dialect, w, table_ref, n) for n in {len(c) for c in chunks}}
        bound = [dialect.bind(sqls[len(c)], dialect.key_args(c), False) for c in chunks]
        return Statements(sqls[len(chunks[0])], bound, w.params["fetch"])
    sql = query_sql(w, dialect.placeholder, table_ref)
    args = query_args(w, rows, seed) or [()]
    values_matter = w.type in VALUE_DEPENDENT
    bound = [dialect.bind(sql, a, values_matter) for a in args]
    return Statements(sql, bound, w.params["fetch"])


def timed_sql(
    dialect: Dialect, w: Workload, index: IndexPlan, access: str, ds: Dataset
) -> list[str]:
    """The timed statements as the engine receives them, for `tunelab plan --sql`."""
    stmts = statements(dialect, w, index, access, ds.rows, ds.seed)
    if w.writes:
        p = w.params
        return [
            f"-- timed: {stmts.sql}  -- {p['rows']} rows, {p['threads']} thread(s), a "
            f"commit every {p['commit_every']}; each transaction as the engine sends it "
            "(write_steps: executemany, or rendered before timing)"
        ]
    shown = [f"{sql}  -- {_shown(args)}" if args else sql for sql, args in stmts.bound[:3]]
    more = len(stmts.bound) - len(shown)
    head = f"-- timed (access: {access}, fetch: {stmts.fetch}), {len(stmts.bound)} statement(s):"
    return [head, *shown, *([f"-- ... and {more} more"] if more > 0 else [])]


def _shown(args: tuple) -> str:
    text = str(list(args))
    return text if len(text) <= 200 else f"{text[:200]}... ({len(text)} characters)"


def result_rows(conn: Any, stmts: Statements) -> int:
    """How many rows the statements return, counted by the engine, untimed and once: for a
    driver whose fastest fetch path does not count (see Dialect.fetch)."""
    if stmts.rows is None:
        cur = conn.cursor()
        n = 0
        for sql, args in stmts.bound:
            cur.execute(f"SELECT COUNT(*) FROM ({sql}) q", args)
            n += int(cur.fetchone()[0])
        cur.close()
        conn.commit()
        stmts.rows = n
    return stmts.rows


def explain(dialect: Dialect, conn: Any, w: Workload, stmts: Statements) -> list[AccessPath]:
    """The plan of every distinct timed statement (untimed, before the repetitions)."""
    if w.type == "insert":
        return [AccessPath("insert", "")]
    plans = [dialect.explain(conn, sql, args) for sql, args in stmts.to_explain()]
    conn.commit()
    return plans


# -- running ------------------------------------------------------------------------------------


def _fetch_count(cur: Any) -> int:
    n = 0
    while batch := cur.fetchmany(FETCH_BATCH):
        n += len(batch)
    return n


def run_reads(
    dialect: Dialect, conns: Sequence[Any], stmts: Statements, times: list[int] | None = None
) -> int:
    """Run the statements one after another on the first connection; the rows go through
    the driver's own fetch path. ``times`` receives each statement's nanoseconds. Returns
    the rows touched, or None when the fetch path does not count them (result_rows does)."""
    cur = conns[0].cursor()
    clock = time.perf_counter_ns
    n: int | None = 0
    for sql, args in stmts.bound:
        t0 = clock()
        if args:
            cur.execute(sql, args)
        else:
            cur.execute(sql)
        if stmts.fetch == "count":
            got: int | None = int(cur.fetchone()[0])
        else:
            got = dialect.fetch(cur)
        if times is not None:
            times.append(clock() - t0)
        n = None if n is None or got is None else n + got
    cur.close()
    # Ends the read transaction (releases share locks where the engine holds them).
    conns[0].commit()
    return n


Steps = list[tuple[str, Sequence[Any] | None]]  # (statement, executemany rows or None)


def write_plan(dialect: Dialect, w: Workload, sql: str, args: list[tuple]) -> list[list[Steps]]:
    """Per client thread, per transaction: the statements as the engine will receive them,
    rendered once and untimed (see Dialect.write_steps), so the timed section only sends."""
    n, every = w.params["threads"], w.params["commit_every"]
    shares = [args[i::n] for i in range(n)]
    return [
        [dialect.write_steps(sql, share[s : s + every]) for s in range(0, len(share), every)]
        for share in shares
    ]


def transactions(w: Workload, rows: int) -> int:
    """Commits a write workload makes writing ``rows`` rows: each client thread commits its
    share every ``commit_every`` rows, as ``write_plan`` splits them."""
    n, every = w.params["threads"], w.params["commit_every"]
    return sum(-(-len(range(i, rows, n)) // every) for i in range(n))


def run_writes(
    dialect: Dialect, conns: Sequence[Any], plan: list[list[Steps]], table_lock: bool, rows: int
) -> int:
    """One thread per connection, each running its transactions of the plan; ``rows`` is
    what the plan writes."""
    errors: list[BaseException] = []

    def work(conn: Any, transactions: list[Steps]) -> None:
        try:
            cur = conn.cursor()
            for steps in transactions:
                if table_lock:
                    dialect.lock_table(cur, TABLE)
                for stmt, rows in steps:
                    if rows is None:
                        cur.execute(stmt)
                    else:
                        cur.executemany(stmt, rows)
                conn.commit()
                if table_lock:
                    dialect.unlock_tables(cur)
            cur.close()
        except BaseException as exc:  # reported after join, from the main thread
            errors.append(exc)

    if len(conns) == 1:
        work(conns[0], plan[0])
    else:
        threads = [threading.Thread(target=work, args=(c, t)) for c, t in zip(conns, plan)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return rows


Run = Callable[..., int]  # run(conns, times=None) -> rows touched


def runner(
    dialect: Dialect,
    w: Workload,
    insert_rows: list[tuple],
    stmts: Statements | None,
    table_lock: bool,
) -> Run:
    """The timed callable for this workload; everything it needs is prepared here, untimed."""
    if w.writes:
        assert stmts is not None
        rows = insert_rows[: w.params["rows"]]
        args = rows if w.type == "insert" else [a for _, a in stmts.bound]
        plan = write_plan(dialect, w, stmts.sql, args)
        return lambda conns, times=None: run_writes(dialect, conns, plan, table_lock, len(args))
    assert stmts is not None
    return lambda conns, times=None: run_reads(dialect, conns, stmts, times)


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
