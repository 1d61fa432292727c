"""Command line: parse options, call the library, render. No analysis lives here.

Each command family lives in its own module and registers itself on ``main``
(defined in ``group``); importing this package imports them all.
"""
from __future__ import annotations

from . import basic  # noqa: F401  (registers summary, kernels)
from . import cache  # noqa: F401  (registers cache info, cache clear)
from . import collect  # noqa: F401  (registers collect)
from . import diff  # noqa: F401  (registers diff, compare, timeline)
from . import hta  # noqa: F401  (registers hta)
from . import ranks  # noqa: F401  (registers ranks)
from . import report  # noqa: F401  (registers report)
from . import annotate  # noqa: F401  (registers annotate)
from .group import main

__all__ = ["main"]
