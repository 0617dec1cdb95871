"""The text of `tunelab compare`: one line per run-wide shift, per flagged change, per
noisy point and per incomparable point, then the counts."""

from __future__ import annotations

import math

import numpy as np

from tunelab.analysis import change
from tunelab.report.comparison import (
    BETTER,
    NOISY,
    RANK,
    SAME,
    TIMED,
    TOO_FEW,
    WORSE,
    Comparison,
    MetricChange,
)


def ratio_text(r: float) -> str:
    if math.isnan(r):
        return "nan"
    if math.isinf(r):
        return "inf"
    return f"{r:.2f}" if 0.01 <= r < 100 else f"{r:.3g}"


def times_text(r: float) -> str:
    text = ratio_text(r)
    return text if math.isinf(r) or math.isnan(r) else f"{text}x"


def p_text(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def pct(log_change: float) -> str:
    """A log change as a percentage of the ratio, "8 %" or "2.5 %"."""
    if not math.isfinite(log_change):
        return "n/a"
    v = 100 * math.expm1(log_change)
    return f"{v:.0f} %" if abs(v) >= 9.5 else f"{v:.1f} %".replace(".0 %", " %")


def threshold_text(threshold: float) -> str:
    return f"{100 * threshold:g} %"


SCALED_MARK = " (1 CPU speed)"
VERDICT_TEXT = {
    WORSE: "worse",
    BETTER: "better",
    NOISY: "too noisy to tell a smaller change",
    SAME: "no change it could have detected",
    TOO_FEW: "too few repetitions to tell",
}


def detect_text(c: MetricChange) -> str:
    return f"could have detected >= {pct(c.judged.detectable)}"


def change_line(sweep: str, point: str, c: MetricChange, result: Comparison) -> str:
    """E.g. "sqlite/s p: elapsed_s (1 CPU speed) 1.15x, 1.16x beyond the run's shift [1.09,
    1.23], could have detected >= 8 %: worse (p=2.1e-05, Holm 0.006 over 150)"."""
    j = c.judged
    low, high = j.interval()
    text = (
        f"{sweep} {point}: {c.metric}{SCALED_MARK if c.scaled else ''} {times_text(c.ratio)}, "
        f"{times_text(j.beyond)} beyond the run's shift [{ratio_text(low)}, {ratio_text(high)}]"
        f", {detect_text(c)}: {VERDICT_TEXT[c.verdict]}"
    )
    if c.verdict in (WORSE, BETTER):
        p = j.p_worse if c.verdict == WORSE else j.p_better
        text += f" (p={p_text(p)}, Holm {p_text(j.p_adjusted)} over {result.judgement.hypotheses})"
    elif c.verdict == NOISY:
        text += f" ({c.source} spread ±{pct(max(j.estimate.old.sd, j.estimate.new.sd))})"
    return text


def shift_line(s: change.Shift) -> str:
    """E.g. "sqlite: this run's host was 7 % slower overall (elapsed_s: median change over
    150 points 1.07x, a run moves ±5 % run to run; CPU reference 1.02x): within a run's
    drift"."""
    engine = s.group.split(":")[0]
    worse = s.direction * s.shift > 0
    how = "slower" if worse else "faster"
    cpu = f"; CPU reference {times_text(math.exp(s.cpu))}" if math.isfinite(s.cpu) else ""
    if s.verdict == WORSE:
        end = "the CPU reference did not move with it: a change of the system under test: worse"
    elif s.host:
        end = "the CPU reference moved with it: the host's, not flagged"
    else:
        end = "within a whole run's drift from run to run"
    return (
        f"{engine}: this run's host was {pct(abs(s.shift))} {how} overall ({s.metric}: median "
        f"change over {s.points} points {times_text(math.exp(s.shift))}, p={p_text(s.p_worse)}"
        f" against ±{pct(s.sd)} from run to run{cpu}): {end}"
    )


def main_shifts(result: Comparison) -> list[change.Shift]:
    """One shift per engine: its time's (its throughput's where it has no time)."""
    chosen: dict[str, change.Shift] = {}
    for s in result.shifts:
        engine = s.group.split(":")[0]
        if engine not in chosen or s.metric == "elapsed_s":
            chosen[engine] = s
    return [chosen[e] for e in sorted(chosen)]


def detectable_summary(result: Comparison) -> str:
    values = [c.judged.detectable for _, _, c in result.changes() if c.metric in TIMED]
    if not values:
        return ""
    return f"median point could have detected >= {pct(float(np.median(values)))}"


def summary_line(result: Comparison) -> str:
    points = result.points()
    compared = sum(not p.incomparable for _, p in points)
    too_few = sum(bool(p.too_few) and not p.changes for _, p in points)
    only_old = sum(len(s.only_old) for s in result.sweeps)
    only_new = sum(len(s.only_new) for s in result.sweeps)
    j = result.judgement
    detect = detectable_summary(result)
    return (
        f"{compared} point(s) compared ({len(result.changes())} metrics, {j.hypotheses} "
        f"hypotheses, family-wise alpha {j.alpha:g}): {result.count(WORSE)} worse, "
        f"{result.count(BETTER)} better, {result.count(SAME)} unchanged"
        f"{' (' + detect + ')' if detect else ''}, {result.count(NOISY)} too noisy to tell "
        f"{pct(math.log1p(change.NOISY))}, {too_few} too few repetitions; "
        f"{len(points) - compared} incomparable; {only_old} only in OLD, {only_new} only in NEW"
    )


def text_lines(result: Comparison) -> list[str]:
    """The run-wide shifts, one line per flagged change, per noisy point (its time), per
    incomparable point, then the counts."""
    lines = [shift_line(s) for s in main_shifts(result)]
    flagged, noisy = [], []
    for s, p, c in result.changes():
        if c.verdict in (WORSE, BETTER):
            flagged.append((RANK[c.verdict], s.name, p.point, c.metric, c))
        elif c.verdict == NOISY and (c.metric == "elapsed_s" or c.metric not in TIMED):
            noisy.append((s.name, p.point, c.metric, c))
    lines += [change_line(name, point, c, result) for *_, name, point, _, c in sorted(
        flagged, key=lambda t: t[:4])]  # fmt: skip
    lines += [change_line(name, point, c, result) for name, point, _, c in sorted(
        noisy, key=lambda t: t[:3])]  # fmt: skip
    for s, p in result.points():
        if p.incomparable:
            lines.append(
                f"{s.name} {p.point}: incomparable ({'; '.join(d.text() for d in p.incomparable)})"
            )
    lines.append(summary_line(result))
    return lines
