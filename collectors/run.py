"""Running a collector: check the arguments, then for every variant check its
output against the fp32 reference and profile it, or skip it with a reason;
write the manifest.

A collector module (:mod:`collectors.attention`, :mod:`collectors.mlp`) supplies
only what is specific to it, as a :class:`Collector`: its variants, how to
build their inputs and the reference (``prepare``), how a failed first run is
explained (``try_once``) and what its manifest entries add (``finish_entry``).

Only the collectors import this module; it imports torch lazily so that
``import collectors`` stays torch-free.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import COLLECTOR_VERSION, METADATA_KEY
from ._common import (
    TOLERANCES,
    Skip,
    canonical_dtype,
    environment,
    synchronize,
    trace_file_name,
    write_manifest,
)
from .profiling import profile_variant


@dataclass
class Variant:
    """One variant, ready to run: ``step()`` under ``context()``."""

    name: str
    step: Callable[[], Any]
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    #: Trace-metadata keys recorded right after ``"variant"``.
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    """The validated arguments of one collection."""

    sizes: dict[str, int]
    dtype: str
    device: str
    warmup: int
    steps: int
    seed: int


@dataclass(frozen=True)
class Collector:
    """What one collector module supplies to :func:`collect`."""

    #: Module name, recorded in the manifest and in every trace.
    name: str
    #: Prefix of the progress lines, e.g. ``"[mlp]"``.
    tag: str
    #: variant -> what a skipped entry records as ``"backend"``; collection order.
    variants: dict[str, str]
    #: Width of the variant-name column in the progress lines.
    name_width: int
    #: Progress text while a variant is checked.
    checking: str
    #: How wrong-result reasons name the reference, e.g. ``"the fp32 reference"``.
    reference: str
    #: ``prepare(settings) -> (build, reference)``; ``build(name)`` returns a
    #: :class:`Variant` or raises :class:`Skip`.
    prepare: Callable[[Settings], tuple[Callable[[str], Variant], Any]]
    #: ``try_once(variant, settings) -> output``, raising :class:`Skip` with
    #: the reason when the variant cannot run.
    try_once: Callable[[Variant, Settings], Any]
    #: ``finish_entry(variant, entry) -> manifest entry`` of a collected variant.
    finish_entry: Callable[[Variant, dict[str, Any]], dict[str, Any]] = lambda variant, entry: entry


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def run_once(variant: Variant, device: str):
    """The variant's output of one unprofiled call."""
    import torch

    with torch.no_grad(), variant.context():
        out = variant.step()
    synchronize(device)
    return out


def count_flops(variant: Variant) -> dict[str, Any]:
    """FLOPs of one unprofiled call as torch's own ``FlopCounterMode`` counts them: the
    total and per aten op (what traceview's FLOPs from the trace are checked against)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), variant.context(), counter:
        variant.step()
    by_op = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    return {"total": int(counter.get_total_flops()), "by_op": dict(sorted(by_op.items()))}


def check_against_reference(out, reference, *, dtype: str, reference_name: str) -> float:
    """Max abs error of ``out``; raises :class:`Skip` when it is not close."""
    import torch

    atol, rtol = TOLERANCES[dtype]
    out32 = out.float()
    err = (out32 - reference).abs().max().item()
    if not torch.allclose(out32, reference, atol=atol, rtol=rtol) or not math.isfinite(err):
        raise Skip(
            f"wrong result: max abs err {err:.3g} vs {reference_name} "
            f"(atol={atol:g}, rtol={rtol:g} for {dtype})"
        )
    return err


def collect(
    spec: Collector,
    out_dir: str | os.PathLike,
    variants: Sequence[str] | None,
    *,
    sizes: dict[str, int],
    dtype: str,
    device: str,
    warmup: int,
    steps: int,
    seed: int,
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    """Collect ``variants`` (all when None) of ``spec`` into ``out_dir``; return the manifest."""
    import torch

    settings, names = _validate(spec, variants, sizes, dtype, device, warmup, steps, seed)
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    job = _Run(spec, settings, out_dir, progress or (lambda line: None))
    if settings.device == "cuda" and not torch.cuda.is_available():
        reason = f"CUDA not available (torch {torch.__version__}, built with CUDA {torch.version.cuda})"
        for name in names:
            job.skip(name, reason)
    else:
        build, reference = spec.prepare(settings)
        for i, name in enumerate(names, 1):
            job.say(f"{spec.tag} {i}/{len(names)} {name:<{spec.name_width}} {spec.checking}")
            job.collect_one(name, build, reference)
    write_manifest(out_dir, job.manifest)
    return job.manifest


def _validate(spec, variants, sizes, dtype, device, warmup, steps, seed) -> tuple[Settings, list[str]]:
    """Raise ValueError for bad arguments, before any work is done."""
    dtype = canonical_dtype(dtype)
    device = str(device).lower()
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'cuda' or 'cpu', not {device!r}")
    names = list(spec.variants) if variants is None else list(variants)
    unknown = [n for n in names if n not in spec.variants]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; known: {list(spec.variants)}")
    for label, value in (*sizes.items(), ("steps", steps)):
        if int(value) < 1:
            raise ValueError(f"{label} must be >= 1")
    if warmup < 0:
        raise ValueError("warmup must be >= 0")
    settings = Settings(dict(sizes), dtype, device, warmup, steps, seed)
    return settings, names


def fault_note(faults: list[int] | None, device: str) -> str:
    """A line when the recorded CPU steps page-faulted (median > 0), else "": such a run's CPU times
    include taking fresh memory every step, a state that varies between processes of the same code
    (profiling.py's _minor_faults says why)."""
    from traceview.analyses.variants.check_runs import fault_median  # the number check says too

    median = fault_median(faults) if device == "cpu" else 0
    if median <= 0:
        return ""
    return (
        f"median {median:,} minor page faults per step: CPU time varies between runs (up to "
        "2.5x); preload jemalloc for stable timings (docs/ci-check.yml)"
    )


class _Run:
    """One collection in progress: its manifest, folder and progress sink."""

    def __init__(self, spec: Collector, settings: Settings, out_dir: str, say: Callable[[str], None]):
        self.spec, self.settings, self.out_dir, self.say = spec, settings, out_dir, say
        self.env = environment(settings.device)
        s = settings
        self.manifest: dict[str, Any] = {
            "collector": spec.name,
            "collector_version": COLLECTOR_VERSION,
            "created_utc": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
            "trace_files": "<variant>.json.gz",
            "metadata_key": METADATA_KEY,
            "config": {
                **s.sizes,
                "dtype": s.dtype,
                "warmup": s.warmup,
                "steps": s.steps,
                "seed": s.seed,
                "tolerance": dict(zip(("atol", "rtol"), TOLERANCES[s.dtype], strict=True)),
                **self.env,
            },
            "collected": {},
            "skipped": {},
        }

    def skip(self, name: str, reason: str) -> None:
        self.manifest["skipped"][name] = {"backend": self.spec.variants[name], "reason": reason}
        stale = os.path.join(self.out_dir, trace_file_name(name))
        if os.path.exists(stale):  # keep folder and manifest in agreement
            os.remove(stale)
        self.say(f"{self.spec.tag} skip    {name:<{self.spec.name_width}} {reason}")

    def collect_one(self, name: str, build: Callable[[str], Variant], reference) -> None:
        """Check one variant, then profile it into its trace; skip it on failure."""
        spec, s = self.spec, self.settings
        try:
            variant = build(name)
            out = spec.try_once(variant, s)
            err = check_against_reference(out, reference, dtype=s.dtype, reference_name=spec.reference)
        except Skip as exc:
            self.skip(name, str(exc))
            return
        try:
            with variant.context():
                entry = profile_variant(
                    variant.step,
                    name=name,
                    out_path=os.path.join(self.out_dir, trace_file_name(name)),
                    metadata=self._trace_metadata(variant, err),
                    device=s.device,
                    warmup=s.warmup,
                    steps=s.steps,
                )
        except RuntimeError as exc:
            self.skip(name, f"failed while profiling: {first_line(exc)}")
            return
        entry = spec.finish_entry(
            variant, {**entry, "max_abs_err": err, "flop_counter": count_flops(variant)}
        )
        self.manifest["collected"][name] = entry
        self.say(
            f"{spec.tag} ok      {name:<{spec.name_width}} {entry['file']} ({entry['size']} B), "
            f"{entry['mean_step_wall_s'] * 1e3:.3f} ms/step, "
            f"{sum(entry['trace_op_counts'].values()) // s.steps} ops/step, max abs err {err:.2g}"
        )
        faulting = fault_note(entry.get("minor_faults_per_step"), s.device)
        if faulting:
            self.say(f"{spec.tag} note    {name:<{spec.name_width}} {faulting}")

    def _trace_metadata(self, variant: Variant, err: float) -> dict[str, Any]:
        s = self.settings
        return {
            "collector": self.spec.name,
            "collector_version": COLLECTOR_VERSION,
            "variant": variant.name,
            **variant.metadata,
            **s.sizes,
            "dtype": s.dtype,
            "device": s.device,
            "device_name": self.env["device_name"],
            "torch": self.env["torch"],
            "cuda": self.env["cuda"],
            "warmup": s.warmup,
            "steps": s.steps,
            "max_abs_err": err,
        }
