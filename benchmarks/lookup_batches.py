"""Minutes and client share of `buffer-pool-io-rate`: a statement per key against batches.

    python benchmarks/lookup_batches.py --engine mariadb               # the sweep's own budget
    python benchmarks/lookup_batches.py --engine postgres --rounds 2   # two rounds each, quick

Measures the sweep on this host as the workflow does (`tunelab.measure.sweeprun.run_sweep`: rounds,
the bench lock, the findings' stopping rule), twice: its points as the sweep file gives them
(`batch: 1000`, `access: forced`), and the same points with `batch: 1`, a statement per key,
and the optimizer's own plan, as the sweep was measured before. `--rounds R` gives both a
fixed budget of R rounds instead. Printed per variant: the wall minutes, the rounds measured
and minutes per round, and per pool size the median client share, elapsed time and engine
time of a repetition.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
import uuid
from pathlib import Path

import pandas as pd

from tunelab.measure import sweeprun
from tunelab.run import recovery
from tunelab.sweep import claimspec, loading, spec, workloads

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "workflows" / "sweeps" / "buffer-pool-io-rate.yaml"


def points_of(engine: str, batch: int | None, rounds: int | None) -> list[spec.Point]:
    points, errors = spec.expand(SWEEP, engine)
    if errors:
        raise SystemExit("\n".join(map(str, errors)))
    out = []
    for p in points:
        if batch is not None:
            params = {**p.workload.params, "batch": batch}
            w = workloads.Workload(p.workload.type, params)
            p = dataclasses.replace(p, workload=w, access="optimizer")
        if rounds is not None:
            p = dataclasses.replace(p, repetitions=rounds, repetitions_min=rounds)
        out.append(p)
    return out


def measure(engine: str, batch: int | None, rounds: int | None, work: Path) -> dict:
    points = points_of(engine, batch, rounds)
    doc, _ = loading.load_yaml(SWEEP)
    judged_by, _ = claimspec.sweep_claims(doc, SWEEP, engine)
    run_id = f"bench-{uuid.uuid4().hex[:6]}"
    out = work / f"rounds-{batch or 'file'}.csv.gz"
    t0 = time.monotonic()
    try:
        sweeprun.run_sweep(
            points, out, work / "w", ROOT / "data", run_id, judged_by, log=lambda _line: None
        )
    finally:
        recovery.clean(run_id)
    wall = time.monotonic() - t0
    rows = pd.read_csv(out)
    n_rounds = rows["round"].nunique()
    per_pool = rows.groupby("knob_buffer_pool")[
        ["client_share", "elapsed_s", "engine_elapsed_s"]
    ].median()
    return {
        "wall_min": wall / 60,
        "rounds": n_rounds,
        "per_pool": per_pool,
        "batch": points[0].workload.params["batch"],
        "access": rows["access_path"].unique(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", required=True)
    ap.add_argument("--rounds", type=int, help="a fixed budget of this many rounds")
    ap.add_argument("--only", choices=("before", "after"), help="measure one variant")
    args = ap.parse_args()
    variants = {"before": 1, "after": None}
    (ROOT / ".tunelab").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lookup-batches-", dir=ROOT / ".tunelab") as tmp:
        for name, batch in variants.items():
            if args.only and name != args.only:
                continue
            r = measure(args.engine, batch, args.rounds, Path(tmp))
            print(
                f"{args.engine} {name}: batch {r['batch']}, {r['wall_min']:.2f} min for "
                f"{r['rounds']} rounds ({r['wall_min'] / r['rounds']:.2f} min a round); "
                f"plans {', '.join(r['access'])}"
            )
            print(r["per_pool"].to_string(float_format=lambda x: f"{x:.3f}"), flush=True)


if __name__ == "__main__":
    main()
