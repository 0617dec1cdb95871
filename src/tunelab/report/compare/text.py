"""The text of `tunelab compare`: one line per run-wide shift, a table per sweep
(``report.compare.table``), one line per flagged change and per incomparable point, then the
counts."""

from __future__ import annotations

import math

import numpy as np

from tunelab.analysis import change
from tunelab.report.compare.changes import (
    BETTER,
    HOLM,
    NOISY,
    NOT_REPEATED,
    SAME,
    TIMED,
    TOO_FEW,
    TOO_SHORT,
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


SCALED_MARK = " (1 CPU speed)"
VERDICT_TEXT = {
    WORSE: "worse",
    NOT_REPEATED: "worse once, not when measured again",
    BETTER: "better",
    NOISY: "too noisy to tell a smaller change",
    SAME: "no change it could have detected",
    TOO_SHORT: "too short to compare",
    TOO_FEW: "too few repetitions to tell",
}


def detect_text(c: MetricChange) -> str:
    return f"could have detected >= {pct(c.judged.detectable)}"


def change_line(sweep: str, point: str, c: MetricChange, result: Comparison) -> str:
    """E.g. "sqlite/s p: elapsed_s (1 CPU speed) 1.15x, 1.16x beyond its block's shift [1.09,
    1.23], could have detected >= 8 %: worse (p=2.1e-05, q=0.006 over 150)"."""
    j = c.judged
    low, high = j.interval()
    text = (
        f"{sweep} {point}: {c.metric}{SCALED_MARK if c.scaled else ''} {times_text(c.ratio)}, "
        f"{times_text(j.beyond)} beyond its block's shift [{ratio_text(low)}, {ratio_text(high)}]"
        f", {detect_text(c)}: {VERDICT_TEXT[c.verdict]}"
    )
    if c.verdict in (WORSE, BETTER):
        p = j.p_worse if c.verdict == WORSE else j.p_better
        adjusted = "Holm " if result.procedure == HOLM else "q="
        text += (
            f" (p={p_text(p)}, {adjusted}{p_text(j.p_adjusted)} over {result.judgement.hypotheses})"
        )
    elif c.verdict == NOISY:
        text += f" ({c.source} spread ±{pct(max(j.estimate.old.sd, j.estimate.new.sd))})"
    return text


def _ratio_of(log_change: float, what: str) -> str:
    return f"{what} {times_text(math.exp(log_change))}" if math.isfinite(log_change) else ""


def overall_line(result: Comparison, engine: str) -> str:
    """E.g. "sqlite: this run's host was 7 % slower overall (elapsed_s: median change over 75
    points 1.07x; CPU reference 1.02x, device probe 1.10x)"."""
    changes = [
        c.judged.estimate.change
        for s, _, c in result.changes()
        if s.engine == engine and c.metric == "elapsed_s"
    ]
    if not changes:
        return ""
    h = float(np.median(changes))
    refs = [
        _ratio_of(result.cpu.get(f"{engine}:elapsed_s", math.nan), "CPU reference"),
        _ratio_of(result.device.get(f"{engine}/", math.nan), "device probe"),
    ]
    refs = [r for r in refs if r]
    return (
        f"{engine}: this run's host was {pct(abs(h))} {'slower' if h > 0 else 'faster'} overall "
        f"(elapsed_s: median change over {len(changes)} points {times_text(math.exp(h))}"
        + (f"; {', '.join(refs)}" if refs else "")
        + ")"
    )


def shift_line(s: change.Shift) -> str:
    """E.g. "sqlite insert/cold points: 2.9x slower (elapsed_s, median change over 6 points,
    p=0.001 against ±6 % from run to run; device probe 21x): the CPU reference or the device
    probe moved with it: the host's, not flagged"."""
    engine = s.group.split(":")[0]
    worse = s.direction * s.shift > 0
    refs = [
        r for r in (_ratio_of(s.cpu, "CPU reference"), _ratio_of(s.device, "device probe")) if r
    ]
    if s.verdict == WORSE:
        end = (
            "neither the CPU reference nor the device probe moved with it: a change of the "
            "system under test: worse"
        )
    elif s.host:
        end = "the CPU reference or the device probe moved with it: the host's, not flagged"
    else:
        end = f"within a {'block' if s.kind else 'whole run'}'s drift from run to run"
    what = f"{engine} {s.kind} points" if s.kind else f"{engine} points, all"
    return (
        f"{what}: {times_text(math.exp(s.shift))} {'slower' if worse else 'faster'} ({s.metric}, "
        f"median change over {s.points} points, p={p_text(s.p_worse)} against ±{pct(s.sd)} "
        f"from run to run" + (f"; {', '.join(refs)}" if refs else "") + f"): {end}"
    )


def main_shifts(result: Comparison) -> list[change.Shift]:
    """One shift per engine and kind: its time's (its throughput's where it has no time)."""
    chosen: dict[tuple[str, str], change.Shift] = {}
    for s in result.shifts:
        key = (s.group.split(":")[0], s.kind)
        if key not in chosen or s.metric == "elapsed_s":
            chosen[key] = s
    return [chosen[k] for k in sorted(chosen)]


def quiet_blocks_line(result: Comparison, engine: str) -> str:
    """The blocks' shifts not listed on their own (none flagged, none the host's), e.g.
    "sqlite: 10 blocks' shifts 0.95x-1.08x, each within a block's drift from run to run"."""
    quiet = [
        s
        for s in main_shifts(result)
        if s.kind and s.group.startswith(f"{engine}:") and not (s.verdict == WORSE or s.host)
    ]
    if not quiet:
        return ""
    low, high = (times_text(math.exp(f([s.shift for s in quiet]))) for f in (min, max))
    return (
        f"{engine}: {len(quiet)} blocks' shifts (a sweep's points of one workload and cache "
        f"state) {low}-{high}, each within a block's drift from run to run"
    )


def detectable_summary(result: Comparison) -> str:
    values = [c.judged.detectable for _, _, c in result.changes() if c.metric in TIMED]
    if not values:
        return ""
    return f"median point could have detected >= {pct(float(np.median(values)))}"


def summary_line(result: Comparison) -> str:
    points = result.points()
    compared = sum(not p.incomparable for _, p in points)
    too_few = sum(bool(p.too_few) and not p.changes and not p.short for _, p in points)
    short = sum(p.short and not p.incomparable for _, p in points)
    only_old = sum(len(s.only_old) for s in result.sweeps)
    only_new = sum(len(s.only_new) for s in result.sweeps)
    j = result.judgement
    detect = detectable_summary(result)
    how = (
        f"Holm at family-wise {j.level:g}"
        if result.procedure == HOLM
        else f"Benjamini-Hochberg at FDR {j.level:g}"
    )
    return (
        f"{compared} point(s) compared ({len(result.changes())} metrics, {j.hypotheses} "
        f"hypotheses, {how}, flagged past {100 * j.min_effect:g} %): {result.count(WORSE)} "
        f"worse, {result.count(BETTER)} better, {result.count(SAME)} unchanged"
        f"{' (' + detect + ')' if detect else ''}, {result.count(NOISY)} too noisy to tell "
        f"{pct(math.log1p(change.NOISY))}, {short} too short to compare, {too_few} too few "
        f"repetitions; {len(points) - compared} incomparable; {only_old} only in OLD, "
        f"{only_new} only in NEW"
    )
