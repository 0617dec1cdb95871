"""Seeded, vectorised generation of the accounts-like table the workloads use.

The shape follows the Shasha & Bonnet tuning experiments the course assignment uses:
a unique key, two low-cardinality attributes (``hundreds1``/``hundreds2``: 100 values,
so an equality predicate matches about 1 % of the rows), an attribute that is a random
permutation of the keys (``lat``: a range on it has an exact selectivity and no physical
order), and padding so a row is about 100 bytes. Rows are stored in key order, so
``hundreds2`` and ``lat`` are physically scattered unless an index clusters them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import marshal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tunelab.host import atomic

if TYPE_CHECKING:  # imported where used: the lab's quick commands (plan, validate,
    import pandas as pd  # preflight, recover) need the data set's names, not its rows


COLUMNS: tuple[str, ...] = ("id", "name", "hundreds1", "hundreds2", "lat", "balance", "filler")
# Column types in portable terms; each engine maps them to its own DDL.
COLUMN_TYPES: dict[str, str] = {
    "id": "integer",
    "name": "char20",
    "hundreds1": "integer",
    "hundreds2": "integer",
    "lat": "integer",
    "balance": "integer",
    "filler": "char40",
}
NAME_LEN = 20
FILLER_LEN = 40
DISTINCT_HUNDREDS = 100
FORMAT_VERSION = 1  # bump when the generator changes, so cached files are regenerated


@dataclass(frozen=True)
class Dataset:
    rows: int
    seed: int
    table: str = "accounts"

    @property
    def key(self) -> str:
        return f"{self.table}-v{FORMAT_VERSION}-r{self.rows}-s{self.seed}"

    @classmethod
    def from_key(cls, key: str) -> Dataset:
        """Inverse of ``key`` (``accounts-v1-r1000-s42``)."""
        table, version, rows, seed = key.split("-")
        if version != f"v{FORMAT_VERSION}":
            raise ValueError(f"dataset {key}: generator version {version} is not the current one")
        return cls(rows=int(rows[1:]), seed=int(seed[1:]), table=table)


def generate(ds: Dataset) -> pd.DataFrame:
    """The table's rows as a DataFrame; the same ``Dataset`` always gives the same frame."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(ds.seed)
    n = ds.rows
    ids = np.arange(n, dtype=np.int64)
    letters = rng.integers(ord("a"), ord("z") + 1, size=(n, NAME_LEN), dtype=np.uint8)
    names = letters.view(f"S{NAME_LEN}").ravel().astype(str)
    hundreds1 = rng.integers(0, DISTINCT_HUNDREDS, size=n, dtype=np.int64)
    hundreds2 = rng.integers(0, DISTINCT_HUNDREDS, size=n, dtype=np.int64)
    lat = rng.permutation(n).astype(np.int64)
    balance = rng.integers(0, 10_000_000, size=n, dtype=np.int64)
    filler = np.full(n, "x" * FILLER_LEN)
    return pd.DataFrame(
        {
            "id": ids,
            "name": names,
            "hundreds1": hundreds1,
            "hundreds2": hundreds2,
            "lat": lat,
            "balance": balance,
            "filler": filler,
        },
        columns=list(COLUMNS),
    )


def disk_bytes(rows: int) -> int:
    """About the bytes a data set of ``rows`` rows takes in its folder: the CSV (per row the
    name and filler, five integers and seven separators: at most 34 more) and its rows' copy
    (per row the name, a reference to the one filler, the integers and the tuple's marshal
    framing: again about 34 more). Measured at a million rows: 89 + 54 bytes a row."""
    return rows * (2 * NAME_LEN + FILLER_LEN + 2 * 34)


def cached_path(ds: Dataset, data_dir: Path) -> Path:
    return Path(data_dir) / f"{ds.key}.csv"


def materialise(ds: Dataset, data_dir: Path) -> Path:
    """Write the dataset as CSV under ``data_dir`` once (atomically) and return its path."""
    path = cached_path(ds, data_dir)
    if path.exists():
        return path
    return atomic.write_csv(generate(ds), path)


def read(ds: Dataset, data_dir: Path) -> pd.DataFrame:
    """The cached dataset (generated first if missing)."""
    import pandas as pd

    path = materialise(ds, data_dir)
    return pd.read_csv(path, dtype={"name": str, "filler": str}, keep_default_na=False)


def rows_of(frame: pd.DataFrame) -> list[tuple]:
    """Plain Python tuples in column order (drivers want ints and strs, not numpy scalars)."""
    return list(zip(*(frame[c].tolist() for c in COLUMNS), strict=True))


def rows_copy_path(ds: Dataset, data_dir: Path) -> Path:
    return Path(data_dir) / f"{ds.key}.rows.marshal"


def read_rows(ds: Dataset, data_dir: Path) -> list[tuple]:
    """The data set's rows as tuples (``rows_of``). The first read parses the CSV and keeps a
    marshal copy of the tuples beside it, which later reads load instead: about 0.1 s for
    400,000 rows against 0.3 s to parse. The copy is stamped with the CSV's size and mtime
    (and the interpreter's marshal version), so a CSV written again is parsed again; a copy
    that cannot be read or written (a full disk) is only a slower read."""
    csv = materialise(ds, data_dir)
    st = csv.stat()
    stamp = (marshal.version, st.st_size, st.st_mtime_ns)
    copy = rows_copy_path(ds, data_dir)
    with contextlib.suppress(OSError, EOFError, ValueError, TypeError):
        kept = marshal.loads(copy.read_bytes())
        if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == stamp:
            return kept[1]
    rows = rows_of(read(ds, data_dir))
    with contextlib.suppress(OSError):
        atomic.write_bytes(copy, marshal.dumps((stamp, rows)))
    return rows


class Source:
    """A data set as the loaders want it, read only when asked: its CSV file (the engines'
    bulk paths read it directly) or its rows as Python tuples (row-by-row loads, the insert
    workload). A point whose table is reused never reads either."""

    def __init__(self, ds: Dataset, data_dir: Path):
        self.dataset = ds
        self.data_dir = Path(data_dir)

    @functools.cached_property
    def csv(self) -> Path:
        """The CSV file: a header line, then one line per row, columns in ``COLUMNS`` order."""
        return materialise(self.dataset, self.data_dir)

    @functools.cached_property
    def rows(self) -> list[tuple]:
        return read_rows(self.dataset, self.data_dir)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
