"""The DB2 engine's statements and CLP commands, checked without a server.

Two kinds of check: the statements the sqlfluff ``db2`` dialect covers (CREATE INDEX, ALTER
TABLE, CALL, SELECT) are parsed by it; the rest (CREATE BUFFERPOOL, CREATE TABLESPACE,
CREATE TABLE ... IN, LOCK TABLE, EXPLAIN), which that dialect does not parse, are matched
against the clause order of IBM's syntax diagrams written out below. On top, the rules the
IBM documentation states: table space and buffer pool page sizes equal, EXTENTSIZE 2..256,
PREFETCHSIZE pages or AUTOMATIC (a multiple of EXTENTSIZE advised: a warning, not an error),
INCLUDE only on unique indexes, a clustering index
followed by REORG TABLE ... INDEX of that index and RUNSTATS, LOCKSIZE ROW|TABLE, one
embedded optimization guideline after the SQL portion of a statement.

The timed statements (integer literals, the guideline), the EXPLAIN statements and the
normalisation of plans from explain rows shaped as IBM documents EXPLAIN_OPERATOR,
EXPLAIN_STREAM and EXPLAIN_ARGUMENT, the engine time from MON_GET_CONNECTION and the fetch
path are checked here too, with stand-in connections.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import xml.etree.ElementTree as ET
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tunelab.engines import db2, db2_explain, db2_info, db2_sql, db2_statements
from tunelab.engines.base import EngineError, IndexPlan
from tunelab.store.dataset import COLUMNS, Dataset
from tunelab.sweep import checks, loading, messages, spec, workloads

REPO = Path(__file__).resolve().parents[1]
TABLE = workloads.TABLE

# -- IBM's syntax diagrams, as regular expressions over one-line statements -----------------
NAME = r"[A-Z_][A-Z0-9_]*"
NUMBER = r"\d+(?:\.\d+)?"
# CREATE BUFFERPOOL name [IMMEDIATE|DEFERRED] [SIZE n [AUTOMATIC]] [NUMBLOCKPAGES n [BLOCKSIZE n]]
#   [PAGESIZE integer [K]]
BUFFERPOOL = re.compile(
    rf"^CREATE BUFFERPOOL (?P<name>{NAME})(?: (?:IMMEDIATE|DEFERRED))?"
    r"(?: SIZE (?P<size>\d+)(?: AUTOMATIC)?)?"
    r"(?: NUMBLOCKPAGES \d+(?: BLOCKSIZE \d+)?)?"
    r"(?: PAGESIZE (?P<page>\d+)(?P<k>K)?)?$"
)
# CREATE [LARGE|REGULAR|[SYSTEM|USER] TEMPORARY] TABLESPACE name [PAGESIZE integer [K]]
#   [MANAGED BY AUTOMATIC STORAGE] [EXTENTSIZE n] [PREFETCHSIZE AUTOMATIC|n] [BUFFERPOOL name]
#   [OVERHEAD n|INHERIT] [NO FILE SYSTEM CACHING|FILE SYSTEM CACHING] [TRANSFERRATE n|INHERIT]
TABLESPACE = re.compile(
    rf"^CREATE(?: (?:LARGE|REGULAR|(?:SYSTEM |USER )?TEMPORARY))? TABLESPACE (?P<name>{NAME})"
    r"(?: PAGESIZE (?P<page>\d+)(?P<k>K)?)?"
    r"(?: MANAGED BY AUTOMATIC STORAGE)?"
    r"(?: EXTENTSIZE (?P<extent>\d+))?"
    r"(?: PREFETCHSIZE (?P<prefetch>AUTOMATIC|\d+))?"
    rf"(?: BUFFERPOOL (?P<pool>{NAME}))?"
    rf"(?: OVERHEAD (?P<overhead>INHERIT|{NUMBER}))?"
    r"(?: (?P<caching>NO FILE SYSTEM CACHING|FILE SYSTEM CACHING))?"
    rf"(?: TRANSFERRATE (?P<transfer>INHERIT|{NUMBER}))?$"
)
CREATE_TABLE = re.compile(
    rf"^CREATE TABLE (?P<table>{NAME}) \((?P<cols>[^()]*(?:\(\d+\)[^()]*)*)\)"
    rf" IN (?P<space>{NAME})(?: ORGANIZE BY ROW)?$"
)
LOCK_TABLE = re.compile(rf"^LOCK TABLE {NAME} IN (?:SHARE|EXCLUSIVE) MODE$")
# LUW: LOCKSIZE ROW | BLOCKINSERT | TABLE
LOCKSIZE = re.compile(rf"^ALTER TABLE {NAME} LOCKSIZE (?:ROW|BLOCKINSERT|TABLE)$")
INDEX = re.compile(
    rf"^CREATE (?P<unique>UNIQUE )?INDEX (?P<name>{NAME}) ON (?P<table>{NAME}) "
    rf"\((?P<key>{NAME}(?:, {NAME})*)\)(?: INCLUDE \((?P<include>{NAME}(?:, {NAME})*)\))?"
    r"(?P<cluster> CLUSTER)?$"
)
ADMIN_CMD = re.compile(r"^CALL SYSPROC\.ADMIN_CMD\('(?P<cmd>[^']*)'\)$")


def knobs(**over):
    base = {k: v.default for k, v in db2_info.INFO.knobs.items() if v.default is not None}
    return {**base, **over}


def pages(m: re.Match) -> int:
    return int(m["page"]) * (1024 if m["k"] else 1)


# -- buffer pool and table space -----------------------------------------------------------------
@pytest.mark.parametrize("page", db2_sql.PAGE_SIZES)
def test_pool_and_space_follow_the_syntax_and_pair_equal_page_sizes(page):
    k = knobs(page_size=page, buffer_pool=5000, extent_size=8, prefetch_size=32)
    bp = BUFFERPOOL.match(db2_sql.bufferpool_ddl(k))
    ts = TABLESPACE.match(db2_sql.tablespace_ddl(k))
    assert bp and ts, (db2_sql.bufferpool_ddl(k), db2_sql.tablespace_ddl(k))
    assert int(bp["size"]) == 5000
    assert pages(bp) == pages(ts) == page  # Db2 pairs a table space only with an equal pool
    assert ts["pool"] == bp["name"]
    assert not bp["name"].startswith("SYS")  # SQLSTATE 42939
    assert (int(ts["extent"]), int(ts["prefetch"])) == (8, 32)


@given(
    page=st.sampled_from(db2_sql.PAGE_SIZES),
    extent=st.integers(2, 256),
    multiple=st.integers(0, 16),
    pool=st.integers(2, 2_000_000),
    overhead=st.none() | st.floats(0, 100, allow_nan=False),
    transfer=st.none() | st.floats(0, 10, allow_nan=False),
    direct=st.booleans(),
)
def test_every_valid_point_gives_documented_table_space_clauses(
    page, extent, multiple, pool, overhead, transfer, direct
):
    k = knobs(
        page_size=page,
        buffer_pool=pool,
        extent_size=extent,
        prefetch_size=extent * multiple,
        direct_io=direct,
    )
    if overhead is not None:
        k["overhead_ms"] = overhead
    if transfer is not None:
        k["transferrate_ms"] = transfer
    assert db2.DB2Engine.knob_rules.check_point(k) == []
    ts = TABLESPACE.match(db2_sql.tablespace_ddl(k))
    assert ts, db2_sql.tablespace_ddl(k)
    assert 2 <= int(ts["extent"]) <= 256
    assert int(ts["prefetch"]) % int(ts["extent"]) == 0
    assert (ts["caching"] == "NO FILE SYSTEM CACHING") is direct
    for asked, got in ((overhead, ts["overhead"]), (transfer, ts["transfer"])):
        if asked is None:
            assert got == "INHERIT"  # the storage group's media attributes
        else:
            assert Decimal(got) == Decimal(repr(asked))  # exact, no exponent


def test_prefetch_not_a_multiple_of_extent_is_a_warning_naming_the_field():
    rules = db2.DB2Engine.knob_rules
    k = knobs(extent_size=32, prefetch_size=48)
    assert rules.check_point(k) == []  # legal: IBM only advises a multiple
    (warning,) = rules.warn_point(k)
    assert warning[0] == "prefetch_size"
    assert "48" in warning[1] and "32" in warning[1] and "64" in warning[1]
    assert rules.warn_point(knobs(extent_size=32, prefetch_size=96)) == []
    assert rules.warn_point(knobs(extent_size=32, prefetch_size="automatic")) == []


@pytest.mark.parametrize("value", ["automatic", "AUTOMATIC"])
def test_prefetch_automatic_follows_the_syntax_diagram(value):
    k = knobs(extent_size=32, prefetch_size=value)
    assert db2_info.INFO.knobs["prefetch_size"].check(value) is None
    ts = TABLESPACE.match(db2_sql.tablespace_ddl(k))
    assert ts, db2_sql.tablespace_ddl(k)
    assert ts["prefetch"] == "AUTOMATIC" and ts["extent"] == "32"


def test_prefetch_automatic_reads_back_from_the_catalogs_minus_one(monkeypatch):
    eng = db2.DB2Engine(Path("/nonexistent"), "r")
    eng.knobs = knobs(extent_size=32, prefetch_size="automatic")
    rows = {
        "bufferpool": [(4096, 1000, 1000)],
        "tablespace": [(4096, 32, -1, -1.0, -1.0, "TL_BP_4K", 1)],
    }
    by_sql = {sql: rows.get(name, []) for name, sql in db2_sql.applied_sql(4096).items()}
    monkeypatch.setattr(eng, "query", lambda sql: by_sql[sql])
    applied = eng.applied_knobs()
    assert applied["prefetch_size"] == "automatic" and applied["extent_size"] == 32


@pytest.mark.parametrize("bad", [0, -4, 4.5, "auto", "", True])
def test_prefetch_refuses_non_positive_and_non_integer_values(bad, write_sweep):
    assert db2_info.INFO.knobs["prefetch_size"].check(bad) is not None
    path = write_sweep(
        f"""
        name: bad-prefetch
        engines: [db2]
        dataset: {{rows: 1000}}
        fixed:
          prefetch_size: {bad!r}
        workloads:
          - type: scan
        """
    )
    points, errors = spec.expand(path, "db2")
    assert points == [] and len(errors) == 1
    assert "fixed.prefetch_size" in str(errors[0])
    assert "integer 1..32767, in pages, or automatic" in str(errors[0])


@pytest.mark.parametrize(
    ("knob", "bad", "good"),
    [
        ("page_size", 2048, 32768),
        ("buffer_pool", 1, 2),  # buffpage's documented minimum is 2 pages
        ("extent_size", 257, 256),  # dft_extent_sz range 2..256
        ("extent_size", 1, 2),
        ("prefetch_size", 32768, 32767),  # dft_prefetch_sz range 0..32767
        ("prefetch_size", 0, 1),  # the lab asks for prefetching: a positive size or automatic
        ("lock_granularity", "page", "table"),
        ("index", "hash", "covering"),
        ("overhead_ms", -1, 0.5),  # -1 is the catalog's INHERIT marker, not a value
    ],
)
def test_knob_ranges_follow_the_documented_limits(knob, bad, good):
    k = db2_info.INFO.knobs[knob]
    assert k.check(bad) is not None
    assert k.check(good) is None


def test_validate_warns_of_the_cross_knob_advice_in_one_line_and_exits_0(write_sweep, capsys):
    from tunelab import cli

    path = write_sweep(
        """
        name: odd-prefetch
        engines: [db2]
        dataset: {rows: 1000}
        knobs:
          prefetch_size: [16, 24, automatic]
        fixed:
          extent_size: 16
        workloads:
          - type: scan
        """
    )
    warnings: list[messages.SpecWarning] = []
    points, errors = spec.expand(path, "db2", warnings=warnings)
    assert errors == [] and len(points) == 3
    assert cli.main(["validate", "--engine", "db2", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [str(w) for w in warnings]
    (line,) = err.splitlines()
    assert line.startswith(f"{path}: knobs.prefetch_size: warning: 24 is not a multiple of ")
    assert "1 sweep file(s) valid for db2" in out


def test_the_lab_sweeps_all_validate_for_db2():
    for path in sorted((REPO / "workflows" / "sweeps").glob("*.yaml")):
        doc, _ = loading.load_yaml(path)
        if "db2" not in checks.engines_of(doc):
            continue
        points, errors = spec.expand(path, "db2")
        assert errors == [], [str(e) for e in errors]
        assert all(db2.DB2Engine.knob_rules.check_point(p.knobs) == [] for p in points)


# -- table and locking ---------------------------------------------------------------------------
@pytest.mark.parametrize("page", db2_sql.PAGE_SIZES)
def test_table_lives_in_the_points_table_space_with_every_column(page):
    m = CREATE_TABLE.match(db2_sql.table_ddl(TABLE, page))
    assert m, db2_sql.table_ddl(TABLE, page)
    assert m["space"] == TABLESPACE.match(db2_sql.tablespace_ddl(knobs(page_size=page)))["name"]
    names = [c.split()[0] for c in m["cols"].split(", ")]
    assert names == [c.upper() for c in COLUMNS]


@pytest.mark.parametrize("granularity", ["row", "table"])
def test_locksize_and_lock_table(granularity):
    ddl = db2_sql.locksize_ddl(TABLE, granularity)
    assert LOCKSIZE.match(ddl) and ddl.endswith(granularity.upper())
    assert LOCK_TABLE.match(db2_sql.lock_sql(TABLE))
    with pytest.raises(EngineError, match="lock_granularity"):
        db2_sql.locksize_ddl(TABLE, "page")


def test_identifiers_are_checked_before_they_reach_sql():
    with pytest.raises(EngineError, match="identifier"):
        db2_sql.table_ddl("accounts; DROP TABLE x", 4096)
    with pytest.raises(EngineError, match="quote"):
        db2_sql.admin_cmd("RUNSTATS ON TABLE 'x'")


# -- indexes -------------------------------------------------------------------------------------
PLANS = [
    (w, kind) for w in ("multipoint", "range", "point", "update") for kind in workloads.INDEX_KINDS
]


def catalog_rows(stmts: list[str]) -> list[tuple[str, str, str, str, str]]:
    """What SYSCAT.INDEXES x SYSCAT.INDEXCOLUSE would hold after these statements: INDEXTYPE
    CLUS for a clustering index, COLORDER 'I' for INCLUDE columns."""
    rows = []
    for s in stmts:
        m = INDEX.match(s)
        if not m:
            continue
        itype = "CLUS" if m["cluster"] else "REG "
        rule = "U" if m["unique"] else "D"
        rows += [(m["name"], itype, rule, c, "A") for c in m["key"].split(", ")]
        if m["include"]:
            rows += [(m["name"], itype, rule, c, "I") for c in m["include"].split(", ")]
    return rows


@pytest.mark.parametrize(("wtype", "kind"), PLANS)
def test_index_statements_follow_the_documented_rules(wtype, kind):
    plan = workloads.Workload(wtype, workloads.DEFAULTS[wtype]).index_plan(kind)
    stmts = db2_sql.index_ddl(TABLE, plan)
    creates = [INDEX.match(s) for s in stmts if s.startswith("CREATE")]
    assert all(creates), stmts
    if plan.kind == "none":
        assert stmts == []
        return
    (m,) = creates
    key = [c.upper() for c in plan.key]
    cols = m["key"].split(", ")
    if m["include"]:
        assert m["unique"], "INCLUDE is only allowed on a UNIQUE index"
    if kind in ("nonclustered", "clustered"):
        assert cols == key and not m["include"]
    if kind == "covering":
        assert cols[: len(key)] == key  # searchable by the key
        covered = set(cols) | set((m["include"] or "").split(", "))
        assert {c.upper() for c in plan.include} <= covered
    if kind == "covering_wrong_order":
        assert cols[-len(key) :] == key  # covers the query, cannot be searched by the key
        assert cols[: len(key)] != key or set(cols) == set(key)
        assert {c.upper() for c in plan.include} <= set(cols)
    if kind == "clustered":
        assert m["cluster"]
        reorg = ADMIN_CMD.match(stmts[1])
        assert reorg and reorg["cmd"] == (
            f"REORG TABLE {db2_sql.SCHEMA}.{m['table']} INDEX {db2_sql.SCHEMA}.{m['name']}"
        )
    else:
        assert len(stmts) == 1 and not m["cluster"]
    # The catalog the statements produce reads back as the kind that was asked (a covering
    # index with nothing beyond the key is a plain index on it).
    assert db2_sql.index_kind(plan.key, catalog_rows(stmts)) == db2_sql.expected_kind(plan)
    assert db2_sql.expected_kind(plan) in (kind, "nonclustered")


def test_index_kind_refuses_what_no_kind_describes():
    two = [("A", "REG ", "D", "HUNDREDS2", "A"), ("B", "REG ", "D", "LAT", "A")]
    assert db2_sql.index_kind(("hundreds2",), two) is None
    other = [("A", "REG ", "D", "LAT", "A")]
    assert db2_sql.index_kind(("hundreds2",), other) is None
    assert db2_sql.index_kind(("hundreds2",), []) == "none"


@pytest.mark.parametrize("with_indexes", [True, False])
def test_runstats_goes_through_admin_cmd_on_the_qualified_table(with_indexes):
    stmt = db2_sql.runstats_sql(TABLE, with_indexes)
    m = ADMIN_CMD.match(stmt)
    assert m and m["cmd"].startswith(f"RUNSTATS ON TABLE {db2_sql.SCHEMA}.{TABLE.upper()} ")
    assert ("INDEXES ALL" in m["cmd"]) is with_indexes


# -- counters and read-back ----------------------------------------------------------------------
def test_monitor_queries_name_the_points_pool_and_space():
    for page in db2_sql.PAGE_SIZES:
        q = db2_sql.counter_sql(page)
        assert f"MON_GET_BUFFERPOOL('{db2_sql.bufferpool_name(page)}', -2)" in q["bufferpool"]
        assert "MON_GET_DATABASE(-2)" in q["database"]
        assert all(f"SUM({c})" in q["bufferpool"] for c in db2_sql.BUFFERPOOL_COUNTERS)
        assert "MON_GET_TRANSACTION_LOG(-2)" in q["log"]
        assert all(f"SUM({c})" in q["log"] for c in db2_sql.LOG_COUNTERS)
        a = db2_sql.applied_sql(page)
        assert f"MON_GET_TABLESPACE('{db2_sql.tablespace_name(page)}', -2)" in a["tablespace"]
        assert f"MON_GET_CONTAINER('{db2_sql.tablespace_name(page)}', -2)" in a["containers"]


# -- the sqlfluff db2 dialect, for the statements it covers ----------------------------------------
def dialect_covered() -> list[str]:
    stmts = [db2_sql.locksize_ddl(TABLE, g) for g in ("row", "table")]
    for wtype, kind in PLANS:
        plan = workloads.Workload(wtype, workloads.DEFAULTS[wtype]).index_plan(kind)
        stmts += db2_sql.index_ddl(TABLE, plan)
    stmts += [db2_sql.runstats_sql(TABLE, True), db2_sql.runstats_sql(TABLE, False)]
    for page in db2_sql.PAGE_SIZES:
        stmts += [
            *db2_sql.counter_sql(page).values(),
            *db2_sql.applied_sql(page).values(),
            db2_sql.pool_size_sql(page),
        ]
    stmts += list(db2_sql.table_sql(TABLE).values())
    return list(dict.fromkeys(stmts))


@pytest.mark.parametrize("sql", dialect_covered())
def test_statements_parse_with_the_sqlfluff_db2_dialect(sql):
    sqlfluff = pytest.importorskip("sqlfluff")
    sqlfluff.parse(sql, dialect="db2")  # raises on anything it cannot parse


@pytest.mark.parametrize(
    "bad",
    ["CREATE INDEX IX CLUSTER ON ACCOUNTS (LAT)", "CREATE INDEX IX ON ACCOUNTS (LAT) CLUSTERED"],
)
def test_the_dialect_check_does_reject_misplaced_clauses(bad):
    sqlfluff = pytest.importorskip("sqlfluff")
    from sqlfluff.api.simple import APIParsingError

    with pytest.raises(APIParsingError):
        sqlfluff.parse(bad, dialect="db2")


@given(
    bp=st.lists(
        st.integers(0, 10**9),
        min_size=len(db2_sql.BUFFERPOOL_COUNTERS),
        max_size=len(db2_sql.BUFFERPOOL_COUNTERS),
    ),
    db=st.lists(st.integers(0, 10**9), min_size=5, max_size=5),
    page=st.sampled_from(db2_sql.PAGE_SIZES),
)
def test_counters_map_monitor_columns_to_the_common_keys(bp, db, page):
    out = db2_sql.counters_from(bp, db, page)
    b = dict(zip(db2_sql.BUFFERPOOL_COUNTERS, bp, strict=True))
    d = dict(zip(db2_sql.DATABASE_COUNTERS, db, strict=True))
    logical = sum(v for k, v in b.items() if k.endswith("_L_READS"))
    physical = sum(v for k, v in b.items() if k.endswith("_P_READS"))
    assert out["logical_reads"] == logical
    assert out["physical_reads"] == physical
    assert out["prefetch_reads"] == b["POOL_ASYNC_DATA_READS"] + b["POOL_ASYNC_INDEX_READS"]
    assert out["data_read_bytes"] == physical * page
    assert out["read_time_ms"] == b["POOL_READ_TIME"]
    assert (out["lock_waits"], out["lock_escalations"], out["lock_wait_time_ms"]) == (
        d["LOCK_WAITS"],
        d["LOCK_ESCALS"],
        d["LOCK_WAIT_TIME"],
    )
    assert all(out[f"db2_{k.lower()}"] == v for k, v in {**b, **d}.items())


@given(log=st.lists(st.integers(0, 10**9), min_size=4, max_size=4))
def test_log_counters_map_to_the_common_log_keys(log):
    bp = [0] * len(db2_sql.BUFFERPOOL_COUNTERS)
    out = db2_sql.counters_from(bp, [0] * 5, 8192, log)
    g = dict(zip(db2_sql.LOG_COUNTERS, log, strict=True))
    assert out["log_bytes"] == g["LOG_WRITES"] * 4096  # log pages are 4 KiB whatever the table's
    assert out["log_writes"] == out["log_syncs"] == g["NUM_LOG_WRITE_IO"]
    assert out["log_write_time_ms"] == g["LOG_WRITE_TIME"]
    assert out["db2_num_log_buffer_full"] == g["NUM_LOG_BUFFER_FULL"]


def test_nulls_from_an_idle_pool_count_as_zero():
    out = db2_sql.counters_from([None] * len(db2_sql.BUFFERPOOL_COUNTERS), [None] * 5, 4096)
    assert out["logical_reads"] == out["physical_reads"] == 0


def test_catalog_codes_map_back_to_knob_values():
    assert [db2_sql.locksize_knob(c) for c in ("R", "T ", "I", "")] == ["row", "table", None, None]
    assert [db2_sql.direct_io_knob(v) for v in (1, 0, 2, None)] == [True, False, None, None]


# -- container, CLP and cold ---------------------------------------------------------------------
def test_container_environment_uses_the_images_documented_switches():
    env = db2_sql.container_env("pw")
    assert env["LICENSE"] == "accept" and env["DB2INST1_PASSWORD"] == "pw"
    assert env["DBNAME"] == db2_sql.DATABASE and len(db2_sql.DATABASE) <= 8
    for switch in ("TO_CREATE_SAMPLEDB", "ARCHIVE_LOGS", "AUTOCONFIG", "BLU", "HADR_ENABLED"):
        assert env[switch] == "false"


def fake_db2(tmp_path: Path, active_listings: int) -> Path:
    """A ``db2`` command that logs its arguments and lists the database as active for the
    first ``active_listings`` LIST ACTIVE DATABASES calls (FORCE APPLICATION is async)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "db2"
    script.write_text(
        "#!/bin/bash\n"
        f'echo "$*" >> {tmp_path}/calls\n'
        'if [ "$*" = "list active databases" ]; then\n'
        f"  n=$(grep -c 'list active' {tmp_path}/calls)\n"
        f'  [ "$n" -le {active_listings} ] && echo "Database name = {db2_sql.DATABASE}"\n'
        "fi\n"
        "exit 0\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (bin_dir / "sleep").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "sleep").chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("still_active", [0, 3])
def test_stop_repeats_force_and_deactivate_until_the_database_is_inactive(tmp_path, still_active):
    bin_dir = fake_db2(tmp_path, still_active)
    stop = db2_sql.cold_commands()["stop"]
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", stop], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == "force application all"
    assert calls.count(f"deactivate db {db2_sql.DATABASE}") == still_active + 1
    assert calls.count("force application all") == still_active + 1


def test_stop_fails_when_the_database_stays_active(tmp_path):
    bin_dir = fake_db2(tmp_path, 10**6)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    stop = db2_sql.cold_commands()["stop"]
    proc = subprocess.run(["bash", "-c", stop], env=env, capture_output=True, text=True)
    assert proc.returncode == 1 and "still active" in proc.stdout


@pytest.mark.parametrize(("rc", "ok"), [(0, True), (2, True), (4, False), (8, False)])
def test_start_fails_only_on_clp_errors_not_warnings(tmp_path, rc, ok):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "db2").write_text(f'#!/bin/sh\necho "$*" > {tmp_path}/calls\nexit {rc}\n')
    (bin_dir / "db2").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", db2_sql.cold_commands()["start"]], env=env)
    assert (proc.returncode == 0) is ok
    assert (tmp_path / "calls").read_text().strip() == f"activate db {db2_sql.DATABASE}"


def test_clp_runs_as_the_instance_owner_through_a_login_shell():
    assert db2_sql.clp("db2 activate db X")[:4] == ["su", "-", db2_sql.INSTANCE, "-c"]


def test_container_files_map_to_the_host_volume(tmp_path):
    inside = f"{db2_sql.DATA_MOUNT}/data/db2inst1/NODE0000/TUNELAB/T0000003/C0000000.LRG"
    assert (
        db2_sql.host_path(inside, tmp_path)
        == tmp_path / "data/db2inst1/NODE0000/TUNELAB/T0000003/C0000000.LRG"
    )
    assert db2_sql.host_path("/var/db2/elsewhere", tmp_path) is None


# -- image and plan ------------------------------------------------------------------------------
def test_pinned_tag_is_the_one_the_container_readme_documents():
    readme = (REPO / "containers" / "db2" / "README.md").read_text()
    assert f"docker pull {db2_info.IMAGE}" in readme
    tag = db2_info.IMAGE.rsplit(":", 1)[1]
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", tag)


def test_missing_image_stops_before_any_container_with_the_pull_command(tmp_path, monkeypatch):
    from tunelab.host import containers

    if containers.docker_unavailable_reason():
        pytest.skip(containers.docker_unavailable_reason())
    missing = "icr.io/db2_community/db2:0.0.0.0"
    monkeypatch.setenv(db2.IMAGE_ENV, missing)
    started = []
    monkeypatch.setattr(containers, "start", lambda *a, **k: started.append(a))
    eng = db2.DB2Engine(tmp_path / "points" / "p1" / "engine", "run1")
    with pytest.raises(EngineError) as err:
        eng.provision(knobs())
    assert f"docker pull {missing}" in str(err.value)
    assert started == []
    eng.teardown()


def test_provision_takes_a_prefetch_that_is_not_a_multiple_of_the_extent(tmp_path, monkeypatch):
    def no_image(tag):
        raise EngineError("no image")  # the first step after the knobs are checked

    monkeypatch.setattr(db2, "require_image", no_image)
    eng = db2.DB2Engine(tmp_path / "e", "r")
    with pytest.raises(EngineError, match="no image"):
        eng.provision(knobs(extent_size=16, prefetch_size=20))


def test_planned_sql_lists_every_statement_without_docker(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    k = knobs(
        page_size=8192,
        buffer_pool=4096,
        extent_size=16,
        prefetch_size=64,
        overhead_ms=6.725,
        transferrate_ms=0.08,
        lock_granularity="table",
        index="covering",
    )
    plan = IndexPlan("covering", ("id",), ("name", "balance"))
    lines = db2.DB2Engine(Path("/nonexistent"), "plan").planned_sql(k, Dataset(1000, 1), plan)
    text = "\n".join(lines)
    for stmt in (
        db2_sql.bufferpool_ddl(k),
        db2_sql.tablespace_ddl(k),
        db2_sql.table_ddl(TABLE, 8192),
        db2_sql.locksize_ddl(TABLE, "table"),
        db2_sql.lock_sql(TABLE),
        *db2_sql.index_ddl(TABLE, plan),
        db2_sql.runstats_sql(TABLE, True),
        *db2_sql.cold_commands().values(),
        *db2_sql.counter_sql(8192).values(),
    ):
        assert stmt in text
    assert (
        "CREATE UNIQUE INDEX IX_ACCOUNTS_COVERING ON ACCOUNTS (ID) INCLUDE (NAME, BALANCE)" in text
    )
    assert "DB2INST1_PASSWORD=<generated>" in text
    assert (
        text.index("CREATE BUFFERPOOL")
        < text.index("CREATE LARGE TABLESPACE")
        < text.index("CREATE TABLE")
    )


def test_container_files_are_made_readable_up_to_the_mount(tmp_path):
    # The script as it runs inside the container, here on a copy of the layout below the mount.
    mount = tmp_path / db2_sql.DATA_MOUNT.strip("/")
    f = mount / "data" / "db2inst1" / "NODE0000" / "TUNELAB" / "T0000003" / "C0000000.LRG"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"x")
    for p in (f, *f.parents):
        if p == mount:
            break
        p.chmod(0o700 if p.is_dir() else 0o600)
    script = db2_sql.readable_script().replace(db2_sql.DATA_MOUNT, str(mount))
    subprocess.run(["sh", "-c", script, "sh", str(f)], check=True)
    assert f.stat().st_mode & 0o444 == 0o444
    for d in f.parents:
        if d == mount:
            break
        assert d.stat().st_mode & 0o555 == 0o555, d


# -- the container side, in a stand-in image ------------------------------------------------------
# Without the Db2 image, a tiny image built here from a static busybox plays its container
# part: it logs the readiness line, creates a table space container file below the data mount
# and answers the CLP commands (`db2` is a script that records them). This checks what the
# engine asks of Docker (capabilities, loopback port, labels, the volume), the readiness wait,
# the `su - db2inst1 -c` commands through `docker exec`, the host-side eviction of the files,
# and that teardown leaves nothing behind. Connecting needs the real server.
BUSYBOX = Path("/bin/busybox")
STANDIN = "tunelab-test/db2-standin:1"
STANDIN_FILE = "data/db2inst1/NODE0000/TUNELAB/T0000003/C0000000.LRG"
MOUNT = db2_sql.DATA_MOUNT
STANDIN_ENTRY = f"""#!/bin/sh
f={MOUNT}/{STANDIN_FILE}
mkdir -p $(dirname $f) && dd if=/dev/zero of=$f bs=4096 count=64 2>/dev/null
chown -R 1000:1000 {MOUNT}/data && chmod 600 $f && chmod -R go-rx {MOUNT}/data
echo "(*) Setup has completed."
exec sleep 100000
"""
STANDIN_DB2 = f"""#!/bin/sh
echo "$(id -un): $*" >> /tmp/clp.log
case "$*" in
  "deactivate db "*) touch /tmp/inactive ;;
  "activate db "*) rm -f /tmp/inactive ;;
  "list active databases") [ -e /tmp/inactive ] || echo "Database name = {db2_sql.DATABASE}" ;;
esac
exit 0
"""


def _standin_tar() -> bytes:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add(name: str, data: bytes | None = None, mode: int = 0o755, link: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if link:
                info.type, info.linkname = tarfile.SYMTYPE, link
            elif data is None:
                info.type = tarfile.DIRTYPE
            else:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)

        for d in ("bin", "usr", "usr/bin", "etc", "tmp", "root", "database", "dev"):
            add(d, mode=0o1777 if d == "tmp" else 0o755)
        add("bin/busybox", BUSYBOX.read_bytes())
        for tool in (
            "sh",
            "su",
            "chmod",
            "chown",
            "dirname",
            "seq",
            "grep",
            "sleep",
            "rm",
            "mkdir",
            "dd",
            "id",
            "touch",
            "cat",
        ):
            add(f"bin/{tool}", link="busybox")
        add("usr/bin/db2", STANDIN_DB2.encode())
        add("entrypoint", STANDIN_ENTRY.encode())
        add(
            "etc/passwd",
            b"root:x:0:0:root:/root:/bin/sh\ndb2inst1:x:1000:1000::/database:/bin/sh\n",
            0o644,
        )
        add("etc/group", b"root:x:0:\ndb2iadm1:x:1000:\n", 0o644)
    return buf.getvalue()


@pytest.fixture(scope="module")
def standin_image():
    from tunelab.host import containers

    if reason := containers.docker_unavailable_reason():
        pytest.skip(reason)
    if not BUSYBOX.is_file():
        pytest.skip("needs a static busybox at /bin/busybox (apt-get install busybox-static)")
    client = containers.client()
    repo, tag = STANDIN.split(":")
    client.api.import_image_from_data(
        _standin_tar(), repository=repo, tag=tag, changes=['CMD ["/entrypoint"]']
    )
    yield STANDIN
    client.images.remove(STANDIN, force=True)


@pytest.mark.docker
def test_container_part_of_the_lifecycle_in_a_standin_image(standin_image, tmp_path, monkeypatch):
    from tunelab.host import cache, containers

    monkeypatch.setenv(db2.IMAGE_ENV, standin_image)
    monkeypatch.setattr(db2, "CONNECT_ATTEMPTS_S", 1)
    workdir = tmp_path / "points" / "standin-point" / "engine"
    eng = db2.DB2Engine(workdir, "standin-run")
    try:
        with pytest.raises(EngineError, match="cannot connect") as err:
            eng.provision(knobs())  # everything up to the first SQL connection
        assert eng.password and eng.password not in str(err.value)
        rc = eng.container
        assert eng.password not in rc.logs()
        attrs = containers.client().api.inspect_container(rc.id)
        assert {"IPC_LOCK", "IPC_OWNER"} <= set(attrs["HostConfig"]["CapAdd"])
        bindings = attrs["HostConfig"]["PortBindings"][f"{db2.PORT}/tcp"]
        assert [b["HostIp"] for b in bindings] == ["127.0.0.1"]
        labels = attrs["Config"]["Labels"]
        assert labels[containers.LABEL] == "1"
        assert labels[containers.POINT_LABEL] == "standin-point"
        assert "Setup has completed" in rc.logs()

        # The host sees the table space file through the volume; make it readable, evict it.
        inside = f"{db2_sql.DATA_MOUNT}/{STANDIN_FILE}"
        host_file = db2_sql.host_path(inside, eng.host_dir)
        assert host_file is not None and host_file.stat().st_size == 64 * 4096
        code, out = rc.exec(["sh", "-c", db2_sql.readable_script(), "sh", inside], user="root")
        assert code == 0, out
        host_file.read_bytes()  # readable to this process now
        cache.evict([host_file])
        resident, total = cache.residency([host_file])
        assert total == 64 * 4096 // cache.PAGE and resident <= total

        # The cold cycle's CLP commands reach `db2` as the instance owner, in order.
        cmds = db2_sql.cold_commands()
        eng._clp(cmds["stop"], "stop")
        eng._clp(cmds["start"], "start")
        code, log = rc.exec(["cat", "/tmp/clp.log"])
        assert code == 0 and log.splitlines() == [
            "db2inst1: force application all",
            f"db2inst1: deactivate db {db2_sql.DATABASE}",
            "db2inst1: list active databases",
            f"db2inst1: activate db {db2_sql.DATABASE}",
        ]
    finally:
        eng.teardown()
    left = containers.client().containers.list(
        all=True, filters={"label": [f"{containers.RUN_LABEL}=standin-run"]}
    )
    assert left == [] and not eng.host_dir.exists()


def test_a_kept_server_is_left_without_the_points_objects():
    stmts = db2_sql.point_cleanup_sql("accounts", 8192)
    assert stmts == [
        "DROP TABLE ACCOUNTS",
        "DROP TABLESPACE TL_TS_8K",
        "DROP BUFFERPOOL TL_BP_8K",
    ]
    # the table space goes before the buffer pool it uses (Db2 refuses the other order)
    assert db2_sql.point_cleanup_sql(None, 4096) == [
        "DROP TABLESPACE TL_TS_4K",
        "DROP BUFFERPOOL TL_BP_4K",
    ]


# -- timed statements: literals, guideline, plans, engine time, fetch -----------------------------
# EXPLAIN has no rule in the sqlfluff db2 dialect: IBM's syntax diagram, written out.
# EXPLAIN {PLAN SELECTION | ALL | PLAN} [{FOR | WITH} SNAPSHOT] [WITH REOPT ONCE]
#   [SET QUERYNO = integer] [SET QUERYTAG = string-constant] FOR explainable-sql-statement
EXPLAIN = re.compile(
    r"^EXPLAIN (?:PLAN SELECTION|ALL|PLAN)(?: (?:FOR|WITH) SNAPSHOT)?(?: WITH REOPT ONCE)?"
    r"(?: SET QUERYNO = (?P<no>\d+))?(?: SET QUERYTAG = '(?P<tag>[^']{0,20})')?"
    r" FOR (?P<stmt>(?:SELECT|UPDATE|INSERT|DELETE) .+)$",
    re.DOTALL,
)
READS = ("scan", "multipoint", "range", "point")
KINDS = workloads.INDEX_KINDS
OFFLINE = db2.DB2Engine(Path("/nonexistent"), "plan")


def parse(sql: str) -> None:
    sqlfluff = pytest.importorskip("sqlfluff")
    sqlfluff.parse(sql, dialect="db2")


def read_statements(wtype: str, kind: str, access: str, fetch: str = "all", rows: int = 5000):
    w = workloads.Workload(wtype, {**workloads.DEFAULTS[wtype], "fetch": fetch})
    plan = w.index_plan(kind)
    return w, plan, workloads.statements(OFFLINE.dialect, w, plan, access, rows, 11)


def guideline_of(sql: str) -> ET.Element:
    m = re.search(r"/\* (<OPTGUIDELINES>.*</OPTGUIDELINES>) \*/$", sql)
    assert m, sql
    return ET.fromstring(m[1])  # well-formed XML, or this raises


@pytest.mark.parametrize("access", ["optimizer", "forced"])
@pytest.mark.parametrize("fetch", ["all", "count"])
@pytest.mark.parametrize("wtype", READS)
def test_timed_reads_reach_db2_with_their_integer_literals(wtype, fetch, access):
    w, plan, stmts = read_statements(wtype, "nonclustered", access, fetch)
    args = workloads.query_args(w, 5000, 11) or [()]
    assert len(stmts.bound) == len(args)
    if wtype not in workloads.VALUE_DEPENDENT:
        # Unique-key lookups keep their markers: one plan fits every value, compiled once
        # instead of once per lookup inside the timed section.
        for (sql, bound_args), values in zip(stmts.bound, args, strict=True):
            assert bound_args == values and sql.count("?") == len(values)
        parse(stmts.bound[0][0].replace("?", "1"))
        return
    for (sql, bound_args), values in zip(stmts.bound, args, strict=True):
        assert bound_args == () and "?" not in sql  # nothing left for a marker
        where = sql.split(" WHERE ", 1)[1].split(" /*")[0] if values else ""
        literals = re.findall(r"(?:=|BETWEEN|AND) (-?\d+)", where)
        assert [int(v) for v in literals] == [int(v) for v in values]
        if fetch == "count":
            assert "SUM(CAST(" in sql and not re.search(r"SUM\(\w+\)", sql)
        assert ("OPTGUIDELINES" in sql) is (access == "forced")
    for sql, _ in stmts.bound[:3]:  # the rest differ only in their literals
        parse(sql)


def test_each_statement_is_compiled_for_its_own_range():
    # Two ranges of different width are two statement texts: Db2 plans each for its values.
    narrow = db2_explain.bind_sql("SELECT id FROM accounts WHERE lat BETWEEN ? AND ?", (10, 19))
    wide = db2_explain.bind_sql("SELECT id FROM accounts WHERE lat BETWEEN ? AND ?", (10, 200_009))
    assert narrow == "SELECT id FROM accounts WHERE lat BETWEEN 10 AND 19"
    assert wide.endswith("BETWEEN 10 AND 200009") and wide != narrow


@pytest.mark.parametrize(
    "bad", [1.5, "1", "1; DROP TABLE accounts", True, None, b"7", Decimal("3")]
)
def test_only_integers_are_written_into_statements(bad):
    with pytest.raises(EngineError, match="only integers"):
        db2_explain.bind_sql("SELECT id FROM accounts WHERE id = ?", (bad,))


def test_numpy_and_negative_integers_are_formatted_by_int():
    np = pytest.importorskip("numpy")
    sql = db2_explain.bind_sql(
        "SELECT id FROM accounts WHERE lat BETWEEN ? AND ?", (np.int64(-3), 7)
    )
    assert sql.endswith("BETWEEN -3 AND 7")


def test_markers_and_arguments_must_match():
    with pytest.raises(EngineError, match="markers"):
        db2_explain.bind_sql("SELECT id FROM accounts WHERE lat BETWEEN ? AND ?", (1,))
    with pytest.raises(EngineError, match="markers"):
        db2_explain.bind_sql("SELECT id FROM accounts", (1,))


def test_binding_twice_changes_nothing():
    _, _, stmts = read_statements("range", "nonclustered", "forced", "count")
    sql = stmts.bound[0][0]
    assert db2_explain.bind_sql(sql, ()) == sql


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("wtype", ["multipoint", "range", "point"])
def test_forced_statements_end_with_a_guideline_naming_the_index_built(wtype, kind):
    _, plan, stmts = read_statements(wtype, kind, "forced")
    created = [INDEX.match(s) for s in db2_sql.index_ddl(TABLE, plan) if s.startswith("CREATE")]
    for sql, _ in stmts.bound:
        assert sql.count("OPTGUIDELINES") == 2  # one guideline, after the SQL portion
        root = guideline_of(sql)
        assert root.tag == "OPTGUIDELINES" and len(root) == 1
        (request,) = root
        assert request.get("TABLE") == TABLE.upper()
        if kind == "none":
            assert request.tag == "TBSCAN" and request.get("INDEX") is None
        else:
            assert request.tag == "IXSCAN"
            assert (
                request.get("INDEX")
                == created[0]["name"]
                == OFFLINE.dialect.index_name(TABLE, plan)
            )


def test_the_scan_workload_is_forced_to_a_table_scan():
    _, _, stmts = read_statements("scan", "nonclustered", "forced")
    (request,) = guideline_of(stmts.bound[0][0])
    assert request.tag == "TBSCAN"


def test_an_extra_guideline_is_refused_since_db2_would_ignore_both():
    g = db2_explain.optguideline(TABLE, IndexPlan("none"))
    with pytest.raises(EngineError, match="more than one"):
        db2_explain.bind_sql(f"SELECT id FROM accounts {g} WHERE id = 1 {g}", ())


@pytest.mark.parametrize(
    ("wtype", "kind", "expected"),
    [
        ("range", "none", "scan"),
        ("range", "nonclustered", "index:IX_ACCOUNTS_NONCLUSTERED"),
        ("range", "clustered", "index:IX_ACCOUNTS_CLUSTERED"),
        ("range", "covering", "index-only:IX_ACCOUNTS_COVERING"),
        ("range", "covering_wrong_order", "index-only:IX_ACCOUNTS_COVERING_WRONG_ORDER"),
        ("point", "covering", "index-only:IX_ACCOUNTS_COVERING"),
        # an update's "covering" index covers nothing: a plain index, the row is fetched
        ("update", "covering", "index:IX_ACCOUNTS_COVERING"),
        ("update", "covering_wrong_order", "index:IX_ACCOUNTS_COVERING_WRONG_ORDER"),
        ("scan", "nonclustered", "scan"),
    ],
)
def test_expected_access_names_the_index_as_db2_folds_it(wtype, kind, expected):
    plan = workloads.Workload(wtype, workloads.DEFAULTS[wtype]).index_plan(kind)
    assert OFFLINE.dialect.expected_access(TABLE, plan) == expected


def test_explain_statements_follow_the_syntax_diagram():
    _, _, stmts = read_statements("range", "covering", "forced")
    for n, (sql, _) in enumerate(stmts.to_explain(), 1):
        m = EXPLAIN.match(db2_explain.explain_sql(sql, n))
        assert m, db2_explain.explain_sql(sql, n)
        assert int(m["no"]) == n and m["tag"] == db2_explain.QUERYTAG
        assert m["stmt"] == sql  # the text that is executed, guideline at its end
        parse(m["stmt"])


def explain_support_sql() -> list[str]:
    return [
        *db2_explain.plan_sql(7).values(),
        *db2_explain.explain_tables_sql().values(),
        db2_sql.connection_sql([17, 18]),
        db2_sql.APPLICATION_HANDLE_SQL,
    ]


@pytest.mark.parametrize("sql", explain_support_sql())
def test_plan_monitor_and_install_statements_parse_with_the_db2_dialect(sql):
    parse(sql)


def test_plan_queries_read_the_latest_statement_of_their_tag():
    for part, sql in db2_explain.plan_sql(7).items():
        assert (
            sql.count("QUERYNO = 7") == 2 and sql.count(f"QUERYTAG = '{db2_explain.QUERYTAG}'") == 2
        )
        assert "MAX(EXPLAIN_TIME)" in sql and "EXPLAIN_LEVEL = 'P'" in sql
        for key in ("EXPLAIN_REQUESTER", "EXPLAIN_TIME", "SOURCE_NAME", "STMTNO", "SECTNO"):
            assert f"X.{key} = S.{key}" in sql, part
    assert "SYSINSTALLOBJECTS('EXPLAIN', 'C'" in db2_explain.explain_tables_sql()["create"]


# Plans as IBM documents the explain tables: EXPLAIN_OPERATOR (OPERATOR_ID, OPERATOR_TYPE
# CHAR(6), TOTAL_COST), EXPLAIN_STREAM (STREAM_ID, SOURCE_TYPE 'O'|'D', SOURCE_ID (-1 for a
# data object), TARGET_TYPE, TARGET_ID, OBJECT_SCHEMA and OBJECT_NAME (NULL between two
# operators), STREAM_COUNT) and EXPLAIN_ARGUMENT (OPERATOR_ID, ARGUMENT_TYPE CHAR(8), VALUE).
def op_to_op(sid, source, target, rows):
    return (sid, "O", source, "O", target, None, None, rows)


def data_to_op(sid, name, target, rows):
    return (sid, "D", -1, "O", target, "DB2INST1", name, rows)


PLANS = {
    "tbscan": (
        [(1, "RETURN", 3512.4), (2, "TBSCAN", 3512.1)],
        [op_to_op(1, 2, 1, 400.0), data_to_op(2, "ACCOUNTS", 2, 400000.0)],
        [],
        "scan;tbscan",
    ),
    "ixscan+fetch": (
        [(1, "RETURN", 41.0), (2, "FETCH ", 40.9), (3, "IXSCAN", 15.2)],
        [
            op_to_op(1, 2, 1, 400.0),
            op_to_op(2, 3, 2, 400.0),
            data_to_op(3, "IX_ACCOUNTS_NONCLUSTERED", 3, 400000.0),
            data_to_op(4, "ACCOUNTS", 2, 400000.0),
        ],
        [(3, "PREFETCH", "NONE"), (1, "STMTPROF", "Embedded guideline")],
        "index:IX_ACCOUNTS_NONCLUSTERED;ixscan+fetch;guideline",
    ),
    "list prefetch": (
        [
            (1, "RETURN", 900.0),
            (2, "FETCH ", 899.0),
            (3, "RIDSCN", 30.0),
            (4, "SORT  ", 29.0),
            (5, "IXSCAN", 25.0),
        ],
        [
            op_to_op(1, 2, 1, 8000.0),
            op_to_op(2, 3, 2, 8000.0),
            op_to_op(3, 4, 3, 8000.0),
            op_to_op(4, 5, 4, 8000.0),
            data_to_op(5, "IX_ACCOUNTS_NONCLUSTERED", 5, 400000.0),
            data_to_op(6, "ACCOUNTS", 2, 400000.0),
        ],
        [],
        "index:IX_ACCOUNTS_NONCLUSTERED;ixscan+fetch;list-prefetch",
    ),
    "index-only, count": (
        [(1, "RETURN", 20.0), (2, "GRPBY ", 19.9), (3, "IXSCAN", 19.5)],
        [
            op_to_op(1, 2, 1, 1.0),
            op_to_op(2, 3, 2, 4000.0),
            data_to_op(3, "IX_ACCOUNTS_COVERING", 3, 400000.0),
        ],
        [],
        "index-only:IX_ACCOUNTS_COVERING;ixscan",
    ),
    "sorted through a temp table": (
        [
            (1, "RETURN", 70.0),
            (2, "TBSCAN", 69.0),
            (3, "SORT  ", 68.0),
            (4, "FETCH ", 60.0),
            (5, "IXSCAN", 10.0),
        ],
        [
            op_to_op(1, 2, 1, 400.0),
            op_to_op(2, 3, 2, 400.0),
            op_to_op(3, 4, 3, 400.0),
            op_to_op(4, 5, 4, 400.0),
            data_to_op(5, "IX_ACCOUNTS_CLUSTERED", 5, 400000.0),
            data_to_op(6, "ACCOUNTS", 4, 400000.0),
        ],
        [],
        "index:IX_ACCOUNTS_CLUSTERED;ixscan+fetch",  # that TBSCAN reads the sort, not a table
    ),
    "update by key": (
        [(1, "RETURN", 15.0), (2, "UPDATE", 14.0), (3, "FETCH ", 7.6), (4, "IXSCAN", 7.5)],
        [
            op_to_op(1, 2, 1, 1.0),
            op_to_op(2, 3, 2, 1.0),
            op_to_op(3, 4, 3, 1.0),
            data_to_op(4, "IX_ACCOUNTS_NONCLUSTERED", 4, 400000.0),
            data_to_op(5, "ACCOUNTS", 3, 400000.0),
            (6, "O", 2, "D", -1, "DB2INST1", "ACCOUNTS", 1.0),
        ],
        [],
        "index:IX_ACCOUNTS_NONCLUSTERED;ixscan+fetch",
    ),
    "nothing recognised": ([(1, "RETURN", 0.0)], [], [], "unknown"),
}


@pytest.mark.parametrize("name", PLANS)
def test_plans_normalise_from_the_explain_rows(name):
    operators, streams, arguments, expected = PLANS[name]
    ops = db2_explain.plan_graph(operators, streams, arguments)
    assert db2_explain.normalise_plan(ops) == expected
    text = db2_explain.plan_text(ops)
    assert text.startswith("RETURN (1)")
    for _, otype, _ in operators:
        assert f"{otype.strip()} (" in text
    for s in streams:
        if s[1] == "D":
            assert f"DB2INST1.{s[6]}" in text


def test_the_plan_text_is_the_operator_tree():
    operators, streams, arguments, _ = PLANS["ixscan+fetch"]
    lines = db2_explain.plan_text(
        db2_explain.plan_graph(operators, streams, arguments)
    ).splitlines()
    assert lines == [
        "RETURN (1)  cost=41.00  [STMTPROF=Embedded guideline]",
        "  FETCH (2)  cost=40.90  rows=400",
        "    IXSCAN (3)  cost=15.20  rows=400  [PREFETCH=NONE]",
        "      index DB2INST1.IX_ACCOUNTS_NONCLUSTERED  rows=400000",
        "    table DB2INST1.ACCOUNTS  rows=400000",
    ]


class FakeCursor:
    """A DB-API cursor that answers the plan queries with canned explain rows."""

    def __init__(self, log: list[str], answers: dict[str, list[tuple]]):
        self.log, self.answers, self.rows = log, answers, []

    def execute(self, sql, args=None):
        self.log.append(sql)
        self.rows = next((r for key, r in self.answers.items() if key in sql), [])

    def fetchall(self):
        return list(self.rows)

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def close(self):
        pass


class FakeConn:
    def __init__(self, answers=None):
        self.log: list[str] = []
        self.answers = answers or {}
        self.commits = 0

    def cursor(self):
        return FakeCursor(self.log, self.answers)

    def commit(self):
        self.commits += 1


def test_explain_runs_explain_plan_then_reads_that_statement_back():
    operators, streams, arguments, expected = PLANS["ixscan+fetch"]
    conn = FakeConn(
        {
            "EXPLAIN_OPERATOR X": operators,
            "EXPLAIN_STREAM X": streams,
            "EXPLAIN_ARGUMENT X": arguments,
        }
    )
    eng = db2.DB2Engine(Path("/nonexistent"), "t")
    _, plan, stmts = read_statements("multipoint", "nonclustered", "forced")
    sql, args = stmts.to_explain()[0]
    got = eng.dialect.explain(conn, sql, args)
    assert got.path == expected and got.base == eng.dialect.expected_access(TABLE, plan)
    first, *reads = conn.log
    m = EXPLAIN.match(first)
    assert m and m["stmt"] == sql and int(m["no"]) == 1
    assert [r for r in reads if "QUERYNO = 1 " in r] == reads and len(reads) == 3
    assert got.raw.splitlines()[0] == sql and "IXSCAN (3)" in got.raw
    eng.dialect.explain(conn, sql, args)
    assert "QUERYNO = 2 " in conn.log[4]  # each explain has its own number


def test_an_update_is_explained_with_its_key_written_in():
    conn = FakeConn(
        {
            "EXPLAIN_OPERATOR X": PLANS["update by key"][0],
            "EXPLAIN_STREAM X": PLANS["update by key"][1],
        }
    )
    eng = db2.DB2Engine(Path("/nonexistent"), "t")
    got = eng.dialect.explain(conn, "UPDATE accounts SET balance = balance + 1 WHERE id = ?", (42,))
    assert EXPLAIN.match(conn.log[0])["stmt"].endswith("WHERE id = 42")
    assert got.path == "index:IX_ACCOUNTS_NONCLUSTERED;ixscan+fetch"


def test_a_failing_explain_names_the_statement():
    class Broken(FakeConn):
        def cursor(self):
            cur = super().cursor()

            def fail(sql, args=None):
                raise RuntimeError("SQL0219N  The required Explain table does not exist.")

            cur.execute = fail
            return cur

    with pytest.raises(EngineError, match="EXPLAIN of SELECT .*SQL0219N"):
        db2.DB2Engine(Path("/nonexistent"), "t").dialect.explain(
            Broken(), "SELECT id FROM accounts", ()
        )


def test_explain_tables_are_created_only_when_missing(monkeypatch):
    for present, creates in ((len(db2_explain.EXPLAIN_TABLES), 0), (0, 1)):
        eng = db2.DB2Engine(Path("/nonexistent"), "t")
        state = {"n": present}
        done: list[list[str]] = []

        def execute(stmts, conn=None, state=state, done=done):
            done.append(list(stmts))
            state["n"] = len(db2_explain.EXPLAIN_TABLES)

        monkeypatch.setattr(eng, "query", lambda sql, state=state: [(state["n"],)])
        monkeypatch.setattr(eng, "execute", execute)
        eng._ensure_explain_tables()
        assert done == [[db2_explain.explain_tables_sql()["create"]]] * creates


def test_engine_time_is_the_connections_request_time_in_ns(monkeypatch):
    eng = db2.DB2Engine(Path("/nonexistent"), "t")
    eng.knobs = knobs()
    asked: list[str] = []
    conn_row = (250, 200, 30, 120, 9000, 14, 180_000)

    def query(sql):
        asked.append(sql)
        if "MON_GET_CONNECTION" in sql:
            return [conn_row]
        if "MON_GET_BUFFERPOOL" in sql:
            return [(0,) * len(db2_sql.BUFFERPOOL_COUNTERS)]
        if "MON_GET_TRANSACTION_LOG" in sql:
            return [(0,) * len(db2_sql.LOG_COUNTERS)]
        return [(0,) * len(db2_sql.DATABASE_COUNTERS)]

    monkeypatch.setattr(eng, "query", query)
    conns = [
        FakeConn({"MON_GET_APPLICATION_HANDLE": [(41,)]}),
        FakeConn({"MON_GET_APPLICATION_HANDLE": [(42,)]}),
    ]
    first = eng.counters(conns)
    again = eng.counters(conns)
    assert first["engine_time_ns"] == again["engine_time_ns"] == 250 * 1_000_000
    assert first["db2_conn_total_compile_time"] == 30
    assert first["db2_conn_client_idle_wait_time"] == 9000
    # The handle is asked once per connection, on it, and committed before any counter.
    for c in conns:
        assert c.log == [db2_sql.APPLICATION_HANDLE_SQL] and c.commits == 1
    monitor = [s for s in asked if "MON_GET_CONNECTION" in s]
    assert monitor == [db2_sql.connection_sql([41, 42])] * 2
    assert "IN (41, 42)" in monitor[0]
    nobody = eng.counters([])
    assert nobody["engine_time_ns"] == 0


def test_engine_time_counters_map_to_keys():
    out = db2_sql.engine_time_from([None] * len(db2_sql.CONNECTION_COUNTERS))
    assert out["engine_time_ns"] == 0
    assert set(out) == {"engine_time_ns"} | {
        f"db2_conn_{c.lower()}" for c in db2_sql.CONNECTION_COUNTERS
    }
    assert db2_info.INFO.engine_time and "TOTAL_RQST_TIME" in db2_info.INFO.engine_time
    assert "forced" in db2_info.INFO.access_modes


class BatchCursor:
    """ibm_db_dbi's Cursor surface the fetch uses: fetchmany(size) and FIX_RETURN_TYPE."""

    def __init__(self, rows: int):
        self.left, self.FIX_RETURN_TYPE, self.sizes = rows, 1, []

    def fetchmany(self, size=0):
        self.sizes.append(size)
        n = min(size, self.left)
        self.left -= n
        return [(i,) for i in range(n)]


@pytest.mark.parametrize(
    "rows", [0, 1, db2_statements.FETCH_ROWS, 3 * db2_statements.FETCH_ROWS + 7]
)
def test_fetch_counts_batches_from_the_drivers_c_loop(rows):
    cur = BatchCursor(rows)
    assert OFFLINE.dialect.fetch(cur) == rows
    assert cur.FIX_RETURN_TYPE == 0  # no per-row Python type fix-up in ibm_db_dbi
    assert set(cur.sizes) == {db2_statements.FETCH_ROWS}
    assert (
        len(cur.sizes) == -(-rows // db2_statements.FETCH_ROWS) + 1
    )  # the last one comes back empty


def test_ibm_db_dbi_fetchmany_is_the_c_loop_plus_an_optional_python_fix_up():
    # What fetch relies on, checked in the installed driver: fetchmany hands the whole batch
    # to ibm_db.fetchmany (C) and only revisits rows in Python when FIX_RETURN_TYPE is set.
    import inspect

    dbi = pytest.importorskip("ibm_db_dbi")
    src = inspect.getsource(dbi.Cursor.fetchmany)
    assert "ibm_db.fetchmany(self.stmt_handler, size)" in src
    assert "if self.FIX_RETURN_TYPE == 1" in src
    assert "FIX_RETURN_TYPE" in inspect.getsource(dbi.Cursor.__init__)


def fake_clp(tmp_path: Path, optprofile: str, activate_rc: int = 0) -> dict[str, str]:
    """db2set, db2, db2stop and db2start that log their arguments; db2set keeps its value."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    state = tmp_path / "optprofile"
    state.write_text(optprofile)
    log = tmp_path / "calls"
    scripts = {
        "db2set": f'echo "db2set $*" >> {log}\n'
        f'case "$1" in *=*) echo "${{1#*=}}" > {state} ;; *) cat {state} ;; esac\n',
        "db2": f'echo "db2 $*" >> {log}\n'
        f'case "$*" in "activate db "*) exit {activate_rc} ;; esac\nexit 0\n',
        "db2stop": f'echo "db2stop $*" >> {log}\n',
        "db2start": f'echo "db2start $*" >> {log}\n',
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_guidelines_are_enabled_once_with_an_instance_restart(tmp_path):
    env = fake_clp(tmp_path, "")
    script = db2_explain.optprofile_script()
    proc = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "restarted" in proc.stdout
    calls = (tmp_path / "calls").read_text().splitlines()
    assert "db2set DB2_OPTPROFILE=YES" in calls
    assert calls.index("db2set DB2_OPTPROFILE=YES") < calls.index("db2stop force")
    assert calls.index("db2stop force") < calls.index("db2start ")
    assert calls[-2:] == [f"db2 activate db {db2_sql.DATABASE}", "db2set DB2_OPTPROFILE"]
    # A server that has it already (a kept one) is left running.
    (tmp_path / "calls").unlink()
    again = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "restarted" not in again.stdout
    assert (tmp_path / "calls").read_text().splitlines() == ["db2set DB2_OPTPROFILE"]


def test_enabling_guidelines_fails_when_the_database_does_not_come_back(tmp_path):
    env = fake_clp(tmp_path, "NO", activate_rc=4)
    proc = subprocess.run(
        ["sh", "-c", db2_explain.optprofile_script()], env=env, capture_output=True
    )
    assert proc.returncode == 1


def test_plan_sql_prints_guideline_explain_and_engine_time_statements(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    plan = workloads.Workload("range", workloads.DEFAULTS["range"]).index_plan("nonclustered")
    lines = OFFLINE.planned_sql(knobs(index="nonclustered"), Dataset(1000, 1), plan)
    text = "\n".join(lines)
    assert db2_explain.optguideline(TABLE, plan) in text
    assert 'INDEX="IX_ACCOUNTS_NONCLUSTERED"' in text
    assert shlex.join(db2_sql.clp(db2_explain.optprofile_script())) in text
    for stmt in (
        *db2_explain.explain_tables_sql().values(),
        *db2_explain.plan_sql("<n>").values(),
        db2_sql.APPLICATION_HANDLE_SQL,
    ):
        assert stmt in text
    assert any(
        EXPLAIN.match(line.split("  --")[0].replace("<n>", "1").replace("<statement>", "SELECT 1"))
        for line in lines
    )
    # The explain tables exist before the first plan is read, guidelines before any statement.
    assert (
        text.index("DB2_OPTPROFILE")
        < text.index("SYSINSTALLOBJECTS")
        < text.index("CREATE BUFFERPOOL")
    )


def test_tunelab_plan_prints_the_timed_statements_as_db2_receives_them(write_sweep, capsys):
    from tunelab import cli

    path = write_sweep(
        """
        name: db2-plan
        engines: [db2]
        dataset: {rows: 1000, seed: 3}
        knobs:
          index: [nonclustered]
        workloads:
          - type: range
            selectivity: [0.5]
        access: forced
        """
    )
    assert cli.main(["plan", str(path), "--engine", "db2", "--sql"]) == 0
    out = capsys.readouterr().out
    timed = [line for line in out.splitlines() if line.startswith("SELECT id, lat, balance")]
    assert timed, out
    for line in timed:
        assert re.search(r"BETWEEN \d+ AND \d+ /\* <OPTGUIDELINES><IXSCAN", line)
        assert line.endswith("</OPTGUIDELINES> */") and "?" not in line
    assert "EXPLAIN PLAN SET QUERYNO = <n> SET QUERYTAG = 'TUNELAB' FOR" in out


# -- the optimizer's I/O costs: OVERHEAD and TRANSFERRATE against the plan chosen ------------------
IO_COSTS = REPO / "workflows" / "sweeps" / "io-costs-vs-plan.yaml"


def planned_blocks(path: Path, capsys) -> dict[str, list[str]]:
    """`tunelab plan --sql` output, split into each point's lines (header first)."""
    from tunelab import cli

    assert cli.main(["plan", str(path), "--engine", "db2", "--sql"]) == 0
    blocks: dict[str, list[str]] = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("-- point "):
            current = blocks.setdefault(line.split()[2], [])
        current.append(line)
    return blocks


def test_io_cost_points_differ_only_in_overhead_and_transferrate(capsys):
    points = {p.point_id: p for p in spec.expand(IO_COSTS, "db2")[0]}
    blocks = planned_blocks(IO_COSTS, capsys)
    assert set(blocks) == set(points)

    # Two points of one selectivity: the lowest costs against the highest.
    def at(overhead, transfer):
        (found,) = [
            i
            for i, p in points.items()
            if p.workload.params["selectivity"] == 0.05
            and (p.knobs["overhead_ms"], p.knobs["transferrate_ms"]) == (overhead, transfer)
        ]
        return found

    low, high = at(0.5, 0.005), at(24.1, 0.32)
    a, b = blocks[low][1:], blocks[high][1:]  # the header names the point
    assert len(a) == len(b)
    differ = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
    assert len(differ) == 1, differ
    x, y = differ[0]
    mx, my = TABLESPACE.match(x), TABLESPACE.match(y)
    assert mx and my, differ
    assert (mx["overhead"], mx["transfer"]) == ("0.5", "0.005")
    assert (my["overhead"], my["transfer"]) == ("24.1", "0.32")
    rest = [k for k in TABLESPACE.groupindex if k not in ("overhead", "transfer")]
    assert [mx[k] for k in rest] == [my[k] for k in rest]


def test_every_io_cost_point_explains_its_statement_before_timing_it(capsys):
    points = {p.point_id: p for p in spec.expand(IO_COSTS, "db2")[0]}
    assert {p.access for p in points.values()} == {"optimizer"}
    for pid, lines in planned_blocks(IO_COSTS, capsys).items():
        explain = [i for i, ln in enumerate(lines) if ln.startswith("EXPLAIN PLAN ")]
        reads = [i for i, ln in enumerate(lines) if "EXPLAIN_STATEMENT WHERE QUERYTAG" in ln]
        timed = [i for i, ln in enumerate(lines) if ln.startswith("SELECT id, lat, balance")]
        index = lines.index("CREATE INDEX IX_ACCOUNTS_NONCLUSTERED ON ACCOUNTS (LAT)")
        assert len(explain) == 1 and len(reads) == 3 and len(timed) == 1, pid
        assert index < explain[0] < reads[0] < timed[0], pid
        # Not forced: the optimizer chooses, and sees the point's own range in the literals.
        assert "OPTGUIDELINES" not in lines[timed[0]]
        lo, hi = map(int, re.search(r"BETWEEN (\d+) AND (\d+)$", lines[timed[0]]).groups())
        rows = points[pid].dataset.rows
        assert hi - lo + 1 == round(points[pid].workload.params["selectivity"] * rows)


def io_cost_rows(index_when) -> pd.DataFrame:
    """Six repetitions of every io-costs point, each with the plan ``index_when`` gives."""
    rows = []
    for p in spec.expand(IO_COSTS, "db2")[0]:
        path = "index:IX_ACCOUNTS_NONCLUSTERED;ixscan+fetch" if index_when(p) else "scan;tbscan"
        for rep in range(6):
            rows.append(
                {
                    "point_id": p.point_id,
                    "workload": p.workload.type,
                    "cache_requested": p.cache,
                    "access_path": path,
                    "elapsed_s": 1.0 + rep / 100,
                    **{f"knob_{k}": v for k, v in p.knobs.items()},
                    **{f"wl_{k}": v for k, v in p.workload.params.items()},
                }
            )
    return pd.DataFrame(rows)


def test_uses_index_claims_follow_the_plans_the_rows_record():
    from tunelab.analysis import claims
    from tunelab.sweep import claimspec

    doc, _ = loading.load_yaml(IO_COSTS)
    found, errors = claimspec.sweep_claims(doc, IO_COSTS, "db2")
    assert errors == []
    plans = [c for c in found if c.get("metric") == "uses_index"]  # IBM's two findings
    assert [c["finding"] for c in plans] == ["io-costs-overhead", "io-costs-transferrate"]

    def cheap_random_reads(p):  # low OVERHEAD or high TRANSFERRATE: the index
        return p.knobs["overhead_ms"] == 0.5 or p.knobs["transferrate_ms"] == 0.32

    frame = io_cost_rows(cheap_random_reads)
    verdicts = claims.evaluate_sweep(plans, frame, "db2")
    assert [v.verdict for v in verdicts] == ["holds", "holds"], [v.evidence for v in verdicts]
    headline = claims.headline(frame, verdicts)  # every overhead's median share, ascending
    assert headline.endswith("< 0.5 1, selectivity 0.05, transferrate_ms 0.04"), headline
    # The optimizer keeps one plan whatever the costs: no claim holds; the same plan on both
    # sides shows the claimed difference absent.
    for same in (lambda p: True, lambda p: False):
        verdicts = claims.evaluate_sweep(plans, io_cost_rows(same), "db2")
        assert [v.verdict for v in verdicts] == ["similar", "similar"]


LOAD = re.compile(
    r"^CALL SYSPROC\.ADMIN_CMD\('LOAD FROM (?P<file>/database/load/[\w.-]+\.del) OF DEL "
    r"MESSAGES ON SERVER INSERT INTO DB2INST1\.(?P<table>\w+) NONRECOVERABLE'\)$"
)


def test_bulk_load_gives_load_a_headerless_file_below_the_mount_and_counts_rows(
    tmp_path, monkeypatch
):
    """LOAD (ADMIN_CMD) reads a file the server sees: the data set's CSV without its header,
    below the data mount, readable by the instance owner; a short table fails the point."""
    from tunelab.store import dataset

    eng = db2.DB2Engine(tmp_path / "engine", "r")
    source = dataset.Source(Dataset(300, 2), tmp_path / "data")
    sent: list[str] = []
    monkeypatch.setattr(eng, "execute", lambda stmts, conn=None: sent.extend(stmts))
    monkeypatch.setattr(eng, "query", lambda sql: [(300,)])
    eng.bulk_load("accounts", source)
    m = LOAD.match(sent[0])
    assert m and m["table"] == "ACCOUNTS", sent
    host = eng.host_dir / m["file"][len(db2_sql.DATA_MOUNT) + 1 :]
    lines = Path(source.csv).read_text().splitlines()
    assert host.read_text().splitlines() == lines[1:]  # no header line
    assert host.stat().st_mode & 0o044 == 0o044
    monkeypatch.setattr(eng, "query", lambda sql: [(299,)])
    with pytest.raises(EngineError, match="LOAD put 299 rows"):
        eng.bulk_load("accounts", source)
