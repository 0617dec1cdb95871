"""Exact LRU stack distances in one pass, O(N log M) time and O(M) memory.

The stack (reuse) distance of a reference is the number of distinct pages referenced since
the previous reference to the same page, itself included; a first reference has infinite
distance (a compulsory miss). Under LRU a reference hits in a pool of C pages exactly when
its distance is <= C (Mattson et al., 1970), so one histogram of distances gives the hits of
every pool size at once.

How the kernel finds each distance: a table holds, per page, the time position of its latest
reference (indexed by the page key itself when the keys are dense enough, else an open-
addressing hash map); those positions are the set bits of a bitmap over time, and a Fenwick
tree counts the set bits per 512-position line (one 64-byte cache line of the bitmap). The
distance of a re-reference is one plus the number of set bits after the page's previous
position: popcounts inside the previous position's line, a running count of the current line
(only positions before the current one are ever set), the Fenwick tree for the lines in
between. Both Fenwick walks (the range sum, and the -1/+1 update of the two lines) stop
where the two paths meet, so a short reuse interval, the common case, costs a few steps
rather than log M. When the time axis fills, the live positions are compacted to the front
(each moves to its rank, read off the bitmap) and the axis is sized to a few positions per
distinct page, so memory stays proportional to distinct pages however long the trace is: 8
bytes per hash slot (at most half full), half a byte of bitmap and a Fenwick counter per 512
positions. The direct table costs 4 bytes per key of the range and 4 per time position (the
key at each position, which is what lets a compaction walk the bitmap instead of the table),
and saves the hash probe, the reference's most expensive cache miss.
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
_MIN_LINES = 8
_AXIS_PER_PAGE = 4  # time positions per distinct page after a compaction
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
    use_flags = flags.shape[0] == n
    want_dist = dist_out.shape[0] == n
    one = np.uint64(1)
    zero = np.uint64(0)
    all_ones = ~zero

    # hash map: slot = (1 + time position of the page's latest reference) << 32 | page key;
    # 0 marks a free slot
    hbits = 12
    hmask = (1 << hbits) - 1
    hshift = np.uint64(64 - hbits)
    direct = universe > 0
    table = np.zeros(0 if direct else 1 << hbits, np.uint64)

    nlines = _MIN_LINES
    cap = nlines * _LINE
    # direct table: last[key] = 1 + position of the key's latest reference, 0 if none yet;
    # who[position] = the key referenced there
    last = np.zeros(universe, np.uint32)
    who = np.zeros(cap if direct else 0, np.uint32)
    marks = np.zeros(nlines * _WORDS_PER_LINE, np.uint64)
    fen = np.zeros(nlines + 1, np.int32)  # Fenwick tree of set bits per line (1-based)

    nid = 0
    t = 0
    cur = 0  # set bits in the line of t (only positions below t are ever set)

    for k in range(n):
        key = np.uint64(pages[k])
        cls = 0
        if use_flags and flags[k] != 0:
            cls = 1

        if t == cap:
            # Compact: each live position moves to its rank among live positions.
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
            newlines = max(nlines, (_AXIS_PER_PAGE * nid + _LINE - 1) // _LINE)
            if newlines > nlines:
                nlines = newlines
                cap = nlines * _LINE
                marks = np.zeros(nlines * _WORDS_PER_LINE, np.uint64)
                fen = np.zeros(nlines + 1, np.int32)
                if direct:
                    grown_who = np.zeros(cap, np.uint32)
                    grown_who[:nid] = who[:nid]
                    who = grown_who
            full = nid >> 6
            marks[:full] = all_ones
            marks[full:] = zero
            if nid & 63:
                marks[full] = (one << np.uint64(nid & 63)) - one
            for i in range(1, nlines + 1):
                lo = _LINE * (i - (i & -i))
                fen[i] = max(0, min(_LINE * i, nid) - lo)
            t = nid
            cur = nid & (_LINE - 1)

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

        wt = t >> 6
        lt = wt >> _LINE_SHIFT
        if t & (_LINE - 1) == 0:
            cur = 0
        if v != 0:
            q = np.int64(v >> np.uint64(32)) - 1
            wq = q >> 6
            lq = wq >> _LINE_SHIFT
            # set bits after q within q's line, branch-free over the line's words; nothing at
            # or after t is set yet, so when t shares the line this is the whole count
            above = (all_ones << np.uint64(q & 63)) << one
            iq = wq & (_WORDS_PER_LINE - 1)
            base = lq << _LINE_SHIFT
            c = zero
            for w in range(_WORDS_PER_LINE):
                later = zero - np.uint64(w > iq)
                same = zero - np.uint64(w == iq)
                c += _popcount(marks[base + w] & (later | (same & above)))
            d = np.int64(c) + 1
            if lq == lt:
                cur -= 1  # q's bit, cleared below
            else:
                d += cur
                # whole lines lq+1 .. lt-1 = prefix(lt) - prefix(lq+1); each path stops at
                # the node where the two meet
                a = lq + 1
                b = lt
                while b > a:
                    d += fen[b]
                    b -= b & -b
                while a > b:
                    d -= fen[a]
                    a -= a & -a
                # -1 for line lq and +1 for line lt, up to the first node on both paths
                i = lq + 1
                j = lt + 1
                while i < j:
                    fen[i] -= 1
                    i += i & -i
                while j < i and j <= nlines:
                    fen[j] += 1
                    j += j & -j
            marks[wq] &= ~(one << np.uint64(q & 63))
            marks[wt] |= one << np.uint64(t & 63)
            cur += 1
            hist[cls, d] += 1
        else:
            d = 0
            marks[wt] |= one << np.uint64(t & 63)
            cur += 1
            j = lt + 1
            while j <= nlines:
                fen[j] += 1
                j += j & -j
            hist[cls, 0] += 1
            nid += 1
            if nid + 1 >= hist.shape[1]:
                grown = np.zeros((2, 2 * hist.shape[1]), hist.dtype)
                grown[:, : hist.shape[1]] = hist
                hist = grown
        if direct:
            last[np.int64(key)] = t + 1
            who[t] = key
        else:
            table[h] = (np.uint64(t + 1) << np.uint64(32)) | key
            if v == 0 and 2 * nid > hmask + 1:  # keep the load factor at most one half
                hbits += 1
                hmask = (1 << hbits) - 1
                hshift = np.uint64(64 - hbits)
                table = _rehash32(table, hbits)
        if want_dist:
            dist_out[k] = d
        t += 1

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
