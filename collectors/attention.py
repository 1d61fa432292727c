"""Collector: causal attention, naive vs. every SDPA backend, one trace each.

Run ``python -m collectors.attention --help``.  Typical GPU run::

    python -m collectors.attention --device cuda --dtype bf16 \\
        --batch 8 --heads 16 --seq-len 1024 --head-dim 64 --out traces/h100/

Variants (one ``<out>/<variant>.json.gz`` trace each):

``naive``
    ``q @ k^T``, ``* scale``, out-of-place ``masked_fill`` with a causal mask
    built once outside the step, ``softmax``, ``@ v``.  The out-of-place
    ``masked_fill`` is ``aten::clone`` (a full copy of the scores) followed by
    ``aten::masked_fill_``; on CUDA the copy shows up as a ``Memcpy``.
``naive_inplace``
    The same with ``masked_fill_`` on the (already fresh) scores: no copy.
``sdpa_math`` / ``sdpa_efficient`` / ``sdpa_flash`` / ``sdpa_cudnn``
    ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` pinned with
    ``torch.nn.attention.sdpa_kernel(SDPBackend.X)``.
``sdpa_auto``
    The same without a pin: whatever torch's dispatcher picks.

Every variant's output is first compared with the naive attention computed in
fp32 from the same inputs (``torch.allclose`` with a dtype-specific tolerance);
a variant that cannot run (unsupported backend/device/dtype) or gives a wrong
result is *skipped* and the reason recorded in ``manifest.json`` and printed on
stderr -- it is never profiled.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ._common import Skip, synchronize, torch_dtype
from .cli import add_run_arguments, run_cli
from .run import Collector, Settings, Variant, first_line, run_once
from .run import collect as run_collector

COLLECTOR = "collectors.attention"

#: variant -> backend requested (an ``SDPBackend`` member name, "auto", or
#: "none" for the hand-written versions).  Order is the collection order.
VARIANTS: dict[str, str] = {
    "naive": "none",
    "naive_inplace": "none",
    "sdpa_math": "MATH",
    "sdpa_efficient": "EFFICIENT_ATTENTION",
    "sdpa_flash": "FLASH_ATTENTION",
    "sdpa_cudnn": "CUDNN_ATTENTION",
    "sdpa_auto": "auto",
}

DESCRIPTIONS: dict[str, str] = {
    "naive": "q@k^T * scale, out-of-place masked_fill(causal mask), softmax, @v",
    "naive_inplace": "q@k^T * scale, in-place masked_fill_(causal mask), softmax, @v",
    "sdpa_math": "scaled_dot_product_attention(is_causal=True) pinned to SDPBackend.MATH",
    "sdpa_efficient": "scaled_dot_product_attention(is_causal=True) pinned to SDPBackend.EFFICIENT_ATTENTION",
    "sdpa_flash": "scaled_dot_product_attention(is_causal=True) pinned to SDPBackend.FLASH_ATTENTION",
    "sdpa_cudnn": "scaled_dot_product_attention(is_causal=True) pinned to SDPBackend.CUDNN_ATTENTION",
    "sdpa_auto": "scaled_dot_product_attention(is_causal=True), no backend pin",
}

#: Op names that identify which fused/math attention implementation ran.
_ATTENTION_OP_PREFIXES = (
    "aten::_scaled_dot_product",
    "aten::_flash_attention",
    "aten::_efficient_attention",
    "aten::_cudnn_attention",
)

#: SDPA backends with no CPU kernel in torch (pinning one on CPU raises
#: "No viable backend ...").  FLASH_ATTENTION does have one on CPU:
#: aten::_scaled_dot_product_flash_attention_for_cpu.
_NO_CPU_KERNEL = ("EFFICIENT_ATTENTION", "CUDNN_ATTENTION")

DEFAULTS = dict(
    batch=8,
    heads=16,
    seq_len=1024,
    head_dim=64,
    dtype="bf16",
    device="cuda",
    warmup=3,
    steps=5,
    seed=0,
)


#: Help of the run options (--dtype ... --out) on the command line.
_RUN_HELP = {
    "dtype": "q/k/v dtype",
    "device": "device to run on",
    "warmup": "profiler warmup steps (recorded, then discarded)",
    "steps": "profiled (active) steps per variant",
    "seed": "seed of the random q/k/v",
    "out": "output folder",
}


def _naive(q, k, v, mask, scale, *, inplace: bool):
    import torch

    scores = (q @ k.transpose(-2, -1)) * scale
    if inplace:
        scores.masked_fill_(mask, float("-inf"))
    else:
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _build_variant(name: str, q, k, v, mask, scale) -> Variant:
    import torch.nn.functional as F

    backend = VARIANTS[name]
    meta = {"description": DESCRIPTIONS[name], "backend": backend}
    if name in ("naive", "naive_inplace"):
        inplace = name == "naive_inplace"
        return Variant(name, lambda: _naive(q, k, v, mask, scale, inplace=inplace), metadata=meta)

    def sdpa():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    if backend == "auto":
        return Variant(name, sdpa, metadata=meta)

    from torch.nn.attention import SDPBackend, sdpa_kernel

    member = getattr(SDPBackend, backend)
    return Variant(name, sdpa, lambda: sdpa_kernel(member), metadata=meta)


def _prepare(s: Settings) -> tuple[Callable[[str], Variant], Any]:
    """Random q/k/v in the requested dtype, and the naive fp32 reference."""
    import torch

    batch, heads, seq_len, head_dim = (s.sizes[k] for k in ("batch", "heads", "seq_len", "head_dim"))
    tdtype = torch_dtype(s.dtype)
    gen = torch.Generator(device="cpu").manual_seed(s.seed)
    shape = (batch, heads, seq_len, head_dim)
    q, k, v = (torch.randn(shape, generator=gen, dtype=torch.float32).to(s.device) for _ in range(3))
    # Causal mask, built once outside the profiled step: True = masked out.
    mask = torch.ones(seq_len, seq_len, dtype=torch.bool, device=s.device).triu(1)
    scale = 1.0 / math.sqrt(head_dim)
    with torch.no_grad():
        reference = _naive(q, k, v, mask, scale, inplace=False).float()
    q, k, v = (t.to(tdtype) for t in (q, k, v))
    synchronize(s.device)
    return (lambda name: _build_variant(name, q, k, v, mask, scale)), reference


def _warning_text(caught: Sequence[warnings.WarningMessage], limit: int = 600) -> str:
    seen: list[str] = []
    for w in caught:
        msg = " ".join(str(w.message).split())
        if msg and msg not in seen:
            seen.append(msg)
    text = " | ".join(seen)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _try_once(variant: Variant, s: Settings):
    """Run the variant once; :class:`Skip` when its backend cannot run here.

    torch explains an unusable SDPA backend only in warnings, so they are
    captured and appended to the reason.
    """
    backend = VARIANTS[variant.name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return run_once(variant, s.device)
        except RuntimeError as exc:  # backend not available for this input/device
            reason = f"{backend} backend cannot run on {s.device} {s.dtype}: {first_line(exc)}"
            if s.device == "cpu" and backend in _NO_CPU_KERNEL:
                reason += " (torch has no CPU implementation of this SDPA backend)"
            extra = _warning_text(caught)
            if extra:
                reason += f" (torch warnings: {extra})"
            raise Skip(reason) from exc


def _finish_entry(variant: Variant, entry: dict[str, Any]) -> dict[str, Any]:
    attention_ops = sorted(op for op in entry["op_counts"] if op.startswith(_ATTENTION_OP_PREFIXES))
    return {"backend": VARIANTS[variant.name], **entry, "attention_ops": attention_ops}


SPEC = Collector(
    name=COLLECTOR,
    tag="[attention]",
    variants=VARIANTS,
    name_width=15,
    checking="checking against naive fp32 reference ...",
    reference="the fp32 naive reference",
    prepare=_prepare,
    try_once=_try_once,
    finish_entry=_finish_entry,
)


def collect(
    out_dir: str | os.PathLike,
    variants: Sequence[str] | None = None,
    *,
    batch: int = DEFAULTS["batch"],
    heads: int = DEFAULTS["heads"],
    seq_len: int = DEFAULTS["seq_len"],
    head_dim: int = DEFAULTS["head_dim"],
    dtype: str = DEFAULTS["dtype"],
    device: str = DEFAULTS["device"],
    warmup: int = DEFAULTS["warmup"],
    steps: int = DEFAULTS["steps"],
    seed: int = DEFAULTS["seed"],
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Profile the attention variants into ``out_dir``; return the manifest.

    One ``<out_dir>/<variant>.json.gz`` per collected variant plus
    ``<out_dir>/manifest.json``.  The manifest (also returned) has ``config``
    (shapes, dtype, device, versions), ``collected`` (variant -> file, sha256,
    size, steps, mean step wall time, ``key_averages()`` op counts, ...) and
    ``skipped`` (variant -> backend, reason).  Never raises for a variant that
    cannot run; ``progress`` (if given) receives one line per variant.
    """
    sizes = dict(batch=batch, heads=heads, seq_len=seq_len, head_dim=head_dim)
    return run_collector(
        SPEC, out_dir, variants, sizes=sizes, dtype=dtype, device=device,
        warmup=warmup, steps=steps, seed=seed, progress=progress,
    )  # fmt: skip


def _variant_list(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    if names == ["all"]:
        return list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown variant(s) {unknown or text!r}; choose from {', '.join(VARIANTS)}"
        )
    return names


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command line; ``prog`` names the command in usage lines (``traceview collect attention``)."""
    p = argparse.ArgumentParser(
        prog=prog or "python -m collectors.attention",
        description="Profile causal attention (naive vs. SDPA backends) into one Kineto trace per variant.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--batch", type=int, default=DEFAULTS["batch"], help="batch size")
    p.add_argument("--heads", type=int, default=DEFAULTS["heads"], help="attention heads")
    p.add_argument("--seq-len", type=int, default=DEFAULTS["seq_len"], help="sequence length (q and k/v)")
    p.add_argument("--head-dim", type=int, default=DEFAULTS["head_dim"], help="head dimension")
    add_run_arguments(p, DEFAULTS, out="traces/attention", helps=_RUN_HELP)
    p.add_argument(
        "--variants",
        type=_variant_list,
        default="all",
        help=f"comma-separated subset of: {','.join(VARIANTS)}",
    )
    return p


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    args = build_parser(prog).parse_args(argv)
    sizes = dict(batch=args.batch, heads=args.heads, seq_len=args.seq_len, head_dim=args.head_dim)
    return run_cli(collect, args, args.variants, sizes, tag="[attention]")


if __name__ == "__main__":
    sys.exit(main())
