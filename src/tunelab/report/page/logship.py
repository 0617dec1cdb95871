"""Log shipping, predicted against measured: for each point of a sweep that sets
``sync_mode``, the commit time IBM's HADR model gives (``tunelab.hadr.model``) from the
point's own log, disk and round trip, beside the commit time measured.

Per commit a client waits for its statement, the engine's commit path and the log writer's
flush; only the flush depends on the mode. So the prediction for a point is the measured
commit time of the same workload and clients in the engine's mode that waits for the local
flush alone (``Engine.replication_baseline``: PostgreSQL's ``local``, MariaDB's ``async``;
flush time ``w``, the model's no-ack mode), at the same round trip, with that ``w`` replaced
by the mode's flush time:

    predicted = measured(baseline) - w + flush_time(mode, F, link)

A commit time is what one client waits per commit: the timed section's wall time times the
clients, over the commits. With several clients the commits of the others overlap a
client's wait (group commit), which the model leaves to the baseline's measured time: it
predicts each client's wait as if the standby's acknowledgements never queued behind one
another, so a measured time above the prediction there shows the queueing.

- F, the pages per flush: the point's own log bytes per commit (``c_log_bytes`` over
  ``transactions``), in the model's 4 KiB pages;
- the disk: ``w`` = the device probe's 4 KiB write and sync (``device_sync_us``, the median
  over the point's rounds) as the per-write overhead; the transfer of one or two pages is
  left out (under 2 % of ``w`` at any rate above 200 MB/s);
- the network: the round trip of the point's link as measured when it was set up
  (``link_rtt_ms``: trivial queries through the delay proxy, the median; the proxy's own
  hops and the published port's forwarding included, as a ``ping`` between two hosts
  includes their stacks), or the round trip asked for (``network_rtt_ms``) on rows without
  it; the send time is left out (a few KiB on the host's loopback);
- the mode: the engine's ordering and ack (``Engine.replication``; PostgreSQL ships only WAL
  already flushed: ``on`` w + s + w + RTT, ``remote_write`` w + s + RTT; MariaDB sends
  the synced binary log and waits for the replica's receipt: both semi-sync wait points
  w + s + RTT);
- the standby's replay, for a mode that waits for it (``remote_apply``: ``on`` plus the
  replay): not derived by the model but read from the standby, its replay lag less its
  flush lag at the point (``repl_replay_lag_ms - repl_flush_lag_ms``, the median; both run
  from the primary's flush to the standby's report, so the round trip cancels). Under
  ``remote_apply`` the standby reports each replay at once; 0 where it reported none (a
  lower bound).
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd

from tunelab import engines
from tunelab.analysis import stats
from tunelab.hadr import model
from tunelab.report.data import ReportData
from tunelab.report.fragments import note
from tunelab.report.labels import fmt
from tunelab.report.tables import html_table

MODE, RTT = "knob_sync_mode", "knob_network_rtt_ms"
LIMIT = 0.25  # |measured / predicted - 1| the goal allows; beyond it is marked


def _median(frame: pd.DataFrame, col: str) -> float:
    if col not in frame:
        return math.nan
    values = pd.to_numeric(frame[col], errors="coerce").dropna()
    return float(values.median()) if len(values) else math.nan


def _per_commit(frame: pd.DataFrame, col: str, clients: int = 1) -> float:
    """Median over repetitions of ``col`` per commit of the timed section, times the clients
    (a wall time per commit of one client: each client made a share of the commits)."""
    if col not in frame or "transactions" not in frame:
        return math.nan
    ratio = (
        clients
        * pd.to_numeric(frame[col], errors="coerce")
        / pd.to_numeric(frame["transactions"], errors="coerce")
    )
    ratio = ratio[np.isfinite(ratio)]
    return float(ratio.median()) if len(ratio) else math.nan


def _replay_ms(frame: pd.DataFrame) -> float:
    """The standby's replay time per commit: its replay lag less its flush lag (both from
    the primary's local flush to the standby's report, so the round trip cancels), the
    median over repetitions; NaN where the engine reports no such lags."""
    if "repl_replay_lag_ms" not in frame or "repl_flush_lag_ms" not in frame:
        return math.nan
    gap = pd.to_numeric(frame["repl_replay_lag_ms"], errors="coerce") - pd.to_numeric(
        frame["repl_flush_lag_ms"], errors="coerce"
    )
    gap = gap[np.isfinite(gap)]
    return float(gap.median()) if len(gap) else math.nan


def _replication(engine: str) -> tuple[dict[str, model.Mode], str | None]:
    """The engine's modelled settings and the one that waits for the local flush alone."""
    if engine not in engines.names():
        return {}, None
    cls = engines.engine_class(engine)
    return cls.replication, cls.replication_baseline


def predictions(frame: pd.DataFrame, engine: str) -> pd.DataFrame | None:
    """One row per write point of a sweep with ``sync_mode``: mode, round trip, workload,
    clients, log per commit, w, measured and predicted ms per commit (one client's) and their
    ratio; None when the sweep sets no sync_mode or the engine models no replication."""
    if MODE not in frame or RTT not in frame or frame.empty:
        return None
    modes, baseline = _replication(engine)
    if not modes:
        return None
    clients = (
        pd.to_numeric(frame.get("wl_threads", pd.Series(1, index=frame.index)), errors="coerce")
        .fillna(1)
        .astype(int)
    )
    frame = frame.copy()  # one block: a row frame has hundreds of columns
    frame["clients"] = clients
    writes = frame[
        frame.get("workload", pd.Series("", index=frame.index)).isin(("insert", "update"))
    ]
    rows = []
    keys = [MODE, RTT, "workload", "clients"]
    for (mode, rtt, workload, clients), point in writes.groupby(keys, sort=False):
        base = writes[
            (writes[MODE] == baseline)
            & (writes[RTT] == rtt)
            & (writes["workload"] == workload)
            & (writes["clients"] == clients)
        ]
        measured = _per_commit(point, "elapsed_s", clients)
        pages = _per_commit(point, "c_log_bytes") / model.PAGE_BYTES
        w = _median(point, "device_sync_us") / 1e6
        link_rtt = _median(point, "link_rtt_ms")
        rtt_s = (link_rtt if link_rtt > 0 else float(rtt)) / 1000
        predicted = math.nan
        replays = str(mode) in modes and modes[str(mode)].ack is model.Ack.REMOTE_APPLY
        # only a commit that waits for replay makes the standby report it at once
        apply = _replay_ms(point) / 1000 if replays else math.nan
        if str(mode) in modes and str(mode) != baseline and not base.empty and pages > 0 and w > 0:
            link = model.Link(math.inf, w, math.inf, rtt_s, apply if apply > 0 else 0.0)
            own = model.flush_time(modes[str(baseline)], pages, link)
            local = _per_commit(base, "elapsed_s", clients) - own
            predicted = local + model.flush_time(modes[str(mode)], pages, link)
        rows.append(
            {
                "sync_mode": mode,
                "network_rtt_ms": rtt,
                "workload": workload,
                "clients": clients,
                "link_rtt_ms": rtt_s * 1e3,
                "log_kib_per_commit": pages * model.PAGE_BYTES / 1024,
                "w_ms": w * 1e3,
                "measured_ms": measured * 1e3,
                "predicted_ms": predicted * 1e3,
                "ratio": measured / predicted if predicted > 0 else math.nan,
                "flush_lag_ms": _median(point, "repl_flush_lag_ms"),
                "replay_ms": apply * 1e3,
            }
        )
    if not rows:
        return None
    out = pd.DataFrame(rows)
    order = {m: i for i, m in enumerate(modes)}
    return out.sort_values(
        ["workload", "clients", "sync_mode", "network_rtt_ms"],
        key=lambda s: s.map(order) if s.name == "sync_mode" else s,
    ).reset_index(drop=True)


def _commit_times(point: pd.DataFrame, clients: int) -> np.ndarray:
    """One client's wall time per commit, per repetition (row)."""
    return (
        clients
        * pd.to_numeric(point["elapsed_s"], errors="coerce")
        / pd.to_numeric(point["transactions"], errors="coerce")
    ).to_numpy()


def orderings(frame: pd.DataFrame, engine: str, alpha: float = 1 - stats.LEVEL) -> pd.DataFrame:
    """The modes' order, model against measurement: per workload, clients and round trip,
    each pair of modes next to each other in the model's order (flush times at one link: the
    group's median w, round trip and replay) with the measured ratio of their commit times
    (slower over faster as the model has it; paired by round where rows carry it) and
    ``order``: ``as predicted`` (significantly slower), ``reversed`` (significantly faster),
    ``not separated`` (no significant difference) or, where the model ties, ``tie``."""
    modes, _ = _replication(engine)
    needed = {MODE, RTT, "elapsed_s", "transactions", "workload"}
    if not modes or not needed <= set(frame.columns):
        return pd.DataFrame()
    table = predictions(frame, engine)
    if table is None:
        return pd.DataFrame()
    frame = frame.copy()  # one block: a row frame has hundreds of columns
    frame["clients"] = (
        pd.to_numeric(frame.get("wl_threads", pd.Series(1, index=frame.index)), errors="coerce")
        .fillna(1)
        .astype(int)
    )
    out = []
    for (rtt, workload, clients), group in table.groupby(
        ["network_rtt_ms", "workload", "clients"], sort=False
    ):
        replay = float(group["replay_ms"].median())
        link = model.Link(
            math.inf,
            float(group["w_ms"].median()) / 1e3,
            math.inf,
            float(group["link_rtt_ms"].median()) / 1e3,
            replay / 1e3 if replay > 0 else 0.0,
        )
        cost = {
            m: model.flush_time(modes[m], 1.0, link)
            for m in group["sync_mode"].astype(str)
            if m in modes
        }
        ranked = sorted(cost, key=cost.get)
        rows = frame[
            (frame[RTT] == rtt) & (frame["workload"] == workload) & (frame["clients"] == clients)
        ]
        for faster, slower in zip(ranked, ranked[1:], strict=False):
            a, b = (rows[rows[MODE].astype(str) == m] for m in (faster, slower))
            try:
                t = stats.compare_samples(
                    _commit_times(a, clients),
                    _commit_times(b, clients),
                    alpha=alpha,
                    key=stats.comparison_key(
                        "commit_time", a.get("point_id", []), b.get("point_id", [])
                    ),
                    old_rounds=a.get("round"),
                    new_rounds=b.get("round"),
                )
            except ValueError:
                continue
            if not math.isclose(cost[faster], cost[slower], rel_tol=1e-9):
                order = (
                    "not separated"
                    if not t.significant(alpha)
                    else "as predicted"
                    if t.ratio > 1
                    else "reversed"
                )
            else:
                order = "tie"
            out.append(
                {
                    "workload": workload,
                    "clients": clients,
                    "network_rtt_ms": rtt,
                    "faster": faster,
                    "slower": slower,
                    "ratio": t.ratio,
                    "low": t.low,
                    "high": t.high,
                    "p": t.p,
                    "order": order,
                }
            )
    return pd.DataFrame(out)


def _order_text(pairs: pd.DataFrame) -> str:
    """One sentence: how many neighbouring pairs the measurements order as the model does."""
    if pairs.empty:
        return ""
    counts = pairs["order"].value_counts()
    ranked = pairs[pairs["order"] != "tie"]
    text = (
        f"Order of the modes (neighbours in the model's order at one link, "
        f"{len(ranked)} pairs): measured significantly as predicted at "
        f"{counts.get('as predicted', 0)}, reversed at {counts.get('reversed', 0)}, "
        f"not separated by the measurements at {counts.get('not separated', 0)}"
    )
    reversed_ = ranked[ranked["order"] == "reversed"]
    if not reversed_.empty:  # the pairs a reader must see; the rest are in the table
        text += (
            " ("
            + "; ".join(
                f"{r.slower} over {r.faster}, {r.workload}, {r.clients} client"
                f"{'s' if r.clients > 1 else ''}, {fmt(r.network_rtt_ms)} ms: {r.ratio:.3g} "
                f"[{r.low:.3g}, {r.high:.3g}]"
                for r in reversed_.itertuples()
            )
            + ")"
        )
    ties = int(counts.get("tie", 0))
    return text + (f"; {ties} pairs the model ties." if ties else ".")


def _within(ratios: pd.Series, clients: int) -> str:
    """How many of the points with ``clients`` clients the model predicts within LIMIT."""
    outside = int((abs(ratios - 1) > LIMIT).sum())
    who = "one client" if clients == 1 else f"{clients} clients"
    return (
        f"{who}: {len(ratios)} points predicted, measured within ±{LIMIT:.0%} of predicted at "
        f"{len(ratios) - outside}" + (f", outside at {outside}" if outside else "") + "."
    )


def logship_html(data: ReportData) -> str | None:
    """The predicted-against-measured table and how the prediction was made; None for a sweep
    that sets no sync_mode."""
    table = predictions(data.results, data.engine)
    if table is None:
        return None
    baseline = _replication(data.engine)[1]
    lags = table["flush_lag_ms"].notna().any()
    shown = pd.DataFrame(
        {
            "sync_mode": table["sync_mode"],
            "round trip asked (ms)": table["network_rtt_ms"].map(fmt),
            "round trip measured (ms)": table["link_rtt_ms"].map(fmt),
            "workload": table["workload"],
            "clients": table["clients"],
            "log per commit (KiB)": table["log_kib_per_commit"].map(fmt),
            "w: 4 KiB write + sync (ms)": table["w_ms"].map(fmt),
            "measured (ms per commit, one client's)": table["measured_ms"].map(fmt),
            "predicted (ms per commit)": [
                "baseline" if m == baseline else fmt(v)
                for m, v in zip(table["sync_mode"], table["predicted_ms"], strict=True)
            ],
            "measured / predicted": table["ratio"].map(fmt),
            "standby's flush lag (ms)": table["flush_lag_ms"].map(fmt),
            "standby's replay (ms)": table["replay_ms"].map(fmt),
        }
    )
    if not lags:  # the engine reports no standby lag
        shown = shown.drop(columns="standby's flush lag (ms)")
    if not table["replay_ms"].notna().any():  # no mode waits for replay
        shown = shown.drop(columns="standby's replay (ms)")
    pairs = orderings(data.results, data.engine)
    verdict = " ".join(
        [
            _within(table.loc[table["clients"] == n, "ratio"].dropna(), n)
            for n in sorted(table["clients"].unique())
        ]
        + [_order_text(pairs)]
    )
    if not pairs.empty:
        against = {
            (
                r.workload,
                r.clients,
                r.network_rtt_ms,
                r.slower,
            ): f"{r.faster}: {r.ratio:.3g} [{r.low:.3g}, {r.high:.3g}], {r.order}"
            for r in pairs.itertuples()
        }
        shown["measured against the next faster mode"] = [
            against.get(k, "")
            for k in zip(
                table["workload"],
                table["clients"],
                table["network_rtt_ms"],
                table["sync_mode"].astype(str),
                strict=True,
            )
        ]
    how = (
        "Predicted per commit: the measured commit time of the same workload in the mode that "
        f"waits for the local flush alone ({baseline}, at the same round trip), with its flush "
        "w replaced by the mode's flush time in IBM's HADR model (docs/hadr.md), using the "
        "point's own log bytes per commit, the device probe's 4 KiB write and sync as w, and "
        "the link's round trip measured through the delay proxy when the point was set up. "
        "With several clients each one's wait is predicted alone: a measured time above it "
        "is the acknowledgements queueing. Order: each mode against the next faster one in "
        "the model's order (flush times at one link), their commit times compared as the "
        "claims compare points (paired by round): as predicted or reversed where the "
        "difference is significant, not separated where it is not (a replay of a tenth of a "
        "millisecond can hide in the noise)."
        if baseline is not None
        else "No mode of this engine waits for the local flush alone, the prediction's starting "
        "point: the measured times only."
    ) + (
        " The standby's flush lag is what the primary last saw between a local flush and the "
        "standby's report of flushing it (round trip included). A mode that waits for the "
        "standby's replay adds its replay time, which the model does not derive: the "
        "standby's replay lag less its flush lag at that point (the round trip cancels)."
        if lags
        else ""
    )
    return (
        "<h2>Log shipping: predicted against measured</h2>"
        + note(html.escape(verdict + " " + how))
        + html_table(shown, "logship")
    )
