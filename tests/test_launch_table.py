"""The launch table (``launches.launches``: api, kind, lost, ts_ns of every runtime launch call)
holds ``api`` and ``kind`` as categoricals of the names used, in name order (issue 35: a take of
Arrow strings per launch cost ~0.1 s of a 300 MB load). Checked: the codes read back as the texts
row by row, the categories come in name order (what by_api and host launches group by), and the
tables built on it keep their orders and counts against a plain count of the launch rows."""

from __future__ import annotations

import corpus
import numpy as np
import pandas as pd
import pytest

import traceview as tv
from traceview.launches import _in_name_order, by_api, launches


def test_codes_read_back_as_their_texts_in_name_order():
    rng = np.random.default_rng(7)
    texts = pd.Index(
        ["cudaLaunchKernel", "cudaMemcpyAsync", "b", "a", "cuLaunchKernel", "zz", "A"], dtype="str"
    )
    for _ in range(50):
        codes = rng.integers(-1, len(texts), size=int(rng.integers(0, 40)))
        got = _in_name_order(texts, codes)
        want = [texts[c] if c >= 0 else None for c in codes]
        assert [None if pd.isna(v) else v for v in got.astype(object)] == want
        assert list(got.categories) == sorted({w for w in want if w is not None})


@pytest.mark.parametrize("path", corpus.corpus_params())
def test_by_api_counts_and_orders_the_launch_rows(path):
    t = tv.load(path, cache=False)
    lw = launches(t)
    assert isinstance(lw["api"].dtype, pd.CategoricalDtype) and list(lw["api"].cat.categories) == sorted(
        lw["api"].cat.categories
    )
    plain: dict = {}
    for api, kind, lost in zip(lw["api"].astype(object), lw["kind"].astype(object), lw["lost"], strict=True):
        n, k = plain.get((api, kind), (0, 0))
        plain[(api, kind)] = (n + 1, k + int(lost))
    want = sorted(
        ((a, k, n, lost) for (a, k), (n, lost) in plain.items()), key=lambda r: (-r[3], -r[2], r[0], r[1])
    )
    got = by_api(t)
    assert list(zip(got["api"], got["kind"], got["launches"], got["without_gpu"], strict=True)) == want
