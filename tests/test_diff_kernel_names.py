"""A kernel name stands for one kernel (issue 32 item 3).

diff matches kernels across the two sides by a normalised key, which joins tiles, template
arguments and dtypes: one row may stand for several kernels. Every count a finding cites for a
kernel is checked here against a plain-json recount of that exact name (the kernels launched
inside a ProfilerStep, per step; the whole file when it has none); a row that stands for several
kernels must say how many, and its kernels are each in table merged_kernels with their own counts.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import pytest
from corpus import CORPUS, SKIP_REASON

import traceview as tv

PAIRS = [
    ("hta/trace_diff__control__control.json.gz", "hta/trace_diff__test__test.json.gz"),
    (
        "torch_profiling_tutorial/log_transformer__dc3b0e7228dd_851.1752215573993169006.pt.trace.json.gz",
        "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
    ),
    (
        "param/dlrm_kineto__worker0_step_12.1694128201545.pt.trace.json.gz",
        "param/dlrm_kineto__worker3_step_12.1694128201557.pt.trace.json.gz",
    ),
    (
        "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
        "tracelens/h100__Falconsai_nsfw_image_detection__1016002.json.gz",
    ),
    (
        "tracelens/b300__moe_01_many_experts_few_tokens.json.gz",
        "tracelens/b300__moe_05_large_capacity.json.gz",
    ),
    ("hta/negative_queue_length_values_check__rank0.json.gz", "hta/trace_filter__sampled_rank-0.json.gz"),
    (
        "kineto/tb_plugin_samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz",
        "param/et_replay__resnet_kineto.json.gz",
    ),
]
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
RUNTIME_CATS = {"cuda_runtime", "runtime", "cuda_driver"}
STEP = re.compile(r"^ProfilerStep#\d+$")
STEP_CATS = {"user_annotation", "cpu_op", "operator"}  # a 2021 trace's step is an Operator
needs = pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)


def recount(path) -> tuple[Counter, int]:
    """Per exact name, the GPU activities whose launch lies in a ProfilerStep (all, without steps),
    and the number of steps: plain json, no traceview."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    events = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    steps = [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in events
        if str(e.get("cat", "")).lower() in STEP_CATS and STEP.match(str(e.get("name")))
    ]
    launched: dict = {}
    for e in events:
        if str(e.get("cat", "")).lower() in RUNTIME_CATS and "correlation" in (e.get("args") or {}):
            launched.setdefault(e["args"]["correlation"], float(e["ts"]))
    counts: Counter = Counter()
    for e in events:
        if str(e.get("cat", "")).lower() not in GPU_CATS:
            continue
        t = launched.get((e.get("args") or {}).get("correlation"))
        if steps and (t is None or not any(a <= t <= b for a, b in steps)):
            continue
        counts[e["name"]] += 1
    return counts, max(len(steps), 1)


def _row(table, key: dict):
    rows = table[[all(table[k].iloc[i] == v for k, v in key.items()) for i in range(len(table))]]
    assert len(rows) == 1, (key, len(rows))
    return rows.iloc[0]


def _named_kernel(table_name: str, row, column: str) -> tuple[str, str, int]:
    """(side, exact name, how many kernels the row stands for on that side) for a cited count."""
    if table_name == "merged_kernels":
        return row["side"], row["name"], 1
    if table_name in ("only_in_a", "only_in_b"):
        return table_name[-1].upper(), row["example"], int(row["kernels"])
    side = column[0]  # by_kernel's a_count / b_count
    return side.upper(), row[f"{side}_example"], int(row[f"{side}_kernels"])


@needs
@pytest.mark.parametrize(
    "pair", PAIRS, ids=lambda p: p[0].split("/")[-1][:24] + "-" + p[1].split("/")[-1][:24]
)
def test_every_kernel_count_a_finding_cites_is_that_exact_kernels(pair):
    paths = [CORPUS / p for p in pair]
    plain = dict(zip("AB", (recount(p) for p in paths), strict=True))
    r = tv.diff(*(tv.load(p) for p in paths), top=None)
    checked = 0
    for f in r.findings:
        for e in f.evidence:
            if e["table"] not in ("only_in_a", "only_in_b", "by_kernel", "merged_kernels"):
                continue
            if e["column"] not in ("count", "a_count", "b_count"):
                continue
            row = _row(r[e["table"]], e["row"])
            side, name, several = _named_kernel(e["table"], row, e["column"])
            if several > 1:  # a row for several kernels says so, and lists them from merged_kernels
                assert f"{several} kernels: " in f, f
                merged = r["merged_kernels"]
                mine = merged[
                    (merged["side"] == side).to_numpy() & (merged["match_key"] == row["match_key"]).to_numpy()
                ]
                assert len(mine) == several
                counts, steps = plain[side]
                assert row[e["column"]] == pytest.approx(sum(counts[n] for n in mine["name"]) / steps)
                continue
            counts, steps = plain[side]
            assert row[e["column"]] == pytest.approx(counts[name] / steps), (f, name)
            checked += 1
    assert checked or not any(e["table"] == "merged_kernels" for f in r.findings for e in f.evidence)


@needs
def test_the_merged_cutlass_row_lists_its_kernels():
    """The control trace's cutlass s1688 nt family is 19 kernels: the row says so, and each is in
    merged_kernels with its own count, which add up to the row's."""
    a, b = (tv.load(CORPUS / p) for p in PAIRS[0])
    r = tv.diff(a, b, top=None)
    only_a = r["only_in_a"].set_index("match_key")
    key = "cutlass::Kernel<cutlass_N_tensorop_sNgemm_NxN_NxN_nt_alignN>"
    counts, _ = recount(CORPUS / PAIRS[0][0])
    names = {n for n in counts if re.search(r"cutlass_80_tensorop_s1688gemm_\w+_nt_align\d", n)}
    assert only_a.loc[key, "kernels"] == len(names) > 1
    assert only_a.loc[key, "kernel"].startswith(f"{len(names)} kernels: ")
    merged = r["merged_kernels"]
    mine = merged[(merged["match_key"] == key).to_numpy()]
    assert set(mine["name"]) == names
    assert mine["count"].sum() == pytest.approx(only_a.loc[key, "count"])
    said = next(f for f in r.findings if f.startswith(f"{len(names)} kernels: "))
    assert " run only in A" in said or " are gone in B" in said
