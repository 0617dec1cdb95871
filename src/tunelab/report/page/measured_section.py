"""What was measured: the sweep as asked and as the rows have it, the warnings where the
two differ, and the summary of every point."""

from __future__ import annotations

import html
from typing import Any

from tunelab.analysis import stats
from tunelab.host.units import parse_size
from tunelab.report import checks, marks, tables
from tunelab.report.data import ReportData, effective_knobs
from tunelab.report.fragments import esc, note, reps_per_point
from tunelab.report.labels import fmt, fmt_bytes, fmt_percent, label
from tunelab.sweep import spec


def _inline(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_inline(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{esc(k)}={_inline(v)}" for k, v in value.items())
    return esc(value)


def measured_html(data: ReportData) -> str:
    sw = data.sweep
    parts = []
    if sw.get("description"):
        parts.append(f'<p class="tl-lead">{html.escape(str(sw["description"]).strip())}</p>')
    engine_note = (sw.get("notes") or {}).get(data.engine)
    if engine_note:  # where this engine legitimately differs from the experiment's expectation
        text = html.escape(str(engine_note).strip())
        parts.append(f'<p class="tl-lead"><b>On {esc(data.engine)}:</b> {text}</p>')
    rows: list[tuple[str, str]] = [
        ("sweep", f"{esc(data.name)} <code>{esc(data.sweep_file)}</code>")
    ]
    rows.append(("engine", esc(data.engine)))
    if isinstance(sw.get("dataset"), dict):
        rows.append(("dataset", _inline(sw["dataset"])))
    knobs, fixed = effective_knobs(sw, data.engine)
    for name, values in knobs.items():
        text = _inline(values) + (_as_pages(data, values) if name == "buffer_pool" else "")
        rows.append((f"knob: {label('knob_' + name, data.engine)}", text))
    if fixed:
        pool = _as_pages(data, fixed["buffer_pool"]) if "buffer_pool" in fixed else ""
        rows.append(("fixed", _inline(fixed) + pool))
    for i, wl in enumerate(sw.get("workloads") or [], start=1):
        if isinstance(wl, dict):
            params = {k: v for k, v in wl.items() if k != "type"}
            text = esc(wl.get("type", "?")) + (f" ({_inline(params)})" if params else "")
            rows.append((f"workload {i}", text))
    if "cache" in sw:
        rows.append(("cache", esc(sw["cache"])))
    if (asked := _repetitions_asked(data)) is not None:
        rows.append(("repetitions asked", esc(asked)))
    reps = reps_per_point(data)
    got = f"{len(reps)} points, {fmt(int(reps.min()))}–{fmt(int(reps.max()))} repetitions each"
    rows.append(("measured", got + f", {len(data.results)} rows"))
    parts.append(tables.key_value(rows, "sweep"))
    parts.extend(note(w, "warn") for w in warnings(data))
    return "".join(parts)


def _as_pages(data: ReportData, values: Any) -> str:
    """Pool sizes given in bytes, as the pages the rows carry: " (= 384, 1,024 pages of 16 KiB)"."""
    values = values if isinstance(values, list) else [values]
    sizes = marks.page_sizes(data.results)
    nbytes = [parse_size(v) for v in values]
    if len(sizes) != 1 or any(b is None for b in nbytes):
        return ""
    pages = ", ".join(fmt(max(1, b // sizes[0])) for b in nbytes if b is not None)
    return html.escape(f" (= {pages} pages of {fmt_bytes(sizes[0])}; KiB, MiB: 2¹⁰, 2²⁰ B)")


def _repetitions_asked(data: ReportData) -> Any:
    """The sweep's ``repetitions`` for the report's engine (its override first); None where
    the sweep names none."""
    over = (data.sweep.get("overrides") or {}).get(data.engine) or {}
    if "repetitions" not in data.sweep and "repetitions" not in over:
        return None
    return spec.repetitions_asked(data.sweep)


def warnings(data: ReportData) -> list[str]:
    """What the rows show went differently from what the sweep asked."""
    out = []
    frame = data.results
    asked = _repetitions_asked(data)
    reps = reps_per_point(data)
    if isinstance(asked, int) and int(reps.min()) < asked:
        short = int((reps < asked).sum())
        out.append(f"{short} point(s) have fewer than the {asked} repetitions asked.")
    for col in [c for c in frame if c.startswith("knob_")]:
        applied = "applied_" + col[len("knob_") :]
        if applied in frame:
            a, b = frame[col].astype(str), frame[applied].astype(str)
            differ = frame[col].notna() & frame[applied].notna() & (a != b)
            if differ.any():
                pairs = sorted({f"{x} → {y}" for x, y in zip(a[differ], b[differ], strict=True)})
                said = (
                    f"{label(col, data.engine)}: the engine applied other values than asked "
                    f"in {int(differ.sum())} row(s): {', '.join(pairs[:6])}."
                )
                out.append(html.escape(said))
    if {"cache_requested", "cache_achieved"} <= set(frame.columns):
        off = frame["cache_requested"].astype(str) != frame["cache_achieved"].astype(str)
        if off.any():
            out.append(
                f"{int(off.sum())} of {len(frame)} rows did not achieve the cache state asked "
                "(see provenance: cache states achieved)."
            )
    if reps.min() < 6:
        out.append(
            f"With {int(reps.min())} repetition(s) per point no interval for the median reaches "
            "95 % coverage; the intervals shown are [min, max] and each is labelled with its "
            "true level. Six or more repetitions give an interval of at least 95 %."
        )
    return out


def summary_html(data: ReportData) -> str:
    text = html.escape("Per point: " + stats.METHOD + ".")
    if checks.plans_recorded(data.results):
        text += (
            " Access path: the plan of the timed statements as the engine reported it "
            f"({checks.MISMATCH_MARK}: not what the index knob built)."
        )
    if checks.engine_time_recorded(data.results):
        text += (
            " Client share: 1 − engine time / response time; client-bound above "
            f"{fmt_percent(checks.CLIENT_BOUND)}."
        )
    return note(text) + tables.summary_html(data)
