"""A summary of cached traces shown again from what an earlier run kept in each trace's cache
entry (``traceview.kept``, ``cli.again``; issue 35), before pandas, numpy or pyarrow is imported.

Real processes throughout, each with its own cache folder; the replay's records are removed
before every run, so that an answer comes from the entry, not from the record of the same command
line. Each run says, in a file, which of pandas, numpy and pyarrow it imported: a run that
imported none showed what was kept; the others did the work. What is shown again is compared,
byte for byte, with the same command run with ``--no-cache`` (nothing kept, nothing read back).
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

from traceview import entry_files, fingerprint

REPO = Path(__file__).resolve().parents[1]
SAMPLES = sorted((REPO / "sample_traces").glob("*.json.gz"))
#: corpus traces of other kinds: an older Kineto format, ROCm, the HTA diff trace
PICKS = (
    "kineto/docs_traces__after_fix_trace.json.gz",
    "rocm/hta__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/trace_diff__control__control.json.gz",
)
#: a trace without call stacks or load warnings: its summary is kept
KEPT = "hta/trace_diff__control__control.json.gz"
HEAVY = ("pandas", "numpy", "pyarrow")
#: runs ``traceview`` as its entry point does, then writes the heavy modules it imported to $HEAVY_OUT
WRAP = (
    f"import atexit, json, os, sys\nHEAVY = {HEAVY!r}\n"
    "def said():\n"
    "    heavy = sorted({m.split('.')[0] for m in sys.modules} & set(HEAVY))\n"
    "    with open(os.environ['HEAVY_OUT'], 'w') as fh: json.dump(heavy, fh)\n"
    "atexit.register(said)\n"
    "sys.argv[0] = 'traceview'\n"
    "from traceview._entry import main\n"
    "main()\n"
)
VARIANTS = {
    "table at 60": ((), {"COLUMNS": "60"}),
    "wide": (("--wide",), {}),
    "markdown": (("--format", "markdown"), {}),
    "json": (("--format", "json"), {}),
}


def run(home: Path, *args, env=None, flags=()) -> tuple[subprocess.CompletedProcess, list[str]]:
    """``traceview ARGS`` in ``home`` with its cache in ``home/cache`` and no replay record: the
    finished process and the heavy modules it imported."""
    shutil.rmtree(home / "cache" / "replay", ignore_errors=True)
    heavy = home / "heavy.json"
    full = {
        k: v
        for k, v in os.environ.items()
        if k not in ("COLUMNS", "LINES") and not k.startswith("TRACEVIEW_")
    }
    full |= {
        "TRACEVIEW_CACHE_DIR": str(home / "cache"),
        "TRACEVIEW_CACHE_MIN_MB": "0",
        "HEAVY_OUT": str(heavy),
    }
    full |= env or {}
    done = subprocess.run(
        [sys.executable, *flags, "-c", WRAP, *map(str, args)],
        cwd=home,
        env=full,
        capture_output=True,
        timeout=300,
        check=False,
    )
    return done, json.loads(heavy.read_text())


def kept_files(home: Path) -> list[Path]:
    return sorted((home / "cache").glob("*/derived-*-shown-*.json"))


def shown_as(home: Path, first: subprocess.CompletedProcess, *args) -> list[str]:
    """Each of ``VARIANTS`` of the command ``args`` (whose first run, ``first``, ran with the first
    variant's setting: the reference for that one) printed as the command prints it; for each,
    whether it imported any of the heavy modules."""
    (args0, env0), *rest = VARIANTS.values()
    got, heavy = run(home, *args, *args0, env=env0)
    assert (got.returncode, got.stdout, got.stderr) == (0, first.stdout, first.stderr)
    return [heavy != []] + [same(home, *args, *more, env=env) != [] for more, env in rest]


def same(home: Path, *args, env=None) -> list[str]:
    """Run ``args`` and again with ``--no-cache``: the same bytes on stdout and stderr, the same
    status; the heavy modules the first imported."""
    got, heavy = run(home, *args, env=env)
    ref, _ = run(home, *args, "--no-cache", env=env)
    assert got.returncode == ref.returncode == 0, got.stderr
    assert got.stdout == ref.stdout
    assert got.stderr == ref.stderr
    return heavy


NEEDS_CORPUS = pytest.mark.skipif(not corpus.CORPUS.is_dir(), reason=corpus.SKIP_REASON)


def trace_params():
    # sdpa_auto runs the flash kernel as sdpa_flash does: the other four samples
    picks = [pytest.param(p, id=p.name) for p in SAMPLES if p.name != "sdpa_auto.json.gz"]
    return picks + [pytest.param(corpus.CORPUS / p, id=Path(p).name, marks=NEEDS_CORPUS) for p in PICKS]


@pytest.mark.parametrize("trace", trace_params())
def test_what_is_shown_again_is_what_the_summary_prints(tmp_path, trace):
    """A first summary keeps what it showed (unless it said something or read a source file); every
    format and width after it is the summary's own output, and drawn from what was kept."""
    first, _ = run(tmp_path, "summary", trace, env=VARIANTS["table at 60"][1])
    assert first.returncode == 0, first.stderr
    kept = bool(kept_files(tmp_path))
    if first.stderr:
        assert not kept, "a run that said something keeps nothing to show again"
    assert shown_as(tmp_path, first, "summary", trace) == [not kept] * len(VARIANTS)
    assert run(tmp_path, "summary", trace, trace)[0].returncode == 0  # two traces: kept of their own
    assert (same(tmp_path, "summary", trace, trace) == []) == kept  # one document


@NEEDS_CORPUS
def test_a_trace_without_stacks_or_warnings_is_kept_and_shown_without_pandas(tmp_path):
    trace = tmp_path / "t.json.gz"
    shutil.copy(corpus.CORPUS / KEPT, trace)
    first, heavy = run(tmp_path, "summary", trace)
    assert first.returncode == 0 and not first.stderr and heavy == sorted(HEAVY)
    assert len(kept_files(tmp_path)) == 1
    again, heavy = run(tmp_path, "summary", trace)
    assert again.stdout == first.stdout and heavy == []


@pytest.fixture
def kept_trace(tmp_path):
    trace = tmp_path / "t.json.gz"
    if not (corpus.CORPUS / KEPT).exists():
        pytest.skip(corpus.SKIP_REASON)
    shutil.copy(corpus.CORPUS / KEPT, trace)
    first, _ = run(tmp_path, "summary", trace)
    assert first.returncode == 0 and len(kept_files(tmp_path)) == 1
    return trace


@pytest.mark.parametrize(
    "args, env, flags",
    [
        (("--top", "3"), {}, ()),
        (("--step", "1010"), {}, ()),
        (("--format", "csv"), {}, ()),
        (("--no-cache",), {}, ()),
        ((), {"TRACEVIEW_SOMETHING": "1"}, ()),
        ((), {}, ("-X", "utf8")),
    ],
    ids=["another top", "a step", "csv", "no cache", "another setting", "interpreter flags"],
)
def test_other_options_settings_or_interpreter_do_the_work(tmp_path, kept_trace, args, env, flags):
    got, heavy = run(tmp_path, "summary", kept_trace, *args, env=env, flags=flags)
    ref, _ = run(tmp_path, "summary", kept_trace, *args, "--no-cache", env=env)
    assert got.returncode == 0 and got.stdout == ref.stdout
    assert heavy != []


def test_an_output_file_is_drawn_from_the_reports(tmp_path, kept_trace):
    out = tmp_path / "s.md"
    got, heavy = run(tmp_path, "summary", kept_trace, "-o", out)
    assert got.returncode == 0 and heavy != [] and out.read_text()


def test_a_changed_trace_does_the_work(tmp_path, kept_trace):
    os.utime(kept_trace)  # its identity (mtime, ctime) changed: not the trace the entry holds
    got, heavy = run(tmp_path, "summary", kept_trace)
    assert got.returncode == 0 and heavy != []
    assert got.stdout == run(tmp_path, "summary", kept_trace, "--no-cache")[0].stdout


def test_a_damaged_kept_file_does_the_work(tmp_path, kept_trace):
    (path,) = kept_files(tmp_path)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0x01
    path.write_bytes(bytes(data))
    got, heavy = run(tmp_path, "summary", kept_trace)
    assert got.returncode == 0 and heavy != []
    assert got.stdout == run(tmp_path, "summary", kept_trace, "--no-cache")[0].stdout


def test_a_kept_file_cannot_put_a_control_on_the_terminal(tmp_path, kept_trace):
    """A kept file rewritten with a valid checksum (the folder is the user's own: a damage check,
    not a signature) and an escape sequence in the title: shown escaped."""
    (path,) = kept_files(tmp_path)
    body = json.loads(path.read_bytes().partition(b"\n")[2])
    body["value"]["shown"]["title"] = "\x1b[31mred\x1b[0m"
    raw = json.dumps(body).encode()
    path.write_bytes(entry_files.sum_line(raw) + raw)
    got, heavy = run(tmp_path, "summary", kept_trace)
    assert heavy == [] and b"\x1b" not in got.stdout
    assert got.stdout.startswith(b"\\x1b[31mred\\x1b[0m\n")


def test_what_was_kept_belongs_to_the_entry_it_was_written_in(tmp_path, kept_trace):
    """The entry rebuilt (its stamp and entry.json rewritten by another store): the kept file's
    name no longer matches, and the summary does the work again."""
    (path,) = kept_files(tmp_path)
    entry = path.parent
    raw = (entry / "entry.json").read_bytes()
    body = raw.partition(b"\n")[2] + b" "  # the same entry, another hash
    (entry / "entry.json").write_bytes(entry_files.sum_line(body) + body)
    got, heavy = run(tmp_path, "summary", kept_trace)
    assert got.returncode == 0 and heavy != []
    assert fingerprint.identity(kept_trace) is not None


def pair_params():
    s = {p.name: p for p in SAMPLES}
    pairs = [
        pytest.param((s["naive_inplace.json.gz"], s["sdpa_flash.json.gz"]), id="inplace-flash"),
        pytest.param((s["naive.json.gz"], s["naive_inplace.json.gz"]), id="naive-inplace (stacks)"),
    ]
    hta = corpus.CORPUS / "hta"
    both = (hta / "trace_diff__control__control.json.gz", hta / "trace_diff__test__test.json.gz")
    return [*pairs, pytest.param(both, id="hta control-test", marks=NEEDS_CORPUS)]


@pytest.mark.parametrize("pair", pair_params())
@pytest.mark.parametrize("command", ["diff", "compare"])
def test_a_diff_or_compare_shown_again_is_what_it_prints(tmp_path, pair, command):
    """diff and compare keep their one report in the first trace's entry: every format and width
    after the first run is the command's own output, drawn from what was kept."""
    a, b = pair
    first, _ = run(tmp_path, command, a, b, env=VARIANTS["table at 60"][1])
    assert first.returncode == 0, first.stderr
    kept = bool(kept_files(tmp_path))
    if first.stderr:
        assert not kept
    assert shown_as(tmp_path, first, command, a, b) == [not kept] * len(VARIANTS)
    other, heavy = run(tmp_path, command, b, a)  # the other order: its own first run
    assert other.returncode == 0 and heavy != []
    again, heavy = run(tmp_path, command, b, a)
    assert again.stdout == other.stdout and (heavy == []) == kept


@pytest.fixture
def kept_pair(tmp_path):
    s = {p.name: p for p in SAMPLES}
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    shutil.copy(s["naive_inplace.json.gz"], a)
    shutil.copy(s["sdpa_flash.json.gz"], b)
    first, _ = run(tmp_path, "diff", a, b)
    assert first.returncode == 0 and not first.stderr and len(kept_files(tmp_path)) == 1
    assert run(tmp_path, "diff", a, b)[1] == []
    return a, b


def test_a_changed_second_trace_does_the_work(tmp_path, kept_pair):
    a, b = kept_pair
    os.utime(b)
    got, heavy = run(tmp_path, "diff", a, b)
    assert got.returncode == 0 and heavy != []
    assert got.stdout == run(tmp_path, "diff", a, b, "--no-cache")[0].stdout


def test_a_rebuilt_second_entry_does_the_work(tmp_path, kept_pair):
    """B's entry rewritten (the same trace, another entry.json): the name the diff was kept under
    held B's old entry, so it is not found."""
    a, b = kept_pair
    entry = entry_files.entry_folder(tmp_path / "cache", b)
    body = (entry / "entry.json").read_bytes().partition(b"\n")[2] + b" "
    (entry / "entry.json").write_bytes(entry_files.sum_line(body) + body)
    got, heavy = run(tmp_path, "diff", a, b)
    assert got.returncode == 0 and heavy != []
    assert got.stdout == run(tmp_path, "diff", a, b, "--no-cache")[0].stdout


@pytest.mark.parametrize(
    "args",
    [("--top", "3"), ("--annotation-b", "x"), ("--step", "1"), ("--format", "html")],
    ids=["another top", "B's annotation", "a step", "html"],
)
def test_other_diff_options_do_the_work(tmp_path, kept_pair, args):
    a, b = kept_pair
    got, heavy = run(tmp_path, "diff", a, b, *args)
    ref, _ = run(tmp_path, "diff", a, b, *args, "--no-cache")
    assert got.returncode == ref.returncode and got.stdout == ref.stdout and got.stderr == ref.stderr
    assert heavy != []


def test_a_kept_file_past_the_cap_is_not_read(tmp_path, kept_trace):
    """A kept file larger than ``kept.MAX_BYTES`` (padded with spaces, its checksum right) is a miss."""
    from traceview import kept

    (path,) = kept_files(tmp_path)
    body = path.read_bytes().partition(b"\n")[2] + b" " * kept.MAX_BYTES
    path.write_bytes(entry_files.sum_line(body) + body)
    got, heavy = run(tmp_path, "summary", kept_trace)
    assert got.returncode == 0 and heavy != []


def test_a_summary_of_several_traces_is_kept_for_those_traces_together(tmp_path):
    """What ``summary A`` and ``summary B`` kept is not ``summary A B``'s (several traces may be
    the ranks of one job, which it says): that does the work, then is kept in its own right."""
    s = {p.name: p for p in SAMPLES}
    a, b = s["naive_inplace.json.gz"], s["sdpa_flash.json.gz"]
    for one in (a, b):
        assert run(tmp_path, "summary", one)[0].returncode == 0
        assert run(tmp_path, "summary", one)[1] == []
    assert run(tmp_path, "summary", a, b)[1] != []
    assert same(tmp_path, "summary", a, b) == []
    assert run(tmp_path, "summary", b, a)[1] != []


def test_a_run_shown_from_the_entry_is_recorded_for_a_replay(tmp_path, kept_trace):
    """A run that showed what the entry kept read its trace through the cache: the replay records
    it, as it records a run that loaded the trace, and the same command line is then replayed."""
    got, heavy = run(tmp_path, "summary", kept_trace)
    assert heavy == [] and got.returncode == 0
    (record,) = (tmp_path / "cache" / "replay").glob("*.rec")
    assert record.stat().st_size > len(got.stdout)
