"""A longer CLI fuzz campaign (issue 22): the cases of ``tests/test_fuzz_cli.py`` for N minutes.

    nice -n 10 python benchmarks/fuzz_campaign.py --minutes 30 --out /tmp/fuzz-out
    python benchmarks/fuzz_campaign.py --replay 123456 [--hostile]   # one case, shown in full

One case at a time (the machine has two cores; each case is a forked child of this process,
see ``tests/fuzzcli.py``). Every failing input is saved under ``--out`` (one folder per failure:
the inputs ``a.*``/``b.*``, ``case.json`` with the command, and ``result.txt`` with the exit
status, the problems and the ends of stdout/stderr), after shrinking its events while the same
failure remains (cheap: a few dozen reruns at most; skipped for byte-damaged inputs and hangs).
Up to ``--keep`` failures per distinct failure (kind, command, message with numbers and paths
blurred) are saved; all are counted. A saved folder can be copied to ``tests/fuzz_cases/`` as
it is: ``test_fuzz_cli.py`` replays every folder there.

At the end: cases run, and how many had a traceback, a hang (past ``--case-seconds`` of wall
time), too much CPU (past 15 s: unbounded work, whatever the machine's load), exit 3, another bad exit status,
a MemoryError, an escape-sequence leak, a formula cell, raw HTML, a stray file, a missing
output, a changed input, an output onto an input not refused, a FIFO, device or link target
replaced, an annotated trace that is not valid UTF-8 JSON (issue 38); then each distinct failure
with its count and an example folder.
Exit status 0 when no case failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fuzzcli as F

ORDER = (
    "traceback",
    "hang",
    "slow",
    "exit3",
    "bad-exit",
    "memory",
    "escape-leak",
    "formula-cell",
    "raw-html",
    "stray-file",
    "missing-output",
    "input-changed",
    "not-refused",
    "target-replaced",
    "invalid-output",
)
LABELS = {
    "traceback": "tracebacks",
    "hang": "hangs",
    "slow": "too much CPU",
    "exit3": "exit 3",
    "bad-exit": "other bad exit status",
    "memory": "MemoryError",
    "escape-leak": "escape leaks",
    "formula-cell": "formula cells",
    "raw-html": "raw HTML in markdown",
    "stray-file": "stray files",
    "missing-output": "missing outputs",
    "input-changed": "inputs changed",
    "not-refused": "onto an input, not refused",
    "target-replaced": "targets replaced",
    "invalid-output": "annotate: invalid JSON",
}


def _still_fails(case, workdir, sig, seconds) -> bool:
    result = F.run_case(case, workdir, seconds=seconds)
    return any(F.signature(case, k, d) == sig for k, d in result.problems)


def minimise(case, workdir: Path, sig: str, *, budget_s: float = 60, seconds: float = 10):
    """The case with as few events as still give failure ``sig`` (ddmin on each input's events)."""
    if any(
        inp.byte_seed is not None or not isinstance(F._events(inp.doc), list) for inp in case.inputs.values()
    ):
        return case
    deadline = time.monotonic() + budget_s
    for key in list(case.inputs):
        events = list(F._events(case.inputs[key].doc))
        chunks = 2
        while events and chunks <= len(events) and time.monotonic() < deadline:
            size = max(1, len(events) // chunks)
            for start in range(0, len(events), size):
                trial = events[:start] + events[start + size :]
                candidate = _with_events(case, key, trial)
                if time.monotonic() < deadline and _still_fails(candidate, workdir, sig, seconds):
                    events, case = trial, candidate
                    chunks = max(chunks - 1, 2)
                    break
            else:
                if size == 1:
                    break
                chunks = min(chunks * 2, len(events))
    return case


def _with_events(case, key, events):
    inp = case.inputs[key]
    doc = dict(inp.doc, traceEvents=events) if isinstance(inp.doc, dict) else events
    inputs = dict(case.inputs, **{key: dataclasses.replace(inp, doc=doc)})
    return dataclasses.replace(case, inputs=inputs)


def save(out: Path, index: int, case, result, problems) -> Path:
    kind = problems[0][0]
    folder = out / f"{kind}-{index:04d}"
    note = f"{kind}: {problems[0][1][:200]}"
    F.save_case(folder, case, F.case_files(case), note, problems=[f"{k}: {d}" for k, d in problems])
    (folder / "result.txt").write_text(
        f"command: {case.describe()}\nexit status: {result.code}\nseconds: {result.seconds:.1f}\n"
        f"problems:\n"
        + "".join(f"  {k}: {d}\n" for k, d in problems)
        + f"--- stdout (end)\n{result.stdout[-3000:].decode('utf-8', 'backslashreplace')}\n"
        + f"--- stderr (end)\n{result.stderr[-6000:].decode('utf-8', 'backslashreplace')}\n",
        encoding="utf-8",
    )
    return folder


def campaign(args) -> int:
    F.prepare()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="traceview-campaign-"))
    first = args.seed if args.seed is not None else random.randrange(2**32)
    counts, sigs, examples = collections.Counter(), collections.Counter(), {}
    start = time.monotonic()
    deadline, last_print, n, saved = start + args.minutes * 60, start, 0, 0
    print(f"fuzz campaign: {args.minutes} min, first seed {first}, failures to {out}", flush=True)
    try:
        while time.monotonic() < deadline:
            case = F.make_case(first + n)
            n += 1
            result = F.run_case(case, work, mode=args.mode, seconds=args.case_seconds)
            if result.problems:
                saved += _record(case, result, work, out, counts, sigs, examples, args, saved)
            if time.monotonic() - last_print > 60:
                last_print = time.monotonic()
                print(f"  {(last_print - start) / 60:.0f} min: {n} cases, {_line(counts)}", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _summary(n, counts, sigs, examples, time.monotonic() - start)
    return 1 if counts else 0


def _record(case, result, work, out, counts, sigs, examples, args, saved) -> int:
    """Count a failing case; save it (shrunk) if its failure was seen fewer than ``--keep`` times."""
    for kind in {k for k, _ in result.problems}:
        counts[kind] += 1
    kind, detail = result.problems[0]
    sig = F.signature(case, kind, detail)
    sigs[sig] += 1
    if sigs[sig] > args.keep:
        return 0
    if args.minimise and kind not in ("hang", "slow"):
        case = minimise(case, work, sig, seconds=min(args.case_seconds, 10))
        again = F.run_case(case, work, mode=args.mode, seconds=args.case_seconds)
        result = again if again.problems else result
    folder = save(out, saved, case, result, result.problems)
    examples.setdefault(sig, folder)
    print(f"  seed {case.seed}: {kind}: {detail[:150]} -> {folder}", flush=True)
    return 1


def _line(counts) -> str:
    return ", ".join(f"{LABELS[k]} {counts[k]}" for k in ORDER if counts[k]) or "no failures"


def _summary(n, counts, sigs, examples, took) -> None:
    print(f"\n{n} cases in {took / 60:.1f} min ({n / max(took, 1e-9):.1f}/s)")
    for kind in ORDER:
        print(f"  {LABELS[kind]:<24} {counts[kind]}")
    if sigs:
        print("distinct failures:")
        for sig, count in sigs.most_common():
            print(f"  {count:>5} x {sig}\n          e.g. {examples.get(sig, '(not saved)')}")


def replay(args) -> int:
    F.prepare()
    case = F.make_case(args.replay, hostile=True if args.hostile else None)
    work = Path(tempfile.mkdtemp(prefix="traceview-replay-"))
    try:
        result = F.run_case(case, work, mode=args.mode, seconds=args.case_seconds)
        print(f"command: {case.describe()}\nexit status: {result.code} ({result.seconds:.1f} s)")
        print("inputs: " + ", ".join(f"{k}: {inp.name}" for k, inp in case.inputs.items()))
        print("--- stdout\n" + result.stdout[-4000:].decode("utf-8", "backslashreplace"))
        print("--- stderr\n" + result.stderr[-4000:].decode("utf-8", "backslashreplace"))
        print("problems: " + ("; ".join(f"{k}: {d}" for k, d in result.problems) or "none"))
        if args.out:
            folder = save(Path(args.out), args.replay, case, result, result.problems or [("pass", "")])
            print(f"saved to {folder}")
        return 1 if result.problems else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30, help="How long to run (default 30).")
    p.add_argument("--out", default=None, help="Folder for failing inputs (default: a new temporary folder).")
    p.add_argument("--seed", type=int, default=None, help="First case's seed (default: random).")
    p.add_argument("--keep", type=int, default=3, help="Failures saved per distinct failure (default 3).")
    p.add_argument("--case-seconds", type=float, default=F.CASE_SECONDS, help="Per-case time limit: a hang.")
    p.add_argument(
        "--mode",
        choices=("fork", "inline", "subprocess"),
        default="fork",
        help="fork: from a clean helper process (fast, default); inline: from this process; "
        "subprocess: a fresh `python -m traceview` per case.",
    )
    p.add_argument("--no-minimise", dest="minimise", action="store_false", help="Save inputs as they failed.")
    p.add_argument(
        "--replay", type=int, default=None, metavar="SEED", help="Run the case of SEED and show it."
    )
    p.add_argument("--hostile", action="store_true", help="With --replay: the injection test's case of SEED.")
    args = p.parse_args(argv)
    if args.replay is not None:
        return replay(args)
    if args.out is None:
        args.out = tempfile.mkdtemp(prefix="traceview-fuzz-failures-")
    return campaign(args)


if __name__ == "__main__":
    sys.exit(main())
