"""Memory (issue 19): the [memory] events read, linked and measured, against a recount that shares
no code with traceview (plain json with Decimal times, a scan of the ops by hand), on every corpus
trace that carries them, and the CLI, API and plot on real files."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from decimal import Decimal

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON
from synth import write

import traceview as tv
from traceview.cli import main

MEMORY_TRACES = [  # the corpus traces with [memory] events (SOURCES.md), every format among them
    "kineto/tb_plugin_samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz",  # 2021
    "rocm/tracelens__mi300__gaunernst_bert-small-uncased__1016001.json.gz",  # hip, float ts
    "switchtransformers/trace.json.gz",
    "torch_profiling_tutorial/log_transformer__dc3b0e7228dd_851.1752215573993169006.pt.trace.json.gz",
    "torch_profiling_tutorial/log_transformer__dcb0aa1a78e7_4399.1752181589621105859.pt.trace.json.gz",
    "tracelens/h100__Falconsai_nsfw_image_detection__1016002.json.gz",
    "tracelens/h100__facebook_timesformer-base-finetuned-k400__1016002.json.gz",
    "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens/h100__google_owlv2-large-patch14-ensemble__1016001.json.gz",
]
TYPES = {0: "cpu", 1: "cuda", 6: "hip"}
STEP = re.compile(r"^ProfilerStep#\d+$")


def _params():
    if not CORPUS.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=SKIP_REASON))]
    return [pytest.param(CORPUS / f, id=f.split("/")[0] + "/" + f.split("/")[1][:40]) for f in MEMORY_TRACES]


def recount(path) -> dict:
    """Per device: peak bytes, its time (ns), the innermost op at it, and bytes allocated per op."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh, parse_float=Decimal)
    base = doc.get("baseTimeNanoseconds", 0) if isinstance(doc, dict) else 0
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    ns = lambda us: int(Decimal(us) * 1000) + base  # noqa: E731
    ops = defaultdict(list)  # (pid, tid) -> (start, end, name)
    for e in events:
        is_op = e.get("ph") == "X" and str(e.get("cat", "")).lower() in ("cpu_op", "operator")
        if is_op and not STEP.match(str(e.get("name"))):
            start = ns(e["ts"])
            ops[(str(e["pid"]), str(e["tid"]))].append((start, start + ns(e["dur"]) - base, e["name"]))
    for spans in ops.values():
        spans.sort(key=lambda o: (o[0], -o[1]))  # by start; of equal starts the outer (longer) first
    mem = [e for e in events if e.get("name") == "[memory]" and e.get("ph") in ("i", "I")]
    mem.sort(key=lambda e: Decimal(e["ts"]))  # stable: ties keep file order
    out = {}
    running = defaultdict(int)
    sweeps = {}
    for e in mem:
        a = e["args"]
        dev = TYPES[a["Device Type"]] + (f":{a['Device Id']}" if a["Device Id"] >= 0 else "")
        t = ns(e["ts"])
        key = (str(e["pid"]), str(e["tid"]))
        chain = (sweeps.get(key) or sweeps.setdefault(key, _Sweep(ops[key]))).at(t)
        op = chain.rsplit(" → ", 1)[-1]
        running[dev] += a["Bytes"]
        allocated = a.get("Total Allocated", running[dev])
        d = out.setdefault(dev, {"peak": None, "per_op": defaultdict(int)})
        if d["peak"] is None or allocated > d["peak"][0]:
            d["peak"] = (allocated, t, op, chain)
        if a["Bytes"] > 0:
            d["per_op"][op] += a["Bytes"]
    return out


class _Sweep:
    """One thread's ops swept in time order with a stack of the open ones (nested spans): the top
    of the stack at time t is the innermost op holding t. Times must be asked in rising order."""

    def __init__(self, spans: list):
        self.spans, self.next, self.stack = spans, 0, []

    def at(self, t: int) -> str:
        while self.next < len(self.spans) and self.spans[self.next][0] <= t:
            self._close(self.spans[self.next][0])
            self.stack.append(self.spans[self.next])
            self.next += 1
        self._close(t)
        return " → ".join(o[2] for o in self.stack) or "(no op)"  # the chain, outermost first

    def _close(self, t: int) -> None:
        while self.stack and self.stack[-1][1] < t:
            self.stack.pop()


@pytest.mark.parametrize("path", _params())
def test_peak_and_per_op_bytes_equal_a_plain_json_recount(path):
    r = tv.memory(path)
    want = recount(path)
    devices = r["devices"].set_index("device")
    assert sorted(devices.index) == sorted(want)
    for dev, d in want.items():
        row = devices.loc[dev]
        got = (int(row["peak_allocated_bytes"]), int(row["peak_ts_ns"]), row["peak_op"], row["peak_chain"])
        assert got == d["peak"], dev
        ops = r["ops"][r["ops"]["device"] == dev]
        got = {o: int(b) for o, b in zip(ops["op"], ops["allocated_bytes"], strict=True) if b}
        assert got == dict(d["per_op"]), dev


def test_cli_prints_what_the_api_returns_and_plots_the_peak(tmp_path):
    if not CORPUS.is_dir():
        pytest.skip(SKIP_REASON)
    path = CORPUS / MEMORY_TRACES[-2]
    plot = tmp_path / "m.svg"
    res = CliRunner().invoke(main, ["memory", str(path), "--format", "json", "--plot", str(plot)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    api = tv.memory(path).to_dict()
    assert doc["tables"] == api["tables"] and doc["findings"] == api["findings"]
    assert doc["tables"]["devices"][1]["device"] == "cuda:0"
    assert doc["findings"][1] == "cuda:0: peak 96.6 MiB allocated, in aten::addmm"
    alive = [r for r in doc["tables"]["alive_at_peak"] if r["device"] == "cuda:0"]
    assert sum(r["bytes"] for r in alive) == doc["tables"]["devices"][1]["peak_allocated_bytes"]
    assert plot.read_text().count("<svg") == 1


def test_a_trace_without_memory_events_says_so_once(tmp_path):
    path = write(tmp_path / "t.json.gz", _trace([]))
    res = CliRunner().invoke(main, ["memory", path])
    assert res.exit_code == 0
    assert res.output.count("no [memory] events in this trace") == 1
    assert CliRunner().invoke(main, ["memory", path, "--kind", "kernel"]).exit_code == 2


def test_help_lists_only_the_selection_options_memory_applies():
    """memory narrows by --step and --device only: its --help offers no option it would refuse."""
    helptext = CliRunner().invoke(main, ["memory", "--help"]).output
    assert "--step" in helptext and "--device" in helptext
    for refused in ("--stream", "--kind", "--annotation"):
        assert refused not in helptext


def _trace(memory: list) -> dict:
    steps = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"ProfilerStep#{i}",
            "pid": 1,
            "tid": 1,
            "ts": 100 * i,
            "dur": 90,
        }
        for i in range(3)
    ]
    ops = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::cat", "pid": 1, "tid": 1, "ts": 100 * i + 10, "dur": 20}
        for i in range(3)
    ]
    return {"traceEvents": steps + ops + memory}


def test_growth_flagged_when_every_step_keeps_memory(tmp_path):
    total, memory = 0, []
    for i in range(3):  # each step allocates 1 MiB that it never frees, and a scratch buffer it frees
        for addr, b, dt in ((1000 + i, 2**20, 11), (2000, 4096, 12), (2000, -4096, 13)):
            total += b
            memory.append(
                {
                    "ph": "i",
                    "s": "t",
                    "name": "[memory]",
                    "pid": 1,
                    "tid": 1,
                    "ts": 100 * i + dt,
                    "args": {
                        "Addr": addr,
                        "Bytes": b,
                        "Total Allocated": total,
                        "Total Reserved": 4 * 2**20,
                        "Device Type": 1,
                        "Device Id": 0,
                    },
                }
            )
    r = tv.memory(write(tmp_path / "g.json.gz", _trace(memory)))
    steps = r["steps"]
    assert steps["retained_bytes"].tolist() == [2**20] * 3
    assert steps["growing"].tolist() == [False, True, True]
    assert "cuda:0: memory grows step after step" in r.findings[-1]
    ops = r["ops"].set_index("op")
    assert r["alive_at_peak"]["made_by"].tolist() == ["aten::cat"]
    assert (ops.loc["aten::cat", "allocs"], ops.loc["aten::cat", "net_bytes"]) == (6, 3 * 2**20)
    alive = r["alive_at_peak"]
    assert alive["bytes"].tolist() == [3 * 2**20 + 4096] or alive["bytes"].sum() == 3 * 2**20 + 4096


def _masked_fill_trace(path, copy: bool) -> str:
    """One step of a masked fill on cuda:0: the naive form copies the 64 MiB scores first
    (aten::masked_fill → aten::clone → aten::empty_like → aten::empty), the in-place one does not."""
    names = (
        ["aten::masked_fill", "aten::clone", "aten::empty_like", "aten::empty"]
        if copy
        else ["aten::masked_fill_"]
    )
    ops = [
        {"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": 10 + i, "dur": 20 - 2 * i}
        for i, n in enumerate(names)
    ]
    total, memory = 0, []
    for addr, b, ts in ((1, 2**26, 5), (2, 2**26, 14), (2, -(2**26), 40)) if copy else ((1, 2**26, 5),):
        total += b
        args = {"Addr": addr, "Bytes": b, "Total Allocated": total, "Total Reserved": 2**28}
        memory.append(
            {
                "ph": "i",
                "name": "[memory]",
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "args": {**args, "Device Type": 1, "Device Id": 0},
            }
        )
    step = {
        "ph": "X",
        "cat": "user_annotation",
        "name": "ProfilerStep#0",
        "pid": 1,
        "tid": 1,
        "ts": 0,
        "dur": 50,
    }
    return write(path, {"traceEvents": [step, *ops, *memory]})


def test_diff_and_compare_name_the_peak_difference_and_the_op_that_makes_it(tmp_path):
    inplace = _masked_fill_trace(tmp_path / "inplace.json.gz", copy=False)
    naive = _masked_fill_trace(tmp_path / "naive.json.gz", copy=True)
    d = tv.diff(inplace, naive)
    row = d["memory"].iloc[0]
    assert (row["peak_a_bytes"], row["peak_b_bytes"], row["peak_diff_bytes"]) == (2**26, 2**27, 2**26)
    assert (row["made_by"], row["made_by_diff_bytes"]) == ("aten::clone", 2**26)
    said = "naive's cuda:0 peak is 64.0 MiB above inplace's: most of it in tensors made by aten::clone"
    # diff names its sides A and B, its title their legend (issue 32 item 8)
    assert any(f.startswith(said.replace("naive's", "B's").replace("inplace's", "A's")) for f in d.findings)
    assert d.title.startswith("Diff: A = inplace vs B = naive")
    c = tv.compare([inplace, naive])
    assert c["memory"]["vs_baseline_bytes"].tolist() == [0, 2**26]
    assert any(f.startswith(said) for f in c.findings)
    # one number, one definition: summary's peak is memory's
    for path in (inplace, naive):
        s, m = tv.summary(path)["memory"], tv.memory(path)["devices"]
        assert s["peak_allocated_bytes"].tolist() == m["peak_allocated_bytes"].tolist()
        assert s["peak_ts_ns"].tolist() == m["peak_ts_ns"].tolist()


def test_junk_memory_args_are_counted_not_fatal_and_the_cache_keeps_the_table(tmp_path, monkeypatch):
    good = {
        "Addr": 7,
        "Bytes": 512,
        "Total Allocated": 512,
        "Total Reserved": 2048,
        "Device Type": 1,
        "Device Id": 0,
    }
    junk = [
        {**good, "Bytes": "lots"},  # no byte count: left out, counted
        {**good, "Device Type": None},  # no device: left out, counted
        {**good, "Device Type": 99, "Addr": "0x7"},  # an unknown device and a text Addr: kept, unpaired
    ]
    memory = [
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12 + i, "args": a}
        for i, a in enumerate([good, *junk])
    ]
    memory.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "args": good})  # no time
    path = write(tmp_path / "j.json.gz", _trace(memory))
    res = CliRunner().invoke(main, ["memory", path, "--format", "json"])
    assert res.exit_code == 0, res.output
    assert "skipped 3 [memory] event(s) without a usable time, Bytes or Device Type" in res.output
    doc = json.loads(res.stdout)
    assert [d["device"] for d in doc["tables"]["devices"]] == ["cuda:0", "device99:0"]
    monkeypatch.setenv("TRACEVIEW_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRACEVIEW_CACHE_MIN_MB", "0")
    first = tv.load(path)
    from traceview import cache as cache_mod

    assert cache_mod.lookup(path, None) is not None  # the second load reads the cache entry
    again = tv.load(path)
    assert again.stats == first.stats and len(list((tmp_path / "cache").iterdir())) >= 1
    assert again.memory.equals(first.memory) and list(again.memory.dtypes) == list(first.memory.dtypes)


def test_step_and_device_select_the_events_and_pair_them_among_themselves():
    if not CORPUS.is_dir():
        pytest.skip(SKIP_REASON)
    path = str(CORPUS / MEMORY_TRACES[3])
    res = CliRunner().invoke(main, ["memory", path, "--step", "2", "--device", "0", "--format", "json"])
    assert res.exit_code == 0, res.output  # it was an IndexError (exit 3): rows paired before selecting
    doc = json.loads(res.stdout)
    (dev,) = doc["tables"]["devices"]
    with gzip.open(path, "rt", encoding="utf-8") as fh:  # recount: the events inside ProfilerStep#2
        events = json.load(fh, parse_float=Decimal)["traceEvents"]
    (step,) = [e for e in events if e.get("name") == "ProfilerStep#2"]
    inside = [
        e["args"]["Bytes"]
        for e in events
        if e.get("name") == "[memory]"
        and e["args"]["Device Type"] == 1
        and step["ts"] <= e["ts"] <= step["ts"] + step["dur"]
    ]
    want = ("cuda:0", len(inside), sum(b > 0 for b in inside), sum(b < 0 for b in inside))
    assert (dev["device"], dev["events"], dev["allocs"], dev["frees"]) == want
    assert sum(r["bytes"] for r in doc["tables"]["alive_at_peak"]) == dev["peak_allocated_bytes"]
    assert [s["step"] for s in doc["tables"]["steps"]] == [2]
    assert "(allocated before the step)" in [r["made_by"] for r in doc["tables"]["alive_at_peak"]]
    bad = CliRunner().invoke(main, ["memory", path, "--step", "9"])
    assert bad.exit_code == 1 and "no [memory] event in step 9" in bad.output


def test_random_memory_args_never_fail_with_anything_but_one_line(tmp_path):
    """Seeded junk in every [memory] field: a Report (what was unusable counted) or a
    TraceviewError, never another exception; the text output renders."""
    import random

    rng = random.Random(19)
    pool = [0, 1, -1, 7, 2**40, -(2**40), 2**63, 2**70, 1.5, -0.0, "12", "x", None, True, [], {}, [1]]
    keys = ["Addr", "Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id"]
    for case in range(25):
        memory = []
        for i in range(rng.randint(1, 12)):
            args = {k: rng.choice(pool) for k in keys if rng.random() < 0.85}
            if rng.random() < 0.5:
                args["Bytes"] = rng.choice([512, -512, 4096])
                args["Device Type"] = rng.choice([0, 1, 6])
            event = {
                "ph": rng.choice(["i", "I", "i"]),
                "name": "[memory]",
                "pid": rng.choice([1, "1", 2]),
                "tid": rng.choice([1, "1", None]),
                "ts": rng.choice([11 + i, 12.5, "13", None, -5, 2**62]),
                "args": args if rng.random() < 0.95 else None,
            }
            memory.append(event)
        path = write(tmp_path / f"f{case}.json.gz", _trace(memory))
        try:
            report = tv.memory(path, cache=False)
        except tv.TraceviewError:
            continue
        assert str(report)
