"""One figure per quantity (issue 32 item 6): a diff that says "compute: elementwise -16.579 ms"
(exposed time: each instant of the steps' wall time to one cause, whatever launched the work) and
two lines later "elementwise -12.123 ms" (the summed durations of the kernels launched in the
steps) read as a contradiction. Each sentence that cites either table names its quantity."""

from __future__ import annotations

import pytest
from corpus import CORPUS, SKIP_REASON

import traceview as tv

PAIRS = [
    ("hta/trace_diff__control__control.json.gz", "hta/trace_diff__test__test.json.gz"),
    (
        "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
        "tracelens/h100__Falconsai_nsfw_image_detection__1016002.json.gz",
    ),
    ("tokenomics/trace0.json.gz", "tokenomics/trace1.json.gz"),
]
#: the words that name each quantity, in every sentence that cites its table
NAMES = {"exposed": "exposed time per ", "by_category": "(kernel durations summed"}


@pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0].split("/")[-1][:24])
def test_exposed_and_busy_gpu_time_are_named_where_said(pair):
    r = tv.diff(*(tv.load(CORPUS / p) for p in pair))
    said = {t: [f for f in r.findings if any(e["table"] == t for e in f.evidence)] for t in NAMES}
    assert said["exposed"], r.findings  # both quantities are said on these pairs
    for table, words in NAMES.items():
        for f in said[table]:
            assert words in f, f
            other = next(w for t, w in NAMES.items() if t != table)
            assert other not in f, f  # one sentence, one quantity
