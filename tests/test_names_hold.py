"""Names that say what they hold (issue 21 item 4): counts are integers in every Report table
and every JSON/CSV output, one formatter for counts in sentences and cells alike."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from corpus import CORPUS, SKIP_REASON

from traceview.analyses.wording.words import num
from traceview.render.cells import cell

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
PAIRS = [
    ("kineto/docs_traces__before_fix_trace.json.gz", "kineto/docs_traces__after_fix_trace.json.gz"),
    ("hta/trace_diff__control__control.json.gz", "hta/trace_diff__test__test.json.gz"),
]
#: columns whose name says they hold a count: ``count``, ``*_count``, ``kernels``, ``*_kernels``,
#: ``regions``. ``*_per_step`` metrics are averages by definition (docs/metrics.md) and may be
#: fractional; ``ratio_count`` is a ratio.
COUNT = re.compile(
    r"^(?!ratio_|pct_)(count|[a-z]+_count|kernels|[a-z]+_kernels|regions|instances|other_chains)$", re.I
)


def _traceview(*args: str, tmp_path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "traceview", *args, "--format", "json"],
        capture_output=True,
        text=True,
        env={"TRACEVIEW_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _documents(doc) -> list[dict]:
    docs = doc if isinstance(doc, list) else [doc]
    return [r for d in docs for r in (d.get("reports", [d]) if isinstance(d, dict) else [d])]


def _count_columns(doc) -> dict[str, list]:
    """Count column -> its values. In a per-step table (averages over regions, see
    docs/json-schema.md) a column with a value that is not whole (1.5 kernels per step) is left
    out: a column of averages is the one place a count may hold a fraction."""
    found = {}
    for report in _documents(doc):
        per_step = set(report["info"].get("per_step_tables", ()))
        for name, rows in report["tables"].items():
            for col in rows[0] if rows else {}:
                values = [row[col] for row in rows]
                averages = name in per_step and any(
                    isinstance(v, float) and not v.is_integer() for v in values
                )
                if COUNT.match(col) and not averages:
                    found[f"{report['kind']}.{name}.{col}"] = values
    return found


def _commands(a: str, b: str, tmp_path: Path) -> list[tuple]:
    return [
        ("summary", a),
        ("kernels", a),
        ("kernels", a, "--ops"),
        ("diff", a, b),
        ("compare", a, b),
        ("timeline", a, "--plot", str(tmp_path / "t.png")),
    ]


def _check(commands, tmp_path: Path) -> set[str]:
    seen = set()
    for cmd in commands:
        for col, values in _count_columns(_traceview(*cmd, tmp_path=tmp_path)).items():
            seen.add(col)
            bad = [v for v in values if v is not None and not isinstance(v, int)]
            assert not bad, f"{' '.join(cmd[:1])}: {col} holds {bad[:3]}"
    return seen


@pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)
@pytest.mark.parametrize("pair", PAIRS, ids=[p[0].split("/")[0] for p in PAIRS])
def test_counts_are_json_integers_on_corpus_pairs(pair, tmp_path):
    pytest.importorskip("matplotlib")
    a, b = (str(CORPUS / p) for p in pair)
    seen = _check(_commands(a, b, tmp_path), tmp_path)
    assert "diff.by_category.a_count" in seen and "summary.by_category.count" in seen


def test_counts_are_json_integers_on_sample_traces(tmp_path):
    pytest.importorskip("matplotlib")
    a, b = str(SAMPLES / "naive.json.gz"), str(SAMPLES / "sdpa_flash.json.gz")
    seen = _check([*_commands(a, b, tmp_path), ("compare", str(SAMPLES))], tmp_path)
    assert "diff.cpu_ops.a_count" in seen


@pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)
def test_report_tables_hold_counts_as_integer_dtypes():
    """The DataFrames themselves, not only their JSON: an outer merge or a division by one
    region used to leave ``a_count`` as 117.0."""
    from traceview.api import compare, diff, kernels
    from traceview.load import load

    a, b = (load(CORPUS / p, cache=False) for p in PAIRS[0])
    reports = [diff(a, b), compare([a, b]), kernels(a, ops=True)]
    for r in reports:
        for name, df in r.tables.items():
            for col in df.columns:
                if not COUNT.match(str(col)) or not len(df):
                    continue
                assert df[col].dtype.kind in "iuf", f"{r.kind}.{name}.{col} is {df[col].dtype}"
                if (
                    df[col].dtype.kind in "iu" or not (df[col] % 1).any()
                ):  # a fractional average per step stays float
                    assert df[col].dtype.kind in "iu", f"{r.kind}.{name}.{col} is {df[col].dtype}"


def test_per_step_counts_stay_fractional_only_when_they_are():
    from traceview.analyses.select.region import per_region_count

    assert per_region_count(np.array([6, 12]), 3).dtype == np.int64
    assert per_region_count(np.array([6, 13]), 3).dtype == np.float64
    assert per_region_count(7, 1) == 7 and isinstance(per_region_count(7, 1), np.integer)


def test_one_formatter_for_counts_in_sentences_and_cells():
    for x in (1204, np.int64(1204), 1204.0, 61.5, 0.333, 12345678.25, 2**62 + 1):
        assert num(x) == cell("count", x)
    assert num(1204) == "1,204" and num(2**62 + 1) == f"{2**62 + 1:,}"
    assert cell("step", 1009) == "1009" and cell("rank", 1204) == "1204"  # identifiers: no separators


def _ops_trace(path: Path, dims: list) -> Path:
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 1,
            "ts": 10 * i,
            "dur": 5,
            "args": {
                "External id": i + 1,
                **({"Input Dims": d} if d is not ... else {}),
                "Input type": ["float", "float"],
            },
        }
        for i, d in enumerate(dims)
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_input_dims_are_lists_and_survive_the_cache(tmp_path, monkeypatch):
    """``t.ops.input_dims`` holds the parsed lists (it held pretty-printed JSON text); rows with
    the same shapes share one list; a value that is not a list stays as the trace wrote it;
    a cached load gives the same lists back."""
    from traceview.load import load

    monkeypatch.setenv("TRACEVIEW_CACHE_DIR", str(tmp_path / "cache"))
    dims = [[[2, 3], [3, 4]], [[2, 3], [3, 4]], [[[1, 2], [3]], []], "not shapes", 5, ...]
    path = _ops_trace(tmp_path / "t.json", dims)
    fresh = load(path, cache=False)
    got = fresh.ops["input_dims"].tolist()
    assert got == [[[2, 3], [3, 4]], [[2, 3], [3, 4]], [[[1, 2], [3]], []], '"not shapes"', "5", None]
    assert got[0] is got[1]  # parsed once per distinct text
    load(path, cache=str(tmp_path / "cache"))
    assert any((tmp_path / "cache").iterdir())  # an entry was stored: the next load reads it
    cached = load(path, cache=str(tmp_path / "cache"))
    assert cached.ops["input_dims"].tolist() == got


def test_input_dims_lists_keep_the_flops_and_the_ops_table():
    """The FLOP formulas read the lists (sample_traces was recorded with shapes)."""
    from traceview.analyses.measure.work import op_work
    from traceview.load import load

    t = load(SAMPLES / "naive.json.gz", cache=False)
    dims = t.ops["input_dims"].dropna()
    assert len(dims) and all(isinstance(d, list) for d in dims)
    w = op_work(t.ops)
    mm = (t.ops["name"].astype(str) == "aten::bmm").to_numpy() | (
        t.ops["name"].astype(str) == "aten::mm"
    ).to_numpy()
    assert mm.any() and w["flops"][mm].notna().all()
    for d, f in zip(t.ops["input_dims"][mm], w["flops"][mm], strict=True):
        (*batch, m, k), (*_, k2, n) = d[0], d[1]
        assert k == k2 and f == 2 * int(np.prod(batch or [1])) * m * k * n


@pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)
def test_step_column_marks_activities_outside_every_step():
    """``t.kernels.step`` is <NA> exactly for the activities the per-step numbers leave out
    (docs/metrics.md); ``t.ops.step`` the same for ops; no sentinel number."""
    from traceview.api import summary
    from traceview.load import load

    t = load(CORPUS / "hta/negative_queue_length_values_check__rank0.json.gz", cache=False)
    k = t.kernels
    assert str(k["step"].dtype) == "Int64" and str(t.ops["step"].dtype) == "Int64"
    outside = int(k["step"].isna().sum())
    assert 0 < outside < len(k)
    assert set(k["step"].dropna().astype(int)) <= set(t.steps["step"].astype(int))
    assert summary(t).info["left_out_gpu_activities"] == outside
    assert not (t.ops["step"].dropna() < 0).any()


@pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)
def test_sentences_and_cells_read_a_count_alike():
    """diff's finding says "1,555 kernels" as its overview table's cell does (it said 1555)."""
    from traceview.api import diff
    from traceview.render.cells import display_frame

    a, b = (CORPUS / p for p in PAIRS[1])
    r = diff(a, b)
    ov = r["overview"].set_index("metric")
    nb = ov.loc["kernels_per_step", "b"]
    assert nb >= 1000
    text = next(f for f in r.findings if f.startswith("B launches"))
    assert f"B launches {num(nb)} kernels per step" in text and "," in num(nb)
    rows = display_frame(r["overview"])
    row = next(x for x in rows if x[0] == "kernels_per_step")
    assert row[2] == num(nb)
