"""Fuzz the command line (issue 22): mutated real traces through summary, kernels [--ops],
diff, compare, timeline and annotate, in table/markdown/csv/json, each case in its own process.

The engine (cases, runner, oracle) is ``tests/fuzzcli.py``; ``benchmarks/fuzz_campaign.py`` runs
the same cases for minutes and saves every failing input. Here:

* ``test_cli_fuzz``: random cases; none may exit 3, die, print a traceback, hang, run out of
  memory, write a file it was not asked for, or change its input. Since issue 38 some cases point an
  output option at an input (by name, symbolic link or hard link: refused, exit 2), a FIFO or a
  private device (never replaced), some are sent SIGTERM, SIGHUP or SIGINT (nothing left behind),
  and some inputs have file names that are not UTF-8.
* ``test_cli_injection``: cases whose traces carry hostile strings (ESC sequences, CR, bidi
  controls, spreadsheet formulas, ``<script>``, mathtext, lone surrogates, ...); nothing raw may
  reach stdout/stderr. This is the terminal/document-injection oracle of issue 22 item 2: it is
  strict on purpose and fails for as long as any output path prints trace text unescaped.
* ``test_regression_case``: every input a fuzz run ever failed on, kept in ``tests/fuzz_cases/``
  (one folder per case: ``case.json`` with a one-line note, the command and its inputs); these
  always run, with the same oracle.

Bounded for CI: ``TRACEVIEW_FUZZ_EXAMPLES`` cases per random test (default 25, as in
``test_fuzz.py``), and at most ``TRACEVIEW_FUZZ_SECONDS`` seconds each (default 40: a slow
machine runs fewer cases, not longer). Set both higher for a longer run, e.g.
``TRACEVIEW_FUZZ_EXAMPLES=100000 TRACEVIEW_FUZZ_SECONDS=600``. ``TRACEVIEW_FUZZ_SEED`` fixes the
first case's seed (otherwise random, and printed with any failure). A failing case replays with
``python benchmarks/fuzz_campaign.py --replay SEED`` (``--hostile`` for the injection test).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import fuzzcli as F
import pytest

EXAMPLES = int(os.environ.get("TRACEVIEW_FUZZ_EXAMPLES", "25"))
SECONDS = float(os.environ.get("TRACEVIEW_FUZZ_SECONDS", "40"))
FIRST_SEED = int(os.environ.get("TRACEVIEW_FUZZ_SEED") or random.randrange(2**32))

# Regression cases that still fail, each until the fix named in its reason lands (issue 22).
# Only cases that crash today are listed; remove the entry once the fix is in.
XFAIL: dict[str, str] = {}  # case folder name -> reason, for a crash found but not yet fixed


@pytest.fixture(scope="module")
def workdir():
    folder = Path(tempfile.mkdtemp(prefix="traceview-fuzz-cli-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _fuzz(workdir: Path, first: int, *, hostile, kinds) -> tuple[int, list]:
    """Run cases from seed ``first`` on until EXAMPLES ran or SECONDS passed; (count, failures)."""
    deadline, failures, n = time.monotonic() + SECONDS, [], 0
    while n < EXAMPLES and time.monotonic() < deadline:
        case = F.make_case(first + n, hostile=hostile)
        n += 1
        result = F.run_case(case, workdir)
        for kind, detail in result.problems:
            if kind in kinds:
                failures.append(f"seed {case.seed}: {kind}: {detail}\n    {case.describe()}")
    return n, failures


def _report(n: int, failures: list, flag: str = "") -> str:
    return (
        f"{len(failures)} problem(s) in {n} cases (first seed {FIRST_SEED}; replay one with "
        f"`python benchmarks/fuzz_campaign.py --replay SEED{flag}`):\n" + "\n".join(failures[:20])
    )


def test_cli_fuzz(workdir):
    n, failures = _fuzz(workdir, FIRST_SEED, hostile=None, kinds=F.CRASH_KINDS)
    assert n > 0
    assert not failures, _report(n, failures)


def test_cli_injection(workdir):
    """Issue 22 item 2 (terminal/document injection): STRICT, fails until every text output escapes."""
    n, failures = _fuzz(workdir, FIRST_SEED + 10**6, hostile=True, kinds=F.INJECTION_KINDS)
    assert n > 0
    assert not failures, _report(n, failures, " --hostile")


def _saved_params():
    folders = (
        sorted(p for p in F.CASES_DIR.iterdir() if (p / "case.json").is_file())
        if F.CASES_DIR.is_dir()
        else []
    )
    params = []
    for folder in folders:
        reason = XFAIL.get(folder.name)
        marks = [pytest.mark.xfail(strict=False, reason=reason)] if reason else []
        params.append(pytest.param(folder, id=folder.name, marks=marks))
    return params


@pytest.mark.parametrize("folder", _saved_params())
def test_regression_case(workdir, folder):
    """Every crash a fuzz run found, replayed with the crash oracle."""
    case, files = F.load_saved(folder)
    result = F.run_case(case, workdir, files=files)
    note = json.loads((folder / "case.json").read_text(encoding="utf-8"))["note"]
    bad = [f"{kind}: {detail}" for kind, detail in result.problems if kind in F.CRASH_KINDS]
    assert not bad, f"{folder.name} ({note}): {case.describe()}\n" + "\n".join(bad)


@pytest.mark.parametrize("folder", [p for p in _saved_params() if "hostile" in p.id or "inject" in p.id])
def test_regression_injection(workdir, folder):
    """Saved hostile-string cases, replayed with the injection oracle (issue 22 item 2: STRICT)."""
    case, files = F.load_saved(folder)
    result = F.run_case(case, workdir, files=files)
    bad = [f"{kind}: {detail}" for kind, detail in result.problems if kind in F.INJECTION_KINDS]
    assert not bad, f"{folder.name}: {case.describe()}\n" + "\n".join(bad)


def _unsignalled_case(seed: int) -> F.Case:
    """The first case from ``seed`` on that is sent no signal.

    A signal lands at a set time after the start, and the forked runner starts without the imports,
    so the two runners meet it at different points of the work: ended before any output in one,
    after all of it in the other. Only a case left to run to its end can be compared.
    """
    while (case := F.make_case(seed, hostile=False)).signal:
        seed += 1
    return case


def test_forked_runner_matches_a_real_process(workdir):
    """The fast runner (fork of this process) and ``python -m traceview`` agree on exit status and output."""
    for seed in (FIRST_SEED, 7):
        case = _unsignalled_case(seed)
        files = F.case_files(case)
        forked = F.run_case(case, workdir, files=files)
        real = F.run_case(case, workdir, files=files, mode="subprocess")
        assert (forked.code, forked.stdout) == (real.code, real.stdout), case.describe()
        assert F.last_line(forked.stderr) == F.last_line(real.stderr), case.describe()


def test_oracle_catches_what_it_claims(workdir):
    """The oracle is not vacuous: a traceback, an exit 3, a hang, a stray file and a raw ESC are all seen."""
    case = F.make_case(1, hostile=False)
    box = workdir / "oracle"
    for sub in ("in", "cwd", "cache", "home"):
        (box / sub).mkdir(parents=True, exist_ok=True)
    (box / "cwd" / "junk.tmp").write_text("x")
    cases = {
        "traceback": F.Result(1, b"", b"Traceback (most recent call last):\n  ...\nValueError: x\n", 0.1, 0),
        "exit3": F.Result(3, b"", b"traceview: internal error: OverflowError: x\n", 0.1, 0),
        "hang": F.Result(None, b"", b"", 30.0, 0),
    }
    for kind, result in cases.items():
        assert kind in {k for k, _ in F.crash_problems(case, result, box, F._tree(box / "in"))}
    found = {k for k, _ in F.crash_problems(case, F.Result(1, b"", b"", 0.1, 0), box, F._tree(box / "in"))}
    assert "stray-file" in found
    leak = F.Result(0, "name \x1b]0;title\x07 \u202e".encode(), b"", 0.1, 0)
    assert "escape-leak" in {k for k, _ in F.injection_problems(case, leak)}
