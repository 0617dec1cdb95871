"""What the figures mark beside the measurements: buffer pools in bytes as well as pages, the
table's size on buffer-pool axes, and where an index curve crosses the scan curve on a
selectivity axis. Everything comes from the rows: ``page_size_bytes`` (or the page-size
knob) and ``data_bytes`` (the table and its indexes, as the engine reports them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tunelab.analysis import figures
from tunelab.analysis.stats import crossings
from tunelab.report.data import ReportData, order_key
from tunelab.report.labels import binary_unit, fmt, fmt_bytes, fmt_selectivity_percent

POOL_COLUMNS = ("knob_buffer_pool", "applied_buffer_pool")
PAGE_COLUMNS = ("page_size_bytes", "applied_page_size", "knob_page_size")
SELECTIVITY = "wl_selectivity"
INDEX = "knob_index"
SCAN = "none"
CROSS_METRIC = "elapsed_s"


def is_pool(column: str) -> bool:
    """A buffer-pool column: its values are pages of the row's page size."""
    return column in POOL_COLUMNS


def row_page_size(frame: pd.DataFrame) -> pd.Series:
    """Per row: the page size in bytes (as applied where recorded, else as asked)."""
    out = pd.Series(np.nan, index=frame.index, dtype=float)
    for col in PAGE_COLUMNS:
        if col in frame:
            out = out.fillna(pd.to_numeric(frame[col], errors="coerce"))
    return out


def page_sizes(frame: pd.DataFrame) -> list[int]:
    """The distinct page sizes of the rows, ascending."""
    return sorted({int(v) for v in row_page_size(frame).dropna() if v > 0})


def pool_unit(pages: Sequence[float], page: int) -> tuple[str, int]:
    """One binary unit for a pool axis or column: the one of its largest size."""
    biggest = max((float(p) for p in pages if p == p), default=0.0) * page
    return binary_unit(biggest) if biggest >= 1024 else ("KiB", 1024)


def pool_bytes(data: ReportData, points: pd.DataFrame, column: str) -> pd.Series | None:
    """Per point row of ``points``: the pool's size in bytes; None when no page size is
    known or when it varies without being a point column (pages alone say too little)."""
    pages = pd.to_numeric(points[column], errors="coerce")
    rows = data.results
    for col in PAGE_COLUMNS[1:]:
        if col in points and points[col].notna().all():
            return pages * pd.to_numeric(points[col], errors="coerce")
    sizes = page_sizes(rows)
    if len(sizes) != 1:
        return None
    return pages * sizes[0]


@dataclass(frozen=True)
class TableSize:
    """The table with its indexes at one page size: the median of the rows' data_bytes."""

    page_size: int
    nbytes: int

    @property
    def pages(self) -> int:
        return math.ceil(self.nbytes / self.page_size)

    def text(self, unit: tuple[str, int] | None = None) -> str:
        return f"table + indexes: {fmt(self.pages)} pages / {fmt_bytes(self.nbytes, unit)}"


def table_sizes(frame: pd.DataFrame) -> list[TableSize]:
    """One per page size of the rows; empty when the rows carry no data_bytes."""
    if "data_bytes" not in frame:
        return []
    nbytes = pd.to_numeric(frame["data_bytes"], errors="coerce")
    page = row_page_size(frame)
    known = nbytes.notna() & (nbytes > 0) & page.notna() & (page > 0)
    out = []
    for size, group in nbytes[known].groupby(page[known]):
        out.append(TableSize(int(size), int(round(float(group.median())))))
    return out


# -- index against scan on a selectivity axis ---------------------------------------------------
def fmt_selectivity(value: float) -> str:
    return fmt_selectivity_percent(value)


@dataclass
class Crossover:
    """One index kind against the scan, at one combination of the other point columns."""

    group: str  # e.g. "cold", "" when nothing else varies
    index: str
    at: list[float] = field(default_factory=list)  # selectivities where the curves meet
    faster_first: str = ""  # "index" or "scan": which is faster at the lowest selectivity
    low: float = math.nan
    high: float = math.nan

    def text(self) -> str:
        who = " · ".join(t for t in (self.index, self.group) if t)
        if self.at:
            where = " and ".join(f"selectivity {fmt_selectivity(v)}" for v in self.at)
            return f"{who}: at {where}"
        span = f"{fmt_selectivity(self.low)} and {fmt_selectivity(self.high)}"
        return f"{who}: none between {span} (the {self.faster_first} is faster throughout)"


def crossover_applies(data: ReportData, x: str) -> bool:
    frame = data.results
    if x != SELECTIVITY or INDEX not in data.point_columns or CROSS_METRIC not in frame:
        return False
    kinds = set(frame[INDEX].dropna().astype(str))
    return SCAN in kinds and len(kinds) > 1


def crossovers(data: ReportData, x: str = SELECTIVITY, log: bool = True) -> list[Crossover]:
    """Per index kind and per combination of the other point columns (cache state, ...):
    where its response-time medians cross the scan's."""
    if not crossover_applies(data, x):
        return []
    frame = figures.at_one_speed(data.results).copy()  # the medians the figures draw
    frame[CROSS_METRIC] = pd.to_numeric(frame[CROSS_METRIC], errors="coerce")
    others = [c for c in data.point_columns if c not in (x, INDEX)]
    medians = frame.groupby([*others, INDEX, x], dropna=False)[CROSS_METRIC].median()
    medians = medians.reset_index()
    keys = [order_key(data.orders, c) for c in others]
    combos = medians[others].drop_duplicates() if others else pd.DataFrame(index=[0])
    tuples = sorted(
        (tuple(r) for r in combos.itertuples(index=False)),
        key=lambda t: tuple(k(v) for k, v in zip(keys, t, strict=True)),
    )
    kinds = [k for k in data.orders.get(INDEX, sorted(set(medians[INDEX]))) if k != SCAN]
    out = []
    for combo in tuples:
        sel = np.ones(len(medians), dtype=bool)
        for col, value in zip(others, combo, strict=True):
            sel &= (medians[col] == value).to_numpy() | (medians[col].isna() & (value != value))
        part = medians[sel]
        scan = part[part[INDEX] == SCAN].set_index(x)[CROSS_METRIC]
        for kind in kinds:
            idx = part[part[INDEX] == kind].set_index(x)[CROSS_METRIC]
            common = sorted(set(scan.dropna().index) & set(idx.dropna().index))
            if len(common) < 2:
                continue
            a, b = idx.loc[common].to_numpy(float), scan.loc[common].to_numpy(float)
            group = " · ".join(fmt(v) for v in combo)
            out.append(
                Crossover(
                    group=group,
                    index=str(kind) if len(kinds) > 1 else "",
                    at=crossings(common, a, b, log),
                    faster_first="index" if a[0] < b[0] else "scan",
                    low=float(common[0]),
                    high=float(common[-1]),
                )
            )
    return out


def crossover_caption(items: Sequence[Crossover], log: bool = True) -> str:
    if not items:
        return ""
    how = "log" if log else "linear"
    return (
        "Crossover of index and scan (where their response-time medians meet, by linear "
        f"interpolation between neighbouring medians on the {how} selectivity axis): "
        + "; ".join(c.text() for c in items)
        + "."
    )
