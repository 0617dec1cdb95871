"""The device reference probe taken before each round, and how `tunelab compare` takes a
device's shift between two runs out before judging a point against its noise."""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest

from tests.test_compare_noise import parsed, rows, spread, write_set
from tunelab import cli, devprobe
from tunelab.report import noise


def test_the_probe_measures_the_device_and_keeps_its_reference_file(tmp_path):
    first = devprobe.measure(tmp_path)
    ref = tmp_path / devprobe.FILE_NAME
    assert ref.stat().st_size == devprobe.FILE_BYTES
    assert ref.stat().st_blocks * 512 >= devprobe.FILE_BYTES  # written, not sparse
    with open(ref, "rb") as f:
        assert any(f.read(4096))  # non-zero data: a zero block may be answered from nowhere
    made = ref.stat().st_mtime_ns
    second = devprobe.measure(tmp_path)
    # both latencies are real device round trips: far above a page-cache hit (< 5 us), far
    # below a second
    for probe in (first, second):
        assert set(probe) == set(devprobe.COLUMNS)
        assert 5 < probe["device_read_us"] < 1e6, probe
        assert 5 < probe["device_sync_us"] < 1e6, probe
    assert ref.stat().st_mtime_ns >= made and len(list(tmp_path.iterdir())) == 1


def test_a_probe_that_cannot_run_gives_nan_and_no_error(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    assert all(math.isnan(v) for v in devprobe.measure(blocked).values())
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        assert all(math.isnan(v) for v in devprobe.measure(ro).values())


def frame(n: int, elapsed: float, reads: float, read_us: float, **extra) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "elapsed_s": [elapsed] * n,
            "c_physical_reads": [reads] * n,
            "device_read_us": [read_us] * n,
            **{k: [v] * n for k, v in extra.items()},
        }
    )


def test_the_device_shift_weights_each_latency_by_its_share_of_the_time():
    # 10,000 reads at 40 us: 0.4 s of 0.5 s; the device reads 1.4x slower -> 1 + 0.8 * 0.4
    old, new = frame(6, 0.5, 10_000, 40.0), frame(6, 0.7, 10_000, 56.0)
    assert math.exp(noise.device_shift(old, new)) == pytest.approx(1.32)
    # commits at the sync latency add their share: 100 syncs at 1 ms = 0.1 s, 2x slower
    old_w = frame(6, 0.5, 10_000, 40.0, transactions=100, device_sync_us=1000.0)
    new_w = frame(6, 0.5, 10_000, 40.0, transactions=100, device_sync_us=2000.0)
    assert math.exp(noise.device_shift(old_w, new_w)) == pytest.approx(1.2)
    # shares are at most the whole time: a scan's pages counted as random reads
    scan_old, scan_new = frame(6, 0.1, 10_000, 40.0), frame(6, 0.1, 10_000, 60.0)
    assert math.exp(noise.device_shift(scan_old, scan_new)) == pytest.approx(1.5)
    # no probe on a side, or no physical reads: no shift
    assert noise.device_shift(old.drop(columns="device_read_us"), new) == 0.0
    assert noise.device_shift(frame(6, 0.5, 0, 40.0), frame(6, 0.5, 0, 80.0)) == 0.0


@pytest.fixture
def run(capsys, tmp_path, monkeypatch):
    """`tunelab compare OLD NEW ARGS...` in this process: (exit code, stdout lines, stderr)."""
    monkeypatch.chdir(tmp_path)

    def compare(old, new, *args: str):
        capsys.readouterr()
        code = cli.main(["compare", str(old), str(new), *args])
        captured = capsys.readouterr()
        return code, captured.out.splitlines(), captured.err

    return compare


def probed(points: dict[str, np.ndarray], read_us: float, reads: float, **kw) -> pd.DataFrame:
    out = rows(points, **kw)
    return out.assign(c_physical_reads=reads, device_read_us=read_us)


def test_compare_takes_the_device_shift_out_before_judging(tmp_path, run):
    """Two runs of one commit; the device answered 1.4x slower in the second, and a cold point
    that spends 90 % of its time reading took 1.36x longer: worse within the noise, with the
    device's ratio printed, and the A/A floor records what is left. The same slowdown without
    the device having moved is worse."""
    base = {"cold": 0.5 * spread(12, 0.02, 1)}
    slower = {"cold": 0.5 * 1.36 * spread(12, 0.02, 2)}
    reads = 0.9 * 0.5 / 40e-6  # 90 % of 0.5 s at 40 us a read
    a = write_set(tmp_path / "a", probed(base, 40.0, reads, run="a"))
    b = write_set(tmp_path / "b", probed(slower, 56.0, reads, run="b"))
    code, out, _ = run(a, b)
    line = parsed(out)[("cold", "elapsed_s")]
    assert line["device"] == "1.36" and line["verdict"] == "worse, within the noise"
    assert parsed(out)[("cold", "throughput_rows_s")]["verdict"] == "worse, within the noise"
    assert code == 0
    floor = noise.load(b / noise.FLOOR_NAME)
    (obs,) = [o for p in floor.hosts["lab1"].values() for o in p["elapsed_s"]]
    assert obs["ratio"] == pytest.approx(1.0, abs=0.03)  # the device's part is not noise
    c = write_set(tmp_path / "c", probed(slower, 40.0, reads, run="c", commit="cccc11112222"))
    code, out, _ = run(a, c, "--noise-floor", str(tmp_path / "empty.json"))
    line = parsed(out)[("cold", "elapsed_s")]
    assert line["device"] is None and line["verdict"] == "worse"
    assert code == 1
