"""The exact LRU kernel as it was before the current one, kept as the benchmark's baseline.

It counted the set bits between a page's previous position and now with a Fenwick tree over
512-position lines (both walks stopping where their paths meet) and a running count of the
line being filled, and added each histogram count at once. ``benchmarks/bpsim_bench.py``
times it against ``tunelab.bpsim.stackdist`` in the same run and checks that both give the
same histograms. Not used by the lab.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tunelab.bpsim.stackdist import _AHEAD, _GOLDEN, _LOW32, _popcount, _prefetch, _rehash32

_LINE_SHIFT = 3
_WORDS_PER_LINE = 1 << _LINE_SHIFT
_LINE = 64 << _LINE_SHIFT
_MIN_LINES = 8
_AXIS_PER_PAGE = 4


@njit(cache=True)
def previous_scan(pages, flags, dist_out, hist, universe):
    """The previous kernel's histograms (same arguments and results as ``_lru_scan``).

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
