"""Predicted physical reads against measured ones, including a real SQLite sweep."""

import apsw
import matplotlib
import numpy as np
import pandas as pd
import pytest

from tunelab.bpsim.compare import plot_predicted_vs_measured, predicted_vs_measured
from tunelab.bpsim.curves import lru_curve
from tunelab.engines.sqlite_pagetrace import capture_trace

matplotlib.use("Agg")


def test_median_per_size_interpolation_and_flat_tail():
    curve = pd.DataFrame({"pool_pages": [10, 20, 40], "misses": [100, 60, 20]})
    measured = pd.DataFrame(
        {"pool_pages": [10, 10, 10, 30, 80], "physical_reads": [90, 110, 100, 44, 25]}
    )
    out = predicted_vs_measured(curve, measured).set_index("pool_pages")
    assert out.loc[10, "measured_reads"] == 100 and out.loc[10, "n_measured"] == 3
    assert out.loc[10, "rel_error"] == 0
    assert out.loc[30, "predicted_misses"] == 40  # halfway between 20 and 40 pages
    assert out.loc[30, "rel_error"] == pytest.approx((40 - 44) / 44)
    assert out.loc[80, "predicted_misses"] == 20  # beyond the working set: flat


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match="measured lacks column"):
        predicted_vs_measured(
            pd.DataFrame({"pool_pages": [1], "misses": [1]}), pd.DataFrame({"pool_pages": [1]})
        )


@pytest.fixture(scope="module")
def sqlite_sweep(tmp_path_factory):
    """A skewed point-lookup workload: its page trace, and measured misses per cache size."""
    path = tmp_path_factory.mktemp("pvm") / "pvm.db"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, payload TEXT)")
    with conn:
        conn.executemany("INSERT INTO t VALUES(?, ?)", [(i, "x" * 300) for i in range(30_000)])
    conn.close()
    keys = (np.random.default_rng(0).zipf(1.3, 10_000) % 30_000).tolist()

    def work(c):
        for k in keys:
            c.execute("SELECT payload FROM t WHERE id = ?", (k,)).fetchall()

    trace = capture_trace(path, work)
    rows = []
    for pool in (50, 100, 200, 400, 800, 1600, 3000):
        c = apsw.Connection(str(path))
        c.execute(f"PRAGMA cache_size={pool}")
        before = c.status(apsw.SQLITE_DBSTATUS_CACHE_MISS)[0]
        work(c)
        rows.append(
            {
                "pool_pages": pool,
                "physical_reads": c.status(apsw.SQLITE_DBSTATUS_CACHE_MISS)[0] - before,
            }
        )
        c.close()
    return trace, pd.DataFrame(rows)


def test_simulation_predicts_sqlite_page_cache_misses(sqlite_sweep):
    trace, measured = sqlite_sweep
    curve = lru_curve(trace.pages)
    out = predicted_vs_measured(curve, measured)
    assert out["rel_error"].abs().max() < 0.05, out
    # and the pool sizes did matter: the measured reads span a wide range
    assert measured["physical_reads"].max() > 2 * measured["physical_reads"].min()


def test_plot(sqlite_sweep):
    import matplotlib.pyplot as plt

    trace, measured = sqlite_sweep
    curve = lru_curve(trace.pages)
    fig, ax = plt.subplots()
    plot_predicted_vs_measured(predicted_vs_measured(curve, measured), ax, curve=curve)
    assert "predicted vs measured" in ax.get_title()
    assert len(ax.get_lines()) >= 1 and np.isfinite(ax.get_xlim()).all()
    plt.close(fig)
