"""Db2's timed statements as its dialect sends them (literals bound in, an optimization
guideline for ``access: forced``, EXPLAIN into the explain tables and read back) and every
statement and command of a point as `tunelab plan --sql` prints it. The statement text itself
comes from ``engines.db2_sql``; the engine that runs it is ``tunelab.engines.db2``."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from tunelab.engines import db2_hadr
from tunelab.engines.base import EXPLAIN_MAX, KEYS_ALIAS, AccessPath, Engine, EngineError, IndexPlan
from tunelab.engines.db2_explain import (
    bind_sql,
    explain_sql,
    explain_tables_sql,
    normalise_plan,
    optguideline,
    optprofile_script,
    plan_graph,
    plan_sql,
    plan_text,
)
from tunelab.engines.db2_sql import (
    APPLICATION_HANDLE_SQL,
    DATA_MOUNT,
    LOAD_DIR,
    applied_sql,
    bufferpool_ddl,
    clp,
    cold_commands,
    connection_sql,
    counter_sql,
    drop_table_sql,
    expected_kind,
    index_ddl,
    index_name,
    key_join_sql,
    load_sql,
    lock_sql,
    locksize_ddl,
    runstats_sql,
    table_ddl,
    table_sql,
    tablespace_ddl,
)
from tunelab.engines.dialect import Dialect
from tunelab.store.dataset import Dataset

FETCH_ROWS = 10_000  # rows per fetchmany of a timed read (the per-row loop is the driver's C)


class Db2Dialect(Dialect):
    def __init__(self, engine: Engine):
        super().__init__(engine)
        self.queryno = 0  # QUERYNO of the last statement this engine explained

    def index_name(self, table: str, index: IndexPlan) -> str:
        return index_name(table, index.kind)  # upper case, as the plans name it

    def expected_access(self, table: str, index: IndexPlan) -> str:
        # What the catalog holds, not the kind's name: a covering index with nothing to
        # cover (an update's key) is a plain index, read with a FETCH of the row.
        kind = expected_kind(index)
        if kind == "none":
            return "scan"
        name = self.index_name(table, index)
        if kind in ("covering", "covering_wrong_order"):
            return f"index-only:{name}"
        return f"index:{name}"

    def table_ref(self, table: str, index: IndexPlan, access: str) -> str:
        # Db2 has no index hint in the FROM clause: the guideline rides here and bind() moves
        # it to the end of the statement.
        if access != "forced":
            return table
        return f"{table} {optguideline(table, index)}"

    def bind(self, sql: str, args: Sequence[Any], values_matter: bool = True) -> tuple[str, tuple]:
        if not values_matter:  # e.g. unique-key lookups: one plan fits all, compiled once
            return bind_sql(sql, args, inline=False), tuple(args)
        return bind_sql(sql, args), ()

    def explain(self, conn: Any, sql: str, args: Sequence[Any]) -> AccessPath:
        # Writes run with markers (executemany); their key is unique, so the plan of the
        # statement with the literal is the plan of the marker form.
        text = bind_sql(sql, args)
        self.queryno += 1
        queries = plan_sql(self.queryno)
        cur = conn.cursor()
        try:
            cur.execute(explain_sql(text, self.queryno))
            rows = {}
            for part in ("operators", "streams", "arguments"):
                cur.execute(queries[part])
                rows[part] = [tuple(r) for r in cur.fetchall()]
        except Exception as exc:
            raise EngineError(f"db2: EXPLAIN of {text[:120]}: {one_line(exc)}") from None
        finally:
            cur.close()
        ops = plan_graph(rows["operators"], rows["streams"], rows["arguments"])
        return AccessPath(normalise_plan(ops), f"{text}\n{plan_text(ops)}")

    def fetch(self, cursor: Any) -> int:
        # ibm_db_dbi's fetchmany calls ibm_db.fetchmany, whose row loop (SQLFetch and the row
        # tuple) is C. With FIX_RETURN_TYPE on, ibm_db_dbi then revisits every row in Python
        # to convert DECIMAL and BLOB columns, which the lab's result sets do not have.
        cursor.FIX_RETURN_TYPE = 0
        n = 0
        while batch := cursor.fetchmany(FETCH_ROWS):
            n += len(batch)
        return n

    def key_join(self, table: str, table_ref: str, n: int) -> str:
        return key_join_sql(table, table_ref, n, KEYS_ALIAS)

    def lock_table(self, cursor: Any, table: str) -> None:
        cursor.execute(lock_sql(table))  # released by the commit that ends the transaction


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def planned(
    knobs: dict[str, Any],
    dataset: Dataset,
    index: IndexPlan,
    workload: str | None,
    cache: str | None,
    container: list[str],
) -> list[str]:
    """What ``DB2Engine.planned_sql`` shows for a point of these (full) knobs; ``container``:
    the lines that start the server."""
    page = int(knobs["page_size"])
    table = dataset.table
    writes = workload in ("insert", "update")
    cmds = cold_commands()
    explain_tables = explain_tables_sql()
    lines = [
        *container,
        f"-- optimization guidelines on: docker exec <container> "
        f"{shlex.join(clp(optprofile_script()))}",
        f"{explain_tables['check']}  -- explain tables present?",
        f"{explain_tables['create']}  -- only if they are not",
        *(planned_standby(knobs) if db2_hadr.wants_standby(knobs) else []),
        bufferpool_ddl(knobs),
        tablespace_ddl(knobs),
        *applied_sql(page).values(),
    ]
    if writes:
        lines.append("-- every repetition, untimed: the table built again")
    lines += [
        drop_table_sql(table) + "  -- if it exists",
        table_ddl(table, page),
        locksize_ddl(table, knobs.get("lock_granularity", "row")),
    ]
    if workload != "insert":
        lines.append(
            f"{load_sql(table, f'{DATA_MOUNT}/{LOAD_DIR}/{dataset.key}.del')}"
            f"  -- {dataset.rows} rows, the data set's CSV without its header"
        )
    ddl = index_ddl(table, index)
    lines += [*ddl, runstats_sql(table, bool(ddl))]
    if workload == "insert":
        lines[-1] += "  -- the empty table: the timed inserts maintain the index"
    if knobs.get("lock_granularity") == "table":
        lines.append(f"{lock_sql(table)}  -- at the start of every write transaction")
    if not writes:  # writes run one prepared statement, not forced
        lines.append(f"-- access: forced ends every timed read with {optguideline(table, index)}")
    if workload != "insert":
        lines += [
            f"{explain_sql('<statement>', '<n>')}  -- before timing, for each distinct timed "
            f"statement (at most {EXPLAIN_MAX}) as Db2 receives it",
            *plan_sql("<n>").values(),
        ]
    if cache in (None, "cold"):
        cold = "cold" if cache == "cold" else "cold points"
        lines += [
            f"-- {cold}: docker exec <container> {shlex.join(clp(cmds['stop']))}",
            f"-- {cold}: evict the table space container files from the host page cache",
            f"-- {cold}: docker exec <container> {shlex.join(clp(cmds['start']))}",
        ]
    lines.append(f"{APPLICATION_HANDLE_SQL}  -- once on each timed connection")
    if cache in (None, "warm"):
        what = f"SELECT * FROM {table}" if writes else "the timed statements"
        warm = "warm" if cache == "warm" else "warm points"
        lines.append(f"-- {warm}: {what} once, untimed, on the timed connections")
    lines += [
        *counter_sql(page).values(),
        f"{connection_sql([0])}  -- the timed connections' handles; engine time",
        *table_sql(table).values(),
    ]
    return lines


def planned_standby(knobs: dict[str, Any]) -> list[str]:
    """The standby's set-up as ``tunelab plan --sql`` shows it (db2_hadr.py), placeholders for
    what only a running pair knows."""
    mode, rtt = str(knobs["sync_mode"]), float(knobs["network_rtt_ms"])
    lines = [
        f"-- sync_mode {mode}: a standby container of the same image on the run's network "
        f"(DBNAME empty; -v <home>/{db2_hadr.STANDBY_DIR}:{DATA_MOUNT} "
        f"-v <home>/{db2_hadr.BACKUP_DIR}:{db2_hadr.STANDBY_BACKUP_MOUNT}); two delay proxies "
        "on the network's gateway, <log port> to the primary's HADR port "
        f"{db2_hadr.HADR_PORT} and <admin port> to the standby's, {rtt / 2:g} ms each way",
    ]
    link = db2_hadr.Link("<primary ip>", "<standby ip>", "<gateway>", "<log port>", "<admin port>")  # type: ignore[arg-type]
    steps = db2_hadr.setup_steps(mode, link)
    lines += [
        f"-- {s.where} ({s.what}): docker exec <{s.where}> {shlex.join(clp(s.script))}"
        for s in steps
    ]
    states = " or ".join(db2_hadr.READY_STATES[mode])
    lines.append(
        f"{db2_hadr.hadr_sql()}  -- until HADR_STATE {states} and HADR_CONNECT_STATUS "
        "CONNECTED; read back, and after every timed section"
    )
    lines += [
        f"-- a kept pair in another mode, {s.where} ({s.what}): "
        f"docker exec <{s.where}> {shlex.join(clp(s.script))}"
        for s in db2_hadr.mode_steps(mode)
    ]
    return lines
