"""The replay of a repeated command (``traceview.replay``, issue 35): the same command line on
unchanged inputs is answered from the record of its first run's output, byte for byte, before
pandas, numpy or click are imported; anything that could change the output is a miss and a full
run. Real processes throughout: each test starts the command line as a user would.

How a test proves where an answer came from: it plants a record of its own (``PLANTED``, written
with the module's own writer under the record's name). A run that prints it was served from the
record; a run that prints the real output did the work.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import corpus
import pytest

from traceview import replay

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_traces" / "naive.json.gz"
OTHER = REPO / "sample_traces" / "naive_inplace.json.gz"
PLANTED = b"answered from the record\n"


@pytest.fixture
def home(tmp_path):
    """A folder holding the trace copies (the current folder of every run) and the cache."""
    for src in (SAMPLE, OTHER):
        shutil.copy(src, tmp_path / src.name)
    return tmp_path


def run(home: Path, *args, env=None, code: str | None = None, flags=()) -> subprocess.CompletedProcess:
    """``traceview ARGS`` in ``home`` with its own cache folder (bytes out); ``env`` added to the
    environment (a value None: that variable removed); ``code``: run that
    Python instead of ``-m traceview``, with the same arguments; ``flags``: the interpreter's."""
    full = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    # the sample traces are small: recorded like the traces the cache stores (see the last test)
    full |= {"TRACEVIEW_CACHE_DIR": str(home / "cache"), "TRACEVIEW_CACHE_MIN_MB": "0", **(env or {})}
    full = {k: v for k, v in full.items() if v is not None}
    head = [sys.executable, *flags, *(["-c", code] if code else ["-m", "traceview"])]
    return subprocess.run(
        [*head, *map(str, args)], cwd=home, env=full, capture_output=True, timeout=300, check=False
    )


def records(home: Path) -> list[Path]:
    folder = home / "cache" / replay.FOLDER
    return sorted(folder.glob("*" + replay.SUFFIX)) if folder.is_dir() else []


def plant(home: Path) -> Path:
    """Overwrite the one record's output with ``PLANTED`` (a valid record: the module's writer;
    the files it depends on kept)."""
    (rec,) = records(home)
    name = rec.name[: -len(replay.SUFFIX)]
    depends, _chunks = replay._parse(rec.read_bytes(), name)
    replay._store(rec.parent, name, [(b"o", 1, PLANTED)], depends)
    return rec


def first(home: Path, *args) -> subprocess.CompletedProcess:
    """A full run that leaves one record, which is then replaced by the planted one."""
    done = run(home, *args)
    assert done.returncode == 0, done.stderr
    assert len(records(home)) == 1
    plant(home)
    assert run(home, *args).stdout == PLANTED  # the record answers
    return done


def test_a_repeated_command_prints_the_same_bytes_from_its_record(home):
    args = ("summary", SAMPLE.name)
    cold = run(home, *args)
    assert cold.returncode == 0 and cold.stdout, cold.stderr
    (rec,) = records(home)
    again = run(home, *args)
    assert (again.returncode, again.stdout, again.stderr) == (0, cold.stdout, cold.stderr)
    # the record holds the output and the files the output depends on (the source file the
    # trace names, looked for to find a line: absent here), nothing else; its name is the key's hash
    depends, chunks = replay._parse(rec.read_bytes(), rec.name[: -len(replay.SUFFIX)])
    assert depends == {str(home / "collectors" / "attention.py"): None}
    assert b"".join(c[2] for c in chunks if c[0] == b"o") == cold.stdout
    assert b"".join(c[2] for c in chunks if c[0] == b"e") == cold.stderr
    assert len(rec.name) == 64 + len(replay.SUFFIX) and SAMPLE.name.encode() not in rec.name.encode()
    assert oct(rec.stat().st_mode & 0o777) == "0o600" and oct(rec.parent.stat().st_mode & 0o777) == "0o700"
    plant(home)
    assert run(home, *args).stdout == PLANTED  # the second run was the record's, not a lookalike


def test_a_replay_imports_neither_pandas_nor_numpy_nor_click(home):
    args = ("diff", SAMPLE.name, OTHER.name, "--format", "json")
    cold = run(home, *args)
    assert cold.returncode == 0, cold.stderr
    code = (
        "import json, sys\nfrom traceview._entry import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    status = exc.code\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'numpy', 'click'))\n"
        "open('modules.json', 'w').write(json.dumps({'status': status, 'heavy': heavy}))"
    )
    replayed = run(home, *args, code=code)
    assert replayed.stdout == cold.stdout and replayed.stderr == cold.stderr
    assert json.loads((home / "modules.json").read_text()) == {"status": 0, "heavy": []}
    json.loads(replayed.stdout)  # the whole document


def test_a_changed_input_is_a_full_run(home):
    done = first(home, "summary", SAMPLE.name)
    st = os.stat(home / SAMPLE.name)
    os.utime(home / SAMPLE.name, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched, same bytes
    again = run(home, "summary", SAMPLE.name)
    assert again.returncode == 0 and again.stdout == done.stdout != PLANTED


def test_a_replaced_input_is_a_full_run(home):
    done = first(home, "summary", SAMPLE.name)
    shutil.copy(OTHER, home / SAMPLE.name)  # another trace under the same name
    again = run(home, "summary", SAMPLE.name)
    assert again.returncode == 0 and again.stdout == run(home, "summary", SAMPLE.name, "--no-cache").stdout
    assert again.stdout not in (done.stdout, PLANTED)


def test_a_source_file_the_trace_names_is_checked_before_a_replay(home):
    """summary's advice looks for the line to edit in the Python files the trace names, under the
    current folder (collectors/attention.py for the naive sample): absent when recorded, then
    present, then edited, each is a miss and a full run."""
    done = first(home, "summary", SAMPLE.name)
    (rec,) = records(home)
    depends, _chunks = replay._parse(rec.read_bytes(), rec.name[: -len(replay.SUFFIX)])
    source = home / "collectors" / "attention.py"
    assert depends == {str(source): None}  # looked for, not there
    source.parent.mkdir()
    shutil.copy(REPO / "collectors" / "attention.py", source)
    present = run(home, "summary", SAMPLE.name)
    assert present.returncode == 0 and present.stdout != PLANTED
    assert present.stdout == run(home, "summary", SAMPLE.name, "--no-cache").stdout
    assert present.stdout != done.stdout  # the line to edit now comes from the source
    plant(home)
    assert run(home, "summary", SAMPLE.name).stdout == PLANTED
    with open(source, "a", encoding="utf-8") as fh:
        fh.write("\n# edited\n")
    edited = run(home, "summary", SAMPLE.name)
    assert edited.returncode == 0 and edited.stdout == present.stdout


def test_another_option_or_environment_is_a_full_run(home):
    first(home, "summary", SAMPLE.name)
    as_json = run(home, "summary", SAMPLE.name, "--format", "json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)
    narrow = run(home, "summary", SAMPLE.name, env={"COLUMNS": "60"})
    assert narrow.returncode == 0 and narrow.stdout != PLANTED
    assert max(len(line) for line in narrow.stdout.decode().splitlines()) <= 60


@pytest.mark.parametrize("flags", [("-X", "utf8"), ("-W", "error"), ("-O",)])
def test_other_interpreter_flags_are_a_full_run(home, flags):
    done = first(home, "summary", SAMPLE.name)
    other = run(home, "summary", SAMPLE.name, flags=flags)
    assert other.returncode == 0, other.stderr
    assert other.stdout == done.stdout  # the real output: the record was not used


def test_a_folder_argument_is_keyed_on_its_files(home):
    runs = home / "runs"
    runs.mkdir()
    shutil.copy(SAMPLE, runs / "a.json.gz")
    shutil.copy(OTHER, runs / "b.json.gz")
    first(home, "compare", "runs")
    shutil.copy(SAMPLE, runs / "c.json.gz")  # one more trace in the folder
    again = run(home, "compare", "runs")
    assert again.returncode == 0 and again.stdout != PLANTED and b"c.json.gz" in again.stdout


def test_no_cache_neither_reads_nor_writes_records(home):
    done = first(home, "summary", SAMPLE.name)
    uncached = run(home, "summary", SAMPLE.name, "--no-cache")
    assert uncached.returncode == 0 and uncached.stdout == done.stdout
    assert len(records(home)) == 1
    off = run(home, "summary", SAMPLE.name, env={"TRACEVIEW_CACHE_MAX_MB": "0"})
    assert off.stdout == done.stdout and len(records(home)) == 1


def test_another_traceview_is_a_full_run(home, tmp_path_factory):
    """A copy of the package, then one of its modules edited: the code digest changes."""
    root = tmp_path_factory.mktemp("copy")
    shutil.copytree(REPO / "traceview", root / "traceview", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(root)}
    where = run(home, env=env, code="import traceview; print(traceview.__file__)")
    assert where.stdout.decode().strip() == str(root / "traceview" / "__init__.py")
    done = run(home, "summary", SAMPLE.name, env=env)
    assert done.returncode == 0 and len(records(home)) == 1
    plant(home)
    assert run(home, "summary", SAMPLE.name, env=env).stdout == PLANTED
    with open(root / "traceview" / "units.py", "a", encoding="utf-8") as fh:
        fh.write("\n# edited\n")
    again = run(home, "summary", SAMPLE.name, env=env)
    assert again.returncode == 0 and again.stdout == done.stdout != PLANTED


def test_a_run_that_writes_a_file_is_never_recorded(home):
    for _ in range(2):
        out = run(home, "summary", SAMPLE.name, "-o", "out.json")
        assert out.returncode == 0 and (home / "out.json").is_file(), out.stderr
        (home / "out.json").unlink()
    assert records(home) == []


def test_a_failed_run_is_never_recorded(home):
    for _ in range(2):
        bad = run(home, "summary", "missing.json")
        assert bad.returncode == 1 and b"missing.json" in bad.stderr
    assert records(home) == []


def test_a_run_into_a_closed_pipe_is_never_recorded(home):
    """``traceview summary t | head -c 0``: the run exits 0 having delivered nothing; a record of
    what it wrote would answer a later ``> file`` with less than the run prints."""
    for _ in range(2):
        read, write = os.pipe()
        os.close(read)
        env = {**os.environ, "TRACEVIEW_CACHE_DIR": str(home / "cache"), "TRACEVIEW_CACHE_MIN_MB": "0"}
        done = subprocess.run(
            [sys.executable, "-m", "traceview", "summary", SAMPLE.name],
            cwd=home,
            env=env,
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=300,
            check=False,
        )
        os.close(write)
        assert done.returncode in (0, 120), done.stderr  # friendly's exit 0; 120: a flush at exit
    assert records(home) == []
    assert run(home, "summary", SAMPLE.name).stdout  # then a full run, printed whole


def test_a_damaged_record_is_a_miss_and_is_replaced(home):
    done = run(home, "summary", SAMPLE.name)
    (rec,) = records(home)
    raw = bytearray(rec.read_bytes())
    raw[-3] ^= 0x20  # one flipped bit in the output it holds
    rec.write_bytes(bytes(raw))
    again = run(home, "summary", SAMPLE.name)
    assert again.returncode == 0 and again.stdout == done.stdout
    assert replay._parse(rec.read_bytes(), rec.name[: -len(replay.SUFFIX)]) is not None  # written anew
    rec.write_bytes(rec.read_bytes()[:20])  # cut short
    assert run(home, "summary", SAMPLE.name).stdout == done.stdout


def test_cache_info_counts_records_and_clear_removes_them(home):
    run(home, "summary", SAMPLE.name)
    run(home, "kernels", SAMPLE.name)
    info = json.loads(run(home, "cache", "info", "--format", "json").stdout)
    assert info["replays"] == 2 and info["bytes"] >= sum(r.stat().st_size for r in records(home))
    cleared = json.loads(run(home, "cache", "clear", "--format", "json").stdout)
    assert cleared["replays"] == 2 and records(home) == []
    assert not (home / "cache" / replay.FOLDER).exists()


def test_records_are_bounded(home):
    """Past MAX_RECORDS, the least recently used record goes when another is stored."""
    where = home / "cache" / replay.FOLDER
    names = [f"{i:064x}" for i in range(replay.MAX_RECORDS + 1)]
    for i, name in enumerate(names[:-1]):
        replay._store(where, name, [(b"o", 0, b"x" * 10)], {})
        os.utime(where / (name + replay.SUFFIX), ns=(10**18 + i, 10**18 + i))  # the first is the oldest
    replay._store(where, names[-1], [(b"o", 0, b"x" * 10)], {})
    assert [r.name[:64] for r in records(home)] == names[1:]


def test_small_inputs_are_not_recorded_into_the_cache(home):
    """As the cache stores no trace under ``TRACEVIEW_CACHE_MIN_MB`` (default 1 MiB), a command
    whose files are smaller is not recorded: the README's first command leaves the folder alone."""
    for _ in range(2):
        assert run(home, "summary", SAMPLE.name, env={"TRACEVIEW_CACHE_MIN_MB": None}).returncode == 0
    assert records(home) == []
    assert run(home, "summary", SAMPLE.name, env={"TRACEVIEW_CACHE_MIN_MB": "0.01"}).returncode == 0
    assert len(records(home)) == 1  # the trace is 0.02-0.1 MiB: above this threshold


def test_a_progress_display_on_a_terminal_is_never_recorded(home):
    """ranks draws its count of ranks done on stderr when that is a terminal: such a run is not
    recorded (a replay would show a display of work it did not do); piped, it is."""
    ranks = corpus.corpus_files("param/dlrm_kineto__worker*.json.gz")
    if not ranks:
        pytest.skip(corpus.SKIP_REASON)
    import select

    leader, follower = os.openpty()
    try:
        env = {**os.environ, "TRACEVIEW_CACHE_DIR": str(home / "cache"), "TRACEVIEW_CACHE_MIN_MB": "0"}
        done = subprocess.run(
            [sys.executable, "-m", "traceview", "ranks", *map(str, ranks)],
            cwd=home,
            env=env,
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=300,
            check=False,
        )
        drawn = b""
        while select.select([leader], [], [], 0.5)[0]:
            drawn += os.read(leader, 1 << 16)
    finally:
        os.close(leader)
        os.close(follower)
    assert done.returncode == 0 and b"\rranks: " in drawn, drawn
    assert records(home) == []
    assert run(home, "ranks", *ranks).returncode == 0
    assert len(records(home)) == 1


def test_a_record_being_written_when_sigterm_comes_leaves_nothing(tmp_path):
    """SIGTERM (or SIGHUP) while a record is written removes its temporary file, as the writers'
    temporaries are removed: the signal is sent from inside the write, before the rename."""
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from traceview import replay\n"
        "real = os.replace\n"
        "def replace(a, b):\n"
        "    os.kill(os.getpid(), getattr(signal, sys.argv[2]))\n"
        "    real(a, b)\n"
        "os.replace = replace\n"
        "replay._store(Path(sys.argv[1]), 'a' * 64, [(b'o', 1, b'x' * 100000)], {})\n"
    )
    for sig in ("SIGTERM", "SIGHUP"):
        where = tmp_path / sig
        done = subprocess.run([sys.executable, "-c", code, str(where), sig], capture_output=True, timeout=60)
        assert done.returncode == -getattr(__import__("signal"), sig), done.stderr
        assert where.is_dir() and list(where.iterdir()) == []
