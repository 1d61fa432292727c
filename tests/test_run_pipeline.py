"""One pipeline for runs (issue 21 item 3): ``ranks``, ``summary --run``, ``compare --run`` and
``diff RUN_A/ RUN_B/`` all go through ``scale.run_results``: each rank file loaded once per
command (counted by Python's own audit hook in a real subprocess, the cache off so that a
load is a read), and a Dask cluster gives the serial tables exactly. Runs A and B are ranks 0-3
and 0-5 of param, linked under other names in temporary folders (never copied into the project;
small, so that the tests stay fast); ``summary --run`` on Dask also reads param itself, whose two
et_replay traces are no ranks of the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON

import traceview as tv
from traceview.cli import main
from traceview.errors import TraceviewError

PARAM = CORPUS / "param"
pytestmark = pytest.mark.skipif(not PARAM.is_dir(), reason=SKIP_REASON)

COUNT = r"""
import collections, json, sys
import traceview as tv
from click.testing import CliRunner
from traceview.cli import main

a, b = sys.argv[1], sys.argv[2]
opened = collections.Counter()

def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].endswith(".json.gz"):
        opened[args[0]] += 1

sys.addaudithook(hook)
out = {}
for name, call in [
    ("summary --run", lambda: tv.summary_run(a, cache=False)),
    ("compare --run", lambda: tv.compare_runs([a, b], cache=False)),
    ("diff RUN_A/ RUN_B/", lambda: tv.diff_runs(a, b, cache=False)),
    ("ranks", lambda: tv.ranks(a, cache=False)),
]:
    opened.clear()
    call()
    out[name] = dict(opened)
print(json.dumps(out))
"""


def _linked(folder, n: int):
    folder.mkdir()
    for f in sorted(PARAM.glob("dlrm_kineto__worker*"))[:n]:
        (folder / f"{folder.name}_{f.name}").symlink_to(f)
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(run A: ranks 0-3, run B: ranks 0-5), param's files linked under other names."""
    tmp = tmp_path_factory.mktemp("runs")
    return _linked(tmp / "a", 4), _linked(tmp / "b", 6)


def test_each_rank_file_is_loaded_once_per_command(runs):
    run_a, run_b = runs
    res = subprocess.run(
        [sys.executable, "-c", COUNT, str(run_a), str(run_b)], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    counts = json.loads(res.stdout)
    a_files = {str(f) for f in run_a.glob("*.json.gz")}
    b_files = {str(f) for f in run_b.glob("*.json.gz")}
    assert counts["summary --run"] == dict.fromkeys(a_files, 1)
    assert counts["ranks"] == dict.fromkeys(a_files, 1)
    assert counts["compare --run"] == dict.fromkeys(a_files | b_files, 1)
    assert counts["diff RUN_A/ RUN_B/"] == dict.fromkeys(a_files | b_files, 1)


@pytest.fixture(scope="module")
def scheduler():
    """One local Dask cluster (two worker processes) for the module, stopped after."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", host="127.0.0.1"
    ) as cluster:
        yield cluster.scheduler_address


CALLS = {
    "summary --run": lambda a, b, **kw: tv.summary_run(PARAM, **kw),
    "compare --run": lambda a, b, **kw: tv.compare_runs([a, b], **kw),
}  # diff RUN_A/ RUN_B/ and a selection: through the CLI, below


@pytest.mark.parametrize("command", list(CALLS))
def test_dask_gives_the_serial_tables(command, scheduler, runs):
    serial = CALLS[command](*runs).to_dict()
    on_dask = CALLS[command](*runs, scheduler=scheduler).to_dict()
    assert on_dask == serial
    assert serial["tables"], command


def test_a_loaded_run_goes_through_the_same_function(runs):
    run_a, _ = runs
    run = tv.load_run(run_a)
    assert tv.summary_run(run).to_dict()["tables"] == tv.summary_run(run_a).to_dict()["tables"]
    assert tv.ranks(run).to_dict() == tv.ranks(run_a).to_dict()


@pytest.mark.parametrize("where", ["serial", "dask"])
def test_a_selection_error_is_no_unreadable_file_under_skip_bad(where, request, runs):
    """--skip-bad leaves out files that can't be read; a step no rank has is still an error naming
    the first rank's file."""
    kw = {"scheduler": request.getfixturevalue("scheduler")} if where == "dask" else {}
    with pytest.raises(TraceviewError, match=r"a_dlrm_kineto__worker0_.*has no step 99"):
        tv.summary_run(runs[0], step=99, skip_bad=True, **kw)


def test_cli_run_commands_on_dask_print_the_serial_json(scheduler, runs):
    run_a, run_b = map(str, runs)
    for args in (["summary", "--run", run_a, "--kind", "kernel"], ["diff", run_a, run_b]):
        serial = CliRunner().invoke(main, [*args, "--format", "json"])
        on_dask = CliRunner().invoke(main, [*args, "--format", "json", "--scheduler", scheduler])
        assert serial.exit_code == 0 and on_dask.exit_code == 0, serial.output + on_dask.output
        assert json.loads(on_dask.stdout) == json.loads(serial.stdout)


def test_cli_dask_options_need_a_run(runs):
    one = str(next(runs[0].iterdir()))
    for args in (["summary", one, "--workers", "2"], ["compare", one, one, "--workers", "2"]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2 and "--workers" in res.output, res.output
    res = CliRunner().invoke(main, ["diff", one, one, "--scheduler", "tcp://127.0.0.1:9"])
    assert res.exit_code == 2 and "two folders" in res.output, res.output
    res = CliRunner().invoke(main, ["summary", "--run", str(runs[0]), "--workers", "2", "--scheduler", "x:1"])
    assert res.exit_code == 2 and "not both" in res.output, res.output


def test_scheduler_timeout_in_a_fresh_process_reads_dask_default():
    """Dask's connect timeout exists in dask.config only once distributed is imported: a fresh
    ``traceview ranks --scheduler`` read it before and died with a KeyError traceback."""
    code = "from traceview.scale import connect_timeout; print(connect_timeout())"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DASK_", "TRACEVIEW_DASK"))}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0 and float(res.stdout) > 0, res.stderr


def test_api_dask_keywords_need_a_run(runs):
    one = str(next(runs[0].iterdir()))
    for call in (
        lambda: tv.summary(one, workers=2),
        lambda: tv.compare([one, one], scheduler="tcp://127.0.0.1:9"),
        lambda: tv.diff(one, one, workers=2),
    ):
        with pytest.raises(TypeError, match="spread a run's rank files"):
            call()
