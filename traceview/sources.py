"""CPU op -> Python call stack -> the line of the user's own code, vectorised (``with_stack=True``).

A trace records stacks in one of two ways:

1. ``python_function`` events (torch 1.10+): one duration event per Python frame, with its
   ``Python id`` and its caller's ``Python parent id`` (ids per process). An op's stack is the
   innermost frame on its thread whose span holds the op's start, then its callers by parent id.
2. The older ``Call stack`` arg on a CPU op: its frames joined by ``;``, innermost first; an op
   without one (a child op) has its parent op's.

Either way an op's stack is kept as that same text (``ops.stack``, a categorical: ops that
share a stack share one string), keeping only frames of a file (``file.py(42): forward``;
``<built-in ...>`` and ``nn.Module: ...`` frames are C calls and markers, never a line of code).
Its ``source`` is the innermost of those frames that is not library code (``rules/sources.toml``
plus the user's own patterns), written ``file.py:42 forward``. Each distinct stack is built and
judged once, however many ops share it. Kernels, memcpys and allocations get theirs through
their op.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from . import schema
from .link import _op_at
from .model import categorical, per_category

SEP = ";"  # joins the frames of a stack, innermost first, as the Call stack arg does
_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<func>.*)$", re.S)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # "<built-in method x of Tensor object at 0x7f..>": per object
_INSTANCE = re.compile(r"_\d+$")
_CALLEE = re.compile(r"^<built-in (?:method|function) (?P<name>\S+)")


@functools.cache
def source_rules() -> schema.SourceRules:
    path = Path(__file__).parent / "rules" / "sources.toml"
    return schema.convert(schema.read(path, "source rules"), schema.SourceRules)


def op_stacks(events: pd.DataFrame, ops: pd.DataFrame, call_stack=None) -> pd.Categorical:
    """Each op's Python stack text (file frames, innermost first), missing where the trace has none.
    ``call_stack``: the ops' raw ``Call stack`` JSON texts (a categorical row-aligned with ops)."""
    own = _decoded(call_stack) if call_stack is not None else np.full(len(ops), -1)
    texts: list[str] = list(own.categories) if isinstance(own, pd.Categorical) else []
    code = np.array(own.codes, dtype=np.int64) if isinstance(own, pd.Categorical) else own.astype(np.int64)
    need = code < 0
    if need.any():
        frame_code, frame_texts = _frame_stacks(events)
        if len(frame_texts):
            at = _op_at(ops.iloc[np.flatnonzero(need)][["pid", "tid", "ts_ns"]], _frames(events, frame_code))
            found = np.where(at >= 0, frame_code[np.clip(at, 0, None)], -1)
            code[need] = np.where(found >= 0, found + len(texts), -1)
            texts += frame_texts
    code = _inherit(code, ops["parent"].to_numpy(), ops["depth"].to_numpy())
    # one text may come from two chains (C frames between differ, or both kinds of record)
    same, distinct = pd.factorize(np.asarray(texts, dtype=object))
    code = np.where(code >= 0, same[np.clip(code, 0, None)] if len(same) else -1, -1)
    return pd.Categorical.from_codes(code, categories=pd.Index(distinct, dtype=object))


def _decoded(raw) -> pd.Categorical:
    """The raw ``Call stack`` JSON texts decoded, each distinct one once; "" is none."""

    def text(c) -> str | None:
        try:
            value = json.loads(str(c))
        except ValueError:
            return None
        return value or None if isinstance(value, str) else None

    cat = raw if isinstance(raw, pd.Categorical) else pd.Categorical(raw)
    return categorical(per_category(cat, text, None))


def _frames(events: pd.DataFrame, frame_code: np.ndarray) -> pd.DataFrame:
    """The python_function events as spans with their parent (a row of this table, -1: none)."""
    rows = np.flatnonzero((events["role"] == "python").to_numpy())
    py = events.iloc[rows]
    return pd.DataFrame(
        {
            "pid": py["pid"].array,
            "tid": py["tid"].array,
            "ts_ns": py["ts_ns"].to_numpy(),
            "dur_ns": py["dur_ns"].to_numpy(),
            "parent": _parent_rows(py),
        }
    )


def _parent_rows(py: pd.DataFrame) -> np.ndarray:
    """Per python_function event, the row (in ``py``) of its ``Python parent id`` in the same
    process; -1 for a root, and where that id is missing or several frames carry it."""
    pid = py["pid"].cat.codes.to_numpy().astype(np.int64)
    ids = pd.MultiIndex.from_arrays([pid, py["python_id"].fillna(-1).to_numpy(dtype=np.int64)])
    shared = ids.duplicated(keep=False) | (py["python_id"].isna().to_numpy())
    lookup = pd.Series(np.flatnonzero(~shared), index=ids[~shared])
    want = pd.MultiIndex.from_arrays([pid, py["python_parent_id"].fillna(-2).to_numpy(dtype=np.int64)])
    return lookup.reindex(want).fillna(-1).to_numpy(dtype=np.int64)


def _frame_stacks(events: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Per python_function event, the code of its stack text (its file frames and its callers'),
    and the texts. Built one tree level at a time from (caller's stack, own frame) pairs, so
    each distinct stack's text is made once."""
    rows = np.flatnonzero((events["role"] == "python").to_numpy())
    if not len(rows):
        return np.empty(0, np.int64), []
    py = events.iloc[rows]
    parent = _parent_rows(py)
    names = py["name"].cat.remove_unused_categories()
    labels = np.asarray(
        [_ADDRESS.sub("", str(n)).replace(SEP, ",") for n in names.cat.categories], dtype=object
    )
    name_code = names.cat.codes.to_numpy().astype(np.int64)
    depth = _depth(parent)
    code = np.full(len(rows), -1, dtype=np.int64)
    texts: list[str] = []
    width = len(labels) + 1
    for d in np.unique(depth):  # callers come first
        at = np.flatnonzero(depth == d)
        above = np.where(parent[at] >= 0, code[np.clip(parent[at], 0, None)], -1)
        pairs, inverse = np.unique((above + 1) * width + name_code[at], return_inverse=True)
        code[at] = len(texts) + inverse.reshape(-1)
        for pair in pairs.tolist():
            up, c = divmod(pair, width)
            texts.append(labels[c] if up == 0 else labels[c] + SEP + texts[up - 1])
    return code, texts


def _depth(parent: np.ndarray) -> np.ndarray:
    """Levels below a root, following ``parent``; a cycle (a damaged trace) stops at the frame count."""
    depth = np.zeros(len(parent), dtype=np.int64)
    cur = parent.copy()
    for _ in range(len(parent)):
        if not (active := cur >= 0).any():
            break
        depth[active] += 1
        cur[active] = parent[cur[active]]
    else:
        depth[cur >= 0] = 0  # in a cycle: no caller is trusted
    return depth


def _inherit(code: np.ndarray, parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """An op without a stack of its own has its parent op's (outermost ops first)."""
    code = code.copy()
    for d in np.unique(depth[code < 0]):
        at = np.flatnonzero((depth == d) & (code < 0) & (parent >= 0))
        code[at] = code[parent[at]]
    return code


def sources(stack: pd.Series | pd.Categorical, library: tuple[str, ...] = ()) -> pd.Categorical:
    """Per row, the innermost frame of its stack that is the user's own code, as
    ``file.py:42 forward``; missing where the stack has none (or there is no stack).
    ``library``: the user's own library patterns, beside ``rules/sources.toml``'s."""
    return user_frames(stack, library)[0]


def calls(stack: pd.Series | pd.Categorical, library: tuple[str, ...] = ()) -> pd.Categorical:
    """Per row, what the user's frame called on the way to the op (``masked_fill``): the frame
    just inside it, where the stack records one. python_function frames carry the line a
    function starts on, not the line running, so this names the call the line made."""
    return user_frames(stack, library)[1]


def user_frames(stack, library: tuple[str, ...] = ()) -> tuple[pd.Categorical, pd.Categorical]:
    """:func:`sources` and :func:`calls` in one pass: each distinct stack is read once, each
    distinct frame parsed and judged once (stacks share most of their frames)."""
    # a categorical column's array is its Categorical (pandas-stubs types .array as ExtensionArray)
    cat = cast(pd.Categorical, stack.array) if isinstance(stack, pd.Series) else stack
    user = _user_line_of(tuple(library))
    pairs = [_user_frame(str(t), user) for t in cat.categories]
    return tuple(  # type: ignore[return-value]
        categorical(per_category(cat, dict(zip(cat.categories, col, strict=True)).get, None))
        for col in (zip(*pairs, strict=True) if pairs else ((), ()))
    )


def _user_frame(text: str, user) -> tuple[str | None, str | None]:
    """(``file.py:42 forward``, the callee's name) of the innermost user frame of a stack text."""
    frames = text.split(SEP)
    for i, frame in enumerate(frames):
        line = user(frame)
        if line is not None:
            return line, _callee(frames[i - 1]) if i else None
    return None, None


def _user_line_of(library: tuple[str, ...]):
    """``line(frame)``: ``file.py:42 forward`` for a file frame of the user's code, else None;
    remembered per frame text."""
    is_library = library_test(library)

    @functools.cache
    def line(frame: str) -> str | None:
        m = _FRAME.match(frame)
        return f"{m['file']}:{m['line']} {m['func']}" if m and not is_library(m["file"]) else None

    return line


def _callee(frame: str) -> str:
    """A frame's function: ``softmax`` of ``torch/nn/functional.py(1): softmax`` or of
    ``<built-in method softmax of Tensor object>``; else the frame as written (``nn.Module: Linear_0``)."""
    m = _FRAME.match(frame) or _CALLEE.match(frame)
    if m:
        return m["func"] if "func" in m.groupdict() else m["name"]
    return _INSTANCE.sub("", frame)  # nn.Module: Linear_35 -> nn.Module: Linear (one row, not one per layer)


@functools.cache
def library_test(extra: tuple[str, ...] = ()):
    """``is_library(path)`` under the rules and the user's patterns (a folder ends in ``/``)."""
    rules = source_rules()
    folders = tuple(rules.folders) + tuple(p for p in extra if p.endswith("/"))
    files = tuple(rules.files) + tuple(p for p in extra if not p.endswith("/"))
    markers = tuple(rules.markers)

    @functools.cache  # per distinct file: a trace names a few hundred
    def is_library(path: str) -> bool:
        p = path.replace("\\", "/")
        slashed = "/" + p
        return (
            p.startswith(markers)
            or any("/" + f in slashed for f in folders)
            or p in files
            or p.endswith(tuple("/" + f for f in files))
        )

    return is_library
