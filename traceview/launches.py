"""Whether a file holds all the GPU work its host launched: a fact of the link, so that ``load``
puts the warning in ``Trace.warnings`` and every command carries it (issue 32).

- the runtime launches (``cudaLaunchKernel``, ``cudaMemcpyAsync``, … listed in
  ``rules/completeness.toml``) with no GPU activity in the file, and the GPU activities with no
  launch in it. A profiler that drops activity records leaves launches behind; such a trace
  under-reports every per-step time. Counted over the whole file (a lost activity has no time
  to place it in a step), and said where in the file the loss lies.
- CUDA graphs: the kernels whose launch is a ``cudaGraphLaunch`` (linked by correlation in
  ``link``) are graph replays. They have no CPU op of their own, hence no shapes and no FLOPs.

``analyses.measure.completeness`` builds the tables and the cited findings on these figures.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from . import schema
from .deferred import Deferred
from .errors import TraceviewError
from .units import human_ns

RULES_PATH = Path(__file__).resolve().parent / "rules" / "completeness.toml"


class CompletenessRules(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    warn_pct: float
    kernel_launch: list[str]
    copy_launch: list[str]
    graph_launch: str
    gemm_m: dict[str, int]


@functools.lru_cache(maxsize=1)
def rules() -> CompletenessRules:
    try:
        r = schema.convert(schema.read(RULES_PATH, "completeness rules"), CompletenessRules)
        for p in [*r.kernel_launch, *r.copy_launch, r.graph_launch]:
            re.compile(p)
    except (schema.Invalid, re.error) as e:  # a broken installation, not a user's input
        raise TraceviewError(f"{RULES_PATH}: {e}") from None
    return r


def _matches(names: pd.Series, patterns: list[str]) -> np.ndarray:
    """Whether each name matches one of ``patterns`` in full, worked out once per distinct name."""
    rx = re.compile("|".join(f"(?:{p})" for p in patterns))
    cats = names.astype("category")
    hit = np.array([bool(rx.fullmatch(str(c))) for c in cats.cat.categories] + [False])
    codes = cats.cat.codes.to_numpy()
    return hit[np.where(codes < 0, len(hit) - 1, codes)]


def graph_replays(k: pd.DataFrame) -> np.ndarray:
    """Which GPU activities were launched by a graph launch (``cudaGraphLaunch``)."""
    if not len(k) or "launch_name" not in k.columns:
        return np.zeros(len(k), dtype=bool)
    return _matches(k["launch_name"], [rules().graph_launch]) & (k["launch"].to_numpy() >= 0)


def launches(trace) -> pd.DataFrame:
    """The runtime launch calls of the file: ``api``, ``kind`` (kernel/copy), ``lost`` (no GPU
    activity links to it), ``ts_ns`` (when the host called it). A driver call under a runtime call
    of the same correlation is the same launch (``link`` links activities to the runtime call), so
    it is left out. Worked out once per loaded trace (completeness and host launches each ask;
    a cached trace's entry keeps it: ``cache._LINK_TABLES``); its readers never change it."""
    got = trace.derived.get("launches")
    if isinstance(got, Deferred):  # a cache hit's: the entry's table, read now (None: it has none)
        got = got.value()
    if got is None:
        got = _launches(trace)
    trace.derived["launches"] = got
    return got


def _launches(trace) -> pd.DataFrame:
    ev = trace.events  # every load asks (Trace.warnings): numpy on the runtime rows, per-name regexes
    rows = np.flatnonzero((ev["role"] == "runtime").to_numpy())
    names = ev["name"].iloc[rows]
    r = rules()
    is_kernel, is_copy = _matches(names, r.kernel_launch), _matches(names, r.copy_launch)
    keep = is_kernel | is_copy
    rows, is_kernel = rows[keep], is_kernel[keep]
    cat = ev["cat"].iloc[rows].astype("category")
    driver = np.append(cat.cat.categories.str.lower() == "cuda_driver", False)[cat.cat.codes.to_numpy()]
    if driver.any():  # else every call is its own launch: no id to look up (a sort of 10^6 ids)
        corr = ev["correlation"].iloc[rows]
        valid = corr.notna().to_numpy()
        ids = corr.to_numpy(dtype=np.int64, na_value=0)
        covered = valid & np.isin(ids, ids[~driver & valid])
        own = ~(driver & covered)
        rows, is_kernel = rows[own], is_kernel[own]
    name = ev["name"]
    return pd.DataFrame(
        {
            "api": _in_name_order(name.cat.categories, name.cat.codes.to_numpy()[rows]),
            "kind": pd.Categorical.from_codes(
                is_kernel.astype(np.int8), categories=pd.Index(["copy", "kernel"], dtype="str")
            ),
            "lost": ~_launched(ev.index, rows, trace.kernels["launch"].to_numpy()),
            "ts_ns": ev["ts_ns"].to_numpy()[rows],
        }
    )


def _in_name_order(texts, codes: np.ndarray) -> pd.Categorical:
    """``texts[codes]`` (code -1: missing) as a categorical of the texts used, in the order of
    their names: what a grouping sorted by text gives (by_api, host launches), without typing a
    string per launch (a take of Arrow strings cost ~0.1 s on a 300 MB trace)."""
    used = np.unique(codes[codes >= 0])
    names = np.array([str(t) for t in np.asarray(texts, dtype=object)[used]], dtype=object)
    order = np.argsort(names, kind="stable")
    slot = np.full(len(texts) + 1, -1, dtype=np.int64)  # a missing code (-1) picks the last: -1
    slot[used[order]] = np.arange(len(used))
    return pd.Categorical.from_codes(slot[codes], categories=pd.Index(list(names[order]), dtype="str"))


def _launched(index: pd.Index, rows: np.ndarray, linked: np.ndarray) -> np.ndarray:
    """Whether an activity links to each of the events ``rows`` (``linked``: each activity's
    events row, -1 none): a mark per events row where the index is the rows' positions."""
    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
        hit = np.zeros(len(index) + 1, dtype=bool)
        hit[linked] = True  # -1 marks the extra last entry, which no row reads
        return hit[rows]
    return np.isin(index.to_numpy()[rows], linked[linked >= 0])


def by_api(trace, lw: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per launch API: launches, how many have no GPU activity in the file, and their share
    (``lw``: the trace's ``launches`` where the caller has them already)."""
    lw = launches(trace) if lw is None else lw
    g = lw.groupby(["api", "kind"], sort=True, observed=True)["lost"]
    out = pd.DataFrame({"launches": g.size(), "without_gpu": g.sum().astype(np.int64)}).reset_index()
    out["without_gpu_pct"] = 100.0 * out["without_gpu"] / out["launches"]
    return out.sort_values(["without_gpu", "launches"], ascending=False, kind="stable").reset_index(drop=True)


def completeness(trace) -> dict:
    """The completeness figures of one trace file (see docs/metrics.md), and ``warning``: one line
    when the kernel launches without GPU activity or the activities without launch reach
    ``warn_pct``, else None. Worked out once per loaded trace (load, summary, diff and compare
    each ask for it); a cached trace's entry keeps it (``cache._LINK_VALUES``)."""
    if "completeness" not in trace.derived:
        trace.derived["completeness"] = _completeness(trace)
    return dict(trace.derived["completeness"])


def _completeness(trace) -> dict:
    lw, k = launches(trace), trace.kernels
    apis = by_api(trace, lw)
    kern = apis[apis["kind"] == "kernel"]
    n_launch, n_lost = int(kern["launches"].sum()), int(kern["without_gpu"].sum())
    no_launch = int((k["launch"].to_numpy() < 0).sum()) if len(k) else 0
    graph = graph_replays(k)
    dur = np.clip(k["dur_ns"].to_numpy(), 0, None) if len(k) else np.zeros(0, np.int64)
    out = {
        "kernel_launches": n_launch,
        "launches_without_gpu": n_lost,
        "launches_without_gpu_pct": _pct(n_lost, n_launch),
        "copy_launches_without_gpu": int(apis.loc[apis["kind"] == "copy", "without_gpu"].sum()),
        "gpu_activities": len(k),
        "activities_without_launch": no_launch,
        "activities_without_launch_pct": _pct(no_launch, len(k)),
        "graph_replays": int(graph.sum()),
        "graph_replay_pct_of_gpu_time": _pct(int(dur[graph].sum()), int(dur.sum())),
        # by launch API, kernel and copy calls alike (table launches has the counts by API)
        "without_gpu_by_api": ", ".join(
            f"{a} {n:,}" for a, n in zip(apis["api"], apis["without_gpu"], strict=True) if n
        ),
    }
    t0 = trace.start_ns
    kl = lw[(lw["kind"] == "kernel").to_numpy()]
    out.update(_span("launches_without_gpu", kl["ts_ns"].to_numpy() - t0, kl["lost"].to_numpy()))
    start = k["ts_ns"].to_numpy() - t0 if len(k) else np.zeros(0, np.int64)
    out.update(_span("activities_without_launch", start, k["launch"].to_numpy() < 0 if len(k) else start > 0))
    lost = kern[kern["without_gpu"] > 0]
    which = ", ".join(f"{a} {n:,}" for a, n in zip(lost["api"], lost["without_gpu"], strict=True))
    out["warning"] = warning(trace.label, out, which)
    return out


def _span(what: str, ts: np.ndarray, bad: np.ndarray) -> dict:
    """Where the ``bad`` ones of events at ``ts`` (ns into the trace) lie: ``{what}_from_ns`` and
    ``{what}_to_ns``, the first and the last of them (None when there are none), ``{what}_at_start``
    and ``{what}_at_end``, how many come before every good one and after every good one. A profiler
    that stopped recording leaves a tail (every launch after some time lost); one that started late
    a head; a buffer dropped now and then leaves them spread between."""
    if not bad.any():
        return {f"{what}_from_ns": None, f"{what}_to_ns": None, f"{what}_at_start": 0, f"{what}_at_end": 0}
    b, good = ts[bad], ts[~bad]
    first, last = (int(good.min()), int(good.max())) if len(good) else (None, None)
    return {
        f"{what}_from_ns": int(b.min()),
        f"{what}_to_ns": int(b.max()),
        f"{what}_at_start": int((b < first).sum()) if first is not None else len(b),
        f"{what}_at_end": int((b > last).sum()) if last is not None else len(b),
    }


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def warned(c: dict) -> tuple[bool, bool]:
    """Whether the launches without GPU activity, and the activities without launch, reach the
    warning threshold."""
    limit = rules().warn_pct
    lost = bool(c["launches_without_gpu"]) and c["launches_without_gpu_pct"] >= limit
    unlaunched = bool(c["activities_without_launch"]) and c["activities_without_launch_pct"] >= limit
    return lost, unlaunched


def warning(label: str, c: dict, which: str = "") -> str | None:
    """The one line that says a file is incomplete, how much, where, and what that does to the
    figures (``which``: the kernel launch APIs that lost activities, with counts); None when it is
    complete enough (``warn_pct``)."""
    lost, unlaunched = warned(c)
    parts = []
    if lost:
        parts.append(
            f"{c['launches_without_gpu']:,} of {c['kernel_launches']:,} kernel launches "
            f"({c['launches_without_gpu_pct']:.0f}%) have no GPU activity in the file"
            + (f" ({which})" if which else "")
            + f", {where(c, 'launches_without_gpu', _plain)}"
        )
    if unlaunched:
        parts.append(
            f"{c['activities_without_launch']:,} of {c['gpu_activities']:,} GPU activities "
            f"({c['activities_without_launch_pct']:.0f}%) have no launch in the file, "
            f"{where(c, 'activities_without_launch', _plain)}"
        )
    if not parts:
        return None
    return f"{label} is incomplete: " + "; ".join(parts) + consequence(c)


def _plain(c: dict, column: str, how: str) -> str:
    """A figure of ``c`` as the warning states it: a time (``ns``) or a count."""
    return human_ns(c[column]) if how == "ns" else f"{c[column]:,}"


def where(c: dict, what: str, say) -> str:
    """Where in the trace the missing part of ``what`` (``launches_without_gpu`` or
    ``activities_without_launch``) lies, in words; ``say(c, column, how)`` states a figure (plainly,
    or citing the cell it reads): "every launch from 29.300 ms into the trace on" when the
    profiler stopped recording GPU work, "every activity up to 1.480 ms into the trace" when it
    started late, else the span they are spread over and how many lie at either end."""
    n, one = c[what], "launch" if what == "launches_without_gpu" else "activity"
    other = "GPU work" if one == "launch" else "launch"
    if c[f"{what}_at_end"] == n:
        return f"every {one} from {say(c, f'{what}_from_ns', 'ns')} into the trace on"
    if c[f"{what}_at_start"] == n:
        return f"every {one} up to {say(c, f'{what}_to_ns', 'ns')} into the trace"
    lo, hi = say(c, f"{what}_from_ns", "ns"), say(c, f"{what}_to_ns", "ns")
    ends = [
        f"{say(c, f'{what}_{end}', 'count')} {side} {one} whose {other} is in the file"
        for end, side in (("at_start", "before the first"), ("at_end", "after the last"))
        if c[f"{what}_{end}"]
    ]
    return f"spread from {lo} to {hi} into the trace" + "".join(f", {e}" for e in ends)


def consequence(c: dict) -> str:
    """What the missing part does to the figures: lost GPU work makes times and counts too low;
    GPU work whose launch was not recorded is all there but tied to no CPU op."""
    lost, unlaunched = warned(c)
    out = []
    if lost:
        out.append("its GPU times and counts are too low, every figure of it is measured on partial data")
    if unlaunched:
        out.append("the activities without a launch are tied to no CPU op, so per-op figures miss them")
    return ": " + "; ".join(out)
