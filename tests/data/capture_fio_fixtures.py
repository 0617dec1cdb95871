"""Capture the real fio JSON outputs the calibration tests parse (run as root on Linux).

    python tests/data/capture_fio_fixtures.py

Writes fio_ext4_direct_rep{1,2}.json (direct I/O on the directory given, default /tmp),
fio_ramfs_buffered.json and fio_ramfs_direct_refused.json (a ramfs mounted for the purpose;
ramfs refuses O_DIRECT).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from tunelab.calibrate import fio, measure

HERE = Path(__file__).parent
PLAN = measure.Plan(
    file_bytes=32 << 20,
    runtime_ms=300,
    repetitions=2,
    seq_pages=(4096, 32768),
    write_pages=(1, 16, 256, 1000),
)


def raw(path: Path, direct: bool, jobs: list[fio.Job]) -> str:
    args = fio.build_args(path, PLAN.file_bytes, jobs, PLAN.runtime_ms, direct)
    out = subprocess.run(["fio", *args], capture_output=True, text=True, check=False)
    return out.stdout


def main() -> None:
    base = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp")
    with tempfile.TemporaryDirectory(dir=base) as d:
        f = Path(d) / "fixture.fio"
        measure._layout(f, PLAN, True)
        for rep in (1, 2):
            (HERE / f"fio_ext4_direct_rep{rep}.json").write_text(raw(f, True, PLAN.jobs()))
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["mount", "-t", "ramfs", "ramfs", d], check=True)
        try:
            f = Path(d) / "fixture.fio"
            (HERE / "fio_ramfs_direct_refused.json").write_text(raw(f, True, PLAN.jobs()[:1]))
            measure._layout(f, PLAN, False)
            (HERE / "fio_ramfs_buffered.json").write_text(raw(f, False, PLAN.jobs()))
        finally:
            subprocess.run(["umount", d], check=True)


if __name__ == "__main__":
    main()
