"""Scale-out on real Dask processes on 127.0.0.1: a scheduler and two workers started here
(bounded in time, always stopped). The run through them equals the serial run; a worker
killed mid-run (SIGKILL, a real process) loses nothing, its ranks run on the other worker;
``--workers 2`` (a local cluster) gives the same report too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON

import traceview as tv
from traceview.cli import main

distributed = pytest.importorskip("distributed")
PARAM = CORPUS / "param"
RANKS = sorted(PARAM.glob("dlrm_kineto__worker*"))  # the 8 ranks (the folder's et_replay traces are no ranks)
pytestmark = pytest.mark.skipif(not PARAM.is_dir(), reason=SKIP_REASON)
START_S = 60


def _spawn(args: list, log) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", *args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def _stop(address, procs):
    """Ask the cluster to shut down; whatever still runs after 5 s is killed."""
    if address:
        try:
            with distributed.Client(address, timeout=5) as c:
                c.shutdown()
        except Exception:
            pass
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(scheduler address, [worker processes]); everything stopped afterwards. The kill test,
    last in this module, leaves one worker."""
    tmp_path = tmp_path_factory.mktemp("dask")
    sched_file = tmp_path / "scheduler.json"
    log = open(tmp_path / "dask.log", "w")  # noqa: SIM115  (held by the processes until the finally below)
    procs = [
        _spawn(
            [
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(sched_file),
            ],
            log,
        )
    ]
    address = None
    try:
        deadline = time.monotonic() + START_S
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sched_file.exists(), (tmp_path / "dask.log").read_text()
        address = json.loads(sched_file.read_text())["address"]
        workers = [
            _spawn(
                [
                    "distributed.cli.dask_worker",
                    address,
                    "--no-nanny",
                    "--nthreads",
                    "1",
                    "--host",
                    "127.0.0.1",
                    "--no-dashboard",
                    "--death-timeout",
                    str(START_S),
                ],
                log,
            )
            for _ in range(2)
        ]
        procs += workers
        with distributed.Client(address, timeout=START_S) as c:
            c.wait_for_workers(2, timeout=START_S)
        yield address, workers
    finally:
        _stop(address, procs)
        log.close()


@pytest.fixture(scope="module")
def serial() -> dict:
    return tv.ranks(RANKS).to_dict()


def _json(args) -> dict:
    res = CliRunner().invoke(main, ["ranks", *map(str, RANKS), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_cli_on_scheduler_equals_serial(cluster):
    address, _ = cluster
    assert _json(["--scheduler", address]) == _json([])


def test_local_cluster_equals_serial(serial):
    assert tv.ranks(RANKS, workers=2).to_dict() == serial


def test_unreachable_scheduler_is_one_line():
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        res = CliRunner().invoke(main, ["ranks", str(PARAM), "--scheduler", "tcp://127.0.0.1:9"])
    assert res.exit_code == 1 and "can't reach the Dask scheduler" in res.output


def test_worker_killed_mid_run_its_ranks_run_elsewhere(cluster, serial):
    address, (victim, survivor) = cluster
    killed_at = []

    def kill_after_first(done, total):
        if not killed_at:
            os.kill(victim.pid, signal.SIGKILL)
            killed_at.append(done)

    report = tv.ranks(RANKS, scheduler=address, progress=kill_after_first)
    assert killed_at == [1] and victim.wait(timeout=10) == -signal.SIGKILL
    assert survivor.poll() is None
    assert report.to_dict() == serial
