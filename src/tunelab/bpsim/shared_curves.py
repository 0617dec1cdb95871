"""Curves for shared-data pools: the cluster's GBP hit ratio and physical reads against the
GBP's size, for several LBP sizes, numbers of members and write shares
(``tunelab.bpsim.members`` simulates each point), and the sizing rules of thumb of IBM's
pureScale monitoring and tuning slides (reference 004) beside what the curves show.

The slides' rules, as the lab reads them:

- GBP size: for 3 or more members about 35-40 % of the sum of the members' LBPs (their
  example: 4 members of 1 M pages each, a GBP of ~1.5 M pages, 37.5 %); for 2 members about
  40-50 %; 25 % at least even for read-heavy work; less the higher the read share, since the
  GBP holds only changed pages. ``RULE_SHARE`` takes the middle of each range.
- LBP size: a larger LBP raises the LBP hit ratio, but it "won't decrease the number of
  invalidated pages": where other members' writes invalidate copies, the references a valid
  copy serves stop growing with the LBP while those that find their copy invalid do not
  fall.

What the curves give for each (members, write share, LBP): the *GBP knee*, the smallest GBP
whose cluster physical reads are within ``KNEE_SHARE`` of those at the largest GBP simulated,
as a share of the LBPs' sum, beside the rule's share; and per LBP size the share of
references a valid copy served and the share that found their copy invalid.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence

import pandas as pd

from tunelab.bpsim.members import SharedPools
from tunelab.bpsim.stackdist import dense_ids

RULE_SHARE = {2: 0.45, 3: 0.375}  # members (3: three or more) -> GBP / sum of LBPs
RULE_FLOOR = 0.25
KNEE_SHARE = 0.05
COLUMNS = [
    "members",
    "write_share",
    "lbp_pages",
    "gbp_pages",
    "references",
    "lbp_hit_ratio",
    "valid_lbp_ratio",
    "invalid_ratio",
    "gbp_hit_ratio",
    "hit_ratio",
    "physical_reads",
    "castouts",
]


def rule_of_thumb(members: int) -> float | None:
    """The slides' GBP size as a share of the sum of the LBPs; None for one member (the
    slides give no rule: nothing is invalidated)."""
    if members < 2:
        return None
    return RULE_SHARE[min(members, 3)]


def _pieces(trace) -> tuple[int, Iterable[pd.DataFrame]]:
    """(pages, pieces with page ids 0..pages-1) of a trace given whole (any page numbers)
    or in pieces (``shared_trace_pieces``: ``attrs['pages']``)."""
    if isinstance(trace, pd.DataFrame):
        ids, distinct = dense_ids(trace["page"].to_numpy())
        return max(distinct, 1), [trace.assign(page=ids)]
    pieces = iter(trace)
    first = next(pieces)
    return int(first.attrs["pages"]), itertools.chain([first], pieces)


def curves(
    trace_for: Callable[[int, float], object],
    members: Sequence[int],
    write_shares: Sequence[float],
    lbp_sizes: Sequence[int],
    gbp_sizes: Sequence[int],
    policy: str = "lru",
) -> pd.DataFrame:
    """One row per (members, write share, LBP, GBP): the cluster's counters and ratios.
    ``trace_for(members, write_share)`` gives the trace for that pair, whole or in pieces
    (made once each; every pool size is fed each piece in turn, so memory does not grow with
    the trace's length)."""
    rows = []
    for m in members:
        for share in write_shares:
            pages, pieces = _pieces(trace_for(m, share))
            pools = {
                (lbp, gbp): SharedPools(m, pages, int(lbp), int(gbp), policy)
                for lbp in lbp_sizes
                for gbp in gbp_sizes
            }
            for piece in pieces:
                columns = [piece[name].to_numpy() for name in ("member", "page", "write")]
                for pool in pools.values():
                    pool.feed(*columns)
            for (lbp, gbp), pool in pools.items():
                c = pool.result().cluster
                refs = c["pool_data_l_reads"]
                valid = c["pool_data_lbp_pages_found"] - c["pool_data_gbp_invalid_pages"]
                rows.append(
                    {
                        "members": m,
                        "write_share": share,
                        "lbp_pages": int(lbp),
                        "gbp_pages": int(gbp),
                        "references": refs,
                        "lbp_hit_ratio": c["lbp_hit_ratio"],
                        "valid_lbp_ratio": valid / refs if refs else math.nan,
                        "invalid_ratio": c["pool_data_gbp_invalid_pages"] / refs
                        if refs
                        else math.nan,
                        "gbp_hit_ratio": c["gbp_hit_ratio"],
                        "hit_ratio": c["hit_ratio"],
                        "physical_reads": c["pool_data_p_reads"],
                        "castouts": c["castouts"],
                    }
                )
    return pd.DataFrame(rows, columns=COLUMNS)


def knees(frame: pd.DataFrame, share: float = KNEE_SHARE) -> pd.DataFrame:
    """Per (members, write share, LBP): the GBP knee in pages and as a share of the LBPs'
    sum, the rule of thumb's share, and the physical reads at the knee and at the largest GBP.
    The knee is NaN where even the largest GBP is not flat yet (no larger size was simulated
    to show it)."""
    out = []
    for (m, w, lbp), g in frame.groupby(["members", "write_share", "lbp_pages"], sort=True):
        g = g.sort_values("gbp_pages")
        floor = float(g["physical_reads"].iloc[-1])
        flat = g[g["physical_reads"] <= floor * (1 + share)]
        knee = int(flat["gbp_pages"].iloc[0])
        found = knee < int(g["gbp_pages"].iloc[-1])  # a size below the largest is as good
        out.append(
            {
                "members": m,
                "write_share": w,
                "lbp_pages": lbp,
                "gbp_knee_pages": knee if found else math.nan,
                "gbp_knee_share": knee / (m * lbp) if found else math.nan,
                "rule_share": rule_of_thumb(int(m)),
                "reads_at_knee": float(flat["physical_reads"].iloc[0]),
                "reads_at_largest": floor,
            }
        )
    return pd.DataFrame(out)
