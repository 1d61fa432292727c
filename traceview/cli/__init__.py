"""Command line: parse options, call the library, render. No analysis lives here.

Each command family lives in its own module and registers itself on ``main``
(defined in ``group``); importing this package imports them all.
"""

from __future__ import annotations

from . import (
    advise,  # noqa: F401  (registers advise)
    annotate,  # noqa: F401  (registers annotate)
    basic,  # noqa: F401  (registers summary, kernels)
    cache,  # noqa: F401  (registers cache info, cache clear)
    check,  # noqa: F401  (registers check)
    collect,  # noqa: F401  (registers collect)
    diff,  # noqa: F401  (registers diff, compare, timeline)
    exposed,  # noqa: F401  (registers exposed)
    hta,  # noqa: F401  (registers hta)
    memory,  # noqa: F401  (registers memory)
    ranks,  # noqa: F401  (registers ranks)
    report,  # noqa: F401  (registers report)
    stacks,  # noqa: F401  (registers stacks)
)
from .group import main

__all__ = ["main"]
