"""traceview: analyse saved PyTorch profiler traces (Chrome/Kineto JSON) offline, no GPU needed.

Quick start::

    import traceview as tv
    t = tv.load("trace.json.gz")          # exact, linked pandas DataFrames: t.kernels, t.ops, t.events
    print(tv.summary(t))                  # what `traceview summary` prints; a Report of DataFrames
    tv.diff("a.json", "b.json")["by_kernel"]   # every command of the CLI, same parameters
    tv.advise(t)                          # what to do about it, ranked by the time at stake

Every CLI command is a function here (``help(tv.diff)``) returning a :class:`Report`: named
``tables`` (DataFrames), ``findings`` (sentences whose figures cite their cells) and ``notes``.

``import traceview`` imports neither pandas nor numpy: :func:`load`, ``Trace``, ``LoadOptions``,
``Report`` and :func:`classify` (the load layer), the commands (``tv.summary``, ...),
``tv.Selection`` and the ``api``/``render``/``analyses`` modules are imported the first time
one of them is asked for (PEP 562 ``__getattr__``, issues 23 and 35): a script that only loads
traces does not pay for the analyses and renderers, and the command line answers a repeated
command from its record (``traceview.replay``) before any of them is imported. A Report finds
its renderer when it is shown (``report.DISPLAY``), so nothing has to be imported for that here.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import CheckRuleError, NotATraceError, RuleError, TraceReadError, TraceviewError

#: the load layer's names, imported on first use like the commands (they import pandas): the
#: command line's replay of a repeated command answers before any of them is needed
_LIGHT = {
    "load": "load",
    "classify": "classify",
    "Trace": "model",
    "LoadOptions": "options",
    "Report": "report",
}


class _Package(types.ModuleType):
    """The package: ``load``, ``classify`` and ``report`` are its functions, never the submodules
    of those names. An import sets the package attribute of a submodule when it first loads it
    (``traceview.load`` the module, wherever it is first imported); here that attribute is not
    kept, so the name reaches ``__getattr__`` and is the function."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("load", "classify", "report") and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time ``__getattr__`` imports these
    from . import analyses as analyses
    from . import api as api
    from . import render as render
    from .api import (
        Selection,
        advise,
        annotate,
        assert_check,
        check,
        compare,
        compare_runs,
        diff,
        diff_runs,
        exposed,
        hta,
        kernels,
        load_run,
        memory,
        ranks,
        report,
        roofline,
        summary,
        summary_run,
        timeline,
    )
    from .classify import classify
    from .load import load
    from .model import Trace
    from .options import LoadOptions
    from .report import Report

__all__ = [
    "CheckRuleError",
    "LoadOptions",
    "NotATraceError",
    "Report",
    "RuleError",
    "Selection",
    "Trace",
    "TraceReadError",
    "TraceviewError",
    "__version__",
    "advise",
    "annotate",
    "assert_check",
    "check",
    "classify",
    "compare",
    "compare_runs",
    "diff",
    "diff_runs",
    "exposed",
    "hta",
    "kernels",
    "load",
    "load_run",
    "memory",
    "ranks",
    "report",
    "roofline",
    "stacks",
    "summary",
    "summary_run",
    "timeline",
]

#: the names ``__getattr__`` supplies: those of ``__all__`` defined by ``api`` (functions, Selection)
_FROM_API = frozenset(__all__) - set(globals()) - set(_LIGHT)
#: modules ``import traceview`` used to import and scripts reach as attributes (``tv.api.breakdown``)
_MODULES = ("analyses", "api", "render")


if not TYPE_CHECKING:  # hidden from type checkers: they see the names above, and a typo stays an error

    def __getattr__(name: str) -> Any:
        """The commands and the heavier modules, imported on first use. Both ``api`` and ``render``
        are imported, so that after it the package holds what an eager ``import traceview`` held."""
        if name in _LIGHT:
            found = getattr(importlib.import_module(f"{__name__}.{_LIGHT[name]}"), name)
            globals()[name] = found
            return found
        if name not in _FROM_API and name not in _MODULES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        # import_module, not ``from . import``: that asks this package for the names first (hasattr),
        # which would come back here
        mods = {m: importlib.import_module(f"{__name__}.{m}") for m in _MODULES}
        found = {n: getattr(mods["api"], n) for n in _FROM_API} | mods
        globals().update(found)  # later look-ups are plain attributes, not calls of this hook
        return found[name]

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__) | set(_MODULES))
