"""Every file traceview writes appears whole or not at all (issue 22, item 1).

Real subprocesses of the CLI: a full disk (a file-size limit, RLIMIT_FSIZE, which makes
write() fail with EFBIG exactly as a full disk fails with ENOSPC, without root or a small
file system), Ctrl-C (SIGINT) in the middle of a large annotate, and ``annotate X -o X``
by every name X has. After each: no partial file, no temporary file, an existing target
as it was, the input byte for byte as it was, and one line naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import synth

import traceview as tv
from traceview.analyses.trace.annotate import gpu_annotations
from traceview.atomic import OutputError, atomic_open, write_text
from traceview.errors import TraceviewError
from traceview.render.annotated import write_annotated

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "naive.json.gz"
FSIZE = 16_000  # bytes a process may write to one file: every output below is larger

#: (command line with OUT for the output, output name): one of each kind of file traceview writes
WRITERS = [
    (["annotate", str(SAMPLE), "-o", "OUT"], "annotated.json"),
    (["report", str(SAMPLE), "-o", "OUT"], "report.html"),
    (["compare", str(SAMPLE), "--plot", "OUT"], "bars.png"),
    (["diff", str(SAMPLE), str(SAMPLE), "--plot", "OUT"], "bars.svg"),
    (["timeline", str(SAMPLE), "--plot", "OUT"], "timeline.html"),
]


def traceview(args, *, fsize: int | None = None, **kwargs) -> subprocess.CompletedProcess:
    def limit():  # in the child, before exec: its writes past fsize bytes fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills it instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, "-m", "traceview", *args, "--no-cache"],
        capture_output=True,
        text=True,
        preexec_fn=limit if fsize else None,
        timeout=600,
        **kwargs,
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module", autouse=True)
def _fonts_cached():
    """matplotlib's font cache exists before any child runs under the file-size limit."""
    subprocess.run(
        [sys.executable, "-c", "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot"],
        check=True,
        timeout=300,
    )


@pytest.mark.parametrize("argv, name", WRITERS, ids=[w[1] for w in WRITERS])
def test_full_disk_leaves_no_partial_file(argv, name, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    out.mkdir()
    target = out / name
    before = digest(SAMPLE)
    r = traceview([str(target) if a == "OUT" else a for a in argv], fsize=FSIZE)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(target) in lines[0] and "File too large" in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert list(out.iterdir()) == []  # neither the file nor a temporary one
    assert digest(SAMPLE) == before


@pytest.mark.parametrize("argv, name", WRITERS, ids=[w[1] for w in WRITERS])
def test_failed_write_keeps_the_existing_file(argv, name, tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / name
    target.write_bytes(b"the previous version\n")
    r = traceview([str(target) if a == "OUT" else a for a in argv], fsize=FSIZE)
    assert r.returncode == 1 and str(target) in r.stderr, r.stderr
    assert target.read_bytes() == b"the previous version\n"
    assert [p.name for p in tmp_path.iterdir()] == [name]


@pytest.mark.parametrize("argv, name", WRITERS, ids=[w[1] for w in WRITERS])
def test_missing_folder_is_one_line(argv, name, tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / "no such folder" / name
    r = traceview([str(target) if a == "OUT" else a for a in argv])
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and str(target) in lines[0], r.stderr
    assert not target.parent.exists()


def test_a_directory_as_target_is_refused_whole(tmp_path):
    """Through the library (the CLI refuses it as a usage error already): nothing is
    written into or instead of the folder."""
    pytest.importorskip("matplotlib")
    from traceview.analyses.trace.breakdown import breakdown
    from traceview.render.plot import plot_breakdown

    t = tv.load(SAMPLE, cache=False)
    for name in ("annotated.json", "bars.png"):
        folder = tmp_path / name
        folder.mkdir()
        with pytest.raises(OutputError, match="is a directory"):
            if name.endswith(".json"):
                write_annotated(t, gpu_annotations(t), folder)
            else:
                plot_breakdown(breakdown([t]), folder)
        assert folder.is_dir() and list(folder.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["annotated.json", "bars.png"]


# ---------------------------------------------------------------- a large annotate, interrupted


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory) -> Path:
    """~16 MB of JSON (gzip), 66k events: annotating it takes long enough to interrupt."""
    path = tmp_path_factory.mktemp("big") / "big.json.gz"
    synth.write(path, synth.attention_trace("sdpa_math", steps=800))
    return path


def test_ctrl_c_during_annotate_leaves_nothing(big_trace, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    before = digest(big_trace)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "traceview",
            "annotate",
            str(big_trace),
            "-o",
            str(out / "annotated.json.gz"),
            "--no-cache",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a pytest-xdist worker ignores SIGINT, and an ignored signal stays ignored across exec
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 300
    while not any(out.iterdir()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)  # the temporary file appears when writing starts
    assert proc.poll() is None, "annotate ended before it started writing"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0, "the write finished before the interrupt: make the trace larger"
    assert "Traceback" not in err, err
    assert list(out.iterdir()) == []
    assert digest(big_trace) == before


def test_annotate_memory_stays_near_a_load(big_trace, tmp_path):
    """annotate streams its output: its peak memory is close to summary's (it was 2.7x on
    this trace, 7.4x on 1M events, when it built the whole output document in memory)."""

    def peak_kib(*args) -> int:
        proc = subprocess.Popen(
            [sys.executable, "-m", "traceview", *args, "--no-cache"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, proc.stderr.read()
        proc.stderr.close()
        return usage.ru_maxrss

    summary = peak_kib("summary", str(big_trace))
    annotate = peak_kib("annotate", str(big_trace), "-o", str(tmp_path / "a.json.gz"))
    assert annotate < 1.6 * summary, (annotate, summary)


# ---------------------------------------------------------------- annotate X -o X


def test_annotate_onto_its_input_is_refused(tmp_path):
    trace = tmp_path / "trace.json.gz"
    trace.write_bytes(SAMPLE.read_bytes())
    (tmp_path / "link.json.gz").symlink_to(trace.name)
    os.link(trace, tmp_path / "hard.json.gz")
    before = digest(trace)
    for out in (
        str(trace),
        f"{tmp_path}/./trace.json.gz",
        str(tmp_path / "link.json.gz"),
        str(tmp_path / "hard.json.gz"),
    ):
        r = traceview(["annotate", str(trace), "-o", out])
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "is the input" in lines[0], (out, r.stderr)
        assert digest(trace) == before
    r = traceview(["annotate", "trace.json.gz", "-o", "trace.json.gz"], cwd=tmp_path)  # relative paths too
    assert r.returncode == 2 and digest(trace) == before
    from traceview.render.annotated import SameFileError

    t = tv.load(trace, cache=False)
    with pytest.raises(SameFileError):
        write_annotated(t, gpu_annotations(t), tmp_path / "link.json.gz")
    assert digest(trace) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.json.gz", "link.json.gz", "trace.json.gz"]


def test_trace_changed_since_load_leaves_no_file(tmp_path):
    """The file is re-read to annotate it; another trace there now is refused, and the
    output half written by then is removed."""
    trace = tmp_path / "trace.json.gz"
    synth.make(tmp_path, "sdpa_math", name="trace")
    t = tv.load(trace, cache=False)
    synth.make(tmp_path, "naive", name="trace")
    with pytest.raises(TraceviewError, match=r"cannot annotate it exactly|does not match"):
        write_annotated(t, gpu_annotations(t), tmp_path / "out.json")
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json.gz"]


# ---------------------------------------------------------------- traceview.atomic itself


def test_atomic_write_through_a_symlink_keeps_link_and_mode(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    os.chmod(real, 0o600)  # a private file stays private when replaced
    link = tmp_path / "link.txt"
    link.symlink_to(real.name)
    write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert (real.stat().st_mode & 0o777) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "real.txt"]


def test_atomic_open_on_error_and_interrupt(tmp_path):
    target = tmp_path / "t.json"
    target.write_text("old")
    for exc in (ValueError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(exc)), atomic_open(target, "w") as fh:
            json.dump({"half": "written"}, fh)
            fh.flush()
            raise exc
        assert target.read_text() == "old"
        assert [p.name for p in tmp_path.iterdir()] == ["t.json"]


def test_collector_trace_copy_is_whole_or_absent(tmp_path):
    """``traceview collect`` gzips each exported trace into its folder: on a full disk the
    folder holds no cut trace (and no temporary file)."""
    src = tmp_path / "exported.json"
    src.write_bytes(os.urandom(200_000))  # does not compress: the copy passes the size limit
    out = tmp_path / "out"
    out.mkdir()
    code = (
        "import sys; from collectors._common import gzip_file\n"
        "try:\n    gzip_file(sys.argv[1], sys.argv[2])\nexcept OSError as e:\n    sys.exit(str(e))"
    )

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE, FSIZE))

    r = subprocess.run(
        [sys.executable, "-c", code, str(src), str(out / "trace.json.gz")],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 1 and "File too large" in r.stderr, r.stderr
    assert list(out.iterdir()) == []


def test_ctrl_c_right_after_the_temporary_file_is_made_leaves_nothing(tmp_path, monkeypatch):
    """The temporary file is named before it is created, so a Ctrl-C between its creation and
    anything after it still removes it (mkstemp returned its name only after creating it: a
    Ctrl-C in between left it behind, as a loaded CI machine once showed)."""
    from traceview import atomic

    real = atomic._claim

    def claim_then_interrupt(name):
        real(name)
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic, "_claim", claim_then_interrupt)
    with pytest.raises(KeyboardInterrupt), atomic.atomic_open(tmp_path / "out.txt") as fh:
        fh.write("never")
    assert list(tmp_path.iterdir()) == []
