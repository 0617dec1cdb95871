"""Page traces of real SQLite workloads through the apsw VFS shim."""

import apsw
import numpy as np
import pytest

from tunelab.bpsim.curves import lru_curve
from tunelab.bpsim.traces import read_trace, write_trace
from tunelab.engines.sqlite_pagetrace import beside, capture, capture_trace, traced_connection


@pytest.fixture()
def db(tmp_path):
    """One table, some rows deleted so the file has free pages."""
    path = tmp_path / "t.db"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, payload TEXT)")
    with conn:
        conn.executemany("INSERT INTO t VALUES(?, ?)", [(i, "x" * 300) for i in range(20_000)])
    with conn:
        conn.execute("DELETE FROM t WHERE id BETWEEN 4000 AND 9000")
    conn.close()
    return path


def _file_pages(path):
    conn = apsw.Connection(str(path))
    try:
        return (
            conn.execute("PRAGMA page_count").fetchone()[0],
            conn.execute("PRAGMA freelist_count").fetchone()[0],
        )
    finally:
        conn.close()


def scan(conn):
    return conn.execute("SELECT sum(length(payload)) FROM t").fetchall()


def test_full_scan_reads_every_page_in_use(db):
    page_count, free = _file_pages(db)
    assert free > 100  # the deletes left free pages
    trace = capture_trace(db, scan)
    distinct = np.unique(trace.pages)
    in_use = page_count - free
    # every page of the table, plus perhaps page 1 (the schema), and nothing beyond the file
    assert in_use - 1 <= distinct.size <= in_use
    assert distinct.min() >= 1 and distinct.max() <= page_count
    assert trace.meta["page_size"] == 4096 and trace.meta["freelist_count"] == free
    assert trace.meta["duration_s"] > 0


def test_minimal_cache_lets_logical_references_through(db):
    # two scans: with the minimal cache the second is traced again, page for page
    pages = capture(db, lambda conn: [scan(conn), scan(conn)])
    half = pages.size // 2
    assert pages[:half].tolist() == pages[half:].tolist()
    # LRU over the trace: a pool holding the whole table serves the second scan
    distinct = np.unique(pages).size
    curve = lru_curve(pages, sizes=[distinct // 2, distinct]).set_index("pool_pages")
    assert curve.loc[distinct, "misses"] == distinct
    assert curve.loc[distinct // 2, "misses"] == pages.size  # a cyclic scan larger than the pool


def test_a_large_engine_cache_hides_the_second_scan(db):
    pages = capture(db, lambda conn: [scan(conn), scan(conn)], cache_pages=100_000)
    assert pages.size == np.unique(pages).size  # the second scan came from SQLite's own cache


def test_trace_matches_sqlite_cache_misses_and_vfs_is_removed(db):
    before = set(apsw.vfs_names())
    with traced_connection(db) as (conn, recorder):
        assert set(apsw.vfs_names()) - before  # the shim is registered while in use
        recorder.clear()
        start = conn.status(apsw.SQLITE_DBSTATUS_CACHE_MISS)[0]
        conn.execute("SELECT count(*) FROM t WHERE id % 7 = 0").fetchall()
        misses = conn.status(apsw.SQLITE_DBSTATUS_CACHE_MISS)[0] - start
        traced = recorder.pages(4096).size
    assert traced == misses
    assert set(apsw.vfs_names()) == before


def test_missing_database(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such database file"):
        capture(tmp_path / "none.db", scan)


def test_trace_written_beside_the_results(db, tmp_path):
    trace = capture_trace(db, scan)
    path = write_trace(beside(tmp_path / "results" / "p-3.csv"), trace)
    assert path == tmp_path / "results" / "p-3.trace.npz"
    back = read_trace(path)
    assert back.pages.tolist() == trace.pages.tolist()
    assert back.meta["page_count"] == trace.meta["page_count"]
    assert path.stat().st_size < 4 * trace.pages.size  # smaller than raw 32-bit pages
