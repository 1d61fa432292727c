"""CLI fuzzing engine (issue 22), shared by ``tests/test_fuzz_cli.py`` and ``benchmarks/fuzz_campaign.py``.

A *case* is made from one integer: the seed of a ``random.Random`` that picks base traces (the
sample traces, the small corpus traces ``test_fuzz.py`` uses, its hand-made trace), damages
them at the structure level (hostile strings in names, zero/negative/huge numbers, duplicates,
deep nesting, huge ranks, dropped keys, ...) and/or the byte level (flips, cuts, gzip), and
picks a real CLI command (summary, kernels [--ops], diff, compare, timeline, annotate -o) with
a format (table, markdown, csv, json) and options. The same seed always gives the same case.

Each case runs the real click entry point (``traceview.cli.main``) in a *forked* child of a
helper process (``ForkServer``: a fresh interpreter that has already imported traceview, pandas
and matplotlib, and holds no threads or test state): a case costs its own work instead of the
~1.5 s a fresh interpreter needs to start, yet runs in its own process with its own exit status,
file descriptors 1 and 2, working folder, environment, warning filters, address-space limit
(RLIMIT_AS), CPU-time check and wall-clock limit (SIGKILL of its process group).
``mode="subprocess"`` runs ``python -m traceview`` instead (slower; a test checks that both agree).

The oracle (``crash_problems`` and ``injection_problems``):

* exit status in {0, 1, 2}: never 3 (internal error), never a signal, never Python's 1 or 120
  after an uncaught exception; no ``Traceback`` on stdout or stderr;
* done within the per-case time limit (a hang is a failure), within the memory limit;
* the working folder (empty at the start) holds afterwards exactly the file the command was
  asked to write (only on success: nothing partial after a failure), the input files are
  unchanged and alone in their folder, HOME stays empty, no temporary file is left in the cache;
* issue 38: an output option pointed at an input (its own name, a symbolic link, a hard link) is
  refused with exit 2 and changes nothing; one pointed at a FIFO or a character device (a private
  copy of /dev/null, made in the case's folder) leaves it what it was; a case sent SIGTERM, SIGHUP or
  SIGINT at a random moment leaves no file behind (the signal's own exit status is allowed); input
  file names may hold bytes that are not UTF-8;
* injection (kept apart, so crashes are reported even while injection is unfixed): stdout and
  stderr contain no raw ESC, CR, other C0/C1 control or bidi control character, no CSV cell
  that a spreadsheet would run as a formula, no raw ``<script``/``<img`` in markdown.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import csv
import functools
import gzip
import hashlib
import io
import json
import os
import random
import re
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from corpus import CORPUS  # noqa: E402
from test_fuzz import SAMPLES, SMALL_CORPUS, handmade  # noqa: E402

CASE_SECONDS = 30.0  # per-case wall-clock limit: longer is a hang
CPU_SECONDS = 15.0  # per-case CPU-time limit (a case takes well under 1 s): more is unbounded work, "slow"
MEMORY_HEADROOM = 3 << 30  # RLIMIT_AS: the forking process's address space plus this
SUBPROCESS_MEMORY = 6 << 30  # RLIMIT_AS of a fresh ``python -m traceview``
COMMANDS = (
    "summary",
    "summary",
    "kernels",
    "kernels-ops",
    "kernels-ops",
    "kernels-unclassified",
    "diff",
    "diff",
    "compare",
    "timeline",
    "annotate",
    "ranks",
    "summary-run",
)  # most code behind them: twice as often
FORMATS = ("table", "markdown", "csv", "json")

# ---------------------------------------------------------------- hostile values

HOSTILE_STRINGS = (
    "\x1b]0;pwned title\x07",
    "\x1b]8;;http://evil.example/\x1b\\click me\x1b]8;;\x1b\\",
    "\x1b[2J\x1b[H",
    "\x1b[31mred\x1b[0m",
    "\x1bc",
    "ok\rEVIL",
    "abc\u202edcba",
    "\u2066isolate\u2069",
    "\u200fRLM",
    "\u061cALM",
    "nul\x00byte",
    "bell\x07",
    "csi\x9b31m",
    "next\x85line",
    "del\x7f",
    "tab\there",
    '=HYPERLINK("http://evil.example","x")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)",
    "\t=1+1",
    "\r=1+1",
    "$\\frac{a}{b}$",
    "$\\undefinedmacro{x}$",
    "$x^",
    "_hidden",
    "__nolegend__",
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "a|b|c",
    "line1\nline2",
    "`code`",
    "*bold* [link](javascript:alert(1))",
    "\ufeffbom",
    "名前",
    "🙂" * 3,
    "%s%n%x",
    "{0}{name}",
    "${jndi:ldap://x}",
    "../../etc/passwd",
    "",
    " ",
    "ProfilerStep#",
    "ProfilerStep#99999999999999999999",
    "ProfilerStep#-1",
    "x" * 20_000,
)
# lone surrogates: valid JSON escapes (or invalid UTF-8 when written raw); kept apart because today one
# refuses the whole trace, which would hide every other hostile string of the case
SURROGATES = ("\ud800", "x\udfffy", "\udc80", "a\udbff")
HOSTILE_NUMBERS = (
    0,
    -1,
    1,
    -(10**9),
    2**31,
    2**53,
    2**53 + 1,
    2**62,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63),
    10**30,
    1e308,
    -1e308,
    1e-300,
    0.5,
    -0.5,
    float("nan"),
    float("inf"),
    float("-inf"),
    "12",
    "",
    None,
    True,
    [],
    {},
)
_NUMERIC_FIELDS = ("ts", "dur", "pid", "tid", "id")
_NUMERIC_ARGS = (
    "correlation",
    "External id",
    "device",
    "stream",
    "bytes",
    "Sequence number",
    "Fwd thread id",
)


# ---------------------------------------------------------------- base traces


@functools.cache
def seeds() -> tuple[tuple[str, dict], ...]:
    """(name, decoded trace) of every base trace available here; small, so a case stays fast."""
    out = [("handmade", handmade())]
    paths = sorted(SAMPLES.glob("*.json.gz")) if SAMPLES.is_dir() else []
    paths += [CORPUS / rel for rel in SMALL_CORPUS if (CORPUS / rel).is_file()]
    for path in paths:
        text = gzip.decompress(path.read_bytes())
        if len(text) < 500_000:
            out.append((path.name, json.loads(text)))
    return tuple(out)


def _events(doc) -> list:
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        return doc["traceEvents"]
    return doc if isinstance(doc, list) else []


def _pick_event(rng: random.Random, events: list, cats=None):
    pool = [e for e in events if isinstance(e, dict) and (cats is None or e.get("cat") in cats)]
    return rng.choice(pool) if pool else None


# ---------------------------------------------------------------- structure-level mutations


def _inject_string(rng, doc, events):
    """A hostile string as (part of) a name, category, annotation, thread name or metadata."""
    bad = rng.choice(SURROGATES if rng.random() < 0.015 else HOSTILE_STRINGS)
    where = rng.choice(["name"] * 6 + ["cat", "arg", "step", "meta", "thread"])
    named = (
        {"kernel", "Kernel"}
        if rng.random() < 0.5
        else {"kernel", "Kernel", "cpu_op", "Operator", "user_annotation", "gpu_memcpy", "cuda_runtime"}
    )
    ev = _pick_event(rng, events, named if where == "name" else None)
    if where == "step":
        ev = _pick_event(rng, events, {"user_annotation"})
        if ev is not None:
            ev["name"] = "ProfilerStep#" + rng.choice(["1", "2", bad])
    elif where == "meta" and isinstance(doc, dict):
        key = rng.choice(["traceName", "deviceProperties", "distributedInfo", "displayTimeUnit"])
        doc[key] = (
            {"backend": bad, "rank": 0}
            if key == "distributedInfo"
            else ([{"id": 0, "name": bad}] if key == "deviceProperties" else bad)
        )
    elif where == "thread":
        ev = _pick_event(rng, events, None)
        if ev is not None:
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": ev.get("pid"),
                    "tid": ev.get("tid"),
                    "args": {"name": bad},
                }
            )
    elif ev is not None and where in ("name", "cat"):
        old = ev.get(where) if isinstance(ev.get(where), str) else ""
        ev[where] = rng.choice([bad, old + bad, bad + old, old[: len(old) // 2] + bad + old[len(old) // 2 :]])
    elif ev is not None and isinstance(ev.get("args"), dict):
        ev["args"][rng.choice(["name", "Input type", "stream", "Call stack", bad])] = bad


def _set_number(rng, doc, events):
    ev = _pick_event(rng, events)
    if ev is None:
        return
    value = rng.choice(HOSTILE_NUMBERS)
    if rng.random() < 0.5 or not isinstance(ev.get("args"), dict):
        ev[rng.choice(_NUMERIC_FIELDS)] = value
    else:
        ev["args"][rng.choice(_NUMERIC_ARGS)] = value


def _zero_dur(rng, doc, events):
    """Every instance of one kernel (or op) name lasts 0 ns, or every kernel does, or one lasts < 0."""
    cats = (
        {"kernel", "Kernel"} if rng.random() < 0.7 else {"cpu_op", "gpu_memcpy", "Memcpy", "user_annotation"}
    )
    ev = _pick_event(rng, events, cats)
    if ev is None:
        return
    how = rng.random()
    if how < 0.6:
        for e in events:
            if isinstance(e, dict) and (
                e.get("name") == ev.get("name") or (how < 0.2 and e.get("cat") in cats)
            ):
                e["dur"] = 0
    else:
        ev["dur"] = rng.choice([-1, -1000, -(10**9), -(2**62)])


def _huge_ts(rng, doc, events):
    ev = _pick_event(rng, events, {"cpu_op", "kernel", "user_annotation", "cuda_runtime"})
    if ev is not None:
        ev["ts"] = rng.choice([2**53, 2**53 + 0.5, 2**62, 9.2e18, -(2**53), 1e17])


def _duplicate(rng, doc, events):
    """Exact duplicate events, or kernels sharing one correlation id."""
    if not events:
        return
    if rng.random() < 0.5:
        i = rng.randrange(len(events))
        events.extend(copy.deepcopy(events[i : i + rng.randint(1, 40)]))
        return
    kernels = [e for e in events if isinstance(e, dict) and e.get("cat") == "kernel"]
    if kernels and isinstance(kernels[0].get("args"), dict):
        corr = kernels[0]["args"].get("correlation")
        for e in rng.sample(kernels, min(len(kernels), rng.randint(2, 80))):
            if isinstance(e.get("args"), dict):
                e["args"]["correlation"] = corr


def _drop_key(rng, doc, events):
    ev = _pick_event(rng, events)
    if ev is None:
        return
    key = rng.choice(["cat", "ph", "ts", "dur", "name", "args", "pid", "tid"])
    if rng.random() < 0.3:
        ev[key] = rng.choice(["Z", "", "x", 7, None]) if key == "ph" else ev.pop(key, None)
    else:
        ev.pop(key, None)


def _deep(rng, doc, events):
    ev = _pick_event(rng, events)
    if ev is None:
        return
    if not isinstance(ev.get("args"), dict):
        ev["args"] = {}
    # a marker, nested only when serialised: deepcopy and json.dumps would recurse too deep
    ev["args"]["deep"] = f"@@deep-{rng.choice([30, 200, 999, 1001, 3000, 100_000])}-{rng.choice('lo')}@@"


def _ranks(rng, doc, events):
    if isinstance(doc, dict):
        doc["distributedInfo"] = {
            "backend": "nccl",
            "rank": rng.choice([0, 3, 10**9, -1, 2**63, "1", None]),
            "world_size": rng.choice([1, 8, 10**9, 0, -5, 2**63, "x"]),
        }


def _drop_events(rng, doc, events):
    if events:
        keep = rng.random()
        events[:] = [e for e in events if rng.random() < keep]


def _reorder(rng, doc, events):
    if rng.random() < 0.5:
        rng.shuffle(events)
    else:
        events.reverse()


def _long_name(rng, doc, events):
    ev = _pick_event(rng, events, {"kernel", "cpu_op", "user_annotation"})
    if ev is not None:
        ev["name"] = rng.choice(["void k<", "aten::", "sm90_xmma_gemm_", "("]) * rng.choice(
            [1000, 10_000, 50_000]
        )


STRUCTURE_MUTATIONS = (
    _inject_string,
    _inject_string,
    _inject_string,
    _set_number,
    _set_number,
    _zero_dur,
    _huge_ts,
    _duplicate,
    _drop_key,
    _deep,
    _ranks,
    _drop_events,
    _reorder,
    _long_name,
)


# ---------------------------------------------------------------- byte-level mutations and files


def _serialise(rng, doc) -> bytes:
    """JSON text; non-ASCII either escaped (\\ud800 for a lone surrogate) or raw (invalid UTF-8 for one)."""
    if rng.random() < 0.5:
        raw = json.dumps(doc, allow_nan=True).encode()
    else:
        raw = json.dumps(doc, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return _DEEP.sub(_nest, raw) if b"@@deep-" in raw else raw


_DEEP = re.compile(rb'"@@deep-(\d+)-([lo])@@"')


def _nest(match) -> bytes:
    depth = int(match.group(1))
    if match.group(2) == b"l":
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def _damage_bytes(rng, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not buf:
            break
        at = rng.randrange(len(buf))
        kind = rng.choice(["flip", "delete", "insert", "set", "cut"])
        if kind == "flip":
            buf[at] ^= 1 << rng.randrange(8)
        elif kind == "delete":
            del buf[at : at + rng.randint(1, 64)]
        elif kind == "insert":
            buf[at:at] = rng.choice(
                [b"\x00", b"\xff", b"\xed\xa0\x80", b'"', b"}", b"]", b"\x1b[2J", b",", b"9" * 40]
            )
        elif kind == "set":
            buf[at] = rng.choice(b'{}[]",:\\\x00\xff\xc3 0-eE.')
        else:
            del buf[at:]
    return bytes(buf)


@dataclass
class Input:
    """One trace file of a case: the (mutated) document, then how it becomes bytes."""

    name: str  # the base trace
    doc: object
    byte_seed: int | None  # byte-level damage after serialising, if any
    gz: bool
    text_seed: int

    def data(self) -> bytes:
        raw = _serialise(random.Random(self.text_seed), self.doc)
        if self.byte_seed is not None:
            raw = _damage_bytes(random.Random(self.byte_seed), raw)
        return gzip.compress(raw, compresslevel=1) if self.gz else raw

    stem_suffix: str = ""  # hostile text in the file name itself: it is shown as a label and in messages

    def filename(self, stem: str) -> str:
        stem += self.stem_suffix
        return f"{stem}.json.gz" if self.gz else f"{stem}.json"


@functools.cache
def gpu_seeds() -> tuple[tuple[str, dict], ...]:
    """The base traces with GPU kernels: their names reach every command's output."""
    return tuple(
        (n, d)
        for n, d in seeds()
        if any(isinstance(e, dict) and e.get("cat") in ("kernel", "Kernel") for e in _events(d))
    )


def make_input(rng: random.Random, hostile: bool = False) -> Input:
    gpu = gpu_seeds() and (hostile or rng.random() < 0.75)  # CPU-only traces exercise less
    name, doc = rng.choice(gpu_seeds() if gpu else seeds())
    doc = copy.deepcopy(doc)
    events = _events(doc)
    muts = [_inject_string] * rng.randint(3, 8) if hostile else []
    # hostile inputs stay loadable and keep their kernels, so their names reach the output
    pool = (
        [m for m in STRUCTURE_MUTATIONS if m not in (_deep, _drop_events, _long_name)]
        if hostile
        else STRUCTURE_MUTATIONS
    )
    muts += [
        rng.choice(pool) for _ in range(rng.choice([0, 0, 1, 1, 2, 3] if hostile else [0, 1, 1, 2, 3, 5]))
    ]
    for mutate in muts:
        mutate(rng, doc, events)
    byte_seed = rng.randrange(2**32) if (not hostile and rng.random() < 0.2) else None
    suffix = rng.choice(FILE_NAME_TEXT) if hostile and rng.random() < 0.25 else ""
    return Input(name, doc, byte_seed, rng.random() < 0.3, rng.randrange(2**32), suffix)


# what a file name can hold (no "/" nor NUL): shown as the report's label and in every message
FILE_NAME_TEXT = ("\x1b]0;title\x07", "\x1b[2J", "\rEVIL", "\u202egpj", "\nnext", "=1+1", "<script>", "|")
# bytes that are not UTF-8 in a file name, as Python hands them over (os.fsdecode: b"\xff" -> "\udcff")
NON_UTF8_NAMES = ("\udcff", "-\udce9t\udce9", "\udcc3(", "\udced\udca0\udc80")


# ---------------------------------------------------------------- commands


@dataclass
class Case:
    seed: int
    command: str
    args: list  # with "{a}", "{b}" for the input paths (absolute) and output names relative to the cwd
    inputs: dict  # "a"/"b" -> Input
    output: str | None  # the one file the command is asked to write, relative to its working folder
    env: dict = field(default_factory=dict)
    hostile: bool = False
    max_cpu: float = CPU_SECONDS
    # issue 38: what the output option points at ("input", "symlink", "hardlink": an input, refused;
    # "fifo", "device": written in place), made in the working folder before the run; None: a new file
    target: str | None = None
    signal: tuple | None = None  # (signal name, seconds after the start) sent to the case

    def argv(self, paths: dict) -> list:
        return [str(paths.get(a[1], a)) if a in ("{a}", "{b}") else a for a in self.args]

    def describe(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in sorted(self.env.items()))
        extra = f" [{self.target} target]" if self.target else ""
        extra += f" [{self.signal[0]} after {self.signal[1]} s]" if self.signal else ""
        return f"{env} traceview {' '.join(self.args)}{extra}".strip()


_BASE = {
    "summary": ["summary", "{a}"],
    "kernels": ["kernels", "{a}"],
    "kernels-ops": ["kernels", "{a}", "--ops"],
    "kernels-unclassified": ["kernels", "{a}", "--unclassified"],
    "diff": ["diff", "{a}", "{b}"],
    "compare": ["compare", "{a}", "{b}"],
    "timeline": ["timeline", "{a}"],
    "ranks": ["ranks", "{a}", "{b}"],
    "summary-run": ["summary", "--run", "{a}", "{b}"],
}
_SELECTING = ("summary", "kernels", "kernels-ops", "kernels-unclassified", "diff", "compare", "timeline")


def _command(rng: random.Random, command: str, fmt: str, hostile: bool) -> tuple[list, str | None]:
    """(arguments, the file the command is asked to write or None)."""
    if command == "annotate":
        out = rng.choice(["out.json", "out.json.gz", "annotated.trace"])
        return ["annotate", "{a}", "-o", out] + (["--max-size", "0"] if rng.random() < 0.03 else []), out
    args, out = _BASE[command] + ["--format", fmt], None
    if command == "timeline" or (
        command in ("kernels", "kernels-ops", "diff", "compare") and rng.random() < 0.12
    ):
        out = rng.choice(["plot.svg", "plot.svg", "plot.png", "plot.html"])
        args += ["--plot", out]
    if command in ("summary", "diff", "summary-run") and rng.random() < 0.3:
        args += ["--top", str(rng.choice([0, 1, 3, 1000]))]
    if command == "compare" and rng.random() < 0.2:
        args += ["--baseline", "{b}"]
    if command in _SELECTING:
        args += _selection(rng, hostile)
    elif rng.random() < 0.05:
        args += ["--max-size", rng.choice(["-1", "0", "1"])]
    return args, out


def _selection(rng: random.Random, hostile: bool) -> list:
    args = []
    if rng.random() < (0.05 if hostile else 0.25):
        args += ["--step", str(rng.choice([0, 1, 2, 3, 5, 10, -1, 99999999999]))]
    if rng.random() < 0.08:  # odd option values: a usage error (2) or a clear refusal (1), never 3
        args += rng.choice(
            [
                ["--max-size", rng.choice(["-1", "0", "1"])],
                ["--device", rng.choice(["-1", "7"])],
                ["--stream", rng.choice(["-1", str(2**40)])],
                ["--kind", rng.choice(["kernel", "memcpy"])],
            ]
        )
    if rng.random() < (0.2 if hostile else 0.05):  # a missing annotation: the error names it
        args += ["--annotation", rng.choice(["nope", "ProfilerStep#1", "## forward ##"])]
    return args


def make_case(seed: int, hostile: bool | None = None) -> Case:
    """The case of ``seed``: hostile=True injects hostile strings (for the injection oracle)."""
    rng = random.Random(seed)
    hostile = rng.random() < 0.3 if hostile is None else hostile
    command = rng.choice(COMMANDS)
    args, out = _command(rng, command, rng.choice(FORMATS), hostile)
    inputs = {"a": make_input(rng, hostile)}
    if "{b}" in args:
        inputs["b"] = make_input(rng, hostile) if rng.random() < 0.7 else inputs["a"]
    if rng.random() < 0.2:
        args.append("--salvage")
    env = {"COLUMNS": str(rng.choice([40, 100, 250]))}
    if rng.random() < 0.5:
        args.append("--no-cache")
    else:
        env["TRACEVIEW_CACHE_MIN_MB"] = "0"  # small files are cached too: exercises the cache
    case = Case(seed, command, args, inputs, out, env, hostile)
    return _issue38(rng, case)


# ---------------------------------------------------------------- issue 38: targets, signals, names

#: every command with an output option: (arguments with "{out}" for the target, a suffix it accepts)
WRITERS = {
    "summary-o": (["summary", "{a}", "-o", "{out}"], ".json"),
    "kernels-o": (["kernels", "{a}", "-o", "{out}"], ".json"),
    "kernels-plot": (["kernels", "{a}", "--plot", "{out}"], ".svg"),
    "exposed-o": (["exposed", "{a}", "-o", "{out}"], ".json"),
    "memory-o": (["memory", "{a}", "-o", "{out}"], ".json"),
    "ranks-o": (["ranks", "{a}", "{b}", "-o", "{out}"], ".json"),
    "compare-o": (["compare", "{a}", "{b}", "-o", "{out}"], ".json"),
    "compare-plot": (["compare", "{a}", "{b}", "--plot", "{out}"], ".svg"),
    "diff-o": (["diff", "{a}", "{b}", "-o", "{out}"], ".json"),
    "diff-plot": (["diff", "{a}", "{b}", "--plot", "{out}"], ".png"),
    "timeline-o": (["timeline", "{a}", "-o", "{out}"], ".json"),
    "timeline-plot": (["timeline", "{a}", "--plot", "{out}"], ".svg"),
    "report-o": (["report", "{a}", "{b}", "-o", "{out}"], ".html"),
    "check-o": (["check", "{a}", "-o", "{out}"], ".json"),
    "check-junit": (["check", "{a}", "--baseline", "{b}", "--junit", "{out}"], ".xml"),
    "annotate-o": (["annotate", "{a}", "-o", "{out}"], ".json"),
}
TARGETS = ("input", "input", "symlink", "hardlink", "fifo", "device")
SIGNALS = ("SIGTERM", "SIGHUP", "SIGINT")


def _issue38(rng: random.Random, case: Case) -> Case:
    """Some cases become a writer pointed at a hostile target, some get a signal, some a file name
    that is not UTF-8. Drawn after everything else: a seed keeps the rest of its case."""
    draw, sig, name = rng.random(), rng.random(), rng.random()
    if draw < 0.15:
        case = _targeted(rng, case)
    if sig < 0.08:
        case.signal = (rng.choice(SIGNALS), round(rng.uniform(0.0, 2.5), 2))
    if name < 0.06:
        key = rng.choice(sorted(case.inputs))
        inp = case.inputs[key]
        case.inputs[key] = Input(
            inp.name, inp.doc, inp.byte_seed, inp.gz, inp.text_seed, rng.choice(NON_UTF8_NAMES)
        )
    return case


def _targeted(rng: random.Random, case: Case) -> Case:
    """``case`` as one of WRITERS with its output pointed at ``target``: an input (by its name, a
    symbolic link or a hard link), a FIFO or a character device in the working folder."""
    command = rng.choice(sorted(WRITERS))
    template, suffix = WRITERS[command]
    target = rng.choice(TARGETS)
    if target == "input":
        out = rng.choice(["{a}", "{b}"] if "{b}" in template else ["{a}"])
    else:
        out = f"target{suffix}"
    args = [out if a == "{out}" else a for a in template]
    args += [a for a in case.args if a in ("--no-cache", "--salvage")]
    inputs = dict(case.inputs)
    if "{b}" in args and "b" not in inputs:
        inputs["b"] = inputs["a"]
    if (
        out in ("{a}", "{b}")
        and "-o" in args
        and inputs[out[1]].gz
        and command not in ("report-o", "annotate-o")
    ):
        args += [
            "--format",
            rng.choice(FORMATS),
        ]  # a gzip input's name names no format: the guard must refuse it
    return Case(case.seed, command, args, inputs, None, case.env, case.hostile, target=target)


def _make_target(case: Case, cwd: Path, paths: dict) -> Path | None:
    """The link, FIFO or device node the case's output option points at, in its working folder;
    the FIFO's path when one was made (a device node needs root: a FIFO in its place otherwise)."""
    if case.target in (None, "input"):
        return None
    where = cwd / next(a for a in case.args if a.startswith("target."))
    if case.target == "symlink":
        where.symlink_to(paths["a"])
    elif case.target == "hardlink":
        os.link(paths["a"], where)
    elif case.target == "fifo" or not _mknod_null(where):
        os.mkfifo(where)
        return where
    return None


def _mknod_null(where: Path) -> bool:
    """A private /dev/null (character device 1, 3) at ``where``; False where only root may make one."""
    try:
        os.mknod(where, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except OSError:
        return False
    return True


class _Drain:
    """Reads a FIFO target while the case runs (never blocking: opened with O_NONBLOCK, so a case
    that never opens it costs nothing), as a reader in a pipeline would."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.done = False
        self.got = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            finished = self.done
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                chunk = None
            if chunk:
                self.got += len(chunk)
                continue
            if finished:
                break
            time.sleep(0.005)

    def close(self) -> int:
        self.done = True
        self.thread.join(10)
        os.close(self.fd)
        return self.got


# ---------------------------------------------------------------- running one case


@dataclass
class Result:
    code: int  # exit status; -N for signal N; None for a hang (killed at the time limit)
    stdout: bytes
    stderr: bytes
    seconds: float
    maxrss: int  # bytes
    problems: list = field(default_factory=list)
    cpu: float = 0.0  # the child's user + system seconds
    cwd_before: dict = field(default_factory=dict)  # the working folder before the run (a target made there)


def prepare() -> None:
    """Import what commands use before forking, so each forked case does not pay for it."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot

    import traceview.cli  # noqa: F401
    from traceview import analyses, render  # noqa: F401

    for mod in (
        "trace.summary",
        "trace.kernels",
        "variants.diff",
        "variants.compare",
        "trace.timeline",
        "trace.annotate",
        "measure.efficiency",
        "trace.breakdown",
    ):
        __import__(f"traceview.analyses.{mod}")
    for mod in ("text", "markdown", "csvout", "jsonout", "plot", "annotated"):
        __import__(f"traceview.render.{mod}")
    with contextlib.suppress(ImportError):
        import pyarrow.feather  # noqa: F401


def _address_space() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _child(argv: list, cwd: Path, env: dict, out: Path, err: Path, limit: int) -> None:
    """In the forked child: become ``traceview ARGV`` as a fresh interpreter would run it; never returns."""
    code = 70
    try:
        os.setpgid(0, 0)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        for fd, path in ((1, out), (2, err)):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        enc, out_errors = sys.__stdout__.encoding if sys.__stdout__ else "utf-8", "surrogateescape"
        if sys.__stdout__ is not None and sys.__stdout__.errors:
            out_errors = sys.__stdout__.errors
        # the child's own stdio for the rest of its life: nothing to close
        sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), encoding=enc, errors=out_errors)  # noqa: SIM115
        sys.stderr = io.TextIOWrapper(
            open(2, "wb", closefd=False),  # noqa: SIM115 encoding=enc, errors="backslashreplace", line_buffering=True
        )
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        _fresh_warnings()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for default in (signal.SIGALRM, signal.SIGTERM, signal.SIGHUP):
            signal.signal(default, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        code = _run_main(argv)
    except KeyboardInterrupt:  # SIGINT before traceview ran (a case sent it 0 s in): as an interpreter
        code = 128 + signal.SIGINT  # interrupted while starting ends, not the harness's own failure (70)
    finally:
        os._exit(code)


def _fresh_warnings() -> None:
    """The warning filters of a fresh interpreter: pytest records warnings instead of printing them,
    and a warning printed to stderr (matplotlib's missing glyph, say) is output like any other."""
    warnings.resetwarnings()
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.filterwarnings("ignore", category=category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
    warnings.showwarning = getattr(warnings, "_showwarning_orig", warnings.showwarning)
    warnings.formatwarning = getattr(warnings, "_formatwarning_orig", warnings.formatwarning)
    if hasattr(
        warnings, "_showwarnmsg_impl"
    ):  # where catch_warnings(record=True) appends instead of printing
        warnings._showwarnmsg_impl = lambda msg: sys.stderr.write(warnings._formatwarnmsg_impl(msg))


def _run_main(argv: list) -> int:
    """What ``python -m traceview`` does with an exit or an uncaught exception."""
    from traceview.cli import main

    try:
        main.main(args=argv, prog_name="traceview", standalone_mode=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        traceback.print_exc(file=sys.__stderr__)
        code = 120
    return code


def _wait(pid: int, seconds: float, sig=None):
    """(status, rusage) of ``pid``, or (None, rusage) after killing its group at the time limit;
    ``sig`` (signal, seconds): sent to ``pid`` alone that long after the start, as a user or a
    service manager would send it."""
    deadline = time.monotonic() + seconds
    if sig is not None:
        done, status, usage = _wait_until(pid, time.monotonic() + sig[1])
        if done:
            return status, usage
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig[0])
    pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    try:
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                return status, usage
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if pidfd is not None:
                select.select([pidfd], [], [], left)
            else:
                time.sleep(min(0.01, left))
    finally:
        if pidfd is not None:
            os.close(pidfd)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    _, _, usage = os.wait4(pid, 0)
    return None, usage


def _read(path: Path) -> bytes:
    """A case's stdout or stderr; empty when a signal ended it before it made the file (a signal 0 s in)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _wait_until(pid: int, until: float):
    """(True, status, rusage) when ``pid`` ended before the monotonic time ``until``, else
    (False, 0, None)."""
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return True, status, usage
        if time.monotonic() >= until:
            return False, 0, None
        time.sleep(0.005)


def run_forked(argv: list, cwd: Path, env: dict, box: Path, seconds: float, sig=None) -> Result:
    """``sig``: (signal number, seconds) to send the case that long after its start, if still running."""
    out, err = box / "stdout", box / "stderr"
    limit = _address_space() + MEMORY_HEADROOM
    sys.stdout.flush()
    sys.stderr.flush()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(argv, cwd, env, out, err, limit)
    status, usage = _wait(pid, seconds, sig)
    took = time.monotonic() - start
    code = None if status is None else (os.waitstatus_to_exitcode(status))
    return Result(
        code,
        _read(out),
        _read(err),
        took,
        usage.ru_maxrss * 1024,
        cpu=usage.ru_utime + usage.ru_stime,
    )


class ForkServer:
    """A clean helper process that imported traceview once and forks one child per case.

    Forking the test process itself would copy whatever it holds: threads left by earlier tests
    (a forked child of a threaded process can deadlock on a lock some other thread held), and
    pytest's warning capture. The server is a fresh interpreter that only ever runs cases."""

    def __init__(self):
        self.proc = None

    def run(self, argv: list, cwd: Path, env: dict, box: Path, seconds: float, sig=None) -> Result:
        request = {"argv": argv, "cwd": str(cwd), "env": env, "box": str(box), "seconds": seconds, "sig": sig}
        for attempt in (1, 2):  # a server that died (it should not) is started again once
            try:
                reply = self._ask(request)
                break
            except (OSError, ValueError):
                self.close()
                if attempt == 2:
                    raise
        return Result(
            reply["code"],
            _read(box / "stdout"),
            _read(box / "stderr"),
            reply["seconds"],
            reply["maxrss"],
            cpu=reply["cpu"],
        )

    def _ask(self, request: dict) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            env = dict(
                os.environ,
                PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
                OPENBLAS_NUM_THREADS="1",
                OMP_NUM_THREADS="1",
            )  # no BLAS thread pool to fork
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "import fuzzcli; fuzzcli.serve()"],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise OSError("the fork server exited")
        return json.loads(line)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def serve() -> None:
    """The fork server's loop: one JSON request a line on stdin, one JSON reply a line on stdout."""
    prepare()
    for line in sys.stdin:
        req = json.loads(line)
        box = Path(req["box"])
        r = run_forked(req["argv"], Path(req["cwd"]), req["env"], box, req["seconds"], req.get("sig"))
        reply = {"code": r.code, "seconds": r.seconds, "maxrss": r.maxrss, "cpu": r.cpu}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


_SERVER = ForkServer()
atexit.register(_SERVER.close)


def run_subprocess(argv: list, cwd: Path, env: dict, box: Path, seconds: float, sig=None) -> Result:
    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (SUBPROCESS_MEMORY, SUBPROCESS_MEMORY))

    start, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(
        [sys.executable, "-m", "traceview", *argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=limits,
        start_new_session=True,
    )
    try:
        if sig is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(sig[1])
            if proc.poll() is None:
                proc.send_signal(sig[0])
        out, err = proc.communicate(timeout=seconds)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime
    return Result(code, out, err, time.monotonic() - start, usage.ru_maxrss * 1024, cpu=cpu)


def _tree(folder: Path) -> dict:
    """Name -> what it is: a regular file's hash, "dir", "symlink->TARGET", "fifo", "chr DEV" (never read)."""
    return {str(p.relative_to(folder)): _what(p) for p in sorted(folder.rglob("*"))}


def _what(p: Path) -> str:
    st = os.lstat(p)
    if stat.S_ISLNK(st.st_mode):
        return f"symlink->{os.readlink(p)}"
    if stat.S_ISREG(st.st_mode):
        return hashlib.sha256(p.read_bytes()).hexdigest()
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if stat.S_ISFIFO(st.st_mode):
        return "fifo"
    return f"chr {st.st_rdev}" if stat.S_ISCHR(st.st_mode) else f"mode {st.st_mode:o}"


def _child_env(box: Path, extra: dict) -> dict:
    keep = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "MPLCONFIGDIR", "PYTHONPATH", "VIRTUAL_ENV", "TMPDIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    # matplotlib keeps a font cache in its config folder (a fresh process builds it in seconds):
    # one folder for every case, outside the box, so that it is neither rebuilt nor taken for traceview's
    env.setdefault("MPLCONFIGDIR", str(Path(tempfile.gettempdir()) / "traceview-fuzz-mplconfig"))
    env.update(
        {
            "HOME": str(box / "home"),
            "TRACEVIEW_CACHE_DIR": str(box / "cache"),
            "TRACEVIEW_WORKERS": "1",
            "XDG_CACHE_HOME": str(box / "home" / ".cache"),
            "XDG_CONFIG_HOME": str(box / "home" / ".config"),
        }
    )
    env.update(extra)
    return env


def case_files(case: Case) -> dict:
    """key ("a", "b") -> (file name, bytes) of the case's inputs."""
    return {key: (inp.filename(key), inp.data()) for key, inp in case.inputs.items()}


def run_case(
    case: Case, workdir: Path, *, mode: str = "fork", seconds: float = CASE_SECONDS, files: dict | None = None
) -> Result:
    """Run ``case`` in a fresh box under ``workdir``; ``files`` (key -> (name, bytes)) replaces its inputs."""
    box = Path(tempfile.mkdtemp(prefix="case-", dir=workdir))
    try:
        for sub in ("in", "cwd", "cache", "home"):
            (box / sub).mkdir()
        paths = {}
        for key, (name, data) in (files if files is not None else case_files(case)).items():
            paths[key] = box / "in" / name
            paths[key].write_bytes(data)
        before = _tree(box / "in")
        fifo = _make_target(case, box / "cwd", paths)
        made_before = _tree(box / "cwd")
        drain = _Drain(fifo) if fifo is not None else None
        env = _child_env(box, case.env)
        run = {"fork": _SERVER.run, "inline": run_forked, "subprocess": run_subprocess}[mode]
        sig = (getattr(signal, case.signal[0]), case.signal[1]) if case.signal else None
        try:
            result = run(case.argv(paths), box / "cwd", env, box, seconds, sig)
        finally:
            if drain is not None:
                drain.close()
        result.cwd_before = made_before
        # the box's random name would make every output unique: blur it (plain ASCII, escapes unaffected)
        result.stdout = result.stdout.replace(str(box).encode(), b"BOX")
        result.stderr = result.stderr.replace(str(box).encode(), b"BOX")
        result.problems = crash_problems(case, result, box, before) + injection_problems(case, result)
        return result
    finally:
        shutil.rmtree(box, ignore_errors=True)


# ---------------------------------------------------------------- the oracle


def crash_problems(case: Case, result: Result, box: Path, before: dict) -> list:
    """(kind, detail) for everything wrong apart from injection; [] when the case passed."""
    problems = []
    both = result.stdout + b"\n" + result.stderr
    if result.code is None:
        problems.append(
            ("hang", f"no exit within the time limit ({result.seconds:.0f} s; {result.cpu:.1f} s of CPU)")
        )
    if result.cpu > case.max_cpu:
        problems.append(
            ("slow", f"{result.cpu:.1f} s of CPU, more than {case.max_cpu:.0f} s (unbounded work?)")
        )
    elif result.code == 3:
        problems.append(("exit3", last_line(result.stderr)))
    elif result.code not in (0, 1, 2, *_signalled(case)):
        problems.append(("bad-exit", f"exit status {result.code}: {last_line(result.stderr)}"))
    elif case.target in ("input", "symlink", "hardlink") and result.code not in (2, *_signalled(case)):
        problems.append(
            ("not-refused", f"exit {result.code} writing onto an input: {last_line(result.stderr)}")
        )
    if not stat.S_ISCHR(os.stat("/dev/null").st_mode):
        problems.append(("target-replaced", "/dev/null is no longer a character device"))
    if b"Traceback (most recent call last)" in both:
        problems.append(("traceback", last_line(result.stderr)))
    if b"MemoryError" in both:
        problems.append(("memory", last_line(result.stderr)))
    if result.code is not None:
        problems += _file_problems(case, result, box, before)
    return problems


def _signalled(case: Case) -> tuple:
    """Exit statuses a case sent a signal may end with: the signal's own (-N), or 130 for Ctrl-C."""
    if not case.signal:
        return ()
    number = int(getattr(signal, case.signal[0]))
    return (-number, 128 + number) if number != signal.SIGINT else (130, -number)


def _file_problems(case: Case, result: Result, box: Path, before: dict) -> list:
    problems = []
    now = _tree(box / "cwd")
    made = set(now) - set(result.cwd_before)
    wanted = {case.output} if case.output and result.code == 0 else set()
    if case.output and case.signal and result.code in _signalled(case):
        made.discard(case.output)  # written whole before the signal came (a plot before the table): allowed
    if made - wanted:
        problems.append(
            ("stray-file", f"wrote {sorted(made - wanted)} (asked for {case.output}, exit {result.code})")
        )
    replaced = [k for k, what in result.cwd_before.items() if now.get(k) != what]
    if replaced:
        problems.append(
            (
                "target-replaced",
                f"{replaced[0]} was {result.cwd_before[replaced[0]][:20]}, "
                f"now {now.get(replaced[0], 'gone')[:20]}",
            )
        )
    if case.command == "annotate" and result.code == 0 and case.output in now:
        problems += _annotated_problems(box / "cwd" / case.output)
    if wanted - made:
        problems.append(("missing-output", f"exit 0 but {case.output} was not written"))
    if _tree(box / "in") != before:
        problems.append(("input-changed", "the input folder changed"))
    if any(_tree(box / "home")):
        problems.append(("stray-file", f"wrote into HOME: {sorted(_tree(box / 'home'))[:5]}"))
    leftovers = [p for p in _tree(box / "cache") if re.search(r"\.tmp|~$|\.part$", p.rsplit("/", 1)[-1])]
    if leftovers:
        problems.append(("stray-file", f"temporary files left in the cache: {leftovers[:5]}"))
    return problems


def _annotated_problems(path: Path) -> list:
    """An annotated trace must be valid UTF-8 JSON for every other reader (issue 38 item 8)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        json.loads(data.decode("utf-8"))
    except RecursionError:  # valid as far as Python's parser goes: the fuzz nests 100,000 deep
        return []
    except (UnicodeDecodeError, ValueError) as exc:
        return [("invalid-output", f"the annotated trace is not valid UTF-8 JSON: {str(exc)[:120]}")]
    return []


# C0 controls but tab and newline, DEL, C1 controls, and the bidi controls
# (embedding, override, isolate, marks)
LEAK = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NUMBER = re.compile(r"^-?(\d[\d,]*\.?\d*(e[-+]?\d+)?|inf|nan|)%?$", re.IGNORECASE)


def injection_problems(case: Case, result: Result) -> list:
    """Terminal/document injection (issue 22 item 2): raw control or bidi characters on stdout or
    stderr, CSV cells a spreadsheet would run as formulas, raw HTML in markdown."""
    problems = []
    for stream, data in (("stdout", result.stdout), ("stderr", result.stderr)):
        text = data.decode("utf-8", "surrogateescape")
        found = LEAK.search(text)
        if found:
            problems.append(
                (
                    "escape-leak",
                    f"{stream} has raw {found.group()!r} near "
                    f"{text[max(found.start() - 30, 0) : found.end() + 30]!r}",
                )
            )
    fmt = case.args[case.args.index("--format") + 1] if "--format" in case.args else "table"
    text = result.stdout.decode("utf-8", "replace")
    if fmt == "csv":
        csv.field_size_limit(1 << 30)  # names may be long; the reader's default stops at 128 KiB
        try:
            cells = [c for row in csv.reader(io.StringIO(text, newline="")) for c in row]
        except csv.Error as exc:
            cells, problems = [], [*problems, ("formula-cell", f"CSV output does not parse: {exc}")]
        bad = [
            c
            for c in cells
            if c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and not _NUMBER.match(c))
        ]
        if bad:
            problems.append(("formula-cell", f"CSV cell starts a formula: {bad[0][:60]!r}"))
    if fmt == "markdown" and re.search(r"<(script|img)\b", text, re.IGNORECASE):
        problems.append(("raw-html", "markdown output has raw <script> or <img>"))
    return problems


def last_line(data: bytes) -> str:
    lines = [ln for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


CRASH_KINDS = (
    "traceback",
    "hang",
    "slow",
    "exit3",
    "bad-exit",
    "memory",
    "stray-file",
    "missing-output",
    "input-changed",
    "not-refused",
    "target-replaced",
    "invalid-output",
)
INJECTION_KINDS = ("escape-leak", "formula-cell", "raw-html")


def signature(case: Case, kind: str, detail: str) -> str:
    """What makes two failures 'the same': kind, command and the message with numbers and paths blurred."""
    msg = re.sub(r"/\S+", "PATH", detail)
    msg = re.sub(r"\d+", "N", msg)
    msg = re.sub(r"'[^']{40,}'", "'…'", msg)[:160]
    return f"{kind} | {case.command} | {msg}"


# ---------------------------------------------------------------- saved cases (tests/fuzz_cases)

CASES_DIR = HERE / "fuzz_cases"


def load_saved(folder: Path) -> tuple[Case, dict]:
    """A saved case: ``case.json`` (note, args, output, env) beside its inputs ``a.*`` and ``b.*``."""
    meta = json.loads((folder / "case.json").read_text(encoding="utf-8"))
    files, names = {}, meta.get("names", {})  # names: a file name with hostile text, not kept as such in git
    for path in sorted(folder.iterdir()):
        key = path.name.split(".", 1)[0]
        if key in ("a", "b") and path.is_file():
            files[key] = (names.get(key, path.name), path.read_bytes())
    for key, (generator, params) in meta.get("generate", {}).items():  # inputs too large to keep as files
        files[key] = (names.get(key, f"{key}.json"), GENERATORS[generator](**params))
    case = Case(
        meta.get("seed", 0),
        meta["command"],
        meta["args"],
        {},
        meta.get("output"),
        meta.get("env", {}),
        bool(meta.get("hostile")),
        float(meta.get("max_cpu_seconds", CPU_SECONDS)),
        meta.get("target"),
        tuple(meta["signal"]) if meta.get("signal") else None,
    )
    return case, files


def long_names(op_chars: int, kernel_chars: int) -> bytes:
    """The hand-made trace with one op name and one kernel name of about these many characters."""
    doc = handmade()
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "cpu_op":
            ev["name"] = ("aten::" * (op_chars // 6 + 1))[:op_chars]
        elif ev.get("cat") == "kernel":
            ev["name"] = ("void k<" * (kernel_chars // 7 + 1))[:kernel_chars]
    return json.dumps(doc).encode()


#: generators a saved case may name in ``case.json`` ("generate": {"a": ["long_names", {...}]})
GENERATORS = {"long_names": long_names}


def save_case(folder: Path, case: Case, files: dict, note: str, **extra) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    names = {}
    for key, (name, data) in files.items():
        plain = key + (".json.gz" if name.endswith(".gz") else ".json")
        if name != plain:
            names[key] = name
        (folder / plain).write_bytes(data)
    meta = {
        "note": note,
        "command": case.command,
        "args": case.args,
        "output": case.output,
        "env": case.env,
        "seed": case.seed,
        "hostile": case.hostile,
        **({"target": case.target} if case.target else {}),
        **({"signal": list(case.signal)} if case.signal else {}),
        **({"names": names} if names else {}),
        **extra,
    }
    (folder / "case.json").write_text(json.dumps(meta, indent=1, ensure_ascii=True) + "\n", encoding="utf-8")
