"""Expectations in sweep files (analysis.claims): verdicts on known samples, the likely cause
named from the rows' own evidence, validation against the sweep, and `tunelab check` on a
real SQLite run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import workflow_failure
from tunelab.analysis import claim_verdict, claims

RNG = np.random.default_rng(7)


def rows(point: str, reps: int = 6, scale: float = 1.0, sigma: float = 0.03, **cols) -> list[dict]:
    """``reps`` rows of one point with lognormal timings around ``scale`` seconds."""
    base = {
        "point_id": point,
        "cache_requested": "cold",
        "cache_achieved": "cold",
        "access_matches": True,
        "access_path": "index:ix",
        "access_expected": "index:ix",
        "client_share": 0.1,
    }
    out = []
    for r, t in enumerate(RNG.lognormal(np.log(scale), sigma, reps)):
        out.append({**base, **cols, "rep": r, "elapsed_s": t})
    return out


def frame(*groups: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([r for g in groups for r in g])


def verdict(claim: dict, data: pd.DataFrame) -> claim_verdict.Verdict:
    (v,) = claims.evaluate_sweep([claim], data, "sqlite")
    return v


LOWER = {"kind": "lower", "a": {"index": "clustered"}, "b": {"index": "nonclustered"}}


def test_a_clear_difference_in_the_claimed_direction_holds_the_other_way_is_contradicted():
    data = frame(
        rows("c", scale=0.02, knob_index="clustered"),
        rows("n", scale=0.15, knob_index="nonclustered"),
    )
    v = verdict(LOWER, data)
    assert v.verdict == "holds" and not v.causes
    assert "ratio 0.13" in v.evidence
    assert verdict({**LOWER, "kind": "higher"}, data).verdict == "contradicted"


def test_equal_samples_are_similar_when_precise_enough_and_inconclusive_when_not():
    precise = frame(
        rows("c", reps=30, scale=0.1, knob_index="clustered"),
        rows("n", reps=30, scale=0.1, knob_index="nonclustered"),
    )
    v = verdict(LOWER, precise)
    assert v.verdict == "similar" and v.decided and v.needed is None
    assert v.causes[0].startswith("no difference seen (ratio")
    assert verdict({**LOWER, "kind": "similar"}, precise).verdict == "holds"
    noisy = frame(
        rows("c", scale=0.1, sigma=0.3, knob_index="clustered"),
        rows("n", scale=0.1, sigma=0.3, knob_index="nonclustered"),
    )
    v = verdict({**LOWER, "kind": "similar"}, noisy)  # a large p is no equivalence
    assert v.verdict == "inconclusive" and not v.decided
    assert (
        v.needed > 6
        and f"too few repetitions for the observed variance (needs ~{v.needed})" in v.causes
    )


def test_an_effect_below_the_minimum_is_similar_not_a_hold():
    data = frame(
        rows("c", scale=0.097, knob_index="clustered", reps=12),
        rows("n", scale=0.1, knob_index="nonclustered", reps=12),
    )
    assert verdict({**LOWER, "min_effect": 0.2}, data).verdict == "similar"


def test_a_failed_claim_names_the_plan_the_cache_and_the_client_from_the_rows():
    bad = rows(
        "n",
        scale=0.02,
        knob_index="nonclustered",
        access_matches=False,
        access_path="scan",
        access_expected="index:ix_n",
        cache_achieved="partial",
        client_share=0.7,
    )
    data = frame(rows("c", scale=0.15, knob_index="clustered"), bad)
    v = verdict(LOWER, data)
    assert v.verdict == "contradicted"
    text = " ".join(v.causes)
    assert "plan not the one asked for at n (scan, expected index:ix_n)" in text
    assert "cache not cold at n" in text and "client-bound at n (client share 0.70)" in text


def test_points_that_differ_in_an_unnamed_key_are_compared_within_each_value():
    cold = frame(
        rows("cc", scale=0.02, knob_index="clustered"),
        rows("nc", scale=0.15, knob_index="nonclustered"),
    )
    warm = frame(
        rows("cw", scale=0.02, knob_index="clustered", cache_requested="warm"),
        rows("nw", scale=0.01, knob_index="nonclustered", cache_requested="warm"),
    )
    data = pd.concat([cold, warm])
    v = verdict(LOWER, data)
    assert v.verdict == "contradicted"  # holds cold, but warm it is the other way round
    assert "cache cold" in v.evidence and "cache warm" in v.evidence
    assert verdict({**LOWER, "where": {"cache": "cold"}}, data).verdict == "holds"


def selectivity_frame(index_times: list[float], scan_times: list[float]) -> pd.DataFrame:
    sel = [0.001, 0.01, 0.05, 0.1, 0.2, 0.5]
    groups = []
    for s, ti, ts in zip(sel, index_times, scan_times):
        groups.append(rows(f"i{s}", scale=ti, knob_index="nonclustered", wl_selectivity=s))
        groups.append(rows(f"s{s}", scale=ts, knob_index="none", wl_selectivity=s))
    return frame(*groups)


CROSS = {
    "kind": "crossover",
    "a": {"index": "nonclustered"},
    "b": {"index": "none"},
    "along": "selectivity",
    "within": [0.01, 0.5],
}


def test_a_crossover_inside_the_window_holds_and_is_located():
    data = selectivity_frame([0.01, 0.05, 0.09, 0.2, 0.4, 1.0], [0.12] * 6)
    v = verdict(CROSS, data)
    assert v.verdict == "holds", v.evidence
    number, unit = v.evidence.split("crossing ≈")[1].split()[:2]
    assert unit == "%"  # a selectivity is written as the findings speak of it
    assert 5 < float(number) < 10


def test_no_crossover_at_all_or_one_outside_the_window_is_contradicted():
    never = selectivity_frame([0.01, 0.02, 0.03, 0.04, 0.05, 0.06], [0.12] * 6)
    assert verdict(CROSS, never).verdict == "contradicted"
    early = selectivity_frame([0.05, 0.2, 0.4, 0.8, 1.2, 2.0], [0.12] * 6)
    v = verdict(CROSS, early)
    assert v.verdict == "contradicted", v.evidence  # scan already wins at 0.1 % (< 1 %)


def test_curves_that_cross_back_have_no_one_crossing():
    # The scan clearly wins at 1 %, the index clearly again at 5-10 %, the scan at 50 %: no
    # single crossover, though the last bracket (0.1 to 0.5) lies in the window.
    back = selectivity_frame([0.01, 0.16, 0.09, 0.09, 0.12, 0.2], [0.12] * 6)
    v = verdict(CROSS, back)
    assert v.verdict == "inconclusive", v.evidence
    assert v.causes == [
        "the curves cross more than once (b clearly lower at 1 %, a clearly lower again at 5 %)"
    ]
    assert "crossing ≈" not in v.evidence


def test_the_crossing_estimate_lies_where_the_tests_place_the_crossing():
    # The medians meet near 0.002 too, where neither point is clearly lower (within the
    # 5 % margin); the tests place the crossing between 0.05 and 0.5.
    data = selectivity_frame([0.118, 0.123, 0.1, 0.12, 0.12, 0.2], [0.12] * 6)
    v = verdict({**CROSS, "within": [0.001, 0.5]}, data)
    assert v.verdict == "holds", v.evidence
    estimate = float(v.evidence.split("crossing ≈")[1].split()[0])  # in %
    assert "between 5 % and 50 %" in v.evidence and 5 <= estimate <= 50


def test_falls_compares_the_largest_value_of_along_with_the_smallest():
    data = frame(*(rows(f"p{p}", scale=1 / p, knob_buffer_pool=p) for p in (10, 100, 1000)))
    assert verdict({"kind": "falls", "along": "buffer_pool"}, data).verdict == "holds"
    assert verdict({"kind": "rises", "along": "buffer_pool"}, data).verdict == "contradicted"


def test_sizes_sort_by_bytes_not_as_text():
    pools = ["256MiB", "64MiB", "6MiB"]
    data = frame(*(rows(p, scale=s, knob_buffer_pool=p) for p, s in zip(pools, (1, 2, 4))))
    v = verdict({"kind": "falls", "along": "buffer_pool"}, data)
    assert v.verdict == "holds" and "buffer_pool 256MiB" in v.evidence


# -- validation against the sweep -------------------------------------------------------------
# 100,000 rows: a cold scan takes tens of ms, so that one slow covering repetition (a few ms
# on a busy host) does not reach it (with 20,000 rows the scan took 6 ms and one did).
SWEEP = """\
name: tiny-claims
description: two indexes, cold multipoint
engines: [sqlite]
dataset: {{rows: 100000, seed: 5}}
knobs:
  index: [none, covering]
workloads:
  - type: multipoint
    queries: 3
cache: cold
repetitions: 6
expect:
{claims}
"""


def validate(tmp_path: Path, claims_yaml: str) -> subprocess.CompletedProcess:
    f = tmp_path / "tiny-claims.yaml"
    f.write_text(SWEEP.format(claims=claims_yaml))
    return subprocess.run(
        [sys.executable, "-m", "tunelab.cli", "validate", str(f)], capture_output=True, text=True
    )


@pytest.mark.parametrize(
    "claim, field, says",
    [
        (
            "  - {kind: lower, a: {index: clustered}, b: {index: none}}",
            "expect[0].a.index",
            "value 'clustered' not in the sweep",
        ),
        (
            "  - {kind: lower, a: {indx: covering}, b: {index: none}}",
            "expect[0].a.indx",
            "not a knob or parameter",
        ),
        (
            "  - {kind: lower, metric: speed, a: {index: covering}, b: {index: none}}",
            "expect[0].metric",
            "unknown metric 'speed'",
        ),
        ("  - {kind: falls, along: buffer_pool}", "expect[0].along", "is not swept"),
        ("  - {kind: sooner, a: {index: covering}, b: {index: none}}", "expect[0].kind", ""),
    ],
)
def test_a_claim_naming_what_the_sweep_does_not_have_is_refused(tmp_path, claim, field, says):
    proc = validate(tmp_path, claim)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[0]
    assert f"tiny-claims.yaml: {field}" in line and says in line
    assert "Traceback" not in proc.stderr


# -- tunelab check on a real run ------------------------------------------------------------
@pytest.mark.slow
def test_check_gives_one_line_per_claim_and_fails_on_a_contradiction(tmp_path):
    from test_workflow_e2e import snakemake

    (tmp_path / "sweeps").mkdir()
    good = "  - {kind: lower, a: {index: covering}, b: {index: none}, says: covering beats a scan}"
    wrong = "  - {kind: higher, a: {index: covering}, b: {index: none}, says: the scan wins}"
    (tmp_path / "sweeps" / "tiny-claims.yaml").write_text(SWEEP.format(claims=f"{good}\n{wrong}"))
    proc = snakemake(tmp_path, "--cores", "2")
    assert proc.returncode == 0, workflow_failure(tmp_path, proc)
    merged = tmp_path / "results" / "sqlite" / "tiny-claims.csv"
    check = subprocess.run(
        [sys.executable, "-m", "tunelab.cli", "check", str(merged)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    lines = check.stdout.strip().splitlines()
    assert lines[0].startswith("tiny-claims: covering beats a scan: holds (")
    assert lines[1].startswith("tiny-claims: the scan wins: does not hold (")
    assert check.returncode == 1
    # the workflow checked too: the verdicts sit beside the report, and the index shows them
    index = (tmp_path / "reports" / "index.html").read_text()
    assert "covering beats a scan" in index and "holds" in index


def test_the_headline_orders_the_compared_knob_by_its_medians():
    data = frame(
        rows("c", scale=0.024, knob_index="clustered"),
        rows("v", scale=0.011, knob_index="covering"),
        rows("n", scale=0.15, knob_index="nonclustered"),
    )
    claim = {**LOWER, "where": {"cache": "cold"}}
    verdicts = claims.evaluate_sweep([claim], data, "sqlite")
    line = claims.headline(data, verdicts)
    pattern = (
        r"index: covering 1\d\.?\d* ms < clustered 2\d\.?\d* ms"
        r" < nonclustered 1\d\d ms, cache cold"
    )
    assert re.fullmatch(pattern, line), line
    crossing = selectivity_frame([0.01, 0.05, 0.09, 0.2, 0.4, 1.0], [0.12] * 6)
    cross = claims.evaluate_sweep([CROSS], crossing, "sqlite")
    assert claims.headline(crossing, cross).startswith("index none overtakes index nonclustered")


def test_a_column_that_moves_with_the_compared_knob_is_not_a_context():
    # one pool size in bytes: 4,096 pages at 4 KiB, 512 at 32 KiB
    data = frame(
        rows("small", scale=0.5, knob_page_size=4096, knob_buffer_pool=4096),
        rows("large", scale=0.3, knob_page_size=32768, knob_buffer_pool=512),
    )
    v = verdict({"kind": "falls", "along": "page_size"}, data)
    assert v.verdict == "holds", v.evidence
    ratio = {
        "kind": "lower",
        "a": {"index": "covering"},
        "b": {"index": "none"},
        "metric": "uses_index",
    }
    plans = frame(
        rows("c", access_path="index-only:ix", knob_index="covering"),
        rows("n", access_path="scan", knob_index="none"),
    )
    assert verdict(ratio, plans).verdict == "contradicted"  # 1 vs 0: an infinite ratio
