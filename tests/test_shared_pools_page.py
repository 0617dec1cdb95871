"""The shared-pools page: `tunelab bpsim-shared --out` curves rendered by `tunelab
report-shared-pools`, its sentences taken from the curves, and its link on the index."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from tunelab.bpsim import shared_cli, shared_curves
from tunelab.report import cli as report_cli
from tunelab.report import shared_pools
from tunelab.report.data import ReportInputError
from tunelab.report.index import SHARED_POOLS_PAGE, write_index
from tunelab.run import pipeline

ARGS = [
    "--pages",
    "2000",
    "--references",
    "30000",
    "--members",
    "1,2,4",
    "--write-share",
    "0,0.3",
    "--lbp",
    "40,100",
    "--gbp",
    "20,80,320,1280,2000",
]


@pytest.fixture(scope="module")
def curves_csv(tmp_path_factory):
    out = tmp_path_factory.mktemp("shared") / "shared-pools.csv"
    assert shared_cli.main([*ARGS, "--out", str(out)]) == 0
    return out


def test_the_curves_say_which_trace_made_them(curves_csv):
    frame = shared_pools.load(curves_csv)
    assert len(frame) == 3 * 2 * 2 * 5
    assert set(frame["pages"]) == {2000} and set(frame["policy"]) == {"lru"}
    assert set(frame["alpha"]) == {0.9} and set(frame["seed"]) == {0}


def test_bad_curves_are_one_line_errors(tmp_path, curves_csv, capsys):
    with pytest.raises(ReportInputError, match="no such file"):
        shared_pools.load(tmp_path / "none.csv")
    partial = tmp_path / "partial.csv"
    pd.read_csv(curves_csv).drop(columns=["seed", "gbp_hit_ratio"]).to_csv(partial, index=False)
    with pytest.raises(ReportInputError, match="columns gbp_hit_ratio, seed missing"):
        shared_pools.load(partial)
    code = report_cli.shared_pools_main(["--curves", str(partial), "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "tunelab report-shared-pools: error" in err
    assert not (tmp_path / "x").exists()


def test_the_knee_table_and_the_reading_take_their_figures_from_the_curves(curves_csv):
    frame = shared_pools.load(curves_csv)
    knees = shared_curves.knees(frame)
    table = shared_pools.knees_html(frame)
    rows = re.findall(
        r"<tr><td>(\d+)</td><td>([\d.]+)</td><td>([\d,]+)</td><td>([^<]+)</td>", table
    )
    assert len(rows) == len(knees)
    for k, (m, w, lbp, knee) in zip(knees.itertuples(), rows, strict=True):
        assert (int(m), float(w), int(lbp.replace(",", ""))) == (
            k.members,
            k.write_share,
            k.lbp_pages,
        )
        expect = (
            "none below the largest"
            if pd.isna(k.gbp_knee_pages)
            else (f"{int(k.gbp_knee_pages):,}")
        )
        assert knee == expect
    reading = shared_pools.reading_html(frame)
    multi = knees[(knees["members"] > 1)].dropna(subset=["gbp_knee_pages"])
    assert f"{int(multi['gbp_knee_pages'].min()):,}" in reading
    # one member or no writes: nothing invalid, so the LBP sentence names only the others
    top = frame[frame["gbp_pages"] == frame["gbp_pages"].max()]
    assert (top.loc[top["members"] == 1, "invalid_ratio"] == 0).all()
    assert "1 members" not in reading


def test_the_page_renders_self_contained(curves_csv, tmp_path, capsys):
    out = tmp_path / SHARED_POOLS_PAGE
    assert report_cli.shared_pools_main(["--curves", str(curves_csv), "--out", str(out)]) == 0
    page = out.read_text()
    assert page.count('src="data:image/png;base64,') == 2
    assert "<script src=" not in page and "def " not in page  # no code, nothing fetched
    assert "GBP knee" in page and "slides" in page
    index = write_index([], tmp_path / "index.html", tmp_path / "results")
    assert f'href="{SHARED_POOLS_PAGE}"' in index.read_text()


def test_the_index_links_the_page_only_when_it_exists(tmp_path):
    index = write_index([], tmp_path / "index.html", tmp_path / "results")
    assert SHARED_POOLS_PAGE not in index.read_text()


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"shared_pools": False}, None),
        ({"shared_pools": "off"}, None),
        ({"shared_pools": "--pages 100"}, "--pages 100"),
        ({}, ""),
    ],
)
def test_the_config_turns_the_page_off(config, expected):
    assert pipeline.shared_pools_args(config) == expected


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("--pages abc", "--pages: invalid int value: 'abc'"),
        ("--members 0", "each member count must be"),
        ("--alpha steep", "--alpha 'steep'"),
        ("--out x.csv", "--out is the workflow's to set"),
        ("--pages '20000", "No closing quotation"),
    ],
)
def test_a_bad_config_ends_the_run_before_anything_starts(value, field, capsys):
    with pytest.raises(SystemExit) as done:
        pipeline.shared_pools_or_exit({"shared_pools": value})
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1
    assert err.startswith("config: shared_pools: ") and field in err


def test_a_good_config_or_off_passes():
    pipeline.shared_pools_or_exit({"shared_pools": "--pages 20000 --references 200000"})
    pipeline.shared_pools_or_exit({"shared_pools": "off"})
