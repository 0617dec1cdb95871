"""The DB2 engine's statements and CLP commands, checked without a server.

Two kinds of check: the statements the sqlfluff ``db2`` dialect covers (CREATE INDEX, ALTER
TABLE, CALL, SELECT) are parsed by it; the rest (CREATE BUFFERPOOL, CREATE TABLESPACE,
CREATE TABLE ... IN, LOCK TABLE), which that dialect does not parse, are matched against
the clause order of IBM's syntax diagrams written out below. On top, the rules the IBM
documentation states: table space and buffer pool page sizes equal, EXTENTSIZE 2..256,
PREFETCHSIZE a multiple of EXTENTSIZE, INCLUDE only on unique indexes, a clustering index
followed by REORG TABLE ... INDEX of that index and RUNSTATS, LOCKSIZE ROW|TABLE.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tunelab import spec, workloads
from tunelab.dataset import COLUMNS, Dataset
from tunelab.engines import db2
from tunelab.engines.base import EngineError, IndexPlan

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
    base = {k: v.default for k, v in db2.INFO.knobs.items() if v.default is not None}
    return {**base, **over}


def pages(m: re.Match) -> int:
    return int(m["page"]) * (1024 if m["k"] else 1)


# -- buffer pool and table space -----------------------------------------------------------------
@pytest.mark.parametrize("page", db2.PAGE_SIZES)
def test_pool_and_space_follow_the_syntax_and_pair_equal_page_sizes(page):
    k = knobs(page_size=page, buffer_pool=5000, extent_size=8, prefetch_size=32)
    bp = BUFFERPOOL.match(db2.bufferpool_ddl(k))
    ts = TABLESPACE.match(db2.tablespace_ddl(k))
    assert bp and ts, (db2.bufferpool_ddl(k), db2.tablespace_ddl(k))
    assert int(bp["size"]) == 5000
    assert pages(bp) == pages(ts) == page  # Db2 pairs a table space only with an equal pool
    assert ts["pool"] == bp["name"]
    assert not bp["name"].startswith("SYS")  # SQLSTATE 42939
    assert (int(ts["extent"]), int(ts["prefetch"])) == (8, 32)


@given(
    page=st.sampled_from(db2.PAGE_SIZES),
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
    k = knobs(page_size=page, buffer_pool=pool, extent_size=extent,
              prefetch_size=extent * multiple, direct_io=direct)  # fmt: skip
    if overhead is not None:
        k["overhead_ms"] = overhead
    if transfer is not None:
        k["transferrate_ms"] = transfer
    assert db2.check_point(k) == []
    ts = TABLESPACE.match(db2.tablespace_ddl(k))
    assert ts, db2.tablespace_ddl(k)
    assert 2 <= int(ts["extent"]) <= 256
    assert int(ts["prefetch"]) % int(ts["extent"]) == 0
    assert (ts["caching"] == "NO FILE SYSTEM CACHING") is direct
    for asked, got in ((overhead, ts["overhead"]), (transfer, ts["transfer"])):
        if asked is None:
            assert got == "INHERIT"  # the storage group's media attributes
        else:
            assert Decimal(got) == Decimal(repr(asked))  # exact, no exponent


def test_prefetch_not_a_multiple_of_extent_is_refused_naming_the_field():
    errors = db2.check_point(knobs(extent_size=32, prefetch_size=48))
    assert [e[0] for e in errors] == ["prefetch_size"]
    assert "48" in errors[0][1] and "32" in errors[0][2] and "64" in errors[0][2]
    assert db2.check_point(knobs(extent_size=32, prefetch_size=96)) == []


@pytest.mark.parametrize(
    ("knob", "bad", "good"),
    [
        ("page_size", 2048, 32768),
        ("buffer_pool", 1, 2),  # buffpage's documented minimum is 2 pages
        ("extent_size", 257, 256),  # dft_extent_sz range 2..256
        ("extent_size", 1, 2),
        ("prefetch_size", 32768, 32767),  # dft_prefetch_sz range 0..32767
        ("lock_granularity", "page", "table"),
        ("index", "hash", "covering"),
        ("overhead_ms", -1, 0.5),  # -1 is the catalog's INHERIT marker, not a value
    ],
)
def test_knob_ranges_follow_the_documented_limits(knob, bad, good):
    k = db2.INFO.knobs[knob]
    assert k.check(bad) is not None
    assert k.check(good) is None


def test_sweep_validation_reports_the_cross_knob_rule_with_file_and_field(write_sweep):
    path = write_sweep(
        """
        name: bad-prefetch
        engines: [db2]
        dataset: {rows: 1000}
        knobs:
          prefetch_size: [16, 24]
        fixed:
          extent_size: 16
        workloads:
          - type: scan
        """
    )
    points, errors = spec.expand(path, "db2")
    assert points == []
    text = " ".join(str(e) for e in errors)
    assert str(path) in text and "prefetch_size" in text and "24" in text


def test_the_lab_sweeps_all_validate_for_db2():
    for path in sorted((REPO / "workflows" / "sweeps").glob("*.yaml")):
        doc, _ = spec.load_yaml(path)
        if "db2" not in spec.engines_of(doc):
            continue
        points, errors = spec.expand(path, "db2")
        assert errors == [], [str(e) for e in errors]
        assert all(db2.check_point(p.knobs) == [] for p in points)


# -- table and locking ---------------------------------------------------------------------------
@pytest.mark.parametrize("page", db2.PAGE_SIZES)
def test_table_lives_in_the_points_table_space_with_every_column(page):
    m = CREATE_TABLE.match(db2.table_ddl(TABLE, page))
    assert m, db2.table_ddl(TABLE, page)
    assert m["space"] == TABLESPACE.match(db2.tablespace_ddl(knobs(page_size=page)))["name"]
    names = [c.split()[0] for c in m["cols"].split(", ")]
    assert names == [c.upper() for c in COLUMNS]


@pytest.mark.parametrize("granularity", ["row", "table"])
def test_locksize_and_lock_table(granularity):
    ddl = db2.locksize_ddl(TABLE, granularity)
    assert LOCKSIZE.match(ddl) and ddl.endswith(granularity.upper())
    assert LOCK_TABLE.match(db2.lock_sql(TABLE))
    with pytest.raises(EngineError, match="lock_granularity"):
        db2.locksize_ddl(TABLE, "page")


def test_identifiers_are_checked_before_they_reach_sql():
    with pytest.raises(EngineError, match="identifier"):
        db2.table_ddl("accounts; DROP TABLE x", 4096)
    with pytest.raises(EngineError, match="quote"):
        db2.admin_cmd("RUNSTATS ON TABLE 'x'")


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
    stmts = db2.index_ddl(TABLE, plan)
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
            f"REORG TABLE {db2.SCHEMA}.{m['table']} INDEX {db2.SCHEMA}.{m['name']}"
        )
    else:
        assert len(stmts) == 1 and not m["cluster"]
    # The catalog the statements produce reads back as the kind that was asked (a covering
    # index with nothing beyond the key is a plain index on it).
    assert db2.index_kind(plan.key, catalog_rows(stmts)) == db2.expected_kind(plan)
    assert db2.expected_kind(plan) in (kind, "nonclustered")


def test_index_kind_refuses_what_no_kind_describes():
    two = [("A", "REG ", "D", "HUNDREDS2", "A"), ("B", "REG ", "D", "LAT", "A")]
    assert db2.index_kind(("hundreds2",), two) is None
    other = [("A", "REG ", "D", "LAT", "A")]
    assert db2.index_kind(("hundreds2",), other) is None
    assert db2.index_kind(("hundreds2",), []) == "none"


@pytest.mark.parametrize("with_indexes", [True, False])
def test_runstats_goes_through_admin_cmd_on_the_qualified_table(with_indexes):
    stmt = db2.runstats_sql(TABLE, with_indexes)
    m = ADMIN_CMD.match(stmt)
    assert m and m["cmd"].startswith(f"RUNSTATS ON TABLE {db2.SCHEMA}.{TABLE.upper()} ")
    assert ("INDEXES ALL" in m["cmd"]) is with_indexes


# -- counters and read-back ----------------------------------------------------------------------
def test_monitor_queries_name_the_points_pool_and_space():
    for page in db2.PAGE_SIZES:
        q = db2.counter_sql(page)
        assert f"MON_GET_BUFFERPOOL('{db2.bufferpool_name(page)}', -2)" in q["bufferpool"]
        assert "MON_GET_DATABASE(-2)" in q["database"]
        assert all(f"SUM({c})" in q["bufferpool"] for c in db2.BUFFERPOOL_COUNTERS)
        a = db2.applied_sql(page)
        assert f"MON_GET_TABLESPACE('{db2.tablespace_name(page)}', -2)" in a["tablespace"]
        assert f"MON_GET_CONTAINER('{db2.tablespace_name(page)}', -2)" in a["containers"]


# -- the sqlfluff db2 dialect, for the statements it covers ----------------------------------------
def dialect_covered() -> list[str]:
    stmts = [db2.locksize_ddl(TABLE, g) for g in ("row", "table")]
    for wtype, kind in PLANS:
        plan = workloads.Workload(wtype, workloads.DEFAULTS[wtype]).index_plan(kind)
        stmts += db2.index_ddl(TABLE, plan)
    stmts += [db2.runstats_sql(TABLE, True), db2.runstats_sql(TABLE, False)]
    for page in db2.PAGE_SIZES:
        stmts += [*db2.counter_sql(page).values(), *db2.applied_sql(page).values(),
                  db2.pool_size_sql(page)]  # fmt: skip
    stmts += list(db2.table_sql(TABLE).values())
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
    bp=st.lists(st.integers(0, 10**9), min_size=len(db2.BUFFERPOOL_COUNTERS),
                max_size=len(db2.BUFFERPOOL_COUNTERS)),
    db=st.lists(st.integers(0, 10**9), min_size=5, max_size=5),
    page=st.sampled_from(db2.PAGE_SIZES),
)  # fmt: skip
def test_counters_map_monitor_columns_to_the_common_keys(bp, db, page):
    out = db2.counters_from(bp, db, page)
    b = dict(zip(db2.BUFFERPOOL_COUNTERS, bp, strict=True))
    d = dict(zip(db2.DATABASE_COUNTERS, db, strict=True))
    logical = sum(v for k, v in b.items() if k.endswith("_L_READS"))
    physical = sum(v for k, v in b.items() if k.endswith("_P_READS"))
    assert out["logical_reads"] == logical
    assert out["physical_reads"] == physical
    assert out["prefetch_reads"] == b["POOL_ASYNC_DATA_READS"] + b["POOL_ASYNC_INDEX_READS"]
    assert out["data_read_bytes"] == physical * page
    assert out["read_time_ms"] == b["POOL_READ_TIME"]
    assert (out["lock_waits"], out["lock_escalations"], out["lock_wait_time_ms"]) == (
        d["LOCK_WAITS"], d["LOCK_ESCALS"], d["LOCK_WAIT_TIME"],
    )  # fmt: skip
    assert all(out[f"db2_{k.lower()}"] == v for k, v in {**b, **d}.items())


def test_nulls_from_an_idle_pool_count_as_zero():
    out = db2.counters_from([None] * len(db2.BUFFERPOOL_COUNTERS), [None] * 5, 4096)
    assert out["logical_reads"] == out["physical_reads"] == 0


def test_catalog_codes_map_back_to_knob_values():
    assert [db2.locksize_knob(c) for c in ("R", "T ", "I", "")] == ["row", "table", None, None]
    assert [db2.direct_io_knob(v) for v in (1, 0, 2, None)] == [True, False, None, None]


# -- container, CLP and cold ---------------------------------------------------------------------
def test_container_environment_uses_the_images_documented_switches():
    env = db2.container_env("pw")
    assert env["LICENSE"] == "accept" and env["DB2INST1_PASSWORD"] == "pw"
    assert env["DBNAME"] == db2.DATABASE and len(db2.DATABASE) <= 8
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
        f'  [ "$n" -le {active_listings} ] && echo "Database name = {db2.DATABASE}"\n'
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
    stop = db2.cold_commands()["stop"]
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", stop], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == "force application all"
    assert calls.count(f"deactivate db {db2.DATABASE}") == still_active + 1
    assert calls.count("force application all") == still_active + 1


def test_stop_fails_when_the_database_stays_active(tmp_path):
    bin_dir = fake_db2(tmp_path, 10**6)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    stop = db2.cold_commands()["stop"]
    proc = subprocess.run(["bash", "-c", stop], env=env, capture_output=True, text=True)
    assert proc.returncode == 1 and "still active" in proc.stdout


@pytest.mark.parametrize(("rc", "ok"), [(0, True), (2, True), (4, False), (8, False)])
def test_start_fails_only_on_clp_errors_not_warnings(tmp_path, rc, ok):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "db2").write_text(f'#!/bin/sh\necho "$*" > {tmp_path}/calls\nexit {rc}\n')
    (bin_dir / "db2").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", db2.cold_commands()["start"]], env=env)
    assert (proc.returncode == 0) is ok
    assert (tmp_path / "calls").read_text().strip() == f"activate db {db2.DATABASE}"


def test_clp_runs_as_the_instance_owner_through_a_login_shell():
    assert db2.clp("db2 activate db X")[:4] == ["su", "-", db2.INSTANCE, "-c"]


def test_container_files_map_to_the_host_volume(tmp_path):
    inside = f"{db2.DATA_MOUNT}/data/db2inst1/NODE0000/TUNELAB/T0000003/C0000000.LRG"
    assert (
        db2.host_path(inside, tmp_path)
        == tmp_path / "data/db2inst1/NODE0000/TUNELAB/T0000003/C0000000.LRG"
    )
    assert db2.host_path("/var/db2/elsewhere", tmp_path) is None


# -- image and plan ------------------------------------------------------------------------------
def test_pinned_tag_is_the_one_the_container_readme_documents():
    readme = (REPO / "containers" / "db2" / "README.md").read_text()
    assert f"docker pull {db2.IMAGE}" in readme
    tag = db2.IMAGE.rsplit(":", 1)[1]
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", tag)


def test_missing_image_stops_before_any_container_with_the_pull_command(tmp_path, monkeypatch):
    from tunelab import containers

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


def test_provision_refuses_a_bad_prefetch_before_docker(tmp_path, monkeypatch):
    monkeypatch.setattr(db2, "require_image", lambda tag: pytest.fail("docker was asked"))
    eng = db2.DB2Engine(tmp_path / "e", "r")
    with pytest.raises(EngineError, match="prefetch_size"):
        eng.provision(knobs(extent_size=16, prefetch_size=20))


def test_planned_sql_lists_every_statement_without_docker(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    k = knobs(page_size=8192, buffer_pool=4096, extent_size=16, prefetch_size=64,
              overhead_ms=6.725, transferrate_ms=0.08, lock_granularity="table",
              index="covering")  # fmt: skip
    plan = IndexPlan("covering", ("id",), ("name", "balance"))
    lines = db2.DB2Engine(Path("/nonexistent"), "plan").planned_sql(k, Dataset(1000, 1), plan)
    text = "\n".join(lines)
    for stmt in (
        db2.bufferpool_ddl(k), db2.tablespace_ddl(k), db2.table_ddl(TABLE, 8192),
        db2.locksize_ddl(TABLE, "table"), db2.lock_sql(TABLE), *db2.index_ddl(TABLE, plan),
        db2.runstats_sql(TABLE, True), *db2.cold_commands().values(),
        *db2.counter_sql(8192).values(),
    ):  # fmt: skip
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
    mount = tmp_path / db2.DATA_MOUNT.strip("/")
    f = mount / "data" / "db2inst1" / "NODE0000" / "TUNELAB" / "T0000003" / "C0000000.LRG"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"x")
    for p in (f, *f.parents):
        if p == mount:
            break
        p.chmod(0o700 if p.is_dir() else 0o600)
    script = db2.readable_script().replace(db2.DATA_MOUNT, str(mount))
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
STANDIN_ENTRY = f"""#!/bin/sh
f={db2.DATA_MOUNT}/{STANDIN_FILE}
mkdir -p $(dirname $f) && dd if=/dev/zero of=$f bs=4096 count=64 2>/dev/null
chown -R 1000:1000 {db2.DATA_MOUNT}/data && chmod 600 $f && chmod -R go-rx {db2.DATA_MOUNT}/data
echo "(*) Setup has completed."
exec sleep 100000
"""
STANDIN_DB2 = f"""#!/bin/sh
echo "$(id -un): $*" >> {db2.DATA_MOUNT}/clp.log
case "$*" in
  "deactivate db "*) touch /tmp/inactive ;;
  "activate db "*) rm -f /tmp/inactive ;;
  "list active databases") [ -e /tmp/inactive ] || echo "Database name = {db2.DATABASE}" ;;
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
        for tool in ("sh", "su", "chmod", "chown", "dirname", "seq", "grep", "sleep", "rm",
                     "mkdir", "dd", "id", "touch", "cat"):  # fmt: skip
            add(f"bin/{tool}", link="busybox")
        add("usr/bin/db2", STANDIN_DB2.encode())
        add("entrypoint", STANDIN_ENTRY.encode())
        add("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"
            b"db2inst1:x:1000:1000::/database:/bin/sh\n", 0o644)  # fmt: skip
        add("etc/group", b"root:x:0:\ndb2iadm1:x:1000:\n", 0o644)
    return buf.getvalue()


@pytest.fixture(scope="module")
def standin_image():
    from tunelab import containers

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
    from tunelab import cache, containers

    monkeypatch.setenv(db2.IMAGE_ENV, standin_image)
    monkeypatch.setattr(db2, "CONNECT_ATTEMPTS_S", 1)
    workdir = tmp_path / "points" / "standin-point" / "engine"
    eng = db2.DB2Engine(workdir, "standin-run")
    try:
        with pytest.raises(EngineError, match="cannot connect") as err:
            eng.provision(knobs())  # everything up to the first SQL connection
        assert eng._password and eng._password not in str(err.value)
        rc = eng.container
        assert eng._password not in rc.logs()
        attrs = containers.client().api.inspect_container(rc.id)
        assert {"IPC_LOCK", "IPC_OWNER"} <= set(attrs["HostConfig"]["CapAdd"])
        bindings = attrs["HostConfig"]["PortBindings"][f"{db2.PORT}/tcp"]
        assert [b["HostIp"] for b in bindings] == ["127.0.0.1"]
        labels = attrs["Config"]["Labels"]
        assert labels[containers.LABEL] == "1"
        assert labels[containers.POINT_LABEL] == "standin-point"
        assert "Setup has completed" in rc.logs()

        # The host sees the table space file through the volume; make it readable, evict it.
        inside = f"{db2.DATA_MOUNT}/{STANDIN_FILE}"
        host_file = db2.host_path(inside, eng.host_dir)
        assert host_file is not None and host_file.stat().st_size == 64 * 4096
        code, out = rc.exec(["sh", "-c", db2.readable_script(), "sh", inside], user="root")
        assert code == 0, out
        host_file.read_bytes()  # readable to this process now
        cache.evict([host_file])
        resident, total = cache.residency([host_file])
        assert total == 64 * 4096 // cache.PAGE and resident <= total

        # The cold cycle's CLP commands reach `db2` as the instance owner, in order.
        cmds = db2.cold_commands()
        eng._clp(cmds["stop"], "stop")
        eng._clp(cmds["start"], "start")
        log = (eng.host_dir / "clp.log").read_text().splitlines()
        assert log == [
            "db2inst1: force application all",
            f"db2inst1: deactivate db {db2.DATABASE}",
            "db2inst1: list active databases",
            f"db2inst1: activate db {db2.DATABASE}",
        ]
    finally:
        eng.teardown()
    left = containers.client().containers.list(
        all=True, filters={"label": [f"{containers.RUN_LABEL}=standin-run"]}
    )
    assert left == [] and not eng.host_dir.exists()


def test_a_kept_server_is_left_without_the_points_objects():
    stmts = db2.point_cleanup_sql("accounts", 8192)
    assert stmts == [
        "DROP TABLE ACCOUNTS",
        "DROP TABLESPACE TL_TS_8K",
        "DROP BUFFERPOOL TL_BP_8K",
    ]
    # the table space goes before the buffer pool it uses (Db2 refuses the other order)
    assert db2.point_cleanup_sql(None, 4096) == [
        "DROP TABLESPACE TL_TS_4K",
        "DROP BUFFERPOOL TL_BP_4K",
    ]
