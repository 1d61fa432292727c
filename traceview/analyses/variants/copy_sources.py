"""Where a one-sided copy comes from (issue 19): the line of the user's code and what it cost.

diff says "aten::masked_fill copies (... in A, not in B)" from the op chains found on one side
only. With stacks (``with_stack=True``) the chain's ops have a source line
(:mod:`..measure.sources`); this table gives, per such copy chain, that line, what it called,
and what the copy itself cost per step: bytes allocated inside the chain's last op (the copy op:
its own and its child ops' allocations, not those of the op above it, whose result is not a
copy; issue 34) and GPU time launched under it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...domain import domain
from ...link import ARROW
from ...trees import nearest
from ..measure.call_lines import CallLines, line_to_edit
from ..measure.derived import texts
from ..measure.sources import NO_SOURCE, has_stacks, launching_ops, op_sources
from ..select.region import Region
from ..wording.words import Cite

COLUMNS = ["side", "chain", "source", "line_from", "call", "alloc_bytes_per_step", "gpu_ns_per_step"]


def copy_sources(A: Region, B: Region, chains_a: pd.DataFrame, chains_b: pd.DataFrame, n: int = 3):
    """Table ``copy_sources`` (one row per one-sided copy chain with a source line, up to ``n`` a
    side) and one sentence per row, each figure cited from its cell."""
    rows = []
    for side, r, chains in (("A", A, chains_a), ("B", B, chains_b)):
        if has_stacks(r.trace) and len(chains):
            rows += _rows(side, r, chains, n)
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table, [_sentence(row, A.per_word) for row in table.itertuples(index=False)]


def _rows(side: str, r: Region, chains: pd.DataFrame, n: int) -> list[tuple]:
    copy_ops = domain().copy_ops
    t = chains[chains["op"].isin(copy_ops) & chains["chain"].str.contains(ARROW, regex=False)]
    lines = op_sources(r.trace)
    parent = r.trace.ops["parent"].to_numpy()
    codes, chains_text = texts(r.ops["chain"])  # compared by code, not 400k strings per chain
    out, seen = [], set()
    lines_in = CallLines()  # the line of the call, where the file is in the current folder (issue 36)
    for c in t["chain"]:
        # the copy ops themselves: the chain's last op
        mine = r.ops.index.to_numpy()[np.isin(codes, np.flatnonzero(chains_text == c))]
        src, call = lines["source"].to_numpy()[mine[0]], lines["call"].to_numpy()[mine[0]]
        if src == NO_SOURCE or (src, call, c.split(ARROW)[0]) in seen:
            continue
        seen.add((src, call, c.split(ARROW)[0]))
        inside = nearest(parent, np.isin(np.arange(len(parent)), mine)) >= 0
        line, how = line_to_edit(str(src), call if isinstance(call, str) else "", lines_in)
        out.append((side, c, line, how, call, _allocated(r, inside), _gpu_ns(r, inside)))
        if len(out) == n:
            break
    return out


def _allocated(r: Region, inside: np.ndarray) -> float:
    """Bytes allocated (Bytes > 0) by the ops ``inside`` (a mask over trace.ops), per step."""
    m = r.trace.memory
    if not len(m) or "op" not in m.columns:
        return 0.0
    op = m["op"].to_numpy()
    hit = (op >= 0) & inside[np.clip(op, 0, None)] & (m["bytes"].to_numpy() > 0)
    return float(m["bytes"].to_numpy()[hit].sum()) / r.regions


def _gpu_ns(r: Region, inside: np.ndarray) -> float:
    """GPU time of the region's activities launched by the ops ``inside``, per step."""
    k = r.activities
    if not len(k):
        return 0.0
    op = launching_ops(r.trace, k)
    hit = (op >= 0) & inside[np.clip(op, 0, None)]
    return float(np.clip(k["dur_ns"].to_numpy()[hit], 0, None).sum()) / r.regions


def _sentence(row, unit: str):
    c, key = Cite(), {"side": row.side, "chain": row.chain}
    chain = c("copy_sources", key, "chain", row.chain, "text")
    where = c("copy_sources", key, "source", row.source, "text")
    called = f" (its call to {c('copy_sources', key, 'call', row.call, 'text')})" if row.call else ""
    cost = [f"{c('copy_sources', key, 'alloc_bytes_per_step', row.alloc_bytes_per_step, 'bytes')} allocated"]
    if row.gpu_ns_per_step:
        cost.append(f"{c('copy_sources', key, 'gpu_ns_per_step', row.gpu_ns_per_step, 'ns')} of GPU time")
    cost_words = " and ".join(cost)
    return c.finding(
        f"the copy in {row.side} ({chain}) comes from {where}{called}: {cost_words} by the copy per {unit}"
    )
