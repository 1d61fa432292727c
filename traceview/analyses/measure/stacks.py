"""GPU time per place in the code: a call tree of Python frames and nn.Module frames
(``traceview stacks``), the nn.Module tree, and the user's lines.

Every GPU activity reaches a place through the links that exist: activity -> launch -> the
innermost CPU op around it -> that op's Python stack (``ops.stack``, traceview/sources.py).
Each activity counts once, at its leaf: the stack's innermost frame (its self time); a frame's
inclusive time is its own plus its callees'. What has no stack is kept, never dropped: an op
without one under ``NO_STACK`` (by op name). An activity launched outside every op (a CUDA
graph's replay: ``cudaGraphLaunch`` runs in no op) gets the Python stack around its launch, its
launch call as the leaf (marked ``REPLAY`` for a graph); one with neither goes under ``NO_OP``. So
the root holds every selected activity, the same GPU time as ``summary``. A trace without GPU
activities (a CPU-only run) is weighed by the ops' self CPU time instead, and says so.

A tree is built from per-leaf frame lists (outermost first) by one builder, whatever the
frames are: the call stack's frames, the nn.Module path's modules, or one user line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...sources import SEP, stacks_at
from .sources import launching_ops
from .work import trace_work

ROOT = "(all)"
NO_STACK = "(no Python stack)"
NO_OP = "(no CPU op)"
NO_MODULE = "(no nn.Module)"
REPLAY = "(graph replay)"  # marks the launch of a CUDA graph's replay, at the frame that called it
MODULE_PREFIX = "nn.Module: "
#: the summed figures of a leaf; ``weight_ns`` is GPU time, or CPU op self time without GPU activity
FIGURES = ("weight_ns", "kernels", "activities", "flops", "alloc_bytes", "allocs")
GPU_WEIGHT = "GPU time of the activities launched under it (kernels, memcpys, memsets)"
CPU_WEIGHT = "self CPU time of the ops under it (this trace has no GPU activity in the selection)"
_INSTANCE = re.compile(r"_\d+$")


@dataclass
class Leaves:
    """The selection's figures per leaf: ``texts`` (a stack text, innermost frame first, ``SEP``
    between frames), ``figures`` (one row per text, the columns ``FIGURES``) and ``weight`` (which
    time ``weight_ns`` is: GPU_WEIGHT or CPU_WEIGHT)."""

    texts: list[str]
    figures: pd.DataFrame
    weight: str


def leaves(r) -> Leaves:
    """Per leaf stack text, the region ``r``'s summed figures (see the module's doc)."""
    trace = r.trace
    key, texts = _op_keys(trace)
    no_op = len(texts)
    texts = [*texts, NO_OP]
    k = r.activities
    op = launching_ops(trace, k)
    act_key = np.where(op >= 0, key[np.clip(op, 0, None)], no_op) if len(key) else np.full(len(k), no_op)
    texts += _outside_ops(trace, k, op, act_key, len(texts))
    n = len(texts)
    rows = r.ops.index.to_numpy()
    op_key = key[rows]
    out = pd.DataFrame(index=range(n))
    if len(k):
        weight = GPU_WEIGHT
        out["weight_ns"] = _sum(act_key, np.clip(k["dur_ns"].to_numpy(), 0, None), n)
    else:
        weight = CPU_WEIGHT
        out["weight_ns"] = _sum(op_key, np.clip(r.ops["self_ns"].to_numpy(), 0, None), n)
    kind = k["kind"].astype(str).to_numpy()
    out["kernels"] = _sum(act_key, (kind == "kernel").astype(np.int64), n)
    out["activities"] = _sum(act_key, np.ones(len(k), np.int64), n)
    work = trace_work(trace).iloc[rows]
    flops = work["flops"].where(work["counted"].to_numpy(), pd.NA).fillna(0).to_numpy(dtype=np.int64)
    out["flops"] = _sum(op_key, flops, n)
    out["alloc_bytes"], out["allocs"] = _allocations(trace, rows, key, n)
    return Leaves(texts, out, weight)


def _sum(key: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    # exact integer sums (bincount's float weights would round past 2**53 ns)
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, key, values.astype(np.int64))
    return out


def _op_keys(trace) -> tuple[np.ndarray, list[str]]:
    """Per op, the number of its leaf text, and the texts: its stack, or ``name;NO_STACK``."""
    ops = trace.ops
    names = ops["name"].astype("category").cat
    name_texts = [str(c).replace(SEP, ",") + SEP + NO_STACK for c in names.categories] + [NO_STACK]
    name_code = names.codes.to_numpy().astype(np.int64)
    name_code[name_code < 0] = len(name_texts) - 1  # an op without a name: under NO_STACK itself
    if "stack" not in ops.columns:
        return name_code, name_texts
    stack = ops["stack"].cat
    stacks = [str(c) for c in stack.categories]
    code = stack.codes.to_numpy().astype(np.int64)
    key = np.where(code >= 0, code, len(stacks) + name_code)
    return key, stacks + name_texts


def _outside_ops(trace, k: pd.DataFrame, op: np.ndarray, act_key: np.ndarray, n: int) -> list[str]:
    """Activities launched outside every op but inside Python frames (a graph's replay, launched by
    ``CUDAGraph.replay``) get the stack of their launch: their leaf is the launch call, marked
    ``REPLAY`` for a graph launch, under the frame that made it. ``act_key`` is updated in place;
    the new leaf texts are returned, numbered from ``n``."""
    launch = k["launch"].to_numpy() if "launch" in k.columns else np.full(len(k), -1)
    at = np.flatnonzero((op < 0) & (launch >= 0))
    if not len(at):
        return []
    rows, inverse = np.unique(launch[at], return_inverse=True)
    names = trace.events["name"].to_numpy()[rows]
    stacks = stacks_at(trace.events, rows)
    leaf = [
        None
        if s is None
        else f"{str(c).replace(SEP, ',')}{' ' + REPLAY if 'GraphLaunch' in str(c) else ''}{SEP}{s}"
        for c, s in zip(names.tolist(), stacks, strict=True)
    ]
    codes, texts = pd.factorize(np.asarray(leaf, dtype=object), use_na_sentinel=True)
    found = codes[inverse.reshape(-1)]
    act_key[at] = np.where(found >= 0, n + found, act_key[at])
    return [str(t) for t in texts]


def _allocations(trace, rows: np.ndarray, key: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and count of the allocations (bytes > 0) made inside the region's ops, per leaf."""
    m = trace.memory
    if not len(m) or "op" not in m.columns:
        return np.zeros(n, np.int64), np.zeros(n, np.int64)
    op = m["op"].to_numpy()
    keep = (m["bytes"].to_numpy() > 0) & np.isin(op, rows)
    leaf = key[op[keep]]
    return _sum(leaf, m["bytes"].to_numpy()[keep], n), _sum(leaf, np.ones(int(keep.sum()), np.int64), n)


def stack_frames(text: str) -> list[str]:
    """A stack text's frames, outermost first."""
    return text.split(SEP)[::-1]


def module_frames(text: str, fold: bool = False) -> list[str]:
    """A stack text's nn.Module frames, outermost first (``BertModel_0``, ``BertLayer_3``);
    ``fold``: without the instance number, so every ``BertLayer`` is one. None: ``NO_MODULE``."""
    mods = [f[len(MODULE_PREFIX) :] for f in stack_frames(text) if f.startswith(MODULE_PREFIX)]
    if fold:
        mods = [_INSTANCE.sub("", m) for m in mods]
    return mods or [NO_MODULE]


def build_tree(paths: list[list[str]], figures: pd.DataFrame) -> pd.DataFrame:
    """The tree of the leaves' ``paths`` (frames, outermost first) under one root ``ROOT``:
    per node its ``parent`` (row, -1 for the root), ``depth`` (root 0), ``frame`` and, per figure,
    its self (``self_*``: leaves ending at it) and inclusive value (the figure's own name). Leaves
    with nothing to count are left out; leaves with the same path add up."""
    keep = figures.to_numpy().any(axis=1)
    ids: dict[tuple[int, str], int] = {}
    parent, frame, depth = [-1], [ROOT], [0]
    leaf = np.zeros(len(paths), dtype=np.int64)
    for i in np.flatnonzero(keep).tolist():
        node = 0
        for f in paths[i]:
            nxt = ids.get((node, f))
            if nxt is None:
                nxt = ids[(node, f)] = len(frame)
                parent.append(node)
                frame.append(f)
                depth.append(depth[node] + 1)
            node = nxt
        leaf[i] = node
    par, dep = np.asarray(parent, np.int64), np.asarray(depth, np.int64)
    out = pd.DataFrame({"parent": par, "depth": dep, "frame": frame})
    n = len(out)
    for col in figures.columns:
        own = _sum(leaf[keep], figures[col].to_numpy()[keep], n)
        incl = own.copy()
        for d in range(int(dep.max(initial=0)), 0, -1):  # deepest first: a level adds to the one above
            at = np.flatnonzero(dep == d)
            np.add.at(incl, par[at], incl[at])
        out[col], out["self_" + col] = incl, own
    return out


def node_paths(tree: pd.DataFrame, rows=None) -> list[str]:
    """Each node's path from the root's child down, ``SEP`` between frames (folded-stack order:
    outermost first); the root's is "". ``rows``: only these nodes (each walks up on its own)."""
    parent, frame = tree["parent"].to_numpy(), tree["frame"].tolist()
    done: dict[int, str] = {0: ""}

    def path(i: int) -> str:
        chain = []
        while i not in done:
            chain.append(i)
            i = int(parent[i])
        text = done[i]
        for j in reversed(chain):
            text = done[j] = frame[j] if not text else text + SEP + frame[j]
        return text

    return [path(int(i)) for i in (range(len(tree)) if rows is None else rows)]


def preorder(tree: pd.DataFrame, by: str = "weight_ns") -> np.ndarray:
    """The nodes in depth-first order, a node's children largest ``by`` first (a printed tree)."""
    parent = tree["parent"].to_numpy()
    order = np.lexsort((-tree[by].to_numpy(), parent))  # children grouped by parent, largest first
    kids: dict[int, list[int]] = {}
    for i in order.tolist():
        if parent[i] >= 0:
            kids.setdefault(int(parent[i]), []).append(i)
    out, todo = [], [0]
    while todo:
        i = todo.pop()
        out.append(i)
        todo.extend(reversed(kids.get(i, [])))
    return np.asarray(out, dtype=np.int64)
