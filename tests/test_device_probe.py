"""The device reference probe taken before each round."""

from __future__ import annotations

import math
import os

from tunelab.host import devprobe


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
