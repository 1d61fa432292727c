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
import contextlib
import datetime as _dt
import math
import os
import sys
import warnings
from dataclasses import dataclass
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


@dataclass
class _Variant:
    name: str
    backend: str
    context: Callable[[], contextlib.AbstractContextManager]
    step: Callable[[], Any]


def _naive(q, k, v, mask, scale, *, inplace: bool):
    import torch

    scores = (q @ k.transpose(-2, -1)) * scale
    if inplace:
        scores.masked_fill_(mask, float("-inf"))
    else:
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _build_variant(name: str, q, k, v, mask, scale) -> _Variant:
    import torch.nn.functional as F

    backend = VARIANTS[name]
    if name in ("naive", "naive_inplace"):
        inplace = name == "naive_inplace"
        return _Variant(
            name, backend, contextlib.nullcontext, lambda: _naive(q, k, v, mask, scale, inplace=inplace)
        )

    def sdpa():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    if backend == "auto":
        return _Variant(name, backend, contextlib.nullcontext, sdpa)

    from torch.nn.attention import SDPBackend, sdpa_kernel

    member = getattr(SDPBackend, backend)
    return _Variant(name, backend, lambda: sdpa_kernel(member), sdpa)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def _warning_text(caught: Sequence[warnings.WarningMessage], limit: int = 600) -> str:
    seen: list[str] = []
    for w in caught:
        msg = " ".join(str(w.message).split())
        if msg and msg not in seen:
            seen.append(msg)
    text = " | ".join(seen)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_variant(variant: _Variant, reference, *, device: str, dtype: str) -> float:
    """Run the variant once, compare with the fp32 naive reference.

    Returns the max abs error; raises :class:`Skip` with the reason when the
    backend cannot run or the result is wrong.
    """
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.no_grad(), variant.context():
                out = variant.step()
            synchronize(device)
        except RuntimeError as exc:  # backend not available for this input/device
            reason = f"{variant.backend} backend cannot run on {device} {dtype}: {_first_line(exc)}"
            if device == "cpu" and variant.backend in _NO_CPU_KERNEL:
                reason += " (torch has no CPU implementation of this SDPA backend)"
            extra = _warning_text(caught)
            if extra:
                reason += f" (torch warnings: {extra})"
            raise Skip(reason) from exc
    atol, rtol = TOLERANCES[dtype]
    out32 = out.float()
    err = (out32 - reference).abs().max().item()
    if not torch.allclose(out32, reference, atol=atol, rtol=rtol) or not math.isfinite(err):
        raise Skip(
            f"wrong result: max abs err {err:.3g} vs the fp32 naive reference "
            f"(atol={atol:g}, rtol={rtol:g} for {dtype})"
        )
    return err


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
    for label, value in (("batch", batch), ("heads", heads), ("seq_len", seq_len), ("head_dim", head_dim), ("steps", steps)):
        if int(value) < 1:
            raise ValueError(f"{label} must be >= 1")
    if warmup < 0:
        raise ValueError("warmup must be >= 0")

    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    env = environment(device)
    config = {
        "batch": batch,
        "heads": heads,
        "seq_len": seq_len,
        "head_dim": head_dim,
        "dtype": dtype,
        "warmup": warmup,
        "steps": steps,
        "seed": seed,
        "tolerance": dict(zip(("atol", "rtol"), TOLERANCES[dtype])),
        **env,
    }
    manifest: dict[str, Any] = {
        "collector": COLLECTOR,
        "collector_version": COLLECTOR_VERSION,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "trace_files": "<variant>.json.gz",
        "metadata_key": METADATA_KEY,
        "config": config,
        "collected": {},
        "skipped": {},
    }

    def skip(name: str, reason: str) -> None:
        manifest["skipped"][name] = {"backend": VARIANTS[name], "reason": reason}
        stale = os.path.join(out_dir, trace_file_name(name))
        if os.path.exists(stale):  # keep folder and manifest in agreement
            os.remove(stale)
        say(f"[attention] skip    {name:<15} {reason}")

    if device == "cuda" and not torch.cuda.is_available():
        reason = f"CUDA not available (torch {torch.__version__}, built with CUDA {torch.version.cuda})"
        for name in names:
            skip(name, reason)
        write_manifest(out_dir, manifest)
        return manifest

    tdtype = torch_dtype(dtype)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    shape = (batch, heads, seq_len, head_dim)
    q, k, v = (torch.randn(shape, generator=gen, dtype=torch.float32).to(device) for _ in range(3))
    # Causal mask, built once outside the profiled step: True = masked out.
    mask = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)
    scale = 1.0 / math.sqrt(head_dim)
    with torch.no_grad():
        reference = _naive(q, k, v, mask, scale, inplace=False).float()
    q, k, v = (t.to(tdtype) for t in (q, k, v))
    synchronize(device)

    for i, name in enumerate(names, 1):
        variant = _build_variant(name, q, k, v, mask, scale)
        say(f"[attention] {i}/{len(names)} {name:<15} checking against naive fp32 reference ...")
        try:
            err = _check_variant(variant, reference, device=device, dtype=dtype)
        except Skip as exc:
            skip(name, str(exc))
            continue
        metadata = {
            "collector": COLLECTOR,
            "collector_version": COLLECTOR_VERSION,
            "variant": name,
            "description": DESCRIPTIONS[name],
            "backend": variant.backend,
            "batch": batch,
            "heads": heads,
            "seq_len": seq_len,
            "head_dim": head_dim,
            "dtype": dtype,
            "device": device,
            "device_name": env["device_name"],
            "torch": env["torch"],
            "cuda": env["cuda"],
            "warmup": warmup,
            "steps": steps,
            "max_abs_err": err,
        }
        out_path = os.path.join(out_dir, trace_file_name(name))
        try:
            with variant.context():
                entry = profile_variant(
                    variant.step,
                    name=name,
                    out_path=out_path,
                    metadata=metadata,
                    device=device,
                    warmup=warmup,
                    steps=steps,
                )
        except RuntimeError as exc:
            skip(name, f"failed while profiling: {_first_line(exc)}")
            continue
        entry = {
            "backend": variant.backend,
            **entry,
            "max_abs_err": err,
            "attention_ops": sorted(
                op for op in entry["op_counts"] if op.startswith(_ATTENTION_OP_PREFIXES)
            ),
        }
        manifest["collected"][name] = entry
        say(
            f"[attention] ok      {name:<15} {entry['file']} ({entry['size']} B), "
            f"{entry['mean_step_wall_s'] * 1e3:.3f} ms/step, "
            f"{sum(entry['trace_op_counts'].values()) // steps} ops/step, max abs err {err:.2g}"
        )

    write_manifest(out_dir, manifest)
    return manifest


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m collectors.attention",
        description="Profile causal attention (naive vs. SDPA backends) into one Kineto trace per variant.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--batch", type=int, default=DEFAULTS["batch"], help="batch size")
    p.add_argument("--heads", type=int, default=DEFAULTS["heads"], help="attention heads")
    p.add_argument("--seq-len", type=int, default=DEFAULTS["seq_len"], help="sequence length (q and k/v)")
    p.add_argument("--head-dim", type=int, default=DEFAULTS["head_dim"], help="head dimension")
    p.add_argument("--dtype", default=DEFAULTS["dtype"], choices=["bf16", "fp16", "fp32"], help="q/k/v dtype")
    p.add_argument("--device", default=DEFAULTS["device"], choices=["cuda", "cpu"], help="device to run on")
    p.add_argument("--warmup", type=int, default=DEFAULTS["warmup"], help="profiler warmup steps (recorded, then discarded)")
    p.add_argument("--steps", type=int, default=DEFAULTS["steps"], help="profiled (active) steps per variant")
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"], help="seed of the random q/k/v")
    p.add_argument("--out", default="traces/attention", help="output folder")
    p.add_argument(
        "--variants",
        type=_variant_list,
        default="all",
        help=f"comma-separated subset of: {','.join(VARIANTS)}",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        manifest = collect(
            args.out,
            args.variants,
            batch=args.batch,
            heads=args.heads,
            seq_len=args.seq_len,
            head_dim=args.head_dim,
            dtype=args.dtype,
            device=args.device,
            warmup=args.warmup,
            steps=args.steps,
            seed=args.seed,
            progress=stderr_progress,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    n_ok, n_skip = len(manifest["collected"]), len(manifest["skipped"])
    stderr_progress(
        f"[attention] {n_ok} collected, {n_skip} skipped -> {os.path.join(args.out, 'manifest.json')}"
    )
    return 0 if n_ok else 1


if __name__ == "__main__":
    sys.exit(main())
