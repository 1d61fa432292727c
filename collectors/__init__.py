"""Trace collectors: small, honest PyTorch workloads profiled into Kineto traces.

The collectors are the half of traceview that runs next to the hardware (usually
a CUDA machine).  Each collector profiles a handful of *variants* of one
workload, writes one gzipped Chrome/Kineto trace per variant plus a
``manifest.json``, and tags every trace with a ``"traceview"`` metadata object
(variant, shapes, dtype, device, versions) so that the analysis side never has
to guess what it is looking at.

Collectors:

* :mod:`collectors.attention` -- causal attention: naive (out-of-place and
  in-place ``masked_fill``) vs. every ``scaled_dot_product_attention`` backend.
  Run it with ``python -m collectors.attention --help``.
* :mod:`collectors.mlp` -- a Linear-GELU-Linear block: fused bias
  (``F.linear``/``addmm``) vs. separate bias add vs. per-step ``autocast``
  casts.  ``python -m collectors.mlp --help``.

Both write ``<out>/<variant>.json.gz`` traces and ``<out>/manifest.json``.

This package must stay importable without torch: torch is only imported by the
collector modules themselves.
"""

from __future__ import annotations

__all__ = ["COLLECTOR_VERSION", "METADATA_KEY"]

#: Version of the collectors' output format (trace metadata + manifest).
COLLECTOR_VERSION = "0.1.0"

#: The single top-level key of the trace JSON under which collectors record
#: their metadata object (read back as ``traceview.load(p).meta["traceview"]``).
METADATA_KEY = "traceview"
