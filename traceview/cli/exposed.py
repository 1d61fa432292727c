"""``traceview exposed``: where each step's wall time went, by cause (``tv.exposed``)."""

from __future__ import annotations

from .common import command_options, emit, format_option, friendly, say
from .group import main


@main.command()
@format_option
@command_options("exposed")
@friendly
def exposed(trace, out, sel, options):
    """Each step's wall time split into exposed time per cause, every ns once: computation by
    category, communication not hidden behind computation, memcpy, memset, GPU idle while the
    host syncs, loads data or launches, idle otherwise. The causes sum exactly to the wall
    time; `diff` shows the same split for A and B (docs/metrics.md, "Exposed time")."""
    from .. import api

    emit(api.exposed(trace, sel=sel, options=options, on_warning=say), out)
