"""Measure a sweep in rounds: round r takes repetition r of every point, so that the host's
drift over the run falls on every point alike instead of on the points measured last.

Two orders, by what switching from one point to another costs:

- ``rounds`` (an engine without a server, SQLite): every point's engine stays open for the
  whole sweep; each round visits the points in a seeded random order.
- ``blocked`` (a server engine: one server at a time, and a point may need a restart, a new
  data directory or another table): the points fall into blocks, those that share a server
  (the same fresh and restart knobs) and, for a read, a table (data set and index layout),
  so that moving between them needs neither a restart nor a build (``block_of``). The
  rounds go in passes of ``PASS_ROUNDS``; within a pass each block measures its rounds, the
  blocks in the sweep's measuring order, and every other pass takes them in reverse
  (A B C | C B A | ...), so a linear drift cancels between the first and the last block.
  Within a block each round visits its points in a seeded random order, so the points a
  claim compares on one server are measured side by side in time, not a pass apart. A
  block's server and table are set up once per pass instead of once per sweep: with passes
  of one round, every round; at a turn, the block that ends one pass and begins the next
  is set up anew (``runner.PointSession.set_up_anew``: a server restarts), so that its two
  rounds do not share one set-up while the other blocks' rounds each have their own.
  Points of two blocks are a block's part of a pass apart, so their comparisons pair by
  pass (``analysis.sequential.pairing``): a pass is one round, so that a comparison between
  blocks has as many pairs as rounds (with passes of three, six to twelve rounds were two
  to four passes, which decide nothing). Every row records its ``pass`` and ``block``.

Each finished round is kept in a journal beside the results (``<out>.partial/``); a run
killed midway continues from the next round. After each round that is one of the sweep's
looks, ``stop`` says whether measuring may stop (every claim decided) and why, and which
points the next rounds measure: those of the claims still undecided. A decided claim keeps
its verdict (``sequential.settle``), so rounds of its points would only cost time.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import zlib
from collections.abc import Callable, Container, Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from tunelab import engines
from tunelab.analysis import claims, sequential
from tunelab.analysis.sequential import PASS_ROUNDS
from tunelab.host import atomic, devprobe
from tunelab.measure import runner
from tunelab.store import results
from tunelab.store.results import read_csv as read_rows_csv
from tunelab.sweep.spec import Point

ROUND_FILE = "round-{:03d}.csv"
QUERIES_FILE = "round-{:03d}.queries.csv.gz"


class Stop(NamedTuple):
    stop: bool
    reason: str
    points: frozenset[str] | None = None  # point_ids the next rounds measure; None: every one


# Whether measuring may stop after ``n`` finished rounds, given every row so far, why, and
# what the next rounds measure. The sweep's claims decide it (``claims_rule``), or its
# fixed budget.
StopRule = Callable[[pd.DataFrame, int], Stop]


@dataclass(frozen=True)
class Visit:
    round: int
    order: int  # the point's place in its round
    point: int  # index into the sweep's points


def order_seed(sweep: str, seed: int) -> int:
    return zlib.crc32(f"{sweep}/{seed}".encode())


def mode_of(engine: str) -> str:
    return "blocked" if engines.info(engine).needs_container else "rounds"


def round_order(n_points: int, r: int, seed: int) -> list[int]:
    """The points of round ``r`` in their seeded random order."""
    return [int(i) for i in np.random.default_rng([seed, r]).permutation(n_points)]


def block_of(point: Point) -> str:
    """What must be set up before a point's repetitions on a server engine: the server (its
    fresh and restart knobs) and, for a read, the table (data set and index layout, what
    ``Builds.key`` adds to the fresh knobs); a write's table is made anew for every
    repetition. Points with the same block follow one another without a restart or a
    build."""
    fresh, restart = engines.info(point.engine).server_order(point.knobs)
    w = point.workload
    plan = w.index_plan(point.knobs.get("index", "none"))
    table = None if w.writes else [point.dataset.key, plan.kind, plan.key, plan.include]
    return json.dumps([fresh, restart, table], default=str)


def _groups(n_points: int, blocks: Sequence[Hashable] | None) -> list[list[int]]:
    """The points' indices by block, blocks in the order they first appear; without blocks
    each point is its own."""
    if blocks is None:
        return [[i] for i in range(n_points)]
    groups: dict[Hashable, list[int]] = {}
    for i, b in enumerate(blocks):
        groups.setdefault(b, []).append(i)
    return list(groups.values())


def schedule(
    n_points: int,
    first: int,
    last: int,
    mode: str,
    seed: int,
    blocks: Sequence[Hashable] | None = None,
) -> Iterator[Visit]:
    """The visits of rounds ``first`` .. ``last - 1``. In blocked mode ``first`` must start a
    pass; the blocks (``blocks``: one per point, see ``block_of``) go in the order they first
    appear on even passes and reversed on odd ones, and within a block every round takes its
    points in a seeded random order."""
    if mode == "rounds":
        for r in range(first, last):
            for order, i in enumerate(round_order(n_points, r, seed)):
                yield Visit(r, order, i)
        return
    groups = _groups(n_points, blocks)
    start = first
    while start < last:
        pass_no = start // PASS_ROUNDS
        stop = min(last, (pass_no + 1) * PASS_ROUNDS)
        offset = 0
        for g, group in enumerate(groups[::-1] if pass_no % 2 else groups):
            for r in range(start, stop):
                shuffled = np.random.default_rng([seed, r, g]).permutation(len(group))
                for k, j in enumerate(shuffled):
                    yield Visit(r, offset + k, group[int(j)])
            offset += len(group)
        start = stop


def block_id(point: Point, mode: str) -> int:
    """The block a row records (``block``): a number for ``block_of``, 0 for every point of a
    ``rounds`` order (each round takes them all side by side). Rows of one block were
    measured side by side in every round; rows of two blocks a block's part of a pass apart
    (``analysis.sequential.pairing``)."""
    return zlib.crc32(block_of(point).encode()) if mode == "blocked" else 0


def pass_of(r: int, mode: str) -> int:
    """The pass round ``r`` belongs to (``pass`` in the rows): ``PASS_ROUNDS`` rounds each,
    blocked; each round its own in ``rounds`` order."""
    return r // PASS_ROUNDS if mode == "blocked" else r


def pass_start(r: int, mode: str) -> int:
    """The round a continuation must begin with to keep the order (a pass's first round)."""
    return r if mode == "rounds" else r - r % PASS_ROUNDS


class Journal:
    """Finished rounds of a sweep's measurement, one file each, beside its results; valid
    only for the same points (a changed sweep file measures anew)."""

    def __init__(self, out: Path, points: Sequence[Point]) -> None:
        self.dir = Path(f"{out}.partial")
        self.key = json.dumps(
            [[p.point_id, p.knobs, p.workload.params, p.cache, p.dataset.key] for p in points],
            default=str,
            sort_keys=True,
        )

    def finished(self) -> list[pd.DataFrame]:
        """The kept rounds, 0, 1, ... while each is there (a gap ends them)."""
        key_file = self.dir / "points.json"
        if not key_file.is_file() or key_file.read_text() != self.key:
            shutil.rmtree(self.dir, ignore_errors=True)
            return []
        frames = []
        while (self.dir / ROUND_FILE.format(len(frames))).is_file():
            frames.append(read_rows_csv(self.dir / ROUND_FILE.format(len(frames))))
        return frames

    def queries(self, r: int) -> pd.DataFrame | None:
        path = self.dir / QUERIES_FILE.format(r)
        return read_rows_csv(path) if path.is_file() else None

    def keep(self, r: int, rows: list[dict], times: list[pd.DataFrame]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes(self.dir / "points.json", self.key.encode())
        if times:
            atomic.write_csv(
                pd.concat(times, ignore_index=True), self.dir / QUERIES_FILE.format(r), level=1
            )
        results.write_rows(rows, self.dir / ROUND_FILE.format(r), overwrite=True)

    def drop_from(self, r: int) -> None:
        for path in self.dir.glob("round-*"):
            if int(path.name[6:9]) >= r:
                path.unlink(missing_ok=True)

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def fixed_budget(points: Sequence[Point]) -> StopRule:
    """Stop at the sweep's repetitions: its budget, no claim asked."""
    budget = max(p.repetitions for p in points)

    def stop(_rows: pd.DataFrame, n: int) -> Stop:
        return Stop(n >= budget, f"fixed: {budget} repetitions")

    return stop


def claims_rule(points: Sequence[Point], expect: object) -> StopRule:
    """With ``repetitions: {min, max}``: stop at a look (``sequential.looks_for``) once every
    claim of the sweep is decided by the procedure ``claims.evaluate_sweep`` replays on the
    stored rows, or at the budget; until then the rounds measure only the points of the
    claims still undecided at the last look. A fixed count: stop at it."""
    n_min = min(p.repetitions_min for p in points)
    n_max = max(p.repetitions for p in points)
    if n_min >= n_max:
        return fixed_budget(points)
    engine = points[0].engine
    looks = sequential.looks_for(n_min, n_max, mode_of(engine))
    # look -> verdicts, claims beyond the budget (rounds they would need), points to measure
    judged: dict[int, tuple[dict[str, str], dict[str, int], frozenset[str]]] = {}

    def judge(rows: pd.DataFrame, look: int) -> tuple[dict[str, str], dict[str, int], frozenset]:
        if look not in judged:
            upto = rows[pd.to_numeric(rows["round"], errors="coerce") < look]
            verdicts = claims.evaluate_sweep(expect, upto, engine)
            beyond = {
                v.claim.says: v.needed
                for v in verdicts
                if not v.decided and v.needed and sequential.futile(v.needed, n_max)
            }
            open_ = [v.claim for v in verdicts if not v.decided and v.claim.says not in beyond]
            judged[look] = (
                {v.claim.says: v.verdict for v in verdicts},
                beyond,
                claims.compared_points(open_, upto),
            )
        return judged[look]

    def stop(rows: pd.DataFrame, n: int) -> Stop:
        reached = [x for x in looks if x <= n]
        if not reached:
            return Stop(*sequential.decide({}, n, looks))
        names, beyond, open_points = judge(rows, reached[-1])
        decision = sequential.decide(names if n in looks else {}, n, looks, beyond)
        return Stop(decision.stop, decision.reason, open_points)

    return stop


class Sessions:
    """The open sessions of a sweep's points, at most one per point, each held by an
    ExitStack of its own: ``session`` opens a point's when it has none, ``keep_only`` closes
    the others, and leaving closes every one still open (each even when another fails to
    close), then removes their working directories. The plans a point's first session
    captured are kept (``plans``) for its results."""

    def __init__(
        self, points: Sequence[Point], workdir: Path, data_dir: Path, run_dir: Path | None
    ):
        self.points, self.workdir, self.data_dir, self.run_dir = points, workdir, data_dir, run_dir
        self.plans: dict[str, list[dict]] = {}  # point_id -> its timed statements' plans
        self._open: dict[int, tuple[runner.PointSession, contextlib.ExitStack]] = {}

    def __enter__(self) -> Sessions:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.keep_only(())
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def session(self, i: int) -> runner.PointSession:
        """Point ``i``'s session, opened when it has none open."""
        if i not in self._open:
            p = self.points[i]
            with contextlib.ExitStack() as stack:
                s = stack.enter_context(
                    runner.PointSession(p, self.workdir / p.point_id, self.data_dir, self.run_dir)
                )
                stack.callback(self._keep_plans, s)  # before the session closes
                self._open[i] = (s, stack.pop_all())
        return self._open[i][0]

    def _keep_plans(self, s: runner.PointSession) -> None:
        self.plans.setdefault(s.point.point_id, s.plans)

    def keep_only(self, wanted: Container[int]) -> None:
        """Close every open session but those of the points in ``wanted``, in the order they
        were opened."""
        with contextlib.ExitStack() as closing:
            for i in reversed([i for i in self._open if i not in wanted]):
                closing.push(self._open.pop(i)[1])


@dataclass(frozen=True)
class Order:
    """How a sweep's rounds go: its mode, the seed of its random orders, its budget (the
    points' largest ``repetitions``) and each point's block."""

    sweep: str
    mode: str
    seed: int
    budget: int
    blocks: list[str]  # block_of, per point
    block_ids: list[int]  # block_id, per point

    @classmethod
    def of(cls, points: Sequence[Point]) -> Order:
        mode = mode_of(points[0].engine)
        return cls(
            points[0].sweep,
            mode,
            order_seed(points[0].sweep, points[0].dataset.seed),
            max(p.repetitions for p in points),
            [block_of(p) for p in points],
            [block_id(p, mode) for p in points],
        )

    def next_stop(self, first: int) -> int:
        """Where the rounds from ``first`` end before the journal keeps them and the stop rule
        is asked: at the next pass's end (blocked) or after one round (rounds)."""
        return min(self.budget, first + (PASS_ROUNDS if self.mode == "blocked" else 1))

    def visits(self, active: list[int], first: int, last: int) -> Iterator[Visit]:
        """The visits of rounds ``first`` .. ``last - 1`` to the ``active`` points."""
        blocks = [self.blocks[i] for i in active]
        for v in schedule(len(active), first, last, self.mode, self.seed, blocks):
            yield Visit(v.round, v.order, active[v.point])

    def columns(self, v: Visit) -> dict[str, object]:
        """A visit's place in the order, as its row records it."""
        return {
            "round": v.round,
            "order_in_round": v.order,
            "order_mode": self.mode,
            "pass": pass_of(v.round, self.mode),
            "block": self.block_ids[v.point],
        }


class Visitor:
    """Measures visits one after another on the points' sessions, remembering what ran last:
    a warm point after itself needs no warm-up, and a block that ends one pass and begins the
    next (the order turns) is set up anew."""

    def __init__(self, order: Order, sessions: Sessions) -> None:
        self.order, self.sessions = order, sessions
        self.previous: int | None = None  # the point measured last
        self.last_block: int | None = None  # the block measured last

    def measure(self, v: Visit, device: dict[str, float]) -> tuple[dict, list[pd.DataFrame]]:
        """One repetition of the visit's point: its row, and each timed statement's time."""
        blocked = self.order.mode == "blocked"
        if blocked:
            self.sessions.keep_only({v.point})  # one server at a time
        s = self.sessions.session(v.point)
        block = self.order.block_ids[v.point]
        turn = v.order == 0 and pass_start(v.round, self.order.mode) == v.round
        if blocked and turn and self.last_block == block:
            s.set_up_anew()  # the order turns: this block's new pass is set up anew
            self.previous = None
        self.last_block = block
        n_times = len(s.times)
        extra = {**self.order.columns(v), **device}
        row = s.repetition(v.round, extra, self.previous == v.point)
        self.previous = v.point
        return row, [t.assign(point_id=s.point.point_id) for t in s.times[n_times:]]

    def rounds(
        self, active: list[int], first: int, last: int, device: dict[str, float]
    ) -> dict[int, tuple[list[dict], list[pd.DataFrame]]]:
        """Rounds ``first`` .. ``last - 1`` of the ``active`` points: per round, its rows and
        its statements' times."""
        measured: dict[int, tuple[list[dict], list[pd.DataFrame]]] = {
            r: ([], []) for r in range(first, last)
        }
        for v in self.order.visits(active, first, last):
            row, times = self.measure(v, device)
            measured[v.round][0].append(row)
            measured[v.round][1].extend(times)
        return measured


def _rows(frames: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _kept_rounds(journal: Journal, mode: str) -> list[pd.DataFrame]:
    """The rounds an earlier run kept, up to the start of the pass they reached (a
    continuation must begin a pass to keep the order); the later ones go."""
    kept = journal.finished()
    done = pass_start(len(kept), mode)
    journal.drop_from(done)
    return kept[:done]


def _ask_stop_rule(
    stop: StopRule, points: Sequence[Point], frames: list[pd.DataFrame]
) -> tuple[bool, str, list[int]]:
    """Whether measuring may stop after the rounds so far, why, and the indices of the points
    the next rounds measure."""
    finished, reason, wanted = stop(_rows(frames), len(frames))
    return finished, reason, _still_measured(points, wanted)


def measure_rounds(
    points: Sequence[Point],
    out: Path,
    workdir: Path,
    data_dir: Path,
    run_dir: Path | None,
    stop: StopRule,
    log: Callable[[str], None] = print,
    probe: Callable[[], dict[str, float]] = dict,
) -> tuple[pd.DataFrame, str]:
    """Measure the sweep's points in rounds until ``stop`` says so or the budget (the points'
    largest ``repetitions``) ends; every row, and why measuring stopped. ``probe`` measures
    the device before each round (a pass, blocked); its columns go to the round's rows."""
    order = Order.of(points)
    journal = Journal(out, points)
    frames = _kept_rounds(journal, order.mode)
    active, reason = list(range(len(points))), ""
    if frames:
        log(f"{order.sweep}: {len(frames)} finished rounds kept from an earlier run")
        finished, reason, active = _ask_stop_rule(stop, points, frames)
        if finished or len(frames) >= order.budget or not active:
            return _rows(frames), reason or f"budget: {order.budget} repetitions"
    with Sessions(points, workdir / "points", data_dir, run_dir) as sessions:
        visitor = Visitor(order, sessions)
        while len(frames) < order.budget:
            first, last = len(frames), order.next_stop(len(frames))
            for r, (rows, times) in visitor.rounds(active, first, last, probe()).items():
                journal.keep(r, rows, times)
                frames.append(pd.DataFrame(rows))
            finished, reason, active = _ask_stop_rule(stop, points, frames)
            if not finished and not active:
                finished, reason = True, f"{reason}; no point left to measure"
            log(
                f"{order.sweep}: round {last} of at most {order.budget} done"
                + (f"; stopping ({reason})" if finished else "")
            )
            if finished:
                break
            sessions.keep_only(active)  # a point no undecided claim compares is measured no more
    for point_id, found in sessions.plans.items():
        runner.write_plans(found, out.parent / f"{point_id}.csv")
    return _rows(frames), reason or f"budget: {order.budget} repetitions"


def _still_measured(points: Sequence[Point], wanted: frozenset[str] | None) -> list[int]:
    """Indices of the points the next rounds measure: every one, or those ``wanted``."""
    return [i for i, p in enumerate(points) if wanted is None or p.point_id in wanted]


def write_sweep(frame: pd.DataFrame, reason: str, out: Path, journal: Journal) -> Path:
    """The sweep's rows (each with why measuring stopped) to ``out``, each statement's time
    beside each point's results file; then the journal goes."""
    frame = frame.assign(stop_reason=reason)
    queries = [
        q for r in sorted(frame["round"].unique()) if (q := journal.queries(int(r))) is not None
    ]
    if queries:
        times = pd.concat(queries, ignore_index=True)
        for point_id, t in times.groupby("point_id", sort=True):
            csv = out.parent / f"{point_id}.csv"
            atomic.write_csv(t.drop(columns="point_id"), runner.queries_path(csv), level=1)
    atomic.write_csv(frame, out, level=1)
    journal.remove()
    return out


def point_results(rounds: Path, point_id: str, out: Path) -> Path:
    """One point's rows of a sweep measured in rounds, to its own results file (verified,
    with its check file): what the merge, the reports and ``tunelab compare`` read."""
    frame = read_rows_csv(rounds)
    mine = frame[frame["point_id"].astype(str) == point_id]
    if mine.empty:
        raise ValueError(f"{rounds}: no rows of point {point_id}")
    asked = [
        int(mine[c].iloc[0]) if c in mine else len(mine)
        for c in ("repetitions_max", "repetitions_min")
    ]
    return results.write_point(mine.to_dict("records"), out, *asked)


def run_sweep(
    points: Sequence[Point],
    out: Path,
    workdir: Path,
    data_dir: Path,
    run_id: str | None = None,
    expect: object = None,
    log: Callable[[str], None] = print,
) -> Path:
    """Measure a sweep's points in rounds under the bench lock and write their results."""
    workdir = Path(workdir).resolve()  # container bind mounts need absolute host paths
    out = Path(out)
    run_dir = workdir / "runs" / run_id if run_id else None
    stop = claims_rule(points, expect)
    sweep_dir = workdir / "sweeps" / points[0].sweep
    with runner.bench_slot(workdir):
        frame, reason = measure_rounds(
            points, out, sweep_dir, data_dir, run_dir, stop, log, lambda: devprobe.measure(workdir)
        )
    write_sweep(frame, reason, out, Journal(out, points))
    return out


def points_again(rows: pd.DataFrame, data_dir: Path) -> list[list[Point]]:
    """The points of these result rows as their sweep files (``sweep_file``, named from the
    current directory) give them now, per sweep: what `tunelab compare --confirm` measures
    again. Raises ValueError (one line naming the file) when a file is missing or invalid or
    no longer has one of the points."""
    from tunelab.sweep import spec

    out = []
    for (file, engine), part in rows.groupby(["sweep_file", "engine"], sort=True):
        path = Path(str(file))
        if not path.is_file():
            raise ValueError(f"{path}: sweep file not found (named by the rows' sweep_file)")
        points, errors = spec.expand(path, str(engine), data_dir=data_dir)
        if errors:
            raise ValueError(str(errors[0]))
        wanted = sorted({str(p) for p in part["point_id"]})
        by_id = {p.point_id: p for p in points}
        gone = [w for w in wanted if w not in by_id]
        if gone:
            raise ValueError(f"{path}: no point {gone[0]} in it now (see `tunelab plan {path}`)")
        out.append([by_id[w] for w in wanted])
    return out


def measure_again(
    sweeps: Sequence[Sequence[Point]],
    workdir: Path,
    data_dir: Path,
    log: Callable[[str], None] = print,
) -> pd.DataFrame:
    """Each sweep's points measured again in new rounds (each point's repetitions, the
    points interleaved as a sweep's are), under the bench lock: every row. Nothing is kept
    in the results."""
    workdir = Path(workdir).resolve()
    frames = []
    with runner.bench_slot(workdir):
        for points in sweeps:
            where = workdir / "confirm" / points[0].sweep
            out = where / "rounds.csv"
            try:
                frame, _ = measure_rounds(
                    points,
                    out,
                    where,
                    data_dir,
                    None,
                    fixed_budget(points),
                    log,
                    lambda: devprobe.measure(workdir),
                )
            finally:
                shutil.rmtree(where, ignore_errors=True)
            frames.append(frame)
    return pd.concat(frames, ignore_index=True, sort=False)
