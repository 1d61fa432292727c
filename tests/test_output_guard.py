"""No output destroys an input, replaces a FIFO or a device, or outlives a signal (issue 38).

Real subprocesses of the CLI, one per promise of SECURITY.md section 4 that issue 38 found broken:

* item 2: ``check X --junit X`` (and a link to X) is refused, X untouched;
* item 3: ``-o``, ``--plot`` and ``--junit`` onto an input are refused before loading, for every
  command that writes, by the input's own name, a symbolic link, a hard link, another spelling,
  a gzip input, and a trace found in a folder given as input: one line, exit 2, input unchanged;
* item 4: a FIFO or a character device as target is written in place, never replaced by a
  regular file; a FIFO that no process reads is one line, not a hang;
* item 5: SIGTERM and SIGHUP during ``annotate -o`` leave no temporary file (as Ctrl-C);
* item 6: a file name that is not UTF-8 works in summary, ranks, compare, diff and report (and is
  cached), shown with the stray byte as ``\\xNN``;
* item 8: ``annotate`` writes valid UTF-8 JSON when an event holds bytes that are not UTF-8.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import synth

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "sdpa_flash.json.gz"


def traceview(args, tmp_path: Path, *, cache: bool = False, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRACEVIEW_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="200")
    if cache:
        env["TRACEVIEW_CACHE_MIN_MB"] = "0"  # small files are cached too
    return subprocess.run(
        [sys.executable, "-m", "traceview", *map(os.fsdecode, args)] + ([] if cache else ["--no-cache"]),
        capture_output=True,
        env=env,
        timeout=300,
        **kwargs,
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def plain_trace(folder: Path, name: str) -> Path:
    """The sample trace, uncompressed, as ``folder/name`` (any suffix: traceview reads it by content)."""
    path = folder / name
    path.write_bytes(gzip.decompress(SAMPLE.read_bytes()))
    return path


def one_line_refusal(r: subprocess.CompletedProcess, target) -> str:
    err = r.stderr.decode("utf-8", "replace")
    lines = err.strip().splitlines()
    assert r.returncode == 2, err
    assert len(lines) == 1 and "is the input" in lines[0] and os.fsdecode(target) in lines[0], err
    assert "Traceback" not in err
    return lines[0]


# ---------------------------------------------------------------- items 2 and 3: outputs onto inputs

#: every command that writes a file, with IN for the input and OUT for the output, and the input's
#: name (a suffix the output option accepts, so that only the guard stands between them)
ONTO_INPUT = [
    (["summary", "IN", "-o", "OUT"], "t.json"),
    (["kernels", "IN", "-o", "OUT"], "t.json"),
    (["kernels", "IN", "--plot", "OUT"], "t.svg"),
    (["exposed", "IN", "-o", "OUT"], "t.json"),
    (["memory", "IN", "-o", "OUT"], "t.json"),
    (["ranks", "IN", "-o", "OUT"], "t.json"),
    (["compare", "IN", "-o", "OUT"], "t.json"),
    (["compare", "IN", "--plot", "OUT"], "t.svg"),
    (["diff", "IN", "IN", "-o", "OUT"], "t.json"),
    (["timeline", "IN", "-o", "OUT"], "t.json"),
    (["timeline", "IN", "--plot", "OUT"], "t.png"),
    (["report", "IN", "-o", "OUT"], "t.html"),
    (["check", "IN", "-o", "OUT"], "t.json"),
    (["check", "IN", "--junit", "OUT"], "t.xml"),  # item 2
    (["annotate", "IN", "-o", "OUT"], "t.json"),
]


@pytest.mark.parametrize("argv, name", ONTO_INPUT, ids=[" ".join(a[::2]) + f" {n}" for a, n in ONTO_INPUT])
def test_output_onto_its_input_is_refused(argv, name, tmp_path):
    trace = plain_trace(tmp_path, name)
    before = digest(trace)
    r = traceview([str(trace) if a in ("IN", "OUT") else a for a in argv], tmp_path)
    one_line_refusal(r, trace)
    assert digest(trace) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == [name]


def test_every_name_of_the_input_is_refused(tmp_path):
    """A symbolic link, a hard link, another spelling, a gzip trace as CSV, a trace in a folder
    given as input, a link given as input: all the same file."""
    trace = plain_trace(tmp_path, "t.json")
    gz = tmp_path / "g.json.gz"
    gz.write_bytes(SAMPLE.read_bytes())
    (tmp_path / "link.json").symlink_to("t.json")
    os.link(trace, tmp_path / "hard.json")
    before, before_gz = digest(trace), digest(gz)
    cases = [
        (["summary", trace, "-o", tmp_path / "link.json"], "link.json"),
        (["kernels", trace, "-o", tmp_path / "hard.json"], "hard.json"),
        (["summary", tmp_path / "link.json", "-o", trace], "t.json"),
        (["compare", trace, gz, "-o", f"{tmp_path}/./t.json"], "./t.json"),
        (["kernels", gz, "--format", "csv", "-o", gz], "g.json.gz"),
        (["check", trace, "--junit", tmp_path / "link.json"], "link.json"),
        (["check", gz, "--baseline", trace, "--junit", tmp_path / "hard.json"], "hard.json"),
        (["summary", tmp_path, "-o", trace], "t.json"),  # found in the folder
    ]
    for args, shown in cases:
        r = traceview(args, tmp_path)
        one_line_refusal(r, shown)
        assert digest(trace) == before and digest(gz) == before_gz, args
    r = traceview(["summary", "t.json", "-o", "t.json"], tmp_path, cwd=tmp_path)  # relative names
    one_line_refusal(r, "t.json")
    assert digest(trace) == before


def test_refuse_inputs_by_identity(tmp_path):
    """The guard itself: same device and inode, whatever the name; a new file is never an input."""
    from traceview.atomic import InputTargetError, refuse_inputs

    a = tmp_path / "a.json"
    a.write_text("{}")
    (tmp_path / "s.json").symlink_to(a)
    os.link(a, tmp_path / "h.json")
    for name in ("a.json", "s.json", "h.json"):
        with pytest.raises(InputTargetError, match="is the input"):
            refuse_inputs([tmp_path / name], [a])
    refuse_inputs([tmp_path / "new.json", None], [a])  # nothing there: not an input
    b = tmp_path / "b.json"
    b.write_text("{}")
    refuse_inputs([b], [a])  # another file with the same content is another file


# ---------------------------------------------------------------- item 4: FIFOs and devices


def drain(path: Path, into: list) -> threading.Thread:
    """A reader of the FIFO ``path`` in a thread: what it read ends up in ``into``."""

    def read():
        with open(path, "rb") as fh:
            into.append(fh.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize(
    "argv",
    [
        ["kernels", str(SAMPLE), "--format", "csv", "-o", "OUT"],
        ["check", str(SAMPLE), "--junit", "OUT"],
        ["timeline", str(SAMPLE), "--plot", "OUT.svg"],
        ["annotate", str(SAMPLE), "-o", "OUT.json"],
    ],
    ids=["-o", "--junit", "--plot", "annotate"],
)
def test_a_fifo_is_written_not_replaced(argv, tmp_path):
    fifo = tmp_path / ("out" + (Path(argv[-1]).suffix if argv[-1] != "OUT" else ""))
    os.mkfifo(fifo)
    got: list = []
    reader = drain(fifo, got)
    r = traceview([str(fifo) if a.startswith("OUT") else a for a in argv], tmp_path)
    reader.join(60)
    assert r.returncode in (0, 1), r.stderr  # check: 1 when a rule fails
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
    assert got and len(got[0]) > 100, got
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == [fifo.name]


def test_a_fifo_nobody_reads_is_one_line_not_a_hang(tmp_path):
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    r = traceview(["kernels", str(SAMPLE), "-o", str(fifo)], tmp_path)  # a hang: the 300 s timeout
    err = r.stderr.decode()
    assert r.returncode == 1 and len(err.strip().splitlines()) == 1 and "no process is reading" in err, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def char_device(tmp_path: Path, name: str, minor: int) -> Path:
    """A private copy of /dev/null (minor 3) or /dev/full (minor 7): the real ones are never a target here."""
    node = tmp_path / name
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here ({exc}): needs root")
    return node


def test_a_device_is_written_not_replaced(tmp_path):
    null, full = char_device(tmp_path, "null", 3), char_device(tmp_path, "full", 7)
    for args in (
        ["kernels", str(SAMPLE), "--format", "csv", "-o", str(null)],
        ["check", str(SAMPLE), "--junit", str(null)],
    ):
        r = traceview(args, tmp_path)
        assert r.returncode in (0, 1), r.stderr
        assert stat.S_ISCHR(os.lstat(null).st_mode), f"{args}: the device was replaced"
    r = traceview(["check", str(SAMPLE), "--junit", str(full)], tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 2 and "No space left on device" in err and str(full) in err, err
    assert stat.S_ISCHR(os.lstat(full).st_mode), "the device was replaced"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["full", "null"]
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)  # and the real one is still a device


def test_a_fifo_in_process_gets_the_whole_text(tmp_path):
    """``traceview.atomic`` itself: the FIFO is written through, its reader sees one stream."""
    from traceview.atomic import OutputError, write_text

    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    got: list = []
    reader = drain(fifo, got)
    time.sleep(0.2)  # let the reader open its end
    write_text(fifo, "x" * 200_000)  # more than a pipe holds: the writer must wait for the reader
    reader.join(30)
    assert got == [b"x" * 200_000]
    sock_dir = tmp_path / "d"
    sock_dir.mkdir()
    with pytest.raises(OutputError, match="is a directory"):
        write_text(sock_dir, "x")


# ---------------------------------------------------------------- item 5: SIGTERM and SIGHUP


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory) -> Path:
    """~16 MB of JSON (gzip), 66k events: annotating it takes long enough to interrupt."""
    path = tmp_path_factory.mktemp("big") / "big.json.gz"
    synth.write(path, synth.attention_trace("sdpa_math", steps=800))
    return path


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_signal_during_annotate_leaves_nothing(sig, big_trace, tmp_path):
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
            str(out / "a.json.gz"),
            "--no-cache",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL),  # as a shell starts it
    )
    deadline = time.monotonic() + 300
    while not any(out.iterdir()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)  # the temporary file appears when writing starts
    assert proc.poll() is None, "annotate ended before it started writing"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -sig, (
        proc.returncode,
        err,
    )  # ended by the signal, as without traceview's handler
    assert b"Traceback" not in err, err
    assert list(out.iterdir()) == []
    assert digest(big_trace) == before


# ---------------------------------------------------------------- item 6: file names that are not UTF-8


def test_file_names_that_are_not_utf8(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    odd = os.fsencode(folder) + b"/b\xffd.json"  # a stray byte: not UTF-8
    with open(odd, "wb") as fh:
        fh.write(
            gzip.decompress(SAMPLE.read_bytes()).replace(b'"variant"', b'"not_variant"')
        )  # label: its name
    other = folder / "other.json.gz"
    other.write_bytes(SAMPLE.read_bytes())
    for args in (
        ["summary", odd],
        ["ranks", odd, other],
        ["compare", odd, other, "--format", "json"],
        ["diff", odd, other, "--format", "csv"],
        ["summary", "--run", odd, other],
        ["report", odd, other, "-o", tmp_path / "r.html"],
    ):
        r = traceview(args, tmp_path, cache=True)
        err = r.stderr.decode("utf-8", "replace")
        assert r.returncode == 0, (args[0], err)
        assert "Traceback" not in err
        out = r.stdout.decode("utf-8")  # strict: the output is text
        if args[0] == "summary" and "--run" not in args:
            assert "b\\xffd" in out, out[:500]  # the name as its label, the stray byte escaped
        if "json" in args:
            assert "b" + "\\" * 2 + "xffd" in out  # JSON text: the backslash of \\xff escaped, no surrogate
    entries = [p for p in (tmp_path / "cache").iterdir() if (p / "entry.json").is_file()]
    assert len(entries) == 2, "the trace with the odd name was not cached"


# ---------------------------------------------------------------- item 8: annotate writes valid JSON


def test_annotate_output_is_valid_utf8_json(tmp_path):
    doc = json.loads(gzip.decompress(SAMPLE.read_bytes()))
    victim = next(e for e in doc["traceEvents"] if e.get("ph") == "X")
    victim["name"] = "PLACEHOLDER"
    raw = json.dumps(doc).encode().replace(b'"PLACEHOLDER"', b'"bad\xff\xfename"', 1)
    for name, data in (("t.json", raw), ("t.json.gz", gzip.compress(raw))):
        trace = tmp_path / name
        trace.write_bytes(data)
        out = tmp_path / f"out-{name}"
        r = traceview(["annotate", trace, "-o", out], tmp_path)
        assert r.returncode == 0, r.stderr
        assert b"malformed" in r.stderr  # the load skipped it, and says so
        text = out.read_bytes()
        text = gzip.decompress(text) if name.endswith(".gz") else text
        back = json.loads(text.decode("utf-8"))  # strict UTF-8, then JSON: both must hold
        assert [e["name"] for e in back["traceEvents"] if "bad" in str(e.get("name"))] == [
            "bad\\xff\\xfename"
        ]
        assert len(back["traceEvents"]) >= len(doc["traceEvents"])


def test_the_api_refuses_to_write_onto_its_inputs_too(tmp_path):
    """tv.report(output=...) and tv.check(junit=...) guard their inputs as the commands do: a link
    to the trace, the trace itself, the checks file; the input left as it was."""
    import shutil

    import traceview as tv
    from traceview.atomic import InputTargetError

    trace = tmp_path / "t.json.gz"
    shutil.copyfile(Path(__file__).resolve().parents[1] / "sample_traces" / "naive.json.gz", trace)
    before = trace.read_bytes()
    link, hard = tmp_path / "link.html", tmp_path / "hard.xml"  # the endings each output asks for
    link.symlink_to(trace)
    os.link(trace, hard)
    pytest.importorskip("matplotlib")
    with pytest.raises(InputTargetError, match="is the input"):
        tv.report([str(trace)], output=link)
    with pytest.raises(InputTargetError, match="is the input"):
        tv.check(str(trace), baseline=str(trace), junit=hard)
    assert trace.read_bytes() == before and link.is_symlink() and hard.read_bytes() == before
