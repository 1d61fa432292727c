"""A run's per-rank work, serially or spread over Dask workers, by one code path.

``analyse_run(paths)`` finds the rank files, runs ``rank_task`` for each (load the
trace, compute its ``RankWork``) and builds the run's report from what comes back:

- serially in this process (the default);
- ``workers=N``: on a local Dask cluster of N worker processes started here and
  stopped after;
- ``scheduler="tcp://host:port"``: on an existing Dask cluster. The address is checked
  before connecting (``check_address``); connecting is bounded by ``TRACEVIEW_DASK_TIMEOUT``
  seconds (default: Dask's ``distributed.comm.timeouts.connect``, 30 s), and a peer that is
  not a Dask scheduler (never answers, answers garbage) is an error naming the address.

Workers read the trace files themselves, by path: **every worker must see the files
at the same path** (a shared filesystem); each uses its own traceview cache. Only
the small per-rank results travel back. A worker that dies mid-run loses its tasks
to the scheduler, which runs them on another worker (Dask gives up on a file that
has killed ``distributed.scheduler.allowed-failures`` + 1 workers, default 4, and
that is an error naming the file). A rank file that can't be read is an error naming
it, or, with ``skip_bad``, left out and named in the report's notes.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from .analyses.runs.rank_work import RankWork, rank_work
from .analyses.runs.ranks import ranks_report
from .errors import NotATraceError, TraceviewError
from .load import load
from .run import plan, run_files

SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")  # Dask's network transports
TIMEOUT_ENV = "TRACEVIEW_DASK_TIMEOUT"


class AddressError(TraceviewError):
    """A scheduler address that is not one (the CLI's usage error)."""


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


def analyse_run(
    paths,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    skip_bad: bool = False,
    recursive: bool = False,
    progress: Callable | None = None,
    **load_kw,
):
    """The ``ranks`` Report of a run (a folder of rank traces, or paths)."""
    files = run_files(paths, recursive=recursive)
    done = gather(files, load_kw, workers=workers, scheduler=scheduler, progress=progress)
    bad = [d for d in done if d.error and not d.not_a_trace]
    if bad and not skip_bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        hint = "; --skip-bad / skip_bad=True leaves unreadable ranks out" if len(files) > 1 else ""
        raise TraceviewError(f"{bad[0].error}{more}{hint}")
    good = {d.path: d.work for d in done if d.work is not None}
    p = plan(
        [(d.path, d.work.info) for d in done if d.work is not None]
    )  # a file named twice: its rank twice
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

    futures = client.map(
        rank_task, files, load_kw=load_kw, pure=False, key=[f"rank-{i}" for i in range(len(files))]
    )
    names = {f.key: path for f, path in zip(futures, files, strict=True)}
    out = []
    for fut in as_completed(futures):
        try:
            out.append(fut.result())
        except KilledWorker:
            raise TraceviewError(
                f"{names[fut.key]}: every Dask worker that loaded it died (out of memory?)"
            ) from None
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
        address, timeout = check_address(scheduler), connect_timeout()
        probe(address, timeout)
        try:
            client = Client(address, timeout=timeout)
        except Exception as exc:
            raise TraceviewError(f"{address!r}: can't use the Dask scheduler ({said(exc)})") from None
        with client:
            yield client
        return
    if workers < 1:
        raise TraceviewError(f"--workers must be at least 1, not {workers}")
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            host="127.0.0.1",
            silence_logs=50,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def check_address(address) -> str:
    """A scheduler address as Dask takes it (``host:port`` gets ``tcp://``); AddressError when it is
    none: checked before any connection, so that a typo is a usage error and not a wait."""
    text = address.strip() if isinstance(address, str) else ""
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    host, colon, port = rest.rpartition(":")
    expected = "expected tcp://HOST:PORT (or tls, ws, wss, ucx) with PORT 1..65535"
    if scheme not in SCHEMES:
        raise AddressError(
            f"{address!r}: not a Dask scheduler address: unknown scheme {scheme!r}; {expected}"
        )
    if (
        not colon
        or not host.strip("[]")
        or any(c.isspace() or c in "/?#@" for c in host)
        or not (port.isascii() and port.isdigit() and 0 < int(port) < 65536)
    ):
        raise AddressError(f"{address!r}: not a Dask scheduler address; {expected}")
    return f"{scheme}://{rest}"


def connect_timeout() -> float:
    """Seconds to wait for the scheduler: ``TRACEVIEW_DASK_TIMEOUT``, else Dask's connect timeout."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        import dask.config
        from dask.utils import parse_timedelta

        return float(parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s"))
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise TraceviewError(f"{TIMEOUT_ENV}={raw!r}: not a number of seconds above 0")
    return seconds


def probe(address: str, timeout: float) -> None:
    """One Dask handshake with ``address``, all of it within ``timeout``: Dask's own connect waits
    for the peer's handshake without a limit (a peer that accepts and never answers hangs it for
    good) and believes the frame sizes it reads (garbage asks for exabytes). Runs on a thread of
    its own, so it works where an event loop is running already (a notebook)."""
    from distributed.comm import connect

    async def once():
        # Dask gives up on the TCP connection at ``timeout`` (saying why: refused, no such host);
        # the margin lets its reason through, and bounds the handshake that it leaves unbounded
        comm = await asyncio.wait_for(connect(address, timeout=timeout), timeout + 1)
        await comm.close()

    failure: list = []

    def run():
        try:
            asyncio.run(once())
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=run, name="traceview-dask-probe", daemon=True)
    worker.start()
    worker.join(timeout + 5)  # wait_for ends it sooner; the margin is for a stuck loop
    exc = failure[0] if failure else None
    if worker.is_alive() or isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        raise TraceviewError(
            f"{address!r}: no answer from a Dask scheduler within {timeout + 1:g} s "
            f"({TIMEOUT_ENV} sets the wait)"
        )
    if isinstance(exc, OSError):  # refused, unresolvable, closed (Dask's CommClosedError is one)
        raise TraceviewError(f"{address!r}: can't reach the Dask scheduler ({said(exc)})")
    if isinstance(exc, Exception):  # garbage read as frame sizes (MemoryError), or as messages
        raise TraceviewError(
            f"{address!r}: not a Dask scheduler: it answered something else than Dask's "
            f"handshake ({type(exc).__name__})"
        )
    if exc is not None:
        raise exc


def said(exc: BaseException) -> str:
    """An exception and its root cause (refused, no such host), each in a few printable words:
    their text may come from the peer."""
    root, link = exc, exc
    for _ in range(20):  # a chain, not a cycle
        link = link.__cause__ or link.__context__
        if link is None:
            break
        if not isinstance(link, (asyncio.CancelledError, asyncio.TimeoutError, TimeoutError)):
            root = link  # a retry cut short by Dask's own timer says nothing
    return one_line(exc) if root is exc else f"{one_line(exc)}; {one_line(root)}"


def one_line(exc: BaseException) -> str:
    text = (str(exc).splitlines() or [""])[0][:200]
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
