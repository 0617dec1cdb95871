"""One number per quantity on a page: a point's response time is quoted with one value in
every table and in the evidence of every verdict, and every interval says the level it
really has. The rows are measured here by the lab's own runner on a small SQLite sweep whose
verdicts compare one point against two others (each comparison once had its own CPU-speed
reference, and the tables none)."""

from __future__ import annotations

import itertools
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_report_render import tables_of
from test_report_support import TEMPLATE, report_params

REPS = 6
SWEEP = {
    "name": "sqlite-one-figure",
    "description": "A range query at 1 % and 20 % of the rows: a scan, a non-clustered and a "
    "covering index, warm.",
    "engines": ["sqlite"],
    "dataset": {"rows": 20_000, "seed": 3},
    "knobs": {"index": ["none", "nonclustered", "covering"]},
    "fixed": {"buffer_pool": 2000},
    "workloads": [{"type": "range", "selectivity": [0.01, 0.2]}],
    "cache": "warm",
    "access": "forced",
    "repetitions": REPS,
    "expect": [
        {
            "says": "the index beats a scan at 1 %",
            "kind": "lower",
            "a": {"index": "nonclustered", "selectivity": 0.01},
            "b": {"index": "none", "selectivity": 0.01},
        },
        {
            "says": "a covering index beats the non-clustered at 1 %",
            "kind": "lower",
            "a": {"index": "covering", "selectivity": 0.01},
            "b": {"index": "nonclustered", "selectivity": 0.01},
        },
        {
            "says": "a scan takes longer at 20 % than at 1 %",
            "kind": "rises",
            "along": "selectivity",
            "where": {"index": "none"},
        },
    ],
}
TIME_COLUMN = "response time (s): median"
QUOTE = re.compile(
    r"(?P<label>(?:index|selectivity) [^:;,()]+?(?:, selectivity [0-9.]+)?) "
    r"(?P<value>[0-9][0-9.,]*) (?P<unit>ms|s)\b"
)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    from tunelab.measure import runner
    from tunelab.report.render import render
    from tunelab.sweep import spec

    work = tmp_path_factory.mktemp("one-figure")
    sweep_file = work / "sqlite-one-figure.yaml"
    sweep_file.write_text(yaml.safe_dump(SWEEP, sort_keys=False))
    points, errors = spec.expand(sweep_file, "sqlite")
    assert not errors, errors
    frames = []
    for point in points:
        out = work / "points" / f"{point.point_id}.csv"
        runner.run_point(point, out, work / "work", work / "data")
        frames.append(pd.read_csv(out))
    csv = work / "sqlite-one-figure.csv"
    pd.concat(frames, ignore_index=True).to_csv(csv, index=False)
    out = work / "reports" / "sqlite-one-figure.html"
    render(TEMPLATE, report_params(csv, sweep_file), out)
    return Path(out).read_text(encoding="utf-8").split("<body", 1)[1]


class _Text(HTMLParser):
    """The page's text as a reader sees it (scripts, styles and images left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._skip -= tag in ("script", "style")

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def text_of(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())


def _seconds(value: str, unit: str) -> float:
    return float(value.replace(",", "")) * (1e-3 if unit == "ms" else 1.0)


def _half_step(text: str, unit: str = "s") -> float:
    """Half the last shown digit of a number as printed: what its rounding may hide."""
    digits = text.replace(",", "").split("e")[0]
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return 0.5 * 10.0**-decimals * (1e-3 if unit == "ms" else 1.0)


def quoted(html: str) -> dict[tuple[str, str], list[tuple[float, float, str]]]:
    """(index, selectivity) -> every value the page quotes for that point's response time:
    (seconds, how far its rounding may be off, where)."""
    found: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
    for table_id, rows in tables_of(html).items():
        header, *body = rows
        if TIME_COLUMN not in header:
            continue
        at = header.index(TIME_COLUMN)
        idx, sel = (
            next(i for i, h in enumerate(header) if h.startswith(c))
            for c in ("index", "selectivity")
        )
        for cells in body:
            key = (cells[idx], f"{float(cells[sel]):g}")
            found.setdefault(key, []).append(
                (float(cells[at]), _half_step(cells[at]), f"table {table_id}")
            )
    for m in QUOTE.finditer(text_of(html)):
        parts = dict(p.split(" ", 1) for p in m["label"].split(", "))
        if "index" not in parts or "selectivity" not in parts:
            continue
        key = (parts["index"], f"{float(parts['selectivity']):g}")
        value = _seconds(m["value"], m["unit"])
        found.setdefault(key, []).append((value, _half_step(m["value"], m["unit"]), m[0]))
    return found


def test_a_point_is_quoted_with_one_value_everywhere_on_its_page(page):
    found = quoted(page)
    compared = ("nonclustered", "0.01")  # the side of two verdicts, and a table row
    assert len(found.get(compared, [])) >= 3, found.get(compared)
    assert any(where.startswith("table") for _, _, where in found[compared])
    for point, quotes in found.items():
        for value, step, where in quotes:
            for other, other_step, other_where in quotes:
                assert abs(value - other) <= step + other_step + 1e-12, (
                    f"{point}: {where!r} says {value:.6g} s, {other_where!r} {other:.6g} s"
                )


def signed_rank_levels(n: int) -> set[float]:
    """Every level an interval of the signed-rank statistic of ``n`` rounds can have,
    1 - 2 P(T+ <= j), counted over all 2^n signs (no code of the lab's)."""
    sums = [
        sum(r for r, plus in zip(range(1, n + 1), signs) if plus)
        for signs in itertools.product((0, 1), repeat=n)
    ]
    return {1 - 2 * sum(t <= j for t in sums) / len(sums) for j in range(max(sums) // 2)}


def test_every_interval_says_the_level_it_has(page):
    text = text_of(page)
    # the level of an order-statistic interval of six repetitions, and the levels a paired
    # signed-rank interval of six rounds can have
    true = {
        round(100 * (1 - 2 * sum(math.comb(REPS, i) for i in range(k)) / 2**REPS), 1)
        for k in range(1, REPS // 2 + 1)
    }
    true |= {round(100 * level, 1) for level in signed_rank_levels(REPS)}
    said = re.findall(r"([0-9]+(?:\.[0-9]+)?) % interval", text)
    assert said, "no interval labelled with a level"
    for level in said:
        assert round(float(level), 1) in true, f"an interval labelled {level} %"


def test_rows_built_a_column_at_a_time_are_taken_at_one_speed_without_a_warning():
    """A page's rows gain derived columns one by one; pandas warns on the user's terminal
    when a fragmented frame gets one more, as at_one_speed adds its own."""
    import warnings

    from tunelab.analysis import figures

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pd.errors.PerformanceWarning)
        frame = pd.DataFrame({"elapsed_s": [0.1, 0.2]})
        for i in range(120):
            frame[f"c{i}"] = i
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        shown = figures.at_one_speed(frame)
    assert figures.ONE_SPEED in shown and len(shown.columns) == len(frame.columns) + 1
