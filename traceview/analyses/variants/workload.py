"""Did A and B run the same work? The verdict a diff says first (issue 32 items 1 and 2).

The work is the model's: torch's FLOP count of the ops' shapes (``torch_flops``), so causal
flash, which skips the masked half, does the same work as naive attention. Evidence, best first:

- shapes (``Input Dims``), when both sides recorded them: the FLOPs per step agree or not;
- launch configurations otherwise: a kernel that runs on both sides with another grid ran
  another problem size (a GEMM's grid is its output in tiles); the same grids, launched as often,
  on kernels that hold most of both sides' time, is the same work;
- and on any evidence: the world size (``distributedInfo``), the precision of the FLOP-carrying
  work, a decode step (matrix-vector GEMMs, a ``decode`` annotation) against a prefill.

Three verdicts: ``same``, ``different`` and ``cannot tell``, each with the evidence it stands on.
Different GPUs and different ranks are said beside the verdict: neither changes the model's
work, but times then include the hardware, and a rank waits on peers neither file holds.
"""

from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from ... import schema
from ...errors import TraceviewError
from ...report import Finding
from ...run import rank_info
from ..measure.completeness import graph_replays, workload
from ..measure.derived import as_text, is_text, kept_for_region, kept_for_trace, of_region, texts
from ..measure.work import shapes_recorded, trace_work
from ..select.region import Region, op_rows
from ..wording.names import kernel_label
from ..wording.words import Cite, num, pct, plural, times
from .launch_config import with_configs

RULES_PATH = Path(__file__).resolve().parents[2] / "rules" / "workload.toml"
SAME, DIFFERENT, CANNOT_TELL = "same work", "different work", "cannot tell"


class WorkloadRules(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    decode_annotation: str
    prefill_annotation: str
    matrix_vector_kernel: str
    matrix_vector_pct: float
    same_flops_rel: float
    min_common_time_pct: float
    max_config_read_mib: int


@functools.lru_cache(maxsize=1)
def rules() -> WorkloadRules:
    try:
        r = schema.convert(schema.read(RULES_PATH, "workload rules"), WorkloadRules)
        for p in (r.decode_annotation, r.prefill_annotation, r.matrix_vector_kernel):
            re.compile(p)
    except (schema.Invalid, re.error) as e:  # a broken installation, not a user's input
        raise TraceviewError(f"{RULES_PATH}: {e}") from None
    return r


@dataclass
class Verdict:
    """``kind``: SAME, DIFFERENT or CANNOT_TELL; ``evidence``: what it stands on (``shapes``,
    ``launch configurations``, ``annotations``...); ``why``: the reasons, as the sentence says them;
    ``checks``: table ``workload_checks`` (check, a, b, differs); ``notes``: what is said beside
    the verdict (GPUs, ranks, graph replays)."""

    kind: str
    evidence: str
    why: list[str]
    checks: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return self.kind == SAME

    def table(self) -> pd.DataFrame:
        """Table ``verdict``: one row."""
        return pd.DataFrame(
            {"verdict": [self.kind], "evidence": [self.evidence], "why": ["; ".join(self.why + self.notes)]}
        )

    def finding(self, row: dict | None = None, who: str = "") -> Finding:
        """The first sentence of a diff (after any incomplete-trace warning), citing table verdict
        (``row``: its key where the table has a row per trace, as compare's; ``who``: the words
        naming the pair there): ``same work (judged on shapes): both ask ...``."""
        c, key = Cite(), row or {}
        kind = c("verdict", key, "verdict", self.kind, "text")
        evidence = c("verdict", key, "evidence", self.evidence, "text")
        why = c("verdict", key, "why", "; ".join(self.why + self.notes), "text")
        head = "" if self.kind != CANNOT_TELL else " whether A and B run the same work"
        tail = "" if self.same else "; the differences below describe the two workloads, not changes of code"
        return c.finding(f"{who}{kind}{head} (judged on {evidence}): {why}{tail}")


def compare_verdicts(labels: list[str], sides: list[Region], base: int) -> tuple[pd.DataFrame, list[Finding]]:
    """compare's table ``verdict`` (a row per trace but the baseline: trace, baseline, verdict,
    evidence, why) and a sentence for each trace whose work is not the same as the baseline's
    (``A`` the baseline, ``B`` the trace, said in the sentence)."""
    rows, said = [], []
    for i, (label, side) in enumerate(zip(labels, sides, strict=True)):
        if i == base:
            continue
        v = verdict(sides[base], side)
        rows.append({"trace": label, "baseline": labels[base], **v.table().iloc[0].to_dict()})
        if not v.same:
            c = Cite()
            names = f"{c('verdict', {'trace': label}, 'trace', label, 'text')} (B) against the baseline "
            names += f"{c('verdict', {'trace': label}, 'baseline', labels[base], 'text')} (A): "
            f = v.finding({"trace": label}, names)
            said.append(Finding(str(f), [*c.evidence, *f.evidence]))
    columns = ["trace", "baseline", "verdict", "evidence", "why"]
    return pd.DataFrame(rows, columns=columns), said


# ------------------------------------------------------------------ the facts of one side


@dataclass
class Side:
    """What one side shows of its work (per step); its kernels' launch configurations are read from
    the file only when asked (``kernels``: the verdict needs them only without shapes)."""

    flops: float | None  # torch's count per step; None without shapes
    precision: str | None  # of the FLOP-carrying ops (None without shapes)
    phase: str | None  # "decode" / "prefill" (annotations), "one-row GEMMs" (gemv kernels), None
    phase_how: str
    graph_pct: float  # share of GPU time in CUDA graph replays
    region: Region
    k: pd.DataFrame  # the region's kernels: the columns the verdict reads (``_KERNEL_COLUMNS``)
    read: dict | None = None  # exact kernel name -> Kernel, once read

    @property
    def unread(self) -> str:
        """Why the launch configurations are not read ("" when they are): a file too large."""
        mib = int(self.region.trace.stats.get("json_bytes", 0) or 0) / 2**20
        if mib <= rules().max_config_read_mib:
            return ""
        return f"launch configurations not read from a file of {num(round(mib))} MiB (rules/workload.toml)"

    @property
    def kernels(self) -> dict:
        if self.read is None:
            self.read = _kernel_configs(self.region, self.k.iloc[:0] if self.unread else self.k)
        return self.read


#: what the verdict reads of a side's kernels (its phase, and their launch configurations)
_KERNEL_COLUMNS = ["name", "correlation", "dur_ns", "category"]


def side_facts(r: Region) -> Side:
    """What one side shows of its work, worked out once per trace and selection (a diff's sides on
    the threads that read them, ``variants.sides``)."""
    return of_region(r, "side_facts", _side_facts)


def _side_facts(r: Region) -> Side:
    k = r.activities[_KERNEL_COLUMNS]  # four columns copied, not all of the region's activities
    k = k[is_text(r.activities["kind"], "kernel")] if r.has_gpu else k
    # the figures kept in the trace's cache entry for the whole trace: a warm diff reads them back
    kept = kept_for_region(r, "side_figures", lambda r: _figures(r, k), value=True)
    flops, precision, phase, how, graph_pct = kept
    return Side(flops, precision, phase, how, graph_pct, r, k)


def _figures(r: Region, k: pd.DataFrame) -> tuple:
    flops, precision = _shape_work(r)
    phase, how = _phase(r, k)
    dur = np.clip(r.activities["dur_ns"].to_numpy(), 0, None) if r.has_gpu else np.zeros(0)
    graph = graph_replays(r.activities) if r.has_gpu else np.zeros(0, bool)
    graph_pct = 100.0 * dur[graph].sum() / dur.sum() if dur.sum() else 0.0
    return flops, precision, phase, how, float(graph_pct)


def _shape_work(r: Region) -> tuple[float | None, str | None]:
    """torch's FLOPs per step of the counted ops, and the precision holding most of them."""
    rows, _ = op_rows(r)  # positions in the trace's ops, with which ``trace_work`` is aligned
    if not len(rows) or not shapes_recorded(r.trace):
        return None, None
    work = trace_work(r.trace)
    rows = rows[work["counted"].to_numpy()[rows]]
    fl = work["torch_flops"].iloc[rows].fillna(0).astype("int64").to_numpy()
    if not fl.any():
        return 0.0, None
    by = pd.Series(fl).groupby(as_text(work["precision"].iloc[rows])).sum()
    by = by[by.index != "None"]
    return float(fl.sum()) / r.regions, (str(by.idxmax()) if len(by) else None)


def annotation_names(trace) -> list[str]:
    """The distinct names of the trace's annotations, the first met first; kept in its cache entry
    (a warm diff reads no events)."""
    kept = kept_for_trace(trace, "annotation_names", _names)
    return [n for n in kept["name"] if isinstance(n, str)]


def _names(trace) -> pd.DataFrame:
    ev = trace.events
    codes, values = texts(ev["name"][(ev["role"] == "annotation").to_numpy()])
    return pd.DataFrame({"name": values[pd.unique(codes)]})


def _phase(r: Region, k: pd.DataFrame) -> tuple[str | None, str]:
    names = annotation_names(r.trace)
    ru = rules()
    dec = [n for n in names if re.search(ru.decode_annotation, n, re.I)]
    pre = [n for n in names if re.search(ru.prefill_annotation, n, re.I)]
    if dec and not pre:
        return "decode", f"annotation {dec[0]!r}"
    if pre and not dec:
        return "prefill", f"annotation {pre[0]!r}"
    g = k[is_text(k["category"], "gemm")] if len(k) else k
    if not len(g):
        return None, ""
    codes, values = texts(g["name"])
    mv = np.array([bool(re.search(ru.matrix_vector_kernel, str(v))) for v in values])[codes]
    share = 100.0 * g["dur_ns"].to_numpy()[mv].sum() / max(g["dur_ns"].sum(), 1)
    if share >= ru.matrix_vector_pct:
        return "one-row GEMMs", f"{pct(share)} of GEMM time in matrix-vector kernels (gemv: M = 1, decode)"
    return "many-row GEMMs", f"{pct(100 - share)} of GEMM time in matrix-matrix kernels"


@dataclass
class Kernel:
    """One exact kernel name on one side, per step: launches, time, and launches per launch
    configuration ((grid, block) -> count; empty where the file records none)."""

    count: float
    time_ns: float
    category: str
    configs: dict


def _kernel_configs(r: Region, k: pd.DataFrame) -> dict[str, Kernel]:
    """Per exact kernel name, its ``Kernel``."""
    if not len(k):
        return {}
    kc = with_configs(r.trace, k[["name", "correlation", "dur_ns", "category"]])
    kc["name"] = kc["name"].astype(str)
    kc["config"] = list(zip(kc["grid"], kc["block"], strict=True))
    g = kc.groupby("name", sort=False)
    count, time_ns, cat = g.size(), g["dur_ns"].sum(), g["category"].first().astype(str)
    recorded = kc[kc["grid"].notna().to_numpy()]
    per = recorded.groupby(["name", "config"], sort=False).size()
    configs: dict[str, dict] = {}
    levels = (per.index.get_level_values(0), per.index.get_level_values(1), per.to_numpy())
    for name, config, n in zip(*levels, strict=True):  # one per distinct (name, config): few
        configs.setdefault(str(name), {})[config] = float(n) / r.regions
    rows = zip(count.index.astype(str), count.to_numpy(), time_ns.to_numpy(), cat.to_numpy(), strict=True)
    sms = _sm_count(r.trace.meta)
    return {
        n: Kernel(c / r.regions, t / r.regions, str(k), _persistent(configs.get(n, {}), sms))
        for n, c, t, k in rows
    }


def _sm_count(meta: dict) -> int | None:
    props = meta.get("deviceProperties") if isinstance(meta, dict) else None
    first = props[0] if isinstance(props, list) and props and isinstance(props[0], dict) else {}
    sms = first.get("numSms")
    return sms if isinstance(sms, int) and not isinstance(sms, bool) and sms > 0 else None


# ------------------------------------------------------------------ the verdict


def verdict(A: Region, B: Region) -> Verdict:
    sa, sb = side_facts(A), side_facts(B)
    v = _decide(A, B, sa, sb)
    v.checks = _checks(A, B, sa, sb)  # after the decision: it shows what was read for it
    return v


def _decide(A: Region, B: Region, sa: Side, sb: Side) -> Verdict:
    checks, notes, unit = pd.DataFrame(), _notes(A, B, sa, sb), A.per_word
    if _same_file(A, B):  # a trace against itself: whatever it recorded, the same work
        why = ["A and B are the same trace file and selection"]
        return Verdict(SAME, "the same file", why, checks, notes)
    # (evidence, words) of each difference any evidence shows
    different = [x for x in (_world(A, B), _precision(sa, sb), _phases(sa, sb)) if x]
    if sa.flops is not None and sb.flops is not None and (sa.flops or sb.flops):
        if not math.isclose(sa.flops, sb.flops, rel_tol=rules().same_flops_rel):
            different.insert(0, ("shapes", _flops_words(A, B, sa, sb, unit)))
        if not different:
            same = f"both ask {num(sa.flops)} FLOPs per {unit} by torch's count of their recorded shapes"
            return Verdict(SAME, "shapes", [same], checks, notes)
    else:
        kind, words = _grid_words(sa, sb, unit, A.trace.device_name != B.trace.device_name)
        if kind == DIFFERENT:
            different.append(("launch configurations", words))
        elif not different:
            return Verdict(kind, "launch configurations", [words], checks, notes)
    evidence = ", ".join(dict.fromkeys(e for e, _ in different))
    return Verdict(DIFFERENT, evidence, [w for _, w in different], checks, notes)


def _flops_words(A: Region, B: Region, sa: Side, sb: Side, unit: str) -> str:
    """How the FLOPs differ, and the GEMMs' rows (M) where the matrix products both sides call
    were asked for other M: ``B's GEMMs have M = 1,024 (282 ops), A's M = 4,096 (…)``."""
    assert sa.flops is not None and sb.flops is not None
    r = times(sb.flops / sa.flops) if sa.flops else "n/a"
    words = (
        f"B's ops ask {r} the FLOPs of A's: {num(sb.flops)} vs {num(sa.flops)} per {unit} by torch's "
        "count of their recorded shapes"
    )
    wa, wb = workload(A), workload(B)
    common = {n for n, _ in wa["gemm_m_by_op"]} & {n for n, _ in wb["gemm_m_by_op"]}
    ma, mb = (_m_counts(w["gemm_m_by_op"], common) for w in (wa, wb))
    if ma and mb and set(ma) != set(mb):
        words += f"; B's GEMMs have M = {_m_text(mb)}, A's M = {_m_text(ma)}"
    return words


def _m_counts(by_op: dict, names: set) -> dict:
    out: dict = {}
    for (name, m), n in by_op.items():
        if name in names:
            out[m] = out.get(m, 0) + n
    return out


def _m_text(ms: dict, n: int = 3) -> str:
    """The commonest M values with their op counts: ``788 (72 ops), 4 (1 op)``."""
    top = sorted(ms, key=lambda m: (-ms[m], m))[:n]
    words = ", ".join(f"{num(m)} ({plural(ms[m], 'op')})" for m in top)
    return words + (f" and {num(len(ms) - n)} more" if len(ms) > n else "")


def _same_file(A: Region, B: Region) -> bool:
    same = A.trace is B.trace or os.path.realpath(A.trace.path) == os.path.realpath(B.trace.path)
    return same and A.selection == B.selection


def _no_shapes(sa: Side, sb: Side) -> str:
    if sa.flops is None and sb.flops is None:
        return "neither trace recorded shapes"
    if sa.flops is None or sb.flops is None:
        return f"{'A' if sa.flops is None else 'B'} recorded no shapes"
    return "no op with recorded shapes carries FLOPs on either side"


def _world(A: Region, B: Region) -> tuple[str, str] | None:
    ra, rb = rank_info(A.trace.meta), rank_info(B.trace.meta)
    if ra and rb and ra[1] and rb[1] and ra[1] != rb[1]:
        words = f"A is one of {num(ra[1])} ranks, B one of {num(rb[1])}: each rank holds another share"
        return "distributedInfo", words
    return None


def _precision(sa: Side, sb: Side) -> tuple[str, str] | None:
    """The model's dtype, read off the FLOP ops' input types: a kernel's precision is the library's
    choice (the SDPA math backend computes bf16 attention in fp32), not the work asked for."""
    if sa.precision and sb.precision and sa.precision != sb.precision:
        return "shapes", f"A's ops compute in {sa.precision}, B's in {sb.precision}"
    return None


def _phases(sa: Side, sb: Side) -> tuple[str, str] | None:
    pa, pb = sa.phase, sb.phase
    if not (pa and pb) or pa == pb:
        return None
    pair = {pa, pb}
    # a decode step of a batch runs matrix-matrix GEMMs too: "decode" against "many-row" tells nothing
    if pair in ({"decode", "prefill"}, {"one-row GEMMs", "many-row GEMMs"}, {"prefill", "one-row GEMMs"}):
        how = "annotations" if {pa, pb} <= {"decode", "prefill"} else "kernel names"
        return how, f"A: {pa} ({sa.phase_how}); B: {pb} ({sb.phase_how})"
    return None


def _grid_words(sa: Side, sb: Side, unit: str, other_gpu: bool) -> tuple[str, str]:
    """(kind, why) from the kernels both sides run by exact name and their launch configurations."""
    ka, kb = sa.kernels, sb.kernels
    both = [n for n in ka if n in kb and ka[n].configs and kb[n].configs]
    why_none = _no_shapes(sa, sb)
    if sa.unread or sb.unread:
        return CANNOT_TELL, f"{why_none}; {'A' if sa.unread else 'B'}: {sa.unread or sb.unread}"
    if not ka or not kb:
        return CANNOT_TELL, f"{why_none} and {'A' if not ka else 'B'} runs no kernel"
    if not both:
        named = [n for n in ka if n in kb]
        tail = "no kernel runs on both sides" if not named else "no kernel on both sides has a recorded grid"
        gpu = "; they ran on different GPUs, which pick their own kernels" if other_gpu else ""
        bounds = _bound_words(ka, kb, unit) if not other_gpu else None
        if bounds:
            return DIFFERENT, f"{why_none} and {tail}, but {bounds}"
        return CANNOT_TELL, f"{why_none} and {tail}{gpu}"
    moved = [n for n in both if set(ka[n].configs) != set(kb[n].configs)]
    if moved:
        words = _grid_change(ka, kb, moved)
        if other_gpu:
            return CANNOT_TELL, f"{why_none}; {words}, but on different GPUs, which pick grids per device"
        more = f" (and {plural(len(moved) - 1, 'more kernel')} with other grids)" if len(moved) > 1 else ""
        return DIFFERENT, words + more
    gemm = [n for n in both if ka[n].category == "gemm"]
    counts = [n for n in gemm if not math.isclose(ka[n].count, kb[n].count)]
    if counts:
        n = max(counts, key=lambda x: max(ka[x].time_ns, kb[x].time_ns))
        return DIFFERENT, (
            f"B launches GEMM {kernel_label(n)} {num(kb[n].count)} times per {unit}, A "
            f"{num(ka[n].count)}, with the same grids"
        )
    share_a = 100.0 * sum(ka[n].time_ns for n in both) / max(sum(x.time_ns for x in ka.values()), 1)
    share_b = 100.0 * sum(kb[n].time_ns for n in both) / max(sum(x.time_ns for x in kb.values()), 1)
    said = (
        f"{plural(len(both), 'kernel')} run on both sides with the same grids and blocks "
        f"({pct(share_a)} of A's kernel time, {pct(share_b)} of B's)"
    )
    if min(share_a, share_b) < rules().min_common_time_pct:
        return CANNOT_TELL, f"{why_none}; only {said}"
    return SAME, f"{why_none}; {said}"


_GEMM_TILE = re.compile(r"(?:(?<=tilesize)|(?<![A-Za-z0-9]))(\d+)x(\d+)(?![0-9])")


def _output_bound(ks: dict[str, Kernel]) -> tuple[float, float, float] | None:
    """(the fewest and the most output elements per step the GEMM kernels can have written, by each
    launch's tile (M x N, from the name) and grid; the share of GEMM time in kernels whose name
    gives a tile and whose grid is recorded). With the grid's x and y as the tiles along M and N
    (either way round) a launch wrote more than tile x (x - 1) x (y - 1) elements (its last tiles
    may be nearly empty) and at most tile x x x y x z (z: a batch, or a split of K that writes no
    more): only bounds that do not overlap tell two workloads apart."""
    gemm = {n: k for n, k in ks.items() if k.category == "gemm"}
    total = sum(k.time_ns for k in gemm.values())
    covered, low, high = 0.0, 0.0, 0.0
    for name, k in gemm.items():
        m = _GEMM_TILE.search(name)
        if m is None or not k.configs:
            continue
        covered += k.time_ns
        area = int(m.group(1)) * int(m.group(2))
        for (g, _), n in k.configs.items():
            x, y, z = (*g, 1, 1)[:3]
            low += area * max(x - 1, 0) * max(y - 1, 0) * n
            high += area * x * y * z * n
    return (low, high, 100.0 * covered / total) if total and high else None


def _bound_words(ka: dict[str, Kernel], kb: dict[str, Kernel], unit: str) -> str | None:
    """Said when one side's GEMMs wrote more output than the other's could have, each bound over
    most of its side's GEMM time (``min_common_time_pct``)."""
    ba, bb = _output_bound(ka), _output_bound(kb)
    if not ba or not bb or min(ba[2], bb[2]) < rules().min_common_time_pct:
        return None
    if bb[0] > ba[1]:
        more, fewer, (lo, _, share), (_, hi, other) = "B", "A", bb, ba
    elif ba[0] > bb[1]:
        more, fewer, (lo, _, share), (_, hi, other) = "A", "B", ba, bb
    else:
        return None
    return (
        f"by tile × grid {more}'s GEMM kernels wrote more than {num(lo)} output elements per {unit}, "
        f"{fewer}'s at most {num(hi)} ({pct(share)} and {pct(other)} of their GEMM time)"
    )


def _persistent(configs: dict, sms: int | None) -> dict:
    """The configurations whose grid is not the GPU's SM count (or a small multiple of it): a
    persistent kernel launches one block per SM, whatever the problem's size, so its grid tells
    nothing (the tutorial's H100 GEMMs: 132 blocks, as 132 and as 66x2)."""
    if not sms:
        return configs
    return {c: n for c, n in configs.items() if not any(int(np.prod(c[0])) == k * sms for k in (1, 2, 3, 4))}


def _grid_change(ka: dict[str, Kernel], kb: dict[str, Kernel], moved: list[str]) -> str:
    """The largest kernel (by time) whose grid differs, in numbers: its commonest config each side."""
    n = max(moved, key=lambda x: max(ka[x].time_ns, kb[x].time_ns))
    ca, cb = ka[n].configs, kb[n].configs
    (ga, bla), (gb, blb) = max(ca, key=ca.__getitem__), max(cb, key=cb.__getitem__)
    na, nb = int(np.prod(ga)), int(np.prod(gb))
    name, gemm = kernel_label(n), ka[n].category == "gemm"
    if ga != gb and na != nb:
        what = "output per launch" if gemm else "thread blocks per launch"
        who = "B's GEMMs have" if gemm else f"B's {name} launches have"
        grids = f"grid {_dims(ga)} → {_dims(gb)}"
        return f"{who} {times(nb / na)} the {what}: {grids} on the same kernel ({name})"
    if ga != gb:
        return f"{name} runs with another grid shape, {_dims(ga)} → {_dims(gb)} ({num(na)} blocks on both)"
    return f"{name} runs with other blocks, {_dims(bla)} → {_dims(blb)} threads (grid {_dims(ga)})"


def _dims(d: tuple) -> str:
    """``100x50`` (trailing 1s dropped, ``1`` kept alone)."""
    d = tuple(d)
    while len(d) > 1 and d[-1] == 1:
        d = d[:-1]
    return "x".join(str(x) for x in d)


def _notes(A: Region, B: Region, sa: Side, sb: Side) -> list[str]:
    """Said beside the verdict: other GPUs, other ranks, graph replays against eager launches."""
    out = []
    da, db = A.trace.device_name, B.trace.device_name
    if da and db and da != db:
        out.append(f"A ran on {da}, B on {db}: times include the hardware")
    ra, rb = rank_info(A.trace.meta), rank_info(B.trace.meta)
    if ra and rb and ra[0] != rb[0] and not _world(A, B):  # another world size is said by the verdict
        out.append(
            f"A is rank {ra[0]}, B rank {rb[0]}: time waiting on peers depends on ranks neither file holds"
        )
    ga, gb = sa.graph_pct, sb.graph_pct
    if (ga >= 50) != (gb >= 50):
        g, e = ("A", "B") if ga >= 50 else ("B", "A")
        out.append(f"{g}'s kernels are CUDA graph replays (no CPU op, no shapes), {e}'s launched one by one")
    return out


def _checks(A: Region, B: Region, sa: Side, sb: Side) -> pd.DataFrame:
    """Table ``workload_checks``: each fact the verdict weighs, both sides' values as text."""
    ra, rb = rank_info(A.trace.meta), rank_info(B.trace.meta)

    def rank(r) -> str:
        return f"rank {r[0]} of {r[1] if r[1] else '?'}" if r else "-"

    rows = [
        ("device", A.trace.device_name or "-", B.trace.device_name or "-"),
        ("rank", rank(ra), rank(rb)),
        (f"FLOPs per {A.per_word} (torch)", _opt(sa.flops), _opt(sb.flops)),
        ("precision of FLOP work", sa.precision or "-", sb.precision or "-"),
        ("phase", sa.phase or "-", sb.phase or "-"),
        ("GPU time in graph replays", pct(sa.graph_pct), pct(sb.graph_pct)),
        ("kernels with a recorded grid", _with_grid(sa), _with_grid(sb)),
    ]
    return pd.DataFrame(
        {
            "check": [r[0] for r in rows],
            "a": [r[1] for r in rows],
            "b": [r[2] for r in rows],
            "differs": [r[1] != r[2] for r in rows],
        }
    )


def _opt(x: float | None) -> str:
    return "no shapes" if x is None else num(x)


def _with_grid(s: Side) -> str:
    if s.read is None:
        return "not read (not needed)"
    return num(sum(1 for k in s.read.values() if k.configs)) if not s.unread else "not read"
