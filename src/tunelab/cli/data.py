"""Data sets and result files: `tunelab datagen` and `tunelab merge`."""

from __future__ import annotations

import argparse
from pathlib import Path

from tunelab.cli.exits import EXIT_FAILED, EXIT_USAGE, err


def cmd_datagen(args: argparse.Namespace) -> int:
    from tunelab.store import dataset

    try:
        ds = dataset.Dataset.from_key(args.key)
    except ValueError as exc:
        err(f"datagen: {exc}")
        return EXIT_USAGE
    path = dataset.materialise(ds, Path(args.data_dir))
    dataset.read_rows(ds, Path(args.data_dir))  # its rows' copy, here rather than in a point
    print(f"{path} sha256={dataset.sha256(path)}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from tunelab.store import results

    # Verify every point before anything is written: a bad file is named, set aside (so the
    # workflow sees its point as not measured) and the merged file is left as it was.
    checked = results.verify_points(args.inputs)
    bad = [c for c in checked if c.problem is not None]
    for c in bad:
        kept = results.set_aside(c.path)
        where = f" (kept as {kept[0].name})" if kept else ""
        err(f"{c.path}: {c.problem}; it will be measured again on the next run{where}")
    if bad:
        err(f"{args.out}: not written: {len(bad)} of {len(checked)} point file(s) failed")
        return EXIT_FAILED
    frame = results.concat(c.frame for c in checked)
    results.write_rows(frame.to_dict("records"), Path(args.out), overwrite=True)
    print(f"{args.out}: {len(frame)} rows from {len(args.inputs)} verified point file(s)")
    return 0
