"""``traceview check``: a performance gate for CI. Exit 0 when every rule holds, 1 when one fails,
2 on a usage or input error (a bad rules file, an unreadable trace, a selection matching nothing),
so that CI tells "the change is slower" from "the gate could not run"; 3 stays a bug."""

from __future__ import annotations

import functools
import sys

import click

from ..errors import EXIT_USAGE, TraceviewError
from ..render.safe import visible
from .common import command_options, emit, format_option, friendly, say
from .group import main

EXIT_FAILED = 1  # a rule failed


def _input_errors_are_usage(f):
    """A TraceviewError here means the gate could not judge: one line, exit 2 (not 1, a failed rule)."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except TraceviewError as exc:
            click.echo(f"traceview: error: {visible(str(exc))}", err=True)
            sys.exit(EXIT_USAGE)

    return wrapper


class _Runs(click.Option):
    """``--baseline a.json b.json c.json``: the option takes every value up to the next option (a
    shell glob expands to several files), each as one baseline run."""

    def add_to_parser(self, parser, ctx) -> None:
        super().add_to_parser(parser, ctx)
        for name in self.opts:
            opt = parser._long_opt.get(name) or parser._short_opt.get(name)
            if opt is None:
                continue
            one = opt.process

            def process(value, state, one=one):
                one(value, state)
                while state.rargs and not state.rargs[0].startswith("-"):
                    one(state.rargs.pop(0), state)

            opt.process = process


@main.command()
@click.option(
    "--baseline",
    cls=_Runs,
    multiple=True,
    metavar="RUN...",
    help="Baseline run(s) the relative rules compare with: traces, a folder of them, or a quoted glob; "
    "every value up to the next option (put CANDIDATE first). Timing rules judge runs, not steps: give "
    "several baseline runs (5 on a shared machine, 3 at the least); with one they report the ratio but "
    "fail only beyond 6x.",
)
@click.option(
    "--checks",
    default=None,
    metavar="FILE",
    help="TOML file of check rules (default: the built-in rules, traceview/rules/check_default.toml).",
)
@click.option(
    "--junit", default=None, metavar="FILE", help="Also write the results as JUnit XML to FILE (for CI)."
)
@format_option
@command_options("check")
@friendly
@_input_errors_are_usage
def check(candidate, baseline, checks, junit, out, sel, options):
    """Check CANDIDATE (one run's trace, or several runs: traces, a folder, a quoted glob; the ranks of a
    distributed run, together, are one whole run, compared rank by rank) against rules
    (each a metric, an operator and a bound, absolute or relative to --baseline): no new Memcpy or copy
    op, no GEMM leaving the tensor cores, attention backend unchanged (structural rules: first run
    against first run), and time per step (GPU kernel time on GPU traces, CPU op time on CPU-only ones)
    not beyond the baseline runs' spread: each run's fastest step, the candidate runs' median against
    the slowest baseline run × 1.05 × (slowest/fastest baseline run)^3, at most 6x it. One baseline
    run cannot judge timing: the ratio is reported, and only a change beyond 6x fails. Or your
    --checks file.
    Exit 0: every rule holds; 1: a rule fails; 2: usage or input error."""
    from .. import api

    report = api.check(
        list(candidate),
        baseline=list(baseline) or None,
        checks=checks,
        junit=junit,
        sel=sel,
        options=options,
        on_warning=say,
    )
    if junit is not None:
        click.echo(f"wrote {visible(junit)}", err=True)
    emit(report, out)
    if report.info["verdict"] != "pass":
        sys.exit(EXIT_FAILED)
