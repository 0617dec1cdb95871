"""Db2's timed statements as small pure functions: their literal form, the optimization
guideline that pins an access path (``access: forced``), EXPLAIN into the explain tables and
the plan read back from them, normalised and as text. Tests check them against the documented
syntax without a server."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tunelab.engines.base import EngineError, IndexPlan
from tunelab.engines.db2_sql import (
    DATABASE,
    SCHEMA,
    expected_kind,
    ident,
    index_name,
)

# -- timed statements: literals, guidelines, plans ------------------------------------------------
# The optimizer sees each statement's own values: bind() writes the integer arguments into the
# text, so every distinct statement is compiled with them. REOPT ALWAYS would re-plan at each
# execution too, but EXPLAIN of a statement with parameter markers plans for unknown values
# (EXPLAIN offers only WITH REOPT ONCE), so the captured plan could differ from the one run;
# with literals EXPLAIN PLAN FOR compiles exactly the text that is executed.
_MARKER = re.compile(r"\?")
# SUM of an INTEGER column is an INTEGER in Db2 (SQL0802N on overflow, IBM's SUM reference);
# the aggregates of `fetch: count` sum up to 10^7 x rows, so they are summed as BIGINT.
_SUM = re.compile(r"\bSUM\((\w+)\)", re.IGNORECASE)
_GUIDELINE = re.compile(r"\s*/\* <OPTGUIDELINES>.*?</OPTGUIDELINES> \*/", re.DOTALL)

QUERYTAG = "TUNELAB"  # EXPLAIN_STATEMENT.QUERYTAG is CHAR(20)
EXPLAIN_SCHEMA = SCHEMA  # EXPLAIN writes to the session user's tables before SYSTOOLS'
EXPLAIN_TABLES = (
    "EXPLAIN_INSTANCE",
    "EXPLAIN_STATEMENT",
    "EXPLAIN_OPERATOR",
    "EXPLAIN_STREAM",
    "EXPLAIN_ARGUMENT",
)
# The columns that identify one explained statement in every explain table.
_EXPLAIN_KEY = (
    "EXPLAIN_REQUESTER",
    "EXPLAIN_TIME",
    "SOURCE_NAME",
    "SOURCE_SCHEMA",
    "SOURCE_VERSION",
    "EXPLAIN_LEVEL",
    "STMTNO",
    "SECTNO",
)
_ACCESS_OPERATORS = ("TBSCAN", "IXSCAN", "FETCH", "RIDSCN")


def sql_int(value: Any) -> str:
    """An integer argument as a literal; anything else is refused (nothing but int() output
    ever reaches the statement text)."""
    if isinstance(value, bool):
        raise EngineError(f"db2: only integers are written into statements, got {value!r}")
    try:
        return str(int(operator.index(value)))
    except TypeError:
        raise EngineError(
            f"db2: only integers are written into statements, got {value!r}"
        ) from None


def bind_sql(sql: str, args: Sequence[Any], inline: bool = True) -> str:
    """The statement as Db2 receives it: each parameter marker replaced by its integer
    literal (unless ``inline`` is false), SUMs widened to BIGINT, and an optimization
    guideline moved to the end, the only place Db2 reads an embedded guideline."""
    guidelines = [g.strip() for g in _GUIDELINE.findall(sql)]
    if len(guidelines) > 1:  # Db2 ignores every guideline of a statement that has several
        raise EngineError(f"db2: more than one optimization guideline in {sql[:120]!r}")
    text = _GUIDELINE.sub("", sql)
    if not inline:
        text = _SUM.sub(r"SUM(CAST(\1 AS BIGINT))", text)
        return f"{text} {guidelines[0]}" if guidelines else text
    values = [sql_int(a) for a in args]
    if len(_MARKER.findall(text)) != len(values):
        raise EngineError(f"db2: {len(values)} arguments for the markers of {text[:120]!r}")
    literals = iter(values)
    text = _MARKER.sub(lambda _m: next(literals), text)
    text = _SUM.sub(r"SUM(CAST(\1 AS BIGINT))", text)
    return f"{text} {guidelines[0]}" if guidelines else text


def optguideline(table: str, index: IndexPlan) -> str:
    """The statement-level optimization guideline that pins the access the index plan built:
    IXSCAN of its index (INDEX is the unqualified index name, TABLE the exposed table name)
    or TBSCAN without one. A guideline Db2 cannot apply is ignored with SQL0437W reason 13,
    which is why every forced plan is explained and checked."""
    t = ident(table)
    if expected_kind(index) == "none":
        request = f'<TBSCAN TABLE="{t}"/>'
    else:
        request = f'<IXSCAN TABLE="{t}" INDEX="{index_name(table, index.kind)}"/>'
    return f"/* <OPTGUIDELINES>{request}</OPTGUIDELINES> */"


def optprofile_script(database: str = DATABASE) -> str:
    """CLP script (instance owner) that enables optimization guidelines: DB2_OPTPROFILE=YES,
    which takes effect at the next instance start. IBM's 11.1+ page on embedded guidelines
    names no registry setting, an IBM support note says releases before 11.1 needed this one; the
    lab sets it on either reading. Prints 'restarted' when it had to restart the instance."""
    db = ident(database)
    on = "db2set DB2_OPTPROFILE | grep -qiw YES"
    return (
        f"{on} && exit 0; "
        "db2set DB2_OPTPROFILE=YES || exit 1; "
        "db2 force application all >/dev/null; db2stop force >/dev/null; db2start >/dev/null; "
        f"db2 activate db {db} >/dev/null; rc=$?; "
        f"{on} || exit 1; "
        "echo restarted; exit $(( rc >= 4 ))"
    )


def explain_tables_sql() -> dict[str, str]:
    """Whether the explain tables exist, and the call that creates them (SYSINSTALLOBJECTS,
    which IBM prefers to EXPLAIN.DDL; in SYSTOOLSPACE, outside the point's table space)."""
    names = ", ".join(f"'{t}'" for t in EXPLAIN_TABLES)
    return {
        "check": "SELECT COUNT(*) FROM SYSCAT.TABLES "
        f"WHERE TABSCHEMA = '{EXPLAIN_SCHEMA}' AND TABNAME IN ({names})",
        "create": "CALL SYSPROC.SYSINSTALLOBJECTS('EXPLAIN', 'C', "
        f"CAST(NULL AS VARCHAR(128)), '{EXPLAIN_SCHEMA}')",
    }


def explain_sql(statement: str, queryno: int | str) -> str:
    """EXPLAIN PLAN (clauses in the order of IBM's syntax diagram), tagged so that the rows
    of this statement can be found again."""
    n = queryno if isinstance(queryno, str) else int(queryno)
    tags = f"SET QUERYNO = {n} SET QUERYTAG = '{QUERYTAG}'"
    return f"EXPLAIN PLAN {tags} FOR {statement}"


def plan_sql(queryno: int | str) -> dict[str, str]:
    """The operators, streams and operator arguments of the latest statement explained with
    this QUERYNO (level P, plan selection), joined on the explain tables' common key."""
    n = queryno if isinstance(queryno, str) else int(queryno)
    s = f"{EXPLAIN_SCHEMA}.EXPLAIN_STATEMENT"
    tagged = f"QUERYTAG = '{QUERYTAG}' AND QUERYNO = {n} AND EXPLAIN_LEVEL = 'P'"
    latest = (
        f"WITH S AS (SELECT {', '.join(_EXPLAIN_KEY)} FROM {s} WHERE {tagged} "
        f"AND EXPLAIN_TIME = (SELECT MAX(EXPLAIN_TIME) FROM {s} WHERE {tagged})) "
    )
    on = " AND ".join(f"X.{k} = S.{k}" for k in _EXPLAIN_KEY)

    def of(table: str, cols: str, order: str) -> str:
        joined = f"{EXPLAIN_SCHEMA}.{table} X JOIN S ON {on}"
        return f"{latest}SELECT {cols} FROM {joined} ORDER BY {order}"

    return {
        "operators": of(
            "EXPLAIN_OPERATOR", "X.OPERATOR_ID, X.OPERATOR_TYPE, X.TOTAL_COST", "X.OPERATOR_ID"
        ),
        "streams": of(
            "EXPLAIN_STREAM",
            "X.STREAM_ID, X.SOURCE_TYPE, X.SOURCE_ID, "
            "X.TARGET_TYPE, X.TARGET_ID, X.OBJECT_SCHEMA, X.OBJECT_NAME, "
            "X.STREAM_COUNT",
            "X.STREAM_ID",
        ),
        "arguments": of(
            "EXPLAIN_ARGUMENT",
            "X.OPERATOR_ID, X.ARGUMENT_TYPE, X.ARGUMENT_VALUE",
            "X.OPERATOR_ID, X.ARGUMENT_TYPE",
        ),
    }


@dataclass
class PlanOperator:
    """One EXPLAIN_OPERATOR row with its streams (EXPLAIN_STREAM) and arguments."""

    id: int
    type: str
    cost: float
    inputs: list[tuple[str, Any, float]] = field(default_factory=list)  # ("O", id | "D", name)
    outputs: list[int] = field(default_factory=list)  # operators this one feeds
    writes: list[str] = field(default_factory=list)  # data objects it writes (UPDATE)
    rows: float | None = None  # estimated rows it produces
    args: list[tuple[str, str]] = field(default_factory=list)


def plan_graph(
    operators: Sequence[Sequence[Any]],
    streams: Sequence[Sequence[Any]],
    arguments: Sequence[Sequence[Any]] = (),
) -> dict[int, PlanOperator]:
    """Operators keyed by OPERATOR_ID from the explain rows as IBM documents them:
    EXPLAIN_STREAM's SOURCE_TYPE/TARGET_TYPE are 'O' (operator, its id) or 'D' (data object,
    id -1, named by OBJECT_SCHEMA/OBJECT_NAME); STREAM_COUNT is the estimated cardinality."""
    ops = {int(i): PlanOperator(int(i), str(t).strip(), float(c or 0)) for i, t, c in operators}
    for _sid, stype, source, ttype, target, schema, name, count in streams:
        stype, ttype = str(stype).strip(), str(ttype).strip()
        obj = f"{(schema or '').strip()}.{(name or '').strip()}".strip(".")
        rows = float(count) if count is not None else math.nan
        if ttype == "O" and int(target) in ops:
            dest = ops[int(target)]
            if stype == "O":
                dest.inputs.append(("O", int(source), rows))
            else:
                dest.inputs.append(("D", obj, rows))
        if stype == "O" and int(source) in ops:
            src = ops[int(source)]
            src.rows = rows
            if ttype == "O":
                src.outputs.append(int(target))
            else:
                src.writes.append(obj)
    for op_id, atype, value in arguments:
        if int(op_id) in ops:
            ops[int(op_id)].args.append((str(atype).strip(), "" if value is None else str(value)))
    return ops


def _unqualified(obj: str) -> str:
    return obj.rsplit(".", 1)[-1]


def normalise_plan(ops: dict[int, PlanOperator]) -> str:
    """scan (TBSCAN of a table) | index:<IX> (IXSCAN whose RIDs reach a FETCH of the table) |
    index-only:<IX> (IXSCAN with no FETCH), detail after ';': tbscan, ixscan+fetch,
    list-prefetch (RIDs sorted through RIDSCN before the FETCH), ixscan; guideline when the
    RETURN operator names a statement profile (STMTPROF), i.e. a guideline was applied;
    hsjoin or msjoin for a hash or merge join (a batched look-up's key list, a VALUES list,
    comes from a GENROW: no access of its own)."""
    paths = []
    for op in sorted(ops.values(), key=lambda o: o.id):
        data = [name for kind, name, _ in op.inputs if kind == "D"]
        if op.type in ("HSJOIN", "MSJOIN"):
            # A batched look-up's key list joined by hash or merge: not a look-up per key.
            paths.append(op.type.lower())
        elif op.type == "TBSCAN" and data:
            paths.append("scan;tbscan")  # a TBSCAN fed by an operator reads a temp table
        elif op.type == "IXSCAN" and data:
            index = _unqualified(data[0])
            seen, todo, fetch = set(), list(op.outputs), False
            while todo:
                nxt = todo.pop(0)
                if nxt in seen or nxt not in ops:
                    continue
                seen.add(nxt)
                if ops[nxt].type == "FETCH":
                    fetch = True
                    break
                todo.extend(ops[nxt].outputs)
            if not fetch:
                paths.append(f"index-only:{index};ixscan")
            elif any(ops[i].type == "RIDSCN" for i in seen):
                paths.append(f"index:{index};ixscan+fetch;list-prefetch")
            else:
                paths.append(f"index:{index};ixscan+fetch")
    if not paths:
        return "unknown"
    if any(a == "STMTPROF" for o in ops.values() for a, _ in o.args):
        paths = [f"{p};guideline" for p in paths]
    return " + ".join(dict.fromkeys(paths))


def plan_text(ops: dict[int, PlanOperator]) -> str:
    """The operator tree as text, from RETURN down to the data objects (db2exfmt's order):
    type (id), cumulative cost in timerons, estimated rows, and the access operators'
    arguments."""
    lines: list[str] = []

    def rows(n: float | None) -> str:
        return "" if n is None or math.isnan(n) else f"  rows={n:.0f}"

    def walk(op: PlanOperator, depth: int, seen: set[int]) -> None:
        pad = "  " * depth
        args = ""
        if op.type in _ACCESS_OPERATORS or op.type == "RETURN":
            shown = [f"{a}={v}" for a, v in op.args if op.type != "RETURN" or a == "STMTPROF"]
            args = f"  [{', '.join(shown)}]" if shown else ""
        lines.append(f"{pad}{op.type} ({op.id})  cost={op.cost:.2f}{rows(op.rows)}{args}")
        for obj in op.writes:
            lines.append(f"{pad}  -> table {obj}")
        for kind, ref, n in op.inputs:
            if kind == "O" and ref in ops and ref not in seen:
                walk(ops[ref], depth + 1, seen | {ref})
            elif kind == "D":
                what = "index" if op.type == "IXSCAN" else "table"
                lines.append(f"{pad}  {what} {ref}{rows(n)}")

    roots = [o for o in ops.values() if not o.outputs]
    for root in sorted(roots, key=lambda o: o.id):
        walk(root, 0, {root.id})
    return "\n".join(lines)
