"""What a page calls the engine's read counter (``c_physical_reads``, its rate per second and
``read_mb_s``), in the words its engine's declaration earns (``EngineInfo.reads``): physical
reads, and a physical read rate, only where every read it counts reached the device (its
files read past the OS page cache); otherwise reads from the OS, which its page cache or the
device served. The bytes that reached the device are the rows' own columns
(``c_os_read_bytes``, ``c_dev_read_bytes``): their rates are the I/O rates."""

from __future__ import annotations

import pandas as pd

from tunelab import engines
from tunelab.engines.base import EngineInfo
from tunelab.report.labels import MB_BYTES, READS_DEVICE, READS_OS
from tunelab.store.results import APPLIED_PREFIX, KNOB_PREFIX

DEVICE_BYTES = ("c_os_read_bytes", "c_dev_read_bytes")
DEVICE_RATE = "os_read_mb_s"  # of c_os_read_bytes, derived here for the page


def _info(engine: str) -> EngineInfo | None:
    try:
        return engines.info(engine)
    except Exception:  # an engine the registry does not know declares nothing
        return None


def reach_device(frame: pd.DataFrame, engine: str) -> bool:
    """Whether every row's counted reads reached the device, by the engine's declaration and
    the knob it names as applied (as asked where not read back, its default where neither)."""
    info = _info(engine)
    if info is None or not info.reads.direct_knob or frame.empty:
        return False
    name = info.reads.direct_knob
    values = pd.Series([None] * len(frame), index=frame.index, dtype=object)
    for col in (f"{KNOB_PREFIX}{name}", f"{APPLIED_PREFIX}{name}"):
        if col in frame:
            values = frame[col].astype(object).where(frame[col].notna(), values)
    return all(info.reads_reach_device({} if v is None else {name: v}) for v in values)


def words(frame: pd.DataFrame, engine: str) -> dict[str, str]:
    """The labels of the read counter's columns on this engine's page."""
    return READS_DEVICE if reach_device(frame, engine) else READS_OS


def with_device_rate(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with the rate of the bytes they read from the device, where they have them."""
    if "c_os_read_bytes" not in frame or "elapsed_s" not in frame:
        return frame
    nbytes = pd.to_numeric(frame["c_os_read_bytes"], errors="coerce")
    return frame.assign(**{DEVICE_RATE: nbytes / pd.to_numeric(frame["elapsed_s"]) / MB_BYTES})


def counter_text(frame: pd.DataFrame, engine: str) -> str:
    """What the counted reads are, from the engine's declaration, for the I/O section."""
    info = _info(engine)
    source = f": {info.reads.source}" if info and info.reads.source else ""
    if reach_device(frame, engine):
        return f"Physical reads here{source}."
    device = (
        "the bytes read from the device say what reached it"
        if any(c in frame for c in DEVICE_BYTES)
        else "these rows record no bytes read from the device"
    )
    return (
        f"Reads from the OS here{source}. The OS may have served them from its page cache: "
        f"{device}. A finding stated on the physical_reads metric is judged on this counter."
    )
