"""The command's entry point: a Ctrl-C that lands while click parses the command line (before the
command's own handler runs) ends as every other Ctrl-C does, one line and exit 130, not click's
"Aborted!" and 1 (a fuzz campaign sent SIGINT 10 ms in: issue 38)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import corpus
import pytest

SCRIPT = """
import sys, click
from traceview.cli import main
def interrupt(ctx, param, value):
    raise KeyboardInterrupt  # as SIGINT's default handler would, while click reads the options
main.command("parse-interrupted")(click.option("--x", callback=interrupt, expose_value=False)(lambda: None))
sys.argv = ["traceview", "parse-interrupted", "--x", "1"]
from traceview._entry import main as entry
entry()
"""


def test_ctrl_c_while_click_parses_is_one_line_and_130():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 130, (run.returncode, run.stderr)
    assert run.stderr.strip() == "traceview: interrupted" and "Aborted" not in run.stderr


def test_usage_errors_and_help_keep_clicks_statuses():
    bad = subprocess.run(
        [sys.executable, "-m", "traceview", "nosuch"], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and "No such command" in bad.stderr
    ok = subprocess.run(
        [sys.executable, "-m", "traceview", "--help"], capture_output=True, text=True, timeout=120
    )
    assert ok.returncode == 0 and ok.stdout.startswith("Usage: ")


# ------------------------------------------------------------------ the end of the process (issue 35)

AT_EXIT = """
import atexit, sys, threading, time
from pathlib import Path
def late():
    time.sleep(0.2)
    Path("thread.txt").write_text("joined")
threading.Thread(target=late).start()  # a non-daemon thread: waited for, as at any exit
atexit.register(lambda: Path("atexit.txt").write_text("ran"))
sys.argv = ["traceview", *sys.argv[1:]]
from traceview._entry import main
main()
"""


def test_the_command_ends_without_teardown_but_as_an_exit_would(tmp_path):
    """The command ends the process itself once its output is flushed: the atexit functions and
    the threads still run, the status is the command's, stdout is whole."""
    done = subprocess.run(
        [sys.executable, "-c", AT_EXIT, "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.startswith("traceview "), done.stderr
    assert (tmp_path / "atexit.txt").read_text() == "ran"
    assert (tmp_path / "thread.txt").read_text() == "joined"
    bad = subprocess.run(
        [sys.executable, "-c", AT_EXIT, "summary", "no-such.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1 and "no-such.json" in bad.stderr
    assert (tmp_path / "atexit.txt").read_text() == "ran"


def test_under_a_profiler_the_interpreter_ends_it(tmp_path):
    """cProfile writes its file after the program returns: the command leaves the end to the
    interpreter where a profiler (or a tracer, as coverage's) is on."""
    out = tmp_path / "run.prof"
    done = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "traceview", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0


def test_a_long_output_into_a_pipe_arrives_whole(tmp_path):
    """Larger than a pipe's buffer (64 KiB): the writes wait on the reader before the end."""
    trace = corpus.CORPUS / "hta" / "trace_diff__control__control.json.gz"
    if not trace.is_file():
        pytest.skip(corpus.SKIP_REASON)
    args = [sys.executable, "-m", "traceview", "kernels", str(trace), "--format", "json", "--no-cache"]
    done = subprocess.run(args, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout) > 1 << 16
    assert json.loads(done.stdout)  # the whole document


def test_a_closed_stderr_keeps_the_status():
    """A descriptor closed when the process starts (``2>&-``): Python has no stream for it; the
    command's status is its own, as with the interpreter's end."""
    done = subprocess.run(
        [sys.executable, "-m", "traceview", "--version"],
        stdout=subprocess.PIPE,
        preexec_fn=lambda: os.close(2),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and b"decoder: " in done.stdout
