"""``diff(a, b)``: what changed between two traces, normalised per step.

Both traces are narrowed to the same kind of region (every ProfilerStep, one
step, or every span of an annotation, see :mod:`.region`) and every count and
time is divided by the number of regions, so a 5-step trace compares with a
3-step one.

GPU activities are matched across the two sides by a normalised kernel name
(:func:`.names.normalise_kernel_name`), so ``ampere_sgemm_128x64_tn`` in A and
``volta_sgemm_64x32_tn`` in B are the same kernel family; each keeps the chain
of CPU ops that launched it. CPU ops are compared by name and by op chain,
which is all there is to compare in a CPU-only trace. This module builds the
tables; :mod:`.diff_findings` writes the sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...report import Finding, Report
from ..measure import memory, metrics
from ..measure.completeness import completeness_table, incomplete_findings, workload_table
from ..measure.derived import is_text, kept_for_region, texts
from ..measure.efficiency import efficiency_notes, efficiency_table
from ..measure.exposed import diff_table as exposed_diff_table
from ..measure.groups import by_kernel, category_times, chain_table, kernel_key_codes, op_table, trace_labels
from ..measure.registry import metrics_of, numeric
from ..measure.sources import has_stacks
from ..select.region import Region, Selection, region
from ..trace.advise import advice_diff
from ..wording.names import distinct_labels, family_label, kernel_label, short_kernel_name
from ..wording.words import ratio
from .copy_sources import copy_sources
from .diff_findings import diff_findings, exposed_findings, families_text, on_other_work, precision
from .host_launches import host_launch_table
from .workload import verdict as workload_verdict


@dataclass
class KernelDiff:
    """The GPU side of a diff: per-category and per-kernel tables (uncapped) and GEMM stats."""

    by_category: pd.DataFrame
    only_a: pd.DataFrame
    only_b: pd.DataFrame
    both: pd.DataFrame
    ga: dict  # gemm_stats of A
    gb: dict
    merged: pd.DataFrame  # the exact kernels of each key that stands for several (issue 32 item 3)


def diff(
    a, b, sel: Selection | None = None, *, sel_b: Selection | None = None, top: int | None = 20
) -> Report:
    """What changed from trace ``a`` to trace ``b``, per step (or per annotated region).

    ``sel`` narrows both sides (``sel_b`` narrows B differently, e.g. another annotation
    name). ``top`` caps the rows of the per-kernel and per-op tables (None: all rows), keeping
    every row a finding cites; findings always use every row.
    """
    A, B = region(a, sel), region(b, sel_b if sel_b is not None else sel)
    la, lb = trace_labels([a, b])
    kernels = _kernel_diff(A, B) if A.has_gpu or B.has_gpu else None
    aa, ab = metrics.attention(A), metrics.attention(B)
    ops_t = _ops_diff(A, B)
    chains_a, chains_b = _chain_only(A, B)
    tables = _tables(A, B, kernels, aa, ab, ops_t, chains_a, chains_b, None)  # capped at the end
    # the verdict on the work comes first, after any incomplete-trace warning (issue 32)
    judged = workload_verdict(A, B)
    first = [*incomplete_findings([(la, a), (lb, b)]), judged.finding()]
    findings = diff_findings(
        A, B, kernels, aa, ab, ops_t, chains_a, chains_b, work=judged.kind, labels=(la, lb)
    )
    info = _info(a, b, A, B, la, lb, kernels)
    info["per_step_tables"] = ["workload"] + [n for n in tables if n != "overview"]
    info["workload_verdict"], info["workload_evidence"] = judged.kind, judged.evidence
    # comparability first (issue 18): each side's completeness (whole file) and work, before any delta
    done = completeness_table([(la, a), (lb, b)])  # a CPU-only pair has nothing to lose: not shown
    shown = done[["kernel_launches", "gpu_activities"]].to_numpy().any()
    first_tables = {"completeness": done} if shown else {}
    tables = {
        **first_tables,
        "verdict": judged.table(),
        "workload_checks": judged.checks,
        "workload": workload_table([(la, A), (lb, B)]),
        **tables,
    }
    if len(a.memory) or len(b.memory):  # whole traces: the peak is one moment, not per step
        tables["memory"], words = memory.peak_difference(a, b, "A", "B")
        findings += [_cite_names(w) for w in words]
    if has_stacks(a) or has_stacks(b):  # the line each one-sided copy comes from, and its cost (issue 19)
        tables["copy_sources"], words = copy_sources(A, B, chains_a, chains_b)
        findings += words
    advice, words = advice_diff(A, B)  # what is new or worse in B, and what to do about it (issue 34)
    if len(advice):
        tables["advice"] = advice
        findings += words if judged.same else on_other_work(words)  # "worse" on other work: said so
    if kernels is not None:  # totals over the selected steps (exact ns), and per step beside them
        tables["exposed"], exposed_info = exposed_diff_table(A, B)
        info.update(exposed_info)
        findings = exposed_findings(tables["exposed"], A.per_word) + findings
    findings = first + findings  # incomplete data and the verdict on the work before any delta
    tables = _cap_keeping_cited(tables, findings, top)
    notes = list(a.warnings) + list(b.warnings) + A.notes + B.notes
    if len(a.memory) or len(b.memory):  # one side without: say so, once
        notes += [f"{t.label}: {memory.NO_MEMORY}" for t in (a, b) if not len(t.memory)]
    if kernels is not None:  # rates, not per-step numbers
        tables["efficiency"] = efficiency_table([(la, A), (lb, B)])
        notes += efficiency_notes(a) + efficiency_notes(b)
    notes = [n for n in notes if n not in set(map(str, findings))]  # a warning said as a finding once
    return Report(
        kind="diff",
        title=f"Diff: A = {la} vs B = {lb} (per {A.per_word})",
        tables=tables,
        findings=findings,
        info=info,
        notes=notes,
    )


def _cite_names(f: str) -> Finding:
    """A sentence that says A and B (the title is their legend; a label such as
    ``log__bfeed93fe629_2566.1773933981558265129`` read badly in a sentence, issue 32 item 8)
    cites info ``a_name``/``b_name``, not the labels."""
    names = {"a_label": "a_name", "b_label": "b_name"}
    evidence = [
        {**e, "column": names[e["column"]]} if e["table"] == "info" and e["column"] in names else e
        for e in getattr(f, "evidence", ())
    ]
    return Finding(str(f), evidence)


def _kernel_diff(A: Region, B: Region) -> KernelDiff:
    only_a, only_b, both = _only(named_kernels(A), named_kernels(B))
    merged = _merged_kernels(A, B)
    return KernelDiff(_by_category(A, B), only_a, only_b, both, gemm_stats(A), gemm_stats(B), merged)


def exact_kernels(r: Region) -> pd.DataFrame:
    """Per matching key and exact kernel name: count and time per step, largest time first. A key
    (``normalise_kernel_name``) matches kernels across tiles, templates and dtypes, so one key may
    stand for several kernels; this table names each with its own figures. Worked out once per
    trace and selection, and kept in a cached trace's entry (a warm diff normalises no name)."""
    return kept_for_region(r, "exact_kernels", _exact_kernels).copy()


def named_kernels(r: Region) -> pd.DataFrame:
    """``by_kernel`` with each key's ``kernels`` and ``label`` (``_named``), kept as
    ``exact_kernels`` is: a warm diff reads the readable names instead of working them out."""
    return kept_for_region(r, "named_kernels", lambda r: _named(by_kernel(r), exact_kernels(r))).copy()


def _exact_kernels(r: Region) -> pd.DataFrame:
    k = r.activities
    (key, keys), (name, names) = kernel_key_codes(k), texts(k["name"])
    f = pd.DataFrame({"key": key, "name": name, "dur": k["dur_ns"].clip(lower=0).to_numpy()})
    g = f.groupby(["key", "name"], sort=False)["dur"]  # on the codes; the texts looked up after
    out = pd.DataFrame({"count": r.per_region_count(g.size()), "time_ns": g.sum() / r.regions}).reset_index()
    out["key"], out["name"] = keys[out["key"].to_numpy(np.int64)], names[out["name"].to_numpy(np.int64)]
    return out.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)


def _named(side: pd.DataFrame, exact: pd.DataFrame) -> pd.DataFrame:
    """``by_kernel``'s rows with ``kernels``: how many exact kernel names each key stands for, and
    ``label``: the one kernel's readable name, or ``3 kernels: <family>`` (never one name for several)."""
    names = exact.groupby("key")["name"].agg(list)
    side = side.assign(kernels=side["key"].map(names.map(len)).fillna(1).astype(np.int64).to_numpy())
    side["label"] = [
        kernel_label(e) if m <= 1 else f"{m} kernels: {family_label(names[key])}"
        for key, e, m in zip(side["key"], side["example"], side["kernels"], strict=True)
    ]
    return side


def _merged_kernels(A: Region, B: Region) -> pd.DataFrame:
    """Table ``merged_kernels``: each exact kernel of a key that stands for several on its side,
    with its own count and time per step (``side`` A or B)."""
    parts = []
    for side, r in (("A", A), ("B", B)):
        many = kept_for_region(r, "merged_kernels", lambda r: _several(exact_kernels(r)))
        parts.append(pd.DataFrame({"side": side, **{c: many[c].to_numpy() for c in many.columns}}))
    return pd.concat(parts, ignore_index=True)


def _several(e: pd.DataFrame) -> pd.DataFrame:
    """One side's rows of ``merged_kernels`` (but ``side``), from its ``exact_kernels``; kept as
    ``exact_kernels`` is, so a warm diff reads their labels instead of working them out."""
    many = e[e["key"].map(e.groupby("key").size()).to_numpy() > 1]
    return pd.DataFrame(
        {
            "match_key": many["key"].astype(str).to_numpy(),
            "kernel": distinct_labels(list(many["name"])),
            "name": many["name"].to_numpy(),
            "count": many["count"].to_numpy(),
            "time_ns": many["time_ns"].to_numpy(),
        }
    )


def gemm_stats(r: Region) -> dict:
    """GEMM time and kernels per step, share of GPU time, tensor-core share, families by time."""
    gemm_ns, gpu_ns = metrics.gemm_time_ns(r), metrics.gpu_time_ns(r)
    families = metrics.gemm_families(r)
    return {
        "gemm_time_ns": gemm_ns / r.regions,
        "gemm_kernels": r.per_region_count(
            int(is_text(r.activities["category"], "gemm").sum()) if r.has_gpu else 0
        ),
        "gemm_pct_time": 100.0 * gemm_ns / gpu_ns if gpu_ns else float("nan"),
        "tensor_core_pct": metrics.tensor_core_pct(r),
        "families": families,
        "dominant_family": next(iter(families), None),
    }


def _tables(A, B, kernels, aa, ab, ops_t, chains_a, chains_b, top) -> dict[str, pd.DataFrame]:
    tables = {"overview": _overview(A, B)}
    if kernels is not None:
        tables["by_category"] = kernels.by_category
        tables["only_in_a"] = _cap(kernels.only_a, top)
        tables["only_in_b"] = _cap(kernels.only_b, top)
        tables["by_kernel"] = _cap(kernels.both, top)
        if len(kernels.merged):  # the kernels behind a row that stands for several
            tables["merged_kernels"] = kernels.merged
        tables["gemm_path"] = _gemm_table(A, B, kernels.ga, kernels.gb)
        tables["host_launches"] = host_launch_table([("A", A.label, A), ("B", B.label, B)])
    if kernels is not None or aa["sdpa_ops"] or ab["sdpa_ops"]:
        tables["attention"] = _attention_table(A, B, aa, ab)
    tables["cpu_ops"] = _cap(ops_t, top)
    tables["cpu_only_in_a"] = _cap(chains_a, top)
    tables["cpu_only_in_b"] = _cap(chains_b, top)
    return tables


#: the long tables ``top`` cuts
CAPPED = ("only_in_a", "only_in_b", "by_kernel", "cpu_ops", "cpu_only_in_a", "cpu_only_in_b")


def _cap_keeping_cited(tables: dict, findings, top: int | None) -> dict:
    """The long tables cut to their first ``top`` rows, and every row a finding cites kept (in
    its place), so each figure of a sentence can be found in the JSON (issue 18 item 3)."""
    if top is None:
        return tables
    for name in CAPPED:
        if name not in tables:
            continue
        df = tables[name]
        keep = np.arange(len(df)) < top
        for e in (e for f in findings for e in getattr(f, "evidence", ())):
            if e["table"] == name and e["row"]:
                keep |= np.logical_and.reduce([(df[k] == v).to_numpy() for k, v in e["row"].items()])
        tables[name] = df[keep].reset_index(drop=True)
    return tables


def _info(a, b, A: Region, B: Region, la: str, lb: str, kernels) -> dict:
    ma, mb = metrics_of(A), metrics_of(B)
    info = {
        "a": a.path,
        "b": b.path,
        "a_label": la,
        "b_label": lb,
        "a_name": "A",  # how the sentences name the two sides; the title is their legend
        "b_name": "B",
        "a_device": a.device_name,
        "b_device": b.device_name,
        "selection": A.selection.describe()
        + (f"; B: {B.selection.describe()}" if B.selection != A.selection else ""),
        "per": A.per_word,
        "normalised_by": f"{A.region_kind}: {A.regions} in A, {B.regions} in B",
    }
    if kernels is not None:
        info.update(
            {
                "a_gpu_time_per_step_ns": ma["gpu_time_per_step_ns"],
                "b_gpu_time_per_step_ns": mb["gpu_time_per_step_ns"],
                "ratio_gpu_time": ratio(ma["gpu_time_per_step_ns"], mb["gpu_time_per_step_ns"]),
                "a_kernels_per_step": ma["kernels_per_step"],
                "b_kernels_per_step": mb["kernels_per_step"],
                "ratio_kernels": ratio(ma["kernels_per_step"], mb["kernels_per_step"]),
            }
        )
    info.update(
        {
            "a_cpu_time_per_step_ns": ma["cpu_time_per_step_ns"],
            "b_cpu_time_per_step_ns": mb["cpu_time_per_step_ns"],
            "a_cpu_ops_per_step": ma["cpu_ops_per_step"],
            "b_cpu_ops_per_step": mb["cpu_ops_per_step"],
            "a_attention_backend": ma["attention_backend"],
            "b_attention_backend": mb["attention_backend"],
        }
    )
    if kernels is not None:
        for side, r in (("a", A), ("b", B)):  # what the precision sentence cites
            p = precision(r)
            info[f"{side}_precision"], info[f"{side}_precision_pct"] = p if p else (None, float("nan"))
        info["only_in_a_total"] = len(kernels.only_a)
        info["only_in_b_total"] = len(kernels.only_b)
    return info


def _merge(a: pd.DataFrame, b: pd.DataFrame, key: str) -> pd.DataFrame:
    """Both sides by ``key``, a row missing on one side counting 0 there. An outer join turns
    integer columns into floats (NaN for the missing side): those come back as int64."""
    m = a.add_prefix("a_").join(b.add_prefix("b_"), how="outer").fillna(0)
    whole = [
        p + c
        for c in a.columns
        if c in b.columns and a[c].dtype.kind in "iu" and b[c].dtype.kind in "iu"
        for p in ("a_", "b_")
    ]
    m = m.astype({c: np.int64 for c in whole})
    m.index.name = key
    return m.reset_index()


def _cap(df: pd.DataFrame, top: int | None) -> pd.DataFrame:
    return df.reset_index(drop=True) if top is None else df.head(top).reset_index(drop=True)


def _overview(A: Region, B: Region) -> pd.DataFrame:
    """One row per metric the registry shows in the diff overview, by its one name."""
    ma, mb = metrics_of(A), metrics_of(B)
    names = numeric(A.has_gpu or B.has_gpu)
    a = [float(ma[n]) for n in names]
    b = [float(mb[n]) for n in names]
    return pd.DataFrame(
        {
            "metric": names,
            "a": a,
            "b": b,
            "delta": [y - x for x, y in zip(a, b, strict=True)],
            "ratio": [ratio(x, y) for x, y in zip(a, b, strict=True)],
        }
    )


def _by_category(A: Region, B: Region) -> pd.DataFrame:
    m = _merge(category_times(A), category_times(B), "category")
    out = pd.DataFrame(
        {
            "category": m["category"].astype(str),
            "a_count": m["a_count"],
            "b_count": m["b_count"],
            "delta_count": m["b_count"] - m["a_count"],
            "ratio_count": [ratio(x, y) for x, y in zip(m["a_count"], m["b_count"], strict=True)],
            "a_time_ns": m["a_time_ns"],
            "b_time_ns": m["b_time_ns"],
            "delta_time_ns": m["b_time_ns"] - m["a_time_ns"],
            "ratio_time": [ratio(x, y) for x, y in zip(m["a_time_ns"], m["b_time_ns"], strict=True)],
        }
    )
    order = np.maximum(out["a_time_ns"].to_numpy(), out["b_time_ns"].to_numpy())
    return out.iloc[np.argsort(-order, kind="stable")].reset_index(drop=True)


def _only(ka: pd.DataFrame, kb: pd.DataFrame):
    """Kernels on one side only, and on both; matched on ``match_key``
    (:func:`.names.normalise_kernel_name`), shown by ``kernel``: the readable name of the key's one
    kernel (:func:`.names.kernel_label`), or ``N kernels: <family>`` where ``kernels`` > 1."""
    cols = ["kernel", "kernels", "category", "kind", "count", "time_ns", "launched_by", "example"]
    cols.append("match_key")

    def side_only(x, y):
        o = x[~x["key"].isin(set(y["key"]))].copy()
        o["launched_by"] = [
            c if n <= 1 else f"{c} (+{n - 1} other chain{'s' if n > 2 else ''})"
            for c, n in zip(o["launched_by"], o["chains"], strict=True)
        ]
        o["kernel"] = o["label"]  # one kernel's readable name, or "N kernels: <family>"
        o = o.rename(columns={"key": "match_key"}).sort_values("time_ns", ascending=False, kind="stable")
        return o[cols].reset_index(drop=True)

    only_a, only_b = side_only(ka, kb), side_only(kb, ka)
    return only_a, only_b, _both(ka, kb)


def _both(ka: pd.DataFrame, kb: pd.DataFrame) -> pd.DataFrame:
    """Kernels on both sides, largest change first. ``kernel``: A's readable name, or
    ``A's → B's`` when the two sides' names read differently (``ampere_sgemm_128x64_tn →
    volta_sgemm_64x32_tn``)."""
    side = ["key", "count", "time_ns", "category", "example", "kernels", "label"]
    m = ka[side].merge(kb[side], on="key", how="inner", suffixes=("_a", "_b"))
    la, lb = m["label_a"], m["label_b"]
    both = pd.DataFrame(
        {
            "kernel": [x if x == y else f"{x} → {y}" for x, y in zip(la, lb, strict=True)],
            "a_kernels": m["kernels_a"].to_numpy(),
            "b_kernels": m["kernels_b"].to_numpy(),
            "category": m["category_a"].to_numpy(),
            "a_count": m["count_a"].to_numpy(),
            "b_count": m["count_b"].to_numpy(),
            "a_time_ns": m["time_ns_a"].to_numpy(),
            "b_time_ns": m["time_ns_b"].to_numpy(),
        }
    )
    both["delta_time_ns"] = both["b_time_ns"] - both["a_time_ns"]
    both["ratio_time"] = [ratio(x, y) for x, y in zip(both["a_time_ns"], both["b_time_ns"], strict=True)]
    both["a_example"], both["b_example"] = m["example_a"].to_numpy(), m["example_b"].to_numpy()
    both["match_key"] = m["key"].astype(str).to_numpy()
    return both.iloc[np.argsort(-np.abs(both["delta_time_ns"].to_numpy()), kind="stable")].reset_index(
        drop=True
    )


def _gemm_table(A: Region, B: Region, ga: dict, gb: dict) -> pd.DataFrame:
    rows = []
    for name, side, g in (("A", A, ga), ("B", B, gb)):
        rows.append(
            {
                "side": name,
                "trace": side.label,
                "gemm_kernels": g["gemm_kernels"],
                "gemm_time_ns": g["gemm_time_ns"],
                "gemm_pct_time": g["gemm_pct_time"],
                "tensor_core_pct": g["tensor_core_pct"],
                "dominant_family": g["dominant_family"] or "-",
                "families": families_text(g["families"]),
            }
        )
    return pd.DataFrame(rows)


def _attention_table(A: Region, B: Region, aa: dict, ab: dict) -> pd.DataFrame:
    rows = []
    for name, side, st in (("A", A, aa), ("B", B, ab)):
        sdpa = ", ".join(st["sdpa_ops"]) or "-"
        if st["kernels"]:
            for backend, v in st["kernels"].items():  # one row per kernel name (split-KV: two)
                for kernel, k in v["names"].items():
                    rows.append(
                        {
                            "side": name,
                            "trace": side.label,
                            "backend": backend,
                            "kernels": k["count"],
                            "time_ns": k["time_ns"],
                            "kernel": short_kernel_name(kernel),
                            "sdpa_op": sdpa,
                        }
                    )
        else:
            backend = ("unfused: " + ", ".join(st["sdpa_backends"])) if st["sdpa_backends"] else "none"
            rows.append(
                {
                    "side": name,
                    "trace": side.label,
                    "backend": backend,
                    "kernels": 0,
                    "time_ns": 0.0,
                    "kernel": "-",
                    "sdpa_op": sdpa,
                }
            )
    return pd.DataFrame(rows)


def _ops_diff(A: Region, B: Region) -> pd.DataFrame:
    m = _merge(op_table(A), op_table(B), "op")
    out = pd.DataFrame(
        {
            "op": m["op"].astype(str),
            "a_count": m["a_count"],
            "b_count": m["b_count"],
            "delta_count": m["b_count"] - m["a_count"],
            "a_time_ns": m["a_time_ns"],
            "b_time_ns": m["b_time_ns"],
            "delta_time_ns": m["b_time_ns"] - m["a_time_ns"],
            "ratio_time": [ratio(x, y) for x, y in zip(m["a_time_ns"], m["b_time_ns"], strict=True)],
        }
    )
    key = np.lexsort((-np.abs(out["delta_time_ns"].to_numpy()), -np.abs(out["delta_count"].to_numpy())))
    return out.iloc[key].reset_index(drop=True)


def _chain_only(A: Region, B: Region):
    ca, cb = chain_table(A), chain_table(B)

    def only(x, y):
        o = x[~x.index.isin(y.index)]
        o = o.rename_axis("chain").reset_index()[["chain", "op", "count", "time_ns"]]
        return o.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)

    return only(ca, cb), only(cb, ca)
