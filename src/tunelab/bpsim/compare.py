"""A pool's predicted misses (simulator) against the measured ones (a buffer-pool sweep's
reads into the pool, ``physical_reads``: whichever the engine's counter is)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def predicted_vs_measured(curve: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """One row per measured pool size: predicted misses, measured reads, relative error.

    ``curve`` has columns pool_pages, misses (a simulator curve); ``measured`` has columns
    pool_pages, physical_reads, one row per repetition or per point. Measured reads are
    summarised by their median (with min, max and count). The prediction at a pool size the
    curve does not list is interpolated linearly between the listed sizes; beyond the
    largest listed size (a pool larger than the working set) the curve is flat, so the
    prediction is the misses at that size. ``rel_error`` = (predicted - measured) / measured.
    """
    for name, frame, cols in (
        ("curve", curve, ("pool_pages", "misses")),
        ("measured", measured, ("pool_pages", "physical_reads")),
    ):
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ValueError(f"{name} lacks column(s) {', '.join(missing)}")
    if curve.empty:
        raise ValueError("curve has no rows")
    ordered = curve.sort_values("pool_pages")
    x = ordered["pool_pages"].to_numpy(dtype=float)
    y = ordered["misses"].to_numpy(dtype=float)
    grouped = (
        measured.dropna(subset=["pool_pages", "physical_reads"])
        .groupby("pool_pages")["physical_reads"]
        .agg(measured_reads="median", measured_min="min", measured_max="max", n_measured="size")
        .reset_index()
    )
    sizes = grouped["pool_pages"].to_numpy(dtype=float)
    grouped["predicted_misses"] = np.interp(sizes, x, y, left=y[0], right=y[-1])
    grouped["abs_error"] = grouped["predicted_misses"] - grouped["measured_reads"]
    with np.errstate(divide="ignore", invalid="ignore"):
        grouped["rel_error"] = np.where(
            grouped["measured_reads"] > 0,
            grouped["abs_error"] / grouped["measured_reads"],
            np.nan,
        )
    return grouped[
        [
            "pool_pages",
            "predicted_misses",
            "measured_reads",
            "measured_min",
            "measured_max",
            "n_measured",
            "abs_error",
            "rel_error",
        ]
    ]


def plot_predicted_vs_measured(df: pd.DataFrame, ax, curve: pd.DataFrame | None = None):
    """Overlay predicted and measured pool misses against pool size on ``ax``.

    ``df`` is the output of ``predicted_vs_measured``; pass the full ``curve`` too to draw
    the predicted line at every simulated size rather than only at the measured ones.
    """
    import seaborn as sns

    line = curve if curve is not None else df.rename(columns={"predicted_misses": "misses"})
    sns.lineplot(
        data=line,
        x="pool_pages",
        y="misses",
        ax=ax,
        label="predicted (LRU simulation)",
        color="tab:blue",
    )
    ax.errorbar(
        df["pool_pages"],
        df["measured_reads"],
        yerr=[
            df["measured_reads"] - df["measured_min"],
            df["measured_max"] - df["measured_reads"],
        ],
        fmt="o",
        color="tab:orange",
        capsize=3,
        label="measured (median, min-max)",
    )
    finite = df["rel_error"].abs().dropna()
    if not finite.empty:
        ax.set_title(
            f"Pool misses: predicted vs measured (median |error| {finite.median():.1%}, "
            f"max {finite.max():.1%})"
        )
    ax.set_xlabel("pool size (pages)")
    ax.set_ylabel("pool misses (pages read into the pool)")
    ax.set_xscale("log")
    ax.legend()
    return ax
