"""DB2 statements that apply a calibration (text only; nothing here connects to DB2).

A storage group carries OVERHEAD and DEVICE READ RATE; its automatic-storage table spaces
inherit them and DB2 derives each table space's TRANSFERRATE from its page size. A table
space can also be given its own OVERHEAD and TRANSFERRATE, which is how IBM suggests trying
new values on a few table spaces before the whole storage group.
"""

from __future__ import annotations

import re

import numpy as np

from tunelab.calibrate.calibration import Calibration, calibrated_value, page_bytes

DEFAULT_STOGROUP = "IBMSTOGROUP"  # the storage group CREATE DATABASE makes
DEFAULT_TABLESPACE = "USERSPACE1"  # its default 4K user table space


def number(value: float) -> str:
    """A DB2 numeric literal, four significant digits, never in exponent form."""
    return np.format_float_positional(
        float(value), precision=4, unique=False, fractional=False, trim="-"
    )


def identifier(name: str) -> str:
    """An ordinary identifier as written (DB2 folds it to upper case), else a quoted one."""
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,127}", name):
        return name.upper()
    return '"' + name.replace('"', '""') + '"'


def alter_stogroup(cal: Calibration, stogroup: str = DEFAULT_STOGROUP) -> str:
    return (
        f"ALTER STOGROUP {identifier(stogroup)} OVERHEAD {number(cal.overhead_ms)} "
        f"DEVICE READ RATE {number(cal.device_read_rate_mb_s)};"
    )


def alter_tablespace(cal: Calibration, tablespace: str, page_size: int | str) -> str:
    overhead = calibrated_value(cal, "overhead_ms", page_size)
    transfer = calibrated_value(cal, "transferrate_ms", page_size)
    return (
        f"ALTER TABLESPACE {identifier(tablespace)} OVERHEAD {number(overhead)} "
        f"TRANSFERRATE {number(transfer)};"
    )


def statements(
    cal: Calibration,
    stogroup: str = DEFAULT_STOGROUP,
    tablespaces: dict[str, int | str] | None = None,
) -> str:
    """The storage-group statement, then one per table space (default: USERSPACE1, 4K)."""
    tablespaces = tablespaces or {DEFAULT_TABLESPACE: 4096}
    lines = [
        f"-- measured on {cal.host}, {cal.data_dir} ({cal.filesystem}"
        f"{'' if cal.direct_io else ', buffered I/O'}), {cal.created_at}",
        "-- every table space of the storage group inherits these:",
        alter_stogroup(cal, stogroup),
        "-- or per table space, to try the values on a few first:",
    ]
    lines += [alter_tablespace(cal, ts, ps) for ts, ps in tablespaces.items()]
    named = {page_bytes(ps) for ps in tablespaces.values()}
    for pb in sorted(set(cal.transferrate_ms) - named):
        stmt = alter_tablespace(cal, "X", pb).replace(" X ", " <name> ", 1)
        lines.append(f"-- a {pb // 1024}K table space: {stmt}")
    return "\n".join(lines) + "\n"
