"""``compare --run``'s ``stragglers`` and ``wait_caused_ns`` cover the same ranks (issue M3 item 6):
run A = ranks 0-3 of param, run B = ranks 0-7 (linked in a temporary folder, never copied). The
wait was summed over the compared ranks 0-3 while B's straggler (rank 7, named by all 8 ranks)
was not one of them: B read ``wait_caused_ns 0, stragglers 7``. Checked against ``traceview ranks``
of each whole run."""

from __future__ import annotations

import pytest
from corpus import CORPUS, SKIP_REASON

import traceview as tv

PARAM = CORPUS / "param"
pytestmark = pytest.mark.skipif(not PARAM.is_dir(), reason=SKIP_REASON)


def _linked(folder, n: int):
    folder.mkdir()
    for f in sorted(PARAM.glob("dlrm_kineto__worker*"))[:n]:
        (folder / f.name).symlink_to(f)
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    return _linked(tmp / "runA", 4), _linked(tmp / "runB", 8)


def test_stragglers_and_wait_cover_the_compared_ranks(runs):
    report = tv.compare_runs([str(r) for r in runs])
    rows = report["compare"].set_index("run")
    for run in runs:
        whole = tv.ranks(str(run))
        compared = [0, 1, 2, 3]
        named = sorted(set(whole["stragglers"]["straggler"].astype(int)))
        waits = whole["ranks"].set_index("rank")["wait_caused_ns"]
        row = rows.loc[run.name]
        assert row["wait_caused_ns"] == waits.loc[compared].sum()
        inside = [r for r in named if r in compared]
        outside = [r for r in named if r not in compared]
        text = ", ".join(map(str, inside)) or "none"
        assert row["stragglers"] == text + (
            f" ({', '.join(map(str, outside))} not compared)" if outside else ""
        )
    assert rows.loc["runB", "stragglers"] == "none (7 not compared)"  # was "7" beside a wait of 0
    assert rows.loc["runA", "stragglers"] == "2" and rows.loc["runA", "wait_caused_ns"] == 16_564_000
