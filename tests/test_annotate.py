"""``traceview annotate``: every corpus trace written back with its classification reloads
with identical events and GPU activities, carries the classification in each GPU
activity's args, and loads in HTA."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus import CORPUS, corpus_params

import traceview as tv
from traceview.analyses.trace.annotate import PREFIX, gpu_annotations
from traceview.cli import main
from traceview.render.annotated import COUNTER, write_annotated

GPU_CATS = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"}


@pytest.mark.parametrize("path", corpus_params())
def test_annotated_trace_reloads_identically(path, tmp_path):
    t = tv.load(path)
    out = tmp_path / "annotated.json.gz"
    counts = write_annotated(t, gpu_annotations(t), out)
    back = tv.load(out, cache=False)
    assert back.events.equals(t.events)
    cols = ["name", "kind", "ts_ns", "dur_ns", "category", "step"]
    assert back.kernels[cols].equals(t.kernels[cols])
    events = json.loads(gzip.decompress(out.read_bytes()))
    events = events["traceEvents"] if isinstance(events, dict) else events
    gpu = [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() in GPU_CATS]
    assert counts["activities"] == len(t.kernels)
    tagged = [e for e in gpu if PREFIX + "category" in e.get("args", {})]
    assert len(tagged) == len(t.kernels)
    assert {e["args"][PREFIX + "category"] for e in tagged} == set(t.kernels["category"].astype(str))
    counters = [e for e in events if e.get("ph") == "C"]
    assert all(e["name"] == COUNTER for e in counters)
    assert bool(counters) == bool(len(t.kernels) and t.kernels["step"].notna().any())


HTA_TRACES = [
    "tokenomics/trace0.json.gz",
    "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
]


@pytest.mark.parametrize("name", HTA_TRACES)
def test_annotated_trace_loads_in_hta(name, tmp_path):
    pytest.importorskip("hta")
    if not (CORPUS / name).exists():
        pytest.skip(f"corpus not found at {CORPUS}")
    from traceview.interop.hta import gpu_events, to_hta

    t = tv.load(CORPUS / name)
    out = tmp_path / "annotated.json.gz"
    write_annotated(t, gpu_annotations(t), out)
    orig, ann = to_hta(t), to_hta(str(out))
    g0, g1 = gpu_events(orig, orig.t.get_ranks()[0]), gpu_events(ann, ann.t.get_ranks()[0])
    assert len(g1) == len(g0) and float(g1["dur"].sum()) == pytest.approx(float(g0["dur"].sum()))


def test_annotate_cli_one_line_errors(tmp_path):
    sample = Path(__file__).resolve().parents[1] / "sample_traces" / "naive.json.gz"
    r = CliRunner().invoke(main, ["annotate", str(sample), "-o", str(tmp_path / "x.txt")])
    assert r.exit_code == 1 and "must end in .json" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["annotate", str(sample), "-o", str(tmp_path / "ok.json")])
    assert r.exit_code == 0, r.output
    assert tv.load(tmp_path / "ok.json", cache=False).events.equals(tv.load(sample).events)


def test_annotate_reads_compression_by_magic_bytes(tmp_path):
    """gzip or not is read from the file's first bytes, whatever its name (as every command
    does); the output's name picks the output's compression."""
    import synth

    packed = Path(synth.make(tmp_path, "sdpa_math", name="made"))
    cases = {
        "gzip_named_plain.json": packed.read_bytes(),
        "plain_named_gzip.json.gz": gzip.decompress(packed.read_bytes()),
    }
    for name, data in cases.items():
        src = tmp_path / name
        src.write_bytes(data)
        for out in (tmp_path / f"out_{name}.json", tmp_path / f"out_{name}.json.gz"):
            r = CliRunner().invoke(main, ["annotate", str(src), "-o", str(out), "--no-cache"])
            assert r.exit_code == 0, (name, r.output)
            assert (out.read_bytes()[:2] == b"\x1f\x8b") == out.name.endswith(".gz")
            t, back = tv.load(src, cache=False), tv.load(out, cache=False)
            assert back.events.equals(t.events) and len(t.kernels) > 0
            assert back.kernels["category"].astype(str).tolist() == t.kernels["category"].astype(str).tolist()


def test_annotate_copies_events_the_load_skipped(tmp_path):
    """A complete event the load skips (here: no ts) no longer makes annotate refuse the
    whole trace: it is copied as it is and counted; every loaded activity is annotated."""
    import synth

    doc = synth.attention_trace("sdpa_math")
    kernel = next(e for e in doc["traceEvents"] if e["cat"] == "kernel")
    no_start = {k: v for k, v in kernel.items() if k != "ts"}  # same name as a kernel, no start
    doc["traceEvents"].insert(doc["traceEvents"].index(kernel), no_start)
    src = synth.write(tmp_path / "skips.json.gz", doc)
    out = tmp_path / "out.json"
    r = CliRunner().invoke(main, ["annotate", src, "-o", str(out), "--no-cache"])
    assert r.exit_code == 0, r.output
    assert "1 complete events the load skipped are copied unannotated" in r.stderr
    t = tv.load(src, cache=False)
    assert tv.load(out, cache=False).events.equals(t.events)
    events = json.loads(out.read_text())["traceEvents"]
    assert no_start in events  # unannotated, as it was
    tagged = [e for e in events if PREFIX + "category" in e.get("args", {})]
    assert len(tagged) == len(t.kernels) and all("ts" in e for e in tagged)
