"""The shared-pools page: the sizing curves `tunelab bpsim-shared` simulated for DB2
pureScale's two-tier buffering (the cluster's GBP hit ratio and physical reads against the
GBP's size, per LBP size, member count and write share), the GBP knee beside the slides'
rule of thumb, and what a larger LBP buys once other members' writes invalidate copies.

Every sentence that states a figure takes it from the curves; the rules are
``tunelab.bpsim.shared_curves``'s.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tunelab.bpsim import shared_curves
from tunelab.report import plots
from tunelab.report.data import ReportInputError
from tunelab.report.fragments import note

# What `tunelab bpsim-shared --out` writes beside the curves: the trace's parameters.
TRACE_COLUMNS = ["pages", "alpha", "affinity", "policy", "seed"]


def load(path: str | Path) -> pd.DataFrame:
    """The curves CSV, checked for the columns the page needs."""
    path = Path(path)
    if not path.is_file():
        raise ReportInputError(f"--curves {path}: no such file")
    try:
        frame = pd.read_csv(path)
    except (ValueError, pd.errors.ParserError) as exc:
        raise ReportInputError(f"{path}: not a curves CSV ({exc})") from None
    missing = [c for c in shared_curves.COLUMNS + TRACE_COLUMNS if c not in frame]
    if missing:
        raise ReportInputError(
            f"{path}: columns {', '.join(missing)} missing (write it with "
            "`tunelab bpsim-shared --out`)"
        )
    if frame.empty:
        raise ReportInputError(f"{path}: no curves")
    return frame


def _pct(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0%}"


def header_html(frame: pd.DataFrame, title: str = "") -> str:
    first = frame.iloc[0]
    alpha = first["alpha"]
    access = "uniform" if pd.isna(alpha) or alpha == "uniform" else f"Zipf {float(alpha):g}"
    facts = [
        "<b>simulated</b> (tunelab.bpsim.members)",
        f"{int(first['pages']):,} pages, {access}, affinity {float(first['affinity']):g}",
        f"{int(frame['references'].iloc[0]):,} references per trace, seed {int(first['seed'])}",
        f"{html.escape(str(first['policy']))} LBPs, LRU GBP",
        f"{len(frame)} points",
    ]
    return (
        f'<header class="tl-header"><h1>{html.escape(title or "shared-pools")}</h1>'
        f'<p class="tl-facts">{" · ".join(facts)}</p></header>'
    )


def intro_html() -> str:
    return (
        "<p>A pureScale cluster gives each member a local buffer pool (LBP) and keeps the "
        "pages members change in a group buffer pool (GBP) at the caching facility. A write "
        "invalidates the other members' copies of its page; their next reference asks the GBP, "
        "and a GBP miss reads from disk. The curves below come from synthetic traces "
        "simulated through every combination of member count, write share, LBP and GBP size "
        "(docs/bpsim.md gives the model, what it leaves out, and its checks against a "
        "brute-force simulator and a formula). Ratios are IBM's: LBP hit ratio = pages found "
        "in the LBP, valid or invalid, over logical reads; GBP hit ratio = (GBP logical reads "
        "− GBP physical reads) / GBP logical reads.</p>"
    )


def curves_figure(frame: pd.DataFrame, metric: str) -> Figure:
    """``metric`` against the GBP's size: a panel per (write share, members), a line per
    LBP size."""
    shares = sorted(frame["write_share"].unique())
    members = sorted(frame["members"].unique())
    lbps = sorted(frame["lbp_pages"].unique())
    colours = plots.palette_for([str(x) for x in lbps])
    with plots.style():
        fig, axes = plt.subplots(
            len(shares),
            len(members),
            sharex=True,
            sharey=True,
            figsize=(3.3 * len(members), 2.5 * len(shares)),
            squeeze=False,
            layout="constrained",
        )
        for i, w in enumerate(shares):
            for j, m in enumerate(members):
                ax = axes[i][j]
                cell = frame[(frame["write_share"] == w) & (frame["members"] == m)]
                for lbp in lbps:
                    line = cell[cell["lbp_pages"] == lbp].sort_values("gbp_pages")
                    ax.plot(
                        line["gbp_pages"],
                        line[metric],
                        marker="o",
                        markersize=3,
                        color=colours[str(lbp)],
                        label=f"{lbp:,}",
                    )
                rule = shared_curves.rule_of_thumb(int(m))
                if rule is not None:
                    for lbp in lbps:
                        ax.axvline(rule * m * lbp, color=colours[str(lbp)], ls=":", lw=1)
                ax.set_xscale("log")
                if metric == "physical_reads":
                    ax.yaxis.set_major_formatter(plots.short_number)
                ax.set_title(f"{m} member{'s' if m > 1 else ''}, writes {w:g}")
                if i == len(shares) - 1:
                    ax.set_xlabel("GBP pages")
                if j == 0:
                    ax.set_ylabel(metric.replace("_", " "))
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, title="LBP pages", loc="outside right upper")
    return fig


def knees_frame(frame: pd.DataFrame) -> pd.DataFrame:
    return shared_curves.knees(frame)


def knees_html(frame: pd.DataFrame) -> str:
    """The GBP knee per (members, write share, LBP) beside the slides' rule."""
    k = knees_frame(frame)
    titles = (
        "Members",
        "Write share",
        "LBP pages",
        "GBP knee (pages)",
        "of the LBPs' sum",
        "slides' rule",
        "physical reads at the largest GBP",
    )
    head = "".join(f"<th>{h}</th>" for h in titles)
    body = []
    for r in k.itertuples():
        knee = (
            "none below the largest"
            if math.isnan(r.gbp_knee_pages)
            else f"{int(r.gbp_knee_pages):,}"
        )
        body.append(
            f"<tr><td>{r.members}</td><td>{r.write_share:g}</td><td>{r.lbp_pages:,}</td>"
            f"<td>{knee}</td><td>{_pct(r.gbp_knee_share)}</td><td>{_pct(r.rule_share)}</td>"
            f"<td>{int(r.reads_at_largest):,}</td></tr>"
        )
    return (
        "<p>The <b>GBP knee</b> is the smallest GBP whose cluster physical reads are within "
        f"{shared_curves.KNEE_SHARE:.0%} of those at the largest GBP simulated. The slides "
        "(reference 004) size the GBP at about 35–40 % of the members' LBPs for three or "
        "more members and 40–50 % for two (the dotted lines in the figures: the rule's middle "
        "for each LBP size), at least 25 %, less for read-heavy work.</p>"
        f'<table class="tl-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}'
        "</tbody></table>"
    )


def _knee_reading(k: pd.DataFrame) -> str:
    """What the knees show against the rule, in sentences computed from them."""
    multi = k[k["members"] > 1]
    if multi.empty:
        return ""
    parts = []
    for w, g in multi.groupby("write_share"):
        found = g.dropna(subset=["gbp_knee_pages"])
        if found.empty:
            parts.append(
                f"at a write share of {w:g} no GBP below the largest simulated was "
                "within reach of its reads"
            )
            continue
        pages = sorted({int(x) for x in found["gbp_knee_pages"]})
        same = len(pages) == 1 and len(found) == len(g)
        share = found["gbp_knee_share"]
        where = "at" if same else "from"
        knee = f"{pages[0]:,} pages" if same else f"{pages[0]:,} to {pages[-1]:,} pages"
        parts.append(
            f"at a write share of {w:g} the knee lay {where} {knee} "
            f"({share.min():.0%}–{share.max():.0%} of the LBPs' sum"
            + (", the same for every LBP size and member count" if same else "")
            + ")"
        )
    return "; ".join(parts) + "."


def reading_html(frame: pd.DataFrame) -> str:
    """What the curves show beside what the slides predict."""
    k = knees_frame(frame)
    text = [
        "<p><b>The GBP.</b> With more than one member, " + _knee_reading(k) + " "
        "Where the knee does not follow the LBPs, the GBP is sized by the set of pages the "
        "trace changes, not by the LBPs: in this model a changed page stays in the GBP "
        "until a full GBP casts it out, so a GBP larger than the changed working set adds "
        "nothing, and one smaller than it sends re-reads of changed pages to disk. A real "
        "GBP's castout writes pages back as SOFTMAX asks, which the model leaves out.</p>"
    ]
    top = frame[frame["gbp_pages"] == frame["gbp_pages"].max()]
    grows = []
    for (m, w), g in top[(top["members"] > 1) & (top["write_share"] > 0)].groupby(
        ["members", "write_share"]
    ):
        g = g.sort_values("lbp_pages")
        inv = g["invalid_ratio"].to_numpy()
        valid = g["valid_lbp_ratio"].to_numpy()
        if len(g) > 1 and np.all(np.diff(inv) >= 0) and inv[-1] > inv[0]:
            grows.append(
                f"{m} members at writes {w:g}: valid {valid[0]:.0%} → {valid[-1]:.0%}, invalid "
                f"{inv[0]:.1%} → {inv[-1]:.1%}"
            )
    if grows:
        text.append(
            "<p><b>The LBP.</b> The slides: a larger LBP raises the LBP hit ratio but does not "
            "lower the invalidated pages. Borne out here: from the smallest LBP to the "
            "largest (at the largest GBP), the references a valid copy served grew while "
            "those that found their copy invalid grew too — "
            + "; ".join(grows)
            + ". IBM's LBP hit ratio counts both, so it rises with the LBP even where the "
            "extra memory buys invalidations.</p>"
        )
    else:
        text.append(
            "<p><b>The LBP.</b> The slides: a larger LBP does not lower the invalidated "
            "pages. Here no member count and write share showed invalidations growing with "
            "the LBP.</p>"
        )
    return "".join(text)


def lbp_html(frame: pd.DataFrame) -> str:
    """Per LBP size, at the largest GBP: references a valid copy served, and those that found
    their copy invalid."""
    top = frame[frame["gbp_pages"] == frame["gbp_pages"].max()]
    lbps = sorted(top["lbp_pages"].unique())
    head = "<th>Members</th><th>Write share</th>" + "".join(
        f"<th>LBP {x:,}: valid / invalid</th>" for x in lbps
    )
    body = []
    for (m, w), g in top.groupby(["members", "write_share"]):
        cells = "".join(
            f"<td>{r.valid_lbp_ratio:.1%} / {r.invalid_ratio:.1%}</td>"
            for r in g.sort_values("lbp_pages").itertuples()
        )
        body.append(f"<tr><td>{m}</td><td>{w:g}</td>{cells}</tr>")
    return (
        f'<table class="tl-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}'
        "</tbody></table>"
    )


def figures_html(frame: pd.DataFrame) -> str:
    out = []
    for metric, caption in (
        (
            "gbp_hit_ratio",
            "GBP hit ratio against the GBP's size; dotted: the slides' GBP size for each LBP size",
        ),
        ("physical_reads", "Cluster physical reads against the GBP's size"),
    ):
        fig = curves_figure(frame, metric)
        out.append(plots.figure_html(fig, metric.replace("_", " "), caption))
        plt.close(fig)
    if frame["members"].eq(1).any():
        out.append(
            note(
                "With one member nothing is invalidated: its LBP is a single pool, "
                "and the GBP only keeps the pages the member changed, a second-level "
                "cache for them."
            )
        )
    return "".join(out)
