"""Report sections fed by other helpers: device limits from a real fio calibration, the
simulator section, and the figures in a rendered page being exactly the ones the rows give."""

from __future__ import annotations

import base64
import re
import shutil

import pandas as pd
import pytest
from test_report_render import tables_of
from test_report_support import measured, rendered

from tunelab.analysis import figures
from tunelab.report import methods, plots
from tunelab.report.data import effective_knobs, load
from tunelab.report.labels import fmt
from tunelab.report.page import (
    figures_section,
    io_section,
    measured_section,
    optional_sections,
    sweep_figures,
)

needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    from tests.conftest import tiny_fio_plan
    from tunelab.calibrate import measure, save

    plan = tiny_fio_plan()
    directory = tmp_path_factory.mktemp("fio")
    cal = measure.calibrate(directory, plan, quick=True)
    return cal, save(cal, directory / "calibration.json")


@needs_fio
def test_device_section_puts_achieved_mb_s_against_the_calibrated_rate(
    calibration, tmp_path_factory
):
    cal, path = calibration
    csv, sweep = measured("scan", tmp_path_factory)
    page = optional_sections.device_html(load(csv, sweep), str(path))
    assert "data:image/png;base64," in page
    header, *body = tables_of(page)["device"]
    rows = pd.read_csv(csv)
    rows["mb_s"] = rows["data_bytes"] / rows["elapsed_s"] / 1e6
    medians = rows.groupby(["knob_cache_size", "knob_page_size", "cache_requested"])["mb_s"]
    # The page's MB (10⁶ B), the calibration's limits converted to it.
    at = header.index("achieved (MB/s): median")
    frac = header.index("achieved / device limit: median")
    assert len(body) == 16
    for cells in body:
        key = (int(cells[0]), int(cells[1]), cells[2])
        want = medians.median()[key]
        assert float(cells[at]) == pytest.approx(want, rel=5e-4)
        fraction = float(cells[frac].rstrip(" %")) / 100
        device = cal.device_read_rate_mb_s * cal.mb_bytes / 1e6
        assert fraction == pytest.approx(want / device, abs=6e-4)
        assert cells[-1] == "device read rate"


def test_device_section_is_left_out_without_calibration(tmp_path_factory):
    csv, sweep = measured("scan", tmp_path_factory)
    assert optional_sections.device_html(load(csv, sweep), "") is None
    missing = optional_sections.device_html(load(csv, sweep), "/nonexistent/calibration.json")
    assert "calibration file not found" in missing


def test_simulator_section_degrades_to_a_note_when_it_cannot_run(tmp_path_factory, tmp_path):
    csv, sweep = measured("scan", tmp_path_factory)
    assert optional_sections.simulator_html(load(csv, sweep), "") is None
    curve = tmp_path / "curve.csv"
    curve.write_text("not,a,curve\n")
    page = optional_sections.simulator_html(load(csv, sweep), str(curve))
    assert page.startswith("<h2>Simulated versus measured</h2>")
    assert "Traceback" not in page


def test_rendered_figures_are_exactly_the_figures_of_the_stored_rows(tmp_path_factory):
    """End to end: every PNG in the page equals the PNG drawn again from the CSV."""
    path, _ = rendered("scan", tmp_path_factory)
    csv, sweep = measured("scan", tmp_path_factory)
    html = path.read_text(encoding="utf-8")
    shown = [base64.b64decode(s) for s in re.findall(r'src="data:image/png;base64,([^"]+)"', html)]
    data = load(csv, sweep)
    expected = [plots.to_png(sweep_figures.knob_figure(data, x)) for x in data.dims]
    io, names = io_section.io_rows(data)
    expected += [plots.to_png(sweep_figures.io_figure(io, x, names)) for x in data.dims]
    assert shown == expected


def test_sweep_overrides_give_the_engine_its_own_knob_values():
    sweep = {
        "name": "s",
        "knobs": {"buffer_pool": [16, 256], "prefetch": [8, 32]},
        "fixed": {"page_size": 4096},
        "overrides": {"db2": {"knobs": {"buffer_pool": [250, 2000], "prefetch": None}}},
    }
    assert effective_knobs(sweep, "db2") == ({"buffer_pool": [250, 2000]}, {"page_size": 4096})
    assert effective_knobs(sweep, "sqlite")[0] == sweep["knobs"]


def test_warnings_name_knobs_the_engine_did_not_apply(tmp_path_factory, tmp_path):
    csv, sweep = measured("scan", tmp_path_factory)
    rows = pd.read_csv(csv)
    assert measured_section.warnings(load(csv, sweep))[-1].startswith("With 3 repetition(s)")
    changed = rows.copy()
    changed.loc[0, "applied_cache_size"] = changed.loc[0, "knob_cache_size"] + 1
    changed.loc[1, "cache_achieved"] = "partial"
    changed.to_csv(tmp_path / "changed.csv", index=False)
    found = measured_section.warnings(load(tmp_path / "changed.csv", sweep))
    assert any(
        "cache size: the engine applied other values than asked in 1 row" in w for w in found
    )
    assert any("1 of 48 rows did not achieve the cache state asked" in w for w in found)


def test_an_engines_note_in_the_sweep_is_shown_in_its_report_only(tmp_path_factory, tmp_path):
    import yaml

    csv, sweep = measured("scan", tmp_path_factory)
    doc = yaml.safe_load(sweep.read_text())
    doc["notes"] = {"sqlite": "Pages come from the OS cache <fast>.", "db2": "Not this one."}
    noted = tmp_path / "noted.yaml"
    noted.write_text(yaml.safe_dump(doc))
    page = measured_section.measured_html(load(csv, noted))
    assert "<b>On sqlite:</b> Pages come from the OS cache &lt;fast&gt;." in page
    assert "Not this one" not in page


# -- methods --------------------------------------------------------------------------------------
def test_methods_name_engine_version_protocol_and_what_was_achieved(tmp_path_factory):
    csv, sweep = measured("engine", tmp_path_factory)
    rows = pd.read_csv(csv)
    setup, protocol, analysis = methods.methods_text(load(csv, sweep))
    version = rows["engine_version"].iloc[0]
    assert f"on {version}, embedded in the measuring process (no container)" in setup
    assert (
        f"tunelab {rows['tunelab_version'].iloc[0]} (commit {rows['git_commit'].iloc[0]})" in setup
    )
    assert f"{rows['host_cores'].iloc[0]} cores" in setup
    cold = rows[rows["cache_requested"] == "cold"]
    reached = int((cold["cache_achieved"] == "cold").sum())
    assert (
        f"Before each of the {int(cold['queries'].sum())} timed statements of {len(cold)} cold "
        "repetitions (each statement timed on its own: the steps between them stayed outside "
        "the clock), every connection was closed" in protocol
    )
    assert f"{reached} of {len(cold)} reached a cold cache" in protocol
    # How the kernel's read-ahead shapes a cold read here, with the rows' own device bytes.
    assert "SQLite reads each page it misses with read(2) through the OS page cache" in protocol
    per_point = cold.groupby("point_id")["q_first_read_bytes"].median() / 1e6
    assert f"went from {fmt(per_point.min())} MB (" in protocol
    assert f") to {fmt(per_point.max())} MB (" in protocol
    assert "the same workload ran once, untimed, on the same connections" in protocol
    assert "(access: optimizer)" in protocol and "(fetch: all)" in protocol
    assert (
        f"the {len(rows)} timed sections recorded in the rows (CLOCK_MONOTONIC) do not overlap"
        in protocol
    )
    assert "No device calibration is part of this report." in analysis


def test_methods_name_the_container_image_and_overlapping_timings(tmp_path_factory, tmp_path):
    csv, sweep = measured("engine", tmp_path_factory)
    rows = pd.read_csv(csv).sort_values("timed_start_ns").reset_index(drop=True)
    rows["engine"] = "mariadb"
    rows["engine_version"] = "MariaDB 11.8.2-MariaDB-deb13 (tunelab/mariadb:11.8)"
    # the second timed section starts before the first one ended
    rows.loc[1, "timed_start_ns"] = rows.loc[0, "timed_end_ns"] - 1
    rows.to_csv(tmp_path / "changed.csv", index=False)
    text = " ".join(methods.methods_text(load(tmp_path / "changed.csv", sweep)))
    assert (
        "on MariaDB 11.8.2-MariaDB-deb13, run from the container image tunelab/mariadb:11.8" in text
    )
    assert "overlap in 1 case(s)" in text


def test_methods_say_the_cold_steps_as_the_engine_of_the_rows_describes_them(
    tmp_path_factory, tmp_path
):
    from tunelab import engines
    from tunelab.host import cache

    csv, sweep = measured("scan", tmp_path_factory)
    rows = pd.read_csv(csv)
    cold = rows["cache_requested"] == "cold"
    described = {}
    for name in engines.names():
        steps = engines.info(name).cold_steps
        rows["engine"] = name
        rows.loc[cold, "cache_method"] = "+".join([*steps, "fadvise"])
        rows.to_csv(tmp_path / f"{name}.csv", index=False)
        text = methods.methods_text(load(tmp_path / f"{name}.csv", sweep))[1]
        words = [*steps.values(), cache.EVICT_STEPS["fadvise"]]
        described[name] = ", ".join(words[:-1]) + " and " + words[-1]
        assert f"cold repetitions, {described[name]}; then" in text
    # Rows of an engine the registry does not know: its steps keep their names.
    rows["engine"] = "unknown"
    rows.loc[cold, "cache_method"] = "shutdown+fadvise"
    rows.to_csv(tmp_path / "unknown.csv", index=False)
    text = methods.methods_text(load(tmp_path / "unknown.csv", sweep))[1]
    assert f"cold repetitions, shutdown and {cache.EVICT_STEPS['fadvise']}; then" in text


def test_methods_without_recorded_timings_say_so(tmp_path_factory):
    csv, sweep = measured("scan", tmp_path_factory)  # rows timed outside the runner
    text = " ".join(methods.methods_text(load(csv, sweep)))
    assert "do not record their timed intervals" in text
    assert pd.read_csv(csv)["engine_version"].iloc[0] in text


def test_summary_table_puts_the_pool_size_in_bytes_beside_its_pages(tmp_path_factory, tmp_path):
    import yaml

    csv, _ = measured("scan", tmp_path_factory)
    rows = pd.read_csv(csv).rename(columns={"knob_cache_size": "knob_buffer_pool"})
    rows = rows[rows["knob_page_size"] == 1024]
    rows.to_csv(tmp_path / "pool.csv", index=False)
    sweep = tmp_path / "pool.yaml"
    sweep.write_text(yaml.safe_dump({"name": "sqlite-cache-scan", "knobs": {"buffer_pool": [16]}}))
    page = measured_section.summary_html(load(tmp_path / "pool.csv", sweep))
    header, *body = tables_of(page)["summary"]
    assert header[:3] == ["buffer pool (pages)", "buffer pool size (MiB = 2²⁰ B)", "cache"]
    pools = [int(cells[0]) for cells in body]
    assert pools == sorted(pools)  # numbers ascending, not as text
    for cells in body:  # pages of 1 KiB, in MiB
        assert float(cells[1]) == pytest.approx(int(cells[0]) * 1024 / 2**20, rel=5e-4)


# -- row locks versus a table lock --------------------------------------------------------------
@pytest.mark.slow
def test_locking_section_gives_the_ratio_its_interval_and_what_it_means(
    tmp_path_factory,
):
    from test_report_plots import expected_lock_ratios, measured_locking

    data, rows = measured_locking(tmp_path_factory)
    page = figures_section.locking_html(data)
    assert page.startswith("<h2>Row locks versus a table lock</h2>")
    assert page.count("data:image/png;base64,") == 1
    caption = re.search(r"<figcaption>(.*?)</figcaption>", page, re.S)[1]
    assert "Above 1, row locks gave more rows per second than a table lock" in caption
    assert "below 1, the table lock gave more" in caption
    assert "interval, at the level the table gives beside it" in caption
    header, *body = tables_of(page)["locking"]
    assert header[:2] == ["workload", "client threads"]
    at, interval = header.index("row / table"), header.index("interval (its level)")
    # the table gives the ratio the verdicts compare: throughput at one CPU speed
    expected = expected_lock_ratios(figures.at_one_speed(rows))
    assert len(body) == len(expected) == 4
    for cells in body:
        want = expected[(cells[0], int(cells[1]))]
        assert float(cells[at]) == pytest.approx(want, abs=5e-4)
        bounds, level = cells[interval].split(" (")
        low, high = (float(v) for v in bounds.strip("[]").split(", "))
        # its real level: three rounds give [min, max] of the Walsh averages, 1 - 2 / 2^3
        assert float(level.split(" %")[0]) == pytest.approx(100 * (1 - 2 / 2**3), abs=0.05)
        assert low <= float(cells[at]) <= high
        assert cells[-1] == "3, 3"


def test_locking_section_is_left_out_without_a_lock_granularity(tmp_path_factory):
    csv, sweep = measured("scan", tmp_path_factory)
    assert figures_section.locking_html(load(csv, sweep)) is None


@pytest.mark.slow
def test_rendered_report_puts_the_locking_figure_after_the_knob_figures(tmp_path_factory):
    from test_report_plots import measured_locking
    from test_report_support import TEMPLATE, report_params

    from tunelab.report.render import render

    data, _ = measured_locking(tmp_path_factory)
    out = tmp_path_factory.mktemp("locking-report") / "locking.html"
    text = render(TEMPLATE, report_params(data.results_csv, data.sweep_file), out).read_text()
    assert "Traceback" not in text
    order = [
        text.index(h)
        for h in (
            "Response time and throughput",
            "Row locks versus a table lock",
            "Summary per point",
        )
    ]
    assert order == sorted(order)
    assert 'id="locking"' in text
