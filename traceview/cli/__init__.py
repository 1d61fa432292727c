"""Command line: parse options, call the library, render. No analysis lives here.

Each command family lives in its own module and registers itself on ``main``.
"""
from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="traceview")
def main():
    """Analyse saved PyTorch profiler traces (Chrome/Kineto JSON, plain or gzip).

    Exit status: 0 success, 1 a trace that can't be read (or a selection that
    matches nothing), 2 a usage error, 3 an internal error.
    """


from . import basic  # noqa: E402,F401  (registers summary, kernels)
from . import hta  # noqa: E402,F401  (registers hta)
from . import diff  # noqa: E402,F401  (registers diff, compare, timeline)
from . import collect  # noqa: E402,F401  (registers collect)
from . import cache  # noqa: E402,F401  (registers cache info, cache clear)
