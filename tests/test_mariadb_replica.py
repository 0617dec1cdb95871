"""MariaDB with a replica (sync_mode, network_rtt_ms): the rules and the statements first,
offline; then a real primary and replica of the lab's image, whose semi-synchronous commits
wait a round trip and whose asynchronous ones do not."""

from __future__ import annotations

import math
import os
import shutil
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

from tunelab.engines import mariadb_replica as replica
from tunelab.engines import standby
from tunelab.engines.base import EngineError, IndexPlan
from tunelab.engines.mariadb import DATABASE, MariaDBEngine
from tunelab.engines.server import host_dir
from tunelab.hadr import cli as hadr_cli
from tunelab.hadr import model
from tunelab.host import containers, ownership
from tunelab.sweep import spec

REPO = Path(__file__).resolve().parents[1]
SECRET = "s3cretPassw0rdForTests"


# -- validation ------------------------------------------------------------------------------
def test_the_modes_as_mariadb_spells_them_and_a_round_trip_needs_a_replica():
    knob = MariaDBEngine.info.knobs["sync_mode"]
    assert knob.values == ("none", "async", "AFTER_COMMIT", "AFTER_SYNC")
    assert knob.default == "none"
    with pytest.raises(
        EngineError,
        match=r"network_rtt_ms: 5 ms needs a standby: sync_mode is "
        r"none \(allowed: 0, or a sync_mode other than none\)",
    ):
        MariaDBEngine.knob_rules.full_knobs({"network_rtt_ms": 5})
    with pytest.raises(
        EngineError,
        match=r"sync_mode='on' not allowed \(allowed: none, async, "
        r"AFTER_COMMIT, AFTER_SYNC\)",
    ):
        MariaDBEngine.knob_rules.full_knobs({"sync_mode": "on"})
    with pytest.raises(EngineError, match="network_rtt_ms=-1 out of range"):
        MariaDBEngine.knob_rules.full_knobs({"sync_mode": "AFTER_SYNC", "network_rtt_ms": -1})
    full = MariaDBEngine.knob_rules.full_knobs({"sync_mode": "async", "network_rtt_ms": 20})
    assert (full["sync_mode"], full["network_rtt_ms"]) == ("async", 20)
    assert MariaDBEngine.knob_rules.full_knobs({})["sync_mode"] == "none"


def test_bad_replication_knobs_in_a_sweep_are_one_line_each(write_sweep):
    path = write_sweep(
        "name: bad\nengines: [mariadb]\ndataset: {rows: 1000}\n"
        "knobs: {sync_mode: [none], network_rtt_ms: [5]}\n"
        "workloads: [{type: insert, rows: 10, commit_every: 1}]\n"
    )
    points, errors = spec.expand(path, "mariadb")
    assert points == [] and len(errors) == 1
    text = str(errors[0])
    assert "\n" not in text
    assert text.startswith(f"{path}: knobs.network_rtt_ms: ") and "needs a standby" in text
    path = write_sweep(
        "name: bad\nengines: [mariadb]\ndataset: {rows: 1000}\n"
        "knobs: {sync_mode: [after_sync]}\n"
        "workloads: [{type: insert, rows: 10, commit_every: 1}]\n",
        name="bad2.yaml",
    )
    points, errors = spec.expand(path, "mariadb")
    assert points == [] and errors
    text = "\n".join(map(str, errors))
    assert "knobs.sync_mode" in text and "AFTER_COMMIT, AFTER_SYNC" in text


def test_a_replica_server_is_never_shared_with_points_without_one(tmp_path):
    eng = MariaDBEngine(tmp_path / "e", "r")
    with_replica = eng.keep_key(MariaDBEngine.knob_rules.full_knobs({"sync_mode": "AFTER_SYNC"}))
    assert with_replica != eng.keep_key(MariaDBEngine.knob_rules.full_knobs({}))
    # the mode and the round trip change in place: one server for all of them
    for mode in ("async", "AFTER_COMMIT"):
        knobs = MariaDBEngine.knob_rules.full_knobs({"sync_mode": mode, "network_rtt_ms": 20})
        assert eng.keep_key(knobs) == with_replica


# -- option files and statements ----------------------------------------------------------------
def test_the_primary_has_a_binary_log_only_with_a_replica_and_semi_sync_once_it_runs():
    assert replica.primary_options({"sync_mode": "none"}, True) == {}
    base = {
        "server_id": "1",
        "log_bin": "mariadb-bin",
        "binlog_format": "ROW",
        "sync_binlog": "1",
        "rpl_semi_sync_master_timeout": "30000",
        "rpl_semi_sync_master_wait_no_slave": "ON",
    }
    assert replica.primary_options({"sync_mode": "async"}, True) == {
        **base,
        "rpl_semi_sync_master_enabled": "OFF",
    }
    # before the replica runs, no commit may wait for it
    assert (
        replica.primary_options({"sync_mode": "AFTER_SYNC"}, False)["rpl_semi_sync_master_enabled"]
        == "OFF"
    )
    assert replica.primary_options({"sync_mode": "AFTER_SYNC"}, True) == {
        **base,
        "rpl_semi_sync_master_enabled": "ON",
        "rpl_semi_sync_master_wait_point": "AFTER_SYNC",
    }
    assert (
        replica.primary_options({"sync_mode": "AFTER_COMMIT"}, True)[
            "rpl_semi_sync_master_wait_point"
        ]
        == "AFTER_COMMIT"
    )


def test_the_engines_option_file_carries_them(tmp_path):
    eng = MariaDBEngine(tmp_path / "e", "r")
    eng.write_settings(
        MariaDBEngine.knob_rules.full_knobs({"sync_mode": "AFTER_SYNC", "network_rtt_ms": 5})
    )
    text = (eng.home / "conf" / "knobs.cnf").read_text().splitlines()
    assert text[0] == "[mariadbd]"
    for line in (
        "log_bin = mariadb-bin",
        "server_id = 1",
        "binlog_format = ROW",
        "sync_binlog = 1",
        "rpl_semi_sync_master_enabled = OFF",
    ):
        assert line in text
    eng.write_settings(MariaDBEngine.knob_rules.full_knobs({}))
    text = (eng.home / "conf" / "knobs.cnf").read_text()
    assert "log_bin" not in text and "rpl_semi_sync" not in text and "server_id" not in text


def test_the_replicas_options():
    text = replica.option_text(replica.replica_options())
    assert text.splitlines() == [
        "[mariadbd]",
        "server_id = 2",
        "relay_log = replica-relay-bin",
        "rpl_semi_sync_slave_enabled = ON",
        "read_only = ON",
    ]


def test_the_replication_login_stays_out_of_the_binary_log_and_the_text():
    steps = replica.user_sql()
    assert steps[0] == ("SET SESSION sql_log_bin = 0", False)
    assert steps[-1] == ("SET SESSION sql_log_bin = 1", False)
    for sql, takes in steps:
        assert SECRET not in sql
        # the driver formats a statement that takes the password (a literal % as %%)
        done = sql % ("'pw'",) if takes else sql
        assert "%%" not in done and "%s" not in done
    created = steps[1][0] % ("'pw'",)
    assert created == "CREATE USER IF NOT EXISTS 'tunelab_repl'@'%' IDENTIFIED BY 'pw'"
    assert steps[3] == ("GRANT REPLICATION SLAVE ON *.* TO 'tunelab_repl'@'%'", False)


def test_change_master_through_the_proxy_by_gtid():
    sql = replica.change_master_sql("172.18.0.1", 41234)
    assert sql == (
        "CHANGE MASTER TO MASTER_HOST = '172.18.0.1', MASTER_PORT = 41234, MASTER_USER = "
        "'tunelab_repl', MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos, "
        "MASTER_CONNECT_RETRY = 1"
    )
    with pytest.raises(EngineError, match="IPv4"):
        replica.change_master_sql("x'; DROP", 1)
    assert replica.replica_setup_sql("tunelab") == [
        "CREATE DATABASE IF NOT EXISTS tunelab",
        "SET GLOBAL gtid_slave_pos = %s",
    ]


def test_mode_statements():
    assert replica.mode_sql({"sync_mode": "async"}) == [
        "SET GLOBAL rpl_semi_sync_master_enabled = OFF"
    ]
    on = replica.mode_sql({"sync_mode": "AFTER_COMMIT"})
    assert on[-1] == "SET GLOBAL rpl_semi_sync_master_enabled = ON"  # the wait point first
    assert "SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_COMMIT" in on
    assert "SET GLOBAL rpl_semi_sync_master_timeout = 30000" in on


def test_planned_sql_shows_the_replica_and_no_password(tmp_path):
    from tunelab.store import dataset

    eng = MariaDBEngine(tmp_path / "e", "r")
    knobs = {"sync_mode": "AFTER_SYNC", "network_rtt_ms": 5}
    lines = eng.planned_sql(
        knobs, dataset.Dataset(1000, 1), IndexPlan("none", ()), workload="insert"
    )
    text = "\n".join(lines)
    assert eng.password not in text
    assert "--log_bin=mariadb-bin" in lines[0] and "--sync_binlog=1" in lines[0]
    assert "CHANGE MASTER TO MASTER_HOST = '<the gateway>'" in text
    assert "SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_SYNC" in text
    assert "MASTER_GTID_WAIT" in text
    plain = "\n".join(eng.planned_sql({}, dataset.Dataset(1000, 1), IndexPlan("none", ())))
    assert "log_bin" not in plain and "CHANGE MASTER" not in plain


# -- reading back -------------------------------------------------------------------------------
RUNNING = {
    "Slave_IO_Running": "Yes",
    "Slave_SQL_Running": "Yes",
    "Seconds_Behind_Master": 0,
    "Using_Gtid": "Slave_Pos",
    "_semisync_slave_status": "ON",
}
ON = {
    "Rpl_semi_sync_master_status": "ON",
    "Rpl_semi_sync_master_clients": "1",
    "Rpl_semi_sync_master_no_tx": "0",
    "Rpl_semi_sync_master_no_times": "0",
    "Rpl_semi_sync_master_yes_tx": "7",
}


def test_sync_mode_is_read_back_from_both_servers():
    no_binlog = {"log_bin": "OFF"}
    assert replica.applied(no_binlog, {}, {}, 0) == {"sync_mode": "none", "network_rtt_ms": 0}
    on = {
        "log_bin": "ON",
        "rpl_semi_sync_master_enabled": "ON",
        "sync_binlog": "1",
        "rpl_semi_sync_master_wait_point": "AFTER_SYNC",
        "binlog_format": "ROW",
    }
    got = replica.applied(on, ON, RUNNING, 20.0)
    assert (got["sync_mode"], got["network_rtt_ms"]) == ("AFTER_SYNC", 20.0)
    assert got["mariadb_semisync_clients"] == "1" and got["mariadb_binlog_format"] == "ROW"
    off = {**on, "rpl_semi_sync_master_enabled": "OFF"}
    assert (
        replica.applied(off, {**ON, "Rpl_semi_sync_master_status": "OFF"}, RUNNING, 5)["sync_mode"]
        == "async"
    )
    with pytest.raises(EngineError, match="does not wait for its replica"):
        replica.applied(on, {**ON, "Rpl_semi_sync_master_clients": "0"}, RUNNING, 20.0)
    with pytest.raises(EngineError, match="does not replicate.*Slave_IO_Running 'Connecting'"):
        replica.applied(on, ON, {**RUNNING, "Slave_IO_Running": "Connecting"}, 20.0)


def test_a_fall_back_to_asynchronous_replication_is_seen():
    assert replica.fallback(ON, ON) is None
    assert replica.fallback(ON, {**ON, "Rpl_semi_sync_master_yes_tx": "200"}) is None
    assert "no_tx +3" in replica.fallback(ON, {**ON, "Rpl_semi_sync_master_no_tx": "3"})
    off = replica.fallback(
        ON, {**ON, "Rpl_semi_sync_master_status": "OFF", "Rpl_semi_sync_master_no_times": "1"}
    )
    assert "Rpl_semi_sync_master_status OFF" in off and "no_times +1" in off


def test_gauges_as_numbers():
    g = replica.semisync_gauges(ON)
    assert g["mariadb_semisync_status"] == 1.0 and g["mariadb_semisync_clients"] == 1.0
    assert math.isnan(g["mariadb_semisync_net_avg_wait_us"])  # not in the status read
    r = replica.replica_gauges({**RUNNING, "Seconds_Behind_Master": None})
    assert r["mariadb_replica_io_running"] == 1.0 and r["mariadb_replica_sql_running"] == 1.0
    assert math.isnan(r["mariadb_replica_seconds_behind_master"])
    assert (
        replica.replica_gauges({"Slave_IO_Running": "Connecting"})["mariadb_replica_io_running"]
        == 0.0
    )


# -- the calculator and the sweep ---------------------------------------------------------------
LINK = model.Link(disk_rate=200, disk_overhead=0.001, net_rate=120, rtt=0.005)


def test_the_calculator_models_mariadbs_modes():
    modes = MariaDBEngine.replication
    w, s, rtt = LINK.write_time(8), LINK.send_time(8), LINK.rtt
    for point in ("AFTER_SYNC", "AFTER_COMMIT"):
        # the synced binary log is sent, the replica acknowledges its relay-log write
        assert model.flush_time(modes[point], 8, LINK) == pytest.approx(w + s + rtt)
    assert model.flush_time(modes["async"], 8, LINK) == pytest.approx(max(w, s))
    assert MariaDBEngine.replication_baseline == "async"
    assert set(modes) == set(replica.MODES) - {"none"}


def test_hadr_calc_with_the_mariadb_engine(tmp_path, capsys):
    from tunelab import cli

    scan = tmp_path / "w.csv"
    scan.write_text(
        "seconds,bytes,flushes,transactions,open_transactions\n10,4096000,1000,1000,1\n"
    )
    assert (
        cli.main(
            [
                "hadr-calc",
                "--disk",
                "200",
                ".001",
                "--network",
                "120",
                ".005",
                "--engine",
                "mariadb",
                str(scan),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    lines = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert {"AFTER_SYNC", "AFTER_COMMIT", "async"} <= lines
    assert (
        hadr_cli.main(
            [
                "--disk",
                "1",
                "0",
                "--network",
                "1",
                "1",
                "--engine",
                "mariadb",
                "--modes",
                "NEARSYNC",
                str(scan),
            ],
            ["mariadb"],
            lambda e: MariaDBEngine.replication,
        )
        == 2
    )


def test_the_log_shipping_sweep_on_mariadb():
    path = REPO / "workflows" / "sweeps" / "log-shipping.yaml"
    points, errors = spec.expand(path, "mariadb")
    assert errors == []
    modes = {p.knobs["sync_mode"] for p in points}
    assert modes == {"async", "AFTER_COMMIT", "AFTER_SYNC"}
    assert all(p.knobs["network_rtt_ms"] in (0, 1, 5, 20) for p in points)


def test_the_report_predicts_semi_sync_from_the_async_point():
    from tunelab.report.page import logship

    def rows(mode: str, ms: float) -> list[dict]:
        return [
            {
                "knob_sync_mode": mode,
                "knob_network_rtt_ms": 5,
                "workload": "insert",
                "wl_threads": 1,
                "elapsed_s": 200 * ms / 1000,
                "transactions": 200,
                "c_log_bytes": 200 * 900,
                "device_sync_us": 400.0,
                "link_rtt_ms": 5.2,
            }
            for _ in range(6)
        ]

    frame = pd.DataFrame(rows("async", 1.5) + rows("AFTER_SYNC", 6.9) + rows("AFTER_COMMIT", 7.0))
    table = logship.predictions(frame, "mariadb").set_index("sync_mode")
    # w + s + RTT against the local flush alone: async + the measured round trip
    assert table.loc["AFTER_SYNC", "predicted_ms"] == pytest.approx(1.5 + 5.2)
    assert table.loc["AFTER_COMMIT", "predicted_ms"] == pytest.approx(1.5 + 5.2)
    assert pd.isna(table.loc["async", "predicted_ms"])


# -- a real primary and replica -----------------------------------------------------------------
docker = pytest.mark.docker


def _engine(tmp_path, image) -> MariaDBEngine:
    eng = MariaDBEngine(tmp_path / "points" / "pt" / "engine", f"rp-{uuid.uuid4().hex[:6]}")
    eng.image = image
    return eng


def _commits(eng: MariaDBEngine, n: int, start: int) -> float:
    """n one-row transactions; seconds they took."""
    conn = eng.connect()
    try:
        cur = conn.cursor()
        t0 = time.perf_counter()
        for i in range(start, start + n):
            cur.execute(
                f"INSERT INTO {DATABASE}.accounts (id, name, hundreds1, hundreds2, lat, "
                "balance, filler) VALUES (%s, 'n', 0, 0, 0, 0, 'x')",
                (i,),
            )
            conn.commit()
        return time.perf_counter() - t0
    finally:
        conn.close()


def _on_replica(eng: MariaDBEngine) -> int:
    eng.replica.catch_up()
    return int(eng.replica.replica_query(f"SELECT COUNT(*) AS n FROM {DATABASE}.accounts")[0]["n"])


def _left(run_id: str) -> list:
    return containers.client().containers.list(
        all=True, filters={"label": f"{containers.RUN_LABEL}={run_id}"}
    )


@docker
@pytest.mark.slow
def test_semi_sync_commits_wait_a_round_trip_and_async_ones_do_not(tmp_path, image):
    eng = _engine(tmp_path, image)
    n, rtt = 20, 20.0
    knobs = {"sync_mode": "AFTER_SYNC", "network_rtt_ms": rtt, "buffer_pool": 1024}
    try:
        eng.provision(knobs)
        applied = eng.applied_knobs()
        assert (applied["sync_mode"], applied["network_rtt_ms"]) == ("AFTER_SYNC", rtt)
        assert applied["mariadb_semisync_status"] == "ON"
        assert applied["mariadb_semisync_clients"] == "1"
        assert applied["mariadb_replica_semisync_status"] == "ON"
        assert applied["mariadb_sync_binlog"] == "1"
        assert eng.replica.semisync_status()["Rpl_semi_sync_master_clients"] == "1"
        # the replica is on the run's network, its port on 127.0.0.1 only, labelled
        assert eng.replica.container is not None
        attrs = containers.client().api.inspect_container(eng.replica.container.id)
        assert attrs["Config"]["Labels"][containers.RUN_LABEL] == eng.run_id
        assert list(attrs["NetworkSettings"]["Networks"]) == [containers.network_name(eng.run_id)]
        bound = attrs["HostConfig"]["PortBindings"]["3306/tcp"]
        assert [b["HostIp"] for b in bound] == ["127.0.0.1"]
        raw = (
            containers.client()
            .containers.get(eng.replica.container.id)
            .logs()
            .decode(errors="replace")
        )
        assert eng.password not in raw  # never written to its log, scrubbed or not
        # nor to the primary's binary log (the image's login set-up runs with it off)
        code, out = eng.container.exec(["sh", "-c", "mariadb-binlog /var/lib/mysql/mariadb-bin.0*"])
        assert code == 0 and "CREATE USER" not in out and "ALTER USER" not in out, out[-300:]
        # the link's round trip, measured through the proxy: the delay plus its hops
        assert rtt <= eng.replica.link_rtt_ms < rtt + 3, eng.replica.link_rtt_ms
        eng.create_table("accounts", IndexPlan("none", ()))
        before = eng.counters([])
        waited = _commits(eng, n, 0)
        after = eng.counters([])
        # every commit waited for the replica's receipt across the link: at least one RTT
        assert waited >= n * rtt / 1000, waited
        assert after["mariadb_semisync_yes_tx"] - before["mariadb_semisync_yes_tx"] >= n
        assert after["mariadb_semisync_no_tx"] == before["mariadb_semisync_no_tx"]
        gauges = eng.gauges()
        assert gauges["mariadb_semisync_status"] == 1.0
        assert gauges["mariadb_semisync_clients"] == 1.0
        assert gauges["mariadb_replica_io_running"] == gauges["mariadb_replica_sql_running"] == 1
        assert gauges["link_rtt_ms"] == eng.replica.link_rtt_ms
        assert _on_replica(eng) == n

        # async: the same link and replica, no wait; a change in place (no new server)
        rid, pid = eng.replica.container.id, eng.container.id
        eng.provision({**knobs, "sync_mode": "async"})
        assert (eng.replica.container.id, eng.container.id) == (rid, pid) and eng.starts == 1
        assert eng.applied_knobs()["sync_mode"] == "async"
        fast = _commits(eng, n, n)
        assert fast < n * rtt / 1000 / 2, fast
        assert _on_replica(eng) == 2 * n  # replicated all the same

        # AFTER_COMMIT at another round trip: the proxy restarted, the replica reconnected
        eng.provision({**knobs, "sync_mode": "AFTER_COMMIT", "network_rtt_ms": 5})
        assert eng.applied_knobs()["sync_mode"] == "AFTER_COMMIT"
        assert eng.replica.container.id == rid
        assert _commits(eng, n, 2 * n) >= n * 5 / 1000
        eng.gauges()  # no fall-back

        # a cold restart of the primary: the replica comes back, semi-sync ON again
        assert eng.make_cold().achieved in ("cold", "partial")
        assert eng.replica.semisync_status()["Rpl_semi_sync_master_status"] == "ON"
        assert _commits(eng, 5, 3 * n) >= 5 * 5 / 1000

        # a replica gone for longer than the timeout: commits fall back, the point fails
        eng.admin_execute("SET GLOBAL rpl_semi_sync_master_timeout = 300")
        eng.replica.replica_query("STOP SLAVE IO_THREAD")
        _commits(eng, 2, 4 * n)
        with pytest.raises(EngineError, match="fell back to asynchronous replication"):
            eng.gauges()
        proxy = eng.replica.proxy._process
        run_id = eng.run_id
    finally:
        eng.teardown()
    assert proxy.poll() is not None  # the proxy ended with the point
    assert _left(run_id) == []


@docker
@pytest.mark.slow
def test_a_replica_that_does_not_start_fails_the_point_and_leaves_nothing(
    tmp_path, image, monkeypatch
):
    eng = _engine(tmp_path, image)
    # a replica whose server refuses its option file
    monkeypatch.setattr(
        replica, "replica_options", lambda: {"server_id": "2", "no_such_option_here": "1"}
    )
    try:
        with pytest.raises(EngineError) as failed:
            eng.provision({"sync_mode": "AFTER_SYNC", "network_rtt_ms": 1})
        text = str(failed.value)
        assert "the standby did not start" in text and "no_such_option_here" in text
        assert eng.password not in text
        assert eng.container is None and eng.replica.container is None
        assert _left(eng.run_id) == []
    finally:
        eng.teardown()
    assert _left(eng.run_id) == []


def _binlog_dumps(eng: MariaDBEngine) -> list[int]:
    """The primary's threads that send its binary log to a replica."""
    return [int(r[0]) for r in eng.admin_query("SHOW PROCESSLIST") if r[4] == "Binlog Dump"]


@docker
@pytest.mark.slow
def test_the_next_point_of_a_kept_server_keeps_its_link(tmp_path, image, monkeypatch):
    """Points of one run in one process, as a sweep measured in rounds: the kept server's
    proxy waits for the next point, which changes its delay in place; the replica stays
    connected (the same binlog dump thread), and its commits wait the new round trip."""
    run_id = f"kl-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv(ownership.OWNER_PID_ENV, str(os.getpid()))
    run_dir = tmp_path / "runs" / run_id

    made: list[MariaDBEngine] = []

    def point(name: str) -> MariaDBEngine:
        eng = MariaDBEngine(tmp_path / "points" / name / "engine", run_id)
        eng.image, eng.run_dir = image, run_dir
        made.append(eng)
        return eng

    knobs = {"sync_mode": "AFTER_SYNC", "network_rtt_ms": 2, "buffer_pool": 1024}
    first = point("a")
    try:
        first.provision(knobs)
        proxy, dumps = first.replica.proxy, _binlog_dumps(first)
        assert proxy is not None and len(dumps) == 1 and 2 <= first.replica.link_rtt_ms < 5
        first.teardown()
        assert proxy.alive() and first.replica.proxy is None  # parked for the next point

        second = point("b")
        second.provision({**knobs, "sync_mode": "AFTER_COMMIT", "network_rtt_ms": 10})
        assert second.replica.proxy is proxy and proxy.delay_ms == 5
        assert _binlog_dumps(second) == dumps  # no reconnection
        assert 10 <= second.replica.link_rtt_ms < 13, second.replica.link_rtt_ms
        second.create_table("accounts", IndexPlan("none", ()))
        assert _commits(second, 10, 0) >= 10 * 10 / 1000  # each waits the new round trip
        second.gauges()  # no fall-back to asynchronous replication
        second.teardown()
    finally:
        standby.stop_parked()
        for eng in reversed(made):  # the kept server, its standby, the run's network
            eng.remove_container()
        shutil.rmtree(host_dir(run_dir), ignore_errors=True)
    assert not proxy.alive() and _left(run_id) == []
