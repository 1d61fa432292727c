"""Trace text made safe to print: the one place that decides what an output may carry.

Kernel names, op names, labels, device names and file names come from the trace and
are untrusted. On a terminal an ESC sequence can retitle the window, plant a hyperlink
or clear the screen; ``\\r`` and the bidi controls (U+202E ...) rewrite what the reader
sees; a newline breaks a table. So every text output (table, markdown, CSV, HTML and the
CLI's warnings) shows those characters escaped, as Python writes them (``\\x1b``,
``\\r``, ``\\u202e``), and the rest of the name stays as it was. JSON is data and keeps
the exact text (``json.dumps`` escapes controls itself).

In CSV a cell that a spreadsheet would read as a formula (``=``, ``+``, ``-``, ``@``,
tab, CR, or their fullwidth forms first) gets a leading ``'`` (OWASP's advice); a
genuine number such as ``-5`` stays as it is, and so does a lone ``-``.
"""

from __future__ import annotations

import dataclasses
import html
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the frames' functions are given frames: pandas is imported by then
    import pandas as pd

#: C0 controls (newline and tab included: one cell is one line), DEL, C1 controls; the bidi
#: embeddings, overrides, isolates and marks; line/paragraph separators; invisible joiners
#: and the BOM (they hide text); lone surrogates (they cannot be written as UTF-8 at all)
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    ch = match.group()
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text) -> str:
    """``text`` with every control, bidi and invisible character escaped (idempotent)."""
    text = str(text)
    return UNSAFE.sub(_escape, text) if UNSAFE.search(text) else text


def _visible_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The frame with its column names and text cells escaped; numbers untouched. The frame itself
    when it holds nothing to escape (the common case: no copy of a table to show it)."""
    import pandas as pd

    names = {c: visible(c) for c in df.columns if isinstance(c, str) and UNSAFE.search(c)}
    out = df.rename(columns=names) if names else df
    text_cols = [
        c
        for c in out.columns
        if (out[c].dtype.kind == "O" or isinstance(out[c].dtype, pd.StringDtype))
        and any(isinstance(v, str) and UNSAFE.search(v) for v in out[c])
    ]
    if not text_cols:
        return out
    out = out.copy()
    for c in text_cols:  # report tables are aggregates (a few hundred rows), not event tables
        out[c] = pd.Series([visible(v) if isinstance(v, str) else v for v in out[c]], out.index, dtype=object)
    return out


def _visible_value(value):
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_visible_value(v) for v in value)
    if isinstance(value, dict):
        return {_visible_value(k): _visible_value(v) for k, v in value.items()}
    return value


def visible_report(report):
    """A copy of ``report`` whose every text (title, facts, findings, notes, table names,
    headers and cells) is :func:`visible`; what every text renderer draws from."""
    return dataclasses.replace(
        report,
        title=visible(report.title),
        findings=[visible(f) for f in report.findings],
        notes=[visible(n) for n in report.notes],
        info=_visible_value(dict(report.info)),
        tables={visible(name): _visible_frame(df) for name, df in report.tables.items()},
    )


# ---------------------------------------------------------------- CSV formulas

#: what a spreadsheet reads as the start of a formula (ASCII and fullwidth = + - @)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
#: a genuine number (``-5``, ``+1.5e3``, ``-.5``) is left numeric
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)


def defused(text: str) -> str:
    """A CSV cell that cannot start a formula: a leading ``'`` when it would. A lone sign
    (``-``, the tables' "nothing") holds no formula and stays as it is."""
    if len(text) > 1 and text.startswith(FORMULA_START) and not NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The frame as CSV may write it: text escaped (:func:`visible`), formulas defused,
    column names included; numbers untouched."""
    import pandas as pd

    df = _visible_frame(df)
    out = df.rename(columns=lambda c: defused(c) if isinstance(c, str) else c)
    text_cols = [
        c for c in out.columns if out[c].dtype.kind == "O" or isinstance(out[c].dtype, pd.StringDtype)
    ]
    if text_cols:
        out = out.copy()
        for c in text_cols:
            # object kept: a list of ints and NaN would be read back as floats (0 written as 0.0)
            out[c] = pd.Series(
                [defused(v) if isinstance(v, str) else v for v in out[c]], out.index, dtype=object
            )
    return out


def esc(text) -> str:
    """Every text an HTML page or SVG shows goes through here: controls escaped, then HTML."""
    return html.escape(visible(text), quote=True)
