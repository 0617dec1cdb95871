"""Atomic writes (tunelab.host.atomic): a reader sees the old file or the whole new one, and what a
writer killed mid-write left is told from what a live writer is writing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tunelab.host import atomic


def test_a_write_leaves_only_the_file(tmp_path):
    target = tmp_path / "out" / "page.html"
    atomic.write_text(target, "whole")
    assert target.read_text() == "whole"
    assert [p.name for p in target.parent.iterdir()] == ["page.html"]


def test_a_writer_killed_mid_write_leaves_an_orphan_a_live_one_does_not(tmp_path):
    """A child writes, is killed inside the write: its temporary file is an orphan once it is
    gone; this process's own temporary file, and one of another name's shape, are not."""
    code = (
        "import sys, time; from tunelab.host import atomic\n"
        "atomic.write(sys.argv[1], lambda f: (f.write(b'part'), f.flush(), print('in', flush=True),"
        " time.sleep(60)))"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "rows.csv")], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "in"
    written = list(tmp_path.glob(".rows.csv.*.tmp"))
    assert len(written) == 1 and f".{child.pid}." in written[0].name
    assert atomic.orphans([tmp_path]) == []  # its writer lives
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    mine = tmp_path / f".x.csv.{os.getpid()}.abcd1234.tmp"
    mine.write_text("")
    (tmp_path / ".y.csv.abcd1234.tmp").write_text("")  # no writer named: not ours to judge
    (tmp_path / ".snakemake").mkdir()
    (tmp_path / ".snakemake" / f".z.{child.pid}.abcd1234.tmp").write_text("")
    assert atomic.orphans([tmp_path]) == written
    assert not (tmp_path / "rows.csv").exists()
