"""The calibration record, its file (one per host and data directory) and what others ask of it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunelab.calibrate.model import DB2_PAGE_SIZES, MB_BYTES, transferrate_ms
from tunelab.host import atomic

SCHEMA = 1
CALIBRATION_DIR = Path("calibration")
DEFAULT_DATA_DIR = Path(".tunelab")


_OPTIONAL_NUMBERS = ("write_rate_mb_s", "write_fit_r2")
_NUMBERS = ("overhead_ms", "device_read_rate_mb_s", "write_overhead_ms", *_OPTIONAL_NUMBERS)


class CalibrationError(ValueError):
    """A calibration file or a request to it is not usable; one line for the user."""


@dataclass
class Calibration:
    """What `tunelab calibrate` measured. MB is ``mb_bytes`` (1,024,000 bytes, DB2's unit).

    ``transferrate_ms`` and ``overhead_ms_by_page`` are keyed by page size in bytes.
    ``write_rate_mb_s`` and ``write_fit_r2`` are None when write time did not grow with size.
    """

    host: str
    data_dir: str
    filesystem: str
    direct_io: bool
    overhead_ms: float
    device_read_rate_mb_s: float
    transferrate_ms: dict[int, float]
    write_overhead_ms: float
    write_rate_mb_s: float | None
    write_fit_r2: float | None
    direct_io_note: str = ""
    device: str = ""
    fio_version: str = ""
    created_at: str = ""
    quick: bool = False
    elapsed_s: float = 0.0
    plan: dict[str, Any] = field(default_factory=dict)
    mb_bytes: int = MB_BYTES
    overhead_ms_by_page: dict[int, float] = field(default_factory=dict)
    write_page_bytes: int = 4096
    write_two_point: dict[str, float | None] = field(default_factory=dict)
    pg_random_seq_ratio: float | None = None
    pg_random_page_cost: float | None = None
    resident_fraction: float | None = None
    warnings: list[str] = field(default_factory=list)
    measurements: list[dict[str, Any]] = field(default_factory=list)
    schema: int = SCHEMA

    def to_json(self) -> str:
        doc = dataclasses.asdict(self)
        for key in ("transferrate_ms", "overhead_ms_by_page"):
            doc[key] = {str(k): v for k, v in doc[key].items()}
        return json.dumps(doc, indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, doc: dict[str, Any], source: str = "calibration") -> Calibration:
        names = {f.name for f in dataclasses.fields(cls)}
        required = {
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        missing = sorted(required - doc.keys())
        if missing:
            raise CalibrationError(f"{source}: missing field(s) {', '.join(missing)}")
        kept = {k: v for k, v in doc.items() if k in names}
        for key in _NUMBERS:
            value = kept.get(key)
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number and not (value is None and key in _OPTIONAL_NUMBERS):
                raise CalibrationError(f"{source}: field {key} must be a number, not {value!r}")
        if not isinstance(kept["direct_io"], bool):
            raise CalibrationError(f"{source}: field direct_io must be true or false")
        for key in ("transferrate_ms", "overhead_ms_by_page"):
            if key in kept:
                try:
                    kept[key] = {int(k): float(v) for k, v in kept[key].items()}
                except (AttributeError, ValueError):
                    raise CalibrationError(
                        f"{source}: field {key} must map page sizes in bytes to numbers"
                    ) from None
        return cls(**kept)


def load(path: Path | str) -> Calibration:
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise CalibrationError(f"{path}: no calibration file (run `tunelab calibrate`)") from None
    except json.JSONDecodeError as exc:
        raise CalibrationError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(doc, dict):
        raise CalibrationError(f"{path}: a calibration is a JSON object")
    if doc.get("schema", SCHEMA) != SCHEMA:
        raise CalibrationError(f"{path}: schema {doc.get('schema')} (this tunelab reads {SCHEMA})")
    return Calibration.from_dict(doc, str(path))


def save(cal: Calibration, path: Path | str) -> Path:
    """Write atomically: a temp file in the same directory, then rename."""
    return atomic.write_text(path, cal.to_json())


def hostname() -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "host"


# The host a workflow run names its calibration file after: the submitting host's, also in
# the run's jobs on other hosts of a cluster (the file itself records where it was measured).
HOST_ENV = "TUNELAB_CALIBRATION_HOST"


def default_path(data_dir: Path | str = DEFAULT_DATA_DIR, root: Path | str = ".") -> Path:
    """calibration/<host>-<hash of the resolved data directory>.json under ``root``.

    The hash keeps one file per (host, data directory): two directories on different
    devices get different calibrations, and the same directory always finds its own. The
    host is this one, or ``$TUNELAB_CALIBRATION_HOST`` where a workflow run set it.
    """
    digest = hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:12]
    host = os.environ.get(HOST_ENV) or hostname()
    return Path(root) / CALIBRATION_DIR / f"{host}-{digest}.json"


_KNOBS = {"overhead": "overhead_ms", "transferrate": "transferrate_ms"}


def page_bytes(page_size: int | str) -> int:
    """4096/8192/16384/32768, or the same written as 4K/8K/16K/32K."""
    value: int | None = None
    if isinstance(page_size, int) and not isinstance(page_size, bool):
        value = page_size
    elif isinstance(page_size, str) and re.fullmatch(r"\d+[kK]?", page_size.strip()):
        text = page_size.strip()
        value = int(text[:-1]) * 1024 if text[-1] in "kK" else int(text)
    if value not in DB2_PAGE_SIZES:
        allowed = ", ".join(f"{p} ({p // 1024}K)" for p in DB2_PAGE_SIZES)
        raise CalibrationError(
            f"page size {page_size!r} is not a DB2 page size (allowed: {allowed})"
        )
    return value


def calibrated_value(cal: Calibration, knob: str, page_size: int | str | None = None) -> float:
    """The measured value for a DB2 knob: overhead(_ms) in ms, or transferrate(_ms) in ms/page.

    TRANSFERRATE needs the table space's page size and comes from the calibration's table, or
    from its DEVICE READ RATE by IBM's conversion for a page size the table lacks. OVERHEAD is
    one figure for every page size (``page_size`` is then only checked when given).
    """
    name = knob.strip().lower()
    name = _KNOBS.get(name, name)
    if name not in _KNOBS.values():
        raise CalibrationError(
            f"knob {knob!r} has no calibrated value (allowed: overhead_ms, transferrate_ms)"
        )
    if page_size is None and name == "transferrate_ms":
        raise CalibrationError("a calibrated transferrate_ms needs the table space's page size")
    pb = None if page_size is None else page_bytes(page_size)
    if name == "overhead_ms":
        return float(cal.overhead_ms)
    assert pb is not None
    if pb in cal.transferrate_ms:
        return float(cal.transferrate_ms[pb])
    return transferrate_ms(cal.device_read_rate_mb_s, pb)


def device_fraction(mb_per_s: float, cal: Calibration, mb_bytes: float | None = None) -> float:
    """Achieved read MB/s as a fraction of the DEVICE READ RATE.

    MB is the calibration's (1,024,000 bytes) unless ``mb_bytes`` says otherwise, e.g.
    ``mb_bytes=1e6`` for a rate computed with decimal megabytes.
    """
    scale = 1.0 if mb_bytes is None else float(mb_bytes) / cal.mb_bytes
    return float(mb_per_s) * scale / cal.device_read_rate_mb_s
