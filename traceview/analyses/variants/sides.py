"""The tables a diff asks of each side, worked out on the thread that loaded the side.

``diff`` reads its two traces on two threads (``api.Loader.pair``). A trace's analyses are partly
numpy (sorts, takes, unions), which lets go of the GIL, so B's analyses can run beside A's instead
of after them. Each table here is kept on its trace (``measure.derived``: once per trace and
selection), so the diff that follows finds it worked out; the diff itself still asks for every
table in its own order, and says every error and note as it always did: a failure here is let go
(the diff meets it again, in order).
"""

from __future__ import annotations

import contextlib

from ...launches import completeness
from ..measure.completeness import workload
from ..measure.efficiency import category_efficiency
from ..measure.exposed import exposed
from ..measure.groups import category_times, chain_table, op_table
from ..select.region import Selection, region
from ..trace.advise import advice_table
from .diff import named_kernels
from .workload import side_facts


def prepare(trace, sel: Selection | None) -> None:
    """Work out, and keep on ``trace``, the per-side tables ``diff`` reads for selection ``sel``."""
    with contextlib.suppress(Exception):
        r = region(trace, sel)
        workload(r)
        completeness(trace)
        side_facts(r)  # the verdict's
        op_table(r)
        chain_table(r)
        if r.has_gpu:
            category_times(r)
            named_kernels(r)
            exposed(r)
            for category in ("gemm", "attention"):  # efficiency_table's, and the findings'
                category_efficiency(r, category)
        advice_table(r)  # advice_diff's, for both sides
