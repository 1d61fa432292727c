"""Hostile scale-out inputs (issue 22, items 5 and 7), each through real processes or sockets:

* ``ranks --scheduler``: a peer on 127.0.0.1 that accepts and never answers, one that sends
  garbage, a refused port and malformed addresses end in one line naming the address
  (exit 1; exit 2 for a malformed address), within seconds (``TRACEVIEW_DASK_TIMEOUT``);
* ``distributedInfo`` claiming a world size or a rank of 10**9: ``ranks`` and ``summary --run``
  run under a 1.5 GiB address-space limit (a list of the missing ranks would need tens of GiB)
  and give the missing ranks as ranges;
* numbers that must not be negative are click usage errors (exit 2);
* Ctrl-C (SIGINT to the process group, as a terminal sends it) exits 130 with one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import synth

from traceview.errors import TraceviewError
from traceview.run import MAX_RANK, RankRanges, plan, rank_info

TRACEVIEW = [sys.executable, "-m", "traceview"]
ROOT = Path(__file__).resolve().parent.parent
LIMIT_MIB = 1536
posix_only = pytest.mark.skipif(
    sys.platform != "linux", reason="needs Linux (/proc, process groups, rlimits)"
)


def _cli(*args, env=None, timeout=120, limit_mib=None) -> subprocess.CompletedProcess:
    """``traceview ARGS`` in a real process; ``limit_mib``: its address space capped there."""

    def cap():
        lim = limit_mib * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))

    full_env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(
        [*TRACEVIEW, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=ROOT,
        preexec_fn=cap if limit_mib else None,
    )


def _invoke(*args, env=None):
    """``traceview ARGS`` in this process (click's CliRunner): for errors told before any work."""
    from click.testing import CliRunner

    from traceview.cli import main

    return CliRunner().invoke(main, [*map(str, args)], env=env)


def _one_line_error(res, needle: str, code: int = 1) -> None:
    err = res.stderr.strip()
    assert res.returncode == code, (res.returncode, err)
    assert needle in err and "Traceback" not in err, err
    if code == 1:
        assert len(err.splitlines()) == 1, err


# ---------------------------------------------------------------- --scheduler


@contextlib.contextmanager
def listener(garbage: bool):
    """A TCP peer on 127.0.0.1 that accepts every connection and then never answers (``garbage``:
    sends 64 KiB of random bytes first); yields its port."""
    server = socket.create_server(("127.0.0.1", 0))
    conns, stop = [], threading.Event()

    def serve():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conns.append(conn)
            if garbage:
                with contextlib.suppress(OSError):
                    conn.sendall(os.urandom(65536))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for c in [*conns, server]:
            c.close()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """Two small synthetic rank traces (ranks 0 and 1 of 2)."""
    folder = tmp_path_factory.mktemp("run")
    for r in (0, 1):
        doc = synth.attention_trace("naive")
        doc["distributedInfo"] = {"rank": r, "world_size": 2, "backend": "nccl"}
        synth.write(folder / f"rank{r}.json.gz", doc)
    return folder


@pytest.mark.parametrize("garbage", [False, True], ids=["silent", "garbage"])
def test_a_peer_that_is_no_scheduler_is_one_line_within_the_timeout(run_dir, garbage):
    pytest.importorskip("distributed")
    with listener(garbage) as port:
        address = f"tcp://127.0.0.1:{port}"
        start = time.monotonic()
        # before: the silent peer hung for good (the subprocess timeout fails the test), the garbage
        # one ended in MemoryError, exit 3
        res = _cli("ranks", "--scheduler", address, run_dir, env={"TRACEVIEW_DASK_TIMEOUT": "2"}, timeout=60)
        took = time.monotonic() - start
    _one_line_error(res, address)
    assert took < 30, took


def test_a_refused_port_says_so(run_dir):
    pytest.importorskip("distributed")
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there any more
    res = _cli(
        "ranks", "--scheduler", f"127.0.0.1:{port}", run_dir, env={"TRACEVIEW_DASK_TIMEOUT": "2"}, timeout=60
    )
    _one_line_error(res, f"tcp://127.0.0.1:{port}': can't reach the Dask scheduler")


@pytest.mark.parametrize(
    "address",
    [
        "tcp://127.0.0.1:notaport",
        "foo://bar",
        "",
        "tcp://127.0.0.1",
        "tcp://:8786",
        "tcp://127.0.0.1:0",
        "tcp://127.0.0.1:65536",
        "tcp://127.0.0.1:８７８６",
        "tcp://a b:1",
    ],
)
def test_a_malformed_address_is_a_usage_error(run_dir, address):
    res = _invoke("ranks", "--scheduler", address, run_dir)  # before: exit 3
    assert res.exit_code == 2 and "not a Dask scheduler address" in res.output, res.output
    assert repr(address) in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "inf"])
def test_a_bad_timeout_is_a_usage_error(run_dir, value):
    res = _invoke(
        "ranks", "--scheduler", "tcp://127.0.0.1:8786", run_dir, env={"TRACEVIEW_DASK_TIMEOUT": value}
    )
    assert res.exit_code == 2 and f"TRACEVIEW_DASK_TIMEOUT={value!r}" in res.output, res.output


def test_the_api_refuses_a_malformed_address_too(run_dir):
    import traceview as tv

    with pytest.raises(TraceviewError, match="not a Dask scheduler address"):
        tv.ranks(run_dir, scheduler="foo://bar")


# ---------------------------------------------------------------- absurd ranks and world sizes


@pytest.fixture(scope="module")
def absurd_runs(tmp_path_factory) -> dict:
    """Runs whose traces claim a world size of 10**9, or a rank of 10**9."""
    out = {}
    for name, infos in {"world": [(0, 10**9), (1, 10**9)], "rank": [(0, None), (10**9, None)]}.items():
        folder = out[name] = tmp_path_factory.mktemp(name)
        for r, ws in infos:
            doc = synth.attention_trace("naive")
            doc["distributedInfo"] = {"rank": r, "backend": "nccl", **({"world_size": ws} if ws else {})}
            synth.write(folder / f"rank{r}.json.gz", doc)
    return out


@posix_only
@pytest.mark.parametrize("command", [["ranks"], ["summary", "--run"]])
@pytest.mark.parametrize(
    "which,missing,world", [("world", "2-999999999", 10**9), ("rank", "1-999999999", 10**9 + 1)]
)
def test_absurd_world_sizes_cost_no_memory(absurd_runs, command, which, missing, world):
    # before: the list of missing ranks ran out of memory (MemoryError under the limit, exit 3)
    res = _cli(*command, absurd_runs[which], "--format", "json", limit_mib=LIMIT_MIB)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["info"]["missing_ranks"] == missing and doc["info"]["world_size"] == world
    assert any(f"{world - 2:,} of {world:,} ranks have no trace: {missing}" in f for f in doc["findings"])
    assert any("far beyond the 2 rank(s) present" in n for n in doc["notes"])


def test_missing_ranks_are_ranges_not_lists():
    # 10**6, not 10**9: a regression here costs this process tens of MiB, not the machine
    # (10**9 runs under a memory limit above)
    p = plan([("a", (0, 10**6)), ("b", (1, 10**6))])
    assert isinstance(p.missing, RankRanges) and p.missing.ranges == (range(2, 10**6),)
    assert len(p.missing) == 10**6 - 2 and 5 in p.missing and 1 not in p.missing
    assert p.missing[0] == 2 and p.missing[-1] == 10**6 - 1
    assert any("missing ranks: 2-999999 of world size 1,000,000" in n for n in p.notes)
    small = plan([("a", (1, 8)), ("b", (4, None))]).missing
    assert small == [0, 2, 3, 5, 6, 7] and list(small) == [0, 2, 3, 5, 6, 7] and str(small) == "0, 2-3, 5-7"
    assert small != [0, 2, 3] and small[3] == 5


def test_a_world_size_a_job_could_have_gets_no_note():
    p = plan([("a", (0, 4096))])  # rank 0 of a large job, profiled alone: common
    assert not any("far beyond" in n for n in p.notes) and str(p.missing) == "1-4095"


@pytest.mark.parametrize(
    "info,expected",
    [
        ({"rank": -1, "world_size": 4}, None),
        ({"rank": MAX_RANK + 1}, None),
        ({"rank": 10**100}, None),
        ({"rank": True}, None),
        ({"rank": 3, "world_size": 10**100}, (3, None)),
        ({"rank": 3, "world_size": 0}, (3, None)),
        ({"rank": MAX_RANK, "world_size": MAX_RANK}, (MAX_RANK, MAX_RANK)),
    ],
)
def test_ranks_beyond_a_c_int_are_no_ranks(info, expected):
    assert rank_info({"distributedInfo": info}) == expected


def test_a_rank_out_of_range_is_left_out_with_a_note():
    p = plan([("a", (0, 2)), ("b", None)])
    assert list(p.ranks) == [0] and any(n.startswith("b: no distributedInfo rank in 0..") for n in p.notes)


# ---------------------------------------------------------------- numbers that can't be negative


@pytest.mark.parametrize(
    "args,option",
    [
        (["summary", "--max-size", "-1"], "--max-size"),
        (["summary", "--max-size", "0"], "--max-size"),
        (["kernels", "--max-size=-5"], "--max-size"),
        (["ranks", "--workers", "0"], "--workers"),
        (["summary", "--top", "-1"], "--top"),
        (["diff", "--top", "-2", "{t}"], "--top"),
        (["hta", "--rank", "-1"], "--rank"),
    ],
)
def test_negative_numbers_are_usage_errors(run_dir, args, option):
    trace = str(run_dir / "rank0.json.gz")
    res = _invoke(*[a.format(t=trace) for a in args], trace)  # before: --max-size -1 exit 3
    assert res.exit_code == 2, res.output
    assert f"Invalid value for '{option}'" in res.output and "Traceback" not in res.output


# ---------------------------------------------------------------- Ctrl-C


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(cmd: list, started) -> subprocess.CompletedProcess:
    """Run ``cmd`` in a process group of its own, wait until ``started(proc)`` says it is at work,
    then send SIGINT to the whole group, as a terminal's Ctrl-C does."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=ROOT,
        # a pytest-xdist worker ignores SIGINT, and an ignored signal stays ignored across exec:
        # the child gets the default back, as a command started from a terminal has it
        preexec_fn=_default_sigint,
    )
    try:
        assert started(proc), "the command never started reading its trace"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, "", err)


def _assert_interrupted(res) -> None:
    assert res.returncode == 130, (res.returncode, res.stderr)  # before: 1 and "Aborted!"
    assert res.stderr.strip() == "traceview: interrupted", res.stderr


@posix_only
def test_ctrl_c_while_reading_a_pipe(tmp_path):
    """The trace comes through a FIFO: once the test's write end opens, the process is reading
    it, and it waits there for the rest, which comes only after the signal."""
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    text = json.dumps(synth.attention_trace("naive")).encode()

    def started(proc):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:  # ENXIO until the process opens the FIFO for reading
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.01)
                continue
            os.write(fd, text[: len(text) // 2])
            started.fd = fd
            time.sleep(0.2)  # it reads the first half and waits for more
            return True
        return False

    try:
        res = _interrupt([*TRACEVIEW, "summary", "--no-cache", str(fifo)], started)
    finally:
        if getattr(started, "fd", None) is not None:
            os.close(started.fd)
    _assert_interrupted(res)


def _reading(path: Path):
    """A ``started`` for ``_interrupt``: the process has ``path`` open (seen in /proc)."""
    target = str(path.resolve())

    def started(proc):
        deadline = time.monotonic() + 60
        fds = Path(f"/proc/{proc.pid}/fd")
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError):
                if any(os.readlink(fd) == target for fd in fds.iterdir()):
                    time.sleep(0.3)  # into the decompression or the parse
                    return proc.poll() is None
            time.sleep(0.002)
        return False

    return started


@posix_only
def test_ctrl_c_while_loading_a_sizeable_trace(tmp_path):
    """A ~35 MB trace (a synthetic one tiled by benchmarks/make_large_trace.py) takes seconds to
    load; SIGINT arrives once the process has opened it."""
    src = tmp_path / "src.json"
    src.write_text(json.dumps(synth.attention_trace("sdpa_math", steps=100)))
    big = tmp_path / "big.json.gz"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "make_large_trace.py"),
            str(src),
            str(big),
            "--copies",
            "20",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    res = _interrupt([*TRACEVIEW, "summary", "--no-cache", str(big)], _reading(big))
    _assert_interrupted(res)
