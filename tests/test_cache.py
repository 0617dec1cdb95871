"""Eviction must really take the pages out of the OS page cache."""

from __future__ import annotations

import os

from tunelab.host import cache


def _file(path, mib=8):
    path.write_bytes(os.urandom(mib << 20))
    return path


def test_reading_makes_pages_resident_and_evict_removes_them(tmp_path):
    f = _file(tmp_path / "data.bin")
    f.read_bytes()
    resident, total = cache.residency([f])
    assert total == (8 << 20) // cache.PAGE
    assert resident == total
    method = cache.evict([f])
    assert "fadvise" in method
    assert cache.residency([f]) == (0, total)


def test_directories_are_expanded_and_empty_files_count_nothing(tmp_path):
    _file(tmp_path / "a.bin", 1)
    (tmp_path / "sub").mkdir()
    _file(tmp_path / "sub" / "b.bin", 1)
    (tmp_path / "empty").write_bytes(b"")
    assert len(cache.expand([tmp_path])) == 3
    cache.evict([tmp_path])
    resident, total = cache.residency([tmp_path])
    assert (resident, total) == (0, 2 * (1 << 20) // cache.PAGE)


def test_dirty_pages_are_written_before_eviction(tmp_path):
    f = tmp_path / "dirty.bin"
    with open(f, "wb") as out:
        out.write(os.urandom(4 << 20))  # dirty in the page cache, not yet on disk
    cache.evict([f])
    assert cache.residency([f])[0] == 0
