"""SIGTERM and SIGHUP remove the temporary files a worker thread makes (``temporaries.armed``).

Only the main thread can set a signal handler. A diff reads its second trace on a thread, and that
thread writes the trace's cache entry and its derived tables; before ``armed`` a SIGTERM that came
while only that thread had a temporary file ended the process at once and left the file in the
cache (found by ``test_fuzz_cli``: ``diff`` sent SIGTERM after 0.22 s). Each case runs in its own
process, started as a shell starts it (default handlers), and sends the signal to itself while the
thread holds its file.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    from pathlib import Path
    from traceview import cache, temporaries

    where, how = Path(sys.argv[1]), sys.argv[2]
    sig, arm = getattr(signal, sys.argv[3]), sys.argv[4] == "armed"
    made, hold = threading.Event(), threading.Event()

    def work():
        if how == "file":  # a writer's temporary file (the cache's derived tables, atomic's writes)
            with temporaries.temporary(where / "t.tmp-1"):
                (where / "t.tmp-1").write_bytes(b"x")
                made.set()
                hold.wait()
        elif how == "folder":  # a cache entry's folder, registered before it is made
            cache._claim_folder(where, "e.tmp-")
            made.set()
            hold.wait()
        else:  # a folder the thread keeps writing into while the handler removes it
            folder = cache._claim_folder(where, "e.tmp-")
            made.set()
            for i in range(10**9):
                try:
                    (folder / f"{i}.arrow").write_bytes(b"x" * 4096)
                except OSError:  # renamed away under it
                    pass

    def run():
        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        made.wait()
        os.kill(os.getpid(), sig)  # the handler runs on the main thread, the worker still holds its file
        time.sleep(5)

    if arm:
        with temporaries.armed():
            run()
    else:
        run()
    """
)


def _run(tmp_path, how: str, sig: str, arm: str) -> subprocess.CompletedProcess:
    where = tmp_path / "w"
    where.mkdir()
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(where), how, sig, arm],
        capture_output=True,
        timeout=60,
        preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGTERM, signal.SIGHUP)],
    )


@pytest.mark.parametrize("how", ["file", "folder", "busy"])
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_threads_temporary_goes_with_the_signal(tmp_path, how, sig):
    done = _run(tmp_path, how, sig, "armed")
    assert done.returncode == -getattr(signal, sig), done.stderr  # ended by the signal, as by default
    assert b"Traceback" not in done.stderr, done.stderr
    assert list((tmp_path / "w").iterdir()) == []


def test_without_armed_the_file_is_left(tmp_path):
    """What ``armed`` is for: a thread alone cannot set the handler, so the file stays."""
    done = _run(tmp_path, "file", "SIGTERM", "plain")
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert [p.name for p in (tmp_path / "w").iterdir()] == ["t.tmp-1"]


def test_armed_puts_the_old_handlers_back():
    from traceview import temporaries

    before = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with temporaries.armed():
            assert signal.getsignal(signal.SIGTERM) is temporaries._on_signal
            with temporaries.temporary("/nonexistent/x"):
                pass
            assert signal.getsignal(signal.SIGTERM) is temporaries._on_signal  # still armed
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)
