"""The API's Report and the CLI's JSON hold the same numbers (issue 37): one definition, the
Report's, which the JSON only writes out (a whole float as an integer, nothing rounded)."""

from __future__ import annotations

import json
import math
import numbers
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import traceview as tv
from traceview.render.jsonout import render_json
from traceview.report import Report

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
A, B = str(SAMPLES / "naive.json.gz"), str(SAMPLES / "sdpa_flash.json.gz")


def _same(api, written) -> bool:
    """One cell of a Report against what its JSON wrote: numbers equal exactly, null for missing."""
    if written is None:
        return api is None or bool(pd.isna(api))
    if isinstance(written, bool) or not isinstance(written, numbers.Number):
        return True  # text: rendering's business (escaping), not a number
    if isinstance(api, numbers.Integral):
        return int(api) == written
    return float(api) == written and not math.isnan(float(api))


def _mismatches(report: Report) -> list:
    doc = json.loads(render_json(report))
    out = []
    for name, df in report.tables.items():
        rows = doc["tables"][name]
        assert len(rows) == len(df)
        for i, rec in enumerate(rows):
            for col in df.columns:
                value = df[col].iloc[i]
                if not _same(value, rec[str(col)]):
                    out.append((name, i, col, value, rec[str(col)]))
    for key, value in report.info.items():
        if not isinstance(value, (dict, list, tuple)) and not _same(value, doc["info"][str(key)]):
            out.append(("info", key, value, doc["info"][str(key)]))
    return out


@pytest.mark.parametrize(
    "make",
    [
        lambda: tv.summary(A),
        lambda: tv.summary(B),
        lambda: tv.diff(A, B),
        lambda: tv.diff(B, A, top=None),
    ],
    ids=["summary A", "summary B", "diff A B", "diff B A"],
)
def test_report_tables_and_json_hold_the_same_numbers(make):
    report = make()
    assert not _mismatches(report)


def test_a_per_step_mean_keeps_its_decimals_and_whole_floats_are_integers():
    r = tv.diff(A, B)
    doc = json.loads(render_json(r))
    cpu = r["cpu_ops"]["a_time_ns"].dropna().to_numpy()
    assert np.any(cpu != np.round(cpu))  # per-step means of 3 steps: the case this is about
    written = [row["a_time_ns"] for row in doc["tables"]["cpu_ops"] if row["a_time_ns"] is not None]
    assert written == cpu.tolist()
    # the rule on its own: whole floats (counts) as integers; percentages stay floats
    frame = pd.DataFrame({"n": [2.0, 3.0], "x_ns": [0.5, 1.0], "x_pct": [50.0, 25.0]})
    rows = json.loads(render_json(Report("x", "t", tables={"t": frame})))["tables"]["t"]
    assert rows == [{"n": 2, "x_ns": 0.5, "x_pct": 50.0}, {"n": 3, "x_ns": 1.0, "x_pct": 25.0}]
    assert [type(v) for v in rows[0].values()] == [int, float, float]


def test_csv_writes_the_numbers_json_writes():
    """CSV and JSON follow one rule (render/raw.py): a diff's per-step means keep their decimals in
    both, whole floats are integers in both; read back with the csv module, every numeric cell of
    every table equals the JSON's."""
    import csv
    import io

    from traceview.render.csvout import render_csv

    report = tv.diff(A, B, cache=False)
    doc = json.loads(render_json(report))
    rows = list(csv.DictReader(io.StringIO(render_csv(report))))
    checked = fractional = 0
    for name, records in doc["tables"].items():
        mine = [r for r in rows if r["table"] == name]
        assert len(mine) == len(records), name
        for rec, row in zip(records, mine, strict=True):
            for col, v in rec.items():
                if isinstance(v, bool) or not isinstance(v, numbers.Number):
                    continue
                assert float(row[col]) == v and ("." in row[col]) == isinstance(v, float), (
                    name,
                    col,
                    row[col],
                    v,
                )
                checked += 1
                fractional += isinstance(v, float) and not float(v).is_integer()
    assert checked > 20 and fractional > 0  # the test sees decimals, not only integers
