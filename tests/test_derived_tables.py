"""Analyses on codes, computed once (issue 35 items 1 and 2).

The tables an analysis derives from a trace are worked out once per trace and selection and kept
with the trace (``measure.derived``); a cached trace keeps its op work in its cache entry. What is
checked: a second analysis of the same loaded traces says exactly what the first said; a Region
built by hand with other activities never reads a table kept for the trace's own region; the
window split of exposed time (one pass over all windows) equals the split window by window, by
plain interval arithmetic; the op work read back from a cache entry equals the op work worked
out, dtypes and missing values included, and a damaged copy is worked out again.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from corpus import CORPUS, SKIP_REASON

import traceview as tv_load
import traceview.api as tv
from traceview import cache
from traceview.analyses.measure import groups
from traceview.analyses.measure import intervals as iv
from traceview.analyses.measure.derived import as_text, text_counts, texts
from traceview.analyses.measure.efficiency import _kernel_work, kernel_work
from traceview.analyses.measure.exposed import exposed, gpu_layers, host_layers, windows
from traceview.analyses.measure.work import has_shapes, op_work, trace_work
from traceview.analyses.select.region import _matching_activities, region
from traceview.report import report_to_dict

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)
CONTROL = "hta/trace_diff__control__control.json.gz"
TEST = "hta/trace_diff__test__test.json.gz"
PARAM0 = "param/dlrm_kineto__worker0_step_12.1694128201545.pt.trace.json.gz"


def _json(report) -> str:
    return json.dumps(report_to_dict(report), sort_keys=True, default=str)


@needs_corpus
def test_a_second_analysis_of_the_same_traces_says_the_same():
    a = tv_load.load(CORPUS / CONTROL, cache=False)
    b = tv_load.load(CORPUS / TEST, cache=False)
    first = [_json(tv.diff(a, b)), _json(tv.summary(a)), _json(tv.diff(b, a)), _json(tv.advise(b))]
    again = [_json(tv.diff(a, b)), _json(tv.summary(a)), _json(tv.diff(b, a)), _json(tv.advise(b))]
    assert first == again
    # and as freshly loaded traces say it: nothing kept from one trace reaches another
    fresh_a = tv_load.load(CORPUS / CONTROL, cache=False)
    assert _json(tv.summary(fresh_a)) == first[1]


@needs_corpus
def test_a_region_built_by_hand_gets_its_own_tables():
    t = tv_load.load(CORPUS / CONTROL, cache=False)
    r = region(t)
    whole = groups.by_kernel(r)
    fewer = dataclasses.replace(r, activities=r.activities.iloc[: len(r.activities) // 2])
    half = groups.by_kernel(fewer)
    assert half["count"].sum() < whole["count"].sum()
    assert groups.by_kernel(region(t)).equals(whole)  # the trace's own region still reads its own


def _split_one_by_one(layers, lo: int, hi: int) -> list[int]:
    """The split of one window by plain interval arithmetic: each layer's intervals clipped to the
    window, unioned in Python with the layers before it; what is left is uncovered."""
    covered: list[tuple[int, int]] = []

    def union_len(spans):
        total, end = 0, None
        for s, e in sorted(spans):
            if end is None or s > end:
                total += e - s
                end = e
            elif e > end:
                total += e - end
                end = e
        return total

    out, before = [], 0
    for _, (starts, ends) in layers:
        pairs = zip(starts.tolist(), ends.tolist(), strict=True)
        covered += [(max(s, lo), min(e, hi)) for s, e in pairs if e > lo and s < hi]
        now = union_len(covered)
        out.append(now - before)
        before = now
    return [*out, (hi - lo) - before]


@needs_corpus
@pytest.mark.parametrize("name", [CONTROL, PARAM0])
def test_the_window_split_equals_the_split_window_by_window(name):
    t = tv_load.load(CORPUS / name, cache=False)
    r = region(t)
    acts = _matching_activities(t, r.selection)
    layers = gpu_layers(acts)[0] + host_layers(t.events)
    steps = exposed(r).steps
    for step, lo, hi in windows(r, acts):
        row = steps[steps["step"] == step].iloc[0]
        assert [int(x) for x in row.iloc[3 : 3 + len(layers) + 1]] == _split_one_by_one(layers, lo, hi)


def test_lengths_within_windows_equal_clipped_unions():
    rng = random.Random(35)
    for _ in range(200):
        n = rng.randrange(0, 30)
        starts = np.array([rng.randrange(0, 1000) for _ in range(n)], dtype=np.int64)
        ends = starts + np.array([rng.randrange(0, 80) for _ in range(n)], dtype=np.int64)
        lo = np.array([rng.randrange(-50, 1100) for _ in range(10)], dtype=np.int64)
        hi = lo + np.array([rng.randrange(0, 300) for _ in range(10)], dtype=np.int64)
        got = iv.lengths_within((starts, ends), lo, hi)
        windows_ = zip(lo.tolist(), hi.tolist(), strict=True)
        want = [iv.length(iv.clip((starts, ends), a, b)) for a, b in windows_]
        assert got.tolist() == want


def _with_shapes() -> Path:
    """A trace recorded with shapes: the corpus's HTA control trace (GPU kernels too), else a sample."""
    for p in [CORPUS / CONTROL, *sorted(SAMPLES.glob("*.json.gz"))]:
        if not p.is_file():
            continue
        if has_shapes(tv_load.load(p, cache=False).ops):
            return p
    pytest.skip("no sample trace recorded with shapes")


@pytest.mark.skipif(not cache.available(), reason="the cache needs pyarrow")
def test_op_and_kernel_work_are_kept_in_the_cache_entry_and_read_back_exactly(tmp_path):
    path = _with_shapes()
    first = tv_load.load(path, cache=tmp_path)
    made = trace_work(first)
    load_own = ("-launches.", "-value-completeness.")
    kept = sorted(p.name for p in tmp_path.glob("*/derived-*") if not any(w in p.name for w in load_own))
    assert len(kept) == 2 and kept[0].endswith("op_work.arrow") and kept[1].endswith("op_work.json")
    per_kernel = kernel_work(first)
    again = tv_load.load(path, cache=tmp_path)
    assert again.cached

    def not_again(_):
        raise AssertionError("worked out again: the kept table was not read back")

    pd.testing.assert_frame_equal(cache.derived_frame(again, "op_work", not_again), made)
    read = trace_work(again)
    pd.testing.assert_frame_equal(read, op_work(again.ops))
    pd.testing.assert_frame_equal(read, made)
    for col in read.columns:  # missing values as they were made (None stays None)
        assert [x is None for x in read[col]] == [x is None for x in made[col]]
    pd.testing.assert_frame_equal(kernel_work(again), per_kernel)  # read back too
    pd.testing.assert_frame_equal(kernel_work(again), _kernel_work(again))


@pytest.mark.skipif(not cache.available(), reason="the cache needs pyarrow")
def test_a_damaged_kept_table_is_worked_out_again(tmp_path):
    path = _with_shapes()
    trace_work(tv_load.load(path, cache=tmp_path))
    (arrow,) = tmp_path.glob("*/derived-*-op_work.arrow")
    data = bytearray(arrow.read_bytes())
    data[len(data) // 2] ^= 0xFF
    arrow.write_bytes(bytes(data))
    again = tv_load.load(path, cache=tmp_path)
    pd.testing.assert_frame_equal(trace_work(again), op_work(again.ops))


def test_a_trace_loaded_without_the_cache_writes_no_table(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEVIEW_CACHE_DIR", str(tmp_path))
    trace_work(tv_load.load(SAMPLES / "naive.json.gz", cache=False))
    assert not list(tmp_path.glob("**/derived-*"))


@needs_corpus
@pytest.mark.skipif(not cache.available(), reason="the cache needs pyarrow")
def test_a_warm_diff_and_summary_say_what_the_cold_ones_say(tmp_path):
    """From a cache entry holding the kept tables (op and kernel work, per-kernel groups, the exposed
    split, kernel efficiency), with a step and a stream selection too."""

    def reports(cache_arg):
        a = tv_load.load(CORPUS / CONTROL, cache=cache_arg)
        b = tv_load.load(CORPUS / TEST, cache=cache_arg)
        step = int(a.steps["step"].iloc[-1])
        return [
            _json(tv.diff(a, b)),
            _json(tv.summary(b)),
            _json(tv.exposed(a, step=step)),
            _json(tv.summary(a, stream=int(a.kernels["stream"].dropna().iloc[0]))),
            _json(tv.compare([b, a])),
            _json(tv.advise(a)),
        ]

    cold = reports(False)
    assert reports(tmp_path) == cold  # the first load stores the entries and the kept tables
    kept = [p.name for p in tmp_path.glob("*/derived-*.json")]
    for what in (
        "-op_work.",
        "-kernel_work.",
        "-kernel_efficiency.",
        "-by_kernel-",
        "-exposed-",
        "-launches.",
        "-op_table-",
        "-chain_table-",
        "-category_times-",
        "-advice-None-",
        "-advice_rules-None-",
        "-value-workload-",
        "-value-side_figures-",
        "-value-category_efficiency-gemm-",
        "-value-category_efficiency-attention-",
        "-value-zero_time_work.",
        "-value-completeness.",
        "-value-host_launches-",
        "-value-category_rate-gemm-",
        "-value-op_figures-",
        "-value-sdpa_ops-",
        "-value-has_shapes.",
        "-value-has_stacks.",
        "-value-metrics-",
        "-launches_by_api.",
        "-by_kind-",
        "-per_step-",
        "-kernel_totals-",
        "-by_category-",
    ):
        assert any(what in n for n in kept), (what, kept)
    assert reports(tmp_path) == cold  # read back


@needs_corpus
@pytest.mark.skipif(not cache.available(), reason="the cache needs pyarrow")
def test_a_warm_diff_reads_the_kept_values_and_works_none_out(tmp_path, monkeypatch):
    """What a warm diff asks of each side is read from the entry: no value is worked out again, and
    neither the op work nor the kernel work (tables of every op and kernel) is read; nor does a
    warm summary or compare work any out."""
    tv.diff(CORPUS / CONTROL, CORPUS / TEST, cache=tmp_path)
    tv.summary(CORPUS / CONTROL, cache=tmp_path)
    tv.compare([CORPUS / CONTROL, CORPUS / TEST], cache=tmp_path)
    made, read = [], []
    for name in ("derived_value", "derived_frame"):
        real = getattr(cache, name)

        def spy(trace, what, make, real=real):
            read.append(what)
            return real(trace, what, lambda t: made.append(what) or make(t))

        monkeypatch.setattr(cache, name, spy)
    tv.diff(CORPUS / CONTROL, CORPUS / TEST, cache=tmp_path)
    assert read and not made, made
    assert not {"op_work", "kernel_work", "kernel_efficiency"} & set(read), read
    made.clear()
    tv.summary(CORPUS / CONTROL, cache=tmp_path)
    tv.compare([CORPUS / CONTROL, CORPUS / TEST], cache=tmp_path)
    assert not made, made


@needs_corpus
@pytest.mark.skipif(not cache.available(), reason="the cache needs pyarrow")
def test_a_damaged_kept_value_is_worked_out_again(tmp_path):
    cold = _json(tv.diff(CORPUS / CONTROL, CORPUS / TEST, cache=False))
    assert _json(tv.diff(CORPUS / CONTROL, CORPUS / TEST, cache=tmp_path)) == cold
    files = sorted(tmp_path.glob("*/derived-*-value-*.json"))
    assert len(files) >= 8
    for i, f in enumerate(files):  # a flipped byte, a cut file, another value under a good checksum
        data = f.read_bytes()
        if i % 3 == 0:
            f.write_bytes(data[:-5] + bytes([data[-5] ^ 0x55]) + data[-4:])
        elif i % 3 == 1:
            f.write_bytes(data[: len(data) // 2])
        else:
            body = b'{"value":{"set":[{"list":[1]}]}}'
            f.write_bytes(cache._sum_line(body) + body)
    assert _json(tv.diff(CORPUS / CONTROL, CORPUS / TEST, cache=tmp_path)) == cold


@needs_corpus
@pytest.mark.skipif(not cache.available(), reason="the cache needs pyarrow")
def test_a_trace_loaded_with_a_device_table_is_rated_on_it_not_on_what_the_entry_kept(tmp_path):
    """The entry's kept efficiency and advice are the built-in table's: a load with ``devices=`` (a
    file the entry's key does not cover) works its own out, as it would without the cache."""
    devices = tmp_path / "devices.toml"
    devices.write_text(
        'version = 1\n[[device]]\nname = "A100 SXM4 40GB"\nmatch = "NVIDIA A100-PG509-200"\n'
        'memory_gbps = 100\nsource = "a test"\ntensor = { fp32 = 20.0 }\nvector = { fp32 = 1.0 }\n',
        encoding="utf-8",
    )
    store = tmp_path / "cache"
    plain = _json(tv.diff(CORPUS / CONTROL, CORPUS / TEST, cache=store))  # keeps the built-in table's
    cold = _json(tv.diff(CORPUS / CONTROL, CORPUS / TEST, cache=False, devices=devices))
    assert cold != plain  # the file's peaks change the efficiency table
    warm = _json(tv.diff(CORPUS / CONTROL, CORPUS / TEST, cache=store, devices=devices))
    assert warm == cold
    assert _json(tv.diff(CORPUS / CONTROL, CORPUS / TEST, cache=store)) == plain  # and back again


def test_as_text_is_astype_str_row_by_row():
    """``derived.as_text`` (each distinct text made once) equals ``astype(str)``: categorical and
    object columns, missing values (None, NaN) and non-text values included."""
    cols = [
        pd.Series(["b", None, "a", "b", np.nan], dtype="category"),
        pd.Series(["b", None, "a", "b", np.nan], dtype=object),
        pd.Series([1, None, "x", 2.5, 1], dtype=object),
        pd.Series([], dtype="category"),
        pd.Series(["fp16", "bf16"], dtype="str"),
    ]
    for col in cols:
        want = col.astype(str).to_numpy()
        got = as_text(col)
        assert len(got) == len(want)
        assert all((g == w) or (g != g and w != w) for g, w in zip(got, want, strict=True)), (got, want)


def test_text_counts_is_value_counts_of_the_texts():
    """``derived.text_counts`` (counted on codes) equals ``astype(str).value_counts()`` item by item,
    order included (commonest first, a tie to the text met first, missing left out), on random
    categorical and object columns with missing values."""
    rng = np.random.default_rng(35)
    for _ in range(500):
        k = int(rng.integers(1, 12))
        pool = np.array([f"k{i}" for i in range(k)] + [None, np.nan], dtype=object)
        values = pool[rng.integers(0, k + 2, int(rng.integers(0, 200)))]
        for col in (pd.Series(values, dtype="category"), pd.Series(values, dtype=object)):
            codes, texts_ = texts(col)
            want = list(col.astype(str).value_counts().items())
            assert text_counts(codes, texts_) == want, (values, want)


@pytest.mark.skipif(not cache.available(), reason="the cache needs pyarrow")
@pytest.mark.parametrize("with_objects", [False, True])
def test_a_kept_table_reads_back_every_kind_of_column_exactly(tmp_path, with_objects):
    """Kept tables are read as their Arrow schema's pandas metadata says, except that a table with
    object columns reads ints through nullable types: both ways each column comes back exactly
    (ints beyond 2**53, missing values, None in object columns)."""
    big = 2**53 + 1
    frame = pd.DataFrame(
        {
            "i": np.array([big, -3, 0], dtype=np.int64),
            "n": pd.array([big, None, 7], dtype="Int64"),
            "b": np.array([True, False, True]),
            "nb": pd.array([True, None, False], dtype="boolean"),
            "f": [1.5, np.nan, -0.0],
            "c": pd.Categorical(["x", None, "y"]),
            "s": pd.Series(["a", None, "c"], dtype="str"),
        }
    )
    if with_objects:
        frame["o"] = pd.Series(["t", None, "u"], dtype=object)
        frame["oi"] = pd.Series([big, None, 2], dtype=object)
    entry = tmp_path / "entry"
    entry.mkdir()
    cache._write_derived(entry, "derived-x-t", frame)
    back = cache._kept_frame(entry, "derived-x-t")
    assert back is not None
    pd.testing.assert_frame_equal(back, frame, check_exact=True)
    assert list(back.dtypes) == list(frame.dtypes)
    assert back["i"].tolist() == frame["i"].tolist() and back["n"].tolist() == frame["n"].tolist()
    if with_objects:
        assert back["oi"].tolist() == [big, None, 2] and back["o"].tolist() == ["t", None, "u"]
