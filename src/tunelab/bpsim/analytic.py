"""Shared-data pools under the independent reference model, by formula: Che's
characteristic-time approximation for LRU, extended for cross-invalidation and for a group
pool that takes in only changed pages (the derivation, its sources and its accuracy:
docs/bpsim.md, "Checked against a formula").

A check on ``members.simulate_shared`` that shares no code with it: the simulator replays a
trace reference by reference, this solves a few equations per pool size. Its input is
``rates[m, i]``, the probability that a reference is member m's to page i (the matrix sums to
1; time is counted in the cluster's references), and the write share ``w``.

- **LBP.** Member m's LBP is ordered by m's own references only (an invalid copy keeps its
  buffer), so Che applies as to one pool: ``T_m`` solves ``sum_i 1 - exp(-q_i T_m) =
  lbp_pages``; a reference finds its page present with probability ``1 - exp(-q T_m)``, and
  valid when no other member wrote the page since m's last reference: ``q / (q + v) (1 -
  exp(-(q + v) T_m))``, ``v = w (Q - q)`` the others' write rate (``Q``: every member's rate).
- **GBP.** A write puts its page in (or in front); a GBP read that finds its page puts it in
  front; a read that does not find it adds nothing. With Che's ``T_G``, a page is in after an
  event (a write, or a read that found it) and leaves when ``T_G`` passes without one.
- **A member's GBP read is no random look at the GBP.** It missed because m has not touched
  the page for ``X = T_m + Exp(q)``: the page is in if the others touched it within
  ``min(X, T_G)`` and it was in after that touch (``s``: a write, or a read that found it), or
  m's own touch is the last one and lies within ``T_G``. An invalid copy means another member
  wrote the page since m took it: it is in for certain when that write came less than
  ``T_G`` ago. The reads' hit probabilities feed the pages' time in the GBP, so they are
  solved together, by fixed-point iteration, and ``T_G`` from ``sum_i pi_i = gbp_pages``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tunelab.bpsim.members import _popularity


@dataclass(frozen=True)
class SharedRatios:
    """The cluster's counters per reference (``pool_data_l_reads`` = 1) and IBM's ratios."""

    lbp_found: float  # pool_data_lbp_pages_found
    invalid: float  # pool_data_gbp_invalid_pages
    gbp_l_reads: float  # pool_data_gbp_l_reads
    gbp_p_reads: float  # pool_data_gbp_p_reads

    @property
    def lbp_hit_ratio(self) -> float:
        return self.lbp_found

    @property
    def gbp_hit_ratio(self) -> float:
        return 1.0 - self.gbp_p_reads / self.gbp_l_reads if self.gbp_l_reads > 0 else np.nan


def _solve(occupancy: Callable[[float], float], size: float, hold_all: int) -> float:
    """The characteristic time T at which ``occupancy(T)`` (increasing in T) equals ``size``;
    inf when the pool holds every page it could (``size >= hold_all``)."""
    if size >= hold_all:
        return np.inf
    lo, hi = 0.0, 1.0
    while occupancy(hi) < size:
        lo, hi = hi, hi * 2
    while hi - lo > 1e-7 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if occupancy(mid) < size else (lo, mid)
    return (lo + hi) / 2


def _within(rate: np.ndarray, t: float) -> np.ndarray:
    """P(a Poisson stream of ``rate`` had an event in the last ``t``)."""
    return -np.expm1(-rate * t) if np.isfinite(t) else (rate > 0).astype(float)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, 0.0)


def _since_miss(q: np.ndarray, a: np.ndarray, t_lbp: float, t_gbp: float):
    """For X = t_lbp + Exp(q), the time since a member last touched a page it misses, and
    others' touches at rate ``a``: E[exp(-a min(X, t_gbp))] and E[exp(-a X); X < t_gbp]."""
    span = max(t_gbp - t_lbp, 0.0)
    within = _within(q + a, span) if np.isfinite(span) else np.ones_like(q)
    early = np.exp(-a * t_lbp) * _ratio(q, q + a) * within
    late = np.exp(-a * t_gbp) * np.exp(-q * span) if np.isfinite(t_gbp) else 0.0
    return early + late, early


def _written_lately(q: np.ndarray, v: np.ndarray, t_lbp: float, t_gbp: float) -> np.ndarray:
    """Of the references that find their copy invalid, the share whose page another member
    wrote less than ``t_gbp`` ago. The member took its copy X ~ Exp(q) ago, X < t_lbp; the
    others' last write came y ~ Exp(v) ago, y < X."""
    if t_gbp >= t_lbp:
        return np.ones_like(q)
    invalid = _within(q, t_lbp) - _ratio(q, q + v) * _within(q + v, t_lbp)
    lately = _within(q, t_gbp) - _ratio(q, q + v) * _within(q + v, t_gbp)
    lately += _within(v, t_gbp) * (np.exp(-q * t_gbp) - np.exp(-q * t_lbp))
    return _ratio(lately, invalid)


class _Cluster:
    """The LBP side (closed form) and the GBP's fixed point at a given ``T_G``."""

    def __init__(self, rates: np.ndarray, w: float, lbp_pages: int) -> None:
        self.q, self.w = rates, w
        self.total = rates.sum(axis=0)
        self.others_write = w * (self.total - rates)
        self.t_lbp = np.empty(len(rates))
        self.miss, self.invalid, self.valid = (np.zeros_like(rates) for _ in range(3))
        for m, (qm, v) in enumerate(zip(rates, self.others_write)):
            t = _solve(lambda t, qm=qm: _within(qm, t).sum(), lbp_pages, np.count_nonzero(qm))
            present, valid = _within(qm, t), _ratio(qm, qm + v) * _within(qm + v, t)
            self.t_lbp[m] = t
            self.miss[m], self.invalid[m], self.valid[m] = (
                qm * (1 - present),
                qm * (present - valid),
                qm * valid,
            )
        self.write = w * self.total
        self.reads = self.miss + self.invalid  # GBP reads, per member and page
        self.touch = self.write + self.reads.sum(axis=0)
        self._start: tuple[np.ndarray, np.ndarray] | None = None  # the last T_G's solution

    def gbp(self, t_g: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """At ``T_G``: the hit probability of each member's GBP reads of each page (after a
        miss, after an invalid copy) and each page's time-average presence."""
        near = np.where(self.write > 0, _within(self.touch, t_g), 0.0)
        if self._start is None:  # the reads first see the GBP as at a random time
            h_miss = np.broadcast_to(near, self.q.shape).copy()
            h_invalid = h_miss.copy()
        else:  # the bisection's T_G moves a little: start where the last one ended
            h_miss, h_invalid = self._start
        pi = near
        for _ in range(200):
            read_hits = self.miss * h_miss + self.invalid * h_invalid
            hits_all = read_hits.sum(axis=0)
            # in the GBP after a random touch of the page, then at a random time
            pi = near * _ratio(self.write + hits_all, self.touch)
            new_miss, new_invalid = np.empty_like(h_miss), np.empty_like(h_invalid)
            for m, qm in enumerate(self.q):
                others = self.touch - self.w * qm - self.reads[m]
                s_others = _ratio(self.others_write[m] + hits_all - read_hits[m], others)
                after_own = self.w + (1 - self.w) * _ratio(read_hits[m] + self.valid[m] * pi, qm)
                whole, early = _since_miss(qm, others, self.t_lbp[m], t_g)
                new_miss[m] = (1 - whole) * s_others + early * after_own
                lately = _written_lately(qm, self.others_write[m], self.t_lbp[m], t_g)
                new_invalid[m] = lately + (1 - lately) * new_miss[m]
            change = max(np.abs(new_miss - h_miss).max(), np.abs(new_invalid - h_invalid).max())
            h_miss, h_invalid = new_miss, new_invalid
            if change < 1e-9:
                break
        self._start = (h_miss, h_invalid)
        return h_miss, h_invalid, pi


def shared_ratios(
    rates: np.ndarray, write_share: float, lbp_pages: int, gbp_pages: int
) -> SharedRatios:
    """The cluster's counters per reference for LRU LBPs of ``lbp_pages`` pages and an LRU
    GBP of ``gbp_pages`` (see the module's docstring)."""
    q = np.asarray(rates, dtype=float)
    if q.ndim != 2 or (q < 0).any() or not np.isclose(q.sum(), 1.0):
        raise ValueError("rates: a members x pages matrix of probabilities summing to 1")
    if not 0 <= write_share <= 1 or lbp_pages < 1 or gbp_pages < 1:
        raise ValueError("write_share in [0, 1], lbp_pages and gbp_pages >= 1")
    c = _Cluster(q, float(write_share), lbp_pages)
    t_g = _solve(lambda t: c.gbp(t)[2].sum(), gbp_pages, np.count_nonzero(c.write))
    h_miss, h_invalid, _ = c.gbp(t_g)
    reads = float(c.reads.sum())
    hits = float((c.miss * h_miss + c.invalid * h_invalid).sum())
    return SharedRatios(1.0 - float(c.miss.sum()), float(c.invalid.sum()), reads, reads - hits)


def trace_rates(
    pages: int, members: int, affinity: float, alpha: float | None, seed: int = 0
) -> np.ndarray:
    """The ``rates`` of the traces ``members.shared_trace`` draws with these parameters (the
    same page popularities for the same seed): a member is chosen uniformly; with probability
    ``affinity`` it picks a page of its own partition (page % members == m), else any page,
    in proportion to the pages' weights."""
    weights = _popularity(pages, alpha, np.random.default_rng(seed))
    weights = np.ones(pages) if weights is None else weights
    rates = np.zeros((members, pages))
    for m in range(members):
        own = np.zeros(pages)
        own[m::members] = weights[m::members]
        rates[m] = (1 - affinity) * weights / weights.sum() + affinity * own / own.sum()
    return rates / members
