"""The value every analysis returns: named tables plus plain-language findings.

Renderers (traceview/render/) turn a Report into text, markdown, JSON or CSV;
the CLI only picks a renderer. In a notebook a Report shows as HTML and its
tables are ordinary DataFrames (``report["by_kind"]``). ``to_dict`` is the Report
as plain data (the JSON output's schema, documented in docs/json-schema.md).

How a Report shows itself (``print``, a notebook) is rendering, which sits above
this module: ``DISPLAY`` names the two render functions (data this layer owns) and
they are looked up when a Report is shown, so nothing registers itself on import and a
Report shows the same whatever was imported first.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

SCHEMA_VERSION = 1
#: how ``str(report)`` and a notebook show a Report: (module, function) of traceview.render
DISPLAY: dict[str, tuple[str, str]] = {
    "text": ("traceview.render", "display_text"),
    "html": ("traceview.render.html", "render_html"),
}


def _display(how: str, report: Report) -> str:
    # by name, at call time: rendering sits above this layer, which never imports it
    module, name = DISPLAY[how]
    return getattr(importlib.import_module(module), name)(report)


class Finding(str):
    """A sentence of a diff or compare together with its ``evidence``: for every figure it states,
    the table, row (its key columns) and column the figure was read from and how it reads
    (:func:`traceview.analyses.wording.words.reads`), so a script can re-derive each number.
    A ``str`` so that every renderer and caller still reads it as the sentence it is.

    The str methods and operators that make one new text of it (``strip``, ``replace``, ``+``,
    ``%``, a slice, ...) return a Finding with the same evidence: the sentence escaped, trimmed or
    extended still states those figures. What leaves the class on purpose gives plain text:
    ``str(f)``, an f-string, ``join``, and functions outside ``str`` (``re.sub``)."""

    evidence: tuple = ()

    def __new__(cls, text: str, evidence: Iterable[Any] = ()) -> Finding:
        f = super().__new__(cls, text)
        f.evidence = tuple(evidence)
        return f

    def __radd__(self, other: str) -> Finding:
        return Finding(str(other) + str(self), self.evidence)


def _keeps_evidence(name: str) -> Callable[..., Any]:
    method = getattr(str, name)

    def kept(self: Finding, *args: Any, **kwargs: Any) -> Any:
        out = method(self, *args, **kwargs)
        return Finding(out, self.evidence) if isinstance(out, str) else out

    kept.__name__, kept.__doc__ = name, method.__doc__
    return kept


#: the str methods that return one text made from the finding's own
_ONE_TEXT = (
    "__add__",
    "__mul__",
    "__rmul__",
    "__mod__",
    "__getitem__",
    "capitalize",
    "casefold",
    "center",
    "expandtabs",
    "format",
    "ljust",
    "lower",
    "lstrip",
    "removeprefix",
    "removesuffix",
    "replace",
    "rjust",
    "rstrip",
    "strip",
    "swapcase",
    "title",
    "translate",
    "upper",
    "zfill",
)
for _name in _ONE_TEXT:
    setattr(Finding, _name, _keeps_evidence(_name))


#: the kinds whose JSON findings are objects (``text`` and ``evidence``), not bare strings
FINDING_OBJECTS = frozenset({"diff", "compare", "run_diff", "run_compare"})


@dataclass
class Report:
    kind: str  # "summary", "kernels", "diff", "compare", ...
    title: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    info: dict = field(default_factory=dict)  # scalar facts (device, totals, ...)
    notes: list[str] = field(default_factory=list)  # warnings about the data

    def __getitem__(self, name: str) -> pd.DataFrame:
        """A table by name; ``"info"`` (when no table has that name) is ``info`` as a one-row table,
        so that a finding's evidence that cites it (``{"table": "info", "row": {}, ...}``) is
        looked up as every other citation is."""
        if name == "info" and name not in self.tables:
            return pd.DataFrame([self.info])
        return self.tables[name]

    def __str__(self) -> str:
        return _display("text", self)

    def _repr_html_(self) -> str:
        return _display("html", self)

    def to_dict(self) -> dict:
        return report_to_dict(self)


def report_to_dict(report: Report) -> dict:
    return {
        "schema": "traceview.report",
        "schema_version": SCHEMA_VERSION,
        "kind": report.kind,
        "title": report.title,
        "info": plain(report.info),
        "findings": _findings(report),
        "tables": {name: _records(df) for name, df in report.tables.items()},
        "notes": list(report.notes),
    }


def _findings(report: Report) -> list:
    if report.kind not in FINDING_OBJECTS:
        return list(report.findings)
    return [
        {"text": str(f), "evidence": [plain(e) for e in getattr(f, "evidence", ())]} for f in report.findings
    ]


def _records(df: pd.DataFrame) -> list[dict]:
    return [
        {str(c): plain(v) for c, v in zip(df.columns, row, strict=True)} for row in df.itertuples(index=False)
    ]


def plain(value: Any) -> Any:
    """A value as JSON-ready Python: numpy scalars to int/float/bool, nan to None."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or value is pd.NA:
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if math.isnan(value) or math.isinf(value) else float(value)
    if isinstance(value, (int, str)):
        return value
    return str(value)
