"""`tunelab bpsim` through main(argv) and `python -m tunelab.bpsim.cli`."""

import io
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tunelab.bpsim import generators
from tunelab.bpsim.cli import main
from tunelab.bpsim.curves import lru_curve
from tunelab.bpsim.traces import write_trace


@pytest.fixture()
def zipf_file(tmp_path):
    trace = generators.zipf(800, 20_000, 0.9, seed=11)
    trace.meta["duration_s"] = 8.0
    return write_trace(tmp_path / "z.trace.npy", trace), trace


def test_csv_has_one_line_per_size_matching_the_curve(zipf_file, capsys):
    path, trace = zipf_file
    assert main([str(path), "--csv"]) == 0
    out = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(out.columns) == ["pool_pages", "hits", "misses", "hit_ratio"]
    distinct = len(np.unique(trace.pages))
    assert out["pool_pages"].tolist() == list(range(1, distinct + 1))
    exact = lru_curve(trace.pages)
    assert (out["misses"].to_numpy() == exact["misses"].to_numpy()).all()
    assert np.allclose(out["hit_ratio"], exact["hit_ratio"], atol=1e-6)


def test_text_trace_with_sizes_and_report(tmp_path, capsys):
    path = tmp_path / "scan.txt"
    path.write_text("# duration_s=2\n" + "\n".join(str(p % 50) for p in range(500)) + "\n")
    assert main([str(path), "--sizes", "10,49,50"]) == 0
    out = capsys.readouterr().out
    assert "500 references" in out and "working set 50 pages" in out
    assert main([str(path), "--sizes", "10,49,50", "--csv"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[1:] == ["10,0,500,0.000000", "49,0,500,0.000000", "50,450,50,0.900000"]


def test_out_and_summary_files(zipf_file, tmp_path, capsys):
    path, trace = zipf_file
    out, summary = tmp_path / "r" / "c.csv", tmp_path / "r" / "s.json"
    assert main([str(path), "--out", str(out), "--summary", str(summary)]) == 0
    table = pd.read_csv(out)
    assert {"hit_ratio_app", "hit_ratio_sys", "physical_reads_per_s"} <= set(table.columns)
    assert np.allclose(table["physical_reads_per_s"], table["misses"] / 8.0)
    info = json.loads(summary.read_text())
    assert info["distinct_pages"] == len(np.unique(trace.pages))
    assert info["knee_pages"] <= info["working_set_pages"]
    capsys.readouterr()
    # a rerun does not silently overwrite
    assert main([str(path), "--out", str(out)]) == 2
    assert "file exists" in capsys.readouterr().err
    assert main([str(path), "--out", str(out), "--force"]) == 0


def test_policies_and_sampling(zipf_file, capsys):
    path, _ = zipf_file
    assert main([str(path), "--policy", "clock", "--sizes", "5,50,500", "--csv"]) == 0
    clock = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert clock["pool_pages"].tolist() == [5, 50, 500]
    assert main([str(path), "--policy", "lru-seqthreshold", "--seq-threshold", "0.5"]) == 0
    assert "simulated at" in capsys.readouterr().out
    assert main([str(path), "--sample-rate", "0.5", "--check-exact"]) == 0
    out = capsys.readouterr().out
    assert "SHARDS rate 0.5" in out and "against the exact curve" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sizes", "0"], "--sizes '0'"),
        (["--policy", "arc"], "invalid choice: 'arc'"),
        (["--seq-threshold", "2"], "--seq-threshold 2.0: must be within [0, 1]"),
        (["--sample-rate", "0"], "--sample-rate 0.0"),
        (["--sample-rate", "0.1", "--policy", "clock"], "with --policy lru only"),
        (["--check-exact"], "--check-exact needs --sample-rate"),
        (["--duration", "-1"], "--duration -1.0"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--policy", "clock", "--sizes", "1:2000"], "choose fewer (e.g. --sizes log:50)"),
    ],
)
def test_bad_arguments_fail_with_one_line(zipf_file, capsys, args, message):
    path, _ = zipf_file
    assert main([str(path), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tunelab bpsim: error: ")
    assert message in err


def test_bad_trace_fails_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("1\nfoo\n")
    assert main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"tunelab bpsim: error: {bad}:2: page number must be a non-negative integer, got 'foo'\n"
    )
    assert main([str(tmp_path / "none.npy")]) == 2
    assert "no such trace file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "body", "message"),
    [
        ("e.txt", b"", "trace has no references"),
        ("c.txt", b"# duration_s=1\n\n", "trace has no references"),
        ("e.npz", b"", "empty file (0 bytes), not a .npz trace"),
        ("e.npy", b"", "empty file (0 bytes), not a .npy trace"),
        ("j.npz", b"junk", "not a readable .npz trace (not a zip archive)"),
        ("j.npy", b"junk", "not a readable .npy trace (not a NumPy array file)"),
    ],
)
def test_empty_or_junk_trace_is_bad_input(tmp_path, capsys, name, body, message):
    path = tmp_path / name
    path.write_bytes(body)
    assert main([str(path)]) == 2
    assert capsys.readouterr().err == f"tunelab bpsim: error: {path}: {message}\n"


def test_module_entry_point(zipf_file):
    path, _ = zipf_file
    done = subprocess.run(
        [sys.executable, "-m", "tunelab.bpsim.cli", str(path), "--csv", "--sizes", "1,2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "pool_pages,hits,misses,hit_ratio"
    failed = subprocess.run(
        [sys.executable, "-m", "tunelab.bpsim.cli", str(path), "--sizes", "x"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert failed.returncode == 2
    assert "Traceback" not in failed.stderr and len(failed.stderr.splitlines()) == 1
