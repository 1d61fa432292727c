"""``traceview check``: a performance gate for CI. Exit 0 when every rule holds, 1 when one fails,
2 on a usage or input error (a bad rules file, an unreadable trace, a selection matching nothing),
so that CI tells "the change is slower" from "the gate could not run"; 3 stays a bug."""

from __future__ import annotations

import functools
import sys

import click

from ..errors import EXIT_USAGE, TraceviewError
from ..render.safe import visible
from .common import emit, format_option, friendly, load_options, select_options
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


@main.command()
@click.argument("candidate")
@click.option("--baseline", default=None, metavar="TRACE", help="Trace the relative rules compare with.")
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
@select_options
@load_options
@friendly
@_input_errors_are_usage
def check(candidate, baseline, checks, junit, out, sel, options):
    """Check trace CANDIDATE against rules (each a metric, an operator and a bound, absolute or relative
    to --baseline): no new Memcpy or copy op, no GEMM leaving the tensor cores, attention backend
    unchanged, time per step not worse beyond the steps' noise (built-in rules), or your --checks file.
    Exit 0: every rule holds; 1: a rule fails; 2: usage or input error."""
    from .. import api

    report = api.check(candidate, baseline=baseline, checks=checks, junit=junit, sel=sel, options=options)
    if junit is not None:
        click.echo(f"wrote {visible(junit)}", err=True)
    emit(report, out)
    if report.info["verdict"] != "pass":
        sys.exit(EXIT_FAILED)
