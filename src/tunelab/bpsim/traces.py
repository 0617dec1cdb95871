"""Page-reference traces: reading and writing the text and compact formats.

A trace is a sequence of page references. Each reference is either a logical read of the
page by the application (a getpage) or a page brought into the pool by prefetch; the
optional prefetch flag tells them apart. ``meta`` carries what the file knows about how the
trace was taken, notably ``duration_s`` (the wall time the traced workload took, which sets
the trace's own pace for reads per second) and ``page_size``.

Formats, chosen by file name:

- text (any other suffix, e.g. ``.txt``): one page number per line, optionally a second
  column ``0``/``1`` marking pages brought in by prefetch; blank lines and lines starting
  with ``#`` are skipped; ``# key=value`` lines before the first reference are metadata.
- ``.npy``: a one-dimensional unsigned array of page numbers, or a structured array with
  fields ``page`` and ``prefetch``; metadata, if any, in a JSON file beside it with the
  suffix ``.json`` instead of ``.npy``.
- ``.npz``: compressed arrays ``pages`` and optionally ``prefetch`` (uint8), and ``meta``
  (a JSON string), all in one file.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tunelab.host import atomic

TRACE_SUFFIXES = (".trace.npz", ".trace.npy", ".trace.txt")  # compact, metadata inside


class TraceFormatError(ValueError):
    """A trace file cannot be read; the message names the file and what is wrong."""


@dataclass
class Trace:
    pages: np.ndarray
    prefetch: np.ndarray | None = None  # bool per reference: brought in by prefetch
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pages = np.asarray(self.pages)
        if self.pages.ndim != 1 or self.pages.dtype.kind not in "ui":
            raise ValueError("pages must be a one-dimensional integer array")
        if self.pages.dtype.kind == "i" and self.pages.size and self.pages.min() < 0:
            raise ValueError("page numbers must be non-negative")
        if self.prefetch is not None:
            self.prefetch = np.asarray(self.prefetch).astype(bool, copy=False)
            if self.prefetch.shape != self.pages.shape:
                raise ValueError("prefetch flags must have one entry per reference")
            if not self.prefetch.any():
                self.prefetch = None

    def __len__(self) -> int:
        return int(self.pages.size)

    @property
    def duration_s(self) -> float | None:
        value = self.meta.get("duration_s")
        return float(value) if value is not None else None


def smallest_unsigned(pages: np.ndarray) -> np.dtype:
    top = int(pages.max()) if pages.size else 0
    for dtype in (np.uint16, np.uint32, np.uint64):
        if top <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    raise ValueError("page numbers do not fit in 64 bits")


def sidecar_path(npy_path: Path) -> Path:
    return Path(npy_path).with_suffix(".json")


def find_trace(directory: str | os.PathLike, name: str) -> Path:
    """The trace file for ``name`` in ``directory`` (compact formats first)."""
    for suffix in TRACE_SUFFIXES:
        candidate = Path(directory) / f"{name}{suffix}"
        if candidate.exists():
            return candidate
    return Path(directory) / f"{name}{TRACE_SUFFIXES[0]}"


def read_trace(path: str | os.PathLike) -> Trace:
    path = Path(path)
    if not path.exists():
        raise TraceFormatError(f"{path}: no such trace file")
    if path.is_dir():
        raise TraceFormatError(f"{path}: is a directory, not a trace file")
    if path.suffix == ".npy":
        return _read_npy(path)
    if path.suffix == ".npz":
        return _read_npz(path)
    return _read_text(path)


def write_trace(path: str | os.PathLike, trace: Trace) -> Path:
    """Write ``trace`` atomically in the format its suffix names (.npy, .npz, else text)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".npy":
        atomic.write(path, lambda f: np.save(f, _npy_array(trace), allow_pickle=False))
        if trace.meta:
            atomic.write(sidecar_path(path), lambda f: f.write(_meta_json(trace.meta).encode()))
    elif path.suffix == ".npz":
        arrays: dict[str, np.ndarray] = {
            "pages": trace.pages.astype(smallest_unsigned(trace.pages), copy=False)
        }
        if trace.prefetch is not None:
            arrays["prefetch"] = trace.prefetch.astype(np.uint8)
        arrays["meta"] = np.array(_meta_json(trace.meta))
        atomic.write(path, lambda f: np.savez_compressed(f, **arrays))
    else:
        atomic.write(path, lambda f: _write_text(f, trace))
    return path


def _npy_array(trace: Trace) -> np.ndarray:
    dtype = smallest_unsigned(trace.pages)
    if trace.prefetch is None:
        return trace.pages.astype(dtype, copy=False)
    out = np.empty(trace.pages.size, dtype=[("page", dtype), ("prefetch", np.uint8)])
    out["page"] = trace.pages
    out["prefetch"] = trace.prefetch
    return out


def _meta_json(meta: dict[str, Any]) -> str:
    return json.dumps(meta, sort_keys=True, default=str)


def _write_text(f, trace: Trace) -> None:
    for key, value in sorted(trace.meta.items()):
        f.write(f"# {key}={value}\n".encode())
    if trace.prefetch is None:
        body = pd.DataFrame({"page": trace.pages})
    else:
        body = pd.DataFrame({"page": trace.pages, "prefetch": trace.prefetch.astype(np.uint8)})
    body.to_csv(f, sep=" ", header=False, index=False, lineterminator="\n")


def _parse_meta_value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


_MAGIC = {".npy": (b"\x93NUMPY",), ".npz": (b"PK\x03\x04", b"PK\x05\x06")}  # npz is a zip


def _check_magic(path: Path) -> None:
    """Name an empty or foreign file plainly, before numpy says something about pickles."""
    with open(path, "rb") as f:
        head = f.read(8)
    if not head:
        raise TraceFormatError(f"{path}: empty file (0 bytes), not a {path.suffix} trace")
    if not head.startswith(_MAGIC[path.suffix]):
        kind = "a NumPy array file" if path.suffix == ".npy" else "a zip archive"
        raise TraceFormatError(f"{path}: not a readable {path.suffix} trace (not {kind})")


def _read_npy(path: Path) -> Trace:
    _check_magic(path)
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise TraceFormatError(f"{path}: not a readable .npy array ({exc})") from None
    meta: dict[str, Any] = {}
    side = sidecar_path(path)
    if side.exists():
        try:
            meta = json.loads(side.read_text())
        except json.JSONDecodeError as exc:
            raise TraceFormatError(f"{side}: metadata is not valid JSON ({exc})") from None
    if arr.dtype.names:
        if set(arr.dtype.names) != {"page", "prefetch"}:
            raise TraceFormatError(
                f"{path}: structured trace needs exactly the fields page, prefetch; "
                f"found {', '.join(arr.dtype.names)}"
            )
        pages, prefetch = np.asarray(arr["page"]), np.asarray(arr["prefetch"])
    else:
        pages, prefetch = np.asarray(arr), None
    return _checked(path, pages, prefetch, meta)


def _read_npz(path: Path) -> Trace:
    _check_magic(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            if "pages" not in z.files:
                raise TraceFormatError(f"{path}: .npz trace needs an array named pages")
            arrays = {name: z[name] for name in ("pages", "prefetch", "meta") if name in z.files}
    except TraceFormatError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise TraceFormatError(f"{path}: not a readable .npz trace ({exc})") from None
    for name, value in arrays.items():
        if not isinstance(value, np.ndarray):  # a member that is not .npy data comes as bytes
            raise TraceFormatError(f"{path}: {name} in the archive is not a NumPy array")
    meta: Any = {}
    if "meta" in arrays:
        try:
            meta = json.loads(str(arrays["meta"]))
        except json.JSONDecodeError as exc:
            raise TraceFormatError(f"{path}: meta is not valid JSON ({exc})") from None
    return _checked(path, arrays["pages"], arrays.get("prefetch"), meta)


def _checked(path: Path, pages, prefetch, meta) -> Trace:
    if pages.ndim != 1 or pages.dtype.kind not in "ui":
        raise TraceFormatError(
            f"{path}: pages must be a one-dimensional integer array, got {pages.dtype} "
            f"with shape {pages.shape}"
        )
    if pages.dtype.kind == "i" and pages.size and pages.min() < 0:
        raise TraceFormatError(f"{path}: page numbers must be non-negative")
    if prefetch is not None:
        prefetch = np.asarray(prefetch)
        if prefetch.dtype.kind not in "uib":
            raise TraceFormatError(
                f"{path}: prefetch flags must be integers 0 or 1, got {prefetch.dtype}"
            )
        if prefetch.shape != pages.shape:
            raise TraceFormatError(f"{path}: prefetch flags must have one entry per page")
        if prefetch.size and prefetch.max() > 1:
            raise TraceFormatError(f"{path}: prefetch flags must be 0 or 1")
    if not isinstance(meta, dict):
        raise TraceFormatError(f"{path}: metadata must be a JSON object")
    return Trace(pages, prefetch, meta)


def _read_text(path: Path) -> Trace:
    meta: dict[str, Any] = {}
    header_lines = 0
    with open(path, "rb") as f:
        for raw in f:
            line = raw.decode("utf-8", "replace").strip()
            if line and not line.startswith("#"):
                break
            header_lines += 1
            body = line.lstrip("#").strip()
            if "=" in body:
                key, _, value = body.partition("=")
                meta[key.strip()] = _parse_meta_value(value.strip())
    try:
        frame = pd.read_csv(
            path,
            sep=r"\s+",
            header=None,
            comment="#",
            skiprows=header_lines,
            dtype=np.int64,
            skip_blank_lines=True,
            engine="c",
        )
    except pd.errors.EmptyDataError:
        return Trace(np.zeros(0, np.uint64), None, meta)
    except (ValueError, OverflowError, pd.errors.ParserError):
        _raise_first_bad_line(path)
        raise TraceFormatError(f"{path}: cannot read the trace") from None
    if frame.shape[1] > 2 or frame.isna().any().any():
        _raise_first_bad_line(path)
    pages = frame.iloc[:, 0].to_numpy()
    if pages.size and pages.min() < 0:
        _raise_first_bad_line(path)
    prefetch = None
    if frame.shape[1] == 2:
        flags = frame.iloc[:, 1].to_numpy()
        if flags.size and (flags.min() < 0 or flags.max() > 1):
            _raise_first_bad_line(path)
        prefetch = flags.astype(bool)
    return Trace(pages.astype(smallest_unsigned(pages)), prefetch, meta)


def _raise_first_bad_line(path: Path) -> None:
    """Find the first line that is not `page` or `page flag` and say what is wrong with it."""
    columns = None
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            line = raw.decode("utf-8", "replace").strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split()
            where = f"{path}:{number}"
            if len(fields) > 2:
                raise TraceFormatError(
                    f"{where}: expected 'page' or 'page prefetch_flag', got {len(fields)} fields"
                )
            if columns is None:
                columns = len(fields)
            elif len(fields) != columns:
                raise TraceFormatError(
                    f"{where}: {len(fields)} column(s) where earlier lines have {columns}"
                )
            if not fields[0].isdigit():
                raise TraceFormatError(
                    f"{where}: page number must be a non-negative integer, got {fields[0]!r}"
                )
            if int(fields[0]) > np.iinfo(np.int64).max:
                raise TraceFormatError(f"{where}: page number {fields[0]} is too large")
            if len(fields) == 2 and fields[1] not in ("0", "1"):
                raise TraceFormatError(f"{where}: prefetch flag must be 0 or 1, got {fields[1]!r}")
    raise TraceFormatError(f"{path}: cannot read the trace")
