"""`tunelab compare`, given what measures flagged points again."""

from __future__ import annotations

import sys
from pathlib import Path


def compare_main(argv: list[str]) -> int:
    """`tunelab compare`, able to measure flagged points again (``--confirm``)."""
    from tunelab.report.compare import compare_main as compare

    def prepare(rows, workdir: Path, data_dir: Path):
        from tunelab.measure import sweeprun

        sweeps = sweeprun.points_again(rows, data_dir)  # bad input: before measuring
        return lambda: sweeprun.measure_again(
            sweeps, workdir, data_dir, log=lambda line: print(line, file=sys.stderr, flush=True)
        )

    return compare(argv, prepare)
