"""``compare --run RUN_A/ RUN_B/ ...``: runs side by side, overall and rank by rank, against a baseline run.

Ranks are matched by number; only ranks every run has are compared (the others are
named in the notes), so each run's ``overall`` covers the same ranks. Per run and per
rank: the shared metrics of ``summary --run`` (through the selection) and the
distributed analyses of ``traceview ranks`` (GPU time breakdown, overlap, the wait a
rank caused; over each whole trace), with ratios to the baseline run. The findings
are ``compare``'s (least and most GPU time per step) and ``diff RUN_A/ RUN_B/``'s for
each run against the baseline.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ...errors import TraceviewError
from ...report import Finding, Report
from ...run import rank_list
from ..measure.registry import shown_in
from ..wording.words import Cite, listing, ratio
from .ranks import ranks_report
from .run_diff import METRICS as DIST
from .run_diff import overall as dist_overall
from .run_diff import refused, run_diff
from .run_diff import stragglers as diff_stragglers
from .run_summary import run_summary


def shared() -> list[str]:
    """The registry's metrics ``compare --run`` shows, each run's ``overall`` value."""
    return [x.name for x in shown_in("run_compare")]


def per_rank() -> list[str]:
    """The counts and times of ``shared()`` (summed over ranks), shown rank by rank too."""
    return [x.name for x in shown_in("run_compare") if x.combine == "sum"]


def ratios() -> dict[str, str]:
    """metric -> the column of its ratio to the baseline run."""
    return {x.name: x.ratio for x in shown_in("run_compare") if x.ratio}


def baseline_index(labels: list[str], baseline) -> int:
    """``baseline``: None (the first run), an index or a run's label."""
    if baseline is None:
        return 0
    if isinstance(baseline, (int, np.integer)) and not isinstance(baseline, bool):
        if not 0 <= baseline < len(labels):
            raise TraceviewError(f"baseline index {baseline} is out of range (0..{len(labels) - 1})")
        return int(baseline)
    if str(baseline) in labels:
        return labels.index(str(baseline))
    raise TraceviewError(f"baseline {baseline!r} is none of the compared runs ({', '.join(labels)})")


def matched_runs(runs: list) -> tuple[list, list, list[str]]:
    """The runs narrowed to the ranks they all have, those ranks, and a note per rank left out."""
    ranks = sorted(set.intersection(*(set(res.ranks) for _, res in runs)))
    notes = [
        f"rank(s) {rank_list(sorted(set(res.ranks) - set(ranks)))} only in some runs, not compared "
        f"({label} has them)"
        for label, res in runs
        if set(res.ranks) - set(ranks)
    ]
    if not ranks:
        raise TraceviewError(
            "the runs share no rank: "
            + "; ".join(f"{label}: ranks {rank_list(sorted(res.ranks))}" for label, res in runs)
        )
    narrowed = [
        (label, dataclasses.replace(res, ranks={r: res.ranks[r] for r in ranks})) for label, res in runs
    ]
    return narrowed, ranks, notes


def with_ratios(df: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a ``ratio_…`` column after each of ``ratios()``: its value over ``ref``'s (a frame aligned
    with ``df``'s rows: the baseline's figures)."""
    out = df.copy()
    for metric, name in ratios().items():
        got = [ratio(x, y) for x, y in zip(ref[metric].to_numpy(), out[metric].to_numpy(), strict=True)]
        at = out.columns.get_loc(metric)
        assert isinstance(at, int)  # the metrics are unique columns
        out.insert(at + 1, name, got)
    return out


def _stragglers(d: Report, ranks: list) -> str:
    """``d``'s stragglers among the compared ``ranks``, as ``wait_caused_ns`` beside it is summed over
    them; a straggler among the others is named as not compared (never dropped without a word)."""
    if refused(d):
        return diff_stragglers(d)
    named = sorted(set(d["stragglers"]["straggler"].tolist()))
    inside = [r for r in named if r in ranks]
    outside = ", ".join(map(str, sorted(set(named) - set(inside))))
    text = ", ".join(map(str, inside)) or "none"
    return text + (f" ({outside} not compared)" if outside else "")


def compare_table(labels, summaries, dists, ranks: list, base: int) -> pd.DataFrame:
    """One row per run: its ``overall`` shared metrics and distributed totals over ``ranks``, ratios to
    the baseline run."""
    rows = []
    for label, s, d in zip(labels, summaries, dists, strict=True):
        total = s["ranks"].iloc[-1]
        rows.append(
            {
                "run": label,
                "ranks": s.info["ranks"],
                "world_size": s.info["world_size"],
                "device": total["device"],
                **{m: total[m] for m in shared()},
                **dist_overall(d["ranks"][d["ranks"]["rank"].isin(ranks)]),
                "stragglers": _stragglers(d, ranks),
            }
        )
    table = pd.DataFrame(rows)
    return with_ratios(table, table.iloc[[base] * len(table)])


def rank_rows(labels, summaries, dists, base: int) -> pd.DataFrame:
    """One row per compared rank and run: shared metrics and the rank's distributed figures, ratios to
    the same rank of the baseline run."""
    parts = []
    for label, s, d in zip(labels, summaries, dists, strict=True):
        own = s["ranks"].iloc[:-1][["rank", *per_rank()]]
        own = own.assign(rank=own["rank"].astype(int))
        dist = d["ranks"][["rank", *DIST, "overlap_pct", "last_at"]]
        parts.append(own.merge(dist, on="rank", how="left").assign(run=label))
    ref = parts[base].set_index("rank")
    out = [with_ratios(part, ref.loc[part["rank"]]) for part in parts]
    table = pd.concat(out, ignore_index=True).sort_values(["rank"], kind="stable").reset_index(drop=True)
    return table[["rank", "run", *[c for c in table.columns if c not in ("rank", "run")]]]


def run_compare(runs: list, baseline=None) -> Report:
    """Compare runs: ``runs`` is a list of (label, ``RunResults``) of one selection, each rank's with its
    RankWork (``traceview.scale.run_results``, or ``of_run`` of a loaded ``Run``)."""
    if not runs:
        raise TraceviewError("compare --run needs at least one run")
    labels = [label for label, _ in runs]
    base = baseline_index(labels, baseline)
    dists = [
        ranks_report(res.works(), dataclasses.replace(res, notes=res.notes + res.skipped)) for _, res in runs
    ]  # every rank
    runs, ranks, notes = matched_runs(runs)
    summaries = [run_summary(res, label) for label, res in runs]
    sel = summaries[0].info["selection"]
    table = compare_table(labels, summaries, dists, ranks, base)
    tables = {"compare": table, "ranks": rank_rows(labels, summaries, dists, base)}
    diffs = {
        lbl: run_diff(dists[base], dists[i], (labels[base], lbl)) for i, lbl in enumerate(labels) if i != base
    }
    tables.update(vs_baseline_tables(diffs))
    notes += list(
        dict.fromkeys(n for rep in summaries + dists for n in rep.notes if not n.startswith("overall:"))
    )
    notes.append(
        "overall (table compare): counts and times summed over the compared ranks; per step: the whole "
        "job's work in one step. span_ns … wait_caused_ns and overlap_pct: 'traceview ranks' over each "
        "whole trace" + ("" if sel == "all" else " (not narrowed by the selection)")
    )
    info = {
        "runs": len(runs),
        "baseline": labels[base],
        "compared_ranks": rank_list(ranks),
        "selection": summaries[0].info["selection"],
        "per": summaries[0].info["per"],
    }
    return Report(
        kind="run_compare",
        title=f"Compare {len(runs)} runs ({len(ranks)} rank(s) each, baseline {labels[base]})",
        tables=tables,
        findings=findings(table, labels, base, diffs),
        info=info,
        notes=notes,
    )


def vs_baseline_tables(diffs: dict[str, Report]) -> dict[str, pd.DataFrame]:
    """Each run's ``diff RUN_A/ RUN_B/`` against the baseline run, its tables and its ``info`` (one row)
    under the run's label (``run``): what the findings quoted from those diffs cite."""
    if not diffs:
        return {}
    out = {}
    for name, table in (("vs_baseline", "ranks"), ("vs_baseline_exposed", "exposed")):
        out[name] = pd.concat([d[table].assign(run=lbl) for lbl, d in diffs.items()], ignore_index=True)
        out[name] = out[name][["run", *[c for c in out[name].columns if c != "run"]]]
    out["vs_baseline_info"] = pd.DataFrame([{"run": lbl, **d.info} for lbl, d in diffs.items()])
    return out


#: where a run diff's evidence lies in ``compare --run``'s report
MOVED = {"ranks": "vs_baseline", "exposed": "vs_baseline_exposed", "info": "vs_baseline_info"}


def _quoted(c: Cite, label: str, bl: str, f: str) -> Finding:
    """A run diff's finding quoted under ``label against bl:``, its evidence moved to this report's
    tables (the same cells, keyed by ``run`` too). A sentence without figures is a plain ``str``
    (no evidence to move)."""
    head = f"{_run(c, label)} against {_run(c, bl)}: "
    evidence = f.evidence if isinstance(f, Finding) else ()
    moved = [e | {"table": MOVED[e["table"]], "row": {"run": label, **e["row"]}} for e in evidence]
    return Finding(head + str(f), [*c.evidence, *moved])


def _run(c: Cite, label: str) -> str:
    return c("compare", {"run": label}, "run", label, "text")


def findings(table: pd.DataFrame, labels, base: int, diffs: dict[str, Report]) -> list[str]:
    """Each figure cites table ``compare`` (by ``run``), or, quoted from a run diff, its cells here."""
    bl = labels[base]
    c = Cite()
    if len(labels) < 2:
        return [c.finding(f"only one run ({_run(c, bl)}): nothing to compare it with")]
    t = table.set_index("run")
    v = t["gpu_time_per_step_ns"]
    fast, slow = list(v.index[v == v.min()]), list(v.index[v == v.max()])  # every tied run named

    def figure(run: str) -> str:
        time = c("compare", {"run": run}, "gpu_time_per_step_ns", v[run], "ns")
        return (
            f"{time}, {c('compare', {'run': run}, 'ratio_gpu_time', t.loc[run, 'ratio_gpu_time'], 'ratio')}"
        )

    if len(fast) == len(t):
        same = c("compare", {"run": fast[0]}, "gpu_time_per_step_ns", v.iloc[0], "ns")
        out = [c.finding(f"every run takes the same GPU time per step over its ranks ({same})")]
    else:
        who = listing([_run(c, r) for r in fast])
        lo = f"{figure(fast[0])} {_run(c, bl)}"
        slow_who = listing([_run(c, r) for r in slow])
        hi = f"{figure(slow[0])} {_run(c, bl)}"
        out = [
            c.finding(
                f"{who} {'take' if len(fast) > 1 else 'takes'} the least GPU time per step over "
                f"{'their' if len(fast) > 1 else 'its'} ranks ({lo}); {slow_who} the most ({hi})"
            )
        ]
    quoted: list[str] = [_quoted(Cite(), label, bl, f) for label, d in diffs.items() for f in d.findings]
    return [*out, *quoted]
