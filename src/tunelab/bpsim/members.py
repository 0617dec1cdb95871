"""Shared-data buffer pools: several members, each with a local pool, and one group pool.

The model follows DB2 pureScale's two-tier buffering. Each of M members has a local buffer
pool (LBP) of ``lbp_pages`` pages, replaced by LRU or CLOCK; the group buffer pool (GBP) of
``gbp_pages`` pages at the caching facility holds the pages members have changed, replaced by
LRU. A trace has one row per page reference, in time order: ``member`` (0..M-1), ``page`` and
``write``.

Every reference, read or write, is a getpage by its member:

- the page's copy in the member's LBP is *valid* if no other member has changed the page since
  the copy was taken. Present and valid: the reference is resolved in the LBP.
- present but invalid, or absent: the member asks the GBP (a GBP logical read). The page is
  there if it was changed and not cast out since; else the member reads it from disk. Either
  way it lands in the LBP as a valid copy (an absent page takes a buffer, evicting by policy).

A write is that getpage followed by a change: the page's new version is registered in the GBP
(the GBP's least recently used page is cast out to disk if the GBP is full and the page is not
there yet) and every other member's copy of it becomes invalid; the writer's copy stays valid.
A GBP hit also makes the page the GBP's most recently used one. Invalid copies stay in their
LBP, taking a buffer, until evicted or refreshed.

In DB2 a member asks the GBP on an LBP miss only for pages that are shared (GBP-dependent);
here every miss and every invalid copy asks the GBP first, which is what the GBP hit ratio
formula below assumes.

Counters per member, with the names MON_GET_BUFFERPOOL gives them (definitions after IBM, "DB2
pureScale: Best Practices for Performance and Monitoring", 2012):

- ``pool_data_l_reads``: every reference of the member, reads and writes;
- ``pool_data_lbp_pages_found``: references whose page was present in the LBP, valid *or
  invalid* (as IBM counts it: a larger LBP does not remove invalidations);
- ``pool_data_gbp_l_reads``: references that asked the GBP (page absent or invalid);
- ``pool_data_gbp_p_reads``: of those, pages the GBP did not hold, so read from disk;
- ``pool_data_gbp_invalid_pages``: references that found their LBP copy invalid;
- ``pool_data_p_reads``: pages read from disk; equal to ``pool_data_gbp_p_reads`` here,
  because every page is treated as shared (GBP-dependent) and there is no prefetch;
- ``castouts``: pages cast out of a full GBP, charged to the member whose write needed room.

The references resolved with a valid LBP copy are
``pool_data_lbp_pages_found - pool_data_gbp_invalid_pages``. Ratios (fractions, not percent),
by IBM's pureScale formulas without prefetch (the asynchronous counters are zero):

- ``lbp_hit_ratio`` = pool_data_lbp_pages_found / pool_data_l_reads;
- ``gbp_hit_ratio`` = (pool_data_gbp_l_reads - pool_data_gbp_p_reads) / pool_data_gbp_l_reads;
- ``hit_ratio`` (overall) = (pool_data_l_reads - pool_data_p_reads) / pool_data_l_reads.

The cluster row sums the counters over members and takes its ratios from the sums. A ratio
with a zero denominator is NaN.

Not modelled: GBP directory entries (registrations of read-only pages take no GBP space),
writes reaching the GBP at commit rather than at the change, castout by SOFTMAX (only a full
GBP casts out), page locks and reclaims, prefetch. With one member, writes invalidate nothing
and the LBP behaves exactly as the single pool of ``policies``: its misses
(pool_data_l_reads - pool_data_lbp_pages_found) equal that simulator's reads.

The kernels are O(1) per reference: per-member LRU lists (or CLOCK frames) indexed by dense page
id, a GBP LRU list likewise, and a version counter per page, bumped by each write; a member's
copy is valid when the version it took equals the page's current one, so a write invalidates
the other members' copies without visiting them.

``shared_trace`` makes synthetic traces with member affinity and a write share.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numba import njit

from tunelab.bpsim.stackdist import dense_ids

COLUMNS = ("member", "page", "write")
POLICIES = ("lru", "clock")
COUNTERS = (
    "pool_data_l_reads",
    "pool_data_lbp_pages_found",
    "pool_data_gbp_l_reads",
    "pool_data_gbp_p_reads",
    "pool_data_gbp_invalid_pages",
    "pool_data_p_reads",
    "castouts",
)
RATIOS = ("lbp_hit_ratio", "gbp_hit_ratio", "hit_ratio")
N_COUNTERS = len(COUNTERS)

# Column numbers of COUNTERS in the kernels' count table.
L_READS = 0
LBP_FOUND = 1
GBP_L_READS = 2
GBP_P_READS = 3
GBP_INVALID = 4
P_READS = 5
CASTOUTS = 6

ABSENT = -1  # the version a member holds of a page not in its LBP
PREV = 0  # link fields of a list node
NEXT = 1


# --- kernels ---------------------------------------------------------------------------------


@njit(cache=True)
def _new_lists(rows, nodes):
    """One empty circular doubly linked list per row; node ``nodes`` is every row's sentinel.

    ``links[row, x]`` holds node x's (previous, next): both in one cache line.
    """
    links = np.empty((rows, nodes + 1, 2), np.int32)
    for r in range(rows):
        links[r, nodes, PREV] = nodes
        links[r, nodes, NEXT] = nodes
    return links


@njit(cache=True)
def _unlink(links, row, x):
    p = links[row, x, PREV]
    q = links[row, x, NEXT]
    links[row, p, NEXT] = q
    links[row, q, PREV] = p


@njit(cache=True)
def _push_front(links, row, x, head):
    first = links[row, head, NEXT]
    links[row, x, NEXT] = first
    links[row, first, PREV] = x
    links[row, x, PREV] = head
    links[row, head, NEXT] = x


@njit(cache=True)
def _read_through_gbp(counts, m, glinks, in_gbp, x, head):
    """Member ``m`` asks the GBP for page ``x``; a miss reads the page from disk."""
    counts[m, GBP_L_READS] += 1
    if in_gbp[x]:
        _unlink(glinks, 0, x)
        _push_front(glinks, 0, x, head)
    else:
        counts[m, GBP_P_READS] += 1
        counts[m, P_READS] += 1


@njit(cache=True)
def _register_in_gbp(glinks, in_gbp, gused, gbp_pages, x, head):
    """Put the changed page ``x`` in the GBP as its most recent page; 1 if it cast one out."""
    castout = 0
    if in_gbp[x]:
        _unlink(glinks, 0, x)
    else:
        if gused[0] == gbp_pages:
            victim = glinks[0, head, PREV]
            _unlink(glinks, 0, victim)
            in_gbp[victim] = 0
            castout = 1
        else:
            gused[0] += 1
        in_gbp[x] = 1
    _push_front(glinks, 0, x, head)
    return castout


@njit(cache=True)
def _shared_lru(member, ids, write, held, current, gbp, lru, counts, lbp_pages, gbp_pages):
    """Adds to ``counts`` (members x COUNTERS) what the references do to LRU local pools
    sharing an LRU group pool, updating the state arrays in place (so a trace may come in
    pieces).

    ``held[m, x]``: the version of page x in member m's LBP (ABSENT if none); ``current[x]``:
    page x's version, its number of writes so far. Both start as ``SharedPools`` makes them.
    ``gbp`` and ``lru`` are the GBP's and the LBPs' state as ``_gbp_state`` and
    ``_lru_state`` make them.
    """
    pages = held.shape[1]
    head = pages
    glinks, in_gbp, gused = gbp
    links, used = lru
    for k in range(ids.shape[0]):
        m = member[k]
        x = ids[k]
        counts[m, L_READS] += 1
        version = held[m, x]
        if version != ABSENT:
            counts[m, LBP_FOUND] += 1
            _unlink(links, m, x)
            if version != current[x]:
                counts[m, GBP_INVALID] += 1
                _read_through_gbp(counts, m, glinks, in_gbp, x, head)
        else:
            _read_through_gbp(counts, m, glinks, in_gbp, x, head)
            if used[m] == lbp_pages:
                victim = links[m, head, PREV]
                _unlink(links, m, victim)
                held[m, victim] = ABSENT
            else:
                used[m] += 1
        _push_front(links, m, x, head)
        if write[k]:
            current[x] += 1
            counts[m, CASTOUTS] += _register_in_gbp(glinks, in_gbp, gused, gbp_pages, x, head)
        held[m, x] = current[x]


@njit(cache=True)
def _clock_frame(page_in, ref, hand, filled, held, frame_of, m, frames):
    """A frame of member ``m``'s LBP for a new page: a free one, else CLOCK's victim's."""
    if filled[m] < frames:
        f = filled[m]
        filled[m] += 1
        return f
    h = hand[m]
    while ref[m, h]:
        ref[m, h] = 0
        h += 1
        if h == frames:
            h = 0
    victim = page_in[m, h]
    frame_of[m, victim] = -1
    held[m, victim] = ABSENT
    hand[m] = h + 1 if h + 1 < frames else 0
    return h


@njit(cache=True)
def _shared_clock(member, ids, write, held, current, gbp, clock, counts, frames, gbp_pages):
    """As ``_shared_lru`` for CLOCK local pools of ``frames`` pages (state: ``_clock_state``)."""
    pages = held.shape[1]
    head = pages
    glinks, in_gbp, gused = gbp
    frame_of, page_in, ref, hand, filled = clock
    for k in range(ids.shape[0]):
        m = member[k]
        x = ids[k]
        counts[m, L_READS] += 1
        version = held[m, x]
        if version != ABSENT:
            counts[m, LBP_FOUND] += 1
            f = frame_of[m, x]
            if version != current[x]:
                counts[m, GBP_INVALID] += 1
                _read_through_gbp(counts, m, glinks, in_gbp, x, head)
        else:
            _read_through_gbp(counts, m, glinks, in_gbp, x, head)
            f = _clock_frame(page_in, ref, hand, filled, held, frame_of, m, frames)
            page_in[m, f] = x
            frame_of[m, x] = f
        ref[m, f] = 1
        if write[k]:
            current[x] += 1
            counts[m, CASTOUTS] += _register_in_gbp(glinks, in_gbp, gused, gbp_pages, x, head)
        held[m, x] = current[x]


def _gbp_state(pages: int):
    """The GBP's LRU list, its membership flags and its page count."""
    return _new_lists(1, pages), np.zeros(pages, np.uint8), np.zeros(1, np.int64)


def _lru_state(members: int, pages: int):
    """The LBPs' LRU lists and page counts."""
    return _new_lists(members, pages), np.zeros(members, np.int64)


def _clock_state(members: int, pages: int, frames: int):
    """The LBPs' CLOCK frames: frame of each page, page in each frame, reference bits, hands,
    frames filled."""
    return (
        np.full((members, pages), -1, np.int32),
        np.empty((members, frames), np.int32),
        np.zeros((members, frames), np.uint8),
        np.zeros(members, np.int64),
        np.zeros(members, np.int64),
    )


# --- checking the input ----------------------------------------------------------------------


def _column(trace, name: str) -> np.ndarray:
    if name not in trace:
        raise ValueError(f"the trace has no {name!r} column (it needs {', '.join(COLUMNS)})")
    values = np.asarray(trace[name])
    if values.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {values.shape}")
    return values


def _zeros_and_ones(values: np.ndarray) -> bool:
    return values.dtype.kind in "iu" and bool(np.isin(values, (0, 1)).all())


def _trace_columns(trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The member, page and write columns, checked for type and for one entry per reference."""
    if not isinstance(trace, pd.DataFrame | Mapping):
        raise ValueError(
            f"the trace must be a DataFrame or a mapping of columns {', '.join(COLUMNS)}, "
            f"got {type(trace).__name__}"
        )
    member, page, write = (_column(trace, name) for name in COLUMNS)
    for name, values in (("page", page), ("write", write)):
        if values.size != member.size:
            raise ValueError(
                f"member has {member.size} entries but {name} has {values.size}: "
                "the columns need one entry per reference"
            )
    if member.dtype.kind not in "iu":
        raise ValueError(f"member must hold integers, got dtype {member.dtype}")
    if page.dtype.kind not in "iu":
        raise ValueError(f"page must hold integers, got dtype {page.dtype}")
    if page.dtype.kind == "i" and page.size and page.min() < 0:
        raise ValueError("page numbers must be >= 0")
    if write.dtype.kind != "b" and not _zeros_and_ones(write):
        raise ValueError(f"write must be booleans or 0/1, got dtype {write.dtype}")
    return member, page, write.astype(np.uint8)


def _member_count(member: np.ndarray, members: int | None, trace) -> int:
    """``members`` as given, else the trace's ``attrs['members']``, else the largest + 1."""
    if members is None:
        members = getattr(trace, "attrs", {}).get("members")
    top = int(member.max()) if member.size else -1
    if member.size and member.min() < 0:
        raise ValueError(f"member numbers must be >= 0, got {int(member.min())}")
    if members is None:
        return max(top + 1, 1)
    if members < 1:
        raise ValueError(f"members must be >= 1, got {members}")
    if top >= members:
        raise ValueError(f"member {top} in the trace, but members is {members} (0..{members - 1})")
    return int(members)


def _check_pool_sizes(**sizes: int) -> None:
    for name, size in sizes.items():
        if not isinstance(size, int | np.integer):
            raise ValueError(f"{name} must be a whole number of pages, got {size!r}")
        if size < 1:
            raise ValueError(f"{name} must be >= 1 (a pool holds at least one page), got {size}")


# --- simulation ------------------------------------------------------------------------------


def with_ratios(counts: pd.DataFrame) -> pd.DataFrame:
    """``counts`` with IBM's pureScale hit ratios added, as fractions (NaN over zero)."""
    out = counts.copy()
    l_reads = counts["pool_data_l_reads"]
    gbp_l_reads = counts["pool_data_gbp_l_reads"]
    out["lbp_hit_ratio"] = counts["pool_data_lbp_pages_found"] / l_reads
    out["gbp_hit_ratio"] = (gbp_l_reads - counts["pool_data_gbp_p_reads"]) / gbp_l_reads
    out["hit_ratio"] = (l_reads - counts["pool_data_p_reads"]) / l_reads
    return out


@dataclass(frozen=True)
class SharedPoolResult:
    """Counters and hit ratios per member (index ``member``) and for the whole cluster.

    ``cluster`` maps every column name to its cluster value: the counters summed over the
    members (ints), the ratios computed from those sums (floats).
    """

    per_member: pd.DataFrame
    cluster: dict[str, float]

    @classmethod
    def from_counts(cls, counts: np.ndarray) -> SharedPoolResult:
        frame = pd.DataFrame(counts, columns=list(COUNTERS))
        frame.index.name = "member"
        total = with_ratios(frame.sum().to_frame().T)
        cluster = {name: int(total[name].iloc[0]) for name in COUNTERS}
        cluster |= {name: float(total[name].iloc[0]) for name in RATIOS}
        return cls(with_ratios(frame), cluster)

    def table(self) -> pd.DataFrame:
        """One row per member, then the cluster row (index labels as text)."""
        rows = self.per_member.copy()
        rows.index = rows.index.astype(str)
        cluster = pd.DataFrame([self.cluster], index=["cluster"])
        return pd.concat([rows, cluster]).rename_axis("member")


class SharedPools:
    """M LBPs and one GBP over page ids 0..pages-1, fed a trace in pieces (``feed``): the
    state is O(members x pages), so a trace of any length runs in the same memory.

    ``policy`` is the LBPs' (``lru`` or ``clock``); the GBP is LRU.
    """

    def __init__(
        self, members: int, pages: int, lbp_pages: int, gbp_pages: int, policy: str = "lru"
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy {policy!r}: allowed values are {', '.join(POLICIES)}")
        _check_pool_sizes(lbp_pages=lbp_pages, gbp_pages=gbp_pages)
        for name, value in (("members", members), ("pages", pages)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self.members, self.pages, self.policy = int(members), int(pages), policy
        self.lbp_pages, self.gbp_pages = int(lbp_pages), int(gbp_pages)
        self.references = 0
        # A version counts a page's writes: int32 (half the memory traffic of int64) until
        # the references fed could overflow it.
        self._held = np.full((self.members, self.pages), ABSENT, np.int32)
        self._current = np.zeros(self.pages, np.int32)
        self._gbp = _gbp_state(self.pages)
        self._counts = np.zeros((self.members, N_COUNTERS), np.int64)
        if policy == "lru":
            self._lbp = _lru_state(self.members, self.pages)
        else:
            self._frames = min(self.lbp_pages, self.pages)  # frames beyond the pages stay empty
            self._lbp = _clock_state(self.members, self.pages, self._frames)

    def feed(self, member: np.ndarray, page: np.ndarray, write: np.ndarray) -> None:
        """The next references, in time order: member numbers, page ids, write flags."""
        member = np.ascontiguousarray(member, dtype=np.int32)
        page = np.ascontiguousarray(page, dtype=np.int32)
        write = np.ascontiguousarray(write, dtype=np.uint8)
        if not member.size == page.size == write.size:
            raise ValueError("member, page and write need one entry per reference")
        if not member.size:
            return
        for name, values, top in (("member", member, self.members), ("page", page, self.pages)):
            low, high = int(values.min()), int(values.max())
            if low < 0 or high >= top:
                raise ValueError(f"{name} {low if low < 0 else high} outside 0..{top - 1}")
        if self.references + member.size >= 2**31 - 1 and self._held.dtype == np.int32:
            self._held, self._current = self._held.astype(np.int64), self._current.astype(np.int64)
        args = (member, page, write, self._held, self._current, self._gbp, self._lbp, self._counts)
        if self.policy == "lru":
            _shared_lru(*args, self.lbp_pages, self.gbp_pages)
        else:
            _shared_clock(*args, self._frames, self.gbp_pages)
        self.references += member.size

    def result(self) -> SharedPoolResult:
        return SharedPoolResult.from_counts(self._counts.copy())


def simulate_shared(
    trace,
    lbp_pages: int,
    gbp_pages: int,
    members: int | None = None,
    policy: str = "lru",
) -> SharedPoolResult:
    """Run ``trace`` (columns member, page, write) through M LBPs and one GBP.

    ``members`` defaults to ``trace.attrs['members']`` (set by ``shared_trace``), else to the
    largest member number + 1. ``policy`` is the LBPs' (``lru`` or ``clock``); the GBP is LRU.
    Page numbers may be any non-negative integers (mapped to dense ids); ``SharedPools``
    takes a trace in pieces.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r}: allowed values are {', '.join(POLICIES)}")
    _check_pool_sizes(lbp_pages=lbp_pages, gbp_pages=gbp_pages)
    member, page, write = _trace_columns(trace)
    members = _member_count(member, members, trace)
    ids, distinct = dense_ids(page)
    pools = SharedPools(members, max(distinct, 1), int(lbp_pages), int(gbp_pages), policy)
    pools.feed(member, ids, write)
    return pools.result()


# --- synthetic traces ------------------------------------------------------------------------


def _check_share(**shares: float) -> None:
    for name, share in shares.items():
        if not 0 <= share <= 1:
            raise ValueError(f"{name} must be within [0, 1], got {share}")


def _popularity(pages: int, alpha: float | None, rng: np.random.Generator) -> np.ndarray | None:
    """Page weights 1/rank**alpha, ranks shuffled over the pages; None for uniform access."""
    if alpha is None:
        return None
    rank = rng.permutation(pages)
    return (rank + 1.0) ** -float(alpha)


class _PageDraw:
    """Draws pages from ``candidates``, uniformly or in proportion to their weights (the
    cumulative weights computed once, for every piece of a trace)."""

    def __init__(self, candidates: np.ndarray, weights: np.ndarray | None) -> None:
        self.candidates = candidates
        self.cdf = None
        if weights is not None:
            self.cdf = np.cumsum(weights[candidates])
            self.cdf /= self.cdf[-1]

    def __call__(self, count: int, rng: np.random.Generator) -> np.ndarray:
        if count == 0:
            return self.candidates[:0]
        if self.cdf is None:
            return self.candidates[rng.integers(0, self.candidates.size, count)]
        picks = np.searchsorted(self.cdf, rng.random(count))
        return self.candidates[np.minimum(picks, self.candidates.size - 1)]


PIECE = 1 << 22  # references per piece of a generated trace: 4 Mi, about 60 MB of columns


def shared_trace_pieces(
    pages: int,
    references: int,
    members: int,
    write_share: float,
    affinity: float,
    alpha: float | None = None,
    seed: int = 0,
    piece: int = PIECE,
) -> Iterator[pd.DataFrame]:
    """``shared_trace`` in pieces of at most ``piece`` references, in time order, so that a
    trace of any length takes the memory of one piece. Pages are numbered 0..pages-1. A
    trace of at most ``piece`` references is one piece, equal to ``shared_trace``'s."""
    for name, value in (
        ("pages", pages),
        ("references", references),
        ("members", members),
        ("piece", piece),
    ):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    _check_share(write_share=write_share, affinity=affinity)
    if alpha is not None and not alpha >= 0:
        raise ValueError(f"alpha must be >= 0 (or None for uniform access), got {alpha}")
    if affinity > 0 and pages < members:
        raise ValueError(
            f"pages ({pages}) must be >= members ({members}) when affinity > 0: "
            "each member needs a partition of its own"
        )
    attrs = {
        "generator": "shared_trace",
        "pages": pages,
        "members": members,
        "write_share": write_share,
        "affinity": affinity,
        "alpha": alpha,
        "seed": seed,
    }
    rng = np.random.default_rng(seed)
    weights = _popularity(pages, alpha, rng)
    anywhere = _PageDraw(np.arange(pages), weights)
    own_draw = [_PageDraw(np.arange(m, pages, members), weights) for m in range(members)]
    for start in range(0, references, piece):
        n = min(piece, references - start)
        member = rng.integers(0, members, n).astype(np.int32)
        own = rng.random(n) < affinity
        write = rng.random(n) < write_share
        page = np.empty(n, np.int64)
        page[~own] = anywhere(int((~own).sum()), rng)
        for m in range(members):
            rows = np.flatnonzero(own & (member == m))
            page[rows] = own_draw[m](rows.size, rng)
        frame = pd.DataFrame({"member": member, "page": page, "write": write})
        frame.attrs = dict(attrs)
        yield frame


def shared_trace(
    pages: int,
    references: int,
    members: int,
    write_share: float,
    affinity: float,
    alpha: float | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """A shared-data trace: columns member, page, write, one row per reference.

    Each reference comes from a member chosen uniformly. With probability ``affinity`` it goes
    to the member's own partition of the pages (page % members == member), otherwise to any
    page (its own partition included). Pages are drawn uniformly (``alpha=None``) or Zipf-skewed
    with popularity 1/rank**alpha, ranks shuffled over the pages; within a partition the same
    popularities apply. Each reference is a write with probability ``write_share``.
    ``attrs`` records the parameters, ``members`` among them.
    """
    pieces = list(
        shared_trace_pieces(pages, references, members, write_share, affinity, alpha, seed)
    )
    if len(pieces) == 1:
        return pieces[0]
    frame = pd.concat(pieces, ignore_index=True)
    frame.attrs = dict(pieces[0].attrs)
    return frame
