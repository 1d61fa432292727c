"""``traceview hta``'s sentences state what its tables show (reviewer's items 5 and 9 of issue M3):
the temporal sentence rounds the table's percents as the table does, and the launch view says
which GPU activities HTA's launch statistics leave out (driver-API ``cuLaunchKernel`` launches)."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON

from traceview.cli import main
from traceview.render.cells import cell

H100 = CORPUS / "tracelens" / "h100__gaunernst_bert-small-uncased__1016001.json.gz"

pytestmark = pytest.mark.skipif(not H100.exists(), reason=SKIP_REASON)


@pytest.fixture(scope="module")
def hta_mod():
    return pytest.importorskip("hta")


def _hta(analysis: str, tmp_path) -> dict:
    args = ["hta", str(H100), "--analysis", analysis, "--format", "json", "--no-cache"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_temporal_sentence_rounds_as_the_table(hta_mod, tmp_path):
    doc = _hta("temporal", tmp_path)
    sentence = doc["findings"][0]
    sentence = sentence["text"] if isinstance(sentence, dict) else sentence
    for row in doc["tables"]["breakdown"]:
        shown = cell("pct_of_span", row["pct_of_span"])  # the table's cell
        assert re.search(rf"{row['bucket']}( \([^)]*\))? {re.escape(shown)}%", sentence), (row, sentence)
    # the H100 trace's computation share is 6.44996%: HTA's own column rounds it to 6.5
    assert "computation 6.4%" in sentence


def test_launch_says_what_hta_left_out(hta_mod, tmp_path):
    doc = _hta("launch", tmp_path)
    # independent recount from the JSON: GPU activities by the CPU call sharing their correlation
    with gzip.open(H100) as f:
        events = json.load(f)["traceEvents"]
    gpu = {"kernel", "gpu_memcpy", "gpu_memset"}
    corr = [e["args"]["correlation"] for e in events if e.get("cat") in gpu and e.get("ph") == "X"]
    calls = {
        e["args"]["correlation"]: e["name"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    by_call = Counter(calls.get(c) for c in corr)
    runtime = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync")
    left = sum(n for name, n in by_call.items() if name not in runtime)
    assert doc["info"]["gpu_activities"] == len(corr) == 61
    assert doc["info"]["launches"] == len(corr) - left == 39
    texts = [f["text"] if isinstance(f, dict) else f for f in doc["findings"]]
    assert any(f"{left} of {len(corr)} GPU activities are not in HTA" in t for t in texts), texts
    assert any(f"{by_call['cuLaunchKernel']} launched by cuLaunchKernel" in t for t in texts), texts
