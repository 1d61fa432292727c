"""``traceview ranks`` in every output format, its one-line errors, and ``traceview diff RUN_A/ RUN_B/``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON

from traceview.cli import main

PARAM = CORPUS / "param"
pytestmark = pytest.mark.skipif(not PARAM.is_dir(), reason=SKIP_REASON)
RANKS = sorted(PARAM.glob("dlrm_kineto__worker*"))


def _run(*args):
    return CliRunner().invoke(main, [*map(str, args)])


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "csv"])
def test_every_format(fmt):
    res = _run("ranks", *RANKS, "--format", fmt)
    assert res.exit_code == 0, res.output
    assert "worker7" in res.stdout and "straggler" in res.stdout
    if fmt == "json":
        doc = json.loads(res.stdout)
        assert doc["kind"] == "ranks" and len(doc["tables"]["ranks"]) == 8
        assert {"ranks", "steps", "stragglers", "collectives", "categories", "streams"} <= set(doc["tables"])


@pytest.mark.parametrize(
    "args,needle",
    [
        (lambda: ["/no/such/run"], "/no/such/run"),
        (lambda: [*RANKS, RANKS[0]], "rank 0 again"),  # built at run time: RANKS is empty without the corpus
    ],
)
def test_errors_are_one_line_exit_1(args, needle):
    res = _run("ranks", *args())
    assert res.exit_code == 1 and needle in res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output


def test_diff_of_two_runs_matches_ranks(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, files in ((a, RANKS[:6]), (b, RANKS[2:])):
        folder.mkdir()
        for f in files:
            (folder / f.name).symlink_to(f)
    res = _run("diff", a, b, "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    rows = {r["rank"]: r for r in doc["tables"]["ranks"]}
    assert doc["kind"] == "run_diff" and list(rows) == ["2", "3", "4", "5", "overall"]
    assert rows["2"]["a_idle_ns"] == rows["2"]["b_idle_ns"] == 7_046_000  # the same file in both runs
    assert rows["overall"]["a_span_ns"] == sum(rows[r]["a_span_ns"] for r in "2345")
    assert sorted(doc["notes"]) == [
        f"rank {r} is only in {w}" for r, w in ((0, "A"), (1, "A"), (6, "B"), (7, "B"))
    ]
    assert any("stragglers: 2 in A, 7 in B" in f["text"] for f in doc["findings"])
