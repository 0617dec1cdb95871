"""What a page says is what was measured: an engine's read counter is called physical reads,
with an I/O rate, only where its declaration says each read reached the device; a page has
one megabyte, defined once; and every finding of the findings file stands on the index,
with "cannot run here" and the engine's own reason where it cannot run its sweep.

The rows are a tiny real SQLite pack (a cold and a warm scan, ``runner.run_point``) in a
copy of the checkout's sweeps and findings, so the index is judged by the real findings."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_report_render import number, tables_of
from test_report_support import TEMPLATE, report_params

from tunelab import engines
from tunelab.measure import runner
from tunelab.report import index, reads
from tunelab.report.labels import READS_DEVICE, READS_OS
from tunelab.report.render import timed_render
from tunelab.sweep import findings, spec

REPO = Path(__file__).resolve().parents[1]
SWEEP = {
    "name": "tiny-io",
    "description": "A scan of a small table through a small cache, cold and warm.",
    "engines": ["sqlite"],
    "dataset": {"rows": 4000, "seed": 5},
    "fixed": {"buffer_pool": 16},
    "workloads": [{"type": "scan"}],
    "cache": "both",
    "repetitions": 3,
}
# A definition of a megabyte, as a page writes one: "MB = 10⁶ B", "IBM MB = 1,024,000 B".
MB_DEFINITION = re.compile(r"MB = [0-9,.⁰¹²³⁴⁵⁶⁷⁸⁹]+ B")


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> dict[str, Path]:
    """The checkout's sweeps and findings, and the rows of one tiny sweep measured on SQLite
    beside them (results/sqlite/tiny-io.csv), as a fresh pack leaves them."""
    root = tmp_path_factory.mktemp("pack")
    sweeps = root / "workflows" / "sweeps"
    sweeps.mkdir(parents=True)
    shutil.copy(REPO / "workflows" / findings.FILE_NAME, sweeps.parent)
    for f in (REPO / "workflows" / "sweeps").glob("*.yaml"):
        shutil.copy(f, sweeps)
    sweep_file = sweeps / "tiny-io.yaml"
    sweep_file.write_text(yaml.safe_dump(SWEEP, sort_keys=False))
    points, errors = spec.expand(sweep_file, "sqlite")
    assert not errors, errors
    frames = []
    for point in points:
        out = root / "points" / f"{point.point_id}.csv"
        runner.run_point(point, out, root / "work", root / "data")
        frames.append(pd.read_csv(out))
    csv = root / "results" / "sqlite" / "tiny-io.csv"
    csv.parent.mkdir(parents=True)
    pd.concat(frames, ignore_index=True).to_csv(csv, index=False)
    return {"root": root, "csv": csv, "sweep": sweep_file}


@pytest.fixture(scope="module")
def page(pack, tmp_path_factory) -> str:
    """The sweep's page, rendered with a real (short) calibration of this host's device."""
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed")
    from tests.conftest import tiny_fio_plan
    from tunelab.calibrate import measure, save

    directory = tmp_path_factory.mktemp("fio")
    cal = save(measure.calibrate(directory, tiny_fio_plan(), quick=True), directory / "cal.json")
    params = report_params(pack["csv"], pack["sweep"], calibration_json=str(cal))
    out, _ = timed_render(TEMPLATE, params, pack["root"] / "reports" / "sqlite" / "tiny-io.html")
    return out.read_text(encoding="utf-8")


def _text(page: str) -> str:
    page = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def _medians(rows: pd.DataFrame, values: pd.Series) -> dict[str, float]:
    return rows.assign(v=values).groupby("cache_requested")["v"].median().to_dict()


def _by_point(table: list[list[str]]) -> tuple[list[str], dict[str, list[str]]]:
    header, *body = table
    return header, {c[header.index("cache")]: c for c in body}


def test_sqlites_cache_misses_are_reads_from_the_os_beside_the_device_bytes(pack, page):
    """SQLite declares its misses reads from the OS: no physical read and no I/O rate of them
    anywhere on its page; the only I/O rates are of the bytes that reached the device."""
    rows = pd.read_csv(pack["csv"])
    text = _text(page)
    assert not re.search(r"physical read", text, re.I), "physical reads on a page of OS reads"
    assert "I/O: reads, their rates, and hit ratios" in text
    header, cells = _by_point(tables_of(page)["io"])
    assert not [h for h in header if "read rate" in h or "I/O rate" in h]
    os_words = {c: f"{READS_OS[c]}: median" for c in READS_OS}
    device = "bytes read from the device: median"
    device_rate = "rate of bytes read from the device (MB/s): median"
    for column, shown in [*os_words.items(), ("c_os_read_bytes", device)]:
        want = _medians(rows, rows[column])
        for key, row in cells.items():
            assert number(row[header.index(shown)]) == pytest.approx(want[key], rel=5e-4)
    rate = _medians(rows, rows["c_os_read_bytes"] / rows["elapsed_s"] / 1e6)
    for key, row in cells.items():
        assert number(row[header.index(device_rate)]) == pytest.approx(rate[key], rel=5e-4)
    # the device bytes beside the reads they are set against
    assert header.index(device) > header.index(os_words["c_physical_reads"])


def test_a_page_has_one_megabyte_defined_once(pack, page):
    """The calibration's MB (1,024,000 B) is converted to the page's: every MB/s on the page,
    the device's limits too, is of 10⁶ bytes, and the page defines its MB once."""
    text = _text(page)
    assert MB_DEFINITION.findall(text) == ["MB = 10⁶ B"]
    rows = pd.read_csv(pack["csv"])
    header, cells = _by_point(tables_of(page)["device"])
    achieved = _medians(rows, rows["data_bytes"] / rows["elapsed_s"] / 1e6)
    for key, row in cells.items():
        assert number(row[header.index("achieved (MB/s): median")]) == pytest.approx(
            achieved[key], rel=5e-4
        )


@pytest.mark.parametrize(
    ("engine", "applied", "words"),
    [
        ("sqlite", {}, READS_OS),
        ("postgres", {}, READS_OS),
        ("mariadb", {"applied_direct_io": [True, True]}, READS_DEVICE),
        ("mariadb", {"applied_direct_io": [True, False]}, READS_OS),
        ("db2", {"knob_direct_io": [False]}, READS_OS),
        ("db2", {"elapsed_s": [1.0]}, READS_DEVICE),  # the knob's default: direct I/O
    ],
)
def test_the_words_come_from_the_engines_declaration(engine, applied, words):
    frame = pd.DataFrame(applied or {"elapsed_s": [1.0]})
    assert reads.words(frame, engine) == words


def test_a_finding_no_engine_here_ran_is_on_the_index_with_the_engines_reason(pack):
    """The locking findings' sweep cannot run on SQLite: on a SQLite pack's index and its
    page across engines they stand as "cannot run here", with the reason SQLite's
    declaration of its lock granularity gives; every finding of the file is on the index."""
    root = pack["root"]
    out = index.write_index([], root / "reports" / "index.html", root / "results")
    page = out.read_text(encoding="utf-8")
    found = re.search(r'id="matrix".*?id="side-by-side"', page, re.S)
    matrix = found.group(0) if found else ""
    book = findings.load(root / "workflows" / findings.FILE_NAME)
    for f in book.entries:
        assert html.escape(f["says"]) in matrix, f["id"]
    reason = engines.info("sqlite").knobs["lock_granularity"].meaning
    assert "SQLite locks the whole database file, not rows or tables" in reason
    locking = [f["says"] for f in book.entries if f["sweep"] == "locking-row-vs-table"]
    assert locking
    rows = re.findall(r"<tr><td>(.*?)</td></tr>", matrix, re.S)
    for says in locking:
        row = next(r for r in rows if html.escape(says) in r)
        assert "cannot run here" in row and html.escape(reason) in row
    side = (root / "reports" / "engines" / "locking-row-vs-table.html").read_text()
    claims = side[side.index('id="claims"') :]
    for says in locking:
        assert html.escape(says) in claims
    assert "cannot run here" in claims and html.escape(reason) in claims
