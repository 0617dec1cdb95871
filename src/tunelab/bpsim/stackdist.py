"""Exact LRU stack distances in one pass, O(N (1 + M / 2**19)) time and O(M) memory.

The stack (reuse) distance of a reference is the number of distinct pages referenced since
the previous reference to the same page, itself included; a first reference has infinite
distance (a compulsory miss). Under LRU a reference hits in a pool of C pages exactly when
its distance is <= C (Mattson et al., 1970), so one histogram of distances gives the hits of
every pool size at once.

How the kernel finds each distance: a table holds, per page, the time position of its latest
reference (indexed by the page key itself when the keys are dense enough, else an open-
addressing hash map); those positions are the set bits of a bitmap over time. Every distinct
page seen has exactly one set bit, all before the current position, so the distance of a
re-reference is the number of distinct pages so far minus the set bits before the page's
previous position. That prefix count is the same fixed, branch-free work wherever the
position lies: masked popcounts over its 512-position line (one 64-byte cache line of the
bitmap), masked sums over counts of set bits per line within its block of 64 lines, and per
block within its super-block of 64 blocks (vector code: 64 counts of 16 bits are two cache
lines), and a sum over the few super-blocks before it (2**21 positions each). An update
changes one count at each level. When the time axis fills, the live positions are compacted
to the front (each moves to its rank, read off the bitmap) and the axis is sized to a few
positions per distinct page, so memory stays proportional to distinct pages however long the
trace is: 8 bytes per hash slot (at most half full), half a byte of bitmap and a few bytes of
counts per 512 positions. The direct table costs 4 bytes per key of the range and 4 per time
position (the key at each position, which is what lets a compaction walk the bitmap instead of
the table), and saves the hash probe, the reference's most expensive cache miss. A distance's
histogram count is added a few references later, its cache line prefetched meanwhile.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing multiplier
_LOW32 = np.uint64(0xFFFFFFFF)
_LINE_SHIFT = 3  # 8 words of 64 bits: 512 time positions, one cache line of the bitmap
_WORDS_PER_LINE = 1 << _LINE_SHIFT
_LINE = 64 << _LINE_SHIFT
_FAN_SHIFT = 6  # 64 lines a block, 64 blocks a super-block
_FAN = 1 << _FAN_SHIFT
_BLOCK = _LINE << _FAN_SHIFT
_SUPER = _BLOCK << _FAN_SHIFT
_MIN_LINES = _FAN
_AXIS_PER_PAGE = 4  # time positions per distinct page after a compaction
_RING = 16  # references between a distance and its histogram count
_AHEAD = 16  # references ahead whose hash slot is prefetched
MAX_DISTINCT = 1 << 29  # positions must fit in the upper 32 bits of a slot
DIRECT_LIMIT = 1 << 24  # largest key range indexed directly (64 MiB of uint32 positions)


@intrinsic
def _prefetch(typingctx, arr, idx):
    """Hint the CPU to bring ``arr[idx]`` into cache (llvm.prefetch); no effect on results."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _popcount(typingctx, x):
    """Number of set bits of a uint64 (one popcnt instruction)."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return sig, codegen


@njit(cache=True)
def _rehash32(table, bits):
    """A table of 2**bits slots holding the live slots of ``table`` (32-bit key in the low half)."""
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    out = np.zeros(1 << bits, np.uint64)
    for slot in range(table.shape[0]):
        v = table[slot]
        if v != 0:
            h = np.int64(((v & _LOW32) * _GOLDEN) >> shift)
            while out[h] != 0:
                h = (h + 1) & mask
            out[h] = v
    return out


@njit(cache=True)
def _sum_before(counts, base, upto):
    """Sum of counts[base : base + upto] for 0 <= upto < 64, as a fixed-length masked sum.

    Unsigned indices spare numba's negative-index fix-up, which lets LLVM vectorize the loop.
    """
    s = np.int32(0)
    b = np.uint64(base)
    for i in range(_FAN):
        s += np.int32(counts[b + np.uint64(i)]) * np.int32(i < upto)
    return s


@njit(cache=True)
def _fill_counts(c1, c2, c3, live):
    """Counts per line, block and super-block when positions 0..live-1 are the set ones."""
    for i in range(c1.shape[0]):
        c1[i] = max(0, min(_LINE, live - _LINE * i))
    for i in range(c2.shape[0]):
        c2[i] = max(0, min(_BLOCK, live - _BLOCK * i))
    for i in range(c3.shape[0]):
        c3[i] = max(0, min(_SUPER, live - _SUPER * i))


@njit(cache=True)
def _log2(size):
    """The smallest b with 2**b >= size."""
    bits = 0
    while (1 << bits) < size:
        bits += 1
    return bits


@njit(cache=True)
def _run(pages, flags, dist_out, k, t, cap, nid, marks, c1, c2, c3, last, who, table, hist):
    """Process references from ``k`` until the trace ends, the time axis fills, the histogram
    needs more columns or the hash map more slots; returns ``(k, t, nid)`` to resume from.

    Kept apart from the growth and compaction in ``_lru_scan`` so that no array is replaced
    inside this loop: the same loop with its arrays replaced inside it ran at half the speed.
    """
    n = pages.shape[0]
    use_flags = flags.shape[0] == n
    want_dist = dist_out.shape[0] == n
    direct = last.shape[0] > 0
    one = np.uint64(1)
    zero = np.uint64(0)
    hmask = table.shape[0] - 1
    hshift = np.uint64(64 - _log2(table.shape[0]))
    limit = hist.shape[1] - 1
    # a histogram count is added _RING references after its distance is known, its line
    # prefetched meanwhile: the counts of a large working set sit beyond the L2 cache, and
    # waiting for each one stalled the loop
    counts = hist.reshape(-1)
    width = hist.shape[1]
    ring = np.zeros(_RING, np.int64)
    pending = 0
    while k < n and t < cap and nid < limit and (direct or 2 * nid <= hmask + 1):
        key = np.uint64(pages[k])
        cls = 0
        if use_flags and flags[k] != 0:
            cls = 1
        h = 0
        if direct:
            if k + _AHEAD < n:
                _prefetch(last, np.int64(pages[k + _AHEAD]))
            v = np.uint64(last[np.int64(key)]) << np.uint64(32)
        else:
            if k + _AHEAD < n:
                _prefetch(table, np.int64((np.uint64(pages[k + _AHEAD]) * _GOLDEN) >> hshift))
            h = np.int64((key * _GOLDEN) >> hshift)
            v = table[h]
            while v != 0 and (v & _LOW32) != key:
                h = (h + 1) & hmask
                v = table[h]

        if v != 0:
            # Every distinct page seen so far has exactly one set bit, all before t, so the
            # pages referenced since q, this one included, are nid minus the set bits below q.
            # That prefix is the same branch-free work for any q: masked popcounts in q's
            # line, masked sums of the counts before it in its block and super-block, and the
            # super-blocks before it (few: 2**21 positions each).
            q = np.int64(v >> np.uint64(32)) - 1
            wq = q >> 6
            lq = wq >> _LINE_SHIFT
            bq = lq >> _FAN_SHIFT
            sq = bq >> _FAN_SHIFT
            below = (one << np.uint64(q & 63)) - one
            iq = wq & (_WORDS_PER_LINE - 1)
            base = lq << _LINE_SHIFT
            c = zero
            for w in range(_WORDS_PER_LINE):
                earlier = zero - np.uint64(w < iq)
                same = zero - np.uint64(w == iq)
                c += _popcount(marks[np.uint64(base + w)] & (earlier | (same & below)))
            prefix = np.int64(c)
            prefix += _sum_before(c1, bq << _FAN_SHIFT, lq & (_FAN - 1))
            prefix += _sum_before(c2, sq << _FAN_SHIFT, bq & (_FAN - 1))
            for i in range(sq):
                prefix += c3[i]
            d = nid - prefix
            marks[wq] &= ~(one << np.uint64(q & 63))
            c1[lq] -= 1
            c2[bq] -= 1
            c3[sq] -= 1
        else:
            d = 0
            nid += 1
        slot = k & (_RING - 1)
        if pending == _RING:
            counts[ring[slot]] += 1
        else:
            pending += 1
        ring[slot] = cls * width + d
        _prefetch(counts, ring[slot])
        wt = t >> 6
        lt = wt >> _LINE_SHIFT
        marks[wt] |= one << np.uint64(t & 63)
        c1[lt] += 1
        c2[lt >> _FAN_SHIFT] += 1
        c3[lt >> (2 * _FAN_SHIFT)] += 1
        if direct:
            last[np.int64(key)] = t + 1
            who[t] = key
        else:
            table[h] = (np.uint64(t + 1) << np.uint64(32)) | key
        if want_dist:
            dist_out[k] = d
        t += 1
        k += 1
    for i in range(pending):
        counts[ring[(k - 1 - i) & (_RING - 1)]] += 1
    return k, t, nid


@njit(cache=True)
def _compact(marks, who, last, table, direct):
    """Move each live time position to its rank among the live positions."""
    one = np.uint64(1)
    zero = np.uint64(0)
    if direct:
        # walk the set bits in order; rank <= position, so ``who`` moves in place
        rank = 0
        for w in range(marks.shape[0]):
            x = marks[w]
            while x != zero:
                low = x & (zero - x)
                p = (w << 6) + np.int64(_popcount(low - one))
                moved = who[p]
                who[rank] = moved
                rank += 1
                last[moved] = rank
                x ^= low
    else:
        before = np.empty(marks.shape[0], np.int64)
        acc = 0
        for w in range(marks.shape[0]):
            before[w] = acc
            acc += _popcount(marks[w])
        for slot in range(table.shape[0]):
            v = table[slot]
            if v != 0:
                p = np.int64(v >> np.uint64(32)) - 1
                w = p >> 6
                below = marks[w] & ((one << np.uint64(p & 63)) - one)
                rank = before[w] + np.int64(_popcount(below))
                table[slot] = (np.uint64(rank + 1) << np.uint64(32)) | (v & _LOW32)


@njit(cache=True)
def _lru_scan(pages, flags, dist_out, hist, universe):
    """Distance histograms by reference class; optional per-reference distances.

    ``pages`` are uint32 page keys. ``flags`` is either empty (every reference is class 0) or
    one uint8 per reference (non-zero: class 1, a page brought in by prefetch). ``dist_out``
    is either empty or gets one distance per reference, 0 meaning a first reference. ``hist``
    is a zeroed (2, L) array whose dtype the counts take (int32 keeps the histogram small in
    cache; int64 for traces of 2**31 references or more); it is grown as needed. Returns
    ``(hist, distinct)`` where ``hist[c, d]`` counts class-c references at distance d and
    ``hist[c, 0]`` counts first references. ``universe`` > 0 promises every key is below it
    and selects the direct table; 0 selects the hash map.
    """
    n = pages.shape[0]
    one = np.uint64(1)
    zero = np.uint64(0)
    direct = universe > 0
    # hash map: slot = (1 + time position of the page's latest reference) << 32 | page key;
    # 0 marks a free slot
    table = np.zeros(0 if direct else 1 << 12, np.uint64)
    nlines = _MIN_LINES
    cap = nlines * _LINE
    # direct table: last[key] = 1 + position of the key's latest reference, 0 if none yet;
    # who[position] = the key referenced there
    last = np.zeros(universe, np.uint32)
    who = np.zeros(cap if direct else 0, np.uint32)
    marks = np.zeros(nlines * _WORDS_PER_LINE, np.uint64)
    # set bits per line, per block of 64 lines and per super-block of 64 blocks; the first two
    # are padded to whole groups of 64 so that a masked sum over a group stays in bounds
    c1 = np.zeros(nlines, np.uint16)
    c2 = np.zeros(_FAN, np.uint16)
    c3 = np.zeros(1, np.int32)
    nid = 0
    t = 0
    k = 0
    while k < n:
        k, t, nid = _run(
            pages, flags, dist_out, k, t, cap, nid, marks, c1, c2, c3, last, who, table, hist
        )
        if nid >= hist.shape[1] - 1:
            grown = np.zeros((2, 2 * hist.shape[1]), hist.dtype)
            grown[:, : hist.shape[1]] = hist
            hist = grown
        if not direct and 2 * nid > table.shape[0]:  # keep the load factor at most one half
            table = _rehash32(table, _log2(table.shape[0]) + 1)
        if t == cap:
            _compact(marks, who, last, table, direct)
            # size the axis to a few positions per distinct page, in whole blocks
            newlines = max(nlines, (_AXIS_PER_PAGE * nid + _LINE - 1) // _LINE)
            newlines = (newlines + _FAN - 1) // _FAN * _FAN
            if newlines > nlines:
                nlines = newlines
                cap = nlines * _LINE
                marks = np.zeros(nlines * _WORDS_PER_LINE, np.uint64)
                c1 = np.zeros(nlines, np.uint16)
                blocks = nlines // _FAN
                c2 = np.zeros((blocks + _FAN - 1) // _FAN * _FAN, np.uint16)
                c3 = np.zeros(c2.shape[0] // _FAN, np.int32)
                if direct:
                    grown_who = np.zeros(cap, np.uint32)
                    grown_who[:nid] = who[:nid]
                    who = grown_who
            full = nid >> 6
            marks[:full] = ~zero
            marks[full:] = zero
            if nid & 63:
                marks[full] = (one << np.uint64(nid & 63)) - one
            _fill_counts(c1, c2, c3, nid)
            t = nid
    return hist[:, : nid + 1].copy(), nid


@njit(cache=True)
def _dense_ids(pages):
    """Ids 0..M-1 in order of first reference (uint64 keys, open addressing)."""
    n = pages.shape[0]
    bits = 12
    hmask = (1 << bits) - 1
    hshift = np.uint64(64 - bits)
    keys = np.zeros(1 << bits, np.uint64)
    vals = np.full(1 << bits, -1, np.int32)
    ids = np.empty(n, np.int32)
    nid = 0
    for k in range(n):
        key = pages[k]
        h = np.int64((key * _GOLDEN) >> hshift)
        v = vals[h]
        while v >= 0 and keys[h] != key:
            h = (h + 1) & hmask
            v = vals[h]
        if v < 0:
            v = nid
            keys[h] = key
            vals[h] = v
            nid += 1
            if 2 * nid > hmask + 1:
                bits += 1
                hmask = (1 << bits) - 1
                hshift = np.uint64(64 - bits)
                nkeys = np.zeros(1 << bits, np.uint64)
                nvals = np.full(1 << bits, -1, np.int32)
                for slot in range(keys.shape[0]):
                    if vals[slot] >= 0:
                        hh = np.int64((keys[slot] * _GOLDEN) >> hshift)
                        while nvals[hh] >= 0:
                            hh = (hh + 1) & hmask
                        nkeys[hh] = keys[slot]
                        nvals[hh] = vals[slot]
                keys = nkeys
                vals = nvals
        ids[k] = v
    return ids, nid


_NO_FLAGS = np.zeros(0, np.uint8)
_NO_DIST = np.zeros(0, np.int64)


def as_pages(pages) -> np.ndarray:
    """Page numbers as a contiguous uint64 array, checked: one dimension, non-negative ints."""
    arr = np.asarray(pages)
    if arr.ndim != 1:
        raise ValueError("pages must be a one-dimensional array")
    if arr.dtype.kind not in "ui":
        raise ValueError(f"page numbers must be integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "i" and arr.size and arr.min() < 0:
        raise ValueError("page numbers must be non-negative")
    return np.ascontiguousarray(arr, dtype=np.uint64)


def _keys32(pages) -> np.ndarray:
    """32-bit keys for the scan: the page numbers when they fit, else dense ids."""
    arr = np.asarray(pages)
    if arr.dtype in (np.uint8, np.uint16, np.uint32):
        return np.ascontiguousarray(arr, dtype=np.uint32)
    p = as_pages(arr)
    if p.size == 0 or p.max() <= 0xFFFFFFFF:
        return p.astype(np.uint32)
    ids, _ = _dense_ids(p)
    return ids.astype(np.uint32)


def _new_hist(keys: np.ndarray) -> np.ndarray:
    dtype = np.int32 if keys.size < 2**31 else np.int64
    return np.zeros((2, 1026), dtype)


def _as_flags(prefetch, n: int) -> np.ndarray:
    if prefetch is None:
        return _NO_FLAGS
    flags = np.ascontiguousarray(np.asarray(prefetch), dtype=np.uint8)
    if flags.shape != (n,):
        raise ValueError(f"prefetch flags must have one entry per reference ({n})")
    return flags


def _direct_universe(keys: np.ndarray) -> int:
    """The key range to index directly, or 0 for the hash map.

    Direct when the range is at most DIRECT_LIMIT keys and small beside the trace (four keys
    per reference, or 65,536): a few sparse keys must not cost a huge table.
    """
    if keys.size == 0:
        return 0
    universe = int(keys.max()) + 1
    return universe if universe <= min(DIRECT_LIMIT, max(1 << 16, 4 * keys.size)) else 0


def distance_histograms(pages, prefetch=None, direct: bool = True) -> tuple[np.ndarray, int]:
    """Stack-distance histograms split by reference class.

    Returns ``(hist, distinct)``: ``hist`` has shape (2, distinct + 1); row 0 counts logical
    references (getpages), row 1 references that are prefetches; column 0 counts first
    references and column d references at stack distance d. ``direct=False`` forces the hash
    map (same results; for the benchmark and the tests).
    """
    keys = _keys32(pages)
    universe = _direct_universe(keys) if direct else 0
    flags = _as_flags(prefetch, keys.size)
    hist, distinct = _lru_scan(keys, flags, _NO_DIST, _new_hist(keys), universe)
    if distinct > MAX_DISTINCT:
        raise ValueError(f"more than {MAX_DISTINCT} distinct pages are not supported")
    return hist.astype(np.int64), int(distinct)


def stack_distances(pages) -> np.ndarray:
    """Per-reference stack distances (0 for a first reference); O(N) extra memory."""
    keys = _keys32(pages)
    out = np.empty(keys.size, np.int64)
    if keys.size:
        _lru_scan(keys, _NO_FLAGS, out, _new_hist(keys), _direct_universe(keys))
    return out


def dense_ids(pages) -> tuple[np.ndarray, int]:
    """Map page numbers to ids 0..M-1 (first-reference order); returns (ids, M)."""
    ids, m = _dense_ids(as_pages(pages))
    return ids, int(m)
