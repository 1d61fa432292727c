"""HTA interop: traceview and Holistic Trace Analysis agree on the same traces, the bridge
fixes HTA's rank/collision/last-step rules, and ``traceview hta`` works (or says how to install HTA).

Cross-validation accounting (what HTA does differently, checked here on real traces):
* HTA's GPU table is every event with a stream, including ``cuda_sync`` events (alexnet:
  20 ``Stream Wait Event``, 16 ``Stream Sync``, 5 ``Context Sync``, 1,478 µs in all, widening
  HTA's GPU span from 12,920,244 to 12,996,011 µs); traceview's ``kernels`` holds kernels,
  memcpy and memset only. We drop ``cuda_sync`` rows before comparing.
* HTA keeps 2021-format categories as written (``Kernel``, ``Memcpy``, ``Memset``); both map
  onto traceview's kinds.
* With two or more ``ProfilerStep``s HTA keeps only GPU activities whose launch (matched by
  correlation) starts no later than the end of the last step; with ``include_last_profiler_step``
  left at HTA's default False, the whole last step is dropped too (log_transformer: 32 of 48
  kernels; trace_filter rank 0: 602 of 1204). The bridge keeps the last step.
* HTA measures in µs. For traces with fractional-µs timestamps it rounds every event inward
  (``ts`` up, ``ts+dur`` down), so each loses up to 2 µs and sub-µs kernels go to 0 or
  negative (the 20 ns kernel of kineto/docs_traces: -1 µs), which trips an assertion in
  HTA's temporal breakdown. With ``ns_rounding=False`` (HTA_DISABLE_NS_ROUNDING) totals agree
  to float precision.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON

import traceview
from traceview.cli import main
from traceview.errors import TraceviewError

KIND = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
}

# (file, steps: HTA filters by step, ns: fractional-µs timestamps), small-to-medium, different formats
CROSSCHECK = [
    (
        "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
        0,
        False,
    ),  # cuda_sync events
    ("tokenomics/trace0.json.gz", 0, True),  # ns floats, NCCL
    ("rocm/hta__mi250_minitoy_train_ROCm6_2_kineto.json.gz", 2, True),  # AMD ROCm
    ("tracelens/b300__moe_03_top1_sparse.json.gz", 0, True),  # 2026: baseTimeNanoseconds, CUDA 13
    ("kineto/tb_plugin_test__gpu_metrics_input.json.gz", 1, False),  # capitalised 2021 categories
    (
        "torch_profiling_tutorial/log_transformer__dc3b0e7228dd_851.1752215573993169006.pt.trace.json.gz",
        3,
        False,
    ),
    ("param/dlrm_kineto__worker3_step_12.1694128201557.pt.trace.json.gz", 1, False),  # rank 3 of 8
    ("hta/trace_filter__sampled_rank-0.json.gz", 2, False),  # no deviceProperties
    ("shift_equivariant_vit/trace.json.gz", 0, False),  # Kernel/Memcpy/Memset, 825 activities
]
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)


@pytest.fixture(scope="module")
def hta_mod():
    return pytest.importorskip("hta")


def _hta_gpu(ta):
    from traceview.interop.hta import gpu_events

    g = gpu_events(ta, ta.t.get_ranks()[0])
    return g[~g["s_cat"].str.lower().eq("cuda_sync")]


def _expected(tv):
    """traceview's activities that HTA keeps: launched no later than the last step's end (when >= 2 steps)."""
    k = tv.kernels
    if len(tv.steps) < 2:
        return k
    launch = k["launch"].to_numpy()
    linked = launch >= 0
    launch_ts = np.where(
        linked, tv.events["ts_ns"].to_numpy()[np.clip(launch, 0, None)], np.iinfo(np.int64).max
    )
    return k[linked & (launch_ts <= (tv.steps["ts_ns"] + tv.steps["dur_ns"]).max())]


@needs_corpus
@pytest.mark.parametrize("name,n_steps,ns", CROSSCHECK, ids=[c[0].split("/")[-1][:32] for c in CROSSCHECK])
def test_counts_and_time_agree_with_hta(hta_mod, name, n_steps, ns):
    from traceview.interop.hta import to_hta

    tv = traceview.load(CORPUS / name, cache=False)
    assert len(tv.steps) == n_steps
    exp = _expected(tv)
    h = _hta_gpu(to_hta(tv))
    kinds = h["s_cat"].str.lower().map(KIND)
    assert kinds.notna().all(), set(h["s_cat"][kinds.isna()])
    assert len(h) == len(exp) == len(tv.kernels)  # on these traces HTA's step filter drops nothing else
    assert kinds.value_counts().to_dict() == {k: v for k, v in exp["kind"].value_counts().items() if v}
    tv_ns, hta_ns, n = int(exp["dur_ns"].sum()), float(h["dur"].sum()) * 1000, len(exp)
    tv_span = int((exp["ts_ns"] + exp["dur_ns"]).max() - exp["ts_ns"].min())
    hta_span = float((h["ts"] + h["dur"]).max() - h["ts"].min()) * 1000
    if not ns:  # whole-µs traces: exact
        assert hta_ns == tv_ns
        assert hta_span == tv_span  # without cuda_sync rows (alexnet: they widen HTA's span by 75.8 ms)
    else:  # HTA rounds each event inward to whole µs: loses [0, 2) µs per event
        assert 0 <= tv_ns - hta_ns < 2000 * n
        exact = _hta_gpu(to_hta(tv, ns_rounding=False))
        assert float(exact["dur"].sum()) * 1000 == pytest.approx(tv_ns, abs=1e-3 * n)


@needs_corpus
@pytest.mark.parametrize(
    "name,dropped",
    [
        (
            "torch_profiling_tutorial/log_transformer__dc3b0e7228dd_851.1752215573993169006.pt.trace.json.gz",
            16,
        ),
        ("hta/trace_filter__sampled_rank-0.json.gz", 602),
    ],
)
def test_hta_default_drops_the_last_step(hta_mod, name, dropped):
    from traceview.interop.hta import to_hta

    tv = traceview.load(CORPUS / name, cache=False)
    last = int(tv.steps["step"].max())
    assert int((tv.kernels["step"] == last).sum()) == dropped
    assert len(_hta_gpu(to_hta(tv, include_last_step=False))) == len(tv.kernels) - dropped
    assert len(_hta_gpu(to_hta(tv))) == len(tv.kernels)


@needs_corpus
def test_sub_microsecond_kernel_is_parsed_without_rounding_by_default(hta_mod):
    """Issue 21: HTA's inward rounding gives this 20 ns H100 kernel ceil(ts) > floor(ts + 0.02), a
    duration of -1 µs, and its temporal breakdown fails an assert; `traceview hta` failed by default
    and asked for --no-ns-rounding. The bridge now parses such a trace without the rounding, and says so."""
    from traceview.analyses.trace.hta_views import temporal
    from traceview.interop.hta import HTAFailed, HTARun, _ns_rounding, to_hta

    path = CORPUS / "kineto/docs_traces__after_fix_trace.json.gz"
    tv = traceview.load(path, cache=False)
    assert int(tv.kernels["dur_ns"].iloc[0]) == 20
    run = to_hta(tv)
    assert not run.ns_rounding and "negative duration" in run.notes[0]
    assert float(_hta_gpu(run)["dur"].iloc[0]) == pytest.approx(0.02)
    report = temporal(tv, run)
    assert report.tables["computation_split"]["total_ns"].sum() == 20
    from hta.trace_analysis import TraceAnalysis  # HTA's own parse, rounded: still one line when it fails

    with _ns_rounding(True):
        rounded = HTARun(
            TraceAnalysis(trace_files={0: str(path)}, include_last_profiler_step=True),
            [str(path)],
            {0: str(path)},
        )
    assert float(_hta_gpu(rounded)["dur"].iloc[0]) == -1
    with pytest.raises(HTAFailed) as err:
        temporal(tv, rounded)
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg and "'temporal'" in msg and "AssertionError" in msg


# --- the bridge, on small synthetic traces -------------------------------------------------------


def _trace_doc(
    rank=None,
    kernels=(
        ("ampere_sgemm_32x32_sliced1x4_tn", 30),
        ("void at::native::vectorized_elementwise_kernel<4>", 10),
    ),
):
    """A small, complete Kineto trace: one ProfilerStep, an op per kernel, launches with flows."""
    ev = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 1000,
            "dur": 500,
        }
    ]
    t = 1010
    for i, (name, dur) in enumerate(kernels):
        corr = 100 + i
        ev += [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"aten::op{i}",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 40,
                "args": {"External id": i + 1},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": t + 5,
                "dur": 10,
                "args": {"correlation": corr, "External id": i + 1},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": name,
                "pid": 0,
                "tid": 7,
                "ts": t + 20,
                "dur": dur,
                "args": {"device": 0, "stream": 7, "correlation": corr, "External id": i + 1},
            },
            {"ph": "s", "id": corr, "pid": 1, "tid": 1, "ts": t + 5, "cat": "ac2g", "name": "ac2g"},
            {
                "ph": "f",
                "id": corr,
                "pid": 0,
                "tid": 7,
                "ts": t + 20,
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            },
        ]
        t += 100
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100"}], "traceEvents": ev}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 8}
    return doc


def _write(path: Path, doc, compact=True, gz=False) -> Path:
    text = json.dumps(doc, separators=(",", ":")) if compact else json.dumps(doc, indent=2)
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


def test_compact_json_rank_is_read(hta_mod, tmp_path):
    from hta.common.trace_file import create_rank_to_trace_dict

    from traceview.interop.hta import to_hta

    p = _write(tmp_path / "r3.json", _trace_doc(rank=3))
    assert create_rank_to_trace_dict([str(p)])[1] == {0: str(p)}  # HTA's regex misses "rank":3
    ta = to_hta(p)
    assert ta.t.get_ranks() == [3]
    assert to_hta(traceview.load(p, cache=False), rank=5).t.get_ranks() == [5]
    assert to_hta(_write(tmp_path / "none.json", _trace_doc())).t.get_ranks() == [0]


def test_many_refuses_colliding_ranks(hta_mod, tmp_path):
    from traceview.interop.hta import to_hta_many

    a, b = _write(tmp_path / "a.json", _trace_doc(rank=3)), _write(tmp_path / "b.json", _trace_doc(rank=3))
    with pytest.raises(
        TraceviewError, match=r"rank 3 is claimed by 2 traces: .*a\.json, .*b\.json.*renumber"
    ):
        to_hta_many([a, b])
    c, d = _write(tmp_path / "c.json", _trace_doc()), _write(tmp_path / "d.json", _trace_doc())
    with pytest.raises(TraceviewError, match=r"no distributedInfo\.rank"):
        to_hta_many([c, d])
    with pytest.raises(TraceviewError, match="2 traces but 1 ranks"):
        to_hta_many([a, b], ranks=[1])
    assert sorted(to_hta_many([a, b], renumber=True).t.get_ranks()) == [0, 1]
    ta = to_hta_many([a, b], ranks=[4, 6])
    assert sorted(ta.t.get_ranks()) == [4, 6]
    e = _write(tmp_path / "e.json", _trace_doc(rank=1), compact=False)
    assert sorted(to_hta_many([a, e]).t.get_ranks()) == [1, 3]


def test_suffix_hta_refuses_is_linked(hta_mod, tmp_path):
    from traceview.interop.hta import to_hta

    p = _write(
        tmp_path / "trace.pt.trace", _trace_doc(rank=2), gz=True
    )  # gzip without .gz: traceview reads it
    ta = to_hta(p, workdir=tmp_path / "work")
    assert ta.t.get_ranks() == [2]
    assert len(_hta_gpu(ta)) == 2
    assert next(iter((tmp_path / "work").iterdir())).name.endswith(".json.gz")


def test_views_split_computation_by_category(hta_mod, tmp_path):
    from traceview.analyses.trace.hta_views import hta_report
    from traceview.interop.hta import ANALYSES, to_hta

    tv = traceview.load(_write(tmp_path / "t.json", _trace_doc(rank=0)), cache=False)
    ta = to_hta(tv)
    reports = {a: hta_report(tv, ta, a) for a in ANALYSES}
    split = reports["temporal"]["computation_split"].set_index("group")
    assert split.loc["gemm (CUDA cores)", "total_ns"] == 30_000
    assert split["total_ns"].sum() == 40_000
    assert reports["temporal"]["breakdown"].set_index("bucket").loc["computation", "time_us"] == 40
    assert reports["launch"].info["launches"] == 2
    assert set(reports["kernels"]["by_type"]["kernel_type"]) == {"COMPUTATION"}
    assert len(reports["idle"]["idle_by_stream"]) >= 1


def test_hta_errors_become_one_line(hta_mod, tmp_path):
    from traceview.interop.hta import HTAFailed, call, to_hta

    ta = to_hta(_write(tmp_path / "t.json", _trace_doc()))

    def boom():
        raise TypeError("The axis argument to unique is not supported for dtype object")

    with pytest.raises(
        HTAFailed, match=r"t\.json: HTA analysis 'freqseq' failed under \S+ [\d.]+: TypeError: The axis"
    ):
        call(ta, "freqseq", boom)


# --- CLI -----------------------------------------------------------------------------------------


def test_cli_hta(hta_mod, tmp_path):
    p = _write(tmp_path / "t.json", _trace_doc(rank=3))
    for analysis in ("temporal", "idle", "kernels", "launch"):
        res = CliRunner().invoke(main, ["hta", str(p), "--analysis", analysis, "--no-cache"])
        assert res.exit_code == 0, res.output
        assert "(rank 3)" in res.output
    res = CliRunner().invoke(main, ["hta", str(p), "--format", "json", "--no-cache"])
    assert json.loads(res.stdout)["tables"]["computation_split"]


def test_cli_without_hta_says_how_to_install(monkeypatch, tmp_path):
    for mod in [m for m in sys.modules if m == "hta" or m.startswith("hta.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "hta", None)  # import hta -> ImportError
    p = _write(tmp_path / "t.json", _trace_doc())
    res = CliRunner().invoke(main, ["hta", str(p)])
    assert res.exit_code == 1
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "pip install 'traceview[hta]'" in lines[0], res.output


def test_importing_traceview_does_not_import_hta():
    code = (
        "import sys, traceview, traceview.cli, traceview.interop; "
        "assert 'hta' not in sys.modules, 'hta imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
