"""traceview: analyse saved PyTorch profiler traces as exact, linked pandas DataFrames.

The names below are imported on first use (PEP 562), so that ``import traceview`` is cheap
and the command line can catch Ctrl-C while pandas is still being imported (see ``_entry``).
"""
from __future__ import annotations

import importlib

from ._version import __version__

#: public name -> the module that defines it
_EXPORTS = {
    "Selection": "analyses.region",
    "compare": "api", "compare_runs": "api", "diff": "api", "kernels": "api", "load_run": "api",
    "ranks": "api", "summary": "api", "summary_run": "api",
    "classify": "classify",
    "NotATraceError": "errors", "RuleError": "errors", "TraceReadError": "errors", "TraceviewError": "errors",
    "load": "load",
    "Trace": "model",
}

__all__ = ["load", "classify", "Trace", "Selection", "summary", "kernels", "diff", "compare", "load_run",
           "ranks", "summary_run", "compare_runs", "TraceviewError",
           "TraceReadError", "NotATraceError", "RuleError", "__version__"]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'traceview' has no attribute {name!r}")
    importlib.import_module(".render", __name__)  # registers how a Report prints and shows in a notebook
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
