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
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ._common import Skip, synchronize, torch_dtype
from .cli import add_run_arguments, run_cli
from .run import Collector, Settings, Variant, first_line, run_once
from .run import collect as run_collector

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


def _prepare(s: Settings) -> tuple[Callable[[str], Variant], Any]:
    """Random input and parameters (fp32 and in --dtype), and the fp32 reference."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(s.seed)

    def randn(*shape, scale=1.0):
        return (torch.randn(shape, generator=gen) * scale).to(s.device)

    tokens, d_model, d_ff = (s.sizes[k] for k in ("tokens", "d_model", "d_ff"))
    x32 = randn(tokens, d_model)
    p32 = (
        randn(d_ff, d_model, scale=1 / math.sqrt(d_model)),
        randn(d_ff, scale=0.1),
        randn(d_model, d_ff, scale=1 / math.sqrt(d_ff)),
        randn(d_model, scale=0.1),
    )
    with torch.no_grad():
        reference = _block(x32, *p32, fused=True).float()
    tdtype = torch_dtype(s.dtype)
    x_lo = x32.to(tdtype)
    p_lo = tuple(p.to(tdtype) for p in p32)
    synchronize(s.device)

    def build(name: str) -> Variant:
        meta = {"description": VARIANTS[name]}
        if name == "linear":
            return Variant(name, lambda: _block(x_lo, *p_lo, fused=True), metadata=meta)
        if name == "matmul_add":
            return Variant(name, lambda: _block(x_lo, *p_lo, fused=False), metadata=meta)
        if s.dtype == "fp32":
            raise Skip("autocast needs a low-precision --dtype (bf16 or fp16); fp32 would not cast anything")

        def autocast_step():
            with torch.autocast(device_type=s.device, dtype=tdtype):
                return _block(x32, *p32, fused=True)

        return Variant(name, autocast_step, metadata=meta)

    return build, reference


def _try_once(variant: Variant, s: Settings):
    try:
        return run_once(variant, s.device)
    except RuntimeError as exc:
        raise Skip(f"cannot run on {s.device} {s.dtype}: {first_line(exc)}") from exc


SPEC = Collector(
    name=COLLECTOR,
    tag="[mlp]",
    variants=VARIANTS,
    name_width=11,
    checking="checking against the fp32 reference ...",
    reference="the fp32 reference",
    prepare=_prepare,
    try_once=_try_once,
)


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
    return run_collector(
        SPEC, out_dir, variants, sizes=dict(tokens=tokens, d_model=d_model, d_ff=d_ff),
        dtype=dtype, device=device, warmup=warmup, steps=steps, seed=seed, progress=progress,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """The command line; ``prog`` names the command in usage lines (``traceview collect mlp``)."""
    p = argparse.ArgumentParser(
        prog=prog or "python -m collectors.mlp",
        description="Profile a Linear-GELU-Linear block (fused bias, separate bias, autocast) "
        "into one trace per variant.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--tokens", type=int, default=DEFAULTS["tokens"], help="rows of the input (batch x sequence)"
    )
    p.add_argument("--d-model", type=int, default=DEFAULTS["d_model"])
    p.add_argument("--d-ff", type=int, default=DEFAULTS["d_ff"])
    add_run_arguments(p, DEFAULTS, out="traces/mlp")
    p.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated subset of: {','.join(VARIANTS)}"
    )
    args = p.parse_args(argv)
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    sizes = dict(tokens=args.tokens, d_model=args.d_model, d_ff=args.d_ff)
    return run_cli(collect, args, names, sizes, tag="[mlp]")


if __name__ == "__main__":
    sys.exit(main())
