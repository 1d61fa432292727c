"""``check(candidate, baseline, rules)``: a performance gate, every rule a metric, an operator and a bound.

Pure: traces and rules (:mod:`.check_rules`) in, a Report out (table ``rules``, one row per rule with
its status, value, bound and detail: how far it missed, how noise was judged, why it was skipped; the
failures in words, and diff's findings when a rule fails against a baseline). Each metric is the one
function of the registry or of :mod:`.check_metrics`, so a rule's number is the number summary, compare
and diff show.

A rule's bound is ``value`` (absolute) or ``baseline × factor`` (relative; a text or a set is compared
with the baseline's as it is). A relative rule on a per-step metric whose plain bound fails is then
asked whether the change is beyond the step-to-step noise (:mod:`.noise`): it fails only when it is,
or when the traces have too few steps to tell.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field, replace

import pandas as pd

from ...errors import TraceviewError
from ...model import Trace
from ...report import Report
from ...schema import CheckRule
from ..select.region import Region, Selection, region
from ..wording.words import num
from . import noise
from .check_metrics import CheckMetric, check_metrics

OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
       ">=": operator.ge}  # fmt: skip
#: for a set, ``<=`` is "a subset of": nothing the bound lacks
COLUMNS = ["rule", "status", "metric", "op", "bound", "value", "baseline", "detail", "scope", "message"]


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
        return [self.value(metric, replace(sel, step=int(s))) for s in self.trace.steps["step"]]


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
    """Every rule of ``rules`` on trace ``candidate`` (against trace ``baseline``, or None)."""
    cand, base = Side(candidate), Side(baseline) if baseline is not None else None
    cand.region(sel or Selection())  # the command's own selection must match: an error, not a skip
    if base is not None:
        base.region(sel or Selection())
    rows = [evaluate(rule, cand, base, sel) for rule in rules]
    table = pd.DataFrame(rows, columns=COLUMNS)
    report = _report(candidate, baseline, table, sel, source)
    if baseline is not None and report.info["failed"]:  # what changed, in diff's words
        from .diff import diff

        said = diff(baseline, candidate, sel, top=None).findings
        report.findings += [f"diff (A = baseline, B = candidate): {f}" for f in said]
    return report


def evaluate(rule: CheckRule, cand: Side, base: Side | None, sel: Selection | None) -> dict:
    """One row of the results table."""
    metric = check_metrics()[rule.metric]
    scope = scope_of(rule, sel)
    row = dict.fromkeys(COLUMNS, None) | {
        "rule": rule.id, "metric": rule.metric, "op": rule.op, "scope": scope.describe(),
        "message": rule.message,
    }  # fmt: skip
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


def _report(candidate, baseline, table: pd.DataFrame, sel, source: str) -> Report:
    counts = table["status"].value_counts()
    passed, failed, skipped = (int(counts.get(s, 0)) for s in ("pass", "fail", "skipped"))
    verdict = "fail" if failed else "pass"
    info = {
        "candidate": candidate.path, "baseline": baseline.path if baseline is not None else None,
        "rules_from": source, "selection": (sel or Selection()).describe(), "verdict": verdict,
        "rules": len(table), "passed": passed, "failed": failed, "skipped": skipped,
        "noise_test": f"one-sided Mann-Whitney U over the steps, exact, alpha {noise.ALPHA}",
    }  # fmt: skip
    against = f" against {baseline.label}" if baseline is not None else ""
    title = (
        f"Check: {candidate.label}{against}: {verdict.upper()} ({num(passed)} pass, {num(failed)} fail, "
        f"{num(skipped)} skipped)"
    )
    notes = list(candidate.warnings) + (list(baseline.warnings) if baseline is not None else [])
    return Report(kind="check", title=title, tables={"rules": table}, findings=_findings(table), info=info,
                  notes=notes)  # fmt: skip


def _findings(table: pd.DataFrame) -> list[str]:
    out = []
    for r in table[table["status"] == "fail"].to_dict("records"):  # the failed rules: a few rows
        said = f": {r['message']}" if r["message"] else ""
        cond = f"{r['metric']} {r['op']} {_shown(r['bound'])}"
        out.append(f"FAIL {r['rule']}{said} ({cond} does not hold: {r['detail']})")
    return out
