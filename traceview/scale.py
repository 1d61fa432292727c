"""A run's per-rank work, serially or spread over Dask workers, by one code path.

``analyse_run(paths)`` finds the rank files, runs ``rank_task`` for each (load the
trace, compute its ``RankWork``) and builds the run's report from what comes back:

- serially in this process (the default);
- ``workers=N``: on a local Dask cluster of N worker processes started here and
  stopped after;
- ``scheduler="tcp://host:port"``: on an existing Dask cluster.

Workers read the trace files themselves, by path: **every worker must see the files
at the same path** (a shared filesystem); each uses its own traceview cache. Only
the small per-rank results travel back. A worker that dies mid-run loses its tasks
to the scheduler, which runs them on another worker (Dask gives up on a file that
has killed ``distributed.scheduler.allowed-failures`` + 1 workers, default 4, and
that is an error naming the file). A rank file that can't be read is an error naming
it, or, with ``skip_bad``, left out and named in the report's notes.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

from .analyses.rank_work import RankWork, rank_work
from .analyses.ranks import ranks_report
from .errors import NotATraceError, TraceviewError
from .load import load
from .run import plan, run_files


@dataclass
class Done:
    """What one rank task sends back: the RankWork, or why there is none."""

    path: str
    work: RankWork | None = None
    error: str | None = None
    not_a_trace: bool = False


def rank_task(path: str, load_kw: dict) -> Done:
    """Load one rank file and compute its RankWork (runs on a worker)."""
    try:
        return Done(path, rank_work(load(path, **load_kw)))
    except NotATraceError as exc:
        return Done(path, error=str(exc), not_a_trace=True)
    except TraceviewError as exc:
        return Done(path, error=str(exc))


def analyse_run(paths, *, workers: int | None = None, scheduler: str | None = None, skip_bad: bool = False,
                recursive: bool = False, progress: Callable | None = None, **load_kw):
    """The ``ranks`` Report of a run (a folder of rank traces, or paths)."""
    files = run_files(paths, recursive=recursive)
    done = gather(files, load_kw, workers=workers, scheduler=scheduler, progress=progress)
    bad = [d for d in done if d.error and not d.not_a_trace]
    if bad and not skip_bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        hint = "; --skip-bad / skip_bad=True leaves unreadable ranks out" if len(files) > 1 else ""
        raise TraceviewError(f"{bad[0].error}{more}{hint}")
    good = {d.path: d.work for d in done if d.work is not None}
    p = plan([(d.path, d.work.info) for d in done if d.work is not None])  # a file named twice: its rank twice
    skipped = [f"skipped {d.error}" for d in done if d.error]
    return ranks_report({r: good[path] for r, path in p.ranks.items()}, p, skipped)


def gather(files: list, load_kw: dict, *, workers=None, scheduler=None, progress=None) -> list[Done]:
    """``rank_task`` for every file: here, or on Dask when ``workers`` or ``scheduler`` is given."""
    tick = progress or (lambda done, total: None)
    if workers is None and scheduler is None:
        out = []
        for f in files:
            out.append(rank_task(f, load_kw))
            tick(len(out), len(files))
        return out
    with dask_client(workers, scheduler) as client:
        return on_dask(client, files, load_kw, tick)


def on_dask(client, files: list, load_kw: dict, tick: Callable) -> list[Done]:
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    futures = client.map(rank_task, files, load_kw=load_kw, pure=False, key=[f"rank-{i}" for i in range(len(files))])
    names = {f.key: path for f, path in zip(futures, files)}
    out = []
    for fut in as_completed(futures):
        try:
            out.append(fut.result())
        except KilledWorker:
            raise TraceviewError(f"{names[fut.key]}: every Dask worker that loaded it died "
                                 "(out of memory?)") from None
        tick(len(out), len(files))
    return out


@contextlib.contextmanager
def dask_client(workers: int | None, scheduler: str | None):
    """A Dask client on ``scheduler``, or on a local cluster of ``workers`` processes (stopped after)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise TraceviewError("--workers/--scheduler need Dask: pip install 'traceview[dask]'") from None
    if scheduler is not None:
        try:
            client = Client(scheduler)  # times out after distributed.comm.timeouts.connect
        except (OSError, TimeoutError) as exc:
            raise TraceviewError(f"{scheduler}: can't reach the Dask scheduler ({exc})") from None
        with client:
            yield client
        return
    if workers < 1:
        raise TraceviewError(f"--workers must be at least 1, not {workers}")
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                      host="127.0.0.1", silence_logs=50) as cluster, Client(cluster) as client:
        yield client
