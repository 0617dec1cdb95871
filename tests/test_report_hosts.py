"""Rows from more than one host (a sweep measured on several cluster nodes, or results of two
machines merged): the report, the index and the claim checks say that medians of different
hosts are compared; rows record the SLURM job and node they ran in; a run's kept-server
record is per host; a cluster job takes the run's id from the submitting run."""

from __future__ import annotations

import atexit
import socket

import pandas as pd
import pytest
from test_report_support import measured

from tunelab.analysis import claims
from tunelab.engines import server
from tunelab.host import containers, ownership, provenance
from tunelab.report import checks, index, methods
from tunelab.report.data import load
from tunelab.report.page import appendix, callouts, header_section
from tunelab.run import cluster


def two_hosts(tmp_path_factory, tmp_path, pooled: bool = False):
    """The engine rows with every other point moved to host node-b (and, with ``pooled``, one
    repetition of the first point too)."""
    csv, sweep = measured("engine", tmp_path_factory)
    rows = pd.read_csv(csv)
    points = sorted(rows["point_id"].unique())
    rows["host_name"] = "node-a"
    rows.loc[rows["point_id"].isin(points[1::2]), "host_name"] = "node-b"
    if pooled:
        first = rows.index[rows["point_id"] == points[0]][0]
        rows.loc[first, "host_name"] = "node-b"
    rows.to_csv(tmp_path / "two-hosts.csv", index=False)
    return load(tmp_path / "two-hosts.csv", sweep), points


def test_one_host_gets_no_warning_and_its_name_in_the_methods(tmp_path_factory):
    csv, sweep = measured("engine", tmp_path_factory)
    data = load(csv, sweep)
    host = pd.read_csv(csv)["host_name"].iloc[0]
    assert callouts.hosts_note(data) is None
    assert "Measured on" not in callouts.checks_html(data)
    setup = methods.methods_text(data)[0]
    assert f", on host {host} (" in setup
    assert "SLURM" not in setup  # not measured in a SLURM job


def test_rows_from_two_hosts_are_flagged_at_the_top_and_in_the_methods(tmp_path_factory, tmp_path):
    data, points = two_hosts(tmp_path_factory, tmp_path)
    top = callouts.checks_html(data)
    half = len(points) // 2
    assert "<b>Measured on 2 hosts</b>" in top
    assert f"node-a: {len(points) - half} points, node-b: {half} points" in top
    assert "pool repetitions" not in top  # every point is on one host
    setup, protocol, _ = methods.methods_text(data)
    assert "on 2 hosts: node-a (" in setup and "; node-b (" in setup
    assert "a difference between them may be a difference between the hosts" in setup
    # Monotonic clocks of two hosts are not compared: sections only overlap within a host.
    assert "compared within each of the 2 hosts) do not overlap" in protocol
    assert header_section.summary(data)["hosts"] == ["node-a", "node-b"]


def test_a_point_whose_repetitions_come_from_two_hosts_is_named(tmp_path_factory, tmp_path):
    data, points = two_hosts(tmp_path_factory, tmp_path, pooled=True)
    assert checks.points_on_several_hosts(data.results) == [points[0]]
    top = callouts.checks_html(data)
    assert f"pool repetitions from several hosts in one median: {points[0]}" in top


def test_the_index_marks_a_sweep_measured_on_several_hosts(tmp_path_factory, tmp_path):
    data, _ = two_hosts(tmp_path_factory, tmp_path)
    report = tmp_path / "sqlite" / "engine.html"
    report.parent.mkdir()
    report.write_text(header_section.header_html(data))
    out = index.write_index([report], tmp_path / "index.html", tmp_path)
    assert "on 2 hosts: medians of different hosts compared" in out.read_text()


def test_the_provenance_table_names_the_slurm_job_and_node(tmp_path_factory, tmp_path):
    csv, sweep = measured("engine", tmp_path_factory)
    rows = pd.read_csv(csv)
    rows["slurm_job_id"], rows["slurm_node"] = 42, "node-a"
    rows.to_csv(tmp_path / "slurm.csv", index=False)
    data = load(tmp_path / "slurm.csv", sweep)
    assert "The points ran in SLURM job 42 on node node-a." in methods.methods_text(data)[0]
    page = appendix.provenance_html(data)
    assert "SLURM jobs" in page and "node-a" in page


def claim_rows(host_of: dict[str, str]) -> pd.DataFrame:
    out = []
    for point, index_type, scale in (("c", "clustered", 0.02), ("n", "nonclustered", 0.2)):
        for rep in range(6):
            out.append(
                {
                    "point_id": point,
                    "rep": rep,
                    "knob_index": index_type,
                    "elapsed_s": scale * (1 + rep / 100),
                    "host_name": host_of[point],
                }
            )
    return pd.DataFrame(out)


CLAIM = {
    "says": "clustered wins",
    "kind": "lower",
    "a": {"index": "clustered"},
    "b": {"index": "nonclustered"},
}


def test_a_claim_checked_on_rows_of_two_hosts_says_so():
    (v,) = claims.evaluate_sweep([CLAIM], claim_rows({"c": "node-a", "n": "node-b"}), "sqlite")
    assert v.verdict == "holds" and v.hosts == ["node-a", "node-b"]
    assert v.line("s").endswith("; warning: rows from 2 hosts compared (node-a, node-b))")
    assert v.to_json()["hosts"] == ["node-a", "node-b"]
    (one,) = claims.evaluate_sweep([CLAIM], claim_rows({"c": "node-a", "n": "node-a"}), "sqlite")
    assert one.hosts == ["node-a"] and "warning" not in one.line("s")


def test_rows_record_the_slurm_job_and_node_and_empty_cells_elsewhere(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "17")
    monkeypatch.setenv("SLURMD_NODENAME", "node-a")
    assert provenance.cluster_job() == {"slurm_job_id": "17", "slurm_node": "node-a"}
    monkeypatch.delenv("SLURM_JOB_ID")
    monkeypatch.delenv("SLURMD_NODENAME")
    # The columns are there outside SLURM too: a sweep's points keep one set of columns.
    assert provenance.cluster_job() == {"slurm_job_id": "", "slurm_node": ""}


def test_a_kept_server_is_recorded_per_host(monkeypatch, tmp_path):
    run_dir = tmp_path / "runs" / "r1"
    monkeypatch.setattr(socket, "gethostname", lambda: "node-a")
    a = server.host_dir(run_dir)
    monkeypatch.setattr(socket, "gethostname", lambda: "node/b")
    b = server.host_dir(run_dir)
    assert a == run_dir / "hosts" / "node-a" and b == run_dir / "hosts" / "node_b"


def test_a_cluster_job_takes_the_run_id_and_the_first_on_a_node_owns_it(monkeypatch, tmp_path):
    monkeypatch.setenv(cluster.RUN_ID_ENV, "abc123")
    assert cluster.run_id() == "abc123"
    monkeypatch.delenv(cluster.RUN_ID_ENV)
    fresh = cluster.run_id()
    assert len(fresh) == 12 and cluster.run_id() == fresh  # kept for the jobs it starts

    registered = []
    monkeypatch.setattr(atexit, "register", lambda *a: registered.append(a))
    monkeypatch.setenv(cluster.NODE_JOB_ENV, "")  # no job of the run on this node yet
    monkeypatch.setenv(ownership.OWNER_PID_ENV, "1")  # the submitting run's pid, elsewhere
    assert cluster.own_node_job("abc123", tmp_path)
    assert ownership.Owner.current().pid != 1  # this process owns what it starts here
    assert not cluster.own_node_job("abc123", tmp_path)  # a job it started does not
    assert registered == [(cluster.release_host, "abc123", tmp_path)]

    mine = server.host_dir(tmp_path / "runs" / "abc123") / "mariadb-k"
    mine.mkdir(parents=True)

    def no_docker():
        raise containers.ContainerError("no Docker here")

    monkeypatch.setattr(containers, "client", no_docker)
    assert cluster.release_host("abc123", tmp_path) == [str(mine.parent)]
    assert not mine.parent.exists() and (tmp_path / "runs" / "abc123" / "hosts").exists()


@pytest.mark.parametrize("value", ["", None])
def test_rows_without_a_host_name_count_no_host(value):
    frame = pd.DataFrame({"point_id": ["p", "q"], "host_name": [value, value]})
    assert checks.hosts(frame) == [] and checks.points_per_host(frame) == {}
