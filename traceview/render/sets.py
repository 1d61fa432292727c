"""Whether a value is ``traceview report``'s ReportSet, asked without importing its module: it
imports every analysis, and a command that never imported it (summary, diff, ...) holds none."""

from __future__ import annotations

import sys

_REPORT_SET = __name__.split(".")[0] + ".analyses.report_set"


def is_report_set(x) -> bool:
    """Whether ``x`` is ``traceview report``'s ReportSet."""
    module = sys.modules.get(_REPORT_SET)
    return module is not None and isinstance(x, module.ReportSet)
