"""One-call bridge to Holistic Trace Analysis (HTA, ``import hta``).

HTA is published on PyPI as ``traceinsight`` (0.6.x) and, up to 0.5.0, as
``holistictraceanalysis``; both install the module ``hta``. Install it with
``pip install 'traceview[hta]'``. Nothing here imports ``hta`` until a function
is called, so ``import traceview`` never pays for it.

What the bridge does for you, compared with ``hta.trace_analysis.TraceAnalysis(trace_dir=...)``:

* **Rank from the parsed metadata.** HTA finds a file's rank with the regex
  ``"rank":\\s+(\\d+)`` (hta/common/trace_file.py), which needs a space after the
  colon: compact JSON (``"rank":3``) silently loads as rank 0, and so does any file
  without ``distributedInfo``. The bridge reads ``distributedInfo.rank`` with
  traceview's JSON reader and hands HTA an explicit ``{rank: path}`` dict.
* **No silent collisions.** HTA maps two files with the same (or no) rank to one
  key and keeps only the last, with a log warning. :func:`to_hta_many` refuses that
  with a :class:`~traceview.errors.TraceviewError`, or renumbers on request.
* **All steps kept.** HTA drops the last ``ProfilerStep`` by default; the bridge
  passes ``include_last_profiler_step=True``. HTA still drops, whenever a trace has
  two or more ``ProfilerStep#N``: GPU activities launched after the last step ends
  and GPU activities whose correlation id matches no CPU event (no launch in the
  trace). Activities launched before the first step are kept.
* **Paths HTA accepts.** HTA wants a directory or absolute ``.json``/``.gz`` names;
  a trace saved under another suffix (traceview reads any gzip) is linked into
  ``workdir`` under a name HTA accepts.
* **Errors.** :func:`call` runs one HTA analysis and turns any exception into a
  one-line TraceviewError naming the trace, the analysis and HTA's version.

Things the bridge does *not* change: HTA measures time in microseconds, and for
traces with fractional-microsecond timestamps it rounds each event inward
(``ts`` up, ``ts + dur`` down), so sub-microsecond activities get zero or negative
durations (``ns_rounding=False`` turns HTA's own switch for it off while parsing, without
setting its environment variable: ``_ns_rounding``). HTA's GPU table is every event with a
stream: kernels, memcpy, memset and ``cuda_sync`` events (``Stream Wait Event``, ``Stream Sync``,
``Context Sync``) alike, so those widen its GPU span and count as non-computation time.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ..errors import TraceviewError

INSTALL_HINT = "pip install 'traceview[hta]'"
#: The HTA analyses the bridge and ``traceview hta`` support.
ANALYSES = ("temporal", "idle", "kernels", "launch")
_DISTRIBUTIONS = ("traceinsight", "HolisticTraceAnalysis", "holistictraceanalysis")


class HTAMissing(TraceviewError):
    """HTA is not installed."""

    def __init__(self):
        super().__init__(
            f"Holistic Trace Analysis (module 'hta') is not installed; install it with: {INSTALL_HINT}"
        )


class HTAFailed(TraceviewError):
    """An HTA analysis raised; the message names the trace, the analysis and HTA's version."""


def import_hta():
    """The ``hta`` module, or HTAMissing."""
    try:
        import hta
        import hta.trace_analysis
    except ImportError:
        raise HTAMissing() from None
    return hta


def hta_version() -> str:
    """Installed HTA's distribution and version, e.g. ``traceinsight 0.6.1``."""
    from importlib import metadata

    for dist in _DISTRIBUTIONS:
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    try:
        import hta.version as v

        return "hta " + ".".join(str(x) for x in v.__version_tuple__)
    except Exception:  # pragma: no cover - HTA without version info
        return "hta (unknown version)"


@contextlib.contextmanager
def _quiet():
    """HTA logs progress at WARNING and trips pandas' deprecation warnings: hold both back."""
    import logging
    import warnings

    log = logging.getLogger("hta")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        log.setLevel(level)


@contextlib.contextmanager
def _hta_errors(path, analysis: str):
    """Any exception from HTA -> HTAFailed, one line: trace, analysis, HTA version, cause."""
    try:
        with _quiet():
            yield
    except TraceviewError:
        raise
    except Exception as exc:  # HTA raises asserts, ValueErrors, TypeErrors from pandas, ...
        cause = " ".join(str(exc).split())[:200] or "(no message)"
        hint = ""
        if analysis == "temporal" and isinstance(exc, AssertionError):
            hint = (
                " (HTA rounds ns timestamps to whole µs, giving sub-µs activities negative durations;"
                " retry with ns_rounding=False / --no-ns-rounding)"
            )
        raise HTAFailed(
            f"{path}: HTA analysis '{analysis}' failed under {hta_version()}: "
            f"{type(exc).__name__}: {cause}{hint}"
        ) from exc


def call(ta, analysis: str, fn, *args, path=None, **kwargs):
    """Run ``fn(*args, **kwargs)`` (an HTA call on ``ta``), translating HTA's exceptions."""
    label = path if path is not None else _label(ta)
    with _hta_errors(label, analysis):
        return fn(*args, **kwargs)


def _label(ta) -> str:
    return ta.label if isinstance(ta, HTARun) else "trace"


def _meta(trace_or_path) -> tuple[str, dict]:
    """(absolute path, top-level metadata) of a Trace or a path, without building events."""
    from ..model import Trace

    if isinstance(trace_or_path, Trace):
        return os.path.abspath(trace_or_path.path), trace_or_path.meta
    from ..read import read_bytes, split_document

    path = os.path.abspath(os.fspath(trace_or_path))
    data = read_bytes(path)
    if data.lstrip()[:1] == b"[":
        raise TraceviewError(
            f'{path}: a bare JSON array of events; HTA reads only {{"traceEvents": [...]}} documents'
        )
    meta, _ = split_document(data, path)
    return path, meta


def trace_rank(meta: dict) -> int | None:
    """``distributedInfo.rank`` as an int, or None when the trace does not say."""
    info = meta.get("distributedInfo") if isinstance(meta, dict) else None
    rank = info.get("rank") if isinstance(info, dict) else None
    if isinstance(rank, bool):
        return None
    if isinstance(rank, int):
        return rank
    if isinstance(rank, str) and rank.strip().isdigit():
        return int(rank)
    return None


def _check_rank(rank, path) -> int:
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise TraceviewError(f"{path}: rank must be a non-negative int, got {rank!r}")
    return rank


def _hta_path(path: str, workdir, made: list) -> str:
    """A name HTA accepts (absolute, ending .json or .gz, gzip iff .gz)."""
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    if (gz and path.endswith(".gz")) or (not gz and path.endswith(".json")):
        return path
    if workdir is None:
        if not made:
            made.append(tempfile.mkdtemp(prefix="traceview-hta-"))
        workdir = made[0]
    Path(workdir).mkdir(parents=True, exist_ok=True)
    stem = Path(path).name
    link = Path(workdir) / f"{len(list(Path(workdir).iterdir()))}-{stem}{'.json.gz' if gz else '.json'}"
    try:
        link.symlink_to(path)
    except OSError:  # no symlinks here: copy
        import shutil

        shutil.copyfile(path, link)
    return str(link)


#: HTA 0.6+ keeps the switch in one object for the whole process: parses that set it take turns
_SWITCH = threading.Lock()


@contextlib.contextmanager
def _ns_rounding(enabled: bool):
    """HTA's rounding of fractional-µs timestamps on or off while parsing, restored after.

    No environment variable is set (``os.environ`` is shared by every thread, and setting it is
    not thread-safe): HTA 0.6+ takes the switch through ``HTAEnvOptions.set_disable_ns_rounding``,
    held under a lock for the parse. HTA 0.5's parser asks ``env_options.disable_ns_rounding()``
    (a module function that reads the variable) at each parse: that function is answered for the
    parse, under the same lock, and put back after.
    """
    import hta.configs.env_options as env_options

    options = getattr(env_options, "HTAEnvOptions", None)
    if options is None:  # HTA 0.5
        with _SWITCH:
            asked = env_options.disable_ns_rounding
            env_options.disable_ns_rounding = lambda: not enabled
            try:
                yield
            finally:
                env_options.disable_ns_rounding = asked
        return
    with _SWITCH:
        opts = options.instance()
        before = opts.disable_ns_rounding()
        opts.set_disable_ns_rounding(not enabled)
        try:
            yield
        finally:
            opts.set_disable_ns_rounding(before)


@dataclass(frozen=True)
class HTARun:
    """HTA's ``TraceAnalysis`` with the traceview paths it was built from (by rank).

    Attribute access is forwarded to the analysis, so ``run.get_temporal_breakdown()``
    and ``run.t`` work as on HTA's own object, which traceview leaves untouched.
    """

    analysis: object
    paths: list
    ranks: dict  # rank -> path
    ns_rounding: bool = True  # whether HTA rounded fractional-µs timestamps inward when it parsed
    notes: tuple = ()  # what the bridge did that a report should say

    @property
    def label(self) -> str:
        return ", ".join(self.paths) or "trace"

    def __getattr__(self, name):
        return getattr(self.analysis, name)


def _build(files: dict[int, str], paths: list[str], include_last_step: bool, ns_rounding: bool):
    import_hta()
    from hta.trace_analysis import TraceAnalysis

    label = ", ".join(paths)
    with _ns_rounding(ns_rounding), _hta_errors(label, "load"):
        ta = TraceAnalysis(trace_files=dict(files), include_last_profiler_step=include_last_step)
    broken = _negative_gpu_durations(ta, files, label) if ns_rounding else 0
    if not broken:
        return HTARun(ta, list(paths), dict(zip(files, paths, strict=True)), ns_rounding)
    # A GPU activity shorter than 1 µs between two whole µs (H100 traces hold 20 ns kernels) gets
    # ceil(ts) > floor(ts + dur) from HTA's rounding, and its temporal breakdown then fails an
    # assert: parse again without the rounding rather than fail by default.
    with _ns_rounding(False), _hta_errors(label, "load"):
        ta = TraceAnalysis(trace_files=dict(files), include_last_profiler_step=include_last_step)
    note = (
        f"HTA's rounding of timestamps to whole µs would give {broken} sub-µs GPU activit"
        f"{'y' if broken == 1 else 'ies'} a negative duration, so it parsed the trace without it "
        "(as --no-ns-rounding does)"
    )
    return HTARun(ta, list(paths), dict(zip(files, paths, strict=True)), False, (note,))


def _negative_gpu_durations(ta, files: dict, label: str) -> int:
    """How many GPU events (those with a stream) HTA's parse left with a negative duration."""
    with _hta_errors(label, "load"):
        return int(sum(((df := ta.t.get_trace(r))["stream"].ne(-1) & df["dur"].lt(0)).sum() for r in files))


def to_hta(
    trace_or_path,
    *,
    rank: int | None = None,
    workdir=None,
    include_last_step: bool = True,
    ns_rounding: bool = True,
):
    """One trace (a traceview ``Trace`` or a path) as an ``hta.trace_analysis.TraceAnalysis``.

    ``rank``: the rank HTA files the trace under; default ``distributedInfo.rank`` from
    the trace's metadata, else 0 (HTA's own regex reads compact JSON's ``"rank":3`` as 0).
    ``workdir``: where to link a trace whose name HTA would refuse (default: a temp dir).
    ``include_last_step``: keep the last ProfilerStep (HTA drops it by default; see the
    module docstring for what HTA drops regardless). ``ns_rounding=False`` keeps
    fractional-µs timestamps instead of HTA's inward rounding.
    Raises HTAMissing when HTA is not installed, HTAFailed when HTA cannot load the trace.
    """
    import_hta()
    path, meta = _meta(trace_or_path)
    if rank is None:
        rank = trace_rank(meta)
    rank = _check_rank(0 if rank is None else rank, path)
    hta_path = _hta_path(path, workdir, [])
    return _build({rank: hta_path}, [path], include_last_step, ns_rounding)


def to_hta_many(
    traces,
    *,
    ranks=None,
    renumber: bool = False,
    workdir=None,
    include_last_step: bool = True,
    ns_rounding: bool = True,
):
    """Several traces (one per rank) as one ``TraceAnalysis``.

    Ranks come from ``ranks`` (one per trace, in order), else from each trace's
    ``distributedInfo.rank``. A trace without one, or two traces with the same rank,
    is refused with a TraceviewError naming the files (HTA would silently keep only
    one of them), unless ``renumber=True``, which files the traces as ranks 0..n-1 in
    the order given.
    """
    import_hta()
    items = [_meta(t) for t in traces]
    if not items:
        raise TraceviewError("to_hta_many: no traces given")
    paths = [p for p, _ in items]
    if ranks is not None:
        ranks = list(ranks)
        if len(ranks) != len(items):
            raise TraceviewError(f"to_hta_many: {len(items)} traces but {len(ranks)} ranks")
        chosen = [_check_rank(r, p) for r, p in zip(ranks, paths, strict=True)]
    elif renumber:
        chosen = list(range(len(items)))
    else:
        found = [trace_rank(m) for _, m in items]
        missing = [p for p, r in zip(paths, found, strict=True) if r is None]
        if missing and len(items) > 1:
            raise TraceviewError(
                f"{missing[0]}: no distributedInfo.rank in the trace ({len(missing)} of "
                f"{len(items)} traces lack one); pass ranks=[...] or renumber=True"
            )
        chosen = [0 if r is None else r for r in found]
    by_rank: dict[int, list[str]] = {}
    for r, p in zip(chosen, paths, strict=True):
        by_rank.setdefault(r, []).append(p)
    clash = {r: ps for r, ps in by_rank.items() if len(ps) > 1}
    if clash:
        r, ps = next(iter(sorted(clash.items())))
        more = f" (and {len(clash) - 1} more ranks)" if len(clash) > 1 else ""
        raise TraceviewError(
            f"rank {r} is claimed by {len(ps)} traces: {', '.join(ps)}{more}; HTA would keep only "
            "one; pass ranks=[...] or renumber=True"
        )
    made: list = []
    files = {r: _hta_path(p, workdir, made) for r, p in zip(chosen, paths, strict=True)}
    return _build(files, paths, include_last_step, ns_rounding)


def gpu_events(ta, rank: int):
    """HTA's GPU table for one rank (every event with a stream), names decoded, as HTA keeps it."""
    with _hta_errors(_label(ta), "load"):
        df = ta.t.get_trace(rank)
        sym = ta.t.symbol_table.get_sym_table()
        g = df[df["stream"].ne(-1)].copy()
        g["s_name"] = [sym[i] for i in g["name"].to_numpy()]
        g["s_cat"] = [sym[i] for i in g["cat"].to_numpy()]
    return g
