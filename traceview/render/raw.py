"""The numbers CSV and JSON write: the Report's own, with whole floats as integers.

One rule for both (issue 37: the CLI's data and the API's DataFrames agree): a float column (or
info value) whose values are all whole is written as integers (counts, sums of ns), and nothing is
rounded (a per-step mean keeps its decimals); percentages and ratios stay floats; integer columns
stay integers when a CSV stacks tables with other columns (``Int64``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .cells import is_pct, is_ratio


def _counted(name: str) -> bool:
    return not is_pct(name) and not is_ratio(name)  # a percentage or ratio stays a float


def _whole(values: np.ndarray) -> bool:
    v = values[~np.isnan(values)]
    return bool(len(v)) and bool(np.all(v == np.round(v))) and bool(np.all(np.abs(v) < 2**53))


def raw_frame(df: pd.DataFrame) -> pd.DataFrame:
    if "metric" in df.columns:  # diff's overview: each row is its own metric
        return _raw_rows(df)
    out = {}
    for c in df.columns:
        s = df[c]
        whole = s.dtype.kind == "f" and _counted(str(c)) and _whole(s.to_numpy(dtype=float))
        if whole or s.dtype.kind in "iu":
            s = s.astype("Int64")
        out[c] = s
    return pd.DataFrame(out, index=df.index)


def _raw_rows(df: pd.DataFrame) -> pd.DataFrame:
    out = df.astype({c: object for c in df.columns if c != "metric" and _counted(str(c))})
    for c in out.columns:
        if c != "metric" and _counted(str(c)):
            out[c] = [raw_value(str(m), v) for m, v in zip(df["metric"].astype(str), df[c], strict=True)]
    return out


def raw_value(key: str, value):
    if isinstance(value, (float, np.floating)) and _counted(key) and float(value).is_integer():
        return int(value) if abs(float(value)) < 2**53 else value
    return value


def raw_report(report):
    """A copy of ``report`` with the numbers CSV and JSON write (see the module's doc)."""
    return dataclasses.replace(
        report,
        tables={n: raw_frame(df) for n, df in report.tables.items()},
        info={k: raw_value(str(k), v) for k, v in report.info.items()},
    )
