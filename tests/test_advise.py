"""``traceview advise`` / ``tv.advise`` (issue 34): each rule fires where its pattern is, with figures
re-derived from plain json, never where it is not, and its time at stake never exceeds the exposed
time of its cause."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON, corpus_params

import traceview.api as tv
from traceview import load
from traceview.analyses.select.region import region
from traceview.analyses.trace.advise import CPU, Facts, rules, sdpa_reasons
from traceview.cli import main

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"


def events(path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    return [e for e in doc["traceEvents"] if isinstance(e, dict)]


def _ns(us) -> int:
    return int(Decimal(str(us)) * 1000)


def steps(evs) -> list[tuple[int, int]]:
    return [
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
        for e in evs
        if str(e.get("name", "")).startswith("ProfilerStep#")
    ]


def direct_parent(evs, child: dict) -> dict | None:
    """The innermost CPU op on the child's thread whose span holds the child's: a plain recount
    of the op tree, not traceview's."""
    lo, hi = _ns(child["ts"]), _ns(child["ts"]) + _ns(child["dur"])
    around = [
        e
        for e in evs
        if e.get("cat") == "cpu_op" and e is not child and e.get("tid") == child.get("tid")
        and _ns(e["ts"]) <= lo and _ns(e["ts"]) + _ns(e["dur"]) >= hi
    ]  # fmt: skip
    return min(around, key=lambda e: _ns(e["dur"]), default=None)


def rows(report, rule: str):
    a = report["advice"]
    return a[a["rule"] == rule]


# ------------------------------------------------------------------ the sample traces


def test_naive_copy_advice_matches_a_plain_recount():
    path = SAMPLES / "naive.json.gz"
    r = tv.advise(path)
    got = rows(r, "out-of-place-copy")
    assert len(got) == 1, r["advice"]
    evs = events(path)
    spans = steps(evs)
    clones = [
        e for e in evs
        if e.get("name") == "aten::clone" and any(lo <= _ns(e["ts"]) < hi for lo, hi in spans)
        and (direct_parent(evs, e) or {}).get("name") == "aten::masked_fill"
    ]  # fmt: skip
    assert clones, "the sample's masked_fill copies"
    # the copy's own bytes: [memory] events on the clone's thread inside its span, not masked_fill's
    inside = [
        m["args"]["Bytes"] for m in evs for c in clones
        if m.get("name") == "[memory]" and m.get("tid") == c.get("tid") and m["args"]["Bytes"] > 0
        and _ns(c["ts"]) <= _ns(m["ts"]) <= _ns(c["ts"]) + _ns(c["dur"])
    ]  # fmt: skip
    row = got.iloc[0]
    assert row["bytes_per_step"] == sum(inside) / len(spans)
    assert row["stake_ns_per_step"] == sum(_ns(c["dur"]) for c in clones) / len(spans)
    assert row["count_per_step"] == len(clones) / len(spans)
    assert row["bound"] == CPU and row["source"].startswith("collectors/attention.py:")
    # the line to edit: masked_fill's line inside _naive, read here as plain text (issue 36)
    text = (SAMPLES.parent / "collectors" / "attention.py").read_text(encoding="utf-8").splitlines()
    line = int(row["source"].split(":")[1].split()[0])
    assert ".masked_fill(" in text[line - 1] and row["line_from"] == "source"
    assert "aten::masked_fill_" in row["do"]
    assert r.findings[0].startswith("aten::masked_fill copies its input")


def test_naive_inplace_gets_no_copy_advice():
    assert rows(tv.advise(SAMPLES / "naive_inplace.json.gz", min_pct=0), "out-of-place-copy").empty


def test_sdpa_math_advice_says_the_backend_and_what_the_trace_cannot_tell():
    r = tv.advise(SAMPLES / "sdpa_math.json.gz")
    got = rows(r, "sdpa-math-backend")
    assert len(got) == 1
    assert "math backend" in got.iloc[0]["what"] and "not in the trace" in got.iloc[0]["what"]
    for other in ("naive.json.gz", "sdpa_flash.json.gz", "sdpa_auto.json.gz"):
        assert rows(tv.advise(SAMPLES / other, min_pct=0), "sdpa-math-backend").empty, other


def test_rules_that_cannot_run_say_why():
    r = tv.advise(SAMPLES / "naive.json.gz")
    st = r["rules"].set_index("rule")
    assert not st.loc["host-sync", "ran"] and st.loc["host-sync", "why_not"] == "no GPU activity"
    assert any("could not run" in n and "host-sync" in n for n in r.notes)
    assert len(st) == len(rules().rule)


def test_cli_prints_what_the_api_returns(tmp_path):
    out = CliRunner().invoke(main, ["advise", str(SAMPLES / "naive.json.gz"), "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    api = tv.advise(SAMPLES / "naive.json.gz")
    assert doc["findings"] == [str(f) for f in api.findings]
    assert [r["rule"] for r in doc["tables"]["advice"]] == api["advice"]["rule"].tolist()


# ------------------------------------------------------------------ torch's own dispatcher


def test_cpu_sdpa_reasons_agree_with_torchs_dispatcher(tmp_path):
    """Where the advice says nothing recorded excludes the CPU flash backend, torch's dispatcher
    (unpinned) picks it; where it names a reason, torch picks math."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    from torch.profiler import profile

    q = torch.randn(1, 2, 64, 32)
    mask = torch.ones(64, 64, dtype=torch.bool).tril()
    cases = [
        ({"is_causal": True}, torch.float32),
        ({"attn_mask": mask}, torch.bfloat16),
        ({"attn_mask": mask, "dropout_p": 0.1}, torch.float32),
        ({"is_causal": True, "dropout_p": 0.1}, torch.float64),
    ]
    for i, (kw, dtype) in enumerate(cases):
        with profile(record_shapes=True) as p:
            F.scaled_dot_product_attention(q.to(dtype), q.to(dtype), q.to(dtype), **kw)
        path = tmp_path / f"case{i}.json"
        p.export_chrome_trace(str(path))
        picked_math = any(e.name == "aten::_scaled_dot_product_attention_math" for e in p.events())

        t = load(str(path), cache=False)
        op = t.ops[t.ops["name"] == "aten::scaled_dot_product_attention"].iloc[0]
        said = sdpa_reasons(
            op, next(x for x in rules().rule if x.id == "sdpa-math-backend"), Facts(region(t))
        )
        assert picked_math == ("no recorded argument" not in said), (kw, dtype, said)


# ------------------------------------------------------------------ the corpus, both ways


def _cat(e: dict) -> str:
    return str(e.get("cat", "")).lower()  # older traces write Kernel, Memcpy


#: what each rule's pattern is in plain json: (event filter) -> present
COMM = re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device", re.I)
PATTERNS = {
    "pageable-memcpy": lambda e: (
        "Pageable" in str(e.get("name", "")) and "memcpy" in str(e.get("cat", "")).lower()
    ),
    "host-sync": lambda e: "Synchronize" in str(e.get("name", "")),
    "exposed-communication": lambda e: _cat(e) == "kernel" and bool(COMM.search(str(e.get("name", "")))),
    "sdpa-math-backend": lambda e: e.get("name") == "aten::_scaled_dot_product_attention_math",
    "launch-bound": lambda e: _cat(e) in ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"),
    "fp32-gemm-on-cuda-cores": lambda e: _cat(e) == "kernel" and "gemm" in str(e.get("name", "")).lower(),
    "out-of-place-copy": lambda e: e.get("name") in ("aten::clone", "aten::copy_"),
}


@pytest.mark.parametrize("path", corpus_params())
def test_no_rule_fires_without_its_pattern_and_stake_stays_under_its_cause(path):
    r = tv.advise(path, min_pct=0)
    evs = events(path)
    fired = set(r["advice"]["rule"])
    for rule, present in PATTERNS.items():
        if rule in fired:
            assert any(present(e) for e in evs), f"{rule} fired on {path.name} without its pattern"
    exposed = tv.exposed(path)["exposed"].set_index("cause")["per_step_ns"]
    compute = exposed[[c for c in exposed.index if c.startswith("compute: ")]].sum()
    for row in r["advice"].itertuples(index=False):
        if row.bound == CPU:
            continue
        causes = row.bound.split(" + ")
        cap = compute if row.bound.startswith("compute (") else sum(exposed.get(c, 0) for c in causes)
        assert row.stake_ns_per_step <= cap + 1e-6, (row.rule, row.stake_ns_per_step, cap)


@pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)
@pytest.mark.parametrize(
    ("rel", "rule"),
    [
        ("param/et_replay__resnet_kineto.json.gz", "pageable-memcpy"),
        (
            "kineto/tb_plugin_samples__resnet50_autograd_api_num_workers_0__worker0.pt.trace.json.gz",
            "host-sync",
        ),
        ("hta/trace_diff__control__control.json.gz", "fp32-gemm-on-cuda-cores"),
        ("switchtransformers/trace.json.gz", "fp32-gemm-on-cuda-cores"),
        ("param/dlrm_kineto__worker1_step_12.1694128201556.pt.trace.json.gz", "exposed-communication"),
    ],
)
def test_each_rule_fires_on_a_corpus_trace_with_its_pattern(rel, rule):
    path = CORPUS / rel
    got = rows(tv.advise(path), rule)
    assert len(got) == 1, f"{rule} on {rel}"
    assert got.iloc[0]["stake_ns_per_step"] > 0 and got.iloc[0]["doc"].startswith("https://")


@pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)
def test_pageable_copies_are_counted_as_plain_json_counts_them():
    path = CORPUS / "param/et_replay__resnet_kineto.json.gz"
    evs = events(path)
    spans = steps(evs) or [(0, 1 << 62)]
    plain = [e for e in evs if PATTERNS["pageable-memcpy"](e)]
    t = load(path)
    # a copy counts in the step its launch falls in: the runtime call with the same correlation
    launch = {
        e["args"]["correlation"]: _ns(e["ts"])
        for e in evs
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    counted = [
        e for e in plain if any(lo <= launch.get(e["args"].get("correlation"), -1) < hi for lo, hi in spans)
    ]
    got = rows(tv.advise(t, min_pct=0), "pageable-memcpy").iloc[0]
    assert got["count_per_step"] * len(spans) == pytest.approx(len(counted))


# ------------------------------------------------------------------ GPU traces built by hand (tests/synth.py)


def _synth(tmp_path, variant: str) -> str:
    import synth

    return synth.write(tmp_path / f"{variant}.json.gz", synth.attention_trace(variant))


def test_gpu_copy_stake_is_the_copy_kernels_time_capped_by_its_cause(tmp_path):
    path = _synth(tmp_path, "naive")
    evs = events(path)
    clones = [e for e in evs if e.get("name") == "aten::clone"]
    ids = {
        e["args"]["External id"]
        for c in clones
        for e in evs
        if e.get("cat") == "cpu_op" and _ns(c["ts"]) <= _ns(e["ts"]) <= _ns(c["ts"]) + _ns(c["dur"])
    }
    gpu = sum(
        _ns(e["dur"])
        for e in evs
        if e.get("cat") in ("kernel", "gpu_memcpy") and e["args"].get("External id") in ids
    )
    n = len(steps(evs))
    cap = tv.exposed(path)["exposed"].set_index("cause")["per_step_ns"]
    row = rows(tv.advise(path, min_pct=0), "out-of-place-copy").iloc[0]
    assert gpu > 0 and row["bound"]
    assert row["stake_ns_per_step"] == min(gpu / n, sum(cap[c] for c in row["bound"].split(" + ")))
    assert row["stake_ns_per_step"] > 0
    assert rows(tv.advise(_synth(tmp_path, "naive_inplace"), min_pct=0), "out-of-place-copy").empty


def test_gpu_math_backend_and_fp32_gemms_per_step(tmp_path):
    import synth

    path = _synth(tmp_path, "sdpa_math")
    r = tv.advise(path)
    math = rows(r, "sdpa-math-backend").iloc[0]["what"]
    assert "no shapes recorded" in math  # the synthetic trace has none: nothing is guessed
    assert f"it launches {synth.EXPECTED_PER_STEP['sdpa_math']} GPU activities" in math
    evs = events(path)
    simt = sum(e.get("cat") == "kernel" and e["name"] in (synth.GEMM_SIMT, synth.GEMM_SIMT_2) for e in evs)
    fp32 = rows(r, "fp32-gemm-on-cuda-cores").iloc[0]
    assert fp32["count_per_step"] * len(steps(evs)) == simt
    assert rows(tv.advise(_synth(tmp_path, "sdpa_efficient"), min_pct=0), "sdpa-math-backend").empty


def _mm_trace(tmp_path, dims, dtype="c10::BFloat16") -> str:
    import synth

    b = synth.Builder()
    for n in range(3):
        b.step(n, [synth.op("aten::mm", kernels=[(synth.GEMM_TC, 50.0)])])
    for e in b.events:
        if e["name"] == "aten::mm":
            e["args"].update({"Input Dims": dims, "Input type": [dtype, dtype]})
    return synth.write(tmp_path / f"mm{dims[0][0]}{dtype[-4:]}.json.gz", synth.kineto(b.events))


def test_misaligned_half_precision_gemms_need_shapes_and_fire_both_ways(tmp_path):
    bad = rows(tv.advise(_mm_trace(tmp_path, [[4095, 4096], [4096, 4096]]), min_pct=0), "gemm-misaligned")
    assert len(bad) == 1 and bad.iloc[0]["count_per_step"] == 1
    for dims, dtype in (
        ([[4096, 4096], [4096, 4096]], "c10::BFloat16"),
        ([[4095, 4096], [4096, 4096]], "float"),
    ):
        assert rows(tv.advise(_mm_trace(tmp_path, dims, dtype), min_pct=0), "gemm-misaligned").empty, (
            dims,
            dtype,
        )
    st = tv.advise(_synth(tmp_path, "naive"))["rules"].set_index("rule")
    assert not st.loc["gemm-misaligned", "ran"] and "record_shapes" in st.loc["gemm-misaligned", "why_not"]


@pytest.mark.parametrize(
    "path", [SAMPLES / "naive.json.gz", *[p.values[0] for p in corpus_params("*/*.json.gz")]]
)
def test_memory_peak_advice_agrees_with_traceview_memory(path):
    """The memory row's bytes are table alive_at_peak's top row of `traceview memory` (one number,
    two commands), its share is of that device's peak, and it is said only from its threshold."""
    if path is None:
        pytest.skip(SKIP_REASON)
    r = tv.advise(path, min_pct=0)
    m = tv.memory(path)
    said = rows(r, "memory-peak")
    if "alive_at_peak" not in m.tables or m["alive_at_peak"].empty:
        assert said.empty
        return
    rule = next(x for x in rules().rule if x.id == "memory-peak")
    peaks = m["devices"].set_index("device")["peak_allocated_bytes"]
    alive = m["alive_at_peak"]
    for device, g in alive[alive["made_by"].isin(rule.ops)].groupby("device"):
        top = g.sort_values("bytes", ascending=False, kind="stable").iloc[0]
        share = 100.0 * top["bytes"] / peaks[device]
        mine = said[said["what"].str.contains(f" {device} memory at its peak", regex=False)]
        assert len(mine) == (share >= rule.min_pct_of_peak), (device, share)
        if len(mine):
            assert mine.iloc[0]["peak_bytes"] == top["bytes"] and mine.iloc[0][
                "pct_of_peak"
            ] == pytest.approx(share)
    assert len(said) <= alive[alive["made_by"].isin(rule.ops)]["device"].nunique()


def test_advice_diff_says_what_is_new_in_b_only():
    from traceview.analyses.trace.advise import advice_diff

    inplace, naive = load(str(SAMPLES / "naive_inplace.json.gz")), load(str(SAMPLES / "naive.json.gz"))
    table, said = advice_diff(region(inplace), region(naive))
    copy = table[table["rule"] == "out-of-place-copy"]
    assert copy["change"].tolist() == ["new in B"] and table["change"].isin(["new in B", "worse in B"]).all()
    assert any(s.startswith("new in B: aten::masked_fill copies its input") for s in said)
    back = advice_diff(region(naive), region(inplace))[0]  # the fix removes the copy: not in B
    assert "out-of-place-copy" not in set(back["rule"])
    assert advice_diff(region(naive), region(naive))[0].empty  # the same trace: nothing new or worse


@pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)
@pytest.mark.parametrize(
    "rel",
    [
        "param/dlrm_kineto__worker1_step_12.1694128201556.pt.trace.json.gz",
        "kineto/tb_plugin_samples__resnet50_autograd_api_num_workers_0__worker0.pt.trace.json.gz",
    ],
)
def test_exposed_cause_advice_recounted_from_plain_json(rel):
    """host-sync, launch-bound and exposed-communication state their cause's exposed time per step:
    the same as test_exposed's independent recount of the raw events."""
    from test_exposed import recount

    steps_ = recount(CORPUS / rel)
    got = tv.advise(CORPUS / rel, min_pct=0)["advice"].set_index("rule")["stake_ns_per_step"]
    for rule, key in (("host-sync", "sync"), ("launch-bound", "host"), ("exposed-communication", "comm")):
        total = sum(s[key] for s in steps_)
        assert (got.get(rule, 0) * len(steps_)) == pytest.approx(total, abs=1), (rule, rel)


def test_gpu_sdpa_reasons_read_from_the_recorded_arguments(tmp_path):
    """On a GPU trace, what excludes flash and memory-efficient is read from the arguments of
    aten::scaled_dot_product_attention as sdp_utils.cpp checks them (dtype, mask, head dim)."""
    import synth

    def reasons(types, dims, concrete):
        doc = synth.attention_trace("sdpa_math")
        for e in doc["traceEvents"]:
            if e.get("name") == "aten::scaled_dot_product_attention":
                e["args"].update({"Input type": types, "Input Dims": dims, "Concrete Inputs": concrete})
        path = synth.write(tmp_path / f"s{len(list(tmp_path.iterdir()))}.json.gz", doc)
        return rows(tv.advise(path), "sdpa-math-backend").iloc[0]["what"]

    q = [1, 8, 128, 64]
    fp32_mask = reasons(
        ["float", "float", "float", "float"], [q, q, q, [128, 128]], ["", "", "", "", "0.", "False"]
    )
    assert (
        "flash needs fp16/bf16 inputs, these are float" in fp32_mask
        and "takes no attn_mask tensor" in fp32_mask
    )
    assert "no recorded argument excludes memory-efficient" in fp32_mask  # fp32 and a mask are fine there
    bf16 = ["c10::BFloat16"] * 3 + [""]
    big_head = reasons(bf16, [[1, 8, 128, 300]] * 3 + [[]], ["", "", "", "", "0.", "True"])
    assert "head dim 300 > 256" in big_head and "needs fp16/bf16" not in big_head
    odd = reasons(bf16, [[1, 8, 128, 60]] * 3 + [[]], ["", "", "", "", "0.", "True"])
    assert "no recorded argument excludes flash" in odd and "head dim multiple of 8, not 60" in odd


@pytest.mark.parametrize("dims", [None, [[]], [[], []]], ids=["no Input Dims", "empty", "two empty"])
def test_advise_and_kernels_agree_on_whether_shapes_were_recorded(tmp_path, dims):
    """One meaning of "recorded with shapes" (``measure.work.has_shapes``: some op has Input Dims):
    advise's shape rules say "record_shapes" exactly where ``kernels`` (and diff, compare) notes
    the trace was recorded without shapes. Input Dims that hold only empty lists were recorded:
    the rules run (and find nothing to say), they do not ask for record_shapes=True."""
    import synth

    b = synth.Builder()
    for n in range(3):
        b.step(n, [synth.op("aten::mm", kernels=[(synth.GEMM_TC, 50.0)])])
    if dims is not None:
        for e in b.events:
            if e.get("cat") == "cpu_op":
                e["args"]["Input Dims"] = dims
    path = synth.write(tmp_path / "t.json.gz", synth.kineto(b.events))
    st = tv.advise(path, min_pct=0)["rules"].set_index("rule")
    asks = "record_shapes" in st.loc["gemm-misaligned", "why_not"]
    noted = any("recorded without shapes" in n for n in tv.kernels(path).notes)
    assert asks == noted == (dims is None), (st.loc["gemm-misaligned"].to_dict(), noted)
