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

    def step_map(self, metric: CheckMetric, sel: Selection) -> dict:
        """{step number: the metric in that step}, steps without a value left out."""
        values = self.step_values(metric, sel)
        numbers = self.trace.steps["step"].tolist() if values else []
        return {int(n): v for n, v in zip(numbers, values, strict=True) if not _missing(v)}


#: a run: one Side per rank, in rank order (one Side for a single process)
Run = list[Side]


def run_steps(run: Run, metric: CheckMetric, sel: Selection) -> list:
    """A run's steps for a timing rule: each step's value summed over the run's ranks (the registry
    combines every timing metric over ranks by sum), the steps every rank has; without such steps the
    run's one value (its ranks' sum)."""
    maps = [side.step_map(metric, sel) for side in run]
    common = sorted(set.intersection(*(set(m) for m in maps)))
    return [sum(m[k] for m in maps) for k in common] or [sum(side.value(metric, sel) for side in run)]


def run_label(run: Run) -> str:
    first = run[0].trace.label
    return first if len(run) == 1 else f"{first}, {len(run)} ranks"


def run_path(run: Run) -> str:
    """A run's trace path, or the folder its ranks' traces share."""
    paths = [os.fspath(side.trace.path) for side in run]
    return paths[0] if len(paths) == 1 else os.path.commonpath(paths)


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
    cands, bases = runs_of(sides(candidate), "candidate"), runs_of(sides(baseline), "baseline")
    _same_ranks(cands, bases)
    for side in [s for run in cands + bases for s in run]:  # the command's selection must match: an error
        side.region(sel or Selection())
    rows = [evaluate(rule, cands, bases, sel) for rule in rules]
    table = pd.DataFrame(rows, columns=COLUMNS)
    report = _report(cands, bases, table, sel, source)
    if bases and report.info["failed"]:  # what changed, in diff's words (first runs, first ranks)
        from .diff import diff

        said = diff(bases[0][0].trace, cands[0][0].trace, sel, top=None).findings
        report.findings += [f"diff (A = baseline, B = candidate): {f}" for f in said]
    return report


def runs_of(traces: list[Side], side: str) -> list[Run]:
    """The side's runs. Traces of one process (no ``distributedInfo`` rank, or all one rank) are one
    run each. Traces of several ranks are whole runs of a distributed job (``RUN/``, or ``RUN1/ RUN2/
    RUN3/``): the k-th trace of each rank, in the order given, make run k, its ranks in rank order;
    each rank must appear as often as every other (ranks are not repeated measurements)."""
    from ...run import rank_info

    ranks = [rank_info(t.trace.meta) for t in traces]
    if len({r[0] for r in ranks if r is not None}) <= 1:
        return [[t] for t in traces]
    if any(r is None for r in ranks):
        raise TraceviewError(f"the {side} traces mix ranks of a distributed run with traces without one")
    by: dict[int, list[Side]] = {}
    for t, r in zip(traces, ranks, strict=True):
        by.setdefault(r[0], []).append(t)  # None refused above
    counts = {rank: len(ts) for rank, ts in sorted(by.items())}
    if len(set(counts.values())) > 1:
        raise TraceviewError(
            f"the {side} traces hold the ranks of a distributed run unevenly ({_ranks_said(counts)}): "
            "give whole runs (every rank once per run)"
        )
    return [[by[rank][k] for rank in sorted(by)] for k in range(len(traces) // len(by))]


def _ranks_said(counts: dict[int, int]) -> str:
    shown = ", ".join(f"rank {r}: {n} trace(s)" for r, n in list(counts.items())[:6])
    return shown + (", ..." if len(counts) > 6 else "")


def _same_ranks(cands: list[Run], bases: list[Run]) -> None:
    """Every run of both sides has the first candidate run's ranks: rank r is compared with rank r."""
    from ...run import rank_info

    def ranks(run: Run) -> list:
        return [info[0] if (info := rank_info(s.trace.meta)) is not None else None for s in run]

    want = ranks(cands[0])
    for run in cands[1:] + bases:
        if len(run) != len(want) or (len(want) > 1 and ranks(run) != want):
            raise TraceviewError(
                f"{run_path(run)} holds {len(run)} rank(s) and {run_path(cands[0])} {len(want)}: "
                "a run is compared rank by rank, so every run must hold the same ranks"
            )


def evaluate(rule: CheckRule, cands: list[Run], bases: list[Run], sel: Selection | None) -> dict:
    """One row of the results table: a timing rule judged on every run, any other rule on the first
    candidate run against the first baseline run, rank by rank."""
    per_rank = [
        _evaluate_rank(rule, cands, bases, sel, i) for i in range(1 if _on_runs(rule) else len(cands[0]))
    ]
    return per_rank[0] if len(per_rank) == 1 else _ranks_row(cands[0], per_rank)


def _ranks_row(run: Run, rows: list[dict]) -> dict:
    """One row for a rule judged rank by rank: the first failing rank's numbers (else rank 0's), a fail
    when any rank fails, a pass when any passes; the detail names each failing (or skipped) rank."""
    from ...run import rank_info

    status = next((s for s in ("fail", "pass", "skipped") if any(r["status"] == s for r in rows)), "skipped")
    first = next(r for r in rows if r["status"] == status)
    said = [
        f"rank {info[0] if (info := rank_info(side.trace.meta)) else i}: {r['detail']}"
        for i, (side, r) in enumerate(zip(run, rows, strict=True))
        if r["status"] == status and r["detail"]
    ]
    return first | {"status": status, "detail": "; ".join(said)}


def _evaluate_rank(rule: CheckRule, runs: list[Run], base_runs: list[Run], sel, rank: int) -> dict:
    """The row of one rule on one rank of the first runs (a timing rule: on every run, ranks summed)."""
    cands = [run[rank] for run in runs]
    bases = [run[rank] for run in base_runs]
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
    if _on_runs(rule):
        try:
            return row | _judge_runs(rule, metric, runs, base_runs, scope)
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


def _on_runs(rule: CheckRule) -> bool:
    """A relative timing rule: judged on runs (:mod:`.check_runs`), not on steps."""
    return (
        rule.baseline is not None
        and rule.metric in TIMED
        and rule.noise
        and rule.op in ("<", "<=", ">", ">=")
    )


def _judge_runs(rule: CheckRule, metric: CheckMetric, cands: list[Run], bases: list[Run], scope) -> dict:
    """A timing rule's status, numbers and sentence, from every run of both sides."""
    c = [run_steps(run, metric, scope) for run in cands]
    b = [run_steps(run, metric, scope) for run in bases]
    v = check_runs.judge(c, b, float(rule.baseline or 1.0), rule.op in ("<", "<="), metric.unit)
    odd = [
        said
        for side, runs, named in (("candidate", c, cands), ("baseline", b, bases))
        for i, steps in enumerate(runs)
        if (said := check_runs.cluster_words(f"{side} run {i + 1} ({run_label(named[i])})", steps))
    ]
    states = check_runs.cluster_words(
        "baseline", [check_runs.run_value(r) for r in b], metric.unit, "runs", "between runs"
    )
    faulted = [
        said
        for side, named in (("candidate", cands), ("baseline", bases))
        for i, run in enumerate(named)
        if rule.metric != "gpu_time_per_step_ns"  # kernel time is the device's, not the host allocator's
        if (said := check_runs.fault_words(f"{side} run {i + 1} ({run_label(run)})", run[0].trace.meta))
    ]
    words = f"{TIMED[rule.metric]}: {v.words}" + "".join(f"; {o}" for o in [*odd, states, *faulted] if o)
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


def _report(cands: list[Run], bases: list[Run], table: pd.DataFrame, sel, source: str) -> Report:
    counts = table["status"].value_counts()
    passed, failed, skipped = (int(counts.get(s, 0)) for s in ("pass", "fail", "skipped"))
    verdict = "fail" if failed else "pass"
    info = {
        "candidate": run_path(cands[0]), "baseline": run_path(bases[0]) if bases else None,
        "candidate_runs": [run_path(r) for r in cands], "baseline_runs": [run_path(r) for r in bases],
        "ranks": len(cands[0]),
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
    notes = [w for run in cands + bases for s in run for w in s.trace.warnings]
    return Report(kind="check", title=title, tables={"rules": table}, findings=_findings(table), info=info,
                  notes=notes)  # fmt: skip


def _runs(runs: list[Run]) -> str:
    first = run_label(runs[0])
    return first if len(runs) == 1 else f"{len(runs)} runs ({first}, ...)"


def _findings(table: pd.DataFrame) -> list[str]:
    return [f"FAIL {finding(r)}" for r in table[table["status"] == "fail"].to_dict("records")]  # a few rows


def finding(r: dict) -> str:
    """A failed rule's sentence (the report's finding and the JUnit failure's message alike)."""
    said = f": {r['message']}" if r["message"] else ""
    cond = f"{r['metric']} {r['op']} {_shown(r['bound'])}"
    return f"{r['rule']}{said} ({cond} does not hold: {r['detail']})"
