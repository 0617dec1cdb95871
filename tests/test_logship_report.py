"""Log shipping predicted against measured, on rows whose answer is known by construction."""

from __future__ import annotations

import pandas as pd
import pytest

from tunelab.report.data import ReportData
from tunelab.report.page import logship


def rows(mode: str, rtt: float, ms_per_commit: float, n: int = 6, threads: int = 1) -> list[dict]:
    return [
        {
            "knob_sync_mode": mode,
            "knob_network_rtt_ms": rtt,
            "workload": "insert",
            "wl_threads": threads,
            "elapsed_s": 200 * ms_per_commit / 1000,
            "transactions": 200,
            "c_log_bytes": 200 * 300,
            "device_sync_us": 150.0,
            "repl_flush_lag_ms": rtt + 0.4,
            "round": r,
        }
        for r in range(n)
    ]


def test_a_synchronous_commit_is_predicted_from_the_local_one_plus_the_modes_wait():
    """PostgreSQL ships only flushed WAL: on waits w + s + w + RTT, remote_write w + s + RTT,
    local w alone; the send of 300 bytes is left out. So on = local + w + RTT and
    remote_write = local + RTT."""
    frame = pd.DataFrame(
        rows("local", 5, 0.8)
        + rows("on", 5, 6.2)
        + rows("remote_write", 5, 5.9)
        + rows("on", 5, 99.0, threads=4)
    )
    table = logship.predictions(frame, "postgres")
    four = table[table["clients"] == 4]
    assert len(four) == 1 and four["predicted_ms"].isna().all()  # no four-client local point
    table = table[table["clients"] == 1].set_index("sync_mode")
    assert len(table) == 3
    assert table.loc["on", "predicted_ms"] == pytest.approx(0.8 + 0.15 + 5)
    assert table.loc["remote_write", "predicted_ms"] == pytest.approx(0.8 + 5)
    assert table.loc["on", "ratio"] == pytest.approx(6.2 / 5.95)
    assert table.loc["on", "log_kib_per_commit"] == pytest.approx(300 / 1024)
    assert pd.isna(table.loc["local", "predicted_ms"])  # the baseline predicts nothing


def test_the_links_measured_round_trip_replaces_the_one_asked_for():
    """Where rows carry the link's round trip as measured (the proxy's hops included), the
    model uses it: on = local + w + measured RTT."""
    frame = pd.DataFrame(rows("local", 5, 0.8) + rows("on", 5, 6.2))
    frame["link_rtt_ms"] = 5.3
    table = logship.predictions(frame, "postgres").set_index("sync_mode")
    assert table.loc["on", "predicted_ms"] == pytest.approx(0.8 + 0.15 + 5.3)
    assert table.loc["on", "link_rtt_ms"] == pytest.approx(5.3)
    frame["link_rtt_ms"] = float("nan")  # not measured: the round trip asked for
    table = logship.predictions(frame, "postgres").set_index("sync_mode")
    assert table.loc["on", "predicted_ms"] == pytest.approx(0.8 + 0.15 + 5)


def test_remote_apply_adds_the_standbys_replay_its_replay_lag_less_its_flush_lag():
    """remote_apply = on + the standby's replay, read as replay lag minus flush lag (medians
    over repetitions); without a replay lag it is on's prediction, a lower bound. Under on the
    replay lag is not what its commit waits for, so it adds nothing there."""
    apply_rows = rows("remote_apply", 5, 6.9)
    for r, row in enumerate(apply_rows):
        row["repl_replay_lag_ms"] = row["repl_flush_lag_ms"] + (0.6 if r else 9.0)  # one outlier
    on_rows = rows("on", 5, 6.2)
    for row in on_rows:
        row["repl_replay_lag_ms"] = row["repl_flush_lag_ms"] + 3.0
    frame = pd.DataFrame(rows("local", 5, 0.8) + on_rows + apply_rows)
    table = logship.predictions(frame, "postgres").set_index("sync_mode")
    assert table.loc["remote_apply", "replay_ms"] == pytest.approx(0.6)
    assert table.loc["remote_apply", "predicted_ms"] == pytest.approx(0.8 + 0.15 + 5 + 0.6)
    assert table.loc["on", "predicted_ms"] == pytest.approx(0.8 + 0.15 + 5)
    assert pd.isna(table.loc["on", "replay_ms"])
    html = logship.logship_html(_data(frame))
    assert "standby&#x27;s replay (ms)" in html or "standby's replay (ms)" in html
    frame = frame.drop(columns="repl_replay_lag_ms")
    table = logship.predictions(frame, "postgres").set_index("sync_mode")
    assert table.loc["remote_apply", "predicted_ms"] == pytest.approx(0.8 + 0.15 + 5)
    assert "replay (ms)" not in logship.logship_html(_data(frame))


def _noisy(mode: str, rtt: float, ms: float, wobble: float, threads: int = 1) -> list[dict]:
    out = rows(mode, rtt, ms, n=8, threads=threads)
    for r, row in enumerate(out):  # alternately above and below, by round
        row["elapsed_s"] *= 1 + (wobble if r % 2 else -wobble)
    return out


def test_the_modes_order_is_checked_against_the_model_pair_by_pair():
    """local < remote_write < on < remote_apply in the model. Clearly apart: as predicted;
    on faster than remote_write in every round: reversed; remote_apply within the noise of
    on: not separated. The table says it beside each point."""
    frame = pd.DataFrame(
        rows("local", 5, 0.8, n=8)
        + rows("remote_write", 5, 6.2, n=8)
        + rows("on", 5, 5.9, n=8)
        + _noisy("remote_apply", 5, 5.9, 0.05)
    )
    for row in frame.itertuples():
        if row.knob_sync_mode == "remote_apply":
            frame.loc[row.Index, "repl_replay_lag_ms"] = row.repl_flush_lag_ms + 0.1
    pairs = logship.orderings(frame, "postgres").set_index("slower")
    assert list(pairs["faster"]) == ["local", "remote_write", "on"]
    assert pairs.loc["remote_write", "order"] == "as predicted"
    assert pairs.loc["on", "order"] == "reversed"
    assert pairs.loc["on", "ratio"] == pytest.approx(5.9 / 6.2)
    assert pairs.loc["remote_apply", "order"] == "not separated"
    html = logship.logship_html(_data(frame))
    assert "reversed at 1" in html and "not separated by the measurements at 1" in html
    assert "on over remote_write, insert, 1 client, 5 ms: 0.952" in html
    assert "remote_write: 0.952" in html and "], reversed" in html  # beside on
    assert "], not separated" in html  # beside remote_apply, against on


def test_modes_the_model_ties_are_not_ordered():
    """MariaDB's two semi-sync wait points cost the same in the model: a tie, never reversed."""
    frame = pd.DataFrame(
        rows("async", 5, 0.8) + rows("AFTER_SYNC", 5, 6.4) + rows("AFTER_COMMIT", 5, 6.0)
    )
    pairs = logship.orderings(frame, "mariadb")
    assert list(pairs["order"]) == ["as predicted", "tie"]
    assert logship.orderings(frame, "sqlite").empty


def test_no_table_without_sync_mode_or_a_baseline():
    assert (
        logship.predictions(
            pd.DataFrame(rows("on", 5, 6.0)).drop(columns="knob_sync_mode"), "postgres"
        )
        is None
    )
    alone = logship.predictions(pd.DataFrame(rows("on", 5, 6.0)), "postgres")
    assert alone is not None and alone["predicted_ms"].isna().all()  # no local point to start from
    assert logship.predictions(pd.DataFrame(rows("on", 5, 6.0)), "sqlite") is None


def test_four_clients_are_predicted_from_four_local_clients_per_clients_wait():
    """A commit time is one client's: 200 commits by four clients in 0.2 s is 4 ms each. The
    four-client on point starts from the four-client local point, never the one-client one."""
    one = rows("local", 5, 0.8) + rows("on", 5, 6.2)
    four = rows("local", 5, 0.5, threads=4) + rows("on", 5, 2.0, threads=4)
    frame = pd.DataFrame(one + four)
    table = logship.predictions(frame, "postgres")
    four = table[table["clients"] == 4].set_index("sync_mode")
    assert four.loc["on", "measured_ms"] == pytest.approx(4 * 2.0)
    assert four.loc["on", "predicted_ms"] == pytest.approx(4 * 0.5 + 0.15 + 5)
    assert four.loc["on", "ratio"] == pytest.approx(8.0 / 7.15)
    one = table[table["clients"] == 1].set_index("sync_mode")
    assert one.loc["on", "predicted_ms"] == pytest.approx(0.8 + 0.15 + 5)
    html = logship.logship_html(_data(frame))
    assert "one client: 1 points predicted" in html and "4 clients: 1 points predicted" in html


def _data(frame: pd.DataFrame) -> ReportData:
    return ReportData(
        frame,
        {},
        "r.csv",
        "s.yaml",
        "log-shipping",
        "postgres",
        ["knob_sync_mode", "knob_network_rtt_ms"],
        ["workload"],
    )
