"""Communication/computation overlap: how much communication time hides behind computation.

``overlap_pct`` = 100 × |union(communication) ∩ union(computation)| / |union(communication)|,
in exact ns (classes as in ``gpu_breakdown``). This is HTA's ``get_comm_comp_overlap``
(which rounds to whole µs first); nan when there is no communication.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import intervals as iv
from .gpu_breakdown import gpu_class


def overlap(acts: pd.DataFrame) -> dict:
    """communication_busy_ns, overlapped_ns and overlap_pct of these activities."""
    cls = gpu_class(acts)
    return overlap_of(iv.spans(acts), cls == "computation", cls == "communication")


def overlap_of(every: iv.Spans, is_comp: np.ndarray, is_comm: np.ndarray) -> dict:
    """``overlap`` of activities given as their spans and class masks."""
    comm, comp = (every[0][is_comm], every[1][is_comm]), (every[0][is_comp], every[1][is_comp])
    busy = iv.length(comm)
    hidden = iv.overlap(comm, comp)
    return {
        "communication_busy_ns": busy,
        "overlapped_ns": hidden,
        "overlap_pct": 100.0 * hidden / busy if busy else float("nan"),
    }
