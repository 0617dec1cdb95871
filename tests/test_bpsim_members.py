"""Shared-data pools (several LBPs, one GBP) against a plain Python model, and known cases."""

from collections import OrderedDict

import numpy as np
import pandas as pd
import pytest

from tunelab.bpsim import generators
from tunelab.bpsim.members import (
    COUNTERS,
    SharedPools,
    shared_trace,
    shared_trace_pieces,
    simulate_shared,
)
from tunelab.bpsim.policies import simulate
from tunelab.bpsim.traces import Trace


class LruPool:
    def __init__(self, size):
        self.size = size
        self.order = OrderedDict()  # least recently used first

    def __contains__(self, page):
        return page in self.order

    def reference(self, page):
        """Use ``page``, bringing it in if absent; returns the page evicted for it, if any."""
        if page in self.order:
            self.order.move_to_end(page)
            return None
        evicted = None
        if len(self.order) == self.size:
            evicted, _ = self.order.popitem(last=False)
        self.order[page] = None
        return evicted


class ClockPool:
    def __init__(self, size):
        self.size = size
        self.frames = []  # [page, reference bit]
        self.where = {}
        self.hand = 0

    def __contains__(self, page):
        return page in self.where

    def reference(self, page):
        if page in self.where:
            self.frames[self.where[page]][1] = 1
            return None
        if len(self.frames) < self.size:
            self.where[page] = len(self.frames)
            self.frames.append([page, 1])
            return None
        while self.frames[self.hand][1]:
            self.frames[self.hand][1] = 0
            self.hand = (self.hand + 1) % self.size
        evicted = self.frames[self.hand][0]
        del self.where[evicted]
        self.frames[self.hand] = [page, 1]
        self.where[page] = self.hand
        self.hand = (self.hand + 1) % self.size
        return evicted


def brute_shared(rows, members, lbp_pages, gbp_pages, policy="lru"):
    """Per-member counters; a write marks the other members' copies invalid one by one."""
    pools = [(LruPool if policy == "lru" else ClockPool)(lbp_pages) for _ in range(members)]
    valid = [{} for _ in range(members)]  # page -> the member's copy is current
    gbp = LruPool(gbp_pages)
    counts = [dict.fromkeys(COUNTERS, 0) for _ in range(members)]

    def ask_gbp(c, page):
        c["pool_data_gbp_l_reads"] += 1
        if page in gbp:
            gbp.reference(page)
        else:
            c["pool_data_gbp_p_reads"] += 1
            c["pool_data_p_reads"] += 1

    for m, page, write in rows:
        c = counts[m]
        c["pool_data_l_reads"] += 1
        if page in pools[m]:
            c["pool_data_lbp_pages_found"] += 1
            if not valid[m][page]:
                c["pool_data_gbp_invalid_pages"] += 1
                ask_gbp(c, page)
        else:
            ask_gbp(c, page)
        evicted = pools[m].reference(page)
        if evicted is not None:
            del valid[m][evicted]
        valid[m][page] = True
        if write:
            if gbp.reference(page) is not None:
                c["castouts"] += 1
            for other in range(members):
                if other != m and page in valid[other]:
                    valid[other][page] = False
    return counts


def frame(rows):
    member, page, write = zip(*rows)
    return pd.DataFrame({"member": member, "page": page, "write": write})


def counters_of(result):
    return [{name: int(row[name]) for name in COUNTERS} for _, row in result.per_member.iterrows()]


@pytest.mark.parametrize("policy", ["lru", "clock"])
@pytest.mark.parametrize("seed", range(12))
def test_matches_python_model_on_random_traces(policy, seed):
    rng = np.random.default_rng(seed)
    members = int(rng.integers(1, 5))
    pages = int(rng.integers(2, 25))
    n = int(rng.integers(50, 600))
    rows = list(
        zip(
            rng.integers(0, members, n).tolist(),
            rng.integers(0, pages, n).tolist(),
            (rng.random(n) < rng.uniform(0, 0.6)).tolist(),
        )
    )
    lbp, gbp = int(rng.integers(1, 9)), int(rng.integers(1, 7))
    result = simulate_shared(frame(rows), lbp, gbp, members=members, policy=policy)
    expected = brute_shared(rows, members, lbp, gbp, policy)
    assert counters_of(result) == expected


@pytest.mark.parametrize("policy", ["lru", "clock"])
def test_matches_python_model_on_generated_trace(policy):
    trace = shared_trace(60, 3000, 3, write_share=0.3, affinity=0.7, alpha=0.8, seed=5)
    rows = list(zip(*(trace[name].tolist() for name in ("member", "page", "write"))))
    result = simulate_shared(trace, 12, 9, policy=policy)
    assert counters_of(result) == brute_shared(rows, 3, 12, 9, policy)
    assert result.cluster["castouts"] > 0
    assert result.cluster["pool_data_gbp_invalid_pages"] > 0


@pytest.mark.parametrize("policy", ["lru", "clock"])
@pytest.mark.parametrize("size", [1, 7, 60, 400, 5000])
def test_one_member_misses_equal_single_pool(policy, size):
    pages = generators.zipf(2000, 20_000, alpha=0.8, seed=3).pages
    reads, _ = simulate(Trace(pages), size, policy)
    for write_share in (0.0, 0.5):  # one member's writes invalidate nothing
        rng = np.random.default_rng(1)
        trace = {
            "member": np.zeros(pages.size, np.int64),
            "page": pages,
            "write": rng.random(pages.size) < write_share,
        }
        row = simulate_shared(trace, size, 100, policy=policy).per_member.loc[0]
        assert row["pool_data_l_reads"] - row["pool_data_lbp_pages_found"] == reads
        assert row["pool_data_gbp_l_reads"] == reads
        assert row["pool_data_gbp_invalid_pages"] == 0


CROSS_INVALIDATION = [(0, 1, False), (1, 1, True), (0, 1, False)]


def test_cross_invalidation_sends_the_reader_to_the_gbp():
    result = simulate_shared(frame(CROSS_INVALIDATION), lbp_pages=4, gbp_pages=4)
    reader, writer = counters_of(result)
    assert reader == {
        "pool_data_l_reads": 2,
        "pool_data_lbp_pages_found": 1,  # the invalid copy was present: IBM counts it found
        "pool_data_gbp_l_reads": 2,
        "pool_data_gbp_p_reads": 1,  # the first read; the second is a GBP hit
        "pool_data_gbp_invalid_pages": 1,
        "pool_data_p_reads": 1,
        "castouts": 0,
    }
    assert writer["pool_data_gbp_invalid_pages"] == 0
    assert writer["pool_data_gbp_p_reads"] == 1  # it read the page before changing it
    gbp_hits = result.cluster["pool_data_gbp_l_reads"] - result.cluster["pool_data_gbp_p_reads"]
    assert gbp_hits == 1


def test_a_cast_out_page_is_read_from_disk():
    rows = [(1, 1, False), (0, 1, True), (0, 2, True), (1, 1, False), (1, 2, False)]
    result = simulate_shared(frame(rows), lbp_pages=4, gbp_pages=1)
    writer, reader = counters_of(result)
    assert writer["castouts"] == 1  # page 2 took page 1's place
    assert reader["pool_data_gbp_invalid_pages"] == 1
    assert reader["pool_data_gbp_l_reads"] == 3
    assert reader["pool_data_gbp_p_reads"] == 2  # page 1 twice from disk, page 2 from the GBP


def test_hit_ratios_by_ibm_formulas():
    result = simulate_shared(frame(CROSS_INVALIDATION), lbp_pages=4, gbp_pages=4)
    reader = result.per_member.loc[0]
    assert reader["lbp_hit_ratio"] == pytest.approx(1 / 2)  # found 1 of 2 logical reads
    assert reader["gbp_hit_ratio"] == pytest.approx((2 - 1) / 2)
    assert reader["hit_ratio"] == pytest.approx((2 - 1) / 2)
    writer = result.per_member.loc[1]
    assert writer["lbp_hit_ratio"] == 0 and writer["gbp_hit_ratio"] == 0
    assert result.cluster["lbp_hit_ratio"] == pytest.approx(1 / 3)
    assert result.cluster["gbp_hit_ratio"] == pytest.approx((3 - 2) / 3)
    assert result.cluster["hit_ratio"] == pytest.approx((3 - 2) / 3)
    table = result.table()
    assert list(table.index) == ["0", "1", "cluster"]
    assert table.loc["cluster", "pool_data_l_reads"] == 3


def test_member_without_references_has_nan_ratios():
    result = simulate_shared(frame([(0, 5, False)]), 2, 2, members=2)
    idle = result.per_member.loc[1]
    assert idle["pool_data_l_reads"] == 0
    assert np.isnan(idle["lbp_hit_ratio"]) and np.isnan(idle["gbp_hit_ratio"])


GOOD = {"member": [0, 1], "page": [3, 4], "write": [False, True]}


@pytest.mark.parametrize(
    ("trace", "kwargs", "field"),
    [
        ({"page": [3], "write": [False]}, {}, "'member' column"),
        ({"member": [0], "write": [False]}, {}, "'page' column"),
        ({**GOOD, "member": [0, 1, 1]}, {}, "member has 3 entries but page has 2"),
        ({**GOOD, "write": [True]}, {}, "member has 2 entries but write has 1"),
        ({**GOOD, "member": [0.0, 1.0]}, {}, "member must hold integers"),
        ({**GOOD, "member": [-1, 0]}, {}, "member numbers must be >= 0"),
        (GOOD, {"members": 1}, "member 1 in the trace, but members is 1"),
        ({**GOOD, "page": [-3, 4]}, {}, "page numbers must be >= 0"),
        ({**GOOD, "write": [0, 2]}, {}, "write must be booleans or 0/1"),
        (GOOD, {"gbp_pages": 0}, "gbp_pages must be >= 1"),
        (GOOD, {"lbp_pages": 0}, "lbp_pages must be >= 1"),
        (GOOD, {"lbp_pages": 2.5}, "lbp_pages must be a whole number"),
        (GOOD, {"policy": "fifo"}, "policy 'fifo'"),
        ([(0, 3, False)], {}, "the trace must be a DataFrame or a mapping"),
    ],
)
def test_bad_input_names_the_field(trace, kwargs, field):
    args = {"lbp_pages": 4, "gbp_pages": 4} | kwargs
    with pytest.raises(ValueError, match=field):
        simulate_shared(trace, **args)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"write_share": -0.1}, r"write_share must be within \[0, 1\], got -0.1"),
        ({"write_share": 1.5}, "write_share must be within"),
        ({"affinity": 2.0}, "affinity must be within"),
        ({"alpha": -1.0}, "alpha must be >= 0"),
        ({"pages": 0}, "pages must be >= 1"),
        ({"members": 0}, "members must be >= 1"),
        ({"references": 0}, "references must be >= 1"),
        ({"pages": 3, "members": 4}, r"pages \(3\) must be >= members \(4\)"),
    ],
)
def test_generator_rejects_bad_arguments(kwargs, field):
    args = {"pages": 100, "references": 10, "members": 4, "write_share": 0.2, "affinity": 0.5}
    with pytest.raises(ValueError, match=field):
        shared_trace(**(args | kwargs))


def test_generator_affinity_and_write_share():
    trace = shared_trace(1000, 40_000, 4, write_share=0.25, affinity=1.0, seed=2)
    assert (trace["page"] % 4 == trace["member"]).all()
    assert trace["write"].mean() == pytest.approx(0.25, abs=0.01)
    assert set(trace["member"].unique()) == {0, 1, 2, 3}
    assert trace["page"].between(0, 999).all()
    loose = shared_trace(1000, 40_000, 4, write_share=0.0, affinity=0.0, seed=2)
    assert not loose["write"].any()
    # without affinity a reference lands in its member's partition about 1 time in 4
    assert (loose["page"] % 4 == loose["member"]).mean() == pytest.approx(0.25, abs=0.01)
    half = shared_trace(1000, 40_000, 4, write_share=0.0, affinity=0.5, seed=2)
    assert (half["page"] % 4 == half["member"]).mean() == pytest.approx(0.5 + 0.5 / 4, abs=0.01)


def test_generator_is_seeded_and_zipf_is_skewed():
    a = shared_trace(1000, 20_000, 2, 0.1, 0.5, alpha=1.0, seed=7)
    b = shared_trace(1000, 20_000, 2, 0.1, 0.5, alpha=1.0, seed=7)
    pd.testing.assert_frame_equal(a, b)
    assert a.attrs["members"] == 2
    top_share = a["page"].value_counts().iloc[0] / len(a)
    assert top_share > 0.05  # uniform would give about 0.001
    flat = shared_trace(1000, 20_000, 2, 0.1, 0.5, seed=7)
    assert flat["page"].value_counts().iloc[0] / len(flat) < 0.005


def test_affinity_lowers_invalidations():
    common = {"pages": 2000, "references": 50_000, "members": 4, "write_share": 0.3}
    invalid = {}
    for affinity in (0.0, 0.9):
        trace = shared_trace(**common, affinity=affinity, seed=4)
        invalid[affinity] = simulate_shared(trace, 500, 800).cluster["pool_data_gbp_invalid_pages"]
    assert invalid[0.9] < invalid[0.0] / 2


@pytest.mark.parametrize("policy", ["lru", "clock"])
def test_a_trace_fed_in_pieces_counts_as_the_whole(policy):
    trace = shared_trace(300, 30_000, 3, write_share=0.3, affinity=0.6, alpha=0.8, seed=11)
    whole = simulate_shared(trace, 40, 25, policy=policy).per_member
    pools = SharedPools(3, 300, 40, 25, policy)
    for start, stop in ((0, 1), (1, 7_000), (7_000, 7_000), (7_000, 30_000)):
        part = trace.iloc[start:stop]
        pools.feed(part["member"].to_numpy(), part["page"].to_numpy(), part["write"].to_numpy())
    assert pools.references == 30_000
    pd.testing.assert_frame_equal(pools.result().per_member, whole, check_dtype=False)


def test_generated_pieces_make_the_trace_and_one_piece_is_the_whole():
    args = (500, 10_000, 4, 0.2, 0.7, 0.9, 3)
    one = list(shared_trace_pieces(*args))
    assert len(one) == 1
    pd.testing.assert_frame_equal(one[0], shared_trace(*args))
    pieces = list(shared_trace_pieces(*args, piece=3_000))
    assert [len(p) for p in pieces] == [3_000, 3_000, 3_000, 1_000]
    assert all(p.attrs["pages"] == 500 and p.attrs["members"] == 4 for p in pieces)
    both = pd.concat(pieces, ignore_index=True)
    assert both["page"].between(0, 499).all()
    assert (both["page"] % 4 == both["member"]).mean() == pytest.approx(0.7 + 0.3 / 4, abs=0.03)
    assert both["write"].mean() == pytest.approx(0.2, abs=0.02)


@pytest.mark.parametrize(
    ("columns", "field"),
    [
        (([0, 4], [1, 2], [0, 0]), "member 4 outside 0..3"),
        (([0, 1], [1, 100], [0, 0]), "page 100 outside 0..99"),
        (([0, 1], [-1, 2], [0, 0]), "page -1 outside"),
        (([0, 1], [1], [0, 0]), "one entry per reference"),
    ],
)
def test_pieces_out_of_range_are_refused(columns, field):
    pools = SharedPools(4, 100, 10, 10)
    with pytest.raises(ValueError, match=field):
        pools.feed(*(np.asarray(c) for c in columns))
    assert pools.references == 0
