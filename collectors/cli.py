"""Command-line scaffolding shared by the collectors: the run options every
collector takes, and calling ``collect`` with them.

Imports no torch itself.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._common import stderr_progress


def add_run_arguments(
    p: argparse.ArgumentParser,
    defaults: Mapping[str, Any],
    *,
    out: str,
    helps: Mapping[str, str] | None = None,
) -> None:
    """``--dtype --device --warmup --steps --seed --out``; ``helps`` by dest."""
    helps = helps or {}
    p.add_argument(
        "--dtype", default=defaults["dtype"], choices=["bf16", "fp16", "fp32"], help=helps.get("dtype")
    )
    p.add_argument("--device", default=defaults["device"], choices=["cuda", "cpu"], help=helps.get("device"))
    p.add_argument("--warmup", type=int, default=defaults["warmup"], help=helps.get("warmup"))
    p.add_argument("--steps", type=int, default=defaults["steps"], help=helps.get("steps"))
    p.add_argument("--seed", type=int, default=defaults["seed"], help=helps.get("seed"))
    p.add_argument("--out", default=out, help=helps.get("out"))


def run_cli(
    collect: Callable[..., dict[str, Any]],
    args: argparse.Namespace,
    variants: Sequence[str],
    sizes: Mapping[str, int],
    *,
    tag: str,
) -> int:
    """Run ``collect`` with the parsed options; the exit status.

    0 when a variant was collected, 1 when none was, 2 for bad arguments.
    """
    try:
        manifest = collect(
            args.out,
            variants,
            **sizes,
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
    stderr_progress(f"{tag} {n_ok} collected, {n_skip} skipped -> {os.path.join(args.out, 'manifest.json')}")
    return 0 if n_ok else 1
