"""Trace files: text, .npy (+ .json metadata) and .npz round trips, and clear errors."""

import numpy as np
import pytest

from tunelab.bpsim import generators
from tunelab.bpsim.traces import (
    Trace,
    TraceFormatError,
    find_trace,
    read_trace,
    sidecar_path,
    write_trace,
)


@pytest.mark.parametrize("suffix", [".trace.txt", ".trace.npy", ".trace.npz"])
@pytest.mark.parametrize("with_prefetch", [False, True])
def test_round_trip(tmp_path, suffix, with_prefetch):
    trace = generators.scan_mixed(100, 400, 3000, prefetch_block=8 if with_prefetch else 0)
    trace.meta["duration_s"] = 2.5
    path = write_trace(tmp_path / f"t{suffix}", trace)
    back = read_trace(path)
    assert back.pages.tolist() == trace.pages.tolist()
    if with_prefetch:
        assert back.prefetch.tolist() == trace.prefetch.tolist()
    else:
        assert back.prefetch is None
    assert back.duration_s == 2.5
    assert back.meta["generator"] == "scan_mixed"


def test_compact_formats_use_small_integers(tmp_path):
    trace = generators.uniform(60_000, 100_000, seed=1)
    npy = write_trace(tmp_path / "u.trace.npy", trace)
    assert np.load(npy).dtype == np.uint16
    assert sidecar_path(npy).exists()
    # scans, the bulk of real traces, compress well in .npz
    scan = generators.sequential_scan(5000, 100_000)
    npz = write_trace(tmp_path / "s.trace.npz", scan)
    assert npz.stat().st_size < 0.2 * scan.pages.size * 2
    big = Trace(np.array([2**40, 1], dtype=np.uint64))
    assert np.load(write_trace(tmp_path / "b.trace.npy", big)).dtype == np.uint64


def test_text_trace_with_comments_blank_lines_and_header(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("# duration_s=3\n# page_size=4096\n\n7 0\n# a comment\n8 1\n\n7 0\n")
    trace = read_trace(path)
    assert trace.pages.tolist() == [7, 8, 7]
    assert trace.prefetch.tolist() == [False, True, False]
    assert trace.meta == {"duration_s": 3, "page_size": 4096}


def test_empty_text_trace(tmp_path):
    path = tmp_path / "e.txt"
    path.write_text("# nothing yet\n")
    assert len(read_trace(path)) == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("1\n2\nx\n", r"t\.txt:3: page number must be a non-negative integer, got 'x'"),
        ("1\n-2\n", r"t\.txt:2: page number must be a non-negative integer"),
        ("1 0\n2 2\n", r"t\.txt:2: prefetch flag must be 0 or 1, got '2'"),
        ("1 0\n2\n", r"t\.txt:2: 1 column\(s\) where earlier lines have 2"),
        ("1 0 0\n", r"t\.txt:1: expected 'page' or 'page prefetch_flag', got 3 fields"),
        ("1\n99999999999999999999999\n", r"t\.txt:2: page number .* too large"),
    ],
)
def test_text_errors_name_file_and_line(tmp_path, body, message):
    path = tmp_path / "t.txt"
    path.write_text(body)
    with pytest.raises(TraceFormatError, match=message):
        read_trace(path)


def test_npy_errors(tmp_path):
    bad = tmp_path / "f.npy"
    np.save(bad, np.array([1.5, 2.0]))
    with pytest.raises(TraceFormatError, match="one-dimensional integer array"):
        read_trace(bad)
    fields = tmp_path / "s.npy"
    np.save(fields, np.zeros(3, dtype=[("pg", "u4"), ("x", "u1")]))
    with pytest.raises(TraceFormatError, match="fields page, prefetch"):
        read_trace(fields)
    with pytest.raises(TraceFormatError, match="no such trace file"):
        read_trace(tmp_path / "missing.npy")
    junk = tmp_path / "j.npy"
    junk.write_bytes(b"not numpy")
    with pytest.raises(TraceFormatError, match="not a readable .npy"):
        read_trace(junk)


def test_find_trace_prefers_compact_formats(tmp_path):
    write_trace(tmp_path / "w.trace.txt", Trace(np.array([1, 2])))
    assert find_trace(tmp_path, "w").name == "w.trace.txt"
    write_trace(tmp_path / "w.trace.npz", Trace(np.array([1, 2])))
    assert find_trace(tmp_path, "w").name == "w.trace.npz"
