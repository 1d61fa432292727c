"""int64 values above 2**53 print exactly in every format (a float has only 53 bits)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from traceview.render import render
from traceview.render.cells import cell
from traceview.report import Report

TS = 1_694_128_201_545_674_000  # an absolute timestamp in ns: float() makes it ...673,920 or so
ODD = 2**53 + 1  # the first integer a float can't hold


def _report() -> Report:
    df = pd.DataFrame(
        {
            "ts_ns": np.array([TS, TS + 1], dtype=np.int64),
            "count": np.array([ODD, ODD + 2], dtype=np.int64),
            "nullable_ns": pd.array([TS + 3, None], dtype="Int64"),
            "avg": [1.5, 2.25],
        }
    )
    return Report(kind="x", title="exact", tables={"t": df}, info={"start_ns": TS, "events": ODD})


def test_float_would_lose_these_digits():
    assert f"{float(TS):,.0f}" != f"{TS:,}" and float(ODD) != ODD  # the test can fail


@pytest.mark.parametrize("column", ["ts_ns", "count", "start (ns)"])
@pytest.mark.parametrize("value", [TS, np.int64(TS), ODD, np.int64(ODD)])
def test_cell_prints_integers_exactly(column, value):
    assert cell(column, value) == f"{int(value):,}"


@pytest.mark.parametrize("fmt,rich", [("table", False), ("table", True), ("markdown", None), ("html", None)])
def test_human_formats_print_int64_exactly(fmt, rich):
    out = render(_report(), fmt, rich=rich, width=None)
    for v in (TS, TS + 1, ODD, ODD + 2, TS + 3):
        assert f"{v:,}" in out, (fmt, v)


def test_json_and_csv_hold_int64_exactly():
    doc = json.loads(render(_report(), "json"))
    row = doc["tables"]["t"][0]
    assert (row["ts_ns"], row["count"], row["nullable_ns"]) == (TS, ODD, TS + 3)
    assert doc["info"] == {"start_ns": TS, "events": ODD}
    csv = render(_report(), "csv")
    assert f"{TS},{ODD},{TS + 3}" in csv
