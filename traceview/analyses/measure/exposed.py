"""Exposed time: each step's wall time split into causes, every nanosecond counted once.

A step is a window of wall time on the host's clock (a ProfilerStep span, an annotation span,
or the whole trace). Every instant of the window goes to the first of these causes that holds
at that instant (the priority; ``rules/exposed.toml`` orders the computation categories):

1. ``compute: CATEGORY``: a computation kernel of that category runs (GEMM before attention
   before ..., so a small kernel beside a GEMM is hidden behind it);
2. ``communication exposed``: a communication kernel runs and no computation does;
3. ``memcpy exposed``, then ``memset exposed``: only copies or sets run;
3b. with ``--stream`` or ``--kind``: ``other work (not selected)``: only GPU activities that the
   selection left out run (other streams or kinds of the selected device), so idle means idle;
4. the GPU is idle and the host is in a synchronisation (``idle: host sync``), in the data
   loader (``idle: data loader``), or in any other CPU op or runtime call, so the GPU waits
   for work to be launched (``idle: host launch-bound``);
5. ``idle: other``: the GPU is idle and no CPU op or runtime call runs.

The causes are exclusive, so they sum exactly (int64 ns) to the window's wall time. The GPU
activities are the selection's (device, stream, kind) wherever they were launched: an instant
is busy when something runs, whichever step launched it. ``communication hidden`` (communication
that runs under computation) is reported beside the causes and is not one of them:
exposed + hidden = the communication's busy time.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from ... import schema
from ...errors import TraceviewError
from ...report import Report
from ...units import human_ns
from ..select.region import Region, Selection, _matching_activities, annotation_spans, region
from . import intervals as iv
from .derived import is_text, kept_for_region, of_region, texts
from .gpu_breakdown import gpu_masks

RULES_PATH = Path(__file__).resolve().parents[2] / "rules" / "exposed.toml"
COMM, MEMCPY, MEMSET = "communication exposed", "memcpy exposed", "memset exposed"
SYNC, LOADER, LAUNCH, OTHER = "idle: host sync", "idle: data loader", "idle: host launch-bound", "idle: other"
HIDDEN = "communication hidden"
UNSELECTED = "other work (not selected)"
HOST_ROLES = ("cpu_op", "runtime")  # annotations span whole steps: they say nothing about the host


class HostRules(msgspec.Struct, forbid_unknown_fields=True):
    sync: str
    data_loader: str


class ExposedRules(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    compute_order: list[str]
    host: HostRules


@functools.lru_cache(maxsize=1)
def rules() -> ExposedRules:
    try:
        r = schema.convert(schema.read(RULES_PATH, "exposed-time rules"), ExposedRules)
        for p in (r.host.sync, r.host.data_loader):
            re.compile(p)
    except (schema.Invalid, re.error) as e:  # a broken installation, not a user's input
        raise TraceviewError(f"{RULES_PATH}: {e}") from None
    return r


@dataclass
class Exposed:
    """``steps``: one row per window (``step``, ``start_ns``, ``wall_ns``, one int64 column per
    cause in priority order, ``communication hidden``); ``causes``: the cause columns."""

    steps: pd.DataFrame
    causes: list

    def totals(self) -> dict:
        """cause -> ns over every window, and ``wall_ns`` / ``communication hidden``."""
        return {c: int(self.steps[c].sum()) for c in [*self.causes, HIDDEN, "wall_ns"]}


def exposed(r: Region) -> Exposed:
    """The split of every window of region ``r`` (worked out once per trace and selection, and
    kept in a cached trace's entry)."""
    steps = kept_for_region(r, "exposed", _steps)
    note = of_region(r, "exposed_note", _note)
    if note:  # said on every call, as a region's notes are its own
        r.notes.append(note)
    return Exposed(steps, [str(c) for c in steps.columns[3:-1]])


def _note(r: Region) -> str:
    acts = _selected(r)
    devices = int(acts["device"].nunique()) if len(acts) else 0  # NA is no device
    if devices <= 1:
        return ""
    # said, not hidden: the split is then of the devices' union
    return (
        f"{r.trace.label}: exposed time counts the GPU activities of {devices} devices as one GPU "
        "(an instant is busy when any runs); --device N splits one"
    )


def _selected(r: Region) -> pd.DataFrame:
    """The GPU activities of the selection's device, stream and kind, wherever they were launched."""
    sel = r.selection
    return _matching_activities(r.trace, Selection(device=sel.device, stream=sel.stream, kind=sel.kind))


def _steps(r: Region) -> pd.DataFrame:
    trace, sel = r.trace, r.selection
    acts = _selected(r)
    layers, hidden_pair = gpu_layers(acts)
    if sel.stream is not None or sel.kind is not None:
        # the device's work that --stream/--kind left out still runs: it is not idle time
        rest = _matching_activities(trace, Selection(device=sel.device))
        layers.append((UNSELECTED, iv.spans(rest)))
    layers += host_layers(trace.events)
    causes = [c for c, _ in layers] + [OTHER]
    cols = ["step", "start_ns", "wall_ns", *causes, HIDDEN]
    wins = windows(r, acts)
    if not wins:
        return _empty(cols)
    step, lo, hi = (np.array(x, dtype=np.int64) for x in zip(*wins, strict=True))
    split = split_windows(layers, lo, hi)
    hidden = _hidden(hidden_pair, layers, split, lo, hi)
    return pd.DataFrame(dict(zip(cols, [step, lo, hi - lo, *split, hidden], strict=True)))


def _hidden(pair: tuple, layers: list, split: list, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per window, the communication that runs under computation: communication's busy time
    less its exposed time (what the computation layers before it left uncovered), when those
    layers hold every computation (one of no category has no layer: then measured apart)."""
    comm, comp = pair
    comm_ns = iv.lengths_within(comm, lo, hi)
    in_layers = sum(len(s[0]) for c, s in layers if c.startswith("compute: "))
    if in_layers == len(comp[0]):
        return comm_ns - split[[c for c, _ in layers].index(COMM)]
    return comm_ns + iv.lengths_within(comp, lo, hi) - iv.lengths_within(iv.join(comm, comp), lo, hi)


def cause_column(cause: str) -> str:
    """A cause's column in the report's ``steps`` table: snake_case with its unit, as every column
    (``compute: gemm`` -> ``compute_gemm_ns``; ``communication hidden`` -> info's
    ``communication_hidden_ns``); the causes themselves stay words in table ``exposed``."""
    return re.sub(r"[^a-z0-9]+", "_", cause.lower()).strip("_") + "_ns"


def exposed_report(trace, sel: Selection | None = None) -> Report:
    """``tv.exposed``: table ``exposed`` (cause, ns over the selected windows, per step, % of the
    wall time) and table ``steps`` (one row per window, one column per cause: :func:`cause_column`)."""
    r = region(trace, sel)
    e = exposed(r)
    t = e.totals()
    wall = t["wall_ns"]
    ns = np.array([t[c] for c in e.causes], dtype=np.int64)
    table = pd.DataFrame({"cause": e.causes, "ns": ns})
    table["per_step_ns"] = r.per_region_count(table["ns"])
    table["pct_of_wall"] = 100.0 * ns / wall if wall else np.nan
    info = {
        "trace": trace.path,
        "selection": r.selection.describe(),
        "per": r.per_word,
        "windows": len(e.steps),
        "wall_ns": wall,
        "communication_hidden_ns": t[HIDDEN],
    }
    top = table[table["ns"] > 0].sort_values("ns", ascending=False, kind="stable").head(3)
    findings = (
        [
            f"of {human_ns(wall)} wall time, "
            + "; ".join(
                f"{c} {human_ns(v)} ({p:.1f}%)"
                for c, v, p in zip(top["cause"], top["ns"], top["pct_of_wall"], strict=True)
            )
        ]
        if wall
        else []
    )
    return Report(
        kind="exposed",
        title=f"Exposed time: {trace.label} (per {r.per_word})",
        tables={
            "exposed": table,
            "steps": e.steps.rename(columns={c: cause_column(c) for c in [*e.causes, HIDDEN]}),
        },
        findings=findings,
        info=info,
        notes=list(trace.warnings) + r.notes,
    )


def _empty(cols) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=np.int64) for c in cols})


def gpu_layers(acts: pd.DataFrame) -> tuple[list, tuple]:
    """(cause, spans) of the GPU causes in priority order; and (communication, computation)."""
    computing, communicating = gpu_masks(acts)
    codes, values = texts(acts["category"])
    starts, ends = iv.spans(acts)  # cut by masks below: no frame copied per layer

    def of(mask: np.ndarray) -> iv.Spans:
        return starts[mask], ends[mask]

    order = rules().compute_order
    present = set(values[np.flatnonzero(np.bincount(codes[computing], minlength=len(values)))])
    cats = [c for c in order if c in present] + sorted(present - set(order))
    at = {v: i for i, v in enumerate(values[:-1])}
    layers = [(f"compute: {c}", of(computing & (codes == at.get(c, -1)))) for c in cats]
    comm = of(communicating)
    layers.append((COMM, comm))
    for name, k in ((MEMCPY, "memcpy"), (MEMSET, "memset")):
        layers.append((name, of(is_text(acts["kind"], k))))
    return layers, (comm, of(computing))


def host_layers(events: pd.DataFrame) -> list:
    """(cause, spans) of the host causes, in priority order, from the CPU ops and runtime calls."""
    ts = events["ts_ns"].to_numpy(dtype=np.int64)  # four columns read, no frame copied
    dur = events["dur_ns"].to_numpy(dtype=np.int64)
    role, roles = _coded(events["role"])
    host = _any_of(role, [i for i, r in enumerate(roles) if r in HOST_ROLES])
    host &= dur > 0  # an empty call covers no instant: fewer calls to sort, none to clip
    codes, names = _coded(events["name"])
    named = pd.Series(names, dtype=object)  # each distinct name tried once
    h, layers = rules().host, []
    for cause, pattern in ((SYNC, h.sync), (LOADER, h.data_loader)):
        hit = np.flatnonzero(named.str.contains(pattern, regex=True).to_numpy(dtype=bool))
        rows = host & _any_of(codes, hit) if len(hit) else np.empty(0, np.intp)  # no such name
        layers.append((cause, _spans_of(ts, dur, rows)))
    return [*layers, (LAUNCH, _spans_of(ts, dur, host))]


def _coded(col: pd.Series) -> tuple[np.ndarray, list]:
    """A text column's codes and its distinct texts (``values[code]``); a missing text's code is
    none of theirs (a categorical's codes as they are, no copy: -1)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy(), [str(v) for v in col.cat.categories]
    coded, text = texts(col)
    return coded, list(text[:-1])


def _any_of(codes: np.ndarray, wanted) -> np.ndarray:
    """Rows whose code is one of ``wanted``: one compare per code where they are few (indexing a
    table by the codes would first widen every code to a fresh intp array)."""
    if len(wanted) > 8:
        return np.isin(codes, wanted)
    out = np.zeros(len(codes), dtype=bool)
    for c in wanted:
        out |= codes == int(c)  # a Python int: compared at the codes' own width
    return out


def _spans_of(ts: np.ndarray, dur: np.ndarray, rows: np.ndarray) -> iv.Spans:
    starts = ts[rows]
    ends = dur[rows]
    ends += starts  # in place: one fresh array fewer
    return starts, ends


def split_windows(layers: list, lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
    """Per layer, the ns of each window [lo, hi) it covers that no earlier layer covers, then the
    rest (uncovered): the union of the layers so far, measured inside every window at once."""
    covered = (np.empty(0, np.int64), np.empty(0, np.int64))
    before, out = np.zeros(len(lo), dtype=np.int64), []
    for _, s in layers:
        if len(s[0]):  # an empty layer covers nothing more
            covered = iv.merged(covered, s)
        now = iv.union_lengths_within(covered, lo, hi)
        out.append(now - before)
        before = now
    out.append((hi - lo) - before)
    return out


def windows(r: Region, acts: pd.DataFrame) -> list:
    """(step, lo, hi) of each window of the region: ProfilerSteps, annotation spans (numbered from
    0 in time order), or the whole trace (step -1: first start to last end of ops and activities)."""
    trace, sel = r.trace, r.selection
    if sel.annotation is not None:
        spans = annotation_spans(trace, sel.annotation).sort_values("ts_ns", kind="stable")
        if sel.step is not None:
            st = trace.steps[trace.steps["step"] == sel.step].iloc[0]
            inside = (spans["ts_ns"] >= st["ts_ns"]) & (spans["ts_ns"] < st["ts_ns"] + st["dur_ns"])
            spans = spans[inside.to_numpy()]
        lo = spans["ts_ns"].to_numpy(np.int64)
        return list(
            zip(range(len(lo)), lo, lo + spans["dur_ns"].clip(lower=0).to_numpy(np.int64), strict=True)
        )
    if r.region_kind in ("step", "steps"):
        s = trace.steps if sel.step is None else trace.steps[trace.steps["step"] == sel.step]
        lo = s["ts_ns"].to_numpy(np.int64)
        hi = lo + s["dur_ns"].clip(lower=0).to_numpy(np.int64)
        return list(zip(s["step"].to_numpy(np.int64), lo, hi, strict=True))
    every = iv.join(iv.spans(r.ops), iv.spans(acts))
    if not len(every[0]):
        return []
    return [(-1, int(every[0].min()), int(every[1].max()))]


def diff_table(A: Region, B: Region) -> tuple[pd.DataFrame, dict]:
    """diff's ``exposed`` table (cause, a_ns, b_ns, delta_ns over the selected windows, and the
    same per step) and its info (a_wall_ns, b_wall_ns, communication hidden per side)."""
    ea, eb = exposed(A), exposed(B)
    ta, tb = ea.totals(), eb.totals()
    causes = _union_in_order(ea.causes, eb.causes)
    a = np.array([ta.get(c, 0) for c in causes], dtype=np.int64)
    b = np.array([tb.get(c, 0) for c in causes], dtype=np.int64)
    table = pd.DataFrame({"cause": causes, "a_ns": a, "b_ns": b, "delta_ns": b - a})
    table["a_per_step_ns"] = A.per_region_count(table["a_ns"])
    table["b_per_step_ns"] = B.per_region_count(table["b_ns"])
    table["delta_per_step_ns"] = table["b_per_step_ns"] - table["a_per_step_ns"]
    info = {
        "a_wall_ns": ta["wall_ns"],
        "b_wall_ns": tb["wall_ns"],
        "a_windows": len(ea.steps),
        "b_windows": len(eb.steps),
        "a_communication_hidden_ns": ta[HIDDEN],
        "b_communication_hidden_ns": tb[HIDDEN],
    }
    return table, info


def _union_in_order(a: list, b: list) -> list:
    """Every cause of either side, in priority order (computation categories by rules order)."""
    order = rules().compute_order
    everything = set(a) | set(b)
    comp = sorted(
        (c for c in everything if c.startswith("compute: ")),
        key=lambda c: (order.index(c[9:]) if c[9:] in order else len(order), c),
    )
    return comp + [c for c in (COMM, MEMCPY, MEMSET, SYNC, LOADER, LAUNCH, OTHER) if c in everything]
