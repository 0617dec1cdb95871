"""Db2 with an HADR standby (sync_mode, network_rtt_ms), checked without a server: the knobs and
their refusals, the CLP text of the standby's set-up for every HADR_SYNCMODE (statements,
quoting, order, run against stand-in commands that record them), the reading of MON_GET_HADR
rows shaped as IBM documents the table function, and the log-shipping sweep for Db2. What only
the image can show is at the end, marked ``db2``: skipped here with the reason."""

from __future__ import annotations

import datetime as dt
import math
import os
import shlex
import subprocess
import time
import types
import uuid
from pathlib import Path

import pytest

from tunelab.engines import db2, db2_hadr, db2_info, db2_sql
from tunelab.engines.base import EngineError, IndexPlan
from tunelab.hadr.model import CALCULATOR_MODES
from tunelab.host import containers
from tunelab.measure import runner
from tunelab.store.dataset import Dataset
from tunelab.sweep import spec

REPO = Path(__file__).resolve().parents[1]
SWEEP = REPO / "workflows" / "sweeps" / "log-shipping.yaml"
MODES = db2_hadr.MODES
IP, STANDBY_IP, GATEWAY = "172.18.0.2", "172.18.0.3", "172.18.0.1"
LOG_PORT, ADMIN_PORT = 41001, 41002
LINK = db2_hadr.Link(IP, STANDBY_IP, GATEWAY, LOG_PORT, ADMIN_PORT)


# -- the knobs ---------------------------------------------------------------------------------
def test_sync_mode_takes_ibms_modes_the_calculator_models():
    knob = db2_info.INFO.knobs["sync_mode"]
    assert knob.values == ("none", "SYNC", "NEARSYNC", "ASYNC", "SUPERASYNC")
    assert set(knob.values) - {"none"} == set(db2.DB2Engine.replication) == set(CALCULATOR_MODES)
    assert knob.default == "none" and db2_info.INFO.knobs["network_rtt_ms"].default == 0
    # Neither needs a restart or a new server: the pair is set up in prepare_point.
    assert not {"sync_mode", "network_rtt_ms"} & db2_info.INFO.restart_knobs


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        (
            {"sync_mode": "on"},
            "db2: knob sync_mode='on' not allowed (allowed: none, SYNC, "
            "NEARSYNC, ASYNC, SUPERASYNC)",
        ),
        ({"sync_mode": "sync"}, "db2: knob sync_mode='sync' not allowed"),  # IBM's spelling only
        ({"sync_mode": True}, "db2: knob sync_mode=True not allowed"),  # YAML's unquoted on
        (
            {"sync_mode": "SYNC", "network_rtt_ms": -1},
            "db2: knob network_rtt_ms=-1 out of range (allowed: number 0..1000, in ms)",
        ),
        (
            {"network_rtt_ms": 5},
            "db2: knob network_rtt_ms: 5 ms needs a standby: sync_mode is "
            "none (allowed: 0, or a sync_mode other than none)",
        ),
    ],
)
def test_bad_replication_knobs_are_one_line_with_the_allowed_values(knobs, message):
    with pytest.raises(EngineError) as err:
        db2.DB2Engine.knob_rules.full_knobs(knobs)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_sweep_with_bad_replication_knobs_names_file_field_and_allowed(write_sweep):
    path = write_sweep(
        "name: bad\nengines: [db2]\ndataset: {rows: 1000}\n"
        "knobs: {sync_mode: [SYNC, remote_write]}\nfixed: {network_rtt_ms: 5}\n"
        "workloads: [{type: insert, rows: 10, commit_every: 1}]\n"
    )
    points, errors = spec.expand(path, "db2")
    assert points == [] and len(errors) == 1
    text = str(errors[0])
    assert str(path) in text and "knobs.sync_mode" in text and "'remote_write'" in text
    assert "none, SYNC, NEARSYNC, ASYNC, SUPERASYNC" in text and "\n" not in text
    path = write_sweep(
        "name: bad2\nengines: [db2]\ndataset: {rows: 1000}\n"
        "knobs: {network_rtt_ms: [0, 5]}\nworkloads: [{type: insert, rows: 10, commit_every: 1}]\n",
        "bad2.yaml",
    )
    points, errors = spec.expand(path, "db2")
    assert points == [] and [e.path for e in errors] == ["knobs.network_rtt_ms"]
    assert "5 ms needs a standby: sync_mode is none" in str(errors[0])


def test_a_server_with_a_standby_is_never_shared_with_points_without_one(tmp_path):
    eng = db2.DB2Engine(tmp_path / "e", "r")
    full = db2.DB2Engine.knob_rules.full_knobs
    with_standby = eng.keep_key(full({"sync_mode": "SYNC"}))
    assert with_standby != eng.keep_key(full({}))
    # the mode and the round trip change on the kept pair: one server for all of them
    assert with_standby == eng.keep_key(full({"sync_mode": "ASYNC", "network_rtt_ms": 20}))


def test_the_standby_container_is_the_primarys_without_a_database_on_the_runs_network(tmp_path):
    eng = db2.DB2Engine(tmp_path / "e", "r")
    primary = eng.container_spec()
    standby = db2_hadr.standby_spec(primary, eng.home)
    # on the run's network like the primary, its client port published on 127.0.0.1 only
    assert not standby.host_network and not primary.host_network
    assert standby.port == primary.port == db2.PORT
    assert standby.image == primary.image and standby.cap_add == primary.cap_add
    assert standby.ready_log == primary.ready_log and standby.secrets == primary.secrets
    assert standby.env["DBNAME"] == "" and standby.env["HADR_ENABLED"] == "false"
    assert {k: v for k, v in standby.env.items() if k != "DBNAME"} == {
        k: v for k, v in primary.env.items() if k != "DBNAME"
    }
    assert standby.volumes == {
        str(eng.home / "standby"): db2_sql.DATA_MOUNT,
        str(eng.home / "hadr" / "backup"): db2_hadr.STANDBY_BACKUP_MOUNT,
    }
    # IBM: hadr_local_svc is neither SVCENAME nor SVCENAME + 1
    assert db2_hadr.HADR_PORT not in (db2.PORT, db2.PORT + 1)


# -- folders shared with the containers --------------------------------------------------------
def test_the_data_mount_the_engine_makes_is_the_labs_and_not_world_writable(tmp_path):
    """Another local user must not plant files where root (the lab's, the container's) reads:
    the data mount is mode 0755, as IBM's documented run has it (a plain mkdir)."""
    eng = db2.DB2Engine(tmp_path / "e", "r")
    eng.home.mkdir(parents=True)
    eng.home.chmod(0o777)  # as an earlier lab left it
    eng.container_spec()
    assert eng.home.stat().st_mode & 0o777 == 0o755
    assert eng.home.stat().st_uid == os.geteuid()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving folders to another user needs root")
def test_the_standbys_folders_go_to_the_instance_owner_alone(tmp_path):
    """The script root runs in the primary, run here with the data mount moved below tmp_path
    and `nobody` for the instance owner: the folders the instance owner writes in are its
    own, mode 0700; the standby's data mount 0755; an earlier standby's files are gone."""
    mount = tmp_path / "database"
    (mount / "hadr" / "archive").mkdir(parents=True)
    (mount / "hadr" / "archive" / "S0000001.LOG").write_text("the primary's archived log")
    (mount / "hadr" / "backup").mkdir()
    (mount / "hadr" / "backup" / "old.001").write_text("an earlier standby's image")
    (mount / "standby" / "data").mkdir(parents=True)
    for d in (mount / "hadr", mount / "hadr" / "backup", mount / "standby"):
        d.chmod(0o777)  # as an earlier lab made them
    script = db2_hadr.standby_dirs_script("nobody").replace(db2_sql.DATA_MOUNT, str(mount))
    subprocess.run(["sh", "-c", script], check=True)
    nobody = int(
        subprocess.run(["id", "-u", "nobody"], capture_output=True, text=True, check=True).stdout
    )
    for d in (mount / "hadr", mount / "hadr" / "backup", mount / "standby" / "hadr"):
        assert (d.stat().st_uid, d.stat().st_mode & 0o777) == (nobody, 0o700), d
    assert (mount / "standby").stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in (mount / "standby").iterdir()) == ["hadr"]
    assert list((mount / "hadr" / "backup").iterdir()) == []
    assert (mount / "hadr" / "archive" / "S0000001.LOG").exists()


def test_the_standby_is_made_after_roots_folders_and_nothing_world_writable(tmp_path, monkeypatch):
    """make_standby runs that script as root in the primary, then starts the standby (here:
    refused, so nothing further runs), and makes no folder of its own on the host."""
    eng = db2.DB2Engine(tmp_path / "e", "r")
    eng.container_spec()
    calls = []

    class Primary:
        def exec(self, argv, user=None):
            calls.append((argv, user))
            return 0, ""

    def refused(*args, **kwargs):
        raise containers.ContainerError("refused here")

    eng.container = Primary()
    monkeypatch.setattr(containers, "start", refused)
    with pytest.raises(EngineError, match="the standby did not start"):
        eng.replica.make_standby({"sync_mode": "SYNC"}, "SYNC", 0.0)
    assert calls == [(["sh", "-c", db2_hadr.standby_dirs_script()], "root")]
    assert [p for p in eng.home.rglob("*") if p.is_dir()] == []


# -- the CLP text ------------------------------------------------------------------------------
def cfg(mode: str, local: tuple, remote: tuple) -> str:
    return (
        f"UPDATE DB CFG FOR TUNELAB USING HADR_LOCAL_HOST {local[0]} HADR_LOCAL_SVC {local[1]} "
        f"HADR_REMOTE_HOST {remote[0]} HADR_REMOTE_SVC {remote[1]} HADR_REMOTE_INST db2inst1 "
        f"HADR_SYNCMODE {mode} HADR_SPOOL_LIMIT AUTOMATIC HADR_PEER_WINDOW 0 HADR_TIMEOUT 120"
    )


def commands(script: str) -> list[str]:
    """Each CLP statement of a script as the shell hands it to `db2` (one argument)."""
    words = shlex.split(script.replace(";", " ; "))
    return [words[i + 1] for i, w in enumerate(words) if w == "db2" and i + 1 < len(words)]


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_configures_both_databases_as_ibm_documents(mode):
    steps = db2_hadr.setup_steps(mode, LINK)
    by_what = {(s.where, s.what): s.script for s in steps}
    # Each names itself as IBM's NAT support says: inside the network, then where its partner
    # reaches it (the gateway, a proxy's port); each reaches its partner through a proxy.
    port = db2_hadr.HADR_PORT
    primary = cfg(mode, (f'"{IP}|{GATEWAY}"', f'"{port}|{LOG_PORT}"'), (GATEWAY, ADMIN_PORT))
    standby = cfg(
        mode, (f'"{STANDBY_IP}|{GATEWAY}"', f'"{port}|{ADMIN_PORT}"'), (GATEWAY, LOG_PORT)
    )
    assert commands(by_what["primary", "HADR configuration"]) == [primary]
    assert commands(by_what["standby", "HADR configuration"]) == [standby]
    assert commands(by_what["standby", "start as standby"]) == [
        "START HADR ON DATABASE TUNELAB AS STANDBY"
    ]
    assert commands(by_what["primary", "start as primary"]) == [
        "START HADR ON DATABASE TUNELAB AS PRIMARY"
    ]
    assert commands(by_what["primary", "archive logging, HADR registry variables"]) == [
        "UPDATE DB CFG FOR TUNELAB USING LOGARCHMETH1 DISK:/database/hadr/archive LOGINDEXBUILD ON"
    ]
    assert commands(by_what["primary", "offline backup"])[-1] == (
        "BACKUP DATABASE TUNELAB TO /database/hadr/backup"
    )
    assert commands(by_what["standby", "restore"]) == [
        "DROP DATABASE TUNELAB",
        "RESTORE DATABASE TUNELAB FROM /hadr-backup WITHOUT PROMPTING",
    ]
    # Every statement reaches the CLP as one quoted argument, and stops the script on an error.
    for step in steps:
        for stmt in commands(step.script):
            assert f"db2 {shlex.quote(stmt)}" in step.script
    assert (
        "db2 'START HADR ON DATABASE TUNELAB AS PRIMARY' || [ $? -lt 4 ] || exit 1"
        in (by_what["primary", "start as primary"])
    )


def test_the_registry_asks_the_same_socket_buffers_on_both_sides():
    steps = db2_hadr.setup_steps("SYNC", LINK)
    sets = [s.script for s in steps if "db2set DB2_HADR_SOSNDBUF" in s.script]
    assert [s.where for s in steps if s.script in sets] == ["primary", "standby"]
    for script in sets:
        for var in (
            "DB2_HADR_SOSNDBUF=524288",
            "DB2_HADR_SORCVBUF=524288",
            "DB2_HADR_NO_IP_CHECK=ON",
        ):
            assert f"db2set {var} || exit 1" in script


def test_bad_modes_and_roles_are_refused_in_the_text():
    with pytest.raises(EngineError, match="HADR_SYNCMODE 'local' not allowed"):
        db2_hadr.setup_steps("local", LINK)
    with pytest.raises(EngineError, match="HADR_SYNCMODE 'none' not allowed"):
        db2_hadr.mode_steps("none")
    with pytest.raises(EngineError):
        db2_hadr.start_hadr("MASTER")
    with pytest.raises(EngineError, match="not a plain SQL identifier"):
        db2_hadr.update_cfg("TUNE LAB", {"X": 1})


def fake_clp(tmp_path: Path, fail: str = "", rc: int = 4) -> dict[str, str]:
    """db2, db2set, db2stop and db2start that append "<where>: <command> <args>" to one log
    (``CALLS`` in the environment returned); `db2` exits with ``rc`` for a statement starting
    with ``fail``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    for name in ("db2", "db2set", "db2stop", "db2start"):
        body = f'echo "$WHERE: {name} $*" >> {log}\n'
        if name == "db2" and fail:
            body += f'case "$1" in "{fail}"*) exit {rc} ;; esac\n'
        (bin_dir / name).write_text("#!/bin/sh\n" + body + "exit 0\n")
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(log)}


def run_steps(steps, env: dict, mount: Path) -> list[str]:
    """Run each step's script as the mixin does, in its container (here: WHERE), the data
    mount moved below tmp_path; the calls, in order."""
    for step in steps:
        script = step.script.replace(db2_sql.DATA_MOUNT, str(mount))
        proc = subprocess.run(
            ["sh", "-c", script], env={**env, "WHERE": step.where}, capture_output=True, text=True
        )
        if proc.returncode:
            return [f"{step.where} ({step.what}) failed"]
    return Path(env["CALLS"]).read_text().splitlines()


@pytest.mark.parametrize("mode", MODES)
def test_the_set_up_runs_in_ibms_order(mode, tmp_path):
    mount = tmp_path / "database"
    (mount / "hadr" / "backup").mkdir(parents=True)
    (mount / "hadr" / "backup" / "old.001").write_text("an earlier standby's image")
    calls = run_steps(db2_hadr.setup_steps(mode, LINK), fake_clp(tmp_path), mount)

    def at(call: str) -> int:
        return next(i for i, c in enumerate(calls) if c.startswith(call))

    archive = at("primary: db2 UPDATE DB CFG FOR TUNELAB USING LOGARCHMETH1")
    backup = at("primary: db2 BACKUP DATABASE TUNELAB")
    restore = at("standby: db2 RESTORE DATABASE TUNELAB")
    configured = [
        at(f'standby: db2 UPDATE DB CFG FOR TUNELAB USING HADR_LOCAL_HOST "{STANDBY_IP}|'),
        at(f'primary: db2 UPDATE DB CFG FOR TUNELAB USING HADR_LOCAL_HOST "{IP}|'),
    ]
    standby = at("standby: db2 START HADR ON DATABASE TUNELAB AS STANDBY")
    primary = at("primary: db2 START HADR ON DATABASE TUNELAB AS PRIMARY")
    assert archive < backup < restore < min(configured) <= max(configured) < standby < primary
    # The registry before each instance restart; the primary's restart before its backup.
    assert at("primary: db2set DB2_HADR_SOSNDBUF") < at("primary: db2stop force") < backup
    assert (
        at("standby: db2set DB2_HADR_SOSNDBUF")
        < at("standby: db2stop force")
        < at("standby: db2start")
        < restore
    )
    assert not any("DB2COMM" in c for c in calls)  # the standby keeps its (127.0.0.1) port
    assert calls[-1] == "primary: db2 START HADR ON DATABASE TUNELAB AS PRIMARY"
    # The archive directory exists on both; the backup directory is emptied, not replaced.
    assert (mount / "hadr" / "archive").is_dir()
    assert list((mount / "hadr" / "backup").iterdir()) == []


def test_an_error_stops_the_set_up_a_warning_does_not(tmp_path):
    mount = tmp_path / "database"
    (mount / "hadr" / "backup").mkdir(parents=True)
    steps = db2_hadr.setup_steps("SYNC", LINK)
    assert run_steps(steps, fake_clp(tmp_path, "BACKUP", rc=4), mount) == [
        "primary (offline backup) failed"
    ]
    warn = tmp_path / "warn"
    warn.mkdir()
    calls = run_steps(steps, fake_clp(warn, "RESTORE", rc=2), mount)  # SQL warning: exit 2
    assert calls[-1].endswith("START HADR ON DATABASE TUNELAB AS PRIMARY")


def test_a_kept_pair_changes_its_mode_with_hadr_stopped_on_the_primary(tmp_path):
    calls = run_steps(db2_hadr.mode_steps("NEARSYNC"), fake_clp(tmp_path), tmp_path / "database")
    assert calls == [
        "primary: db2 STOP HADR ON DATABASE TUNELAB",
        "standby: db2 DEACTIVATE DATABASE TUNELAB",
        "standby: db2 UPDATE DB CFG FOR TUNELAB USING HADR_SYNCMODE NEARSYNC",
        "standby: db2 ACTIVATE DATABASE TUNELAB",
        "primary: db2 UPDATE DB CFG FOR TUNELAB USING HADR_SYNCMODE NEARSYNC",
        "primary: db2 START HADR ON DATABASE TUNELAB AS PRIMARY",
    ]


def test_the_primary_address_comes_from_its_etc_hosts():
    hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n172.18.0.2\t4f1c2a9e8b7d\n"
    assert db2_hadr.container_ip(hosts, "4f1c2a9e8b7d\n") == "172.18.0.2"
    with pytest.raises(EngineError, match="no single IPv4 address"):
        db2_hadr.container_ip(hosts, "other")


# -- MON_GET_HADR ------------------------------------------------------------------------------
T0 = dt.datetime(2025, 1, 2, 3, 4, 5, 600_000)


def hadr_row(**over) -> tuple:
    """One MON_GET_HADR row of the primary as IBM documents its columns (VARCHAR roles, modes
    and states, BIGINT bytes, TIMESTAMP log times)."""
    row = {
        "HADR_ROLE": "PRIMARY",
        "HADR_SYNCMODE": "SYNC",
        "HADR_STATE": "PEER",
        "HADR_CONNECT_STATUS": "CONNECTED",
        "HADR_LOG_GAP": 0,
        "PRIMARY_LOG_TIME": T0,
        "STANDBY_LOG_TIME": T0 - dt.timedelta(milliseconds=3),
        "STANDBY_REPLAY_LOG_TIME": T0 - dt.timedelta(milliseconds=40),
        "SOCK_SEND_BUF_REQUESTED": 524288,
        "SOCK_SEND_BUF_ACTUAL": 1048576,
        "SOCK_RECV_BUF_REQUESTED": 524288,
        "SOCK_RECV_BUF_ACTUAL": 1048576,
        "PEER_WINDOW": 0,
        "STANDBY_SPOOL_LIMIT": 25600,
    } | over
    assert set(row) == set(db2_hadr.HADR_COLUMNS)
    return tuple(row[c] for c in db2_hadr.HADR_COLUMNS)


def test_the_read_back_query_names_ibms_columns():
    sql = db2_hadr.hadr_sql()
    assert sql.startswith("SELECT HADR_ROLE, HADR_SYNCMODE, HADR_STATE, HADR_CONNECT_STATUS, ")
    assert sql.endswith(" FROM TABLE(SYSPROC.MON_GET_HADR(-2)) AS H")


@pytest.mark.parametrize("mode", ["SYNC", "NEARSYNC", "ASYNC"])
def test_a_peer_row_is_the_mode_applied(mode):
    applied = db2_hadr.applied([hadr_row(HADR_SYNCMODE=mode)], 5.0)
    assert applied["sync_mode"] == mode and applied["network_rtt_ms"] == 5.0
    assert applied["db2_hadr_role"] == "PRIMARY" and applied["db2_hadr_state"] == "PEER"
    assert applied["db2_hadr_connect_status"] == "CONNECTED"
    assert applied["db2_hadr_log_gap"] == 0 and applied["db2_hadr_sock_send_buf_actual"] == 1048576
    assert applied["db2_hadr_primary_log_time"] == T0.isoformat()  # a CSV cell, not an object
    assert db2_hadr.ready([hadr_row(HADR_SYNCMODE=mode)], mode)
    assert not db2_hadr.ready([hadr_row(HADR_SYNCMODE=mode)], "SUPERASYNC")


def test_superasync_is_ready_in_remote_catchup_which_it_never_leaves():
    row = hadr_row(HADR_SYNCMODE="SUPERASYNC", HADR_STATE="REMOTE_CATCHUP", HADR_LOG_GAP=8192)
    assert db2_hadr.applied([row], 0.0)["sync_mode"] == "SUPERASYNC"
    assert db2_hadr.ready([row], "SUPERASYNC")
    with pytest.raises(EngineError, match="not ready for SYNC: HADR_STATE REMOTE_CATCHUP"):
        db2_hadr.applied([hadr_row(HADR_STATE="REMOTE_CATCHUP")], 0.0)


@pytest.mark.parametrize(
    ("state", "connect"),
    [
        ("DISCONNECTED", "DISCONNECTED"),
        ("REMOTE_CATCHUP_PENDING", "DISCONNECTED"),
        ("PEER", "CONGESTED"),
        ("LOCAL_CATCHUP", "CONNECTED"),
        ("DISCONNECTED_PEER", "DISCONNECTED"),
    ],
)
def test_a_sync_pair_not_in_peer_state_is_refused(state, connect):
    rows = [hadr_row(HADR_STATE=state, HADR_CONNECT_STATUS=connect)]
    with pytest.raises(EngineError) as err:
        db2_hadr.applied(rows, 5.0)
    assert str(err.value) == (
        f"db2: the standby is not ready for SYNC: HADR_STATE {state} (needs PEER), "
        f"HADR_CONNECT_STATUS {connect}"
    )
    assert not db2_hadr.ready(rows, "SYNC")


def test_rows_that_are_no_pair_of_the_labs_are_refused_or_none():
    assert db2_hadr.applied([], 0) == {"sync_mode": "none", "network_rtt_ms": 0}
    assert db2_hadr.applied([hadr_row(HADR_ROLE="STANDARD")], 0)["sync_mode"] == "none"
    with pytest.raises(EngineError, match="HADR_ROLE STANDBY, not PRIMARY"):
        db2_hadr.applied([hadr_row(HADR_ROLE="STANDBY")], 0)
    with pytest.raises(EngineError, match="shows 2 standbys, the lab makes one"):
        db2_hadr.applied([hadr_row(), hadr_row()], 0)
    with pytest.raises(EngineError, match="SOCK_RECV_BUF_REQUESTED is 0, not 524288.*DB2_HADR"):
        db2_hadr.applied([hadr_row(SOCK_RECV_BUF_REQUESTED=0)], 0)


def test_char_padding_and_the_state_text():
    row = hadr_row(HADR_ROLE="PRIMARY      ", HADR_STATE="PEER   ")
    assert db2_hadr.applied([row], 1.0)["db2_hadr_state"] == "PEER"
    assert db2_hadr.state_text([row]) == (
        "HADR_ROLE PRIMARY, HADR_SYNCMODE SYNC, HADR_STATE PEER, HADR_CONNECT_STATUS CONNECTED"
    )
    assert db2_hadr.state_text([]) == "MON_GET_HADR shows no HADR pair"


def test_the_gauges_are_the_log_gap_and_log_time_lags():
    got = db2_hadr.gauges([hadr_row(HADR_LOG_GAP=4096)])
    assert got["db2_hadr_log_gap_bytes"] == 4096.0
    assert got["db2_hadr_log_time_lag_ms"] == pytest.approx(3.0)
    assert got["db2_hadr_replay_time_lag_ms"] == pytest.approx(40.0)
    assert all(math.isnan(v) for v in db2_hadr.gauges([]).values())


def test_the_engine_reads_the_pair_back_into_the_rows_applied_knobs(monkeypatch, write_sweep):
    path = write_sweep(
        "name: hadr\nengines: [db2]\ndataset: {rows: 1000}\n"
        "fixed: {sync_mode: NEARSYNC, network_rtt_ms: 5}\n"
        "workloads: [{type: insert, rows: 10, commit_every: 1}]\ncache: warm\nrepetitions: 1\n"
    )
    (point,), errors = spec.expand(path, "db2")
    assert errors == []
    eng = db2.DB2Engine(Path("/nonexistent"), "r")
    eng.knobs = dict(point.knobs)
    # the engine asks MON_GET_HADR only with a standby
    eng.replica.container = types.SimpleNamespace()
    eng.replica.proxy = types.SimpleNamespace(delay_ms=2.5)
    page = int(point.knobs["page_size"])
    pool = int(point.knobs["buffer_pool"])
    rows = {
        db2_sql.applied_sql(page)["bufferpool"]: [(page, pool, pool)],
        db2_sql.applied_sql(page)["tablespace"]: [(page, 32, 32, -1.0, -1.0, "TL_BP_4K", 1)],
        db2_hadr.hadr_sql(): [hadr_row(HADR_SYNCMODE="NEARSYNC")],
    }
    monkeypatch.setattr(eng, "query", lambda sql: rows[sql])
    applied = eng.applied_knobs()
    assert (applied["sync_mode"], applied["network_rtt_ms"]) == ("NEARSYNC", 5.0)
    runner.check_applied(point, applied, complete=False)
    # A pair in another mode than asked fails the point as every other knob does.
    rows[db2_hadr.hadr_sql()] = [hadr_row(HADR_SYNCMODE="ASYNC")]
    with pytest.raises(EngineError, match="sync_mode: asked 'NEARSYNC', engine reports 'ASYNC'"):
        runner.check_applied(point, eng.applied_knobs(), complete=False)
    # Without a standby nothing is asked of the server.
    eng.replica.container = None
    assert eng._applied_replication() == {"sync_mode": "none", "network_rtt_ms": 0}
    assert eng.gauges() == {}


# -- the sweep and the plan ----------------------------------------------------------------------
def test_the_log_shipping_sweep_runs_db2_in_its_own_modes():
    points, errors = spec.expand(SWEEP, "db2")
    assert errors == []
    assert {p.knobs["sync_mode"] for p in points} == {"SYNC", "NEARSYNC", "ASYNC", "SUPERASYNC"}
    assert {p.knobs["network_rtt_ms"] for p in points} == {0, 1, 5, 20} and len(points) == 48
    assert {(p.workload.type, p.workload.params["threads"]) for p in points} == {
        ("insert", 1),
        ("insert", 4),
        ("update", 1),
    }
    pg, errors = spec.expand(SWEEP, "postgres")
    assert errors == [] and {p.knobs["sync_mode"] for p in pg} == {
        "local",
        "remote_write",
        "on",
        "remote_apply",
    }
    # the same findings on every engine, each in that engine's names for the modes
    from tunelab.sweep import claimspec, loading

    doc = loading.load_yaml(SWEEP)[0]
    modes = {}
    for engine in ("db2", "postgres", "mariadb"):
        found, errors = claimspec.sweep_claims(doc, SWEEP, engine)
        assert errors == []
        modes[engine] = [c["where"].get("sync_mode") for c in found if c.get("where")]
    assert modes == {
        "db2": ["SYNC", "NEARSYNC"],
        "postgres": ["on", "remote_write"],
        "mariadb": ["AFTER_SYNC", "AFTER_COMMIT"],
    }


def test_planned_sql_shows_the_standby_before_the_points_objects(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    eng = db2.DB2Engine(Path("/nonexistent"), "plan")
    plan = IndexPlan("nonclustered", ("hundreds2",))
    knobs = {"sync_mode": "SYNC", "network_rtt_ms": 5}
    text = "\n".join(eng.planned_sql(knobs, Dataset(1000, 1), plan, workload="insert"))
    link = db2_hadr.Link("<primary ip>", "<standby ip>", "<gateway>", "<log port>", "<admin port>")
    steps = db2_hadr.setup_steps("SYNC", link)
    places = [text.index(shlex.join(db2_sql.clp(s.script))) for s in steps]
    assert places == sorted(places) and places[-1] < text.index("CREATE BUFFERPOOL")
    assert db2_hadr.hadr_sql() in text and "2.5 ms each way" in text
    plain = "\n".join(eng.planned_sql({}, Dataset(1000, 1), plan, workload="insert"))
    assert "START HADR" not in plain and db2_hadr.hadr_sql() not in plain


# -- with the image (pytest -m db2) --------------------------------------------------------------
@pytest.fixture(scope="module")
def db2_image() -> str:
    if reason := containers.docker_unavailable_reason():
        pytest.skip(reason)
    tag = db2.image()
    if not db2.image_present(tag):
        pytest.skip(
            f"DB2 Community image {tag} not present locally "
            "(docker pull it where a registry is reachable)"
        )
    return tag


def _commit_ms(eng: db2.DB2Engine, n: int, start: int) -> float:
    conn = eng.connect()
    try:
        cur = conn.cursor()
        t0 = time.perf_counter()
        for i in range(start, start + n):
            cur.execute(
                "INSERT INTO ACCOUNTS (ID, NAME, HUNDREDS1, HUNDREDS2, LAT, BALANCE, "
                "FILLER) VALUES (?, 'n', 0, 0, 0, 0, 'x')",
                (i,),
            )
            conn.commit()
        return (time.perf_counter() - t0) / n * 1000
    finally:
        conn.close()


@pytest.mark.db2
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_sync_pair_reaches_peer_and_its_commits_wait_a_round_trip(db2_image, tmp_path):
    workdir = tmp_path / "points" / "hadr" / "engine"
    eng = db2.DB2Engine(workdir, f"hadr-{uuid.uuid4().hex[:6]}")
    rtt = 20.0
    try:
        eng.provision({"sync_mode": "SYNC", "network_rtt_ms": rtt})
        applied = eng.applied_knobs()
        assert (applied["sync_mode"], applied["network_rtt_ms"]) == ("SYNC", rtt)
        assert applied["db2_hadr_state"] == "PEER"
        assert applied["db2_hadr_sock_send_buf_requested"] == db2_hadr.SOCKET_BUFFER_BYTES
        assert rtt <= eng.gauges()["link_rtt_ms"] < rtt + 5
        assert eng.replica.container is not None and not eng.replica.container.spec.host_network
        eng.create_table("accounts", IndexPlan("none", ()))
        sync_ms = _commit_ms(eng, 20, 0)
        assert sync_ms >= rtt  # each commit waits for the standby's write, a round trip away
        # The same pair in ASYNC: commits no longer wait for the standby.
        eng.replica.run_steps(db2_hadr.mode_steps("ASYNC"))
        eng.knobs["sync_mode"] = "ASYNC"
        eng.replica.wait_ready("ASYNC")
        assert _commit_ms(eng, 20, 100) < sync_ms / 2
    finally:
        eng.teardown()
    assert (
        eng.replica.container is None
        and eng.replica.proxy is None
        and eng.replica.admin_proxy is None
    )
