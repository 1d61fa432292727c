"""One hand-written trace per format quirk the loader must accept."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

import traceview as tv


def write(tmp_path, doc, name="t.json", gz=False, raw: str | None = None):
    path = tmp_path / name
    text = raw if raw is not None else json.dumps(doc)
    data = gzip.compress(text.encode()) if gz else text.encode()
    path.write_bytes(data)
    return path


def modern_events(base_ts=1000.0):
    """naive attention's masked_fill: a cpu_op tree launching one kernel and one memcpy."""
    t = base_ts
    return [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#7",
            "pid": 1,
            "tid": 1,
            "ts": t,
            "dur": 100.0,
            "args": {"External id": 1},
        },
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "naive",
            "pid": 1,
            "tid": 1,
            "ts": t + 1,
            "dur": 98.0,
            "args": {"External id": 2},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::masked_fill",
            "pid": 1,
            "tid": 1,
            "ts": t + 10,
            "dur": 40.0,
            "args": {"External id": 3},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::clone",
            "pid": 1,
            "tid": 1,
            "ts": t + 11,
            "dur": 20.0,
            "args": {"External id": 4},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::copy_",
            "pid": 1,
            "tid": 1,
            "ts": t + 12,
            "dur": 10.0,
            "args": {"External id": 5},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaMemcpyAsync",
            "pid": 1,
            "tid": 1,
            "ts": t + 13,
            "dur": 5.0,
            "args": {"External id": 5, "correlation": 100},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::masked_fill_",
            "pid": 1,
            "tid": 1,
            "ts": t + 32,
            "dur": 10.0,
            "args": {"External id": 6},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": t + 33,
            "dur": 4.0,
            "args": {"External id": 6, "correlation": 101},
        },
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy DtoD (Device -> Device)",
            "pid": 0,
            "tid": 7,
            "ts": t + 20,
            "dur": 3.001,
            "args": {"device": 0, "stream": 7, "correlation": 100, "bytes": 4096},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()",
            "pid": 0,
            "tid": 7,
            "ts": t + 40,
            "dur": 2.5,
            "args": {"device": 0, "stream": 7, "correlation": 101},
        },
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 101, "pid": 1, "tid": 1, "ts": t + 33},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 101, "pid": 0, "tid": 7, "ts": t + 40, "bp": "e"},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "X", "cat": "some_future_category", "name": "whatever", "pid": 1, "tid": 1, "ts": t, "dur": 1},
    ]


def test_modern_trace_links_kernel_to_op_top_op_annotation_step(tmp_path):
    doc = {"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA H200"}], "traceEvents": modern_events()}
    t = tv.load(write(tmp_path, doc), cache=False)
    k = t.kernels.set_index("kind")
    assert k.loc["memcpy", "op"] == "aten::copy_"
    assert k.loc["memcpy", "top_op"] == "aten::masked_fill"
    assert k.loc["memcpy", "annotation"] == "naive"
    assert k.loc["memcpy", "step"] == 7
    assert k.loc["kernel", "op"] == "aten::masked_fill_"
    assert k.loc["kernel", "top_op"] == "aten::masked_fill"
    assert k.loc["memcpy", "bytes"] == 4096
    assert t.device_name == "NVIDIA H200"
    assert t.meta["schemaVersion"] == 1


def test_ops_table_tree_and_gpu_totals(tmp_path):
    t = tv.load(write(tmp_path, {"traceEvents": modern_events()}), cache=False)
    ops = t.ops.set_index("name")
    assert ops.loc["aten::masked_fill", "depth"] == 0
    assert ops.loc["aten::copy_", "depth"] == 2
    parent = t.ops.loc[ops.loc["aten::copy_", "parent"], "name"]
    assert parent == "aten::clone"
    assert ops.loc["aten::copy_", "n_kernels_self"] == 1
    assert ops.loc["aten::copy_", "gpu_ns_self"] == 3001
    assert ops.loc["aten::masked_fill", "n_kernels_self"] == 0
    # out-of-place masked_fill = clone (copy_ -> Memcpy) + masked_fill_ (kernel), both inside it
    assert ops.loc["aten::masked_fill", "n_kernels"] == 2
    assert ops.loc["aten::masked_fill", "gpu_ns"] == 3001 + 2500
    assert ops.loc["aten::masked_fill", "step"] == 7
    assert ops.loc["aten::masked_fill", "annotation"] == "naive"


def test_nanoseconds_exact_for_absolute_epoch_timestamps(tmp_path):
    """1695835535123456.789 us needs 19 digits: a float parse would lose the ns."""
    raw = (
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
        '"ts": 1695835535123456.789, "dur": 1.001, "args": {"correlation": 1}},'
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
        '"ts": 1695835535123458.001, "dur": 0.999, "args": {"correlation": 2}}]}'
    )
    t = tv.load(write(tmp_path, None, raw=raw), cache=False)
    assert t.kernels["ts_ns"].tolist() == [1695835535123456789, 1695835535123458001]
    assert t.kernels["dur_ns"].tolist() == [1001, 999]
    assert t.kernels["ts_ns"].dtype == "int64"


def test_relative_timestamps_with_base_time(tmp_path):
    doc = {
        "baseTimeNanoseconds": 1775078550000000000,
        "traceEvents": [
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k",
                "pid": 0,
                "tid": 7,
                "ts": 2239812471046.585,
                "dur": 3.488,
                "args": {"correlation": 1},
            }
        ],
    }
    t = tv.load(write(tmp_path, doc), cache=False)
    assert t.kernels["ts_ns"].iloc[0] == 1775078550000000000 + 2239812471046585
    assert t.kernels["dur_ns"].iloc[0] == 3488


def test_2021_capitalised_categories_and_lowercase_external_id(tmp_path):
    events = [
        {
            "ph": "X",
            "cat": "Operator",
            "name": "ProfilerStep#2",
            "pid": 25738,
            "tid": "25738",
            "ts": 1623142623460100,
            "dur": 1000,
            "args": {"External id": 1},
        },
        {
            "ph": "X",
            "cat": "Operator",
            "name": "aten::conv2d",
            "pid": 25738,
            "tid": "25738",
            "ts": 1623142623460111,
            "dur": 25,
            "args": {"External id": 537},
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaLaunchKernel",
            "pid": 25738,
            "tid": "25738",
            "ts": 1623142623460112,
            "dur": 10,
            "args": {"correlation": 34417, "external id": 537},
        },
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "volta_sgemm_64x64_nn",
            "pid": 0,
            "tid": "stream 7",
            "ts": 1623142623460200,
            "dur": 5,
            "args": {"device": 0, "stream": 7, "correlation": 34417, "external id": 537},
        },
        {
            "ph": "X",
            "cat": "Memset",
            "name": "Memset (Device)",
            "pid": 0,
            "tid": "stream 7",
            "ts": 1623142623460300,
            "dur": 1,
            "args": {"correlation": 99999, "external id": 537},
        },
    ]
    t = tv.load(write(tmp_path, {"traceEvents": events}), cache=False)
    k = t.kernels.set_index("kind")
    assert k.loc["kernel", "op"] == "aten::conv2d"
    assert k.loc["kernel", "step"] == 2
    assert k.loc["kernel", "ts_ns"] == 1623142623460200000
    # No launch for the memset: the 2021 lower-case "external id" still names the op.
    assert k.loc["memset", "op"] == "aten::conv2d"
    assert k.loc["memset", "stream"] == 7  # from "stream 7" when args lack it
    assert t.ops["name"].tolist() == ["aten::conv2d"]


def test_bare_top_level_array(tmp_path):
    path = write(tmp_path, modern_events())
    t = tv.load(path, cache=False)
    assert len(t.kernels) == 2
    assert t.meta == {}


def test_gzip_detected_by_magic_whatever_the_suffix(tmp_path):
    doc = {"traceEvents": modern_events()}
    for name in ("trace.json", "trace.pt.trace.json.gz", "trace.bin"):
        t = tv.load(write(tmp_path, doc, name=name, gz=True), cache=False)
        assert len(t.kernels) == 2
    plain_named_gz = write(tmp_path, doc, name="plain.json.gz", gz=False)
    assert len(tv.load(plain_named_gz, cache=False).kernels) == 2


def test_string_and_int_pid_tid_mix(tmp_path):
    events = modern_events()
    for e in events:
        if e.get("pid") == 1:
            e["pid"], e["tid"] = "1", str(e["tid"])
    t = tv.load(write(tmp_path, {"traceEvents": events}), cache=False)
    assert t.kernels.set_index("kind").loc["memcpy", "op"] == "aten::copy_"


def test_rocm_hip_runtime_links(tmp_path):
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 5,
            "tid": 5,
            "ts": 10.0,
            "dur": 50.0,
            "args": {"External id": 8},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "hipLaunchKernel",
            "pid": 5,
            "tid": 5,
            "ts": 20.0,
            "dur": 5.0,
            "args": {"External id": 8, "stream": "0x0", "correlation": 117},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "Cijk_Alik_Bljk_SB_MT64x64x16",
            "pid": 2,
            "tid": 0,
            "ts": 30.0,
            "dur": 7.0,
            "args": {"External id": 8, "device": 2, "stream": 0, "correlation": 117},
        },
    ]
    t = tv.load(write(tmp_path, {"traceEvents": events}), cache=False)
    assert t.kernels["op"].tolist() == ["aten::mm"]
    assert t.kernels["device"].tolist() == [2]


def test_cuda_graph_launch_links_one_launch_to_many_kernels(tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "replay", "pid": 1, "tid": 1, "ts": 0.0, "dur": 100.0},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaGraphLaunch",
            "pid": 1,
            "tid": 1,
            "ts": 1.0,
            "dur": 5.0,
            "args": {"correlation": 55},
        },
    ] + [
        {
            "ph": "X",
            "cat": "kernel",
            "name": f"kernel_{i}",
            "pid": 0,
            "tid": 7,
            "ts": 10.0 + i,
            "dur": 0.5,
            "args": {"correlation": 55, "device": 0, "stream": 7},
        }
        for i in range(4)
    ]
    t = tv.load(write(tmp_path, {"traceEvents": events}), cache=False)
    assert (t.kernels["launch_name"] == "cudaGraphLaunch").all()
    assert (t.kernels["op"] == "replay").all()
    assert t.ops.set_index("name").loc["replay", "n_kernels"] == 4


def test_flow_events_link_when_kernel_lacks_correlation(tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 2.0,
            "dur": 1.0,
        },
        {"ph": "X", "cat": "kernel", "name": "add_kernel", "pid": 0, "tid": 7, "ts": 20.0, "dur": 1.0},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": 1, "tid": 1, "ts": 2.0},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": 0, "tid": 7, "ts": 20.0, "bp": "e"},
    ]
    t = tv.load(write(tmp_path, {"traceEvents": events}), cache=False)
    assert t.kernels["op"].tolist() == ["aten::add"]
    assert t.kernels["launch_name"].tolist() == ["cudaLaunchKernel"]


def test_missing_optional_fields_and_unknown_categories_tolerated(tmp_path):
    events = [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0, "dur": 2.0},  # no pid/tid/args
        {"ph": "X", "name": "no category", "ts": 1.0, "dur": 2.0},
        {"ph": "X", "cat": "brand_new_cat", "name": "x", "pid": 1, "tid": 1, "ts": 3.0},  # no dur
        {"ph": "i", "name": "instant", "ts": 4.0},
    ]
    t = tv.load(write(tmp_path, {"traceEvents": events}), cache=False)
    assert len(t.events) == 3
    assert len(t.kernels) == 1 and pd.isna(t.kernels["op"].iloc[0])


def test_launches_on_a_second_thread_count_for_the_step(tmp_path):
    """Backward-thread launches fall inside the main thread's ProfilerStep span."""
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#3",
            "pid": 1,
            "tid": 1,
            "ts": 0.0,
            "dur": 100.0,
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "autograd::engine::evaluate_function: MmBackward0",
            "pid": 1,
            "tid": 2,
            "ts": 50.0,
            "dur": 20.0,
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 2,
            "ts": 55.0,
            "dur": 2.0,
            "args": {"correlation": 1},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "ampere_sgemm_128x64_nn",
            "pid": 0,
            "tid": 7,
            "ts": 60.0,
            "dur": 2.0,
            "args": {"correlation": 1},
        },
    ]
    t = tv.load(write(tmp_path, {"traceEvents": events}), cache=False)
    assert t.kernels["step"].tolist() == [3]
    assert t.ops["step"].tolist() == [3]


@pytest.mark.parametrize("doc", [{"traceEvents": []}, []])
def test_empty_event_list_is_not_a_trace(tmp_path, doc):
    # issue 21: an empty capture used to load as empty frames and an all-zero summary
    with pytest.raises(tv.NotATraceError, match="no trace events"):
        tv.load(write(tmp_path, doc), cache=False)


def test_label_from_collector_metadata_else_file_stem(tmp_path):
    doc = {"traceview": {"variant": "sdpa_math"}, "traceEvents": modern_events()}
    assert tv.load(write(tmp_path, doc, name="x.json"), cache=False).label == "sdpa_math"
    assert (
        tv.load(
            write(tmp_path, {"traceEvents": modern_events()}, name="run1.pt.trace.json.gz", gz=True),
            cache=False,
        ).label
        == "run1"
    )
