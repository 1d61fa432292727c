"""Tests for the trace collectors (collectors/attention.py), run on the CPU.

The collectors run in-process with tiny shapes into ``tmp_path``; every trace
they produce is loaded with ``traceview.load`` and checked at the CPU-op level
(what holds on a CPU: the out-of-place ``masked_fill`` copy, the math backend's
op count and mask rebuild, annotations, metadata) and cross-checked against
``prof.key_averages()`` recorded in the same run.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO))

torch = pytest.importorskip("torch")

from collectors import attention  # noqa: E402  (after importorskip)

SAMPLES = REPO / "sample_traces"

TINY = dict(batch=1, heads=2, seq_len=16, head_dim=8, dtype="fp32", device="cpu", warmup=1, steps=2)
STEPS = TINY["steps"]

# Variants every torch build can run on a CPU.  sdpa_flash also runs on CPU
# (aten::_scaled_dot_product_flash_attention_for_cpu) in current torch.
CPU_VARIANTS = {"naive", "naive_inplace", "sdpa_math", "sdpa_auto"}
NO_CPU_KERNEL = {"sdpa_efficient", "sdpa_cudnn"}


# --------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """All variants collected once on the CPU: (out_dir, manifest, progress lines)."""
    out = tmp_path_factory.mktemp("attention")
    lines: list[str] = []
    manifest = attention.collect(out, progress=lines.append, **TINY)
    return out, manifest, lines


@pytest.fixture(scope="module")
def tv():
    traceview = pytest.importorskip("traceview")
    if not hasattr(traceview, "load"):
        pytest.skip("traceview.load is not available yet")
    return traceview


@pytest.fixture(scope="module")
def traces(run, tv):
    out, manifest, _ = run
    return {name: tv.load(out / entry["file"]) for name, entry in manifest["collected"].items()}


# --------------------------------------------------------------------------
# helpers


def _descendants(ops, row: int) -> list[int]:
    """Row labels of every op below ``row`` in the CPU op tree (via ``parent``)."""
    children: dict[int, list[int]] = {}
    for idx, parent in zip(ops.index, ops["parent"], strict=True):
        children.setdefault(int(parent), []).append(int(idx))
    found, todo = [], list(children.get(int(row), []))
    while todo:
        r = todo.pop()
        found.append(r)
        todo.extend(children.get(r, []))
    return found


def _names(ops, rows) -> set[str]:
    return {str(n) for n in ops.loc[rows, "name"]}


def _ops_per_step(trace) -> Counter:
    steps = trace.ops["step"].dropna()
    return Counter(int(s) for s in steps)


def _key_averages_view(ops) -> Counter:
    """Per-name op counts as ``prof.key_averages()`` sees them.

    key_averages() is built after torch's ``EventList._remove_dup_nodes()``:
    an op whose parent has the same name and no other child (e.g. the
    re-dispatched inner ``aten::mul`` under ``aten::mul``) is folded into the
    parent.  Replays that rule on traceview's op tree.
    """
    name = {int(i): str(n) for i, n in zip(ops.index, ops["name"], strict=True)}
    parent = {int(i): int(p) for i, p in zip(ops.index, ops["parent"], strict=True)}
    children: dict[int, list[int]] = {}
    for i in sorted(parent):
        children.setdefault(parent[i], []).append(i)
    alive = sorted(parent)
    while True:
        deleted = set()
        for i in alive:
            p = parent[i]
            if p != -1 and name[p] == name[i] and len(children.get(p, [])) == 1:
                children[p] = children.get(i, [])
                for c in children[p]:
                    parent[c] = p
                deleted.add(i)
        if not deleted:
            break
        alive = [i for i in alive if i not in deleted]
    return Counter(name[i] for i in alive)


def _meta(trace) -> dict:
    meta = trace.meta["traceview"]
    return json.loads(meta) if isinstance(meta, str) else meta


def _raw_trace(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


# --------------------------------------------------------------------------
# package / CLI plumbing (no traceview needed)


def test_collectors_package_does_not_import_torch():
    code = "import sys, collectors; assert 'torch' not in sys.modules, 'collectors imported torch'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_every_variant_is_collected_or_skipped(run):
    out, manifest, lines = run
    collected, skipped = set(manifest["collected"]), set(manifest["skipped"])
    assert collected | skipped == set(attention.VARIANTS)
    assert not collected & skipped
    assert collected >= CPU_VARIANTS
    # torch has no CPU kernel for these: skipped, with the reason recorded.
    assert skipped >= NO_CPU_KERNEL
    for name in skipped:
        entry = manifest["skipped"][name]
        assert entry["backend"] == attention.VARIANTS[name]
        assert entry["reason"].strip()
        assert not (out / f"{name}.json.gz").exists()
    # progress: at least one line per variant, and every skip says why
    for name in attention.VARIANTS:
        assert any(name in line for line in lines), name
    for name in skipped:
        assert any(
            "skip" in line and name in line and manifest["skipped"][name]["reason"] in line for line in lines
        )


def test_manifest_on_disk_matches_files(run):
    out, manifest, _ = run
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk == json.loads(json.dumps(manifest))
    assert manifest["config"]["device"] == "cpu"
    assert manifest["config"]["torch"] == torch.__version__
    for name, entry in manifest["collected"].items():
        path = out / entry["file"]
        assert entry["file"] == f"{name}.json.gz"
        assert path.stat().st_size == entry["size"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]
        assert entry["steps"] == STEPS
        assert len(entry["step_wall_s"]) == STEPS
        assert entry["mean_step_wall_s"] > 0
        faults = entry["minor_faults_per_step"]
        assert len(faults) == STEPS and all(isinstance(f, int) and f >= 0 for f in faults)
        assert entry["annotations_in_trace"] == STEPS
        assert entry["metadata_via"] == "add_metadata_json"
        assert entry["max_abs_err"] <= 1e-4


def test_page_faults_of_a_step_are_counted_and_named(tmp_path):
    """A step that takes 16 MiB of fresh memory each time (mmapped, touched, freed) faults ~4,096
    times per step, and the collector's note says so; the note is silent on GPU runs and at 0."""
    from collectors.profiling import profile_variant
    from collectors.run import fault_note

    def fresh() -> None:
        import mmap

        with mmap.mmap(-1, 16 << 20) as buf:  # new pages every call, each faulted in on first touch
            for at in range(0, len(buf), 4096):
                buf[at] = 1

    entry = profile_variant(fresh, name="fresh", out_path=str(tmp_path / "fresh.json.gz"),
                            metadata={}, device="cpu", warmup=1, steps=3)  # fmt: skip
    faults = entry["minor_faults_per_step"]
    assert len(faults) == 3 and min(faults) >= 4000, faults
    note = fault_note(faults, "cpu")
    assert f"median {sorted(faults)[1]:,} minor page faults per step" in note and "jemalloc" in note
    assert fault_note(faults, "cuda") == "" and fault_note(None, "cpu") == ""
    assert fault_note([0, 0, 7], "cpu") == ""  # the median step took no fresh memory


def test_manifest_records_torch_flop_counter(run):
    """Each collected variant's manifest entry holds FlopCounterMode's count of one forward."""
    _, manifest, _ = run
    b, h, s, d = (TINY[k] for k in ("batch", "heads", "seq_len", "head_dim"))
    two_bmms = 2 * (2 * b * h * s * s * d)  # q @ k^T and p @ v, 2 FLOPs per multiply-add
    for name, entry in manifest["collected"].items():
        fc = entry["flop_counter"]
        assert fc["total"] == sum(fc["by_op"].values())
        if name in ("naive", "naive_inplace", "sdpa_math"):  # math decomposes into bmm
            assert fc["by_op"] == {"aten.bmm": two_bmms}
        else:  # torch registers no formula for the CPU flash op
            assert fc["total"] == 0


def test_attention_op_recorded_per_sdpa_variant(run):
    _, manifest, _ = run
    c = manifest["collected"]
    assert c["naive"]["attention_ops"] == []
    assert c["sdpa_math"]["attention_ops"] == ["aten::_scaled_dot_product_attention_math"]
    if "sdpa_flash" in c:
        assert c["sdpa_flash"]["attention_ops"] == ["aten::_scaled_dot_product_flash_attention_for_cpu"]


def test_cudnn_on_cpu_is_skipped_with_reason(tmp_path):
    manifest = attention.collect(tmp_path, ["naive", "sdpa_cudnn"], **TINY)
    assert list(manifest["collected"]) == ["naive"]
    reason = manifest["skipped"]["sdpa_cudnn"]["reason"]
    assert "CUDNN_ATTENTION" in reason and "cpu" in reason
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "naive.json.gz"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_requested_without_cuda_skips_everything(tmp_path):
    manifest = attention.collect(tmp_path, **{**TINY, "device": "cuda"})
    assert manifest["collected"] == {}
    assert set(manifest["skipped"]) == set(attention.VARIANTS)
    assert all("CUDA not available" in s["reason"] for s in manifest["skipped"].values())
    assert attention.main(["--device", "cuda", "--out", str(tmp_path / "cli")]) == 1


def test_wrong_result_is_skipped_and_never_profiled(tmp_path, monkeypatch):
    real = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(
        torch.nn.functional, "scaled_dot_product_attention", lambda *a, **k: real(*a, **k) * 1.5
    )
    manifest = attention.collect(tmp_path, ["naive", "sdpa_math", "sdpa_auto"], **TINY)
    assert list(manifest["collected"]) == ["naive"]
    for name in ("sdpa_math", "sdpa_auto"):
        assert manifest["skipped"][name]["reason"].startswith("wrong result: max abs err")
        assert not (tmp_path / f"{name}.json.gz").exists()


def test_stale_trace_of_a_skipped_variant_is_removed(tmp_path):
    (tmp_path / "sdpa_cudnn.json.gz").write_bytes(b"old")
    attention.collect(tmp_path, ["sdpa_cudnn"], **TINY)
    assert not (tmp_path / "sdpa_cudnn.json.gz").exists()


def test_cli(tmp_path, capsys):
    argv = [
        "--device", "cpu", "--dtype", "fp32", "--batch", "1", "--heads", "1",
        "--seq-len", "8", "--head-dim", "4", "--warmup", "1", "--steps", "1",
        "--variants", "naive_inplace,sdpa_cudnn", "--out", str(tmp_path),
    ]  # fmt: skip
    assert attention.main(argv) == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert list(manifest["collected"]) == ["naive_inplace"]
    assert list(manifest["skipped"]) == ["sdpa_cudnn"]
    err = capsys.readouterr().err
    assert "naive_inplace" in err and "skip" in err and "1 collected, 1 skipped" in err
    with pytest.raises(SystemExit):
        attention.main(["--variants", "nope", "--out", str(tmp_path)])


def test_bad_arguments_raise_before_any_work(tmp_path):
    with pytest.raises(ValueError):
        attention.collect(tmp_path / "a", ["nope"], **TINY)
    with pytest.raises(ValueError):
        attention.collect(tmp_path / "b", **{**TINY, "dtype": "int8"})
    with pytest.raises(ValueError):
        attention.collect(tmp_path / "c", **{**TINY, "device": "tpu"})


def test_bf16_on_cpu_collects(tmp_path):
    manifest = attention.collect(tmp_path, ["naive", "sdpa_math"], **{**TINY, "dtype": "bf16"})
    assert set(manifest["collected"]) == {"naive", "sdpa_math"}
    assert _raw_trace(tmp_path / "sdpa_math.json.gz")["traceview"]["dtype"] == "bf16"


# --------------------------------------------------------------------------
# the traces, read back with traceview


def test_every_trace_carries_metadata(run, traces):
    _, manifest, _ = run
    for name, trace in traces.items():
        meta = _meta(trace)
        assert meta["variant"] == name
        if hasattr(trace, "label"):  # traceview names a trace after its variant
            assert trace.label == name
        assert meta["backend"] == attention.VARIANTS[name]
        assert meta["collector"] == "collectors.attention"
        assert meta["collector_version"] == manifest["collector_version"]
        for key in ("batch", "heads", "seq_len", "head_dim", "dtype", "device", "warmup", "steps"):
            assert meta[key] == TINY[key], key
        assert meta["torch"] == torch.__version__
        assert meta["cuda"] == torch.version.cuda
        assert meta["device_name"]
        assert meta["minor_faults_per_step"] == manifest["collected"][name]["minor_faults_per_step"]


def test_every_step_carries_the_variant_annotation(traces):
    for name, trace in traces.items():
        ev = trace.events
        ann = ev[(ev["cat"] == "user_annotation") & (ev["name"] == name)]
        assert len(ann) == STEPS, name
        steps = ev[ev["name"].astype(str).str.startswith("ProfilerStep#")]
        assert len(steps) == STEPS, name
        # one annotation inside each ProfilerStep#N
        for _, s in steps.iterrows():
            inside = ann[
                (ann["ts_ns"] >= s["ts_ns"]) & (ann["ts_ns"] + ann["dur_ns"] <= s["ts_ns"] + s["dur_ns"])
            ]
            assert len(inside) == 1, (name, s["name"])
        ops = trace.ops
        assert len(ops) > 0
        assert set(ops["annotation"].dropna().astype(str)) == {name}
        assert ops["annotation"].notna().all(), name
        assert ops["step"].notna().all(), name
        assert len(_ops_per_step(trace)) == STEPS
        assert trace.kernels.empty  # CPU trace


def test_naive_masked_fill_copies_the_scores(traces):
    ops = traces["naive"].ops
    fills = ops.index[ops["name"] == "aten::masked_fill"]
    assert len(fills) == STEPS
    for row in fills:
        below = _names(ops, _descendants(ops, row))
        assert below & {"aten::clone", "aten::copy_"}, below
        assert "aten::masked_fill_" in below


def test_inplace_masked_fill_does_not_copy(traces):
    ops = traces["naive_inplace"].ops
    assert not (ops["name"] == "aten::masked_fill").any()
    fills = ops.index[ops["name"] == "aten::masked_fill_"]
    assert len(fills) == STEPS
    for row in fills:
        below = _names(ops, _descendants(ops, row))
        assert not below & {"aten::clone", "aten::copy_"}, below
    assert not (ops["name"] == "aten::clone").any()


def test_math_backend_rebuilds_mask_and_runs_more_ops(traces):
    math_ops = traces["sdpa_math"].ops
    per_step_math = _ops_per_step(traces["sdpa_math"])
    counts = Counter(str(n) for n in math_ops["name"])
    # the causal mask is rebuilt every call, and softmax is the "safe" one
    for op in ("aten::ones", "aten::tril", "aten::_safe_softmax", "aten::_scaled_dot_product_attention_math"):
        assert counts[op] == STEPS, op
    # compare with the fused CPU flash kernel when this build has it, else with
    # the hand-written naive version
    other = "sdpa_flash" if "sdpa_flash" in traces else "naive"
    per_step_other = _ops_per_step(traces[other])
    assert min(per_step_math.values()) > max(per_step_other.values())
    # every step of a variant runs the same ops (steady state)
    for trace in traces.values():
        assert len(set(_ops_per_step(trace).values())) == 1


def test_op_counts_agree_with_the_profiler(run, traces):
    """traceview's per-name op counts == the profiler's own, exactly.

    * against the raw profiler events (``trace_op_counts``): identical;
    * against ``prof.key_averages()`` (``op_counts``): identical once torch's
      same-name-only-child folding is replayed on traceview's op tree.
    """
    _, manifest, _ = run
    for name, trace in traces.items():
        entry = manifest["collected"][name]
        ours = {str(k): int(v) for k, v in trace.ops["name"].astype(str).value_counts().items()}
        assert ours == entry["trace_op_counts"], name
        assert dict(_key_averages_view(trace.ops)) == entry["op_counts"], name
        ev = trace.events
        ann = ev[ev["cat"] == "user_annotation"]["name"].astype(str)
        assert int((ann == name).sum()) == entry["annotation_counts"][name]
        assert int(ann.str.startswith("ProfilerStep#").sum()) == entry["annotation_counts"]["ProfilerStep*"]
        assert entry["other_counts"] == {}  # CPU trace: no runtime calls


# --------------------------------------------------------------------------
# the committed sample traces


def _sample_manifest() -> dict:
    path = SAMPLES / "manifest.json"
    if not path.exists():
        pytest.skip("sample_traces/manifest.json not present")
    return json.loads(path.read_text())


def test_sample_traces_match_their_manifest():
    manifest = _sample_manifest()
    assert set(manifest["collected"]) >= CPU_VARIANTS
    for name, entry in manifest["collected"].items():
        path = SAMPLES / entry["file"]
        data = path.read_bytes()
        assert len(data) == entry["size"] < 200_000
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert _raw_trace(path)["traceview"]["variant"] == name
    for entry in manifest["skipped"].values():
        assert entry["reason"]


def test_sample_traces_load_with_traceview(tv):
    manifest = _sample_manifest()
    for name, entry in manifest["collected"].items():
        trace = tv.load(SAMPLES / entry["file"])
        assert _meta(trace)["variant"] == name
        ours = {str(k): int(v) for k, v in trace.ops["name"].astype(str).value_counts().items()}
        assert ours == entry["trace_op_counts"], name
        assert dict(_key_averages_view(trace.ops)) == entry["op_counts"], name


# --------------------------------------------------------------------------
# collectors/mlp.py (second collector)


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory):
    from collectors import mlp

    out = tmp_path_factory.mktemp("mlp")
    manifest = mlp.collect(
        out, tokens=8, d_model=16, d_ff=32, dtype="bf16", device="cpu", warmup=1, steps=STEPS
    )
    return out, manifest


def test_mlp_variants_show_their_ops(mlp_run, tv):
    out, manifest = mlp_run
    assert set(manifest["collected"]) == {"linear", "matmul_add", "autocast"}
    counts = {}
    for name, entry in manifest["collected"].items():
        trace = tv.load(out / entry["file"])
        assert _meta(trace)["variant"] == name
        ours = Counter(str(n) for n in trace.ops["name"])
        assert dict(ours) == entry["trace_op_counts"], name
        assert dict(_key_averages_view(trace.ops)) == entry["op_counts"], name
        counts[name] = ours
    assert counts["linear"]["aten::addmm"] == 2 * STEPS and counts["linear"]["aten::add"] == 0
    assert counts["matmul_add"]["aten::addmm"] == 0 and counts["matmul_add"]["aten::add"] == 2 * STEPS
    # autocast re-casts x and the four fp32 parameters to bf16 on every step
    assert counts["autocast"]["aten::_to_copy"] == 5 * STEPS
    assert counts["linear"]["aten::_to_copy"] == 0


def test_mlp_autocast_needs_low_precision(tmp_path):
    from collectors import mlp

    manifest = mlp.collect(
        tmp_path, ["autocast"], tokens=4, d_model=8, d_ff=8, dtype="fp32", device="cpu", warmup=1, steps=1
    )
    assert manifest["collected"] == {}
    assert "autocast" in manifest["skipped"]["autocast"]["reason"]
    assert (
        mlp.main(
            ["--device", "cpu", "--dtype", "fp32", "--variants", "autocast", "--out", str(tmp_path / "cli")]
        )
        == 1
    )


def test_traceview_collect_fronts_the_collector(tmp_path):
    from click.testing import CliRunner

    from traceview.cli import main

    out = tmp_path / "c"
    result = CliRunner().invoke(
        main,
        [
            "collect",
            "attention",
            "--device",
            "cpu",
            "--dtype",
            "fp32",
            "--batch",
            "1",
            "--heads",
            "1",
            "--seq-len",
            "16",
            "--head-dim",
            "8",
            "--warmup",
            "1",
            "--steps",
            "1",
            "--variants",
            "naive",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    import traceview as tv

    assert tv.load(out / "naive.json.gz", cache=False).label == "naive"


# --------------------------------------------------------------------------
# help: `traceview collect --help` and each collector's own --help


@pytest.mark.parametrize("args", [["collect", "--help"], ["collect", "-h"]])
def test_traceview_collect_help(args):
    from click.testing import CliRunner

    from traceview.cli import main

    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output and "collect" in result.output
    assert "attention" in result.output and "mlp" in result.output


@pytest.mark.parametrize("which", ["attention", "mlp"])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_traceview_collect_collector_help(which, flag):
    from click.testing import CliRunner

    from traceview.cli import main

    result = CliRunner().invoke(main, ["collect", which, flag])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"usage: traceview collect {which} ")
    assert "python -m collectors" not in result.output
    assert "--out" in result.output and "--device" in result.output


def test_collect_help_in_a_real_process():
    for args, usage in (
        (["collect", "--help"], "Usage: "),
        (["collect", "attention", "--help"], "usage: traceview collect attention "),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "traceview", *args], cwd=REPO, capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(usage) and r.stderr == ""


def test_collector_module_keeps_its_own_usage():
    r = subprocess.run(
        [sys.executable, "-m", "collectors.attention", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout.startswith("usage: python -m collectors.attention ")


def test_collector_usage_errors_name_the_command():
    from click.testing import CliRunner

    from traceview.cli import main

    result = CliRunner().invoke(main, ["collect", "attention", "--variants", "nope"])
    assert result.exit_code == 2
    assert "traceview collect attention: error: argument --variants" in result.output
    result = CliRunner().invoke(main, ["collect", "nope"])
    assert result.exit_code == 2 and "nope" in result.output


def test_sample_traces_memory_per_op_equals_what_torch_measured_live(tv):
    """issue 19: the manifest holds torch's own per-op memory (key_averages' self memory usage, the
    net of an op's own allocations and frees); traceview's net_bytes per op name, read from the
    trace's [memory] events, equals it for every op either one reports. CPU: no live peak."""
    manifest = _sample_manifest()
    for name, entry in manifest["collected"].items():
        live = entry["memory"]
        assert live["peak_allocated_bytes"] is None and live["peak_source"].startswith("none")
        torch_self = {op: v["self_bytes"] for op, v in live["ops"].items() if op.startswith("aten::")}
        ops = tv.memory(SAMPLES / entry["file"], cache=False).tables["ops"]
        ours = ops[ops["op"] != "(no op)"].groupby("op")["net_bytes"].sum()
        ours = {str(op): int(v) for op, v in ours.items() if v}
        assert ours == {op: v for op, v in torch_self.items() if v}, name
