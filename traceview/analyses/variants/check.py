"""``check(candidate, baseline, rules)``: a performance gate, every rule a metric, an operator and a bound.

Pure: traces and rules (:mod:`.check_rules`) in, a Report out (table ``rules``, one row per rule with
its status, value, bound and detail: how far it missed, how noise was judged, why it was skipped; the
failures in words, and diff's findings when a rule fails against a baseline). Each metric is the one
function of the registry or of :mod:`.check_metrics`, so a rule's number is the number summary, compare
and diff show.

A rule's bound is ``value`` (absolute) or ``baseline × factor`` (relative; a text or a set is compared
with the baseline's as it is). The candidate and the baseline may each be several runs (traces of
separate recordings). A relative **timing** rule (a per-step time: GPU kernel time, CPU op time) is
judged on the runs (:mod:`.check_runs`): the machine's noise is between runs, not between steps. Every
other rule (the structural ones: copies, memcpys, the attention backend, CUDA-core GEMMs) compares the
first candidate run with the first baseline run as before; a relative one on a per-step count whose
plain bound fails is asked whether the change is beyond the step-to-step noise (:mod:`.noise`).
"""

from __future__ import annotations

import glob
import math
import operator
import os
from dataclasses import dataclass, field, replace

import pandas as pd

from ...errors import TraceviewError
from ...model import Trace
from ...report import Report
from ...schema import CheckRule
from ..select.region import Region, Selection, region
from ..wording.words import num
from . import check_runs, noise
from .check_metrics import CheckMetric, check_metrics

OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
       ">=": operator.ge}  # fmt: skip
#: for a set, ``<=`` is "a subset of": nothing the bound lacks
COLUMNS = ["rule", "status", "metric", "op", "bound", "value", "baseline", "detail", "scope", "message"]
#: the timing metrics judged on runs, and what each result says it judged
TIMED = {
    "gpu_time_per_step_ns": "GPU kernel time per step (kernels summed; no host noise)",
    "cpu_op_time_per_step_ns": "CPU op time per step (no GPU activity: the ops' time)",
    "cpu_time_per_step_ns": "CPU wall time per step",
}


@dataclass
class Side:
    """One trace and its regions and values, each computed once however many rules ask."""

    trace: Trace
    memo: dict = field(default_factory=dict)

    @property
    def has_gpu(self) -> bool:
        return len(self.trace.kernels) > 0

    def region(self, sel: Selection) -> Region:
        if ("region", sel) not in self.memo:
            self.memo[("region", sel)] = region(self.trace, sel)
        return self.memo[("region", sel)]

    def value(self, metric: CheckMetric, sel: Selection):
        key = (metric.name, sel)
        if key not in self.memo:
            self.memo[key] = _plain(metric.compute(self.region(sel)))
        return self.memo[key]

    def step_values(self, metric: CheckMetric, sel: Selection) -> list:
        """The metric of each ProfilerStep on its own (none when the scope is one step already)."""
        if sel.step is not None or self.region(sel).region_kind not in ("steps", "annotation"):
            return []
        key = ("steps", metric.name, sel)
        if key not in self.memo:
            self.memo[key] = [self.value(metric, replace(sel, step=int(s))) for s in self.trace.steps["step"]]
        return self.memo[key]

    def run_steps(self, metric: CheckMetric, sel: Selection) -> list:
        """The run's steps for a timing rule: each step's value, or the run's one value without steps."""
        steps = [v for v in self.step_values(metric, sel) if not _missing(v)]
        return steps or [self.value(metric, sel)]


def sides(traces) -> list[Side]:
    """Runs as Sides: a Trace, a Side, or a list of them (None: no runs)."""
    if traces is None:
        return []
    items = traces if isinstance(traces, (list, tuple)) else [traces]
    return [t if isinstance(t, Side) else Side(t) for t in items]


def expand_runs(items) -> list:
    """Runs as given (a trace, a path, a folder, or a list of them), a glob (``base/*/naive.json.gz``,
    quoted so the shell leaves it, or a path that does not exist and holds ``*?[``) expanded, sorted."""
    items = list(items) if isinstance(items, (list, tuple)) else [items]
    out: list = []
    for item in items:
        if (
            isinstance(item, (str, os.PathLike))
            and not os.path.exists(item)
            and any(c in os.fspath(item) for c in "*?[")
        ):
            found = sorted(glob.glob(os.fspath(item)))
            if not found:
                raise TraceviewError(f"{os.fspath(item)}: no file matches this pattern")
            out += found
        else:
            out.append(item)
    return out


def _plain(v):
    return frozenset(v) if isinstance(v, (set, frozenset, list)) else v


def scope_of(rule: CheckRule, sel: Selection | None) -> Selection:
    """The command's selection with each scope field the rule gives replacing the command's."""
    base = sel or Selection()
    spans = rule.within if rule.within is not None else rule.annotation
    return replace(
        base,
        step=base.step if rule.step is None else rule.step,
        annotation=base.annotation if spans is None else spans,
        device=base.device if rule.device is None else rule.device,
        stream=base.stream if rule.stream is None else rule.stream,
        kind=base.kind if rule.kind is None else rule.kind,
    )


def check(
    candidate, baseline, rules: list[CheckRule], sel: Selection | None = None, *, source: str
) -> Report:
    """Every rule of ``rules`` on ``candidate`` against ``baseline`` (None: no baseline); each a trace
    or a list of runs (traces or Sides)."""
    cands, bases = sides(candidate), sides(baseline)
    _runs_of_one_rank(cands, "candidate")
    _runs_of_one_rank(bases, "baseline")
    for side in cands + bases:  # the command's own selection must match: an error, not a skip
        side.region(sel or Selection())
    rows = [evaluate(rule, cands, bases, sel) for rule in rules]
    table = pd.DataFrame(rows, columns=COLUMNS)
    report = _report(cands, bases, table, sel, source)
    if bases and report.info["failed"]:  # what changed, in diff's words (first runs)
        from .diff import diff

        said = diff(bases[0].trace, cands[0].trace, sel, top=None).findings
        report.findings += [f"diff (A = baseline, B = candidate): {f}" for f in said]
    return report


def _runs_of_one_rank(runs: list[Side], side: str) -> None:
    """Several runs must be recordings of one process: traces of different ranks (``distributedInfo``)
    are one distributed run, whose ranks are not repeated measurements (whole runs are not judged
    yet), so they are refused rather than read as noise between runs."""
    from ...run import rank_info

    ranks = {info[0] for s in runs if (info := rank_info(s.trace.meta)) is not None}
    if len(ranks) > 1:
        shown = ", ".join(map(str, sorted(ranks)[:8])) + (", ..." if len(ranks) > 8 else "")
        raise TraceviewError(
            f"the {side} traces are ranks {shown} of a distributed run (distributedInfo): check compares "
            "runs of one process; give one rank's trace from each run"
        )


def evaluate(rule: CheckRule, cands: list[Side], bases: list[Side], sel: Selection | None) -> dict:
    """One row of the results table."""
    metric = check_metrics()[rule.metric]
    scope = scope_of(rule, sel)
    row = dict.fromkeys(COLUMNS, None) | {
        "rule": rule.id, "metric": rule.metric, "op": rule.op, "scope": scope.describe(),
        "message": rule.message,
    }  # fmt: skip
    cand, base = cands[0], bases[0] if bases else None
    why_not = _not_applicable(rule, metric, cand, base)
    if why_not:
        return row | {"status": "skipped", "detail": why_not}
    try:
        value = cand.value(metric, scope)
        was = base.value(metric, scope) if rule.baseline is not None and base is not None else None
    except TraceviewError as e:  # the rule's own scope matches nothing in a trace
        return row | {"status": "skipped", "detail": f"scope: {e}"}
    if _missing(value) or (rule.baseline is not None and _missing(was)):
        return row | {"status": "skipped", "detail": "no value (nothing the metric measures)"}
    if _on_runs(rule, metric):
        try:
            return row | _judge_runs(rule, metric, cands, bases, scope)
        except TraceviewError as e:  # a later run lacks what the rule's scope names
            return row | {"status": "skipped", "detail": f"scope: {e}"}
    bound = _bound(rule, metric, was)
    status, words = _judge(rule, metric, cand, base, scope, value, bound)
    return row | {"status": status, "bound": _shown(bound), "value": _shown(value), "baseline": _shown(was),
                  "detail": words}  # fmt: skip


def _not_applicable(rule: CheckRule, metric: CheckMetric, cand: Side, base: Side | None) -> str:
    if (metric.gpu or rule.when == "gpu") and not cand.has_gpu:
        return "not applicable: the candidate has no GPU activity"
    if rule.when == "cpu-only" and cand.has_gpu:
        return "not applicable: a rule for CPU-only traces, and the candidate has GPU activity"
    if rule.baseline is not None and base is None:
        return "not applicable: a relative rule, and no baseline was given"
    return ""


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _bound(rule: CheckRule, metric: CheckMetric, was):
    if rule.baseline is None:
        return frozenset(rule.value) if isinstance(rule.value, list) else rule.value
    return was * rule.baseline if metric.unit not in ("text", "set") else was


def _on_runs(rule: CheckRule, metric: CheckMetric) -> bool:
    """A relative timing rule: judged on runs (:mod:`.check_runs`), not on steps."""
    return (
        rule.baseline is not None
        and rule.metric in TIMED
        and rule.noise
        and rule.op in ("<", "<=", ">", ">=")
    )


def _judge_runs(rule: CheckRule, metric: CheckMetric, cands: list[Side], bases: list[Side], scope) -> dict:
    """A timing rule's status, numbers and sentence, from every run of both sides."""
    c = [s.run_steps(metric, scope) for s in cands]
    b = [s.run_steps(metric, scope) for s in bases]
    v = check_runs.judge(c, b, float(rule.baseline or 1.0), rule.op in ("<", "<="), metric.unit)
    odd = [
        said
        for side, runs, named in (("candidate", c, cands), ("baseline", b, bases))
        for i, steps in enumerate(runs)
        if (said := check_runs.cluster_words(f"{side} run {i + 1} ({named[i].trace.label})", steps))
    ]
    states = check_runs.cluster_words(
        "baseline", [check_runs.run_value(r) for r in b], metric.unit, "runs", "between runs"
    )
    words = f"{TIMED[rule.metric]}: {v.words}" + "".join(f"; {o}" for o in [*odd, states] if o)
    return {"status": v.status, "value": v.value, "baseline": v.baseline, "bound": v.bound, "detail": words}


def _judge(rule, metric, cand, base, scope, value, bound) -> tuple[str, str]:
    """(pass or fail, how the noise was judged)."""
    if OPS[rule.op](value, bound):
        return "pass", ""
    if not (
        rule.baseline is not None and metric.per_step and rule.noise and rule.op in ("<", "<=", ">", ">=")
    ):
        return "fail", _how_far(value, bound, metric)
    x = [v * 1.0 for v in cand.step_values(metric, scope)]
    y = [v * rule.baseline for v in base.step_values(metric, scope)]
    verdict = noise.judge(x, y) if rule.op in ("<", "<=") else noise.judge(y, x)
    if verdict.p is not None and not verdict.beyond:
        return "pass", f"within noise: {verdict.words}"
    return "fail", f"{_how_far(value, bound, metric)}; {verdict.words}"


def _how_far(value, bound, metric: CheckMetric) -> str:
    if metric.unit == "set":
        new, gone = sorted(value - bound), sorted(bound - value)
        return "; ".join(p for p in (f"new: {', '.join(new)}" if new else "",
                                     f"gone: {', '.join(gone)}" if gone else "") if p)  # fmt: skip
    if metric.unit == "text":
        return f"{value} vs {bound}"
    said = f"{num(value)} vs {num(bound)}"  # the table keeps the exact values
    return f"{said} ({value / bound:.2f}x the bound)" if bound else said


def _shown(v):
    """A value for the table: a set as its sorted elements, a number or a text as it is."""
    if isinstance(v, frozenset):
        return ", ".join(sorted(v)) or "(none)"
    return v


def _report(cands: list[Side], bases: list[Side], table: pd.DataFrame, sel, source: str) -> Report:
    counts = table["status"].value_counts()
    passed, failed, skipped = (int(counts.get(s, 0)) for s in ("pass", "fail", "skipped"))
    verdict = "fail" if failed else "pass"
    candidate, baseline = cands[0].trace, bases[0].trace if bases else None
    info = {
        "candidate": candidate.path, "baseline": baseline.path if baseline is not None else None,
        "candidate_runs": [s.trace.path for s in cands], "baseline_runs": [s.trace.path for s in bases],
        "rules_from": source, "selection": (sel or Selection()).describe(), "verdict": verdict,
        "rules": len(table), "passed": passed, "failed": failed, "skipped": skipped,
        "timing_method": check_runs.METHOD,
        "noise_test": f"other per-step rules: one-sided Mann-Whitney U over the steps, alpha {noise.ALPHA}",
    }  # fmt: skip
    against = f" against {_runs(bases)}" if bases else ""
    title = (
        f"Check: {_runs(cands)}{against}: {verdict.upper()} ({num(passed)} pass, {num(failed)} fail, "
        f"{num(skipped)} skipped)"
    )
    notes = [w for s in cands + bases for w in s.trace.warnings]
    return Report(kind="check", title=title, tables={"rules": table}, findings=_findings(table), info=info,
                  notes=notes)  # fmt: skip


def _runs(runs: list[Side]) -> str:
    first = runs[0].trace.label
    return first if len(runs) == 1 else f"{len(runs)} runs ({first}, ...)"


def _findings(table: pd.DataFrame) -> list[str]:
    return [f"FAIL {finding(r)}" for r in table[table["status"] == "fail"].to_dict("records")]  # a few rows


def finding(r: dict) -> str:
    """A failed rule's sentence (the report's finding and the JUnit failure's message alike)."""
    said = f": {r['message']}" if r["message"] else ""
    cond = f"{r['metric']} {r['op']} {_shown(r['bound'])}"
    return f"{r['rule']}{said} ({cond} does not hold: {r['detail']})"
