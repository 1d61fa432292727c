"""Small helpers shared by the collectors: dtype names and tolerances, the
environment description, file helpers (hash, gzip, names), manifest writing.

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
from typing import Any

from . import COLLECTOR_VERSION

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
        raise ValueError(f"unknown dtype {name!r}; expected one of {sorted(set(DTYPE_ALIASES))}") from None


def torch_dtype(name: str):
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[canonical_dtype(name)]


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
    """gzip ``src`` into ``dst`` with mtime=0 (the gzip header carries no clock); ``dst``
    appears only once complete (traceview.atomic: no partial trace on Ctrl-C or a full disk)."""
    from traceview.atomic import atomic_path

    with (
        open(src, "rb") as fin,
        atomic_path(dst) as tmp,
        open(tmp, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as fout,
    ):
        shutil.copyfileobj(fin, fout)


def synchronize(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def write_manifest(out_dir: str, manifest: dict[str, Any]) -> str:
    from traceview.atomic import write_text

    path = os.path.join(out_dir, "manifest.json")
    write_text(path, json.dumps(manifest, indent=2) + "\n")
    return path


def stderr_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
