from __future__ import annotations

import os

import numpy as np
import pytest

from tunelab.store import dataset
from tunelab.store.dataset import Dataset


def test_same_seed_gives_byte_identical_files(tmp_path):
    a = dataset.materialise(Dataset(5000, 3), tmp_path / "a")
    b = dataset.materialise(Dataset(5000, 3), tmp_path / "b")
    assert a.read_bytes() == b.read_bytes()
    c = dataset.materialise(Dataset(5000, 4), tmp_path / "c")
    assert c.read_bytes() != a.read_bytes()


def test_a_key_names_its_data_set_back():
    ds = Dataset(1000, 42, "accounts")
    assert Dataset.from_key(ds.key) == ds
    stale = ds.key.replace(f"-v{dataset.FORMAT_VERSION}-", f"-v{dataset.FORMAT_VERSION + 1}-")
    with pytest.raises(ValueError, match="generator version"):
        Dataset.from_key(stale)


def test_materialise_reuses_the_cached_file(tmp_path):
    path = dataset.materialise(Dataset(1000, 1), tmp_path)
    stamp = path.stat().st_mtime_ns
    assert dataset.materialise(Dataset(1000, 1), tmp_path).stat().st_mtime_ns == stamp


def test_table_shape_matches_the_workloads_assumptions(tmp_path):
    frame = dataset.read(Dataset(20000, 9), tmp_path)
    assert list(frame.columns) == list(dataset.COLUMNS)
    assert frame["id"].tolist() == list(range(20000))
    assert sorted(frame["lat"].tolist()) == list(range(20000))  # a permutation
    counts = frame["hundreds2"].value_counts()
    assert counts.index.min() == 0 and counts.index.max() == 99
    # an equality on hundreds2 matches about 1 % of the rows
    assert np.allclose(counts / len(frame), 0.01, atol=0.004)
    assert frame["name"].str.len().eq(dataset.NAME_LEN).all()
    rows = dataset.rows_of(frame.head(3))
    assert all(isinstance(v, int | str) for v in rows[0])


def test_rows_are_read_back_from_their_copy_and_parsed_again_after_a_new_csv(tmp_path):
    ds = Dataset(3000, 2)
    parsed = dataset.rows_of(dataset.read(ds, tmp_path))
    assert dataset.read_rows(ds, tmp_path) == parsed  # parses, and writes the copy
    copy = dataset.rows_copy_path(ds, tmp_path)
    assert copy.is_file()
    assert dataset.read_rows(ds, tmp_path) == parsed  # from the copy
    # A CSV written again (here: other contents) is parsed again, not taken from the copy.
    csv = dataset.cached_path(ds, tmp_path)
    before = csv.stat().st_mtime_ns
    csv.write_text(csv.read_text().replace("\n0,", "\n7,", 1))  # the same size
    os.utime(csv, ns=(before, before + 10**9))  # a coarse clock could give the same mtime
    assert dataset.read_rows(ds, tmp_path)[0][0] == 7
    # A damaged copy is only a slower read.
    copy.write_bytes(b"\x00not marshal")
    assert dataset.read_rows(ds, tmp_path)[0][0] == 7
    assert dataset.read_rows(ds, tmp_path) == dataset.rows_of(dataset.read(ds, tmp_path))
