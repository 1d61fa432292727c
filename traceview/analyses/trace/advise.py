"""``tv.advise``: what to do about a trace, each piece of advice with its evidence and the time at stake.

The rules are data (``rules/advice.toml``): each names a detector (one function below), the names
it looks for, what to do, a PyTorch documentation link and its source. A detector reads one region
and returns rows of table ``advice``; every row carries the **time at stake** per step: an upper
bound on what would be saved if the pattern vanished, never more than the exposed time of its cause
(:mod:`..measure.exposed`) on a GPU trace, never more than the CPU time of the ops involved on a
trace without GPU activity. Rows below their rule's ``min_pct_of_wall`` are not said.

Honesty: a rule whose evidence this trace cannot hold (no GPU activity, no shapes) does not guess;
table ``rules`` says for each rule whether it ran, how often it fired, and if not, why and what to
record to enable it.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated

import msgspec
import numpy as np
import pandas as pd

from ... import schema
from ...devices import trace_device
from ...errors import TraceviewError
from ...model import list_codes
from ...report import Finding, Report
from ...trees import nearest
from ..measure import memory
from ..measure.call_lines import CallLines, line_to_edit
from ..measure.derived import as_text, is_text, kept_for_region, of_region, text_counts, texts
from ..measure.exposed import exposed
from ..measure.sources import NO_SOURCE, has_stacks, launching_ops, op_sources
from ..measure.work import shapes_recorded
from ..select.region import Region, Selection, op_rows, region
from ..wording.words import Cite

RULES_PATH = Path(__file__).resolve().parents[2] / "rules" / "advice.toml"
#: the ``bound`` of a row on a trace without GPU activity: the CPU time of the ops involved
CPU = "CPU time"
COLUMNS = [
    "rule", "what", "where", "source", "line_from", "count_per_step", "bytes_per_step",
    "stake_ns_per_step", "bound", "pct_of_wall", "peak_bytes", "pct_of_peak", "do", "doc",
]  # fmt: skip


class Rule(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: Annotated[str, schema.NonEmpty]
    detector: Annotated[str, schema.NonEmpty]
    title: Annotated[str, schema.NonEmpty]
    do: Annotated[str, schema.NonEmpty]
    doc: Annotated[str, schema.NonEmpty]
    source: Annotated[str, schema.NonEmpty]
    min_pct_of_wall: Annotated[float, msgspec.Meta(ge=0, le=100)] = 1.0
    min_pct_of_peak: Annotated[float, msgspec.Meta(ge=0, le=100)] = 25.0
    ops: list[str] = []
    copies: list[str] = []
    names: list[str] = []
    dtypes: list[str] = []
    multiple: int = 8
    flash_dtypes: list[str] = []
    flash_max_head_dim: int = 256
    cpu_flash_dtypes: list[str] = []
    efficient_alignment_fp32: int = 4
    efficient_alignment_half: int = 8


class AdviceRules(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: int
    rule: list[Rule]


@functools.lru_cache(maxsize=1)
def rules() -> AdviceRules:
    try:
        r = schema.convert(schema.read(RULES_PATH, "advice rules"), AdviceRules)
    except schema.Invalid as e:  # a broken installation, not a user's input
        raise TraceviewError(f"{RULES_PATH}: {e}") from None
    unknown = [x.detector for x in r.rule if x.detector not in DETECTORS]
    if unknown:
        raise TraceviewError(f"{RULES_PATH}: unknown detector(s) {', '.join(unknown)}")
    return r


# ------------------------------------------------------------------ what every detector reads


class _Names:
    """The ops' names, indexed as an array of them is (``names[positions]``), each looked up from
    its code when asked: no text per op made."""

    def __init__(self, codes: np.ndarray, values: np.ndarray) -> None:
        self.codes, self.values = codes, values

    def __getitem__(self, at):
        return self.values[self.codes[at]]


class Facts:
    """What the detectors share, each computed once for the region: its exposed split, the op
    tree's positions, the source lines, and the denominators of time at stake."""

    def __init__(self, r: Region) -> None:
        self.r = r
        self.trace = r.trace
        self.gpu = r.has_gpu
        self.exposed = exposed(r).totals() if self.gpu else {}
        #: the whole of what a share is taken of: GPU wall time, or the CPU wall time
        self.wall = int(self.exposed.get("wall_ns", 0)) if self.gpu else int(r.cpu_wall_ns)
        #: the source files are read from the current folder (the line to edit, issue 36)
        self.lines = CallLines()
        self.line_from: dict[str, str] = {}  # a source text -> how its line was found

    @functools.cached_property
    def parent(self) -> np.ndarray:
        return self.trace.ops["parent"].to_numpy()

    @functools.cached_property
    def name_codes(self) -> tuple[np.ndarray, np.ndarray]:
        return texts(self.trace.ops["name"])

    @functools.cached_property
    def names(self) -> _Names:
        return _Names(*self.name_codes)

    def named(self, wanted: list[str]) -> np.ndarray:
        """Per op, whether its name is one of ``wanted``: each distinct name compared once."""
        codes, values = self.name_codes
        return np.isin(values, wanted)[codes]

    @functools.cached_property
    def sources(self) -> pd.DataFrame | None:
        return op_sources(self.trace) if has_stacks(self.trace) else None

    @functools.cached_property
    def activity_op(self) -> np.ndarray:
        """Each region activity's launching op, as a position in ``trace.ops`` (-1: none)."""
        return launching_ops(self.trace, self.r.activities)

    def within(self, roots: np.ndarray) -> np.ndarray:
        """Which ops lie in the subtree of one of ``roots`` (positions), the roots included."""
        mark = np.zeros(len(self.parent), dtype=bool)
        mark[roots] = True
        return nearest(self.parent, mark) >= 0

    @functools.cached_property
    def _in_region(self) -> np.ndarray:
        """Per op of the trace, whether the region holds it."""
        rows, _ = op_rows(self.r)
        mark = np.zeros(len(self.parent), dtype=bool)
        mark[rows[(rows >= 0) & (rows < len(mark))]] = True
        return mark

    def in_region(self, positions: np.ndarray) -> np.ndarray:
        return positions[self._in_region[positions]]

    def source_of(self, positions: np.ndarray) -> str:
        """The first source line among ``positions`` ('' without stacks)."""
        if self.sources is None or not len(positions):
            return ""
        src = self.sources["source"].to_numpy()[positions]
        call = self.sources["call"].to_numpy()[positions]
        ok = np.flatnonzero(src != NO_SOURCE)
        if not len(ok):
            return ""
        c = call[ok[0]] if isinstance(call[ok[0]], str) else ""
        line, self.line_from[src[ok[0]]] = line_to_edit(str(src[ok[0]]), c, self.lines)
        text = line + (f" (its call to {c})" if c else "")
        self.line_from[text] = self.line_from.pop(src[ok[0]])
        return text

    def gpu_ns_under(self, positions: np.ndarray) -> int:
        """GPU time of the region's activities launched inside the subtrees of ``positions``."""
        if not self.gpu or not len(positions):
            return 0
        inside = self.within(positions)
        op = self.activity_op
        hit = (op >= 0) & inside[np.clip(op, 0, None)]
        return int(np.clip(self.r.activities["dur_ns"].to_numpy()[hit], 0, None).sum())

    def causes_under(self, positions: np.ndarray) -> list[str]:
        """The exposed-time causes of the activities launched inside the subtrees of ``positions``:
        ``compute: <category>`` for a kernel, ``memcpy exposed``/``memset exposed`` for the others."""
        inside = self.within(positions)
        op, k = self.activity_op, self.r.activities
        hit = (op >= 0) & inside[np.clip(op, 0, None)]
        kind, cat = as_text(k["kind"])[hit], as_text(k["category"])[hit]
        named = np.where(
            kind == "kernel", np.char.add("compute: ", cat.astype(str)), np.char.add(kind, " exposed")
        )
        return sorted(set(named.tolist()))

    def bytes_under(self, positions: np.ndarray) -> int:
        """Bytes allocated (Bytes > 0) by the ops in the subtrees of ``positions``."""
        m = self.trace.memory
        if not len(m) or not len(positions):
            return 0
        inside = self.within(positions)
        op = m["op"].to_numpy()
        hit = (op >= 0) & inside[np.clip(op, 0, None)] & (m["bytes"].to_numpy() > 0)
        return int(m["bytes"].to_numpy()[hit].sum())

    def cause(self, name: str) -> int:
        return int(self.exposed.get(name, 0))

    def compute(self) -> int:
        return sum(int(v) for c, v in self.exposed.items() if c.startswith("compute: "))


def row(f: Facts, rule: Rule, what: str, where: str, source: str, count: int, nbytes: int,
        stake: int, bound: str) -> dict:  # fmt: skip
    per = f.r.regions
    return {
        "rule": rule.id, "what": what, "where": where,
        "source": source, "line_from": f.line_from.get(source, ""),
        "count_per_step": count / per, "bytes_per_step": nbytes / per,
        "stake_ns_per_step": stake / per, "bound": bound,
        "pct_of_wall": 100.0 * stake / f.wall if f.wall else 0.0, "peak_bytes": np.nan, "pct_of_peak": np.nan,
        "do": rule.do.replace("{op}", where.split(" → ")[0]), "doc": rule.doc,
    }  # fmt: skip


# ------------------------------------------------------------------ the detectors


def copy_under_op(f: Facts, rule: Rule) -> list[dict]:
    """A copy op directly under an out-of-place op that has an in-place form. The copy's own
    bytes and time: the subtree of the copy op, not of the op above it."""
    names, parent = f.names, f.parent
    copy = np.flatnonzero(f.named(rule.copies))
    copy = f.in_region(copy[(parent[copy] >= 0) & f.named(rule.ops)[np.clip(parent[copy], 0, None)]])
    out = []
    for op in np.unique(names[parent[copy]]):
        mine = copy[names[parent[copy]] == op]
        gpu = f.gpu_ns_under(mine)
        if f.gpu:
            causes = f.causes_under(mine)
            stake, bound = min(gpu, sum(f.cause(c) for c in causes)), " + ".join(causes)
        else:
            stake, bound = int(f.trace.ops["dur_ns"].to_numpy()[mine].sum()), CPU
        chain = f"{op} → {names[mine[0]]}"
        what = f"{op} copies its input ({chain})"
        out.append(row(f, rule, what, chain, f.source_of(mine), len(mine), f.bytes_under(mine), stake, bound))
    return out


def sdpa_backend(f: Facts, rule: Rule) -> list[dict]:
    """The SDPA math backend, with what the recorded arguments say about the fused backends."""
    hits = f.in_region(np.flatnonzero(f.named(rule.ops)))
    if not len(hits):
        return []
    outer = np.where(f.parent[hits] >= 0, f.parent[hits], hits)  # the aten::scaled_dot_product_attention op
    why = sdpa_reasons(f.trace.ops.iloc[outer[0]], rule, f) + _upcast(f, hits)
    if f.gpu:
        stake, bound = min(f.gpu_ns_under(hits), f.compute()), "compute (every category)"
    else:
        stake, bound = int(f.trace.ops["dur_ns"].to_numpy()[hits].sum()), CPU
    what = f"SDPA runs on the math backend ({why})"
    return [row(f, rule, what, str(f.names[hits[0]]), f.source_of(outer), len(hits), 0, stake, bound)]


def sdpa_reasons(op: pd.Series, rule: Rule, f: Facts) -> str:
    """What the recorded arguments of scaled_dot_product_attention say about the fused backends,
    by the checks of torch's dispatcher (sdp_utils.cpp on CUDA, sdp_utils_cpp.cpp on the CPU)."""
    types, dims, values = _args(op, "input_types"), _args(op, "input_dims"), _args(op, "concrete_inputs")
    if not types:
        return "no shapes recorded: record_shapes=True tells what excluded the fused backends"
    dtype = str(types[0])
    head = dims[0][-1] if dims and isinstance(dims[0], list) and dims[0] else None
    mask = len(types) > 3 and bool(types[3])
    dropout = len(values) > 4 and values[4] not in ("", "0.", "0", "0.0")
    if not f.gpu:
        return _cpu_reasons(dtype, dropout, values, rule)
    flash = []
    if dtype not in rule.flash_dtypes:
        flash.append(f"needs fp16/bf16 inputs, these are {dtype}")
    if mask:
        flash.append("takes no attn_mask tensor (pass is_causal=True for a causal mask)")
    if isinstance(head, int) and head > rule.flash_max_head_dim:
        flash.append(f"head dim {head} > {rule.flash_max_head_dim}")
    said = f"flash {'; '.join(flash)}" if flash else "no recorded argument excludes flash"
    # minimum_gemm_alignment on sm80+: 128 bits of the dtype (4 fp32, 8 fp16/bf16)
    align = rule.efficient_alignment_half if dtype in rule.flash_dtypes else rule.efficient_alignment_fp32
    if isinstance(head, int) and head % align:
        return said + f"; memory-efficient needs a head dim multiple of {align}, not {head}"
    said += "; no recorded argument excludes memory-efficient: what chose math is not in the trace"
    said += " (a pinned backend, the GPU generation, strides)"
    return said


def _cpu_reasons(dtype: str, dropout: bool, values: list, rule: Rule) -> str:
    """The CPU dispatcher's flash (sdp_utils_cpp.cpp): float, double, half and bfloat16, a mask,
    no dropout (torch 2.13 on the CPU picks math for dropout_p > 0: tests/test_advise.py asks it)."""
    why = []
    if dtype not in rule.cpu_flash_dtypes:
        why.append(f"takes float, double, half or bfloat16 inputs, not {dtype}")
    if dropout:
        why.append(f"takes no dropout (dropout_p={values[4]})")
    if why:
        return "the CPU flash backend " + "; ".join(why)
    return (f"no recorded argument excludes the CPU flash backend ({dtype} inputs): what chose math is "
            "not in the trace (a pinned backend: sdpa_kernel)")  # fmt: skip


def _upcast(f: Facts, hits: np.ndarray) -> str:
    """The math backend's GEMMs on CUDA cores in fp32 (it upcasts fp16/bf16 unless
    allow_fp16_bf16_reduction_math_sdp(True)), as a clause; '' when none ran."""
    if not f.gpu:
        return ""
    inside = f.within(hits)
    op, k = f.activity_op, f.r.activities
    under = (op >= 0) & inside[np.clip(op, 0, None)]
    fp32 = under & (k["category"] == "gemm").to_numpy() & is_text(k["precision"], "fp32")
    n = int(under.sum())
    per, word = f.r.regions, f.r.per_word
    if not n:
        return ""
    gemms = _num(fp32.sum() / per)
    return f"; per {word} it launches {_num(n / per)} GPU activities, {gemms} of them fp32 GEMMs"


def _args(op: pd.Series, column: str) -> list:
    return _listed(op[column]) if column in op.index else []


def _listed(v) -> list:
    """A recorded argument list: a list already (input_dims), or JSON text (input_types, concrete_inputs)."""
    if isinstance(v, str) and v:
        try:
            v = json.loads(v)
        except ValueError:
            return []
    return list(v) if isinstance(v, (list, tuple, np.ndarray)) else []


def fp32_gemm(f: Facts, rule: Rule) -> list[dict]:
    """fp32 GEMMs on CUDA cores where the device has TF32 tensor cores: the bound is their time
    times 1 - vector/tensor fp32 peak, and never more than exposed GEMM compute."""
    if not f.gpu:
        return []
    device = trace_device(f.trace)
    tensor = device.peak_tflops("tensor", "fp32") if device else None
    vector = device.peak_tflops("vector", "fp32") if device else None
    if device is None or not tensor or not vector or tensor <= vector:
        return []
    k = f.r.activities
    hit = (k["category"] == "gemm").to_numpy() & (k["tensor_core"] == False).fillna(False).to_numpy()  # noqa: E712
    hit &= is_text(k["precision"], "fp32")
    if not hit.any():
        return []
    ns = int(np.clip(k["dur_ns"].to_numpy()[hit], 0, None).sum())
    stake = min(int(ns * (1 - vector / tensor)), f.cause("compute: gemm"))
    codes, values = texts(k["name"])
    names = text_counts(codes[hit], values)  # the hits' names, commonest first
    n = _num(hit.sum() / f.r.regions)
    what = f"{n} fp32 GEMM kernels per {f.r.per_word} on CUDA cores ({len(names)} names) on {device.name}"
    where = _short(str(names[0][0]))
    return [row(f, rule, what, where, "", int(hit.sum()), 0, stake, "compute: gemm")]


def host_sync(f: Facts, rule: Rule) -> list[dict]:
    """GPU idle while the host synchronises, with the ops that read values back."""
    if not f.gpu or not f.cause("idle: host sync"):
        return []
    hits = f.in_region(np.flatnonzero(f.named(rule.ops)))
    ops = ", ".join(f"{n} x{c}" for n, c in zip(*np.unique(f.names[hits], return_counts=True), strict=True))
    what = "the GPU idles while the host synchronises" + (f" (ops that read back: {ops})" if ops else "")
    return [row(f, rule, what, ops or "(sync calls)", f.source_of(hits), len(hits), 0,
                f.cause("idle: host sync"), "idle: host sync")]  # fmt: skip


def pageable_memcpy(f: Facts, rule: Rule) -> list[dict]:
    if not f.gpu:
        return []
    k = f.r.activities
    k = k[is_text(k["kind"], "memcpy")]  # the copies only
    # each distinct name is tried once (a trace may hold 10^5 copies of a few names)
    codes, values = texts(k["name"])
    named = np.array([isinstance(v, str) and any(n in v for n in rule.names) for v in values], dtype=bool)
    hit = named[codes]
    if not hit.any():
        return []
    ns = int(np.clip(k["dur_ns"].to_numpy()[hit], 0, None).sum())
    kinds = ", ".join(f"{n} x{c}" for n, c in text_counts(codes[hit], values))
    nbytes = int(pd.to_numeric(k["bytes"], errors="coerce").fillna(0).to_numpy()[hit].sum())
    return [row(f, rule, f"pageable copies: {kinds}", kinds, "", int(hit.sum()), nbytes,
                min(ns, f.cause("memcpy exposed")), "memcpy exposed")]  # fmt: skip


def launch_bound(f: Facts, rule: Rule) -> list[dict]:
    ns = f.cause("idle: host launch-bound")
    if not f.gpu or not ns:
        return []
    n = len(f.r.activities)
    return [row(f, rule, "the GPU waits for the host to launch kernels", "", "", n, 0, ns,
                "idle: host launch-bound")]  # fmt: skip


def exposed_communication(f: Facts, rule: Rule) -> list[dict]:
    ns = f.cause("communication exposed")
    if not f.gpu or not ns:
        return []
    k = f.r.activities
    comm = k[(k["category"] == "communication").to_numpy()]
    codes, values = texts(comm["name"])
    where = ", ".join(f"{_short(str(n))} x{c}" for n, c in text_counts(codes, values)[:3])
    return [row(f, rule, "communication exposed", where, "", len(comm), 0, ns, "communication exposed")]


def gemm_alignment(f: Facts, rule: Rule) -> list[dict]:
    """Half-precision GEMM ops with a dimension that is not a multiple of ``rule.multiple``."""
    hits = f.in_region(np.flatnonzero(f.named(rule.ops)))
    ops = f.trace.ops
    dims, types = ops["input_dims"].to_numpy(dtype=object), ops["input_types"]
    # each distinct (dims, types) is tried once: rows sharing one parsed list share a code
    dim_codes = list_codes(dims[hits])[0] + 1
    type_codes = texts(types)[0][hits]
    key = dim_codes * (int(type_codes.max(initial=0)) + 1) + type_codes
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    tried = np.array(
        [_misaligned(dims[hits[i]], types.iat[hits[i]], rule) for i in first.tolist()], dtype=bool
    )
    mine = hits[tried[inverse.reshape(-1)]] if len(hits) else hits
    if not len(mine):
        return []
    if f.gpu:
        stake, bound = min(f.gpu_ns_under(mine), f.cause("compute: gemm")), "compute: gemm"
    else:
        stake, bound = int(f.trace.ops["dur_ns"].to_numpy()[mine].sum()), CPU
    what = f"{len(mine)} half-precision GEMM ops with a dimension not a multiple of {rule.multiple}"
    return [row(f, rule, what, str(f.names[mine[0]]), f.source_of(mine), len(mine), 0, stake, bound)]


def _misaligned(dims, types, rule: Rule) -> bool:
    d, t = _listed(dims), _listed(types)
    if not t or t[0] not in rule.dtypes:
        return False
    mats = [x for x in d[:3] if isinstance(x, (list, tuple)) and len(x) >= 2]
    return any(isinstance(v, int) and v % rule.multiple for m in mats for v in m[-2:])


def memory_peak(f: Facts, rule: Rule) -> list[dict]:
    """At each device's memory peak, the op among ``rule.ops`` (ops with an in-place form, and
    the copies out-of-place ops make) whose tensors hold the largest share of it: where an
    in-place form would lower the peak. Memory, not time: the row's stake is 0 and its share is
    ``pct_of_peak`` (said from ``min_pct_of_peak``)."""
    s = memory.series(f.trace)
    if not len(s):
        return []
    alive = memory.alive_at_peak(s)
    alive = alive[alive["made_by"].isin(rule.ops)]
    out = []
    for device, g in alive.groupby("device", sort=True):
        top = g.sort_values("bytes", ascending=False, kind="stable").iloc[0]
        peak = int(s["allocated"].to_numpy()[memory.peak_rows(s)[device]])
        what = f"tensors made by {top['made_by']} hold {device} memory at its peak"
        r = row(f, rule, what, str(top["made_by"]), "", 0, 0, 0, "memory peak")
        r["peak_bytes"] = int(top["bytes"])
        r["pct_of_peak"] = 100.0 * int(top["bytes"]) / peak if peak else 0.0
        out.append(r)
    return out


def _num(x: float) -> str:
    """A count per step as a sentence states it: whole when it is, else one decimal."""
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.1f}"


def _short(name: str, n: int = 60) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


DETECTORS = {
    "copy_under_op": copy_under_op,
    "sdpa_backend": sdpa_backend,
    "fp32_gemm": fp32_gemm,
    "host_sync": host_sync,
    "pageable_memcpy": pageable_memcpy,
    "launch_bound": launch_bound,
    "exposed_communication": exposed_communication,
    "gemm_alignment": gemm_alignment,
    "memory_peak": memory_peak,
}
#: what a detector needs that a trace may lack: (needs GPU activity, needs shapes)
NEEDS = {
    "fp32_gemm": (True, False), "host_sync": (True, False), "pageable_memcpy": (True, False),
    "launch_bound": (True, False), "exposed_communication": (True, False), "gemm_alignment": (False, True),
    "memory_peak": (False, False),
}  # fmt: skip


# ------------------------------------------------------------------ the report


def advice_table(r: Region, min_pct: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tables ``advice`` (what fired, ranked by time at stake, rows below ``min_pct`` of the wall
    time dropped: None, each rule's own ``min_pct_of_wall``) and ``rules`` (every rule: whether it
    could run on this trace, how often it fired, why not). Worked out once per trace, selection and
    ``min_pct`` (a diff's sides on the threads that read them: ``variants.sides``); each caller
    gets its own copy of the few rows (a report holds them)."""
    table, status = of_region(r, ("advice", min_pct), lambda r: _kept_advice(r, min_pct))
    return table.copy(), status.copy()


def _kept_advice(r: Region, min_pct: float | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``_advice_table``, its two tables kept in the trace's cache entry for the whole trace
    (``kept_for_region``; the fp32 GEMM rule reads the device's peaks). Worked out every time for a
    trace with call stacks: the line to edit is looked up in the source files it names, under the
    current folder, files the entry's key does not cover (one may appear or change)."""
    if has_stacks(r.trace):
        return _advice_table(r, min_pct)
    made: dict = {}

    def both(r: Region) -> tuple[pd.DataFrame, pd.DataFrame]:
        if not made:  # the two tables are worked out together, once
            made["tables"] = _advice_table(r, min_pct)
        return made["tables"]

    return (
        kept_for_region(r, f"advice-{min_pct}", lambda r: both(r)[0], reads_devices=True),
        kept_for_region(r, f"advice_rules-{min_pct}", lambda r: both(r)[1], reads_devices=True),
    )


def _advice_table(r: Region, min_pct: float | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    f = Facts(r)
    shapes = shapes_recorded(r.trace)  # one meaning with the summary's note: some op has Input Dims
    rows, status = [], []
    for rule in rules().rule:
        gpu, needs_shapes = NEEDS.get(rule.detector, (False, False))
        why = "no GPU activity" if gpu and not f.gpu else ""
        why = why or ("no shapes: record with record_shapes=True" if needs_shapes and not shapes else "")
        found = (
            []
            if why or not _has_memory(r, rule)
            else [x for x in DETECTORS[rule.detector](f, rule) if _said(x, rule, min_pct)]
        )
        rows += found
        status.append(
            {"rule": rule.id, "ran": not why, "fired": len(found), "why_not": why, "source": rule.source}
        )
    table = pd.DataFrame(rows, columns=COLUMNS).sort_values(
        "stake_ns_per_step", ascending=False, kind="stable"
    )
    return table.reset_index(drop=True), pd.DataFrame(status)


def _said(x: dict, rule: Rule, min_pct: float | None) -> bool:
    """Whether a row clears its threshold: time at stake against the wall time, or (memory rows)
    its share of the peak; ``min_pct`` overrides the first."""
    if not np.isnan(x["pct_of_peak"]):
        return x["pct_of_peak"] >= rule.min_pct_of_peak
    return x["pct_of_wall"] >= (rule.min_pct_of_wall if min_pct is None else min_pct)


def _has_memory(r: Region, rule: Rule) -> bool:
    return rule.detector != "memory_peak" or bool(len(r.trace.memory))


def findings(table: pd.DataFrame, per: str) -> list[str]:
    """One sentence per row, each figure cited from its cell; a table with a ``trace`` column (the
    advice of several traces) names the trace first and cites its rows by it too."""
    out: list[str] = []
    for t in table.itertuples(index=False):
        c = Cite()
        key = {"rule": t.rule, "what": t.what} | ({"trace": t.trace} if "trace" in table.columns else {})
        who = f"{c('advice', key, 'trace', t.trace, 'text')}: " if "trace" in table.columns else ""
        what, do, doc = (c("advice", key, col, getattr(t, col), "text") for col in ("what", "do", "doc"))
        text = _memory_words(c, key, t) if t.bound == "memory peak" else _time_words(c, key, t, per)
        out.append(c.finding(f"{who}{what}{text}; {do} ({doc})"))
    return out


def _time_words(c: Cite, key: dict, t, per: str) -> str:
    stake = c("advice", key, "stake_ns_per_step", t.stake_ns_per_step, "ns")
    pct = c("advice", key, "pct_of_wall", t.pct_of_wall, "pct")
    where = f" at {c('advice', key, 'source', t.source, 'text')}" if t.source else ""
    nbytes = (f", {c('advice', key, 'bytes_per_step', t.bytes_per_step, 'bytes')} allocated by the copy"
              if t.bytes_per_step else "")  # fmt: skip
    return f"{where}{nbytes}: up to {stake} per {per} at stake ({pct} of {_whole(t)})"


def _memory_words(c: Cite, key: dict, t) -> str:
    held = c("advice", key, "peak_bytes", t.peak_bytes, "bytes")
    return f": {held} ({c('advice', key, 'pct_of_peak', t.pct_of_peak, 'pct')} of the peak)"


def advice_of(sides: list[tuple[str, Region]]) -> tuple[pd.DataFrame, list[str]]:
    """The advice of several traces (``(label, region)`` pairs) as one table with a ``trace``
    column, ranked by time at stake, and its sentences: what summary, compare and report show."""
    # a trace without advice adds no rows: its empty (untyped) table would turn the numbers to objects
    parts = [p.assign(trace=label) for label, r in sides if len(p := advice_table(r)[0])]
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["trace", *COLUMNS])
    table = table[["trace", *COLUMNS]].sort_values("stake_ns_per_step", ascending=False, kind="stable")
    table = table.reset_index(drop=True)
    per = sides[0][1].per_word if sides else "step"
    return table, findings(table, per)


def advice_diff(A: Region, B: Region, worse: float = 1.1) -> tuple[pd.DataFrame, list[str]]:
    """B's advice that is new (no row of the same rule and ``where`` in A) or worse (its time at
    stake more than ``worse`` times A's): table ``advice`` (B's rows, ``a_stake_ns_per_step`` and
    ``change``) and one sentence each, for diff. Time at stake only: the memory-peak rows are left
    to diff's own peak sentence, which says whether B's peak grew (a peak held by other tensors
    in B is no new advice when the peak is lower)."""
    a, b = (t[t["bound"] != "memory peak"] for t in (advice_table(A)[0], advice_table(B)[0]))
    key = ["rule", "where"]
    m = b.merge(a[[*key, "stake_ns_per_step"]].rename(columns={"stake_ns_per_step": "a_stake_ns_per_step"}),
                on=key, how="left")  # fmt: skip
    new = m["a_stake_ns_per_step"].isna().to_numpy()
    was = m["a_stake_ns_per_step"].fillna(0).to_numpy(dtype=float)
    grew = ~new & (m["stake_ns_per_step"].to_numpy(dtype=float) > worse * was)
    m["change"] = np.where(new, "new in B", "worse in B")
    table = m[new | grew].reset_index(drop=True)
    said: list[str] = []
    for t, text in zip(table.itertuples(index=False), findings(table, B.per_word), strict=True):
        c = Cite()
        key_ = {"rule": t.rule, "what": t.what}
        before = "" if t.change == "new in B" else (
            f" (A: {c('advice', key_, 'a_stake_ns_per_step', t.a_stake_ns_per_step, 'ns')})")  # fmt: skip
        said.append(Finding(f"{t.change}: {text}{before}", [*getattr(text, "evidence", ()), *c.evidence]))
    return table, said


def _whole(t) -> str:
    return "the CPU time" if t.bound == CPU else "the wall time"


def advise(trace, sel: Selection | None = None, min_pct: float | None = None) -> Report:
    """``tv.advise``: what to do, ranked by the time at stake (tables ``advice`` and ``rules``);
    ``min_pct``: say what has at least this share of the wall time at stake (None: each rule's own)."""
    r = region(trace, sel)
    table, status = advice_table(r, min_pct)
    said = findings(table, r.per_word)
    off = status[~status["ran"]]
    notes = list(trace.warnings) + r.notes
    if len(off):
        pairs = zip(off["rule"], off["why_not"], strict=True)
        notes.append("rules that could not run: " + "; ".join(f"{a} ({b})" for a, b in pairs))
    return Report(
        kind="advise",
        title=f"Advice: {trace.label} (per {r.per_word})",
        tables={"advice": table, "rules": status},
        findings=said or ["no rule found anything worth doing above its threshold"],
        info={"trace": trace.path, "selection": r.selection.describe(), "per": r.per_word, "gpu": r.has_gpu},
        notes=notes,
    )
