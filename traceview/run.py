"""A run: the rank traces of one distributed job, each with its rank.

Which rank a trace is comes from its own metadata, never from its file name:

- ``distributedInfo.rank`` and ``distributedInfo.world_size`` (written by PyTorch's
  profiler under torch.distributed) decide, for every trace that has them;
- when *some* traces have ``distributedInfo``, those without it are not ranks of
  this job and are left out, each named in the notes;
- when *no* trace has it, the files are ranks 0..n-1 in sorted path order and the
  run says so (``rule``).

Two traces with the same rank are refused (an error naming both files); ranks
below the world size with no trace are reported as missing, always as ranges
(``RankRanges``): a trace may claim any rank or world size, and ``world_size`` 10**9
with two traces present is two ranges, never a list of a billion ranks. A rank must
be an int in 0..``MAX_RANK`` (torch.distributed ranks are C ints), a world size
too; a world size far beyond the ranks present is used as given, with a note. ``load_run`` loads
every rank in this process; ``traceview.scale`` runs the per-rank work where the
files are and only gathers results, with the same rules (``plan``).
"""

from __future__ import annotations

import bisect
import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from .discover import candidates
from .errors import NotATraceError, TraceReadError, TraceviewError
from .load import load

RULE_META = "distributedInfo.rank"
RULE_ORDER = "no trace has distributedInfo: ranks are the files in sorted path order"
MAX_RANK = 2**31 - 1  # torch.distributed ranks and world sizes are C ints
FAR_WORLD = 2**17  # more ranks than any job has had: such a world size gets a note ...
FAR_FACTOR = 1000  # ... when it is also this many times the ranks present


def _count(value, low: int) -> int | None:
    """``value`` when it is an int (not a bool) in low..MAX_RANK, else None."""
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= MAX_RANK
    return int(value) if ok else None


def rank_info(meta: dict) -> tuple[int, int | None] | None:
    """(rank, world_size) from a trace's ``distributedInfo``, or None (no rank in 0..MAX_RANK);
    a world size outside 1..MAX_RANK is None."""
    info = meta.get("distributedInfo") if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        return None
    rank = _count(info.get("rank"), 0)
    return None if rank is None else (rank, _count(info.get("world_size"), 1))


class RankRanges(Sequence):
    """Sorted distinct ranks held as ranges, never one int per rank: memory grows with the
    number of gaps, not with the world size. Iterates, counts and compares (also with a
    list) like the list of ranks it stands for; ``str`` is ``rank_list``'s text."""

    __hash__ = None  # type: ignore[assignment]  # equal to a list of its ranks, so unhashable like one

    def __init__(self, ranges=()):
        self.ranges = tuple(r for r in ranges if len(r))  # step 1, ascending, disjoint
        self._starts = [r.start for r in self.ranges]
        self._ends = list(itertools.accumulate(len(r) for r in self.ranges))  # cumulative lengths

    @classmethod
    def gaps(cls, present, world: int) -> RankRanges:
        """The ranks in 0..world-1 that are not in ``present``."""
        out, nxt = [], 0
        for r in sorted(set(present)):
            out.append(range(nxt, min(r, world)))
            nxt = max(nxt, r + 1)
        return cls([*out, range(nxt, world)])

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __getitem__(self, i):
        if isinstance(i, slice):
            raise TypeError("RankRanges can't be sliced; iterate, or use .ranges")
        i = i + len(self) if i < 0 else i
        if not 0 <= i < len(self):
            raise IndexError("rank index out of range")
        k = bisect.bisect_right(self._ends, i)
        return self.ranges[k][i - (self._ends[k - 1] if k else 0)]

    def __iter__(self):
        return itertools.chain.from_iterable(self.ranges)

    def __contains__(self, rank) -> bool:
        k = bisect.bisect_right(self._starts, rank) - 1
        return k >= 0 and rank in self.ranges[k]

    def __eq__(self, other) -> bool:
        if isinstance(other, RankRanges):
            return self.ranges == other.ranges
        if isinstance(other, (list, tuple)):  # bounded by the other side's length
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __str__(self) -> str:
        return ", ".join(str(r.start) if len(r) == 1 else f"{r.start}-{r[-1]}" for r in self.ranges)

    def __repr__(self) -> str:
        return f"RankRanges({str(self) or 'none'})"


@dataclass
class Plan:
    """Which file is which rank."""

    ranks: dict  # rank -> path, by rank
    world_size: int
    rule: str
    missing: RankRanges = field(default_factory=RankRanges)
    notes: list = field(default_factory=list)


def plan(found: list[tuple[str, tuple | None]]) -> Plan:
    """Ranks for ``(path, rank_info or None)`` pairs (see the module doc); refuses duplicates."""
    if not found:
        raise TraceviewError("no rank trace to analyse")
    known = [(p, i) for p, i in found if i is not None]
    if not known:
        ordered = sorted(p for p, _ in found)
        return Plan(
            dict(enumerate(ordered)), len(ordered), RULE_ORDER, RankRanges(), [f"rank rule: {RULE_ORDER}"]
        )
    notes = [
        f"{p}: no distributedInfo rank in 0..{MAX_RANK}; not a rank of this run, left out"
        for p, i in found
        if i is None
    ]
    ranks: dict = {}
    for p, (r, _) in sorted(known):
        if r in ranks:
            raise TraceviewError(f"{p}: rank {r} again (also {ranks[r]}); one trace per rank")
        ranks[r] = p
    sizes = {ws for _, (_, ws) in known if ws is not None}
    if len(sizes) > 1:
        notes.append(
            f"traces disagree on world_size ({', '.join(map(str, sorted(sizes)))}); using the largest"
        )
    world = max(sizes | {max(ranks) + 1})
    if world > FAR_WORLD and world > FAR_FACTOR * len(ranks):
        notes.append(
            f"world size {world:,} is far beyond the {len(ranks)} rank(s) present (highest "
            f"{max(ranks)}): check the traces' distributedInfo; missing ranks are counted as ranges"
        )
    missing = RankRanges.gaps(ranks, world)
    if missing:
        notes.append(f"missing ranks: {missing} of world size {world:,}")
    return Plan(dict(sorted(ranks.items())), world, RULE_META, missing, notes)


def rank_list(ranks) -> str:
    """Sorted ranks as ranges: ``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"`` (a ``RankRanges``: its
    ranges, without visiting each rank)."""
    if isinstance(ranks, RankRanges):
        return str(ranks)
    parts, start = [], None
    for i, r in enumerate(ranks):
        start = r if start is None else start
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(str(r) if r == start else f"{start}-{r}")
            start = None
    return ", ".join(parts)


def one_job(traces) -> str | None:
    """A hint when loaded traces given as separate traces look like the ranks of one job (every one
    has ``distributedInfo``, the ranks distinct, one world size): None otherwise."""
    got = [rank_info(t.meta) for t in traces]
    infos = [i for i in got if i is not None]
    if len(got) < 2 or len(infos) < len(got):
        return None
    ranks, sizes = [r for r, _ in infos], {ws for _, ws in infos}
    if len(set(ranks)) < len(ranks) or len(sizes) > 1:
        return None
    return (
        f"these {len(ranks)} traces are ranks {rank_list(sorted(ranks))} of one job (distributedInfo, "
        f"world size {next(iter(sizes))}); --run treats them as one run"
    )


def run_files(paths, *, recursive: bool = False) -> list[str]:
    """The trace files named, or found in the folders named."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    return [c.path for c in candidates(items, recursive=recursive)]


@dataclass
class Run:
    """The loaded ranks of one job."""

    traces: dict  # rank -> Trace
    world_size: int
    rule: str
    missing: RankRanges = field(default_factory=RankRanges)
    notes: list = field(default_factory=list)
    skipped: list = field(default_factory=list)  # "PATH: why" for files left out

    def frame(self, name: str) -> pd.DataFrame:
        """One of the traces' frames (``kernels``, ``ops``, ``steps``, ``events``) for every rank,
        with a ``rank`` column first."""
        parts = [getattr(t, name).assign(rank=r) for r, t in self.traces.items()]
        out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        return out[["rank", *[c for c in out.columns if c != "rank"]]]

    def __repr__(self) -> str:
        return f"<Run {len(self.traces)} of {self.world_size} ranks ({self.rule})>"


@dataclass
class Loaded:
    """What loading one rank file (and analysing it there) gave: its rank and value, or why none.
    Only text and small values: it travels back from a Dask worker (a TraceReadError does not pickle)."""

    path: str
    info: tuple | None = None  # rank_info of its metadata
    value: object = None  # the Trace, or what ``analyse`` made of it
    unreadable: str | None = None  # a TraceReadError: left out under skip_bad, else an error
    not_a_trace: bool = False  # ... a NotATraceError: always left out, named in the notes
    failed: str | None = None  # read, but the analysis refused it (a selection that matches nothing)
    fatal: str | None = None  # an error of the setup, not of this file (the cache folder)


def load_rank(path: str, load_kw: dict, analyse: Callable | None = None) -> Loaded:
    """Load one rank file and, with ``analyse``, keep only what it makes of the trace (on a worker:
    the events never travel). A selection error is ``failed``, never ``unreadable``: ``skip_bad``
    leaves out files that can't be read, not ranks the selection misses."""
    try:
        trace = load(path, **load_kw)
    except TraceReadError as exc:
        return Loaded(path, unreadable=str(exc), not_a_trace=isinstance(exc, NotATraceError))
    except TraceviewError as exc:
        return Loaded(path, fatal=str(exc))
    info = rank_info(trace.meta)
    if analyse is None:
        return Loaded(path, info, trace)
    try:
        return Loaded(path, info, analyse(trace))
    except TraceviewError as exc:
        return Loaded(path, info, failed=str(exc))


def settle(done: list[Loaded], skip_bad: bool) -> tuple[Plan, dict, list[str]]:
    """The run of loaded files: its ``Plan``, rank -> value, and a "skipped PATH: why" note per file left
    out. An unreadable file is an error naming it (unless ``skip_bad``); a rank the analysis refused is
    always one (a file that is no rank of the run is not analysed by anyone, so it can't fail)."""
    fatal = next((d.fatal for d in done if d.fatal), None)
    if fatal:
        raise TraceviewError(fatal)
    bad = [d.unreadable for d in done if d.unreadable and not d.not_a_trace]
    if bad and not skip_bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        hint = "; --skip-bad / skip_bad=True leaves unreadable ranks out" if len(done) > 1 else ""
        raise TraceviewError(f"{bad[0]}{more}{hint}")
    read = [d for d in done if not d.unreadable]
    p = plan([(d.path, d.info) for d in read])  # a file named twice: its rank twice
    by_path = {d.path: d for d in read}
    failed = next((by_path[path].failed for path in p.ranks.values() if by_path[path].failed), None)
    if failed:
        raise TraceviewError(failed)
    skipped = [f"skipped {d.unreadable}" for d in done if d.unreadable]
    return p, {r: by_path[path].value for r, path in p.ranks.items()}, skipped


def load_run(paths, *, skip_bad: bool = False, recursive: bool = False, **load_kw) -> Run:
    """Load every rank trace of one job (a folder, or paths). ``skip_bad``: leave out a rank file
    that can't be read (and say so) instead of stopping with an error naming it."""
    done = [load_rank(path, load_kw) for path in run_files(paths, recursive=recursive)]
    p, traces, skipped = settle(done, skip_bad)
    return Run(
        traces, p.world_size, p.rule, p.missing, p.notes + skipped, [s[len("skipped ") :] for s in skipped]
    )
