"""One experiment on every engine that ran it: ``reports/engines/<sweep>.html``, and the
claim × engine matrix the index leads with.

Everything comes from what the runs stored: each engine's rows
(``<results>/<engine>/<sweep>.csv``), its claims' verdicts (``<reports>/<engine>/<sweep>
.verdicts.json``, written by ``tunelab check``) and its report page. Nothing is measured
again, so a page can compare an engine run today with one run last week: the page then
says when and where each engine's rows were measured, and rows from different hosts are
compared in shape only (each engine's time against its own first point).

Engines answer the same question differently (a bitmap heap scan, a clustered primary key,
a scan-resistant LRU): the page puts their curves on shared axes, their verdicts, plans and
notes side by side, and lists the settings they did not share (pool in bytes and as a share
of the table, page size, access and fetch mode), since those explain as many differences.

Engines also set different knobs for the same question (InnoDB's own read-ahead beside the
kernel's): a column that one engine's rows have and another's lack is no setting of the
other, whose rows then stand for every value of it (drawn in each panel of it).
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter, NullLocator

from tunelab import engines
from tunelab.analysis import figures, stats
from tunelab.analysis.claim_verdict import CANNOT_RUN, css_class, word_of
from tunelab.host import atomic
from tunelab.report import contexts, evidence, plots, sources
from tunelab.report.data import ReportData, ReportInputError, load, order_key
from tunelab.report.fragments import unique
from tunelab.report.labels import figures_text, fmt, fmt_bytes, fmt_percent, label
from tunelab.report.methods import methods_text
from tunelab.store.results import KNOB_PREFIX, WORKLOAD_PREFIX
from tunelab.store.results import read_csv as read_rows_csv
from tunelab.sweep import checks, claimspec, findings, loading

PAGES_DIR = "engines"  # beside the index
METRIC = "elapsed_s"
POOL_BYTES = "pool_bytes"  # derived: the pool in bytes, so that engines share the axis
MAX_PANELS = 6

PAGE_CSS = """
body { background: #f4f5f7; margin: 0; font-family: -apple-system, "Segoe UI", Roboto,
  "Helvetica Neue", "DejaVu Sans", Arial, sans-serif; color: #1f2328; font-size: 15px;
  line-height: 1.5; }
main { max-width: 1180px; margin: 24px auto 64px; padding: 28px 44px 48px; background: #fff;
  border-radius: 10px; box-shadow: 0 1px 3px rgba(0,0,0,.07), 0 6px 24px rgba(0,0,0,.04); }
h1 { font-size: 1.9rem; margin: 0 0 .2rem; }
h2 { font-size: 1.25rem; margin: 1.6rem 0 .4rem; }
a { color: #0b5cad; }
.tl-muted { color: #57606a; }
"""
# The claim tables, here and in the index.
GRID_CSS = """
table.tl-grid { border-collapse: collapse; font-size: 13.5px; margin: 10px 0;
  font-variant-numeric: tabular-nums; }
table.tl-grid th { text-align: left; font-weight: 600; color: #444c56; background: #f6f8fa;
  border-bottom: 1px solid #d8dce1; padding: 6px 10px; }
table.tl-grid td { border-bottom: 1px solid #eceef1; padding: 6px 10px; vertical-align: top; }
.tl-verdict { display: inline-block; font-size: 12px; font-weight: 600; padding: 0 7px;
  border-radius: 9px; margin: 0 4px 3px 0; white-space: nowrap; }
.tl-reproduced, .tl-holds { background: #dafbe1; color: #116329; }
.tl-not-reproduced, .tl-does-not-hold { background: #ffebe9; color: #a40e26; }
.tl-undecided { background: #fff8c5; color: #7d4e00; }
.tl-cannot-run { background: #eaeef2; color: #424a53; }
.tl-explains { color: #57606a; font-size: 12.5px; padding-left: 12px; display: block; }
.tl-cell a { text-decoration: none; }
.tl-ratio { font-size: 12px; color: #57606a; white-space: nowrap; }
tr.tl-sweep-row td { background: #f6f8fa; padding-top: 10px; }
"""
PAGE_CSS += (
    GRID_CSS
    + """
.tl-diff { background: #fff8c5; padding: 8px 12px; border-radius: 6px; font-size: 14px; }
.tl-side { display: grid; gap: 16px; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); }
.tl-side > div { font-size: 13.5px; }
figure.tl-figure { margin: 12px 0; } figure.tl-figure img { max-width: 100%; }
figcaption { font-size: 13px; color: #57606a; max-width: 60rem; }
"""
)


@dataclass
class EngineRun:
    """One engine's stored rows of a sweep, its verdicts and its report page."""

    engine: str
    data: ReportData
    verdicts: list[dict[str, Any]]
    report: Path | None

    @property
    def hosts(self) -> list[str]:
        return unique(self.data.results, "host_name")


@dataclass
class Experiment:
    sweep: str
    doc: dict[str, Any]
    runs: list[EngineRun]
    missing: dict[str, str] = field(default_factory=dict)  # engine -> why it has no rows
    sweep_file: str = ""

    @property
    def claims(self) -> list[dict[str, Any]]:
        """The claims the sweep is judged by (its findings, their explanations, its own)."""
        return claimspec.sweep_claims(self.doc, self.sweep_file, None)[0]

    @property
    def shape_only(self) -> bool:
        """Rows from more than one host: times of different machines are not compared."""
        return len({h for r in self.runs for h in r.hosts}) > 1


# -- gathering what the runs stored ---------------------------------------------------------
def _sweep_doc(frame: pd.DataFrame, sweep: str, sweeps_dir: Path | None) -> tuple[dict, Path]:
    """The sweep file the rows name (relative to the checkout), else ``sweeps_dir``'s."""
    named = [Path(p) for p in unique(frame, "sweep_file")]
    candidates = named + ([Path(sweeps_dir) / f"{sweep}.yaml"] if sweeps_dir else [])
    for path in candidates:
        if path.is_file():
            return loading.load_yaml(path)[0] or {"name": sweep}, path
    return {"name": sweep}, candidates[0] if candidates else Path(f"{sweep}.yaml")


def _verdicts(path: Path) -> list[dict[str, Any]]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    for entry in doc.values() if isinstance(doc, dict) else []:
        if isinstance(entry, dict) and isinstance(entry.get("verdicts"), list):
            return entry["verdicts"]
    return []


def why_missing(doc: dict[str, Any], engine: str) -> str:
    """Why an engine has no rows of a sweep: it cannot vary a swept knob (as its knobs are
    declared, whether or not the sweep lists it), the sweep is not for it, or it was not run
    here."""
    listed = checks.engines_of(doc)
    if engine not in listed:
        return checks.knob_refusal(doc, engine) or f"the sweep runs on {', '.join(listed)} only"
    reason = checks.cannot_vary(doc, engine) or checks.host_refuses(doc, engine)
    if reason:
        return reason
    return f"not run yet: ./lab run --config engine={engine}"


def gather(
    results_dir: Path, reports_dir: Path, sweeps_dir: Path | None = None
) -> list[Experiment]:
    """Every sweep with stored rows of at least one engine, each engine's run of it."""
    results_dir, reports_dir = Path(results_dir), Path(reports_dir)
    found: dict[str, list[tuple[str, Path]]] = {}
    for engine in engines.names():
        for csv in sorted((results_dir / engine).glob("*.csv")):
            found.setdefault(csv.stem, []).append((engine, csv))
    out = []
    for sweep, items in sorted(found.items()):
        runs, doc = [], None
        for engine, csv in items:
            try:
                frame = read_rows_csv(csv, nrows=1)
                doc, path = _sweep_doc(frame, sweep, sweeps_dir)
                if not path.is_file():
                    continue
                data = load(csv, path, sweep)
            except (ReportInputError, pd.errors.ParserError, pd.errors.EmptyDataError, OSError):
                continue  # a file no report could read: the engine's own page says why
            page = reports_dir / engine / f"{sweep}.html"
            verdicts = _verdicts(reports_dir / engine / f"{sweep}.verdicts.json")
            runs.append(EngineRun(engine, data, verdicts, page if page.is_file() else None))
        if runs and doc is not None:
            have = {r.engine for r in runs}
            missing = {e: why_missing(doc, e) for e in engines.names() if e not in have}
            out.append(Experiment(sweep, doc, runs, missing, str(path)))
    return out


def sweeps_not_run(experiments: list[Experiment]) -> list[Experiment]:
    """The sweeps with findings that none of ``experiments`` is, in the findings files that
    judge theirs (``findings.path_for``), each with why every engine has no rows of it: a
    finding never vanishes from the index because no engine here could run it."""
    have = {x.sweep for x in experiments}
    books: dict[Path, Path] = {}  # findings file -> the folder of the sweeps it judges
    for x in experiments:
        if book := findings.path_for(x.sweep_file):
            books.setdefault(book, Path(x.sweep_file).resolve().parent)
    out = []
    for book, folder in books.items():
        try:
            entries = findings.load(book).entries
        except findings.FindingsError:
            continue  # the verdicts of its sweeps say what is wrong with it
        for sweep in dict.fromkeys(str(f["sweep"]) for f in entries):
            path = folder / f"{sweep}.yaml"
            doc = loading.load_yaml(path)[0] if sweep not in have and path.is_file() else None
            if isinstance(doc, dict):
                have.add(sweep)
                missing = {e: why_missing(doc, e) for e in engines.names()}
                out.append(Experiment(sweep, doc, [], missing, str(path)))
    return sorted(out, key=lambda x: x.sweep)


# -- the shared axes ------------------------------------------------------------------------
def main_x(exp: Experiment) -> str | None:
    """The dimension the sweep asks about: the ``along`` of its first trend or crossover
    claim, else the first swept dimension of its first engine; a pool as bytes."""
    x = None
    for claim in exp.claims:
        if isinstance(claim, dict) and claim.get("along"):
            x = str(claim["along"])
            break
    dims = list(dict.fromkeys(d for r in exp.runs for d in r.data.dims))
    # Of the dimensions, the one the most engines have: another's own knob draws it alone.
    shared = sorted(dims, key=lambda d: -sum(d in r.data.dims for r in exp.runs))
    col = next(
        (c for c in (f"{KNOB_PREFIX}{x}", f"{WORKLOAD_PREFIX}{x}") if x and c in dims),
        shared[0] if shared else None,
    )
    return POOL_BYTES if col == f"{KNOB_PREFIX}buffer_pool" else col


def with_pool_bytes(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with ``pool_bytes``: the pool as applied (pages) times the page size."""
    frame = frame.copy()  # one block: rows built column by column warn on every assign
    pages = pd.to_numeric(frame.get("applied_buffer_pool"), errors="coerce")
    size = pd.to_numeric(frame.get("page_size_bytes"), errors="coerce")
    if isinstance(pages, pd.Series) and isinstance(size, pd.Series):
        return frame.assign(**{POOL_BYTES: pages * size})
    return frame.assign(**{POOL_BYTES: np.nan})


def panel_columns(exp: Experiment, x: str) -> list[str]:
    """The other columns that separate points (cache, workload, index, ...), not those that
    only follow ``x`` (a pool given in bytes is another page count at each page size). An
    engine whose rows lack ``x`` is not drawn, and its columns make no panels."""
    cols: list[str] = []
    for run in exp.runs:
        frame = with_pool_bytes(run.data.results)
        if x not in frame:
            continue
        for c in run.data.point_columns:
            if c in cols or c == x or (x == POOL_BYTES and c == f"{KNOB_PREFIX}buffer_pool"):
                continue
            if frame.groupby(x, dropna=False)[c].nunique(dropna=False).max() <= 1:
                continue
            cols.append(c)
    return cols


NOT_SET = object()  # a panel's value of a column that no engine drawn in it has


def _agree(a: dict, b: dict) -> bool:
    return all(str(a[c]) == str(b[c]) for c in a.keys() & b.keys())


def _panels(exp: Experiment, cols: list[str]) -> list[tuple]:
    """The panels: each engine's combinations of ``cols``, joined on the columns the engines
    share (a column an engine's rows lack is no setting of it); a combination no other
    engine's agrees with is a panel of its own."""
    keys: list[dict] = [{}]
    for run in exp.runs:
        present = [c for c in cols if c in run.data.results]
        combos = run.data.results[present].drop_duplicates() if present else pd.DataFrame()
        own = [
            dict(zip(present, t, strict=True)) for t in combos.itertuples(index=False, name=None)
        ] or [{}]
        keys = (
            [{**k, **o} for k in keys for o in own if _agree(k, o)]
            + [k for k in keys if not any(_agree(k, o) for o in own)]
            + [o for o in own if not any(_agree(k, o) for k in keys)]
        )
    tuples = dict.fromkeys(tuple(k.get(c, NOT_SET) for c in cols) for k in keys)
    orders = {c: v for r in reversed(exp.runs) for c, v in r.data.orders.items()}
    sort = [order_key(orders, c) for c in cols]
    return sorted(
        tuples,
        key=lambda t: tuple(
            (0,) if v is NOT_SET else (1, k(v)) for k, v in zip(sort, t, strict=True)
        ),
    )


def curve(
    frame: pd.DataFrame, x: str, metric: str = METRIC, orders: dict | None = None
) -> pd.DataFrame:
    """Per value of ``x``: the median of ``metric`` and its order-statistic interval (a
    point's figure, ``analysis.figures``, for the rows ``_panel_rows`` gives) and that
    interval's level; numbers ascending, categories in the sweep's order (``orders``, as
    ``ReportData.orders``)."""
    out = []
    for value, g in frame.groupby(x, sort=False):
        values = pd.to_numeric(g[metric], errors="coerce").dropna().to_numpy()
        if values.size == 0:
            continue
        iv = stats.median_interval(values)
        out.append(
            {
                "x": value,
                "median": iv.median,
                "low": iv.low,
                "high": iv.high,
                "coverage": iv.coverage,
            }
        )
    table = pd.DataFrame(out, columns=["x", "median", "low", "high", "coverage"])
    numeric = pd.to_numeric(table["x"], errors="coerce")
    if numeric.notna().all():
        return table.assign(_n=numeric).sort_values("_n").drop(columns="_n").reset_index(drop=True)
    key = order_key(orders or {}, x)
    return table.iloc[sorted(range(len(table)), key=lambda i: key(table["x"].iloc[i]))].reset_index(
        drop=True
    )


def interval_levels(exp: Experiment) -> str:
    """The levels the figures' intervals have: "96.9 %", or each where points' repetitions
    differ ("93.8 % / 96.9 %")."""
    found = set()
    for run in exp.runs:
        frame = run.data.results
        sizes = frame.groupby("point_id").size() if "point_id" in frame else [len(frame)]
        found |= {stats.coverage(int(n), stats.order_ranks(int(n))[0]) for n in set(sizes)}
    return " / ".join(fmt_percent(c) for c in sorted(found)) or "an"


def _panel_rows(run: EngineRun, cols: list[str], key: tuple) -> pd.DataFrame:
    """The engine's rows of a panel, with the values of its points' figures (times at one CPU
    speed where its verdicts compare them so): a column its rows lack is no setting of it."""
    frame = with_pool_bytes(figures.at_one_speed(run.data.results))
    mask = pd.Series(True, index=frame.index)
    for c, v in zip(cols, key, strict=True):
        if c in frame and v is not NOT_SET:
            mask &= frame[c].astype(str) == str(v)
    return frame[mask]


def compared_column(exp: Experiment, cols: list[str]) -> str | None:
    """The column the sweep's first pair of sides differs in (``index`` for an index against
    a scan), when it is one of ``cols``: drawn as line styles in one panel, not as panels,
    so that each panel holds the comparison the claim makes."""
    for claim in exp.claims:
        a, b = (claim.get(k) if isinstance(claim, dict) else None for k in ("a", "b"))
        if isinstance(a, dict) and isinstance(b, dict):
            for key in a:
                for col in (f"{KNOB_PREFIX}{key}", f"{WORKLOAD_PREFIX}{key}"):
                    if col in cols and str(a[key]) != str(b.get(key)):
                        return col
    return None


STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "D", "^")  # with STYLES: categories drawn as points keep them apart


def _source_lines(ax: Any, exp: Experiment, x: str, panel: dict[str, Any]) -> None:
    """The source's crossovers on ``x`` (``sources.lines``) in the panels their context
    names (a cold crossover in the cold panel)."""
    if not exp.runs:
        return
    data = exp.runs[0].data
    for s in sources.lines(data, x):
        context = {sources.column(data.results, k): v for k, v in s.where.items()}
        if any(
            c in context and v is not NOT_SET and not claimspec.same(v, context[c])
            for c, v in panel.items()
        ):
            continue
        ax.axvline(s.x, color=plots.SOURCE_COLOR, ls=":", lw=1.6, zorder=2, gid=f"source|{s.x:.6g}")
        ax.annotate(
            s.text,
            (s.x, 0.98),
            xycoords=("data", "axes fraction"),
            xytext=(-3, 0),
            textcoords="offset points",
            rotation=90,
            ha="right",
            va="top",
            fontsize="x-small",
            color=plots.SOURCE_COLOR,
            bbox=plots.TEXT_BOX,
            zorder=6,
        )


def engines_figure(exp: Experiment, x: str, normalised: bool) -> Figure | None:
    """One panel per combination of the other point columns (the claim's compared column as
    line styles inside a panel), one colour per engine: medians with their intervals, or
    (``normalised``) each divided by its own median at its first value of ``x`` so that
    shapes compare where absolute times do not."""
    cols = panel_columns(exp, x)
    styled = compared_column(exp, cols)
    styles = (
        list(
            dict.fromkeys(
                str(v)
                for r in exp.runs
                if styled in r.data.results
                for v in sorted(r.data.results[styled].dropna().unique(), key=str)
            )
        )[: len(STYLES)]
        if styled
        else [None]
    )
    cols = [c for c in cols if c != styled]
    keys = _panels(exp, cols)[:MAX_PANELS] or [()]
    colours = plots.palette_for([r.engine for r in exp.runs])
    with plots.style():
        fig, axes = plots._figure(len(keys))
        drawn = False
        curves = _curves(exp.runs, styled, styles)
        categories = _categories(exp, x)
        for ax, key in zip(axes, keys, strict=True):
            xs_all: list[float] = []
            ys_all: list[float] = []
            for i, (run, (ls, value)) in enumerate(curves):
                rows = (
                    _panel_rows(run, cols, key)
                    if cols
                    else with_pool_bytes(figures.at_one_speed(run.data.results))
                )
                if value is not None:
                    rows = rows[rows[styled].astype(str) == value]
                if x not in rows or rows.empty:
                    continue
                c = curve(rows, x, orders=exp.runs[0].data.orders)
                if c.empty:
                    continue
                y, lo, hi = c["median"], c["low"], c["high"]
                if normalised:
                    base = float(c["median"].iloc[0])
                    y, lo, hi = y / base, lo / base, hi / base
                xv = pd.to_numeric(c["x"], errors="coerce")
                numeric = bool(xv.notna().all())
                # Categories: each curve beside the others at a category, never on them.
                dodge = (i - (len(curves) - 1) / 2) * min(0.5 / len(curves), 0.15)
                xs = xv if numeric else c["x"].astype(str).map(categories.index) + dodge
                name = run.engine if value is None else f"{run.engine} · {value}"
                # Categories (index types) are points: a line between them would read as a
                # trend from one to the next. Numbers are joined.
                ax.errorbar(
                    xs,
                    y,
                    yerr=[y - lo, hi - y],
                    color=colours[run.engine],
                    ls=STYLES[ls] if numeric else "none",
                    marker=MARKERS[ls],
                    capsize=3,
                    lw=1.6,
                    label=name,
                )
                drawn = True
                ys_all += [float(v) for v in hi] + [float(v) for v in lo]
                if xv.notna().all():
                    xs_all += list(xv)
            if xs_all:
                plots.set_x_scale(ax, xs_all)
            values = sorted(set(xs_all))
            if x != POOL_BYTES and 0 < len(values) <= 12:  # ticks at the values swept, in %
                at = ax.xaxis.get_transform().transform(np.asarray(values, float))
                texts = plots._thin_labels(list(at), [plots.value_text(x, v) for v in values])
                ax.set_xticks(values, texts)
                ax.xaxis.set_minor_locator(NullLocator())
            if xs_all:
                _source_lines(ax, exp, x, dict(zip(cols, key, strict=True)))
            if x == POOL_BYTES and xs_all:  # binary sizes: ticks at 64 KiB, 1 MiB, 16 MiB...
                lo, hi = math.log2(min(xs_all)), math.log2(max(xs_all))
                ax.set_xticks(
                    [2.0**k for k in range(math.floor(lo), math.ceil(hi) + 1) if k % 4 == 0]
                )
                ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: fmt_bytes(v)))
                ax.xaxis.set_minor_formatter(NullFormatter())
            if not xs_all:
                ax.set_xticks(range(len(categories)), [fmt(v) for v in categories])
                ax.set_xlim(-0.6, len(categories) - 0.4)
                plots._slant(ax, 20)  # categories: long names
            if not normalised and ys_all:
                plots._finish_y(ax, np.asarray(ys_all, dtype=float), METRIC)  # log past 100x
            ax.set_title(
                " · ".join(
                    f"{plots.axis_label(c).split(' (')[0]} {plots.value_text(c, v)}"
                    for c, v in zip(cols, key, strict=True)
                    if v is not NOT_SET
                )
            )
            ax.set_xlabel(_x_label(x))
            ax.grid(bool(xs_all), axis="x")  # no grid line through a category's points
            ax.set_ylabel("time ÷ own first point" if normalised else label(METRIC))
            if normalised:
                ax.axhline(1, color="#999", lw=0.8, ls=":")
        if not drawn:
            return None
        plots._legend(fig, axes, f"engine · {label(styled)}" if styled else "engine")
    return fig


def _categories(exp: Experiment, x: str) -> list[str]:
    """The values of a categorical ``x`` over every engine, in the sweep's order."""
    seen = [
        str(v) for r in exp.runs if x in r.data.results for v in r.data.results[x].dropna().unique()
    ]
    key = order_key(exp.runs[0].data.orders if exp.runs else {}, x)
    return sorted(dict.fromkeys(seen), key=key)


def _curves(runs: list[EngineRun], styled: str | None, styles: list) -> list[tuple]:
    """(engine, (line style, value of ``styled``)) per curve: one curve of an engine whose
    rows lack ``styled`` (no setting of it)."""
    return [
        (run, item)
        for run in runs
        for item in (enumerate(styles) if styled in run.data.results else [(0, None)])
    ]


def _x_label(x: str) -> str:
    return "buffer pool (bytes, as applied)" if x == POOL_BYTES else plots.axis_label(x)


# -- settings, claims, plans ----------------------------------------------------------------
def _values(frame: pd.DataFrame, col: str, as_bytes: bool = False) -> str:
    vals = sorted(set(pd.to_numeric(frame[col], errors="coerce").dropna())) if col in frame else []
    if not vals:
        return "—"
    shown = [fmt_bytes(v) if as_bytes else fmt(v) for v in vals]
    return shown[0] if len(shown) == 1 else f"{shown[0]} to {shown[-1]} ({len(shown)} values)"


def settings(run: EngineRun) -> dict[str, str]:
    """What the engine ran with, as its rows read it back."""
    frame = with_pool_bytes(run.data.results)
    pool = _values(frame, POOL_BYTES, as_bytes=True)
    data_bytes = pd.to_numeric(frame.get("data_bytes"), errors="coerce")
    if isinstance(data_bytes, pd.Series) and data_bytes.notna().any():
        share = frame[POOL_BYTES] / data_bytes
        lo, hi = share.min(), share.max()
        if np.isfinite(lo):
            shares = (
                fmt_percent(lo)
                if math.isclose(lo, hi, rel_tol=0.01)
                else (f"{fmt_percent(lo)} to {fmt_percent(hi)}")
            )
            pool += f" ({shares} of the table with its indexes)"
    return {
        "buffer pool": pool,
        "page size": _values(frame, "page_size_bytes", as_bytes=True),
        "access mode": ", ".join(unique(frame, "access_mode")) or "—",
        "fetch": ", ".join(unique(frame, f"{WORKLOAD_PREFIX}fetch")) or "—",
        "rows in the table": _values(frame, "dataset_rows"),
        "cache": ", ".join(unique(frame, "cache_requested")) or "—",
    }


def differences(exp: Experiment) -> list[str]:
    """The settings the engines did not share, one line each."""
    per = {r.engine: settings(r) for r in exp.runs}
    if len(per) < 2:
        return []
    lines = []
    for name in next(iter(per.values())):
        values = {e: s[name] for e, s in per.items()}
        if len(set(values.values())) > 1:
            lines.append(f"{name}: " + "; ".join(f"{e} {v}" for e, v in values.items()))
    return lines


def claim_names(exp: Experiment) -> list[str]:
    """The claims in the order the sweep is judged by (each finding, then its explanations),
    then any only the verdicts name."""
    names = [str(c.get("says")) for c in exp.claims]
    for run in exp.runs:
        names += [str(v.get("claim")) for v in run.verdicts]
    return list(dict.fromkeys(n for n in names if n and n != "None"))


def claim_rows(exp: Experiment) -> list[dict[str, Any]]:
    """Each claim's name, role and (for an explanation of one engine) that engine."""
    known = {str(c.get("says")): c for c in exp.claims}
    return [
        {
            "says": n,
            "role": known.get(n, {}).get("role", "claim"),
            "engine": known.get(n, {}).get("explains_engine"),
            "reported": known.get(n, {}).get("reported"),
            "source_ratio": known.get(n, {}).get("source_ratio"),
        }
        for n in claim_names(exp)
    ]


def verdict_of(run: EngineRun, claim: str) -> dict[str, Any] | None:
    return next((v for v in run.verdicts if str(v.get("claim")) == claim), None)


def verdict_cell(v: dict[str, Any] | None, href: str = "", missing: str = "") -> str:
    """A verdict in words with this engine's figure per context (its interval at the level
    the deciding look used), linking to the evidence; where the engine has no verdict, why:
    "cannot run here" with the reason, or not run yet."""
    esc = html.escape
    if v is None:
        if not missing:
            return '<span class="tl-muted">—</span>'
        if missing.startswith("not run yet"):
            return f'<span class="tl-muted" title="{esc(missing)}">not run</span>'
        badge = f'<span class="tl-verdict tl-cannot-run">{CANNOT_RUN}</span>'
        return f'<div class="tl-cell">{badge}<div class="tl-ratio">{esc(missing)}</div></div>'
    said = word_of(v)
    figures = figures_text(v)
    level = evidence.levels_text(v)  # the level the intervals really have
    if figures and level:
        figures.append(level)
    # how its contexts came out and a curve's shape, before the figures they summarise
    counted = [x for x in (contexts.tally(v), *contexts.shapes(v)) if x]
    ratio = "".join(f'<div class="tl-ratio">{esc(f)}</div>' for f in (*counted, *figures))
    badge = f'<span class="tl-verdict {css_class(said)}">{esc(said)}</span>'
    title = esc(evidence.sentence(v) or evidence.detail(v))
    inner = f'<a href="{esc(href)}" title="{title}">{badge}</a>' if href else badge
    return f'<div class="tl-cell">{inner}{ratio}</div>'


def _claim_label(row: dict[str, Any]) -> str:
    """A finding in words with its source's figure; an explanation marked as one."""
    esc = html.escape
    if row["role"] == "explains":
        about = f" ({row['engine']})" if row.get("engine") else ""
        return f'<span class="tl-explains">↳ why{esc(about)}: {esc(row["says"])}</span>'
    text = f"<strong>{esc(row['says'])}</strong>"
    if row.get("reported"):
        text += f'<div class="tl-ratio">source: {esc(str(row["reported"]))}</div>'
    return text


def _plans(exp: Experiment, x: str) -> str:
    """Each engine's access path per point, side by side (the plan each engine chose)."""
    if not any("access_path" in r.data.results for r in exp.runs):
        return ""
    cols = [
        c
        for c in dict.fromkeys(c for r in exp.runs for c in r.data.point_columns)
        if not (x == POOL_BYTES and c == f"{KNOB_PREFIX}buffer_pool")
    ]
    table: dict[tuple, dict[str, str]] = {}
    for run in exp.runs:
        frame = run.data.results
        if "access_path" not in frame:
            continue
        present = [c for c in cols if c in frame]
        groups = frame.groupby(present, dropna=False, sort=False) if present else [((), frame)]
        for key, g in groups:
            got = dict(zip(present, key if isinstance(key, tuple) else (key,), strict=True))
            key = tuple(str(got[c]) if c in got else "—" for c in cols)  # "—": not its knob
            paths = g["access_path"].dropna().astype(str)
            table.setdefault(key, {})[run.engine] = paths.mode().iloc[0] if not paths.empty else "—"
    if not table:
        return ""
    varied = any(len(set(v.values())) > 1 for v in table.values())
    head = "".join(f"<th>{html.escape(label(c))}</th>" for c in cols)
    head += "".join(f"<th>{html.escape(r.engine)}</th>" for r in exp.runs)
    body = ""
    for key in sorted(table, key=lambda k: tuple(_sort_key(v) for v in k)):
        cells = "".join(f"<td>{html.escape(fmt(_as_number(v)))}</td>" for v in key)
        cells += "".join(f"<td>{html.escape(table[key].get(r.engine, '—'))}</td>" for r in exp.runs)
        body += f"<tr>{cells}</tr>"
    lead = (
        "The engines chose different access paths for the same point: that is the lesson "
        "of this page."
        if varied
        else "Every engine used the same access path at each point."
    )
    return (
        f'<h2 id="plans">Plans</h2><p class="tl-muted">{lead}</p>'
        f'<table class="tl-grid"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def _as_number(v: str) -> Any:
    try:
        return float(v)
    except ValueError:
        return v


def _sort_key(v: str) -> tuple:
    n = _as_number(v)
    return (0, n, "") if isinstance(n, float) else (1, 0.0, v)


# -- the page ------------------------------------------------------------------------------
def claims_html(exp: Experiment, page_dir: Path) -> str:
    rows = claim_rows(exp)
    if not rows:
        return '<p class="tl-muted">The sweep states no findings.</p>'
    cols = [r.engine for r in exp.runs] + sorted(exp.missing)
    runs = {r.engine: r for r in exp.runs}
    head = "<th>Finding</th>" + "".join(f"<th>{html.escape(e)}</th>" for e in cols)
    body = ""
    for row in rows:
        cells = "".join(f"<td>{_cell(exp, runs.get(e), e, row, page_dir)}</td>" for e in cols)
        body += f"<tr><td>{_claim_label(row)}</td>{cells}</tr>"
    return (
        f'<table class="tl-grid" id="claims"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>" + LEGEND
    )


LEGEND = (
    '<p class="tl-muted">Each cell: the finding on that engine\'s rows: reproduced (direction '
    "and size as the source states them), not reproduced (the other way, or shown absent), "
    "undecided (the rounds did not decide), cannot run here (the engine cannot vary the "
    "sweep's knobs). Beside it, a/b's ratio per context with its interval at the level of the "
    "look that decided (for a time, below 1 means a is faster; for a throughput, above 1), or "
    "where the curves cross. ↳ why: an explanation, checked on the same rows, never counted "
    "as the finding's verdict.</p>"
)


def _cell(exp: Experiment, run: EngineRun | None, engine: str, row: dict, page_dir: Path) -> str:
    if row.get("engine") and row["engine"] != engine:
        return ""  # an explanation about another engine
    if run is None:
        return verdict_cell(None, missing=exp.missing.get(engine, ""))
    return verdict_cell(verdict_of(run, row["says"]), _rel(run.report, page_dir))


def _rel(path: Path | None, base: Path) -> str:
    if path is None:
        return ""
    import os

    return Path(os.path.relpath(Path(path).resolve(), Path(base).resolve())).as_posix()


def _side_by_side(items: list[tuple[str, str]]) -> str:
    return (
        '<div class="tl-side">'
        + "".join(f"<div><strong>{html.escape(e)}</strong>{body}</div>" for e, body in items)
        + "</div>"
    )


def page_html(exp: Experiment, page_dir: Path) -> str:
    esc = html.escape
    x = main_x(exp)
    ran = ", ".join(r.engine for r in exp.runs)
    title = f"{exp.sweep}: {ran} side by side" if ran else f"{exp.sweep}: not run here"
    parts = [
        f"<h1>{esc(exp.sweep)}</h1>",
        f'<p class="tl-muted">{esc(str(exp.doc.get("description", "")).strip())}</p>',
    ]
    links = ", ".join(
        f'<a href="{esc(_rel(r.report, page_dir))}">{esc(r.engine)}</a>'
        if r.report
        else esc(r.engine)
        for r in exp.runs
    )
    parts.append(f"<p>Engines: {links or 'none has rows of this sweep'}.")
    if exp.missing:
        parts.append(
            " Not here: " + "; ".join(f"{esc(e)}, {esc(w)}" for e, w in exp.missing.items()) + "."
        )
    parts.append("</p>")
    parts += ['<h2 id="claims-head">Claims</h2>', claims_html(exp, page_dir)]
    diffs = differences(exp)
    if diffs or exp.shape_only:
        lines = [esc(d) for d in diffs]
        if exp.shape_only:
            hosts = sorted({h for r in exp.runs for h in r.hosts})
            lines.insert(
                0,
                f"rows from {len(hosts)} hosts ({esc(', '.join(hosts))}): compared "
                "in shape only, each engine against its own first point",
            )
        parts.append(
            '<div class="tl-diff"><strong>Not the same for every engine</strong><ul>'
            + "".join(f"<li>{d}</li>" for d in lines)
            + "</ul></div>"
        )
    if x:
        absent = [r.engine for r in exp.runs if x not in with_pool_bytes(r.data.results)]
        if absent:  # its own knob for the question: its report draws it
            parts.append(
                f'<p class="tl-muted">Not in the figures: {esc(", ".join(absent))}, '
                f"whose rows do not set {esc(_x_label(x))}.</p>"
            )
        for normalised in [True] if exp.shape_only else [False, True]:
            fig = engines_figure(exp, x, normalised)
            if fig is None:
                continue
            what = (
                "each engine's median divided by its own at the smallest value: the "
                "shapes compare where the absolute times do not"
                if normalised
                else f"median and {interval_levels(exp)} interval for it (order statistics) "
                "of each engine's repetitions, shared axes; times at one CPU speed where an "
                "engine's verdicts compare them so"
            )
            parts.append(
                plots.figure_html(
                    fig,
                    f"{label(METRIC)} against {_x_label(x)}",
                    esc(f"{label(METRIC)} against {_x_label(x)}: {what}."),
                )
            )
    parts.append(_plans(exp, x or ""))
    notes = [
        (r.engine, f"<p>{esc(str(n).strip())}</p>")
        for r in exp.runs
        if (n := (exp.doc.get("notes") or {}).get(r.engine))
    ]
    if notes:
        parts += ['<h2 id="notes">What each engine does here</h2>', _side_by_side(notes)]
    if exp.runs:
        parts.append('<h2 id="methods">Versions, hosts and methods</h2>')
        parts.append(
            _side_by_side(
                [
                    (r.engine, "".join(f"<p>{esc(t)}</p>" for t in methods_text(r.data)))
                    for r in exp.runs
                ]
            )
        )
    body = "\n".join(p for p in parts if p)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n{GENERATOR}\n'
        f"<title>{esc(title)}</title>\n<style>{PAGE_CSS}</style>\n</head>\n<body>\n<main>\n"
        f"{body}\n</main>\n</body>\n</html>\n"
    )


GENERATOR = '<meta name="generator" content="tunelab cross-engine page">'


class PagesError(RuntimeError):
    """Cross-engine pages that could not be made: ``failed`` maps each sweep to why."""

    def __init__(self, failed: dict[str, str]) -> None:
        self.failed = failed
        super().__init__(
            "cross-engine page"
            + ("s" if len(failed) > 1 else "")
            + " not made: "
            + "; ".join(f"{s}: {why}" for s, why in failed.items())
        )


def made_here(path: Path) -> bool:
    """Whether a file under the pages' folder is a page this module wrote (pages written
    before it carried ``GENERATOR`` are told by their title and side-by-side blocks)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return GENERATOR in text or ("side by side</title>" in text and 'class="tl-side"' in text)


def write_pages(experiments: list[Experiment], out_dir: Path) -> list[Path]:
    """A page per experiment under ``out_dir``; then the pages this module made before that
    are not current (a sweep without rows now, or one whose page failed) are removed, so that
    none stands as if it were. A page that cannot be made raises PagesError, naming each with
    its engines and the cause, once the others are written."""
    out_dir = Path(out_dir)
    written, failed = [], {}
    for e in experiments:
        try:
            written.append(atomic.write_text(out_dir / f"{e.sweep}.html", page_html(e, out_dir)))
        except Exception as exc:  # any page's fault fails the index, named, after the others
            engines_ = ", ".join(r.engine for r in e.runs)
            failed[e.sweep] = f"rows of {engines_}: {type(exc).__name__}: {exc}"
    for old in sorted(out_dir.glob("*.html")):
        if old not in written and made_here(old):
            old.unlink()
    if failed:
        raise PagesError(failed)
    return written


# -- the matrix the index leads with --------------------------------------------------------
def matrix_html(experiments: list[Experiment], index_dir: Path) -> str:
    """Every finding of every sweep (its explanations beneath it) by every engine with rows
    of any sweep, in words, each cell linking to the cross-engine page's findings; an engine
    without rows of a sweep says why (cannot run here, or not run yet)."""
    cols = [e for e in engines.names() if any(e in {r.engine for r in x.runs} for x in experiments)]
    experiments = [x for x in experiments if claim_names(x)]
    if not cols or not experiments:
        return ""
    esc = html.escape
    head = "<th>Finding</th>" + "".join(f"<th>{esc(e)}</th>" for e in cols)
    body = ""
    for exp in experiments:
        page = f"{PAGES_DIR}/{exp.sweep}.html"
        span = len(cols) + 1
        body += (
            f'<tr class="tl-sweep-row"><td colspan="{span}"><a href="{esc(page)}">'
            f"<strong>{esc(exp.sweep)}</strong></a></td></tr>"
        )
        runs = {r.engine: r for r in exp.runs}
        for row in claim_rows(exp):
            cells = ""
            for e in cols:
                run = runs.get(e)
                if row.get("engine") and row["engine"] != e:
                    cells += "<td></td>"
                elif run is None:
                    cells += f"<td>{verdict_cell(None, missing=exp.missing.get(e, ''))}</td>"
                else:
                    cells += (
                        f"<td>{verdict_cell(verdict_of(run, row['says']), page + '#claims')}</td>"
                    )
            body += f"<tr><td>{_claim_label(row)}</td>{cells}</tr>"
    return (
        f'<h2 id="matrix">Every finding on every engine</h2><table class="tl-grid tl-matrix">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>" + LEGEND
    )
