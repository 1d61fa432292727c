"""Plain values through JSON and back (``traceview.plain``), as the cache keeps a region's small results.

What is checked: every value made of the plain types comes back equal and of the very same types at
every depth (a tuple stays a tuple, NaN stays NaN, an ``np.float64`` stays one, -0.0 keeps its sign)
through msgspec's JSON, as the cache writes it; a value holding anything else is refused; data that
``encode`` never gives (an unknown tag, a tag with a wrong body, a plain JSON object) is refused, so
a damaged or forged file never becomes a value of another type.
"""

from __future__ import annotations

import math

import msgspec
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview import plain
from traceview.devices import load_devices

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(np.int64),
    st.integers(min_value=-(2**31), max_value=2**31 - 1).map(np.int32),
    st.floats(allow_nan=True).map(np.float64),
    st.booleans().map(np.bool_),
)
_keys = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.text(max_size=8),
    st.tuples(st.text(max_size=4), st.integers(min_value=0, max_value=2**40)),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.sets(_keys, max_size=4),
        st.dictionaries(_keys, inner, max_size=4),
    ),
    max_leaves=20,
)


def _same(a, b) -> bool:
    """Equal, of the same type at every depth; NaN equal to NaN, 0.0 not to -0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (float, np.floating)):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


def _through_json(value):
    return plain.decode(msgspec.json.decode(msgspec.json.encode({"value": plain.encode(value)}))["value"])


@settings(max_examples=400, deadline=None)
@given(_values)
def test_a_plain_value_comes_back_the_same_through_json(value):
    assert _same(_through_json(value), value)


def test_the_values_the_analyses_keep_come_back_the_same():
    """Shaped as the cache keeps them: a region's work (sets of pairs, dicts keyed by pairs, None),
    a side's figures, a category's efficiency with NaN peaks."""
    values = [
        {
            "flops": 1.5e12,
            "bytes": None,
            "shapes": {("aten::mm", "[[4, 8], [8, 2]]"), ("aten::bmm", "None")},
            "gemm_m_by_op": {("aten::mm", 4): 3, ("aten::addmm", 2**40): 1},
            "gemm_m": {4: 3, 2**40: 1},
        },
        (3.4e11, "bf16", None, "", 0.0),
        {"tflops": float("nan"), "pct_of_peak": float("inf"), "path": None, "device": None, "causal": False},
        (np.float64(-0.0), np.int64(2**62), np.bool_(True), -0.0),
        [],
        {},
        set(),
        (),
    ]
    for value in values:
        assert _same(_through_json(value), value), value


@pytest.mark.parametrize(
    "value",
    [
        object(),
        pd.DataFrame({"a": [1]}),
        np.float32(1.5),
        np.arange(3),
        b"bytes",
        1 + 2j,
        {"k": [1, {2: object()}]},
        load_devices()[0],
        True.__class__,
    ],
    ids=lambda v: type(v).__name__,
)
def test_anything_else_is_refused(value):
    with pytest.raises(plain.Unplain):
        plain.encode(value)


@pytest.mark.parametrize(
    "data",
    [
        {"value": 1},  # a plain JSON object: encode never gives one
        {"list": [1], "tuple": [2]},
        {"tuple": "ab"},
        {"dict": [[1, 2, 3]]},
        {"dict": [1]},
        {"float": "1e308"},
        {"int64": "12"},
        {"int64": [1]},
        {"__import__": ["os"]},
        {"DataFrame": [[1]]},
        [1, 2],  # a JSON list: encode writes every list as a tag
    ],
)
def test_data_encode_never_gives_is_refused(data):
    with pytest.raises(plain.Unplain):
        plain.decode(data)


def test_a_list_where_a_key_belongs_is_refused():
    for data in ({"set": [{"list": [1]}]}, {"dict": [[{"list": [1]}, 2]]}):
        with pytest.raises(plain.Unplain):
            plain.decode(data)
