"""Profiling one variant into a gzipped Kineto trace file plus its manifest entry.

Loop layout (``torch.profiler.schedule(wait, warmup, active=steps,
repeat=1)``): ``wait`` unprofiled iterations, ``warmup`` iterations with the
profiler running but discarded, then ``steps`` recorded iterations, each a
``ProfilerStep#N`` holding one ``record_function(name)`` annotation around
``step()`` run under ``torch.no_grad()``.  On CUDA each iteration ends with
``torch.cuda.synchronize()`` (inside ``ProfilerStep#N``, outside the
annotation) so the per-step wall times are honest.

The manifest entry has the file, sha256, size, steps, warmup, step wall
times, and the op counts of ``prof.key_averages()`` over the recorded steps
(``op_counts``: CPU ops, ``annotation_counts``: user annotations incl.
``ProfilerStep*``, ``python_counts``: the Python functions ``with_stack`` records,
``instant_counts``: instant events (``[memory]``, from ``profile_memory``),
``other_counts``: anything else, e.g. CUDA runtime calls),
plus ``trace_op_counts``: the CPU ops of the raw profiler events, i.e. exactly
the ``cpu_op`` events in the trace file.  The two differ where
``key_averages()`` folds an op into a same-named parent whose only child it is
(torch's ``EventList._remove_dup_nodes``).

Every variant is recorded with ``profile_memory=True`` (the ``[memory]`` events) and
``with_stack=True`` (the ``python_function`` events), and its entry gains ``memory``: what torch
measured live, to check the trace against. ``peak_allocated_bytes`` is
``torch.cuda.max_memory_allocated()`` over the recorded steps on CUDA; torch has no such
counter for the CPU allocator, so there it is null and ``peak_source`` says so. ``ops`` is
torch's own per-op memory from ``key_averages()`` over the recorded steps (op name ->
``count``, ``self_bytes`` and ``bytes``: the self and inclusive memory usage torch reports
for the variant's device, the net of allocations and frees inside the op).

Only the collectors import this module; it imports torch lazily so that
``import collectors`` stays torch-free.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from . import METADATA_KEY
from ._common import gzip_file, sha256_file, synchronize


def profile_variant(
    step: Callable[[], Any],
    *,
    name: str,
    out_path: str,
    metadata: dict[str, Any],
    device: str,
    warmup: int,
    steps: int,
    wait: int = 1,
) -> dict[str, Any]:
    """Profile ``step`` and write the gzipped Kineto trace to ``out_path``.

    ``metadata`` is recorded under the single top-level trace key
    ``"traceview"``.  Returns the manifest entry (see the module docstring).
    Raises whatever ``step`` raises (callers catch ``RuntimeError``); no file
    is left behind in that case.
    """
    if steps < 1:
        raise ValueError("steps must be >= 1")
    if warmup < 0 or wait < 0:
        raise ValueError("warmup and wait must be >= 0")

    out_dir = os.path.dirname(os.path.abspath(out_path))
    fd, tmp_json = tempfile.mkstemp(prefix=f".{name}.", suffix=".json", dir=out_dir)
    os.close(fd)
    try:
        prof, step_wall_s, faults, peak = _run_schedule(
            step, name=name, metadata=metadata, device=device, wait=wait, warmup=warmup, steps=steps
        )
        metadata_via, n_annotations = _export_trace(prof, tmp_json, metadata, name, faults)
        gzip_file(tmp_json, out_path)
    finally:
        if os.path.exists(tmp_json):
            os.remove(tmp_json)

    return {
        "file": os.path.basename(out_path),
        "sha256": sha256_file(out_path),
        "size": os.path.getsize(out_path),
        "steps": steps,
        "warmup": warmup,
        "wait": wait,
        "step_wall_s": step_wall_s,
        "mean_step_wall_s": sum(step_wall_s) / len(step_wall_s),
        "minor_faults_per_step": faults,
        "annotations_in_trace": n_annotations,
        "metadata_via": metadata_via,
        **_op_counts(prof),
        "memory": {**peak, "ops": _op_memory(prof, device)},
    }


def _run_schedule(step, *, name, metadata, device, wait, warmup, steps):
    """Run ``wait + warmup + steps`` iterations under the profiler.

    Returns the (finished) profiler, the wall time and the minor page faults of each recorded step
    (None where the platform has no ``resource``), and the live peak.
    """
    import torch
    from torch.profiler import ProfilerAction, ProfilerActivity, profile, record_function, schedule

    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    meta_json = json.dumps(metadata)
    first_active = wait + warmup
    step_wall_s: list[float] = []
    faults: list[int] | None = [] if _minor_faults() is not None else None
    metadata_added = False
    prof = profile(
        activities=activities,
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
        schedule=schedule(wait=wait, warmup=warmup, active=steps, repeat=1),
    )
    with prof:
        for i in range(wait + warmup + steps):
            # Kineto only accepts metadata while it is initialised, i.e. once
            # the schedule has left its "wait" phase.
            if not metadata_added and prof.current_action != ProfilerAction.NONE:
                prof.add_metadata_json(METADATA_KEY, meta_json)
                metadata_added = True
            if i == first_active and device == "cuda":
                torch.cuda.reset_peak_memory_stats()  # the peak of the recorded steps only
            f0, t0 = _minor_faults(), time.perf_counter()
            with torch.no_grad(), record_function(name):
                step()
            synchronize(device)
            t1, f1 = time.perf_counter(), _minor_faults()
            if i >= first_active:
                step_wall_s.append(t1 - t0)
                if faults is not None and f0 is not None and f1 is not None:
                    faults.append(f1 - f0)
            prof.step()
    if device == "cuda":
        peak = {"peak_allocated_bytes": int(torch.cuda.max_memory_allocated()),
                "peak_source": "torch.cuda.max_memory_allocated() over the recorded steps"}  # fmt: skip
    else:
        peak = {"peak_allocated_bytes": None, "peak_source": f"none: torch keeps no peak for {device}"}
    return prof, step_wall_s, faults, peak


def _minor_faults() -> int | None:
    """The process's minor page faults so far (None without ``resource``, e.g. on Windows).

    Why count them: on the CPU, glibc malloc under the profiler lands some processes in a state where
    every step's large tensors come from fresh heap memory (the profiler's own small allocations
    split the freed blocks): ~2,000 faults per step and 2.5x the time, for the whole run; other
    processes of the same code fault 0 times (benchmarks/README.md, issue 33).
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Unix
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def _op_memory(prof, device: str) -> dict[str, dict[str, int]]:
    """torch's own per-op memory from key_averages(): count, self and inclusive bytes on ``device``
    (torch names the CUDA figures ``*_device_memory_usage``, older versions ``*_cuda_memory_usage``)."""
    out: dict[str, dict[str, int]] = {}
    for row in prof.key_averages():
        if device == "cuda":
            own = getattr(row, "self_device_memory_usage", getattr(row, "self_cuda_memory_usage", 0))
            total = getattr(row, "device_memory_usage", getattr(row, "cuda_memory_usage", 0))
        else:
            own, total = row.self_cpu_memory_usage, row.cpu_memory_usage
        if own or total:
            out[row.key] = {"count": int(row.count), "self_bytes": int(own), "bytes": int(total)}
    return dict(sorted(out.items()))


def _export_trace(
    prof, tmp_json: str, metadata: dict[str, Any], name: str, faults: list[int] | None = None
) -> tuple[str, int]:
    """Write the Chrome trace to ``tmp_json``, making sure it holds ``metadata``, and, where counted,
    the recorded steps' minor page faults (known only after the steps, so written in afterwards:
    ``traceview check`` names a run whose steps took fresh memory).

    Returns how the metadata got in and how many ``name`` annotations it has.
    """
    prof.export_chrome_trace(tmp_json)
    with open(tmp_json, encoding="utf-8") as fh:
        trace = json.load(fh)
    metadata_via = "add_metadata_json"
    if trace.get(METADATA_KEY) != metadata:
        # Defensive: should not happen with torch >= 2.1, but a trace
        # without its metadata is useless, so write it in ourselves.
        trace[METADATA_KEY] = metadata
        metadata_via = "post-processed"
    if faults is not None or metadata_via == "post-processed":
        if faults is not None:
            trace[METADATA_KEY] = {**trace[METADATA_KEY], "minor_faults_per_step": faults}
        with open(tmp_json, "w", encoding="utf-8") as fh:
            json.dump(trace, fh)
    n_annotations = sum(
        1
        for ev in trace.get("traceEvents", [])
        if ev.get("ph") == "X" and ev.get("cat") == "user_annotation" and ev.get("name") == name
    )
    return metadata_via, n_annotations


def _op_counts(prof) -> dict[str, dict[str, int]]:
    """``op_counts``, ``trace_op_counts``, ``annotation_counts``, ``other_counts``."""
    kinds, trace_op_counts = _kineto_kinds(prof)
    op_counts: dict[str, int] = {}
    annotation_counts: dict[str, int] = {}
    other_counts: dict[str, int] = {}
    python_counts: dict[str, int] = {}
    instant_counts: dict[str, int] = {}
    for row in prof.key_averages():
        kind = kinds.get(row.key, "cpu_op")
        if row.is_user_annotation:
            annotation_counts[row.key] = int(row.count)
        elif kind == "cpu_op":
            op_counts[row.key] = int(row.count)
        elif kind == "python_function":  # with_stack=True: one row per Python function called
            python_counts[row.key] = int(row.count)
        elif kind == "cpu_instant_event":  # profile_memory=True: the [memory] events
            instant_counts[row.key] = int(row.count)
        else:
            other_counts[row.key] = int(row.count)
    return {
        "op_counts": dict(sorted(op_counts.items())),
        "trace_op_counts": dict(sorted(trace_op_counts.items())),
        "annotation_counts": dict(sorted(annotation_counts.items())),
        "other_counts": dict(sorted(other_counts.items())),
        "python_counts": dict(sorted(python_counts.items())),
        "instant_counts": dict(sorted(instant_counts.items())),
    }


def _kineto_kinds(prof) -> tuple[dict[str, str], dict[str, int]]:
    """Activity type per event name, and the CPU-op counts of the raw events.

    key_averages() rows carry no activity type, so they are classified by the
    raw kineto events.  Those events are exactly what the trace file holds;
    key_averages() is built from them after torch's
    EventList._remove_dup_nodes(), which drops an op whose parent has the same
    name and no other child (e.g. the re-dispatched inner aten::mul under
    aten::mul), so its counts can be lower than the trace's.  Both are recorded.
    """
    kinds: dict[str, str] = {}
    trace_op_counts: dict[str, int] = {}
    try:
        for ev in prof.profiler.kineto_results.events():
            kind = str(ev.activity_type())
            kinds.setdefault(ev.name(), kind)
            if kind == "cpu_op":
                trace_op_counts[ev.name()] = trace_op_counts.get(ev.name(), 0) + 1
    except Exception:  # pragma: no cover - private API moved; fall back below
        kinds, trace_op_counts = {}, {}
    return kinds, trace_op_counts
