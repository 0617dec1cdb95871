"""Shared-pool sizing curves (`tunelab bpsim-shared`): what the curves must show by
construction, the knee rule, the slides' rules of thumb, and the command line."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tunelab.bpsim import shared_cli, shared_curves
from tunelab.bpsim.members import shared_trace, shared_trace_pieces


def _frame(members=(1, 2, 4), shares=(0.0, 0.3), lbp=(50, 200), gbp=(10, 40, 160, 640)):
    def trace_for(m, w):
        return shared_trace(2000, 20_000, m, w, affinity=0.5, alpha=0.8, seed=3)

    return shared_curves.curves(trace_for, members, shares, lbp, gbp)


def test_curves_from_pieces_equal_curves_from_the_whole_trace():
    whole = _frame(members=(2,), shares=(0.3,))

    def pieces_for(m, w):
        return shared_trace_pieces(2000, 20_000, m, w, affinity=0.5, alpha=0.8, seed=3, piece=6_000)

    def whole_for(m, w):  # the same references, made whole
        return pd.concat(list(pieces_for(m, w)), ignore_index=True)

    a = shared_curves.curves(pieces_for, (2,), (0.3,), (50, 200), (10, 40, 160, 640))
    b = shared_curves.curves(whole_for, (2,), (0.3,), (50, 200), (10, 40, 160, 640))
    pd.testing.assert_frame_equal(a, b)
    assert (a["references"] == 20_000).all() and len(whole) == len(a)


def test_the_slides_rules_of_thumb():
    assert shared_curves.rule_of_thumb(1) is None  # nothing to invalidate, no rule
    assert shared_curves.rule_of_thumb(2) == 0.45  # "about 40-50 %"
    assert shared_curves.rule_of_thumb(4) == 0.375  # 4 x 1 M pages -> ~1.5 M
    assert shared_curves.rule_of_thumb(16) == 0.375


def test_curves_show_what_the_model_implies():
    f = _frame()
    assert len(f) == 3 * 2 * 2 * 4 and list(f.columns) == shared_curves.COLUMNS
    # IBM counts an invalid copy as found: valid + invalid = the LBP hit ratio
    assert np.allclose(f["valid_lbp_ratio"] + f["invalid_ratio"], f["lbp_hit_ratio"])
    # one member, or no writes: nothing is ever invalidated
    assert (f.loc[(f["members"] == 1) | (f["write_share"] == 0), "invalid_ratio"] == 0).all()
    assert (f.loc[(f["members"] > 1) & (f["write_share"] > 0), "invalid_ratio"] > 0).all()
    # the GBP sees the same stream whatever its size (the LBPs do not depend on it), so LRU's
    # inclusion holds: physical reads never grow with the GBP
    for _, g in f.groupby(["members", "write_share", "lbp_pages"]):
        reads = g.sort_values("gbp_pages")["physical_reads"].to_numpy()
        assert (np.diff(reads) <= 0).all(), reads
    # a larger LBP cannot lower the invalidations: it holds more copies to invalidate
    writes = f[(f["members"] == 4) & (f["write_share"] == 0.3) & (f["gbp_pages"] == 640)]
    small, big = writes.sort_values("lbp_pages")["invalid_ratio"].to_numpy()
    assert big >= small


def test_the_knee_is_the_smallest_gbp_within_five_percent_of_the_largest():
    rows = [
        {"members": 2, "write_share": 0.2, "lbp_pages": 100, "gbp_pages": g, "physical_reads": r}
        for g, r in [(10, 500), (20, 300), (40, 104), (80, 100)]
    ] + [
        {"members": 4, "write_share": 0.2, "lbp_pages": 100, "gbp_pages": g, "physical_reads": r}
        for g, r in [(10, 500), (20, 300), (40, 200), (80, 100)]  # still falling at the top
    ]
    k = shared_curves.knees(pd.DataFrame(rows)).set_index("members")
    assert k.loc[2, "gbp_knee_pages"] == 40 and k.loc[2, "gbp_knee_share"] == 0.2
    assert k.loc[2, "rule_share"] == 0.45
    assert math.isnan(k.loc[4, "gbp_knee_pages"])  # no size below the largest is as good


def test_command_prints_knees_and_writes_every_point(tmp_path, capsys):
    out = tmp_path / "curves.csv"
    argv = [
        "--pages",
        "2000",
        "--references",
        "20000",
        "--members",
        "1,2",
        "--write-share",
        "0.2",
        "--lbp",
        "100",
        "--gbp",
        "20,80,320,1280",
        "--out",
        str(out),
    ]
    assert shared_cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "GBP knee" in text and "2 members, writes 0.2: 100:" in text
    assert len(pd.read_csv(out)) == 2 * 4
    assert shared_cli.main(argv) == 2  # the file exists now
    assert "pass --force" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--members", "0"], "each member count must be >= 1"),
        (["--write-share", "-0.1"], "each write share must be >= 0"),
        (["--write-share", "1.5"], "within [0, 1]"),
        (["--gbp", "0,10"], "each GBP size must be >= 1"),
        (["--alpha", "x"], "--alpha 'x'"),
        (["--affinity", "2"], "--affinity 2.0: must be within [0, 1]"),
        (["--pages", "2", "--members", "4"], "--pages 2: must be >= the largest member count"),
    ],
)
def test_bad_arguments_get_one_line_and_exit_2(argv, says, capsys):
    assert shared_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
