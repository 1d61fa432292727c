"""Every run command's per-rank work, serially or spread over Dask workers, by one code path.

``ranks``, ``summary --run``, ``compare --run`` and ``diff RUN_A/ RUN_B/`` all call
``run_results(runs)``: it finds each run's rank files and runs ``rank_task`` once for every
file of every run (load the trace, compute its ``RankResult``: the RankWork, the registry's
metrics of the selection and its category table; ``analyses/runs/rank_work.py``), then settles
which file is which rank (``run.settle``). A loaded ``Run`` goes through the same
``rank_result`` (``of_run``). The executor is the only difference:

- serially in this process (the default);
- ``workers=N``: on a local Dask cluster of N worker processes started here and
  stopped after;
- ``scheduler="tcp://host:port"``: on an existing Dask cluster. The address is checked
  before connecting (``check_address``); connecting is bounded by ``TRACEVIEW_DASK_TIMEOUT``
  seconds (default: Dask's ``distributed.comm.timeouts.connect``, 30 s), and a peer that is
  not a Dask scheduler (never answers, answers garbage) is an error naming the address.

Workers read the trace files themselves, by path: **every worker must see the files
at the same path** (a shared filesystem); each uses its own traceview cache. Only
the small per-rank results travel back, and they are put back in file order, so a
Dask run's report equals the serial one. A worker that dies mid-run loses its tasks
to the scheduler, which runs them on another worker (Dask gives up on a file that
has killed ``distributed.scheduler.allowed-failures`` + 1 workers, default 4, and
that is an error naming the file). A rank file that can't be read is an error naming
it, or, with ``skip_bad``, left out and named in the report's notes; a selection that
matches nothing on a rank is always an error (it is no unreadable file).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from . import temporaries
from .analyses.runs.rank_work import RunResults, rank_result
from .analyses.runs.ranks import ranks_report
from .errors import TraceviewError
from .read import read_together
from .report import Report
from .run import Loaded, load_rank, run_files, settle
from .selection import Selection

SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")  # Dask's network transports
TIMEOUT_ENV = "TRACEVIEW_DASK_TIMEOUT"


class AddressError(TraceviewError):
    """A scheduler address that is not one (the CLI's usage error)."""


def rank_task(path: str, load_kw: dict, sel: Selection | None = None, work: bool = True) -> Loaded:
    """Load one rank file and compute its RankResult (runs on a worker; only the result travels)."""
    return load_rank(path, load_kw, functools.partial(rank_result, sel=sel, work=work))


def run_results(
    runs: list,
    sel: Selection | None = None,
    *,
    work: bool = True,
    workers: int | None = None,
    scheduler: str | None = None,
    skip_bad: bool = False,
    recursive: bool = False,
    progress: Callable | None = None,
    **load_kw,
) -> list[RunResults]:
    """Each run's (a folder of rank traces, or paths) RankResults: every file of every run in one
    ``gather`` (one Dask cluster for the command), each loaded once. ``work``: with the RankWork."""
    files = [run_files(paths, recursive=recursive) for paths in runs]
    flat = [f for fs in files for f in fs]
    done = gather(flat, load_kw, sel, work, workers=workers, scheduler=scheduler, progress=progress)
    out, at = [], 0
    for fs in files:
        p, ranks, skipped = settle(done[at : at + len(fs)], skip_bad)
        out.append(RunResults(ranks, p.world_size, p.rule, p.missing, list(p.notes), skipped))
        at += len(fs)
    return out


def ranks_of(res: RunResults) -> Report:
    """The ``ranks`` Report of a run's results."""
    return ranks_report(res.works(), res, res.skipped)


def analyse_run(paths, **kw) -> Report:
    """The ``ranks`` Report of a run (a folder of rank traces, or paths); ``kw`` as ``run_results``'."""
    return ranks_of(run_results([paths], **kw)[0])


def gather(files: list, load_kw: dict, sel=None, work=True, *, workers=None, scheduler=None, progress=None):
    """``rank_task`` for every file, in file order: here, or on Dask when ``workers`` or ``scheduler``
    is given (the only difference between the two)."""
    tick = progress or (lambda done, total: None)
    if workers is None and scheduler is None:
        # two ranks at a time on threads where they may be read together (``read_together``): a
        # load is half compiled scanning and numpy copies, which release the GIL, so one rank's
        # linking runs beside the next one's scan (8 x 90 MB ranks: see benchmarks/bench_jobs.py);
        # results, progress and errors come in file order
        def each(f):
            return rank_task(f, load_kw, sel, work)

        out = []
        together = read_together(files)
        pool_or_none = ThreadPoolExecutor(max_workers=2) if together else contextlib.nullcontext()
        with temporaries.armed(), pool_or_none as pool:  # SIGTERM removes the threads' cache files too
            for got in pool.map(each, files) if pool is not None else map(each, files):
                out.append(got)
                tick(len(out), len(files))
        return out
    with dask_client(workers, scheduler) as client:
        return on_dask(client, files, load_kw, sel, work, tick)


def on_dask(client, files: list, load_kw: dict, sel, work: bool, tick: Callable) -> list[Loaded]:
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    keys = [f"rank-{i}" for i in range(len(files))]
    futures = client.map(rank_task, files, load_kw=load_kw, sel=sel, work=work, pure=False, key=keys)
    index = {f.key: i for i, f in enumerate(futures)}
    out: list = [None] * len(files)
    for n, fut in enumerate(as_completed(futures), 1):
        try:
            out[index[fut.key]] = fut.result()  # back in file order: the report equals the serial one
        except KilledWorker:
            raise TraceviewError(
                f"{files[index[fut.key]]}: every Dask worker that loaded it died (out of memory?)"
            ) from None
        tick(n, len(files))
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
    if workers is None or workers < 1:
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
        try:
            import distributed  # noqa: F401  (importing it adds its defaults to dask.config)
        except ImportError:
            raise TraceviewError("--workers/--scheduler need Dask: pip install 'traceview[dask]'") from None
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
        nxt = link.__cause__ or link.__context__
        if nxt is None:
            break
        link = nxt
        if not isinstance(link, (asyncio.CancelledError, asyncio.TimeoutError, TimeoutError)):
            root = link  # a retry cut short by Dask's own timer says nothing
    return one_line(exc) if root is exc else f"{one_line(exc)}; {one_line(root)}"


def one_line(exc: BaseException) -> str:
    text = (str(exc).splitlines() or [""])[0][:200]
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
