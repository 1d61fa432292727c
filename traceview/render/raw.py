"""Raw numbers for CSV and JSON: times in integer nanoseconds, counts as integers.

A column (or info key) that names nanoseconds is rounded to whole ns; a float column
whose values are all whole (counts) becomes integers; averages per step that are not
whole stay floats; percentages and ratios are never touched.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .cells import is_ns, is_pct, is_ratio


def _whole(values: np.ndarray) -> bool:
    v = values[~np.isnan(values)]
    return bool(len(v)) and bool(np.all(v == np.round(v))) and bool(np.all(np.abs(v) < 2**62))


def raw_frame(df: pd.DataFrame) -> pd.DataFrame:
    if "metric" in df.columns:  # diff's overview: each row's unit is its metric's
        return _raw_rows(df)
    out = {}
    for c in df.columns:
        s = df[c]
        name = str(c)
        if s.dtype.kind == "f" and not is_pct(name) and not is_ratio(name):
            v = s.to_numpy(dtype=float)
            if is_ns(name):
                v = np.round(v)
            if is_ns(name) or _whole(v):
                s = pd.Series(v, index=s.index).astype("Int64")
        elif s.dtype.kind in "iu":
            s = s.astype("Int64")  # stays integer when a CSV stacks tables with other columns
        out[c] = s
    return pd.DataFrame(out, index=df.index)


def _raw_rows(df: pd.DataFrame) -> pd.DataFrame:
    out = df.astype({c: object for c in df.columns if c != "metric" and not is_ratio(str(c))})
    for c in out.columns:
        if c != "metric" and not is_ratio(str(c)):
            out[c] = [raw_value(m, v) for m, v in zip(df["metric"].astype(str), df[c], strict=True)]
    return out


def raw_value(key: str, value):
    if (
        isinstance(value, (float, np.floating))
        and not np.isnan(value)
        and not is_pct(key)
        and not is_ratio(key)
    ) and (is_ns(key) or float(value).is_integer()):
        return round(float(value))
    return value


def raw_report(report):
    """A copy of ``report`` with raw numbers (see the module's doc)."""
    return dataclasses.replace(
        report,
        tables={n: raw_frame(df) for n, df in report.tables.items()},
        info={k: raw_value(k, v) for k, v in report.info.items()},
    )
