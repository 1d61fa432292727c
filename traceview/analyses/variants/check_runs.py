"""Timing rules judged on runs, not steps (issue 33): is the candidate slower than the baseline runs
are apart from one another?

On a shared machine the noise of a timing is between runs, not between steps: a whole run sits at
1x, 2x or 20x the time of another recording of the same code (measured: benchmarks/README.md), and a
test that takes the steps of one run as independent samples reads that as a change. So:

- **a run is one number**: its fastest step. Interference (another process, a descheduled thread)
  only ever adds time to a step, so the fastest step is the one least disturbed; the spread of the
  steps is never added to the margin (step noise may narrow a verdict, never widen it);
- **the candidate** is the median of its runs' numbers (one run: that run's);
- **the noise** is the baseline runs' spread, ``slowest / fastest`` (a ratio: machine noise scales
  time), and the **threshold** is the slowest baseline run × the rule's factor × that spread to the
  power ``MARGIN`` (3): with 3 baseline runs and a candidate of the same distribution (lognormal
  between runs, any width) that fails 1.4% of the time at most (tests/test_check.py draws it); a
  1.5x slower candidate fails >= 95% of the time when the runs are within ~2.5% of one another.
  Whatever the spread, a candidate beyond ``SINGLE_RUN_FACTOR`` × the slowest baseline run fails.
  For a lower bound (``>=``) the same, mirrored below the fastest run;
- **one baseline run** gives no estimate of the spread: the rule cannot judge and says so, with the
  ratio, and fails only beyond ``SINGLE_RUN_FACTOR`` (6x: the largest fastest-step ratio measured
  between recordings of one variant on a loaded 2-core machine was 5.2x, the smallest between a
  46x slower variant and any recording of the base one 10.6x; benchmarks/README.md);
- **two clusters** of steps in one run (a gap wider than ``CLUSTER_GAP`` between two groups of at
  least ``CLUSTER_MIN`` steps each) are named: the machine (or the code) changed speed within the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..wording.words import num

SINGLE_RUN_FACTOR = 6.0  # one baseline run: only a change beyond this fails (and beyond it, always)
MARGIN = 3.0  # the power of the baseline runs' spread beyond the slowest run (false alarms <= 1.5%)
CLUSTER_GAP = 1.5  # steps in two groups whose gap is at least this ratio
CLUSTER_MIN = 0.2  # each group at least this share of the run's steps (and 2 steps)
METHOD = (
    "each run's fastest step; candidate = median over its runs; threshold = slowest baseline run × "
    f"factor × (slowest/fastest baseline run)^{MARGIN:g}, at most {SINGLE_RUN_FACTOR:g}x the slowest; one "
    f"baseline run cannot judge and fails only beyond {SINGLE_RUN_FACTOR:g}x"
)


@dataclass(frozen=True)
class RunVerdict:
    status: str  # pass, fail, or skipped (one baseline run and within SINGLE_RUN_FACTOR)
    value: float  # the candidate's number (median of its runs' fastest steps)
    baseline: float  # the baseline runs' median
    bound: float  # the threshold the value was compared with
    words: str  # the sentence: numbers, method, runs, noise, margin


def run_value(steps) -> float:
    """A run's number: its fastest step (the least disturbed by the machine); nan without steps."""
    v = np.asarray(steps, dtype=float)
    v = v[np.isfinite(v)]
    return float(v.min()) if len(v) else float("nan")


def clusters(steps) -> tuple[float, float, int, int] | None:
    """Two groups of steps far apart, (low median, high median, low count, high count), or None:
    the widest gap between sorted steps, when it is at least CLUSTER_GAP and leaves enough steps on
    each side."""
    v = np.sort(np.asarray(steps, dtype=float))
    v = v[np.isfinite(v) & (v > 0)]
    least = max(2, math.ceil(CLUSTER_MIN * len(v)))
    if len(v) < 2 * least:
        return None
    gaps = v[least : len(v) - least + 1] / v[least - 1 : len(v) - least]  # cuts leaving `least` each side
    cut = int(np.argmax(gaps)) + least
    if gaps[cut - least] < CLUSTER_GAP:
        return None
    return float(np.median(v[:cut])), float(np.median(v[cut:])), cut, len(v) - cut


def judge(cand_runs: list, base_runs: list, factor: float, upper: bool, unit: str = "ns") -> RunVerdict:
    """The verdict of a timing rule (``value <= baseline × factor`` when ``upper``, else ``>=``),
    each run given as its steps' values."""
    c = np.array([run_value(r) for r in cand_runs])
    b = np.array([run_value(r) for r in base_runs])
    c, b = c[np.isfinite(c)], b[np.isfinite(b)]
    if not len(c) or not len(b):  # a run without the metric (no GPU activity in one of them)
        nan = float("nan")
        return RunVerdict("skipped", nan, nan, nan, "no value in every run (nothing the metric measures)")
    value, base = float(np.median(c)), float(np.median(b))
    runs = f"{len(c)} candidate run(s) against {len(b)} baseline run(s)"
    lo, hi = float(b.min()), float(b.max())
    if len(b) == 1:
        bound = base * (SINGLE_RUN_FACTOR if upper else 1 / SINGLE_RUN_FACTOR)
        beyond = value > bound if upper else value < bound
        words = (
            f"{_n(value, unit)} vs {_n(base, unit)} ({_ratio(value, base)} the baseline, fastest step); "
            f"{runs}: one baseline run cannot tell a change from the machine's noise between runs, so "
            f"only a change beyond {SINGLE_RUN_FACTOR:g}x fails (record 3 or more baseline runs to judge; "
            "on a CPU with jemalloc preloaded: docs/ci-check.yml)"
        )
        return RunVerdict("fail" if beyond else "skipped", value, base, bound, words)
    spread = hi / lo if lo > 0 else math.inf
    cap = hi * SINGLE_RUN_FACTOR if upper else lo / SINGLE_RUN_FACTOR  # no spread hides a change beyond it
    if lo <= 0:  # a run at zero: its spread is unbounded, only the cap holds
        bound = cap
    else:
        bound = min(hi * factor * spread**MARGIN, cap) if upper else max(lo * factor / spread**MARGIN, cap)
    beyond = value > bound if upper else value < bound
    side = "above" if upper else "below"
    words = (
        f"{_n(value, unit)} vs threshold {_n(bound, unit)} ({_ratio(value, base)} the baseline runs' "
        f"median {_n(base, unit)}); {runs}, each its fastest step; noise between baseline runs "
        f"{_n(lo, unit)}-{_n(hi, unit)} (spread {spread:.2f}x); margin: the "
        f"{'slowest' if upper else 'fastest'} baseline run × factor {factor:g} × spread^{MARGIN:g}, "
        f"at most {SINGLE_RUN_FACTOR:g}x: "
        f"{'beyond' if beyond else 'within'} "
        f"the noise{'' if beyond else f' (fails {side} {_n(bound, unit)})'}"
    )
    return RunVerdict("fail" if beyond else "pass", value, base, bound, words)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "n/a x"


def _n(v: float, unit: str) -> str:
    return f"{num(v / 1e6)} ms" if unit == "ns" else num(v)


def cluster_words(
    label: str, steps, unit: str = "ns", what: str = "steps", when: str = "within the run"
) -> str:
    """A sentence on a run whose steps (or on baseline runs whose numbers) sit in two clusters ("" when
    they do not)."""
    found = clusters(steps)
    if found is None:
        return ""
    low, high, n_low, n_high = found
    return (
        f"{label}: {what} in two clusters ({n_low} at ~{_n(low, unit)}, {n_high} at ~{_n(high, unit)}, "
        f"{high / low:.1f}x apart): the machine (or the code) changed speed {when}"
    )


def fault_median(faults) -> int:
    """The median of a run's minor page faults per recorded step (the collectors' count; 0 when not
    counted or not a list of numbers): the one number the collectors' note and ``check`` both say."""
    if not isinstance(faults, list):
        return 0
    counts = sorted(int(f) for f in faults if isinstance(f, int | float) and math.isfinite(f))
    return counts[len(counts) // 2] if counts else 0


def fault_words(label: str, trace_meta: dict) -> str:
    """A sentence on a run whose recorded steps page-faulted, by the collectors' count in the trace
    (``traceview.minor_faults_per_step``; "" when none or not counted): its CPU time then depends on
    the allocator's state, which differs between processes of the same code (up to 2.5x measured with
    glibc malloc; benchmarks/README.md)."""
    info = trace_meta.get("traceview")
    median = fault_median(info.get("minor_faults_per_step") if isinstance(info, dict) else None)
    if median <= 0:
        return ""
    return (
        f"{label}: median {median:,} minor page faults per step (the collector's "
        "count): its steps took fresh memory, so its CPU time depends on the allocator's state; "
        "record with jemalloc preloaded (docs/ci-check.yml)"
    )
