"""Clocks across ranks (issue 24), on the 8 real ranks of ``param/``.

* One rank's every timestamp moved by +50 ms (a host whose clock is 50 ms ahead): its
  ``clock_offset_ns`` is found within 1 % of that, and the stragglers, the collectives
  and the waits are those of the unshifted run to the ns: every run is aligned, the unshifted
  one too (its ranks' 0.5-1.5 µs of end skew taken out), so where a rank's clock stands
  changes nothing. Two different shifts align to exactly the same times.
* The aligned waits of ``param/`` recounted from the json files with Decimal (offsets as
  medians of the end differences, then last start less each start, at most the kernel).
* Ranks tiled by ``benchmarks/make_large_trace.py`` (each rank's copies spaced by its own
  span: a staircase no clock makes) either align or are refused; in no case do the waits
  caused exceed the ranks' spans.
* All ranks tiled with one period, one rank's clock 50 ms ahead and gaining 500 ppm: the
  drift is fitted (32 collectives a rank) and the stragglers and waits are the undrifted
  run's, within 1 µs a collective.
* Serially and on a local Dask cluster (worker processes on 127.0.0.1): the same report.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import statistics
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from corpus import CORPUS, SKIP_REASON

import traceview as tv
from traceview.analyses.runs import clocks

PARAM = CORPUS / "param"
RANKS = sorted(PARAM.glob("dlrm_kineto__worker*"))
pytestmark = pytest.mark.skipif(not PARAM.is_dir(), reason=SKIP_REASON)
MAKE = Path(__file__).resolve().parents[1] / "benchmarks" / "make_large_trace.py"
SHIFTED = 3
SHIFT_US = 50_000


def shifted_run(folder: Path, rank: int, by_us: float) -> Path:
    """The 8 ranks as plain json, every timestamp of ``rank`` moved by ``by_us`` µs."""
    folder.mkdir()
    for i, f in enumerate(RANKS):
        doc = json.loads(gzip.decompress(f.read_bytes()))
        if i == rank:
            for e in doc["traceEvents"]:
                if isinstance(e.get("ts"), (int, float)) and not isinstance(e["ts"], bool):
                    e["ts"] += by_us
        (folder / f"rank{i}.json").write_text(json.dumps(doc))
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clocks")
    return {
        "plain": tv.ranks(RANKS),
        "shifted": tv.ranks(shifted_run(tmp / "a", SHIFTED, SHIFT_US)),
        "shifted_more": tv.ranks(shifted_run(tmp / "b", SHIFTED, 80_000)),
        "folder": tmp / "a",
    }


@pytest.fixture(scope="module")
def tiled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiled")
    for i, f in enumerate(RANKS):
        subprocess.run(
            [sys.executable, str(MAKE), str(f), str(folder / f"rank{i}.json"), "--copies", "4"],
            check=True,
            capture_output=True,
        )
    return folder


def _tiler():
    spec = importlib.util.spec_from_file_location("make_large_trace", MAKE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def common_tiles(folder: Path, copies: int, drift_rank: int | None = None, ppm: float = 0.0) -> Path:
    """The 8 ranks tiled ``copies`` times with one period for all (their time bases stay together),
    and optionally one rank's clock 50 ms ahead and gaining ``ppm`` µs per s from the run's start."""
    mlt = _tiler()
    docs = [mlt._load(str(f)) for f in RANKS]
    spans = [mlt._span(d["traceEvents"]) for d in docs]
    lo = min(a for a, _ in spans)
    period = int(max(b for _, b in spans) - lo) + mlt.GAP_US
    folder.mkdir()
    for i, doc in enumerate(docs):
        events = doc.pop("traceEvents")
        top, step = mlt._max_ids(events)
        out = [e for e in events if e.get("ph") == "M"]
        for k in range(copies):
            out += mlt._copy(events, k, period, top + 1, step + 1)
        if i == drift_rank:
            for e in out:
                if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M":
                    e["ts"] += SHIFT_US + ppm * 1e-6 * (e["ts"] - lo)
        (folder / f"rank{i}.json").write_text(json.dumps({**doc, "traceEvents": out}))
    return folder


@pytest.fixture(scope="module")
def drifting(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drift")
    return {
        "even": tv.ranks(common_tiles(tmp / "even", 4)),
        "drift": tv.ranks(common_tiles(tmp / "drift", 4, SHIFTED, 500.0)),
        "folder": tmp / "drift",
    }


def _waits(report) -> dict:
    return report["ranks"].set_index("rank")["wait_caused_ns"].astype(int).to_dict()


def _bound_holds(report) -> bool:
    ranks = report["ranks"]
    return int(ranks["wait_caused_ns"].fillna(0).sum()) <= int(ranks["span_ns"].sum())


def test_param_clocks_agree_and_are_aligned_all_the_same(runs):
    plain = runs["plain"]
    ranks = plain["ranks"].set_index("rank")
    assert ranks["clock_offset_ns"].abs().max() <= 2_000 and ranks["clock_residual_ns"].max() <= 1_000
    assert "clock_drift_ppm" not in ranks.columns  # 8 collectives: too few to fit a drift
    assert plain.info["clock_alignment"] == "applied"
    # 35.552 ms as recorded; aligning takes out the ranks' end skew (7.5 us over its 5 collectives)
    assert ranks.loc[7, "wait_caused_ns"] == 35_559_500 and _bound_holds(plain)


def recount_waits(files) -> dict:
    """Wait caused per rank from the json alone (Decimal us): collectives = ncclKernel kernels numbered
    per name; offset = median over collectives of (end - rank 0's end); aligned start = ts - offset;
    at each collective the last to start makes each other rank wait min(last start - its start, dur)."""
    kernels = []
    for f in files:
        doc = json.loads(gzip.decompress(Path(f).read_bytes()), parse_float=Decimal, parse_int=Decimal)
        ks = sorted(
            (e["ts"], e["dur"], e["name"])
            for e in doc["traceEvents"]
            if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel")
        )
        seen: dict = {}
        mine = {}
        for ts, dur, name in ks:
            mine[(name, seen.setdefault(name, 0))] = (ts, dur)
            seen[name] += 1
        kernels.append(mine)
    keys = [k for k in kernels[0] if all(k in m for m in kernels)]
    end = lambda r, k: kernels[r][k][0] + kernels[r][k][1]  # noqa: E731
    off = [statistics.median(end(r, k) - end(0, k) for k in keys) for r in range(len(kernels))]
    caused = dict.fromkeys(range(len(kernels)), Decimal(0))
    for k in keys:
        start = {r: kernels[r][k][0] - off[r] for r in range(len(kernels))}
        last = max(start, key=lambda r: (start[r], -r))
        caused[last] += sum(min(start[last] - start[r], kernels[r][k][1]) for r in start if r != last)
    return {r: int(v * 1000) for r, v in caused.items()}


def test_param_aligned_waits_match_an_independent_recount(runs):
    assert _waits(runs["plain"]) == recount_waits(RANKS)


def test_shifted_rank_offset_found_and_aligned(runs):
    plain, shifted = runs["plain"], runs["shifted"]
    ranks = shifted["ranks"].set_index("rank")
    assert abs(ranks.loc[SHIFTED, "clock_offset_ns"] - SHIFT_US * 1000) <= SHIFT_US * 10  # within 1 %
    assert shifted.info["clock_alignment"] == "applied"
    assert any(f.startswith("applied: ") and f"rank {SHIFTED} by 49.99" in f for f in shifted.findings)
    assert shifted["stragglers"]["straggler"].tolist() == plain["stragglers"]["straggler"].tolist() == [7]
    assert shifted["collectives"]["last_rank"].tolist() == plain["collectives"]["last_rank"].tolist()
    a, b = _waits(plain), _waits(shifted)
    assert all(abs(a[r] - b[r]) <= 1_000 for r in a), (a, b)  # the criterion: within 1 us
    assert a == b and shifted["collectives"].equals(plain["collectives"])  # in fact to the ns
    # per-rank one-clock figures are the rank's own: unchanged by its clock
    cols = ["span_ns", "computation_ns", "communication_ns", "idle_ns", "overlap_pct"]
    assert shifted["ranks"][cols].equals(plain["ranks"][cols])
    assert _bound_holds(shifted)


def test_alignment_does_not_depend_on_the_shift(runs):
    a, b = runs["shifted"], runs["shifted_more"]
    off = b["ranks"].set_index("rank")["clock_offset_ns"] - a["ranks"].set_index("rank")["clock_offset_ns"]
    assert off.loc[SHIFTED] == 30_000_000 and (off.drop(SHIFTED) == 0).all()
    assert _waits(a) == _waits(b)
    assert a["collectives"].equals(b["collectives"])


def test_tiled_ranks_align_or_are_refused_and_waits_stay_possible(tiled):
    report = tv.ranks(tiled)
    ranks = report["ranks"]
    assert _bound_holds(report)
    state = report.info["clock_alignment"]
    if state == "refused":
        line = next(f for f in report.findings if f.startswith("refused: "))
        assert "no stragglers or waits named" in line and "\n" not in line
        assert ranks["wait_caused_ns"].isna().all() and not len(report["stragglers"])
        assert report["collectives"]["last_rank"].isna().all()
    else:
        assert ranks["clock_residual_ns"].max() <= clocks.REFUSE_RESIDUAL_NS
    assert "clock_drift_ppm" in ranks.columns  # 32 collectives per rank: a drift is fitted


def test_drifting_clock_is_fitted_and_aligned(drifting):
    even, drift = drifting["even"], drifting["drift"]
    assert even.info["clock_alignment"] == "applied"  # every run is aligned; here by at most 1.5 us
    ranks = drift["ranks"].set_index("rank")
    assert abs(ranks.loc[SHIFTED, "clock_drift_ppm"] - 500.0) <= 25.0  # 500 ppm over 4 x 24 ms: within 5 %
    assert (ranks.drop(SHIFTED)["clock_drift_ppm"] == 0).all()
    assert drift.info["clock_alignment"] == "applied" and ranks["clock_residual_ns"].max() <= 2_000
    assert drift["stragglers"]["straggler"].tolist() == even["stragglers"]["straggler"].tolist() == [7] * 4
    a, b = _waits(even), _waits(drift)
    assert all(abs(a[r] - b[r]) <= 1_000 * len(even["collectives"]) for r in a), (a, b)  # < 1 µs a collective
    assert _bound_holds(drift)


def test_drift_no_clock_has_is_refused(tmp_path):
    """5,000 ppm fits the ends well but is no quartz clock's (MAX_DRIFT_PPM): refused, nothing named."""
    report = tv.ranks(common_tiles(tmp_path / "steep", 4, SHIFTED, 5_000.0))
    assert report.info["clock_alignment"] == "refused"
    line = next(f for f in report.findings if f.startswith("refused: "))
    assert "fit no clock" in line and "no stragglers or waits named" in line
    assert report["ranks"]["wait_caused_ns"].isna().all() and not len(report["stragglers"])
    assert _bound_holds(report)


def test_diff_and_compare_say_a_run_was_refused(runs, tiled):
    """A run whose clocks were refused shows no wait (overall neither: not a sum of nothing as 0) and no
    straggler, and a finding names it, in ``diff RUN_A/ RUN_B/`` and ``compare --run``."""
    from click.testing import CliRunner
    from test_findings_evidence import check_all

    from traceview.cli import main

    a, b = runs["folder"], tiled
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    rows = doc["tables"]["ranks"]
    assert all(r["b_wait_caused_ns"] is None for r in rows) and len(rows) == 9  # 8 ranks and overall
    assert rows[-1]["a_wait_caused_ns"] == sum(_waits(runs["shifted"]).values())
    check_all(doc)  # the refusal's reason too is a cited cell (info b_clocks_refused)
    texts = [f["text"] for f in doc["findings"]]
    line = next(f for f in texts if "clocks" in f)
    assert line.startswith("B's clocks can't order arrivals") and "refused: " in line
    assert not any(f.startswith("stragglers:") for f in texts)
    res = CliRunner().invoke(main, ["compare", "--run", str(a), str(b), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    by_run = {r["run"]: r for r in doc["tables"]["compare"]}
    assert (
        by_run[b.name]["wait_caused_ns"] is None
        and by_run[b.name]["stragglers"] == "unknown (clocks refused)"
    )
    assert by_run[a.name]["stragglers"] == "7"
    assert all(r["wait_caused_ns"] is None for r in doc["tables"]["ranks"] if r["run"] == b.name)
    check_all(doc)  # quoted from the run diff: its cells in vs_baseline_info
    texts = [f["text"] for f in doc["findings"]]
    assert any(f.startswith(f"{b.name} against {a.name}: {b.name}'s clocks can't") for f in texts)


def test_cli_refusal_is_a_finding_not_an_error(tiled):
    from click.testing import CliRunner

    from traceview.cli import main

    res = CliRunner().invoke(main, ["ranks", str(tiled), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["info"]["clock_alignment"] in ("refused", "applied")
    assert all(r["wait_caused_ns"] is None for r in doc["tables"]["ranks"]) == (
        doc["info"]["clock_alignment"] == "refused"
    )


def test_dask_equals_serial(runs, tiled, drifting):
    """Aligned, refused and drift-fitted runs, on 2 worker processes on 127.0.0.1 against serially."""
    distributed = pytest.importorskip("distributed")
    cases = (
        (runs["folder"], runs["shifted"]),
        (tiled, tv.ranks(tiled)),
        (drifting["folder"], drifting["drift"]),
    )
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=":0",
        silence_logs=50,
    ) as cluster:
        for folder, serial in cases:
            got = tv.ranks(folder, scheduler=cluster.scheduler_address)
            assert got.to_dict() == serial.to_dict()
            if (
                folder == runs["folder"]
            ):  # the shifted run on the cluster: the unshifted run's waits, to the ns
                assert _waits(got) == _waits(runs["plain"])
