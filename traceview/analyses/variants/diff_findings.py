"""The sentences of a diff: what changed from A to B, in plain words, most telling first."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...domain import domain
from ...link import ARROW
from ...report import Finding
from ..measure.derived import as_text, of_region, texts
from ..measure.efficiency import efficiency_findings
from ..measure.groups import NO_OP, chain_table
from ..measure.metrics import on_tensor_cores
from ..measure.registry import metrics_of
from ..select.region import Region
from ..wording.names import short_kernel_name, tile
from ..wording.words import TO, Cite, human, listing, ratio
from .host_launches import host_launches
from .workload import SAME


def diff_findings(
    A: Region,
    B: Region,
    kernels,
    aa: dict,
    ab: dict,
    ops_t: pd.DataFrame,
    chains_a: pd.DataFrame,
    chains_b: pd.DataFrame,
    work: str = SAME,
    labels: tuple[str, str] = ("A", "B"),
) -> list[str]:
    """``kernels``: diff's kernel tables and GEMM stats (None when neither side has GPU activity);
    ``work``: the workload verdict (:mod:`.workload`). When it is not the same work, every sentence
    describes a difference and names no cause: no "moved", no "gone", no change of tile as a choice
    (issue 32 item 2). The devices are said by the verdict."""
    if _same(A, B, kernels, ops_t, chains_a, chains_b):
        return [
            f"A and B are the same: every per-{A.per_word} count and time, every kernel and every CPU op "
            "match (all deltas are zero)"
        ]
    f: list[str] = []
    gpu = A.has_gpu or B.has_gpu
    if gpu:
        f += _gpu_findings(A, B, kernels, work, labels)
        f += _attention_findings(aa, ab, A.per_word)
        f += _host_op_findings(ops_t)
        if not (A.has_gpu and B.has_gpu):
            f += _cpu_findings(A, B, ops_t, chains_a, chains_b)
    else:
        f.append("neither trace holds GPU activity (CPU-only traces): comparing CPU ops per step")
        f += _cpu_findings(A, B, ops_t, chains_a, chains_b)
        f += _attention_findings(aa, ab, A.per_word)
    if gpu and not (A.has_gpu and B.has_gpu):
        one = "A" if not A.has_gpu else "B"
        f.append(f"{one} holds no GPU activity in the selection, so GPU numbers compare with zero")
    return f


# ------------------------------------------------------------------ GPU


def _gpu_findings(A: Region, B: Region, kernels, work: str, labels: tuple[str, str]) -> list[str]:
    unit, same = A.per_word, work == SAME
    f: list[str] = [_kernel_count_finding(A, B, unit)]
    f += _category_findings(A, B, kernels.by_category, unit)
    f += _only_findings(kernels.only_a, kernels.only_b, unit, same, kernels.merged)
    f += _tile_findings(kernels.both, unit, same)
    f += _gemm_findings(kernels.ga, kernels.gb, same)
    f += _precision_findings(A, B)
    rates = efficiency_findings([("A", A), ("B", B)], "efficiency", keys=list(labels))  # rows by label
    f += rates if same else on_other_work(rates)  # a rate on other work is no better or worse use
    f += _launch_findings(A, B, unit)
    return f


def on_other_work(findings: list[str]) -> list[str]:
    """Sentences that compare A with B (rates, advice "new in B"/"worse in B") when the work is not
    known to be the same: each says so, its figures and evidence unchanged."""
    said = "; the two sides run different work (or work not known to be the same)"
    return [Finding(f"{f}{said}", getattr(f, "evidence", ())) for f in findings]


def _kernel_count_finding(A: Region, B: Region, unit: str) -> Finding:
    ma, mb = metrics_of(A), metrics_of(B)
    na, nb = ma["kernels_per_step"], mb["kernels_per_step"]
    ta, tb = ma["gpu_time_per_step_ns"], mb["gpu_time_per_step_ns"]
    c = Cite()

    def o(metric: str, column: str, value, how: str) -> str:  # a cell of the overview table
        return c("overview", {"metric": metric}, column, value, how)

    if na == 0 or nb == 0:
        busy, idle, n, t = ("B", "A", nb, tb) if na == 0 else ("A", "B", na, ta)
        col = busy.lower()
        return c.finding(
            f"{busy} launches {o('kernels_per_step', col, n, 'count')} {_s('kernel', n)} per {unit} "
            f"({o('gpu_time_per_step_ns', col, t, 'ns')} of GPU time); {idle} none"
        )
    if abs(nb - na) < 1e-9:
        return c.finding(
            f"B runs the same number of kernels per {unit} as A ({o('kernels_per_step', 'b', nb, 'count')}) "
            f"and takes {o('gpu_time_per_step_ns', 'ratio', ratio(ta, tb), 'ratio')} the GPU time "
            f"({o('gpu_time_per_step_ns', 'b', tb, 'ns')} vs {o('gpu_time_per_step_ns', 'a', ta, 'ns')} "
            f"per {unit})"
        )
    verb = "more" if nb > na else "fewer"
    return c.finding(
        f"B launches {o('kernels_per_step', 'b', nb, 'count')} {_s('kernel', nb)} per {unit} vs "
        f"{o('kernels_per_step', 'a', na, 'count')} in A "
        f"({o('kernels_per_step', 'ratio', ratio(na, nb), 'ratio')}, "
        f"{o('kernels_per_step', 'delta', nb - na, 'count')} {verb}) and takes "
        f"{o('gpu_time_per_step_ns', 'ratio', ratio(ta, tb), 'ratio')} the GPU time "
        f"({o('gpu_time_per_step_ns', 'b', tb, 'ns')} vs {o('gpu_time_per_step_ns', 'a', ta, 'ns')} "
        f"per {unit})"
    )


def _s(word: str, n: float) -> str:
    """``word`` for one, its plural otherwise (the count itself is cited apart)."""
    return word if abs(float(n) - 1) < 1e-9 else word + "s"


def _what(category: str) -> str:
    """What a category's count counts: memcpys and memsets are not kernels."""
    return {"memcpy": "memcpys", "memset": "memsets"}.get(category, "kernels")


def _category_findings(A: Region, B: Region, by_cat: pd.DataFrame, unit: str) -> list[str]:
    """The (at most three) categories whose GPU time moved by more than 5% of the larger side's."""
    most = max(metrics_of(A)["gpu_time_per_step_ns"], metrics_of(B)["gpu_time_per_step_ns"], 1)
    movers = by_cat[np.abs(by_cat["delta_time_ns"]) > 0.05 * most].copy()
    if not len(movers):
        return []
    movers = movers.iloc[np.argsort(-np.abs(movers["delta_time_ns"].to_numpy()), kind="stable")].head(3)
    e = Cite()
    parts = [
        f"{e('by_category', {'category': c}, 'category', c, 'text')} {'+' if d > 0 else '-'}"
        f"{e('by_category', {'category': c}, 'delta_time_ns', d, 'ns')} "
        f"({e('by_category', {'category': c}, 'a_count', ca, 'count')} {TO} "
        f"{e('by_category', {'category': c}, 'b_count', cb, 'count')} {_what(c)})"
        for c, d, ca, cb in zip(
            movers["category"], movers["delta_time_ns"], movers["a_count"], movers["b_count"], strict=False
        )
    ]
    return [e.finding(f"{gpu_time_words(unit)} changes most in: " + "; ".join(parts))]


def gpu_time_words(unit: str) -> str:
    """How a sentence names busy GPU time, apart from exposed time (issue 32 item 6: "compute:
    elementwise -16.6 ms" two lines above "elementwise -12.1 ms" read as a contradiction): the
    summed durations of the work launched in the windows, overlaps counted twice."""
    where = f", launched in the {unit}s" if unit != "trace" else ""
    return f"GPU time per {unit} (kernel durations summed{where})"


def exposed_words(unit: str) -> str:
    """How a sentence names exposed time: each instant of the windows' wall time given to one cause,
    whatever launched the work that runs then (so work launched before a window counts in it)."""
    return f"exposed time per {unit} (each instant of wall time to one cause, wherever launched)"


def _only_findings(
    only_a: pd.DataFrame,
    only_b: pd.DataFrame,
    unit: str,
    same: bool = True,
    merged: pd.DataFrame | None = None,
) -> list[str]:
    f: list[str] = []
    # "gone" and "new" say B came from A; on other work each side simply runs its own kernels
    verbs = ("is gone in B", "is new in B") if same else ("runs only in A", "runs only in B")
    for table, side_word, verb in ((only_a, "A", verbs[0]), (only_b, "B", verbs[1])):
        name_t = f"only_in_{side_word.lower()}"
        for row in table.head(5).itertuples(index=False):
            c, key = Cite(), {"match_key": row.match_key}
            name = c(name_t, key, "kernel", row.kernel, "name")
            launched = "it was launched by" if side_word == "A" else "launched by"
            who = f"; {launched} {c(name_t, key, 'launched_by', row.launched_by, 'text')}"
            who = who if row.launched_by != NO_OP else ""
            several = int(row.kernels) > 1 and merged is not None  # type: ignore[arg-type]
            each = _each_kernel(c, merged, side_word, str(row.match_key), unit) if several else ""
            f.append(
                c.finding(
                    f"{name} ({c(name_t, key, 'count', row.count, 'count')} per {unit}, "
                    f"{c(name_t, key, 'time_ns', row.time_ns, 'ns')}{each}) "
                    f"{_plural_verb(verb) if several else verb}{who}"
                )
            )
        if len(table) > 5:
            c, total = Cite(), f"only_in_{side_word.lower()}_total"  # the report's info, no table row
            f.append(
                c.finding(
                    f"{c('info', {}, total, len(table), 'count')} kernel names or families run only in "
                    f"{side_word} in all (the largest above; see {name_t})"
                )
            )
    return f


def _plural_verb(verb: str) -> str:
    return verb.replace("is ", "are ", 1).replace("runs ", "run ", 1)


def _each_kernel(c: Cite, merged, side: str, match_key: str, unit: str, n: int = 4) -> str:
    """``: a 65, b 26 per step``: the exact kernels one row stands for, each with its own count,
    cited from table merged_kernels (issue 32 item 3)."""
    rows = merged[((merged["side"] == side) & (merged["match_key"] == match_key)).to_numpy()]
    parts = []
    for name, kernel, count in zip(
        rows["name"].head(n), rows["kernel"].head(n), rows["count"].head(n), strict=True
    ):
        key = {"side": side, "name": name}
        said = c("merged_kernels", key, "kernel", kernel, "text")  # whole: its tail tells it apart
        parts.append(f"{said} {c('merged_kernels', key, 'count', count, 'count')}")
    more = " and more (see merged_kernels)" if len(rows) > n else ""
    return f": {'; '.join(parts)}{more} per {unit}"


def _tile_findings(both: pd.DataFrame, unit: str, same: bool = True, n: int = 3) -> list[Finding]:
    """Kernels matched as one family whose tile configuration changed (``128x64 → 128x128``): the
    key masks the tile so the rows pair up, but a new tile is a choice the library made, said apart.
    The largest changes in time first (``both``'s order), as many as ``n``."""
    ta, tb = both["a_example"].map(tile), both["b_example"].map(tile)
    one = ((both["a_kernels"] == 1) & (both["b_kernels"] == 1)).to_numpy()  # one kernel a side: one tile
    changed = both[(ta.notna() & tb.notna() & (ta != tb)).to_numpy() & one].head(n)
    f = []
    for row in changed.itertuples(index=False):
        c, key = Cite(), {"match_key": row.match_key}
        name = c("by_kernel", key, "kernel", row.kernel, "text")  # cited first: it holds the tiles too
        # each side's tile read off its own example name, as the name column shows them
        ka, kb = (c("by_kernel", key, f"{s}_example", getattr(row, f"{s}_example"), "tile") for s in "ab")
        # on other work another tile is what the library picks for other shapes, not a change made
        how = "" if same else ", on work that differs (or cannot be told the same)"
        f.append(
            c.finding(
                f"{name}: the same kernel "
                f"family with another tile configuration, {ka} {TO} {kb}{how}; "
                f"{c('by_kernel', key, 'a_time_ns', row.a_time_ns, 'ns')} {TO} "
                f"{c('by_kernel', key, 'b_time_ns', row.b_time_ns, 'ns')} per {unit}"
            )
        )
    return f


def _gemm_findings(ga: dict, gb: dict, same_work: bool = True) -> list[Finding]:
    """At most one sentence; its figures are cells of the gemm_path table."""
    tca, tcb = ga["tensor_core_pct"], gb["tensor_core_pct"]
    fa, fb = ga["dominant_family"], gb["dominant_family"]
    if np.isnan(tca) != np.isnan(tcb) and (fa or fb):
        c = Cite()
        return [c.finding(f"GEMMs: A {_gemm_words(ga, 'A', c)}; B {_gemm_words(gb, 'B', c)}")]
    if np.isnan(tca) or np.isnan(tcb):
        return []
    c = Cite()
    pa, pb = (c("gemm_path", {"side": s}, "tensor_core_pct", v, "pct") for s, v in (("A", tca), ("B", tcb)))
    na, nb = (c("gemm_path", {"side": s}, "dominant_family", v, "text") for s, v in (("A", fa), ("B", fb)))
    if on_tensor_cores(tca) != on_tensor_cores(tcb) and not same_work:
        # another shape picks another kernel: a difference of the work, not a change of path
        text = (
            f"GEMMs: {pb} of B's GEMM time runs on tensor cores ({nb}), {pa} of A's ({na}); the work "
            "differs (or cannot be told the same), and the kernel library picks its path for the shapes "
            "and the device"
        )
    elif on_tensor_cores(tca) != on_tensor_cores(tcb):
        where = ("tensor cores", "CUDA cores") if on_tensor_cores(tca) else ("CUDA cores", "tensor cores")
        text = (
            f"GEMMs moved from {where[0]} ({na}) to {where[1]} ({nb}): tensor-core share of GEMM time "
            f"{pa} {TO} {pb}"
        )
    elif fa != fb and (fa not in gb["families"] or fb not in ga["families"]):
        # a family came or went; the same families in other proportions is no change of family
        path = "tensor cores" if on_tensor_cores(tca) else "CUDA cores"
        sa, sb = (
            c("gemm_path", {"side": s}, "families", families_text(g["families"]), "text")
            for s, g in (("A", ga), ("B", gb))
        )
        change = f"changed from {na} to {nb}" if same_work else f"is {na} in A and {nb} in B"
        text = (
            f"GEMMs run on {path} on both sides ({pa} vs {pb} of GEMM time); "
            f"the main GEMM family {change} (A: {sa}; B: {sb})"
        )
    else:
        return []
    return [c.finding(text)]


def families_text(families: dict, n: int = 3) -> str:
    """The gemm_path table's ``families`` cell: the ``n`` largest with their share of GEMM time."""
    return ", ".join(f"{f} {p:.0f}%" for f, p in list(families.items())[:n]) or "-"


def _gemm_words(g: dict, side: str, c: Cite) -> str:
    if g["dominant_family"] is None:
        return "runs no GEMM kernel"
    family = c("gemm_path", {"side": side}, "dominant_family", g["dominant_family"], "text")
    if np.isnan(g["tensor_core_pct"]):
        return f"GEMMs mostly {family}"
    pct = c("gemm_path", {"side": side}, "tensor_core_pct", g["tensor_core_pct"], "pct")
    return f"{pct} of GEMM time on tensor cores ({family})"


def _precision_findings(A: Region, B: Region) -> list[Finding]:
    """Cites diff's info (``a_precision``, ``a_precision_pct``, B's alike)."""
    pa, pb = precision(A), precision(B)
    if pa and pb and pa[0] != pb[0]:
        c = Cite()
        ((na, sa), (nb, sb)) = (
            (c("info", {}, f"{s}_precision", p[0], "text"), c("info", {}, f"{s}_precision_pct", p[1], "pct"))
            for s, p in (("a", pa), ("b", pb))
        )
        return [c.finding(f"most GPU time runs in {nb} in B ({sb}) but in {na} in A ({sa})")]
    return []


def precision(side: Region) -> tuple[str, float] | None:
    """The precision with the most GPU time and its share of the side's GPU time (percent).
    Worked out once per trace and selection (diff's info and its findings each ask)."""
    return of_region(side, "gpu_precision", _gpu_precision)


def _gpu_precision(side: Region) -> tuple[str, float] | None:
    k = side.activities
    if not len(k) or "precision" not in k.columns:
        return None
    keep = k["precision"].notna().to_numpy()
    if not keep.any():
        return None
    dur = k["dur_ns"][keep]  # the two columns read, not a copy of the activities
    s = dur.groupby(as_text(k["precision"][keep])).sum()
    total = k["dur_ns"].clip(lower=0).sum()
    return (str(s.idxmax()), 100.0 * float(s.max()) / total) if total else None


def _launch_findings(A: Region, B: Region, unit: str) -> list[str]:
    """The host's kernel-launch calls per step (table host_launches: runtime calls, recorded GPU
    activity or not, issue 32 item 4), when they differ by more than 20% or some have no GPU
    activity in the file."""
    ha, hb = host_launches(A), host_launches(B)
    la, lb = float(ha["launches"]), float(hb["launches"])
    rl = ratio(la, lb)
    lost = ha["without_gpu"] or hb["without_gpu"]
    if not (la or lb) or (not lost and not np.isnan(rl) and 0.8 <= rl <= 1.2):
        return []
    c, o = Cite(), "overview"
    cpu = {"metric": "cpu_time_per_step_ns"}
    ma, mb = metrics_of(A), metrics_of(B)

    def cell(side: str, column: str, value, how: str = "count") -> str:
        return c("host_launches", {"side": side}, column, value, how)

    def calls(side: str, h: dict) -> str:
        said = f"{cell(side, 'launch_calls', h['launches'])} kernel-launch calls per {unit}"
        if h["launches"]:
            said += f" ({cell(side, 'by_api', h['apis'], 'text')})"
        if h["without_gpu"]:
            said += (
                f", {cell(side, 'without_gpu', h['without_gpu'])} of them with no GPU activity in the file"
            )
        return said

    return [
        c.finding(
            f"host side: B's host makes {calls('B', hb)}; A's {calls('A', ha)}; CPU time per {unit} "
            f"{c(o, cpu, 'b', mb['cpu_time_per_step_ns'], 'ns')} vs "
            f"{c(o, cpu, 'a', ma['cpu_time_per_step_ns'], 'ns')}"
        )
    ]


def _host_op_findings(ops_t: pd.DataFrame, n: int = 4) -> list[str]:
    """On GPU traces: the CPU ops (by time) that run on one side only."""
    f: list[str] = []
    for here, there, mine, theirs in (("B", "A", "b", "a"), ("A", "B", "a", "b")):
        t = ops_t[(ops_t[f"{theirs}_count"] == 0) & (ops_t[f"{mine}_count"] > 0)]
        t = t.sort_values(f"{mine}_time_ns", ascending=False, kind="stable")
        if len(t):
            c = Cite()
            names = [
                f"{c('cpu_ops', {'op': op}, 'op', op, 'text')} "
                f"({c('cpu_ops', {'op': op}, f'{mine}_time_ns', ns, 'ns')})"
                for op, ns in zip(t["op"].head(n), t[f"{mine}_time_ns"].head(n), strict=True)
            ]
            more = " and more (see cpu_ops)" if len(t) > n else ""
            f.append(
                c.finding(
                    f"host side: {here} runs CPU ops that {there} does not, largest first: "
                    f"{', '.join(names)}{more}"
                )
            )
    return f


# ------------------------------------------------------------------ attention


def _attention_words(st: dict, unit: str, side: str, c: Cite) -> str | None:
    """How a side runs attention: each fused kernel by name with its own count (the attention
    table's rows), else the SDPA op and its backend."""
    if st["kernels"]:
        parts = []
        for backend, v in st["kernels"].items():
            kernels = []
            for name, k in v["names"].items():
                short = short_kernel_name(name)
                key = {"side": side, "backend": backend, "kernel": short}
                count = c("attention", key, "kernels", k["count"], "count")
                kernels.append(
                    f"{count} {c('attention', key, 'kernel', short, 'text')} {_s('kernel', k['count'])}"
                )
            parts.append(f"{listing(kernels, 8)} per {unit} ({domain().backend_word(backend)})")
        return "attention runs as " + " and ".join(parts)
    if st["sdpa_backends"]:
        b = st["sdpa_backends"][0]
        op = st["sdpa_ops"][-1] if b == "math" else st["sdpa_ops"][0]
        if b == "math":
            return (
                f"attention runs unfused ({op}: SDPA math backend, separate matmul/softmax/elementwise ops)"
            )
        return f"attention runs as {op} ({domain().backend_words.get(b, b)})"
    return None


def _attention_findings(aa: dict, ab: dict, unit: str) -> list[Finding]:
    ca, cb = Cite(), Cite()
    wa, wb = _attention_words(aa, unit, "A", ca), _attention_words(ab, unit, "B", cb)
    if wa is None and wb is None:
        return []
    if wa == wb:
        return [ca.finding(f"{wa} on both sides")]
    none = "no fused attention kernel and no SDPA op (attention, if any, runs as separate ops)"
    return [ca.finding(f"A: {wa or none}"), cb.finding(f"B: {wb or none}")]


# ------------------------------------------------------------------ CPU


def _cpu_findings(A, B, ops_t, chains_a, chains_b) -> list[str]:
    f: list[str] = []
    unit = A.per_word
    ma, mb = metrics_of(A), metrics_of(B)
    na, nb = ma["cpu_ops_per_step"], mb["cpu_ops_per_step"]
    ca, cb = ma["cpu_time_per_step_ns"], mb["cpu_time_per_step_ns"]
    c = Cite()

    def o(metric: str, column: str, value, how: str) -> str:
        return c("overview", {"metric": metric}, column, value, how)

    f.append(
        c.finding(
            f"B runs {o('cpu_ops_per_step', 'b', nb, 'count')} CPU ops per {unit} vs "
            f"{o('cpu_ops_per_step', 'a', na, 'count')} in A "
            f"({o('cpu_ops_per_step', 'ratio', ratio(na, nb), 'ratio')}); CPU time per {unit} "
            f"{o('cpu_time_per_step_ns', 'b', cb, 'ns')} vs {o('cpu_time_per_step_ns', 'a', ca, 'ns')} "
            f"({o('cpu_time_per_step_ns', 'ratio', ratio(ca, cb), 'ratio')})"
        )
    )
    only_b = ops_t[(ops_t["a_count"] == 0) & (ops_t["b_count"] > 0)]["op"].tolist()
    only_a = ops_t[(ops_t["b_count"] == 0) & (ops_t["a_count"] > 0)]["op"].tolist()
    order_b, order_a = _first_seen(B), _first_seen(A)
    only_b.sort(key=lambda n: order_b.get(n, 1 << 60))
    only_a.sort(key=lambda n: order_a.get(n, 1 << 60))
    for ops, here, there in ((only_b, "B", "A"), (only_a, "A", "B")):
        if ops:
            c = Cite()
            names = [c("cpu_ops", {"op": op}, "op", op, "text") for op in ops[:12]]
            more = " and more (see cpu_ops)" if len(ops) > 12 else ""
            f.append(c.finding(f"{here} runs {listing(names, 12)}{more} per {unit} that {there} does not"))
    full_a, full_b = chain_table(A), chain_table(B)
    for table, here, there, other in ((chains_a, "A", "B", full_b), (chains_b, "B", "A", full_a)):
        f += _copy_findings(table, other, here, there, unit)
    return f


def _copy_findings(table, other, here: str, there: str, unit: str) -> list[str]:
    """One sentence per outer op whose copy (copy_/clone/_to_copy) happens on one side only.

    A chain counts as present on the other side when some chain there runs the same outer op
    and, somewhere below it, the same copy op (so a changed nesting does not count as a change).
    """
    if table.empty:
        return []
    out: list[str] = []
    seen: set = set()
    other_chains = [c.split(ARROW) for c in other.index] if len(other) else []
    copy_ops = domain().copy_ops
    t = table[table["op"].isin(copy_ops) & table["chain"].str.contains(ARROW, regex=False)]
    t = t.assign(
        rank=t["op"].map({op: i for i, op in enumerate(copy_ops)}), depth=t["chain"].str.count(ARROW)
    )
    t = t.sort_values(["rank", "depth"], ascending=[True, False], kind="stable")
    for row in t.itertuples(index=False):
        parts = row.chain.split(ARROW)
        outer = parts[0]
        if outer in seen or outer in copy_ops:
            continue
        if any(outer in c and c[-1] == row.op and c.index(outer) < len(c) - 1 for c in other_chains):
            continue
        seen.add(outer)
        c, key, name = Cite(), {"chain": row.chain}, f"cpu_only_in_{here.lower()}"
        chain = c(name, key, "chain", row.chain, "text")  # holds the outer op: it is cited first
        out.append(
            c.finding(
                f"{outer} copies ({c(name, key, 'op', row.op, 'text')} under it: {chain}, "
                f"{c(name, key, 'count', row.count, 'count')} per {unit}) in {here}, not in {there}"
            )
        )
        if len(out) == 3:
            break
    return out


def _first_seen(side: Region) -> dict:
    order = np.argsort(side.ops["ts_ns"].to_numpy(), kind="stable")
    codes, values = texts(side.ops["name"])  # the names in order of first start, by their codes
    return {n: i for i, n in enumerate(dict.fromkeys(values[pd.unique(codes[order])]))}


def _same(A: Region, B: Region, kernels, ops_t, chains_a, chains_b) -> bool:
    """Nothing differs: the shared metrics, the per-kernel and per-op tables."""
    ma, mb = metrics_of(A), metrics_of(B)
    same_metrics = all(ma[k] == mb[k] or (ma[k] != ma[k] and mb[k] != mb[k]) for k in ma)
    if not same_metrics or len(chains_a) or len(chains_b):
        return False
    if (ops_t["delta_count"] != 0).any() or (ops_t["delta_time_ns"] != 0).any():
        return False
    if kernels is None:
        return True
    return not (
        len(kernels.only_a)
        or len(kernels.only_b)
        or (kernels.both["delta_time_ns"] != 0).any()
        or (kernels.both["a_count"] != kernels.both["b_count"]).any()
    )


# ------------------------------------------------------------------ exposed time


def exposed_findings(table: pd.DataFrame, unit: str, n: int = 3) -> list[Finding]:
    """The step-time change and the causes that moved it most (diff's ``exposed`` table, per step);
    the wall times are the table's columns summed (its rows add up to them exactly)."""
    a, b = table["a_per_step_ns"].sum(), table["b_per_step_ns"].sum()
    moved = table[table["delta_per_step_ns"] != 0]
    if a == b and not len(moved):
        return []
    top = moved.iloc[np.argsort(-np.abs(moved["delta_per_step_ns"].to_numpy()), kind="stable")[:n]]
    c = Cite()

    def total(column: str, v) -> str:
        c.evidence.append({"table": "exposed", "row": {}, "column": column, "reads": "ns", "sum": True})
        return human(abs(v))

    head = f"wall time per {unit} {total('a_per_step_ns', a)} → {total('b_per_step_ns', b)} "
    head += f"({_sign(b - a)}{total('delta_per_step_ns', b - a)})"
    parts = [
        f"{c('exposed', {'cause': k}, 'cause', k, 'text')} {_sign(d)}"
        f"{c('exposed', {'cause': k}, 'delta_per_step_ns', d, 'ns')} "
        f"({c('exposed', {'cause': k}, 'a_per_step_ns', x, 'ns')} → "
        f"{c('exposed', {'cause': k}, 'b_per_step_ns', y, 'ns')})"
        for k, d, x, y in zip(
            top["cause"], top["delta_per_step_ns"], top["a_per_step_ns"], top["b_per_step_ns"], strict=True
        )
    ]
    return [c.finding(f"{head}; {exposed_words(unit)}, the largest changes: {'; '.join(parts)}")]


def _sign(ns: float) -> str:
    return "+" if ns >= 0 else "-"
