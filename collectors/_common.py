"""Shared machinery for the collectors: profiling one variant into a trace file,
environment description, dtype handling, manifest writing.

Only the collectors import this module; it imports torch lazily so that
``import collectors`` stays torch-free.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

from . import COLLECTOR_VERSION, METADATA_KEY

#: dtype names accepted on the command line -> canonical short name.
DTYPE_ALIASES = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
}

#: (atol, rtol) used to compare a variant's output with the fp32 naive
#: reference.  bf16 has 8 mantissa bits (eps 7.8e-3), fp16 has 11 (eps 9.8e-4).
TOLERANCES = {
    "fp32": (1e-4, 1e-4),
    "bf16": (2e-2, 2e-2),
    "fp16": (3e-3, 3e-3),
}

#: Name of the trace file written for a variant (deterministic).
TRACE_SUFFIX = ".json.gz"


class Skip(Exception):
    """A variant cannot (or must not) be profiled; ``str(exc)`` is the reason."""


def canonical_dtype(name: str) -> str:
    try:
        return DTYPE_ALIASES[name.lower()]
    except KeyError:
        raise ValueError(
            f"unknown dtype {name!r}; expected one of {sorted(set(DTYPE_ALIASES))}"
        ) from None


def torch_dtype(name: str):
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[
        canonical_dtype(name)
    ]


def trace_file_name(variant: str) -> str:
    return f"{variant}{TRACE_SUFFIX}"


def cpu_name() -> str:
    """Best human-readable CPU name: /proc/cpuinfo model name, else platform."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    if name:
                        return name
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def environment(device: str) -> dict[str, Any]:
    """Versions and hardware description recorded in every trace and manifest."""
    import torch

    cuda_ok = device == "cuda" and torch.cuda.is_available()
    env: dict[str, Any] = {
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if cuda_ok else cpu_name(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": None,
        "collector_version": COLLECTOR_VERSION,
    }
    if cuda_ok:
        try:
            env["cudnn"] = torch.backends.cudnn.version()
        except Exception:  # pragma: no cover - depends on the build
            env["cudnn"] = None
        major, minor = torch.cuda.get_device_capability(0)
        env["compute_capability"] = f"{major}.{minor}"
    return env


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def gzip_file(src: str, dst: str) -> None:
    """gzip ``src`` into ``dst`` with mtime=0 (the gzip header carries no clock)."""
    with open(src, "rb") as fin, open(dst, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as fout:
            shutil.copyfileobj(fin, fout)


def synchronize(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


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

    Loop layout (``torch.profiler.schedule(wait, warmup, active=steps,
    repeat=1)``): ``wait`` unprofiled iterations, ``warmup`` iterations with the
    profiler running but discarded, then ``steps`` recorded iterations, each a
    ``ProfilerStep#N`` holding one ``record_function(name)`` annotation around
    ``step()`` run under ``torch.no_grad()``.  On CUDA each iteration ends with
    ``torch.cuda.synchronize()`` (inside ``ProfilerStep#N``, outside the
    annotation) so the per-step wall times are honest.

    ``metadata`` is recorded under the single top-level trace key
    ``"traceview"`` with ``prof.add_metadata_json``.

    Returns the manifest entry: file, sha256, size, steps, warmup, step wall
    times, and the op counts of ``prof.key_averages()`` over the recorded steps
    (``op_counts``: CPU ops, ``annotation_counts``: user annotations incl.
    ``ProfilerStep*``, ``other_counts``: anything else, e.g. CUDA runtime
    calls), plus ``trace_op_counts``: the CPU ops of the raw profiler events,
    i.e. exactly the ``cpu_op`` events in the trace file.  The two differ where
    ``key_averages()`` folds an op into a same-named parent whose only child it
    is (torch's ``EventList._remove_dup_nodes``).

    Raises whatever ``step`` raises (callers catch ``RuntimeError``); no file is
    left behind in that case.
    """
    import torch
    from torch.profiler import (
        ProfilerAction,
        ProfilerActivity,
        profile,
        record_function,
        schedule,
    )

    if steps < 1:
        raise ValueError("steps must be >= 1")
    if warmup < 0 or wait < 0:
        raise ValueError("warmup and wait must be >= 0")

    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)

    meta_json = json.dumps(metadata)
    total = wait + warmup + steps
    first_active = wait + warmup
    step_wall_s: list[float] = []
    metadata_added = False

    out_dir = os.path.dirname(os.path.abspath(out_path))
    fd, tmp_json = tempfile.mkstemp(prefix=f".{name}.", suffix=".json", dir=out_dir)
    os.close(fd)
    try:
        prof = profile(
            activities=activities,
            record_shapes=True,
            schedule=schedule(wait=wait, warmup=warmup, active=steps, repeat=1),
        )
        with prof:
            for i in range(total):
                # Kineto only accepts metadata while it is initialised, i.e. once
                # the schedule has left its "wait" phase.
                if not metadata_added and prof.current_action != ProfilerAction.NONE:
                    prof.add_metadata_json(METADATA_KEY, meta_json)
                    metadata_added = True
                t0 = time.perf_counter()
                with torch.no_grad(), record_function(name):
                    step()
                synchronize(device)
                t1 = time.perf_counter()
                if i >= first_active:
                    step_wall_s.append(t1 - t0)
                prof.step()

        prof.export_chrome_trace(tmp_json)
        with open(tmp_json, encoding="utf-8") as fh:
            trace = json.load(fh)
        metadata_via = "add_metadata_json"
        if trace.get(METADATA_KEY) != metadata:
            # Defensive: should not happen with torch >= 2.1, but a trace
            # without its metadata is useless, so write it in ourselves.
            trace[METADATA_KEY] = metadata
            with open(tmp_json, "w", encoding="utf-8") as fh:
                json.dump(trace, fh)
            metadata_via = "post-processed"
        n_annotations = sum(
            1
            for ev in trace.get("traceEvents", [])
            if ev.get("ph") == "X" and ev.get("cat") == "user_annotation" and ev.get("name") == name
        )
        gzip_file(tmp_json, out_path)
    finally:
        if os.path.exists(tmp_json):
            os.remove(tmp_json)

    # Classify key_averages() rows by the kineto activity type of their events.
    # The raw kineto events are exactly what the trace file holds; key_averages()
    # is built from them after torch's EventList._remove_dup_nodes(), which
    # drops an op whose parent has the same name and no other child (e.g. the
    # re-dispatched inner aten::mul under aten::mul), so its counts can be
    # lower than the trace's.  Both are recorded.
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
    op_counts: dict[str, int] = {}
    annotation_counts: dict[str, int] = {}
    other_counts: dict[str, int] = {}
    for row in prof.key_averages():
        if row.is_user_annotation:
            annotation_counts[row.key] = int(row.count)
        elif kinds.get(row.key, "cpu_op") == "cpu_op":
            op_counts[row.key] = int(row.count)
        else:
            other_counts[row.key] = int(row.count)

    return {
        "file": os.path.basename(out_path),
        "sha256": sha256_file(out_path),
        "size": os.path.getsize(out_path),
        "steps": steps,
        "warmup": warmup,
        "wait": wait,
        "step_wall_s": step_wall_s,
        "mean_step_wall_s": sum(step_wall_s) / len(step_wall_s),
        "annotations_in_trace": n_annotations,
        "metadata_via": metadata_via,
        "op_counts": dict(sorted(op_counts.items())),
        "trace_op_counts": dict(sorted(trace_op_counts.items())),
        "annotation_counts": dict(sorted(annotation_counts.items())),
        "other_counts": dict(sorted(other_counts.items())),
    }


def write_manifest(out_dir: str, manifest: dict[str, Any]) -> str:
    path = os.path.join(out_dir, "manifest.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def stderr_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
