"""Valid or plausible input that used to crash or give wrong answers (issue 22, item 4 and the
lone-surrogate / deep-nesting part of item 7). Each case has one defined treatment, counted in
a warning (``Trace.warnings``) or a note:

- rates over zero time (every instance of a kernel took 0 ns) are empty, never inf;
- a negative ``dur`` counts as 0 ns;
- a ``ts``/``dur`` past what int64 nanoseconds can compute with is dropped, and so is an event
  more than a day from the rest of the trace (a minority, around the median start);
- events with no ``ph`` or an unknown one, and duration events with no ``cat``, are counted;
- a correlation id (or External id) that names several launches (or ops) links nothing;
- exact copies of an event that carries an id count once;
- an event msgspec refuses on its own (a lone surrogate escape, nesting ~1,000 deep) is
  dropped, not the whole trace, and the parallel decoder agrees with the serial one.
"""

from __future__ import annotations

import csv
import io
import json
import multiprocessing
import random

import pandas as pd
import pytest
from click.testing import CliRunner
from corpus import CORPUS

import traceview as tv
from traceview.cli import main
from traceview.launches import completeness
from traceview.read import chunks, parallel, split_document

GEMM = "ampere_sgemm_128x64_tn"
ADD = "vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"


def ev(cat, name, ts, dur, pid=1, tid=1, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def op_with_kernel(
    i: int,
    t0: float,
    kernel: str,
    kernel_dur: float,
    op: str = "aten::mm",
    corr=None,
    ext=None,
    dims=([64, 128], [128, 32]),
) -> list[dict]:
    """One CPU op (with shapes) launching one kernel on device 0, stream 7."""
    corr = i if corr is None else corr
    ext = 100 + i if ext is None else ext
    return [
        ev(
            "cpu_op",
            op,
            t0,
            40,
            **{"External id": ext, "Input Dims": list(dims), "Input type": ["float", "float"]},
        ),
        ev("cuda_runtime", "cudaLaunchKernel", t0 + 10, 5, correlation=corr, **{"External id": ext}),
        ev(
            "kernel",
            kernel,
            t0 + 20,
            kernel_dur,
            pid=0,
            tid=7,
            correlation=corr,
            device=0,
            stream=7,
            **{"External id": ext},
        ),
    ]


def gpu_trace(kernel_durs=(0, 0, 0), extra=(), steps: int = 1) -> list[dict]:
    """``steps`` ProfilerSteps; in each, one GEMM per entry of ``kernel_durs`` and one add kernel."""
    events, i = [], 0
    for s in range(steps):
        t = 1000 + s * 1000
        events.append(ev("user_annotation", f"ProfilerStep#{s}", t, 900))
        for d in kernel_durs:
            events += op_with_kernel(i, t + 10 + 100 * (i % 8), GEMM, d)
            i += 1
        events += op_with_kernel(i, t + 850, ADD, 3, op="aten::add", dims=([64, 32], [64, 32]))
        i += 1
    return events + list(extra)


def write(tmp_path, events, name="t.json", **meta) -> str:
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
        **meta,
        "traceEvents": events,
    }
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args] + ["--no-cache"])


def warned(trace, text: str) -> bool:
    return any(text in w for w in trace.warnings)


# ---------------------------------------------------------------- rates over zero time


@pytest.mark.parametrize(
    "extra",
    [[], ["--ops"], ["--format", "csv"], ["--ops", "--format", "csv"], ["--format", "json"]],
    ids=["table", "ops", "csv", "ops_csv", "json"],
)
def test_zero_duration_kernels_have_no_rate(tmp_path, extra):
    """Found: every instance of a GEMM with dur 0 made GB/s infinite: exit 3 (OverflowError), CSV 'inf'."""
    path = write(tmp_path, gpu_trace((0, 0, 0)))
    result = run("kernels", path, *extra)
    assert result.exit_code == 0, result.output
    if "csv" in extra:
        cells = [c for row in csv.reader(io.StringIO(result.output)) for c in row]
        assert not any(c.strip().lower() in ("inf", "-inf", "infinity") for c in cells), result.output
    if "json" in extra:
        doc = json.loads(result.stdout)
        gemm = [r for r in doc["tables"]["kernels"] if r["name"] == GEMM]
        assert gemm and gemm[0]["tflops"] is None and gemm[0]["gbps"] is None
        assert gemm[0]["flops"] > 0  # the work is known; only the rate over zero time is not
        assert any("took 0 ns" in n for n in doc["notes"])


def test_zero_duration_kernels_plot(tmp_path):
    path = write(tmp_path, gpu_trace((0, 0, 0)))
    for extra in ([], ["--ops"]):
        out = tmp_path / f"plot{len(extra)}.png"
        result = run("kernels", path, *extra, "--plot", out)
        assert result.exit_code == 0, result.output
        assert out.stat().st_size > 0


def test_zero_duration_rates_in_the_api(tmp_path):
    from traceview.analyses.measure.efficiency import name_efficiency, op_table
    from traceview.analyses.select.region import Selection, region

    r = region(tv.load(write(tmp_path, gpu_trace((0, 0, 0))), cache=False), Selection())
    names = name_efficiency(r)
    assert names.loc[GEMM, ["tflops", "gbps", "peak_tflops", "pct_of_peak_tflops"]].isna().all()
    assert not names.select_dtypes("number").isin([float("inf"), float("-inf")]).any().any()
    ops = op_table(r)
    assert not ops.select_dtypes("number").isin([float("inf"), float("-inf")]).any().any()
    assert ops.loc[ops["op"] == "aten::mm", "tflops"].isna().all()


# ---------------------------------------------------------------- negative and absurd times


def test_negative_duration_counts_as_zero(tmp_path):
    """Found: a dur of -999512.03 us made by_kind.total_ns -999,512,030."""
    events = gpu_trace((5, 5))
    events[3]["dur"] = -999512.03  # the first GEMM
    trace = tv.load(write(tmp_path, events), cache=False)
    assert warned(trace, "1 duration event(s) had a negative dur; counted as 0 ns")
    assert (trace.events["dur_ns"] >= 0).all()
    by_kind = tv.summary(trace).tables["by_kind"]
    assert (by_kind["total_ns"] >= 0).all()
    assert by_kind.set_index("kind").loc["kernel", "total_ns"] == 5_000 + 3_000


@pytest.mark.parametrize(
    "ts, base, why",
    [
        (float(2**53), None, "no usable ts"),  # a float: read from its text, past 2**62 ns
        (9999999999999998.0, None, "no usable ts"),  # 16 digits, the most the text path takes: * 1000 wraps
        (2**53, None, "no usable ts"),  # an int: the int path refuses it (it did before)
        (2**52, 1_700_000_000_000_000_000, "too large to compute with"),  # fits alone, not with the base
        (2**50, None, "more than a day from the rest"),  # fits, but 35 years from every other event
    ],
    ids=["2**53_float", "16_digits", "2**53_int", "with_base", "far"],
)
def test_absurd_timestamp_does_not_poison_spans(tmp_path, ts, base, why):
    """Found: a CPU op with ts 2**53 made cpu_time_per_step_ns -9.0e18."""
    meta = {"baseTimeNanoseconds": base} if base else {}
    clean = tv.summary(tv.load(write(tmp_path, gpu_trace((5, 5)), "clean.json", **meta), cache=False))
    events = gpu_trace((5, 5), extra=[ev("cpu_op", "aten::add", ts, 5)])
    trace = tv.load(write(tmp_path, events, **meta), cache=False)
    assert warned(trace, why), trace.warnings
    assert len(trace.events) == len(events) - 1
    info = tv.summary(trace).info
    assert info["cpu_time_per_step_ns"] == clean.info["cpu_time_per_step_ns"] > 0


def test_far_duration_is_dropped(tmp_path):
    events = gpu_trace((5, 5), extra=[ev("cpu_op", "aten::add", 1500, 2**50)])
    trace = tv.load(write(tmp_path, events), cache=False)
    assert warned(trace, "more than a day from the rest of the trace")
    assert tv.summary(trace).info["cpu_time_per_step_ns"] < 10**6


def test_two_far_apart_halves_are_both_kept(tmp_path):
    """No bulk of events to stray from: nothing is dropped (the window takes only a minority)."""
    events = [ev("cpu_op", "aten::mm", 1000, 5), ev("cpu_op", "aten::mm", "1695835535123456.789", 5)]
    trace = tv.load(write(tmp_path, events), cache=False)
    assert len(trace.events) == 2 and not trace.warnings


# ---------------------------------------------------------------- events without ph or cat


def test_events_without_ph_or_cat_are_counted(tmp_path):
    events = gpu_trace(
        (5,),
        extra=[
            {"name": "no phase", "ts": 1, "pid": 1, "tid": 1},
            {"name": "no phase either"},
            {"ph": "Q", "name": "unknown phase", "ts": 1},
            {"ph": "\x1b[2J", "ts": 1},
            {"ph": "X", "name": "no cat", "ts": 1100, "dur": 1, "pid": 1, "tid": 1},
            {"ph": "i", "name": "instant", "ts": 1, "pid": 1, "tid": 1, "s": "t"},  # known: not counted
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
            {"ph": "C", "name": "counter", "ts": 1, "pid": 1, "args": {"v": 1}},
        ],
    )
    trace = tv.load(write(tmp_path, events), cache=False)
    assert warned(trace, "skipped 2 event(s) without ph")
    unknown = [w for w in trace.warnings if "unknown ph" in w]
    assert len(unknown) == 1 and "skipped 2 event(s) with an unknown ph ('\\x1b[2J', 'Q')" in unknown[0]
    assert "\x1b" not in "".join(trace.warnings)
    assert warned(trace, "1 duration event(s) without cat")
    assert len(trace.warnings) == 3, trace.warnings


CORPUS_SAMPLE = [
    "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "kineto/tb_plugin_samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz",
    "rocm/tracelens__sglang_Qwen3-8B_decode.json.gz",
    "switchtransformers/trace.json.gz",
    "tracelens/b200__eager_trace.json.gz",
    "hta/negative_queue_length_values_check__rank0.json.gz",
]


@pytest.mark.parametrize("name", CORPUS_SAMPLE)
def test_corpus_traces_get_no_new_warnings(name):
    """Real traces (instant, metadata, flow and counter events; graph launches; python_function
    events that differ only in their Python id) trip none of the rules above."""
    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"corpus not found at {CORPUS}")
    trace = tv.load(path, cache=False)
    # the completeness warning is about the capture, not its text (issue 32: negative_queue's 11%)
    incomplete = completeness(trace)["warning"]
    assert [w for w in trace.warnings if w != incomplete] == []


# ---------------------------------------------------------------- ambiguous ids


def test_shared_correlation_id_links_nothing(tmp_path):
    """Found: duplicate correlation ids gave every kernel to the first launch's op, while
    linked_to_op_pct read 100."""
    events = [ev("user_annotation", "ProfilerStep#1", 1000, 1000)]
    for i in range(3):
        events += op_with_kernel(i, 1010 + 100 * i, GEMM, 10, op=f"aten::op{i}", corr=5)
    for e in events:
        if e["cat"] == "kernel":
            del e["args"]["External id"]
    trace = tv.load(write(tmp_path, events), cache=False)
    assert trace.kernels["op"].isna().all() and (trace.kernels["launch"] < 0).all()
    assert trace.stats["linked_to_op"] == 0.0
    assert warned(
        trace,
        "3 GPU activities left without a launch: each one's correlation id names several runtime launches",
    )


def test_shared_correlation_id_with_distinct_external_ids(tmp_path):
    """The External id still names each kernel's op: those links are right, and kept."""
    events = [ev("user_annotation", "ProfilerStep#1", 1000, 1000)]
    for i in range(3):
        events += op_with_kernel(i, 1010 + 100 * i, GEMM, 10, op=f"aten::op{i}", corr=5)
    trace = tv.load(write(tmp_path, events), cache=False)
    assert trace.kernels["op"].astype(str).tolist() == ["aten::op0", "aten::op1", "aten::op2"]
    assert warned(trace, "left without a launch")


def test_shared_external_id_links_nothing(tmp_path):
    events = [ev("user_annotation", "ProfilerStep#1", 1000, 1000)]
    for i in range(2):
        events += op_with_kernel(i, 1010 + 100 * i, GEMM, 10, op=f"aten::op{i}", corr=5, ext=9)
    trace = tv.load(write(tmp_path, events), cache=False)
    assert trace.kernels["op"].isna().all()
    assert warned(trace, "2 GPU activities left without an op: each one's External id names several CPU ops")


def test_graph_launch_still_links_all_its_kernels(tmp_path):
    """One launch, many kernels with its correlation id: not ambiguous."""
    events = [
        ev("user_annotation", "ProfilerStep#1", 1000, 1000),
        ev("cpu_op", "aten::graph", 1010, 200, **{"External id": 1}),
        ev("cuda_runtime", "cudaGraphLaunch", 1020, 5, correlation=5, **{"External id": 1}),
    ]
    events += [
        ev("kernel", GEMM, 1030 + 10 * i, 5, pid=0, tid=7, correlation=5, device=0, stream=7)
        for i in range(4)
    ]
    trace = tv.load(write(tmp_path, events), cache=False)
    assert (trace.kernels["op"].astype(str) == "aten::graph").all() and not trace.warnings


def test_flow_fallback_skips_a_flow_id_with_two_starts(tmp_path):
    events = [ev("user_annotation", "ProfilerStep#1", 1000, 1000)]
    for i in range(2):
        events += op_with_kernel(i, 1010 + 100 * i, GEMM, 10, op=f"aten::op{i}")
    for e in events:
        e["args"].pop("correlation", None)
        e["args"].pop("External id", None)
    flows = [
        {"ph": "s", "cat": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 1020},
        {"ph": "s", "cat": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 1120},
        {"ph": "f", "cat": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 1030, "bp": "e"},
        {"ph": "f", "cat": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 1130, "bp": "e"},
    ]
    trace = tv.load(write(tmp_path, events + flows), cache=False)
    assert (trace.kernels["launch"] < 0).all()
    flows[1]["id"], flows[3]["id"] = 8, 8  # distinct ids: each kernel finds its own launch
    trace = tv.load(write(tmp_path, events + flows, "ok.json"), cache=False)
    assert trace.kernels["op"].astype(str).tolist() == ["aten::op0", "aten::op1"]


# ---------------------------------------------------------------- exact duplicates


def test_exact_duplicates_count_once(tmp_path):
    """Found: exact duplicate events counted twice."""
    events = gpu_trace((5, 7))
    copies = [dict(e, args=dict(e["args"])) for e in events[1:7]]  # the first GEMM's op, launch, kernel, ...
    trace = tv.load(write(tmp_path, events + copies), cache=False)
    clean = tv.load(write(tmp_path, events, "clean.json"), cache=False)
    assert warned(trace, "dropped 6 exact duplicate(s) of duration events")
    for name in ("events", "kernels", "ops"):
        pd.testing.assert_frame_equal(getattr(trace, name), getattr(clean, name))
    assert tv.summary(trace).info["gpu_time_ns"] == 5_000 + 7_000 + 3_000


def test_events_without_ids_that_look_alike_are_kept(tmp_path):
    """python_function events may differ only in args traceview does not read (their Python id)."""
    events = gpu_trace((5,)) + [
        ev("python_function", "<built-in function len>", 1100, 0, **{"Python id": i}) for i in range(2)
    ]
    trace = tv.load(write(tmp_path, events), cache=False)
    assert len(trace.events) == len(events) and not trace.warnings


def test_exact_duplicates_found_whatever_ids_they_lack(tmp_path):
    """The duplicate check's first pass hashes times, thread, name and both ids, a missing id as
    one value: every exact copy still meets its original there, whichever ids it lacks, and an
    event that differs from another only in an id or its name is no copy. The expected count is
    worked out from the written events alone."""
    rng = random.Random(35)
    events = []
    for _ in range(400):
        args = {}
        if rng.random() < 0.6:
            args["correlation"] = rng.choice([0, 1, 2, 2**40])
        if rng.random() < 0.6:
            args["External id"] = rng.choice([0, 5, -3])
        cat, name = rng.choice(["cpu_op", "cuda_runtime"]), rng.choice(["a", "b"])
        events.append(ev(cat, name, 1000 + rng.randrange(3), rng.randrange(2), tid=rng.randrange(2), **args))
    events += [dict(e, args=dict(e["args"])) for e in rng.sample(events, 100)]
    seen, copies = set(), 0
    for e in events:  # a copy of an earlier event that carries an id is dropped
        key = json.dumps(e, sort_keys=True)
        copies += key in seen and bool(e["args"])
        seen.add(key)
    trace = tv.load(write(tmp_path, events), cache=False)
    assert copies > 20 and len(trace.events) == len(events) - copies
    assert warned(trace, f"dropped {copies} exact duplicate(s) of duration events")


# ---------------------------------------------------------------- events msgspec refuses

GOOD = json.dumps(ev("cpu_op", "aten::mm", 1000, 50, **{"External id": 1})).encode()
GOOD2 = json.dumps(ev("cpu_op", "aten::add", 1100, 50, **{"External id": 2})).encode()
DEEP = b'{"a":' * 1000 + b"1" + b"}" * 1000
UNFIT = {
    "surrogate_name": b'{"ph": "X", "cat": "cpu_op", "name": "\\ud800", "ts": 1050, "dur": 1}',
    "surrogate_arg": b'{"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1050, "dur": 1, '
    b'"args": {"y": "\\ud800"}}',
    "low_surrogate": b'{"ph": "X", "cat": "cpu_op", "name": "a\\udc00b", "ts": 1050, "dur": 1}',
    "deep_args": b'{"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1050, "dur": 1, "args": {"y": '
    + DEEP
    + b"}}",
    "deep_name": b'{"ph": "X", "cat": "cpu_op", "name": ' + DEEP + b', "ts": 1050, "dur": 1}',
}


def _doc(items: list[bytes], bare: bool = False) -> bytes:
    array = b"[" + b", ".join(items) + b"]"
    return array if bare else b'{"schemaVersion": 1, "traceEvents": ' + array + b', "x": "\\ud83d\\ude00"}'


@pytest.mark.parametrize("bare", [False, True], ids=["object", "bare_array"])
@pytest.mark.parametrize("kind", sorted(UNFIT))
def test_one_unfit_event_drops_only_that_event(tmp_path, kind, bare):
    """Found: one lone surrogate, or one args value nested ~1,000 deep, refused the whole trace."""
    path = tmp_path / "t.json"
    path.write_bytes(_doc([GOOD, UNFIT[kind], GOOD2], bare))
    for salvage in (False, True):
        trace = tv.load(path, cache=False, salvage=salvage)
        assert trace.events["name"].astype(str).tolist() == ["aten::mm", "aten::add"]
        assert trace.warnings == [f"{path}: skipped 1 malformed event(s)"]
    if not bare:
        assert trace.meta["x"] == "\U0001f600"  # a valid surrogate pair is a character


def test_valid_pairs_and_escaped_backslashes_are_untouched(tmp_path):
    emoji = b'{"ph": "X", "cat": "cpu_op", "name": "\\ud83d\\ude00", "ts": 1050, "dur": 1}'
    literal = (
        b'{"ph": "X", "cat": "cpu_op", "name": "\\\\ud800", "ts": 1060, "dur": 1}'  # backslash, then text
    )
    path = tmp_path / "t.json"
    path.write_bytes(_doc([GOOD, emoji, literal, UNFIT["surrogate_name"], GOOD2]))
    trace = tv.load(path, cache=False)
    assert trace.events["name"].astype(str).tolist() == ["aten::mm", "\U0001f600", "\\ud800", "aten::add"]


@pytest.mark.parametrize("kind", ["surrogate_name", "deep_args"])
def test_unfit_event_in_a_cut_trace_with_salvage(tmp_path, kind):
    data = _doc([GOOD, UNFIT[kind], GOOD2, GOOD2.replace(b"1100", b"1200")])
    path = tmp_path / "t.json"
    path.write_bytes(data[: data.rindex(b"aten::add")])  # cut inside the last event
    with pytest.raises(tv.TraceReadError, match="truncated"):
        tv.load(path, cache=False)
    trace = tv.load(path, cache=False, salvage=True)
    assert trace.events["name"].astype(str).tolist() == ["aten::mm", "aten::add"]
    assert any("salvaged" in w for w in trace.warnings)
    assert any("skipped 1 malformed event(s)" in w for w in trace.warnings)


@pytest.mark.parametrize(
    "data, match",
    [
        (_doc([UNFIT["deep_args"]]), "nested too deeply"),  # nothing would be left: the document's error
        (_doc([UNFIT["surrogate_name"]]), "hex escape"),
        (
            b'{"traceEvents": [' + GOOD + b'], "meta": "\\ud800"}',
            "hex escape|truncated",
        ),  # not in an event (msgspec may call it a cut)
        (b'{"traceEvents": [' + GOOD + b'], "meta": ' + DEEP + b"}", "nested too deeply"),
        (
            b'{"traceEvents": [' + GOOD + b", " + UNFIT["surrogate_name"] + b", {]}",
            "not valid JSON",
        ),  # other damage
    ],
)
def test_what_is_not_one_events_problem_stays_an_error(tmp_path, data, match):
    path = tmp_path / "t.json"
    path.write_bytes(data)
    with pytest.raises(tv.TraceReadError, match=match):
        tv.load(path, cache=False)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_parallel_decoder_agrees_on_unfit_events(tmp_path, monkeypatch):
    items = []
    for i in range(2000):
        items.append(
            json.dumps(ev("cpu_op", f"aten::op{i % 7}", 1000 + 10 * i, 5, **{"External id": i})).encode()
        )
        if i % 400 == 7:
            items.append(UNFIT["surrogate_name" if i % 800 == 7 else "deep_args"])
    path = tmp_path / "t.json"
    path.write_bytes(_doc(items))
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 20_000)
    monkeypatch.setenv("TRACEVIEW_WORKERS", "2")
    _, events_raw = split_document(path.read_bytes(), str(path))
    direct = parallel.event_columns(events_raw, str(path))  # the pool itself, not a fallback
    assert direct is not None and direct.dropped == 5
    got = {}
    for workers in ("1", "2"):
        monkeypatch.setenv("TRACEVIEW_WORKERS", workers)
        got[workers] = tv.load(path, cache=False)
    serial, par = got["1"], got["2"]
    assert len(serial.events) == 2000
    assert serial.warnings == par.warnings == [f"{path}: skipped 5 malformed event(s)"]
    for name in ("events", "ops"):
        pd.testing.assert_frame_equal(getattr(serial, name), getattr(par, name), check_exact=True)


@pytest.mark.parametrize("salvage", [False, True], ids=["whole", "salvage"])
def test_annotate_keeps_an_unfit_event_as_written(tmp_path, salvage):
    """annotate decodes what the load decoded (the unfit event blanked) but writes the file's bytes:
    the output is the input plus annotations, and the unfit event is copied as it was."""
    kernel = json.dumps(ev("kernel", GEMM, 1200, 5, pid=0, tid=7, correlation=1, device=0, stream=7)).encode()
    data = _doc([GOOD, UNFIT["surrogate_name"], UNFIT["deep_args"], kernel, GOOD2])
    path, out = tmp_path / "t.json", tmp_path / "out.json"
    path.write_bytes(data if not salvage else data[: data.rindex(b"aten::add")])
    result = run("annotate", path, "-o", out, *(["--salvage"] if salvage else []))
    assert result.exit_code == 0, result.output
    written = out.read_bytes()
    assert UNFIT["surrogate_name"] in written and UNFIT["deep_args"] in written  # as they were
    again = tv.load(out, cache=False)
    assert again.events["name"].astype(str).tolist() == ["aten::mm", GEMM] + (
        [] if salvage else ["aten::add"]
    )
    assert again.kernels["category"].astype(str).tolist() == ["gemm"]
    assert any("skipped 2 malformed event(s)" in w for w in again.warnings)
    shallow = written.replace(
        UNFIT["deep_args"], b"{}"
    )  # Python's json takes the lone surrogate, not the depth
    events = json.loads(shallow)["traceEvents"]
    assert events[1]["name"] == "\ud800" and events[3]["args"]["traceview.category"] == "gemm"
