"""Collector: a two-layer MLP block (Linear -> GELU -> Linear), three ways.

Run ``python -m collectors.mlp --help``.  Variants (one ``<out>/<variant>.json.gz``
trace each, same format, metadata and manifest as :mod:`collectors.attention`):

``linear``
    ``F.linear(x, w, b)`` with weights in ``--dtype``: the bias is fused into
    the GEMM (``aten::addmm``).
``matmul_add``
    ``x @ w.t() + b``: the same maths with the bias as a separate ``aten::add``
    (one more elementwise pass over the activations per layer).
``autocast``
    fp32 weights and inputs, ``F.linear`` under ``torch.autocast(dtype=--dtype)``
    entered inside the step: every step re-casts the input and all four
    parameters (``aten::to`` -> ``aten::_to_copy``); autocast's cast cache only
    covers leaf tensors that require grad, and only within one autocast
    region.  Skipped for ``--dtype fp32`` (there is nothing to cast to).

Every output is checked against the same block computed in fp32 before it is
profiled; failures and unsupported combinations are skipped with a reason.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import math
import os
import sys
from typing import Any, Callable, Sequence

from . import COLLECTOR_VERSION, METADATA_KEY
from ._common import (
    TOLERANCES,
    Skip,
    canonical_dtype,
    environment,
    profile_variant,
    stderr_progress,
    synchronize,
    torch_dtype,
    trace_file_name,
    write_manifest,
)

COLLECTOR = "collectors.mlp"

VARIANTS: dict[str, str] = {
    "linear": "F.linear (bias fused into addmm)",
    "matmul_add": "x @ w.t() + b (separate bias add)",
    "autocast": "fp32 weights, F.linear under torch.autocast inside the step",
}

DEFAULTS = dict(tokens=4096, d_model=1024, d_ff=4096, dtype="bf16", device="cuda", warmup=3, steps=5, seed=0)


def _block(x, w1, b1, w2, b2, *, fused: bool):
    import torch.nn.functional as F

    if fused:
        return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
    return F.gelu(x @ w1.t() + b1) @ w2.t() + b2


def collect(
    out_dir: str | os.PathLike,
    variants: Sequence[str] | None = None,
    *,
    tokens: int = DEFAULTS["tokens"],
    d_model: int = DEFAULTS["d_model"],
    d_ff: int = DEFAULTS["d_ff"],
    dtype: str = DEFAULTS["dtype"],
    device: str = DEFAULTS["device"],
    warmup: int = DEFAULTS["warmup"],
    steps: int = DEFAULTS["steps"],
    seed: int = DEFAULTS["seed"],
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Profile the MLP variants into ``out_dir``; return the manifest (see
    :func:`collectors.attention.collect` for its layout)."""
    import torch

    say = progress or (lambda line: None)
    dtype = canonical_dtype(dtype)
    device = str(device).lower()
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'cuda' or 'cpu', not {device!r}")
    names = list(VARIANTS) if variants is None else list(variants)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; known: {list(VARIANTS)}")
    for label, value in (("tokens", tokens), ("d_model", d_model), ("d_ff", d_ff), ("steps", steps)):
        if int(value) < 1:
            raise ValueError(f"{label} must be >= 1")
    if warmup < 0:
        raise ValueError("warmup must be >= 0")

    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    env = environment(device)
    manifest: dict[str, Any] = {
        "collector": COLLECTOR,
        "collector_version": COLLECTOR_VERSION,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "trace_files": "<variant>.json.gz",
        "metadata_key": METADATA_KEY,
        "config": {
            "tokens": tokens, "d_model": d_model, "d_ff": d_ff, "dtype": dtype,
            "warmup": warmup, "steps": steps, "seed": seed,
            "tolerance": dict(zip(("atol", "rtol"), TOLERANCES[dtype])),
            **env,
        },  # fmt: skip
        "collected": {},
        "skipped": {},
    }

    def skip(name: str, reason: str) -> None:
        manifest["skipped"][name] = {"backend": VARIANTS[name], "reason": reason}
        stale = os.path.join(out_dir, trace_file_name(name))
        if os.path.exists(stale):
            os.remove(stale)
        say(f"[mlp] skip    {name:<11} {reason}")

    if device == "cuda" and not torch.cuda.is_available():
        reason = f"CUDA not available (torch {torch.__version__}, built with CUDA {torch.version.cuda})"
        for name in names:
            skip(name, reason)
        write_manifest(out_dir, manifest)
        return manifest

    gen = torch.Generator(device="cpu").manual_seed(seed)

    def randn(*shape, scale=1.0):
        return (torch.randn(shape, generator=gen) * scale).to(device)

    x32 = randn(tokens, d_model)
    p32 = (
        randn(d_ff, d_model, scale=1 / math.sqrt(d_model)),
        randn(d_ff, scale=0.1),
        randn(d_model, d_ff, scale=1 / math.sqrt(d_ff)),
        randn(d_model, scale=0.1),
    )
    with torch.no_grad():
        reference = _block(x32, *p32, fused=True).float()
    tdtype = torch_dtype(dtype)
    x_lo = x32.to(tdtype)
    p_lo = tuple(p.to(tdtype) for p in p32)
    synchronize(device)

    def build(name: str) -> tuple[Callable[[], Any], Callable[[], contextlib.AbstractContextManager]]:
        if name == "linear":
            return (lambda: _block(x_lo, *p_lo, fused=True)), contextlib.nullcontext
        if name == "matmul_add":
            return (lambda: _block(x_lo, *p_lo, fused=False)), contextlib.nullcontext
        if dtype == "fp32":
            raise Skip("autocast needs a low-precision --dtype (bf16 or fp16); fp32 would not cast anything")

        def autocast_step():
            with torch.autocast(device_type=device, dtype=tdtype):
                return _block(x32, *p32, fused=True)

        return autocast_step, contextlib.nullcontext

    atol, rtol = TOLERANCES[dtype]
    for i, name in enumerate(names, 1):
        say(f"[mlp] {i}/{len(names)} {name:<11} checking against the fp32 reference ...")
        try:
            step, context = build(name)
            try:
                with torch.no_grad(), context():
                    out = step()
                synchronize(device)
            except RuntimeError as exc:
                raise Skip(f"cannot run on {device} {dtype}: {type(exc).__name__}: {str(exc).strip().splitlines()[0]}") from exc
            out32 = out.float()
            err = (out32 - reference).abs().max().item()
            if not torch.allclose(out32, reference, atol=atol, rtol=rtol) or not math.isfinite(err):
                raise Skip(
                    f"wrong result: max abs err {err:.3g} vs the fp32 reference (atol={atol:g}, rtol={rtol:g} for {dtype})"
                )
        except Skip as exc:
            skip(name, str(exc))
            continue
        metadata = {
            "collector": COLLECTOR,
            "collector_version": COLLECTOR_VERSION,
            "variant": name,
            "description": VARIANTS[name],
            "tokens": tokens,
            "d_model": d_model,
            "d_ff": d_ff,
            "dtype": dtype,
            "device": device,
            "device_name": env["device_name"],
            "torch": env["torch"],
            "cuda": env["cuda"],
            "warmup": warmup,
            "steps": steps,
            "max_abs_err": err,
        }
        try:
            with context():
                entry = profile_variant(
                    step,
                    name=name,
                    out_path=os.path.join(out_dir, trace_file_name(name)),
                    metadata=metadata,
                    device=device,
                    warmup=warmup,
                    steps=steps,
                )
        except RuntimeError as exc:
            skip(name, f"failed while profiling: {type(exc).__name__}: {str(exc).strip().splitlines()[0]}")
            continue
        manifest["collected"][name] = {**entry, "max_abs_err": err}
        say(
            f"[mlp] ok      {name:<11} {entry['file']} ({entry['size']} B), "
            f"{entry['mean_step_wall_s'] * 1e3:.3f} ms/step, "
            f"{sum(entry['trace_op_counts'].values()) // steps} ops/step, max abs err {err:.2g}"
        )

    write_manifest(out_dir, manifest)
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m collectors.mlp",
        description="Profile a Linear-GELU-Linear block (fused bias, separate bias, autocast) into one trace per variant.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--tokens", type=int, default=DEFAULTS["tokens"], help="rows of the input (batch x sequence)")
    p.add_argument("--d-model", type=int, default=DEFAULTS["d_model"])
    p.add_argument("--d-ff", type=int, default=DEFAULTS["d_ff"])
    p.add_argument("--dtype", default=DEFAULTS["dtype"], choices=["bf16", "fp16", "fp32"])
    p.add_argument("--device", default=DEFAULTS["device"], choices=["cuda", "cpu"])
    p.add_argument("--warmup", type=int, default=DEFAULTS["warmup"])
    p.add_argument("--steps", type=int, default=DEFAULTS["steps"])
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    p.add_argument("--out", default="traces/mlp")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of: {','.join(VARIANTS)}")
    args = p.parse_args(argv)
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    try:
        manifest = collect(
            args.out, names, tokens=args.tokens, d_model=args.d_model, d_ff=args.d_ff,
            dtype=args.dtype, device=args.device, warmup=args.warmup, steps=args.steps,
            seed=args.seed, progress=stderr_progress,
        )  # fmt: skip
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    n_ok, n_skip = len(manifest["collected"]), len(manifest["skipped"])
    stderr_progress(f"[mlp] {n_ok} collected, {n_skip} skipped -> {os.path.join(args.out, 'manifest.json')}")
    return 0 if n_ok else 1


if __name__ == "__main__":
    sys.exit(main())
