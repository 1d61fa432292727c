"""``diff(a, b)``: what changed between two traces, normalised per step.

Both traces are narrowed to the same kind of region (every ProfilerStep, one
step, or every span of an annotation) and every count and time is divided by
the number of regions, so a 5-step trace compares with a 3-step one.

GPU activities are matched across the two sides by a normalised kernel name
(:func:`normalise_kernel_name`): template arguments that are types or numbers,
tile sizes, architecture prefixes, dtypes and parameter lists do not hide a
match, so ``ampere_sgemm_128x64_tn`` in A and ``volta_sgemm_64x32_tn`` in B are
the same kernel family. Each kernel keeps the chain of CPU ops that launched it
(outermost op first, ``aten::masked_fill → aten::clone → aten::copy_``).

CPU ops are compared by name and by op chain, which is all there is to compare
in a CPU-only trace.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import TraceviewError
from ..model import STEP_RE
from ..report import Report
from .select import Selection, select_kernels

ARROW = " → "
NO_OP = "(no CPU op)"

# ------------------------------------------------------------------ kernel names

_ARCH_RE = re.compile(r"(?<![A-Za-z0-9])(maxwell|pascal|volta|turing|ampere|ada|hopper|blackwell)(?=_)")
_DTYPE_RE = re.compile(
    r"(?<![A-Za-z0-9])(bf16|fp16|fp32|fp64|fp8|tf32|f16|f32|f64|e4m3|e5m2|int8|int32|int64|i8|i32|u8|s8|"
    r"half|float|double|bfloat16|float16|float32|float64)(?![A-Za-z0-9])")
_DIGITS_RE = re.compile(r"\d+")
_TYPE_ARG_RE = re.compile(
    r"^(?:(?:const|volatile|unsigned|signed|struct|class)\s+)*"
    r"(?:\w+::)*(?:u?int\d*_t|u?int|long|long long|short|char|bool|float|double|size_t|"
    r"half|half2|half_t|__half2?|bfloat16_t|tfloat32_t|float_e\w+|__nv_\w+|BFloat16|Half|Float8_\w+|"
    r"complex<[^<>]*>|c10::complex<[^<>]*>)"
    r"(?:\s*(?:const|volatile))?\s*[*&]*\s*(?:const)?$")
_LITERAL_RE = re.compile(r"^(?:\(\w+\))?-?(?:\d+[uUlL]*|true|false|\d*\.\d+f?|0x[0-9a-fA-F]+)$")
_OPEN = {"<": ">", "(": ")", "{": "}"}
_CLOSE = {">", ")", "}"}
_NOISE_RE = re.compile(r"::\{lambda\}|\{lambda\}::|::operator\b|\s+const\b")


@functools.lru_cache(maxsize=65536)
def normalise_kernel_name(name: str) -> str:
    """A key that is equal for the "same" kernel across traces, GPUs and dtypes.

    - ``Memcpy``/``Memset`` names are kept as written (direction matters);
    - ``void `` and ``(anonymous namespace)::`` are dropped;
    - a parameter list ``(...)`` is dropped; a lambda ``{lambda(...)#2}`` becomes ``{lambda}``;
    - template arguments that are types (``float``, ``c10::BFloat16``, ``char*``) or
      literals (``128``, ``true``) are dropped; the others keep their last name
      component (``MulFunctor``), so different functors stay different kernels;
    - GPU architecture prefixes (``ampere_``, ``volta_``) become ``ARCH``, dtype
      tokens in identifiers (``bf16``, ``fp32``) become ``T`` and every other number ``N``
      (``ampere_sgemm_128x64_tn`` -> ``ARCH_sgemm_NxN_tn``).
    """
    text = " ".join(str(name).split())
    if text.startswith(("Memcpy", "Memset")):
        return text
    text = text.replace("(anonymous namespace)::", "").replace("(anonymous namespace)", "")
    text = text.replace("->", " ")
    if text.startswith("void "):
        text = text[5:]
    out = _norm(text)
    out = _tokens(out)
    return " ".join(out.split()) or text


def _tokens(text: str) -> str:
    text = _ARCH_RE.sub("ARCH", text)
    text = _DTYPE_RE.sub("T", text)
    return _DIGITS_RE.sub("N", text)


def _matching(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``start``; -1 when unbalanced."""
    stack = [_OPEN[text[start]]]
    i = start + 1
    while i < len(text):
        c = text[i]
        if c in _OPEN:
            stack.append(_OPEN[c])
        elif c in _CLOSE:
            if c != stack[-1]:
                return -1
            stack.pop()
            if not stack:
                return i
        i += 1
    return -1


def _norm(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in _OPEN:
            j = _matching(text, i)
            if j < 0:  # unbalanced (e.g. ``operator<``): keep the rest as plain text
                out.append(text[i:])
                break
            inner = text[i + 1:j]
            if c == "<":
                args = [a for a in (_norm_arg(x) for x in _split_args(inner)) if a]
                if args:
                    out.append("<" + ", ".join(args) + ">")
            elif c == "{":
                word = re.match(r"\s*(\w*)", inner).group(1)
                out.append("{" + word + "}")
            # "(": a parameter list (or operator()): dropped
            i = j + 1
            continue
        out.append(c)
        i += 1
    result = "".join(out)
    prev = None
    while prev != result:
        prev, result = result, _NOISE_RE.sub("", result)
    return result.strip()


def _split_args(inner: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for c in inner:
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _norm_arg(arg: str) -> str:
    if not arg or _LITERAL_RE.match(arg) or _TYPE_ARG_RE.match(arg):
        return ""
    n = _norm(arg)
    if not n or _LITERAL_RE.match(n) or _TYPE_ARG_RE.match(n):
        return ""
    head, sep, tail = n.partition("<")
    head = head.rsplit("::", 1)[-1].strip()
    return head + sep + tail


def short_kernel_name(name: str) -> str:
    """The kernel's own identifier, for sentences: ``fmha_cutlassF``, ``flash_fwd_kernel``, ``ampere_sgemm``."""
    text = str(name).strip()
    if text.startswith(("Memcpy", "Memset")):
        return text.split(" (")[0]
    text = text.replace("(anonymous namespace)::", "")
    if text.startswith("void "):
        text = text[5:]
    head = re.split(r"[<(]", text, maxsplit=1)[0].strip().rsplit("::", 1)[-1]
    cut = re.search(r"_(?:bf16|fp16|fp32|f16|f32|tf32|fp8|\d)", head)
    if cut and cut.start() >= 4:
        head = head[:cut.start()]
    return head or text


def display_key(key: str, limit: int = 80) -> str:
    head, sep, tail = key.partition("<")
    text = head.rsplit("::", 1)[-1] + sep + tail
    return text if len(text) <= limit else text[:limit - 3] + "..."


def finding_name(key: str, example: str, limit: int = 70) -> str:
    """How a sentence names a kernel: its own name when that is short and has no template
    arguments (``ampere_sgemm_128x64_tn``, ``Memcpy DtoD (Device -> Device)``), else the
    normalised key without its leading namespace."""
    if example.startswith(("Memcpy", "Memset")):
        return example
    if "<" not in example:
        head = example.split("(", 1)[0].strip()
        if head.startswith("void "):
            head = head[5:]
        if 0 < len(head) <= limit:
            return head
    return display_key(key, limit)


_FAMILIES = [
    (re.compile(r"(?<![A-Za-z])([hsdczi]\d{3,5})gemm"), None),
    (re.compile(r"(sgemm|hgemm|dgemm|cgemm|zgemm)"), None),
    (re.compile(r"gemv"), "gemv"),
    (re.compile(r"gemmk1"), "gemmk1"),
    (re.compile(r"nvjet"), "nvjet"),
    (re.compile(r"gmma"), "gmma"),
    (re.compile(r"xmma"), "xmma"),
    (re.compile(r"(?i)splitkreduce|reduce_kernel"), "splitK reduce"),
    (re.compile(r"triton"), "triton"),
    (re.compile(r"(?i)cutlass"), "cutlass"),
    (re.compile(r"(?i)tensile|Cijk_"), "tensile"),
]


@functools.lru_cache(maxsize=16384)
def gemm_family(name: str) -> str:
    """The GEMM family a kernel name tells: ``s16816``, ``s1688``, ``sgemm``, ``gemv``, ``xmma``, ..."""
    for pattern, label in _FAMILIES:
        m = pattern.search(name)
        if m:
            return label or m.group(1)
    return "other"


# ------------------------------------------------------------------ attention

#: CPU op names of PyTorch's scaled_dot_product_attention backends -> backend
SDPA_OPS = {
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_attention_math_for_mps": "math",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_flash_attention_forward": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (cpu)",
    "aten::_scaled_dot_product_efficient_attention": "mem_efficient",
    "aten::_efficient_attention_forward": "mem_efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable",
}
BACKEND_WORDS = {
    "flash": "flash backend", "mem_efficient": "memory-efficient backend", "cudnn": "cuDNN backend",
    "math": "math backend", "flash (cpu)": "CPU flash backend", "flash_attn": "FlashAttention",
}


# ------------------------------------------------------------------ one side's region


@dataclass
class Side:
    """One trace narrowed to the selected regions, with everything diff/compare need."""

    trace: object
    kernels: pd.DataFrame   # GPU activities in the regions (classified)
    ops: pd.DataFrame       # CPU ops in the regions (ProfilerStep ops left out), with ``chain``
    regions: int            # the per-step divisor
    region_kind: str        # "step", "steps", "annotation", "trace"
    cpu_wall_ns: int        # total wall time of the regions on the CPU
    left_out: int = 0       # GPU activities outside every step (left out)
    notes: list = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.trace.label

    @property
    def has_gpu(self) -> bool:
        return len(self.kernels) > 0

    def per(self, value) -> float:
        return float(value) / self.regions

    # per-step numbers -------------------------------------------------------
    @property
    def kernels_per_step(self) -> float:
        return self.per(len(self.kernels))

    @property
    def gpu_ns_per_step(self) -> float:
        return self.per(self.kernels["dur_ns"].clip(lower=0).sum())

    @property
    def launches_per_step(self) -> float:
        launch = self.kernels["launch"].to_numpy()
        return self.per(len(np.unique(launch[launch >= 0])))

    @property
    def cpu_ops_per_step(self) -> float:
        return self.per(len(self.ops))

    @property
    def cpu_time_per_step_ns(self) -> float:
        return self.per(self.cpu_wall_ns)

    @property
    def cpu_op_time_per_step_ns(self) -> float:
        top = self.ops[self.ops["outer"]]
        return self.per(top["dur_ns"].clip(lower=0).sum())


def region(trace, sel: Selection | None = None) -> Side:
    """Narrow ``trace`` to the selection and work out the per-step divisor."""
    sel = sel or Selection()
    steps = trace.steps
    if sel.step is not None:
        if not len(steps):
            raise TraceviewError(f"{trace.path}: has no ProfilerStep#N spans; --step cannot apply")
        if sel.step not in set(steps["step"].tolist()):
            listing = ", ".join(map(str, sorted(steps["step"].tolist())[:10]))
            raise TraceviewError(f"{trace.path}: has no step {sel.step} (steps: {listing})")
    k = classified(trace)
    if len(k):
        k = select_kernels(_with(trace, k), Selection(None, sel.annotation, sel.device, sel.stream))
    elif sel.annotation is not None:
        _annotation_spans(trace, sel.annotation)  # raises when the annotation is absent
    ops = _ops_with_chains(trace)
    ops = ops[~ops["is_step"]]
    notes: list[str] = []
    left_out = 0
    if sel.step is not None:
        span = steps[steps["step"] == sel.step].iloc[0]
        k = k[(k["step"] == sel.step).fillna(False).to_numpy()]
        ops = ops[(ops["step"] == sel.step).fillna(False).to_numpy()]
        regions, kind, wall = 1, "step", int(span["dur_ns"])
        if sel.annotation is not None:
            spans = _annotation_spans(trace, sel.annotation)
            inside = (spans["ts_ns"] >= span["ts_ns"]) & (spans["ts_ns"] < span["ts_ns"] + span["dur_ns"])
            wall = int(spans.loc[inside, "dur_ns"].clip(lower=0).sum())
            ops = ops[_inside(ops["ts_ns"].to_numpy(), spans)]
    elif sel.annotation is not None:
        spans = _annotation_spans(trace, sel.annotation)
        regions, kind, wall = len(spans), "annotation", int(spans["dur_ns"].clip(lower=0).sum())
        ops = ops[_inside(ops["ts_ns"].to_numpy(), spans)]
    elif len(steps):
        regions, kind, wall = len(steps), "steps", int(steps["dur_ns"].clip(lower=0).sum())
        stepped = k["step"].notna().to_numpy()
        left_out = int((~stepped).sum())
        if left_out:
            notes.append(f"{trace.label}: {left_out} GPU activities launched outside every ProfilerStep "
                         "are left out of the per-step numbers")
        k = k[stepped]
        ops = ops[ops["step"].notna().to_numpy()]
    else:
        regions, kind = 1, "trace"
        starts = ops["ts_ns"].to_numpy()
        ends = starts + ops["dur_ns"].clip(lower=0).to_numpy()
        wall = int(ends.max() - starts.min()) if len(ops) else 0
        notes.append(f"{trace.label}: no ProfilerStep#N spans; the whole trace counts as one step")
    regions = max(int(regions), 1)
    kept = set(ops.index)
    parent = ops["parent"].to_numpy()
    ops = ops.assign(outer=~pd.Series(parent, index=ops.index).isin(kept).to_numpy())
    return Side(trace=trace, kernels=k, ops=ops, regions=regions, region_kind=kind, cpu_wall_ns=wall,
                left_out=left_out, notes=notes)


def _with(trace, kernels):
    """A shallow stand-in for ``trace`` whose kernels are ``kernels`` (for select_kernels)."""
    class _T:
        pass
    t = _T()
    t.path, t.events, t.kernels, t.label = trace.path, trace.events, kernels, trace.label
    return t


def classified(trace) -> pd.DataFrame:
    """``trace.kernels`` with the taxonomy columns, classifying here when the loader could not."""
    k = trace.kernels
    if "category" in k.columns:
        return k
    try:
        from ..classify import annotate

        return annotate(k)
    except Exception:  # classification unavailable: everything is "other"
        k = k.copy()
        k["category"] = "other"
        k["tensor_core"] = pd.array([None] * len(k), dtype="boolean")
        k["attention_backend"] = None
        k["precision"] = None
        return k


def _annotation_spans(trace, name: str) -> pd.DataFrame:
    ev = trace.events
    spans = ev[(ev["name"] == name).to_numpy() & ev["role"].isin(("annotation", "cpu_op")).to_numpy()]
    if not len(spans):
        raise TraceviewError(f"{trace.path}: has no annotation named {name!r}")
    return spans[["ts_ns", "dur_ns"]]


def _inside(ts: np.ndarray, spans: pd.DataFrame) -> np.ndarray:
    order = np.argsort(spans["ts_ns"].to_numpy(), kind="stable")
    starts = spans["ts_ns"].to_numpy()[order]
    ends = np.maximum.accumulate((spans["ts_ns"] + spans["dur_ns"].clip(lower=0)).to_numpy()[order])
    at = np.searchsorted(starts, ts, side="right") - 1
    return (at >= 0) & (ts < ends[np.clip(at, 0, None)])


def _ops_with_chains(trace) -> pd.DataFrame:
    """trace.ops plus ``is_step`` and ``chain`` (op names from the outermost op down, steps left out)."""
    cached = trace.__dict__.get("_tv_op_chains")
    if cached is not None and len(cached) == len(trace.ops):
        return cached
    ops = trace.ops
    names = ops["name"].astype(str).to_numpy()
    is_step = np.fromiter((bool(STEP_RE.match(n)) for n in names), dtype=bool, count=len(names)) \
        if len(names) else np.zeros(0, dtype=bool)
    parent = ops["parent"].to_numpy()
    depth = ops["depth"].to_numpy()
    chain = np.empty(len(ops), dtype=object)
    for d in np.unique(depth):
        rows = np.flatnonzero(depth == d)
        for r in rows:
            p = parent[r]
            above = chain[p] if p >= 0 else ""
            if is_step[r]:
                chain[r] = ""
            else:
                chain[r] = above + ARROW + names[r] if above else names[r]
    dur = np.clip(ops["dur_ns"].to_numpy(), 0, None)
    child = np.bincount(parent[parent >= 0], weights=dur[parent >= 0], minlength=len(ops)) if len(ops) else dur
    out = ops.assign(is_step=is_step, chain=chain, self_ns=np.clip(dur - child, 0, None))
    try:
        trace.__dict__["_tv_op_chains"] = out
    except (AttributeError, TypeError):
        pass
    return out


def launch_chains(side: Side) -> np.ndarray:
    """For each GPU activity of the side: the CPU op chain that launched it."""
    trace = side.trace
    full = _ops_with_chains(trace)
    k = side.kernels
    if not len(k):
        return np.empty(0, dtype=object)
    pos = np.full(len(trace.events), -1, dtype=np.int64)
    pos[full["event"].to_numpy()] = np.arange(len(full))
    op_event = k["op_event"].to_numpy()
    row = np.where(op_event >= 0, pos[np.clip(op_event, 0, None)], -1)
    chains = full["chain"].to_numpy()
    out = np.where(row >= 0, chains[np.clip(row, 0, None)], NO_OP)
    return np.where(out == "", NO_OP, out)


def kernel_keys(k: pd.DataFrame) -> np.ndarray:
    names = k["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        cats = np.array([normalise_kernel_name(str(c)) for c in names.cat.categories] + [""], dtype=object)
        codes = names.cat.codes.to_numpy()
        return cats[np.where(codes < 0, len(cats) - 1, codes)]
    return np.array([normalise_kernel_name(str(n)) for n in names], dtype=object)


# ------------------------------------------------------------------ per-side tables


def by_kernel(side: Side) -> pd.DataFrame:
    """Per normalised kernel name: count and time per step, category, an example name, launching chain."""
    cols = ["key", "count", "time_ns", "category", "kind", "example", "launched_by", "chains"]
    k = side.kernels
    if not len(k):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    f = pd.DataFrame({
        "key": kernel_keys(k), "name": k["name"].astype(str).to_numpy(),
        "dur": k["dur_ns"].clip(lower=0).to_numpy(), "category": k["category"].astype(str).to_numpy(),
        "kind": k["kind"].astype(str).to_numpy(), "chain": launch_chains(side),
    })
    g = f.groupby("key", sort=False)
    out = pd.DataFrame({"count": g.size() / side.regions, "time_ns": g["dur"].sum() / side.regions})
    out["category"] = g["category"].agg(_mode)
    out["kind"] = g["kind"].first()
    out["example"] = g["name"].agg(_mode)
    pairs = f.groupby(["key", "chain"], sort=False).size().reset_index(name="n")
    pairs = pairs.sort_values(["key", "n"], ascending=[True, False], kind="stable")
    out["launched_by"] = pairs.drop_duplicates("key").set_index("key")["chain"]
    out["chains"] = pairs.groupby("key").size()
    return out.reset_index().rename(columns={"index": "key"})[cols]


def _mode(s: pd.Series):
    return s.value_counts().index[0]


def category_times(side: Side) -> pd.DataFrame:
    k = side.kernels
    if not len(k):
        return pd.DataFrame({"count": pd.Series(dtype=float), "time_ns": pd.Series(dtype=float)})
    g = k.groupby(k["category"].astype(str).to_numpy())["dur_ns"]
    return pd.DataFrame({"count": g.size() / side.regions, "time_ns": g.sum().clip(lower=0) / side.regions})


def gemm_stats(side: Side) -> dict:
    """GEMM time per step, tensor-core share, families by time."""
    k = side.kernels
    g = k[(k["category"].astype(str) == "gemm").to_numpy()] if len(k) else k
    total = float(g["dur_ns"].clip(lower=0).sum()) if len(g) else 0.0
    out = {"gemm_time_ns": total / side.regions, "gemm_kernels": len(g) / side.regions,
           "gemm_pct": 100.0 * total / (side.gpu_ns_per_step * side.regions) if side.has_gpu and side.gpu_ns_per_step
           else float("nan"),
           "tensor_core_pct": float("nan"), "families": {}, "dominant_family": None}
    if not len(g):
        return out
    tc = g["tensor_core"]
    known = tc.notna().to_numpy()
    dur = g["dur_ns"].clip(lower=0).to_numpy()
    known_ns = dur[known].sum()
    if known_ns > 0:
        out["tensor_core_pct"] = 100.0 * dur[known & tc.fillna(False).to_numpy(dtype=bool)].sum() / known_ns
    fam = pd.Series(dur, index=[gemm_family(str(n)) for n in g["name"].astype(str)])
    fam = fam.groupby(level=0).sum().sort_values(ascending=False)
    out["families"] = {f: 100.0 * v / total if total else 0.0 for f, v in fam.items()}
    out["dominant_family"] = fam.index[0] if len(fam) else None
    return out


def _families_text(families: dict, n: int = 3) -> str:
    return ", ".join(f"{f} {p:.0f}%" for f, p in list(families.items())[:n]) or "-"


def attention_stats(side: Side) -> dict:
    """Fused attention kernels by backend (count/time per step, main kernel), and SDPA CPU ops."""
    k = side.kernels
    backends: dict = {}
    if len(k):
        a = k[(k["category"].astype(str) == "attention").to_numpy()]
        if len(a):
            be = a["attention_backend"].astype(object).where(a["attention_backend"].notna(), "fused (unknown)")
            for b, grp in a.groupby(be.astype(str).to_numpy(), sort=False):
                backends[b] = {"count": len(grp) / side.regions,
                               "time_ns": float(grp["dur_ns"].clip(lower=0).sum()) / side.regions,
                               "kernel": _mode(grp["name"].astype(str)), "distinct": grp["name"].nunique()}
    names = side.ops["name"].astype(str)
    sdpa = [n for n in dict.fromkeys(names[names.isin(list(SDPA_OPS))])]
    sdpa_backends = list(dict.fromkeys(SDPA_OPS[n] for n in sdpa))
    return {"kernels": backends, "sdpa_ops": sdpa, "sdpa_backends": sdpa_backends}


def attention_label(stats: dict) -> str:
    """One word per side: the fused kernels' backend(s), else the SDPA op's backend, else "none"."""
    if stats["kernels"]:
        return ", ".join(stats["kernels"])
    if stats["sdpa_backends"]:
        return ", ".join(stats["sdpa_backends"])
    return "none"


def op_table(side: Side) -> pd.DataFrame:
    """Per CPU op name: count and inclusive CPU time per step."""
    o = side.ops
    if not len(o):
        return pd.DataFrame({"count": pd.Series(dtype=float), "time_ns": pd.Series(dtype=float)})
    g = o.groupby(o["name"].astype(str).to_numpy())["dur_ns"]
    return pd.DataFrame({"count": g.size() / side.regions, "time_ns": g.sum().clip(lower=0) / side.regions})


def chain_table(side: Side) -> pd.DataFrame:
    o = side.ops
    if not len(o):
        return pd.DataFrame({"op": pd.Series(dtype=object), "count": pd.Series(dtype=float),
                             "time_ns": pd.Series(dtype=float)})
    g = o.groupby(o["chain"].to_numpy())
    out = pd.DataFrame({"op": g["name"].first().astype(str), "count": g.size() / side.regions,
                        "time_ns": g["dur_ns"].sum().clip(lower=0) / side.regions})
    return out


def breakdown(side: Side, top: int | None = 8) -> tuple[str, pd.Series]:
    """What a stacked bar of this side shows: GPU time per category per step, or (CPU-only)
    CPU self time per step (an op's time minus its child ops') by op name, the ``top`` largest
    and the rest as "other ops". Self times add up to the time spent in ops, without double counting."""
    if side.has_gpu:
        return "gpu", category_times(side)["time_ns"].sort_values(ascending=False)
    o = side.ops
    s = o.groupby(o["name"].astype(str).to_numpy())["self_ns"].sum().clip(lower=0) / side.regions
    s = s.sort_values(ascending=False)
    if top is not None and len(s) > top:
        s = pd.concat([s.iloc[:top], pd.Series({"other ops": s.iloc[top:].sum()})])
    return "cpu", s


# ------------------------------------------------------------------ the diff


def _ratio(a: float, b: float) -> float:
    if a is None or b is None or (isinstance(a, float) and np.isnan(a)) or (isinstance(b, float) and np.isnan(b)):
        return float("nan")
    return float(b) / float(a) if a else float("nan")


def _merge(a: pd.DataFrame, b: pd.DataFrame, key: str) -> pd.DataFrame:
    m = a.add_prefix("a_").join(b.add_prefix("b_"), how="outer").fillna(0.0)
    m.index.name = key
    return m.reset_index()


def diff(a, b, sel: Selection | None = None, *, sel_b: Selection | None = None, top: int | None = 20) -> Report:
    """What changed from trace ``a`` to trace ``b``, per step (or per annotated region).

    ``sel`` narrows both sides (``sel_b`` narrows B differently, e.g. another annotation
    name). ``top`` caps the rows of the per-kernel and per-op tables (None: all rows);
    findings always use every row.
    """
    A, B = region(a, sel), region(b, sel_b if sel_b is not None else sel)
    la, lb = _side_labels(A, B)
    tables: dict[str, pd.DataFrame] = {}
    tables["overview"] = _overview(A, B)
    findings: list[str] = []
    gpu = A.has_gpu or B.has_gpu
    ka, kb = by_kernel(A), by_kernel(B)
    if gpu:
        tables["by_category"] = _by_category(A, B)
        only_a, only_b, both = _only(ka, kb)
        tables["only_in_a"] = _cap(only_a, top)
        tables["only_in_b"] = _cap(only_b, top)
        tables["by_kernel"] = _cap(both, top)
        ga, gb = gemm_stats(A), gemm_stats(B)
        tables["gemm_path"] = _gemm_table(A, B, ga, gb)
    aa, ab = attention_stats(A), attention_stats(B)
    if gpu or aa["sdpa_ops"] or ab["sdpa_ops"]:
        tables["attention"] = _attention_table(A, B, aa, ab)
    ops_t = _ops_diff(A, B)
    chains_a, chains_b = _chain_only(A, B)
    tables["cpu_ops"] = _cap(ops_t, top)
    tables["cpu_only_in_a"] = _cap(chains_a, top)
    tables["cpu_only_in_b"] = _cap(chains_b, top)

    if A.trace.device_name and B.trace.device_name and A.trace.device_name != B.trace.device_name:
        findings.append(f"A ran on {A.trace.device_name}, B on {B.trace.device_name}: "
                        "time differences include the hardware, not only the code")
    if gpu:
        findings += _gpu_findings(A, B, only_a, only_b, ga, gb, tables["by_category"])
        findings += _attention_findings(aa, ab)
        findings += _host_op_findings(ops_t)
        if not (A.has_gpu and B.has_gpu):
            findings += _cpu_findings(A, B, ops_t, chains_a, chains_b)
    else:
        findings.append("neither trace holds GPU activity (CPU-only traces): comparing CPU ops per step")
        findings += _cpu_findings(A, B, ops_t, chains_a, chains_b)
        findings += _attention_findings(aa, ab)
    if gpu and not (A.has_gpu and B.has_gpu):
        one = "A" if not A.has_gpu else "B"
        findings.append(f"{one} holds no GPU activity in the selection, so GPU numbers compare with zero")

    info = {
        "a": a.path, "b": b.path, "a_label": la, "b_label": lb,
        "a_device": a.device_name, "b_device": b.device_name,
        "selection": (sel or Selection()).describe() + (f"; B: {sel_b.describe()}" if sel_b is not None else ""),
        "normalised_by": f"{A.region_kind}: {A.regions} in A, {B.regions} in B",
    }
    if gpu:
        info.update({
            "a_gpu_time_per_step_ns": A.gpu_ns_per_step, "b_gpu_time_per_step_ns": B.gpu_ns_per_step,
            "ratio_gpu_time": _ratio(A.gpu_ns_per_step, B.gpu_ns_per_step),
            "a_kernels_per_step": A.kernels_per_step, "b_kernels_per_step": B.kernels_per_step,
            "ratio_kernels": _ratio(A.kernels_per_step, B.kernels_per_step),
        })
    info.update({
        "a_cpu_time_per_step_ns": A.cpu_time_per_step_ns, "b_cpu_time_per_step_ns": B.cpu_time_per_step_ns,
        "a_cpu_ops_per_step": A.cpu_ops_per_step, "b_cpu_ops_per_step": B.cpu_ops_per_step,
    })
    if gpu:
        info["only_in_a_total"] = len(only_a)
        info["only_in_b_total"] = len(only_b)
    notes = list(a.warnings) + list(b.warnings) + A.notes + B.notes
    return Report(kind="diff", title=f"Diff: A = {la} vs B = {lb} (per {_unit(A)})", tables=tables,
                  findings=findings, info=info, notes=notes)


def _side_labels(A: Side, B: Side) -> tuple[str, str]:
    la, lb = A.label, B.label
    if la == lb:
        import os

        na, nb = os.path.basename(A.trace.path), os.path.basename(B.trace.path)
        la, lb = (f"{la} ({na})", f"{lb} ({nb})") if na != nb else (A.trace.path, B.trace.path)
    return la, lb


def _unit(side: Side) -> str:
    return {"annotation": "annotated region", "trace": "trace"}.get(side.region_kind, "step")


def _cap(df: pd.DataFrame, top: int | None) -> pd.DataFrame:
    return df.reset_index(drop=True) if top is None else df.head(top).reset_index(drop=True)


def _overview(A: Side, B: Side) -> pd.DataFrame:
    rows = [
        ("regions", A.regions, B.regions),
        ("gpu_activities_per_step", A.kernels_per_step, B.kernels_per_step),
        ("gpu_time_per_step_us", A.gpu_ns_per_step / 1e3, B.gpu_ns_per_step / 1e3),
        ("kernel_launches_per_step", A.launches_per_step, B.launches_per_step),
        ("cpu_time_per_step_us", A.cpu_time_per_step_ns / 1e3, B.cpu_time_per_step_ns / 1e3),
        ("cpu_op_time_per_step_us", A.cpu_op_time_per_step_ns / 1e3, B.cpu_op_time_per_step_ns / 1e3),
        ("cpu_ops_per_step", A.cpu_ops_per_step, B.cpu_ops_per_step),
    ]
    if not (A.has_gpu or B.has_gpu):
        rows = [r for r in rows if r[0] not in ("gpu_activities_per_step", "gpu_time_per_step_us",
                                                "kernel_launches_per_step")]
    return pd.DataFrame({
        "metric": [r[0] for r in rows],
        "a": [float(r[1]) for r in rows],
        "b": [float(r[2]) for r in rows],
        "delta": [float(r[2]) - float(r[1]) for r in rows],
        "ratio": [_ratio(r[1], r[2]) for r in rows],
    })


def _by_category(A: Side, B: Side) -> pd.DataFrame:
    m = _merge(category_times(A), category_times(B), "category")
    out = pd.DataFrame({
        "category": m["category"].astype(str),
        "a_count": m["a_count"], "b_count": m["b_count"], "delta_count": m["b_count"] - m["a_count"],
        "ratio_count": [_ratio(x, y) for x, y in zip(m["a_count"], m["b_count"])],
        "a_time_ns": m["a_time_ns"], "b_time_ns": m["b_time_ns"], "delta_time_ns": m["b_time_ns"] - m["a_time_ns"],
        "ratio_time": [_ratio(x, y) for x, y in zip(m["a_time_ns"], m["b_time_ns"])],
    })
    order = np.maximum(out["a_time_ns"], out["b_time_ns"]).to_numpy()
    return out.iloc[np.argsort(-order, kind="stable")].reset_index(drop=True)


def _only(ka: pd.DataFrame, kb: pd.DataFrame):
    cols = ["kernel", "category", "kind", "count", "time_ns", "launched_by", "example"]

    def side_only(x, y):
        o = x[~x["key"].isin(set(y["key"]))].copy()
        o["launched_by"] = [c if n <= 1 else f"{c} (+{n - 1} other chain{'s' if n > 2 else ''})"
                            for c, n in zip(o["launched_by"], o["chains"])]
        o = o.rename(columns={"key": "kernel"}).sort_values("time_ns", ascending=False, kind="stable")
        return o[cols].reset_index(drop=True)

    only_a, only_b = side_only(ka, kb), side_only(kb, ka)
    m = ka[["key", "count", "time_ns", "category"]].merge(
        kb[["key", "count", "time_ns", "category"]], on="key", how="inner", suffixes=("_a", "_b")).set_index("key")
    both = pd.DataFrame({
        "kernel": m.index.astype(str), "category": m["category_a"].to_numpy(),
        "a_count": m["count_a"].to_numpy(), "b_count": m["count_b"].to_numpy(),
        "a_time_ns": m["time_ns_a"].to_numpy(), "b_time_ns": m["time_ns_b"].to_numpy(),
    })
    both["delta_time_ns"] = both["b_time_ns"] - both["a_time_ns"]
    both["ratio_time"] = [_ratio(x, y) for x, y in zip(both["a_time_ns"], both["b_time_ns"])]
    both = both.iloc[np.argsort(-np.abs(both["delta_time_ns"].to_numpy()), kind="stable")].reset_index(drop=True)
    return only_a, only_b, both


def _gemm_table(A: Side, B: Side, ga: dict, gb: dict) -> pd.DataFrame:
    rows = []
    for name, side, g in (("A", A, ga), ("B", B, gb)):
        rows.append({"side": name, "trace": side.label, "gemm_kernels": g["gemm_kernels"],
                     "gemm_time_ns": g["gemm_time_ns"], "gemm_pct": g["gemm_pct"],
                     "tensor_core_pct": g["tensor_core_pct"], "dominant_family": g["dominant_family"] or "-",
                     "families": _families_text(g["families"])})
    return pd.DataFrame(rows)


def _attention_table(A: Side, B: Side, aa: dict, ab: dict) -> pd.DataFrame:
    rows = []
    for name, side, st in (("A", A, aa), ("B", B, ab)):
        sdpa = ", ".join(st["sdpa_ops"]) or "-"
        if st["kernels"]:
            for backend, v in st["kernels"].items():
                rows.append({"side": name, "trace": side.label, "backend": backend, "kernels": v["count"],
                             "time_ns": v["time_ns"], "kernel": short_kernel_name(v["kernel"]), "sdpa_op": sdpa})
        else:
            backend = ("unfused: " + ", ".join(st["sdpa_backends"])) if st["sdpa_backends"] else "none"
            rows.append({"side": name, "trace": side.label, "backend": backend, "kernels": 0.0,
                         "time_ns": 0.0, "kernel": "-", "sdpa_op": sdpa})
    return pd.DataFrame(rows)


def _ops_diff(A: Side, B: Side) -> pd.DataFrame:
    m = _merge(op_table(A), op_table(B), "op")
    out = pd.DataFrame({
        "op": m["op"].astype(str),
        "a_count": m["a_count"], "b_count": m["b_count"], "delta_count": m["b_count"] - m["a_count"],
        "a_time_ns": m["a_time_ns"], "b_time_ns": m["b_time_ns"], "delta_time_ns": m["b_time_ns"] - m["a_time_ns"],
        "ratio_time": [_ratio(x, y) for x, y in zip(m["a_time_ns"], m["b_time_ns"])],
    })
    key = np.lexsort((-np.abs(out["delta_time_ns"].to_numpy()), -np.abs(out["delta_count"].to_numpy())))
    return out.iloc[key].reset_index(drop=True)


def _chain_only(A: Side, B: Side):
    ca, cb = chain_table(A), chain_table(B)

    def only(x, y):
        o = x[~x.index.isin(y.index)]
        o = o.rename_axis("chain").reset_index()[["chain", "op", "count", "time_ns"]]
        return o.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)

    return only(ca, cb), only(cb, ca)


# ------------------------------------------------------------------ findings


def _num(x: float) -> str:
    x = float(x)
    if abs(x - round(x)) < 0.005:
        return f"{int(round(x))}"
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"


def _times(r: float) -> str:
    if np.isnan(r):
        return "n/a"
    return f"{r:.1f}x" if r >= 0.95 else f"{r:.2f}x"


def _human(ns: float) -> str:
    from ..render.cells import human_ns

    return human_ns(ns)


def _plural(n: float, word: str) -> str:
    return f"{_num(n)} {word}{'' if abs(float(n) - 1) < 1e-9 else 's'}"


def _gpu_findings(A, B, only_a, only_b, ga, gb, by_cat) -> list[str]:
    f = []
    na, nb = A.kernels_per_step, B.kernels_per_step
    ta, tb = A.gpu_ns_per_step, B.gpu_ns_per_step
    rk, rt = _ratio(na, nb), _ratio(ta, tb)
    unit = _unit(A)
    if na == 0 or nb == 0:
        busy, idle, n, t = ("B", "A", nb, tb) if na == 0 else ("A", "B", na, ta)
        f.append(f"{busy} launches {_plural(n, 'kernel')} per {unit} ({_human(t)} of GPU time); {idle} none")
    elif abs(nb - na) < 1e-9:
        f.append(f"B runs the same number of kernels per {unit} as A ({_num(nb)}) "
                 f"and takes {_times(rt)} the GPU time ({_human(tb)} vs {_human(ta)} per {unit})")
    else:
        verb = "more" if nb > na else "fewer"
        f.append(f"B launches {_plural(nb, 'kernel')} per {unit} vs {_num(na)} in A ({_times(rk)}, {_num(abs(nb - na))} "
                 f"{verb}) and takes {_times(rt)} the GPU time ({_human(tb)} vs {_human(ta)} per {unit})")
    movers = by_cat[np.abs(by_cat["delta_time_ns"]) > 0.05 * max(ta, tb, 1)].copy()
    if len(movers):
        movers = movers.iloc[np.argsort(-np.abs(movers["delta_time_ns"].to_numpy()), kind="stable")].head(3)
        parts = [f"{c} {'+' if d > 0 else '-'}{_human(abs(d))} ({_num(ca)} -> {_num(cb)} kernels)"
                 for c, d, ca, cb in zip(movers["category"], movers["delta_time_ns"], movers["a_count"],
                                         movers["b_count"])]
        f.append(f"GPU time per {unit} changes most in: " + "; ".join(parts))
    for table, side_word, verb in ((only_a, "A", "is gone in B"), (only_b, "B", "is new in B")):
        for row in table.head(5).itertuples(index=False):
            name = finding_name(row.kernel, row.example)
            launched = "it was launched by" if side_word == "A" else "launched by"
            who = f"; {launched} {row.launched_by}" if row.launched_by != NO_OP else ""
            f.append(f"{name} ({_num(row.count)} per {unit}, {_human(row.time_ns)}) {verb}{who}")
        if len(table) > 5:
            f.append(f"... and {len(table) - 5} more kernel(s) only in {side_word} (see only_in_{side_word.lower()})")
    tca, tcb = ga["tensor_core_pct"], gb["tensor_core_pct"]
    fa, fb = ga["dominant_family"], gb["dominant_family"]
    if not np.isnan(tca) and not np.isnan(tcb):
        if tca >= 50 > tcb:
            f.append(f"GEMMs moved from tensor cores ({fa}) to CUDA cores ({fb}): tensor-core share of GEMM time "
                     f"{tca:.0f}% -> {tcb:.0f}%")
        elif tcb >= 50 > tca:
            f.append(f"GEMMs moved from CUDA cores ({fa}) to tensor cores ({fb}): tensor-core share of GEMM time "
                     f"{tca:.0f}% -> {tcb:.0f}%")
        elif fa != fb:
            where = "tensor cores" if tca >= 50 else "CUDA cores"
            f.append(f"GEMMs run on {where} on both sides ({tca:.0f}% vs {tcb:.0f}% of GEMM time); "
                     f"the main GEMM family changed from {fa} to {fb}")
    elif np.isnan(tca) != np.isnan(tcb) and (fa or fb):
        f.append(f"GEMMs: A {_gemm_words(ga)}; B {_gemm_words(gb)}")
    pa, pb = _precision(A), _precision(B)
    if pa and pb and pa[0] != pb[0]:
        f.append(f"most GPU time runs in {pb[0]} in B ({pb[1]:.0f}%) but in {pa[0]} in A ({pa[1]:.0f}%)")
    if A.launches_per_step and B.launches_per_step:
        rl = _ratio(A.launches_per_step, B.launches_per_step)
        if not np.isnan(rl) and (rl > 1.2 or rl < 0.8):
            f.append(f"host side: B makes {_num(B.launches_per_step)} kernel launches per {unit} vs "
                     f"{_num(A.launches_per_step)} in A; CPU time per {unit} {_human(B.cpu_time_per_step_ns)} vs "
                     f"{_human(A.cpu_time_per_step_ns)}")
    return f


def _host_op_findings(ops_t: pd.DataFrame, n: int = 4) -> list[str]:
    """On GPU traces: the CPU ops (by time) that run on one side only."""
    f = []
    for here, there, mine, theirs in (("B", "A", "b", "a"), ("A", "B", "a", "b")):
        t = ops_t[(ops_t[f"{theirs}_count"] == 0) & (ops_t[f"{mine}_count"] > 0)]
        t = t.sort_values(f"{mine}_time_ns", ascending=False, kind="stable")
        if len(t):
            names = [f"{op} ({_human(ns)})" for op, ns in zip(t["op"], t[f"{mine}_time_ns"])]
            f.append(f"host side: {here} runs CPU ops that {there} does not, largest first: {_listing(names, n)}")
    return f


def _gemm_words(g: dict) -> str:
    if g["dominant_family"] is None:
        return "runs no GEMM kernel"
    if np.isnan(g["tensor_core_pct"]):
        return f"GEMMs mostly {g['dominant_family']}"
    return f"{g['tensor_core_pct']:.0f}% of GEMM time on tensor cores ({g['dominant_family']})"


def _precision(side: Side):
    k = side.kernels
    if not len(k) or "precision" not in k.columns:
        return None
    p = k[k["precision"].notna().to_numpy()]
    if not len(p):
        return None
    s = p.groupby(p["precision"].astype(str).to_numpy())["dur_ns"].sum()
    total = k["dur_ns"].clip(lower=0).sum()
    return (s.idxmax(), 100.0 * s.max() / total) if total else None


def _attention_words(st: dict, unit: str) -> str | None:
    if st["kernels"]:
        parts = []
        for backend, v in st["kernels"].items():
            count = "one" if abs(v["count"] - 1) < 1e-9 else _num(v["count"])
            word = "kernel" if count == "one" else "kernels"
            parts.append(f"{count} {short_kernel_name(v['kernel'])} {word} per {unit} "
                         f"({BACKEND_WORDS.get(backend, backend + ' backend')})")
        return "attention runs as " + " and ".join(parts)
    if st["sdpa_backends"]:
        b = st["sdpa_backends"][0]
        op = st["sdpa_ops"][-1] if b == "math" else st["sdpa_ops"][0]
        if b == "math":
            return f"attention runs unfused ({op}: SDPA math backend, separate matmul/softmax/elementwise ops)"
        return f"attention runs as {op} ({BACKEND_WORDS.get(b, b)})"
    return None


def _attention_findings(aa: dict, ab: dict, unit: str = "step") -> list[str]:
    wa, wb = _attention_words(aa, unit), _attention_words(ab, unit)
    if wa is None and wb is None:
        return []
    if wa == wb:
        return [f"{wa} on both sides"]
    none = "no fused attention kernel and no SDPA op (attention, if any, runs as separate ops)"
    return [f"A: {wa or none}", f"B: {wb or none}"]


def _cpu_findings(A, B, ops_t, chains_a, chains_b) -> list[str]:
    f = []
    unit = _unit(A)
    na, nb = A.cpu_ops_per_step, B.cpu_ops_per_step
    f.append(f"B runs {_num(nb)} CPU ops per {unit} vs {_num(na)} in A ({_times(_ratio(na, nb))}); "
             f"CPU time per {unit} {_human(B.cpu_time_per_step_ns)} vs {_human(A.cpu_time_per_step_ns)} "
             f"({_times(_ratio(A.cpu_time_per_step_ns, B.cpu_time_per_step_ns))})")
    only_b = ops_t[(ops_t["a_count"] == 0) & (ops_t["b_count"] > 0)]["op"].tolist()
    only_a = ops_t[(ops_t["b_count"] == 0) & (ops_t["a_count"] > 0)]["op"].tolist()
    order_b, order_a = _first_seen(B), _first_seen(A)
    only_b.sort(key=lambda n: order_b.get(n, 1 << 60))
    only_a.sort(key=lambda n: order_a.get(n, 1 << 60))
    if only_b:
        f.append(f"B runs {_listing(only_b, 12)} per {unit} that A does not")
    if only_a:
        f.append(f"A runs {_listing(only_a, 12)} per {unit} that B does not")
    full_a, full_b = chain_table(A), chain_table(B)
    for table, here, there, other in ((chains_a, "A", "B", full_b), (chains_b, "B", "A", full_a)):
        f += _copy_findings(table, other, here, there, unit)
    return f


def _copy_findings(table, other, here: str, there: str, unit: str) -> list[str]:
    """One sentence per outer op whose copy (copy_/clone/_to_copy) happens on one side only.

    A chain counts as present on the other side when some chain there runs the same outer op
    and, somewhere below it, the same copy op (so a changed nesting does not count as a change).
    """
    out, seen = [], set()
    other_chains = [c.split(ARROW) for c in other.index] if len(other) else []
    t = table[table["op"].isin(COPY_OPS) & table["chain"].str.contains(ARROW, regex=False)]
    t = t.assign(rank=t["op"].map({op: i for i, op in enumerate(COPY_OPS)}), depth=t["chain"].str.count(ARROW))
    t = t.sort_values(["rank", "depth"], ascending=[True, False], kind="stable")
    for row in t.itertuples(index=False):
        parts = row.chain.split(ARROW)
        outer = parts[0]
        if outer in seen or outer in COPY_OPS:
            continue
        if any(outer in c and c[-1] == row.op and c.index(outer) < len(c) - 1 for c in other_chains):
            continue
        seen.add(outer)
        out.append(f"{outer} copies ({row.op} under it: {row.chain}, {_num(row.count)} per {unit}) "
                   f"in {here}, not in {there}")
        if len(out) == 3:
            break
    return out


COPY_OPS = ("aten::copy_", "aten::_to_copy", "aten::clone", "aten::contiguous")


def _first_seen(side: Side) -> dict:
    o = side.ops.sort_values("ts_ns", kind="stable")
    return {n: i for i, n in enumerate(dict.fromkeys(o["name"].astype(str)))}


def _listing(names: list[str], n: int = 8) -> str:
    head = names[:n]
    text = ", ".join(head[:-1]) + (" and " if len(head) > 1 else "") + head[-1]
    return text + (f" (+{len(names) - n} more)" if len(names) > n else "")
