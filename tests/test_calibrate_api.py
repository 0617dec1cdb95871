"""The calibration file and what other parts of the lab ask of it: knobs, SQL, report tables."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from tunelab.calibrate import (
    MB_BYTES,
    Calibration,
    CalibrationError,
    calibrated_value,
    db2sql,
    default_path,
    device_fraction,
    load,
    model,
    save,
    tables,
)
from tunelab.report.page import device


def make(drr: float = 200.0, overhead: float = 0.25, **extra) -> Calibration:
    pages = {p: model.transferrate_ms(drr, p) for p in model.DB2_PAGE_SIZES}
    return Calibration(
        host="h",
        data_dir="/d",
        filesystem="ext4",
        direct_io=True,
        overhead_ms=overhead,
        device_read_rate_mb_s=drr,
        transferrate_ms=pages,
        write_overhead_ms=0.5,
        write_rate_mb_s=100.0,
        write_fit_r2=0.98,
        **extra,
    )


def test_save_load_round_trip_keeps_int_page_keys(tmp_path):
    cal = make(warnings=["w"], overhead_ms_by_page={4096: 0.2})
    path = save(cal, tmp_path / "c" / "cal.json")
    doc = json.loads(path.read_text())
    assert set(doc["transferrate_ms"]) == {"4096", "8192", "16384", "32768"}
    for key in (
        "overhead_ms",
        "device_read_rate_mb_s",
        "write_overhead_ms",
        "write_rate_mb_s",
        "direct_io",
        "filesystem",
    ):
        assert key in doc
    back = load(path)
    assert back == cal
    assert list(tmp_path.joinpath("c").iterdir()) == [path]  # no temp file left


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"host": "h"}', r"missing field\(s\) data_dir"),
        ('{"schema": 99}', "schema 99"),
        (
            json.dumps({**json.loads(make().to_json()), "overhead_ms": "fast"}),
            "overhead_ms must be",
        ),
    ],
)
def test_load_errors_name_the_file(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CalibrationError, match=message) as err:
        load(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_default_path_is_per_host_and_data_dir(tmp_path):
    a, b = default_path(tmp_path / "a"), default_path(tmp_path / "b")
    assert a != b and a.parent == b.parent
    assert a.parts[0] == "calibration" and a.suffix == ".json"
    assert default_path(tmp_path / "a" / ".." / "a") == a  # resolved path, same file
    assert default_path(tmp_path / "a", root=tmp_path).parent == tmp_path / "calibration"


def test_calibrated_values_for_db2_knobs():
    cal = make(drr=800.0, overhead=0.3)
    assert calibrated_value(cal, "overhead_ms", 8192) == 0.3
    assert calibrated_value(cal, "OVERHEAD", None) == 0.3
    assert calibrated_value(cal, "transferrate_ms", 32768) == pytest.approx(0.04)
    assert calibrated_value(cal, "transferrate", "8K") == pytest.approx(0.01)
    del cal.transferrate_ms[16384]  # falls back to IBM's conversion
    assert calibrated_value(cal, "transferrate_ms", 16384) == pytest.approx(0.02)


@pytest.mark.parametrize(
    ("knob", "page", "message"),
    [
        ("buffer_pool", 4096, "allowed: overhead_ms, transferrate_ms"),
        ("transferrate_ms", 2048, "allowed: 4096 .4K."),
        ("transferrate_ms", "64K", "not a DB2 page size"),
        ("transferrate_ms", None, "needs the table space's page size"),
    ],
)
def test_calibrated_value_refuses(knob, page, message):
    with pytest.raises(CalibrationError, match=message):
        calibrated_value(make(), knob, page)


def test_device_fraction_of_the_assignment_example():
    # the assignment report: 5.5 MB/s scanned on a 200 MB/s disk
    assert device_fraction(5.5, make(drr=200.0)) == pytest.approx(0.0275)
    # the same bytes per second counted in decimal megabytes
    decimal = 5.5 * MB_BYTES / 1e6
    assert device_fraction(decimal, make(drr=200.0), mb_bytes=1e6) == pytest.approx(0.0275)


def test_number_literals_never_use_exponents():
    assert db2sql.number(0.00014063) == "0.0001406"
    assert db2sql.number(28440.5) == "28440"
    assert db2sql.number(6.725) == "6.725"
    assert "e" not in db2sql.number(1.5e-7).lower()


def test_identifiers():
    assert db2sql.identifier("userspace1") == "USERSPACE1"
    assert db2sql.identifier("my ts") == '"my ts"'
    assert db2sql.identifier('a"b') == '"a""b"'


def test_statements_carry_the_measured_values():
    cal = make(drr=715.8, overhead=0.07765)
    sql = db2sql.statements(cal, stogroup="sg_fast", tablespaces={"ts8": "8K"})
    assert "ALTER STOGROUP SG_FAST OVERHEAD 0.07765 DEVICE READ RATE 715.8;" in sql
    tr8 = db2sql.number(model.transferrate_ms(715.8, 8192))
    assert f"ALTER TABLESPACE TS8 OVERHEAD 0.07765 TRANSFERRATE {tr8};" in sql
    # the other page sizes are offered as comments, not run
    assert sum(line.startswith("-- a ") for line in sql.splitlines()) == 3
    assert sum(line.startswith("ALTER") for line in sql.splitlines()) == 2


def test_measured_vs_default_table():
    frame = tables.measured_vs_default(make(drr=400.0, overhead=0.5))
    row = frame.set_index("figure")
    assert row.loc["OVERHEAD", "default"] == 6.725
    assert row.loc["DEVICE READ RATE", "measured_over_default"] == pytest.approx(4.0)
    assert row.loc["TRANSFERRATE 32K", "default"] == pytest.approx(0.32)
    assert row.loc["TRANSFERRATE 32K", "measured"] == pytest.approx(0.08)
    assert row.loc["random_page_cost (seq_page_cost = 1, 90% cached)", "default"] == 4.0
    table, sql = tables.section(make())
    assert "ALTER STOGROUP" in sql and len(table) == len(frame)
    assert "ALTER STOGROUP" in tables.text(make())


def test_achieved_vs_device_scans_and_inserts():
    cal = make(drr=200.0)
    cal.write_overhead_ms, cal.write_rate_mb_s = 1.0, 100.0
    rows = pd.DataFrame(
        {
            "workload": ["scan", "insert", "insert", "point"],
            "elapsed_s": [10.0, 2.0, 2.0, 1.0],
            "data_bytes": [55 * MB_BYTES, 1e9, 1e9, 1e9],
            "written_bytes": [math.nan, 40 * MB_BYTES, 40 * MB_BYTES, math.nan],
            "wl_rows": [math.nan, 100_000, 100_000, math.nan],
            "wl_commit_every": [math.nan, 1, 10_000, math.nan],
        }
    )
    out = device.achieved_vs_device(rows, cal)
    scan, small, big, point = out.to_dict("records")
    assert scan["achieved_mb_s"] == pytest.approx(5.5)
    assert scan["device_fraction"] == pytest.approx(0.0275)
    assert scan["device_basis"] == "device read rate"
    # 100000 commits of 420 bytes: the per-write overhead dominates the model
    per_commit = 40 * MB_BYTES / 100_000
    limit = per_commit / (1e-3 + per_commit / (100.0 * MB_BYTES)) / MB_BYTES
    assert small["device_mb_s"] == pytest.approx(limit)
    assert small["achieved_mb_s"] == pytest.approx(20.0)
    assert small["device_fraction"] == pytest.approx(20.0 / limit)
    assert big["device_mb_s"] > small["device_mb_s"]  # bigger commits approach the rate
    assert big["device_mb_s"] < 100.0
    assert "KiB per commit" in big["device_basis"]
    assert math.isnan(point["achieved_mb_s"]) and point["device_basis"] == ""
    assert list(out.columns[: len(rows.columns)]) == list(rows.columns)


def test_achieved_vs_device_without_written_bytes_or_batch_columns():
    rows = pd.DataFrame(
        {"workload": ["insert", "scan"], "elapsed_s": [1.0, 1.0], "data_bytes": [1.0, 2 * MB_BYTES]}
    )
    out = device.achieved_vs_device(rows, make(drr=4.0))
    assert math.isnan(out.loc[0, "achieved_mb_s"])
    assert out.loc[0, "device_mb_s"] == 100.0  # the model's transfer rate
    assert out.loc[1, "device_fraction"] == pytest.approx(0.5)
