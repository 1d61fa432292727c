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
from .trees import nearest, number_paths

SEP = ";"  # joins the frames of a stack, innermost first, as the Call stack arg does
#: frames a python_function stack shows in full; the deepest stack in the 48 corpus traces and the
#: sample traces has 45 frames, so only hostile nesting reaches this. Longer stacks are elided
#: (``_elided_stacks``), which keeps their text, and the levels walked, bounded. Not more: each
#: level below it builds its stacks' text whole (a tree of distinct deep paths costs STACK_MAX**2
#: per path), and a longer stack still shows its 64 innermost frames, where the user's line lies.
STACK_MAX = 128
_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<func>.*)$", re.S)
#: a file frame whose line is a number Python reads as such (a hostile 5,000-digit one is no line)
_FILE_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d{1,9})\): (?P<func>.*)$", re.S)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # "<built-in method x of Tensor object at 0x7f..>": per object
_INSTANCE = re.compile(r"_\d+$")
_CALLEE = re.compile(r"^<built-in (?:method|function) (?P<name>[^\s>]+)")  # "...function f>": f


@functools.cache
def source_rules() -> schema.SourceRules:
    path = Path(__file__).parent / "rules" / "sources.toml"
    return schema.convert(schema.read(path, "source rules"), schema.SourceRules)


def op_stacks(events: pd.DataFrame, ops: pd.DataFrame, call_stack=None) -> tuple[pd.Categorical, list]:
    """Each op's Python stack text (file frames, innermost first), missing where the trace has none,
    and notes on the callers it could not trust (``_frames``). ``call_stack``: the ops' raw
    ``Call stack`` JSON texts (a categorical row-aligned with ops)."""
    own = _decoded(call_stack) if call_stack is not None else np.full(len(ops), -1)
    texts: list[str] = list(own.categories) if isinstance(own, pd.Categorical) else []
    code = np.array(own.codes, dtype=np.int64) if isinstance(own, pd.Categorical) else own.astype(np.int64)
    need = code < 0
    notes: list[str] = []
    if need.any() and len(frames := _frames(events, notes)):
        at = _op_at(ops.iloc[np.flatnonzero(need)][["pid", "tid", "ts_ns"]], frames)
        frame_code, frame_texts = _frame_stacks(frames, at[at >= 0])
        found = np.where(at >= 0, frame_code[np.clip(at, 0, None)], -1)
        code[need] = np.where(found >= 0, found + len(texts), -1)
        texts += frame_texts
    code = _inherit(code, ops["parent"].to_numpy())
    # one text may come from two chains (C frames between differ, or both kinds of record)
    same, distinct = pd.factorize(np.asarray(texts, dtype=object))
    code = np.where(code >= 0, same[np.clip(code, 0, None)] if len(same) else -1, -1)
    return pd.Categorical.from_codes(code, categories=pd.Index(distinct, dtype=object)), notes


def stacks_at(events: pd.DataFrame, rows: np.ndarray) -> list[str | None]:
    """The Python stack text (as :func:`op_stacks` writes it) around each event of ``rows``: the
    innermost python_function frame on its thread that holds its start, and its callers; None
    where none does. For calls made outside every op: a CUDA graph's replay launch."""
    frames = _frames(events, [])
    if not len(rows) or not len(frames):
        return [None] * len(rows)
    at = _op_at(events.iloc[rows][["pid", "tid", "ts_ns"]], frames)
    code, texts = _frame_stacks(frames, at[at >= 0])
    found = np.where(at >= 0, code[np.clip(at, 0, None)], -1)
    return [texts[c] if c >= 0 else None for c in found.tolist()]


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


def _frames(events: pd.DataFrame, notes: list) -> pd.DataFrame:
    """The python_function events as spans with their name, their caller (a row of this table,
    -1: none, and none where callers loop: see ``_forest``) and their levels below a root.
    Callers not trusted (an id several frames carry, a loop) are counted onto ``notes``."""
    py = events.iloc[np.flatnonzero((events["role"] == "python").to_numpy())]
    rows, shared = _parent_rows(py)
    parent, depth = _forest(rows)
    looped = int(((rows >= 0) & (parent < 0)).sum())
    for n, why in (
        (shared, "each one's Python parent id names several frames"),
        (looped, "following their Python parent ids leads round a loop"),
    ):
        if n:
            notes.append(
                f"{n} Python frame{'' if n == 1 else 's'} left without a caller ({why}): "
                "a stack through such a frame starts at it"
            )
    return pd.DataFrame(
        {
            "pid": py["pid"].array,
            "tid": py["tid"].array,
            "ts_ns": py["ts_ns"].to_numpy(),
            "dur_ns": py["dur_ns"].to_numpy(),
            "name": py["name"].array,
            "parent": parent,
            "depth": depth,
        }
    )


def _parent_rows(py: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Per python_function event, the row (in ``py``) of its ``Python parent id`` in the same
    process; -1 for a root, and where that id is missing or several frames carry it. Also how
    many frames name an id that several frames carry (their caller is not known)."""
    pid = py["pid"].cat.codes.to_numpy().astype(np.int64)
    no_id = py["python_id"].isna().to_numpy()
    ids = pd.MultiIndex.from_arrays([pid, py["python_id"].fillna(-1).to_numpy(dtype=np.int64)])
    dup = ids.duplicated(keep=False) & ~no_id
    shared = dup | no_id
    lookup = pd.Series(np.flatnonzero(~shared), index=ids[~shared])
    want = pd.MultiIndex.from_arrays([pid, py["python_parent_id"].fillna(-2).to_numpy(dtype=np.int64)])
    n_shared = int(want.isin(ids[dup]).sum()) if dup.any() else 0
    return lookup.reindex(want).fillna(-1).to_numpy(dtype=np.int64), n_shared


def _frame_stacks(frames: pd.DataFrame, wanted: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Per python_function frame (a row of ``_frames``), the code of its stack text (its frame
    and its callers'), and the texts. Built one tree level at a time from (caller's stack, own
    frame) pairs, so each distinct stack's text is made once. Stacks of more than ``STACK_MAX``
    frames (only a hostile trace nests so deep) are elided by ``_elided_stacks``, and only for
    the ``wanted`` frames (those an op starts in; the others' code is -1): this bounds the levels
    walked, the text each stack holds, and the deep stacks made to those ops use."""
    parent, depth = frames["parent"].to_numpy(), frames["depth"].to_numpy()
    names = frames["name"].cat.remove_unused_categories()
    labels = np.asarray(
        [_ADDRESS.sub("", str(n)).replace(SEP, ",") for n in names.cat.categories], dtype=object
    )
    name_code = names.cat.codes.to_numpy().astype(np.int64)
    code, paths = number_paths(parent, depth, name_code, STACK_MAX)  # callers come first
    texts: list[str] = []
    for up, c in paths:
        texts.append(labels[c] if up == 0 else labels[c] + SEP + texts[up - 1])
    deep = np.intersect1d(np.flatnonzero(depth >= STACK_MAX), wanted)
    if len(deep):
        _elided_stacks(deep, code, texts, parent, depth, name_code, labels)
    return code, texts


def _elided_stacks(deep, code, texts: list, parent, depth, name_code, labels) -> None:
    """Number (in ``code``) and write (onto ``texts``) the stacks of more than ``STACK_MAX`` frames:
    the inner half's frames, ``… N frames …``, then the stack of the outer half's innermost frame
    (numbered above), as op_chains elides chains. Deep stacks that differ only inside the elision
    share a text. Work and text are bounded by ``STACK_MAX`` per deep frame."""
    half = STACK_MAX // 2
    head = code[nearest(parent, depth == half - 1)[deep]]
    tail = np.empty((len(deep), half), dtype=np.int32)  # inner frames, innermost first
    cur = deep
    for k in range(half):
        tail[:, k] = name_code[cur]
        cur = parent[cur]
    key = np.column_stack([head, depth[deep] + 1 - 2 * half, tail])
    uniq, inverse = np.unique(key, axis=0, return_inverse=True)
    code[deep] = len(texts) + inverse.reshape(-1)
    inner = labels[uniq[:, 2:]].tolist()  # one object array lookup, not one per stack
    for frames_in, h, elided in zip(inner, uniq[:, 0].tolist(), uniq[:, 1].tolist(), strict=True):
        texts.append(SEP.join([*frames_in, frame_elision(elided), texts[h]]))


def frame_elision(left_out: int) -> str:
    """The frame that stands for those left out of the middle of a stack longer than STACK_MAX:
    no file frame, so never taken for the user's line."""
    return f"… {left_out} frame{'' if left_out == 1 else 's'} …"


def _forest(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``parent`` with frames whose callers loop (a damaged trace) made roots (no caller is
    trusted), and each frame's levels below its root. Pointer jumping: log2(depth) passes, each
    adding the distance known at the frame jumped to; a frame still jumping after more passes
    than the frame count needs is in, or under, a loop."""
    depth = (parent >= 0).astype(np.int64)
    hop = parent.copy()
    for _ in range(len(parent).bit_length() + 1):
        if not len(todo := np.flatnonzero(hop >= 0)):
            break
        h = hop[todo]
        depth[todo] += depth[h]
        hop[todo] = hop[h]
    looped = hop >= 0
    depth[looped] = 0
    return np.where(looped, -1, parent), depth


def _inherit(code: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """An op without a stack of its own has its nearest enclosing op's that has one (pointer
    jumping over the op tree: log2(depth) passes, not one per level)."""
    found = nearest(parent, code >= 0)
    return np.where(found >= 0, code[np.clip(found, 0, None)], -1)


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


def user_frames(
    stack, library: tuple[str, ...] = (), own: tuple[str, ...] = ()
) -> tuple[pd.Categorical, pd.Categorical]:
    """:func:`sources` and :func:`calls` in one pass: each distinct stack is read once, each
    distinct frame parsed and judged once (stacks share most of their frames). ``own``: patterns
    of library code the user counts as theirs (``transformers/``), see :func:`library_test`."""
    # a categorical column's array is its Categorical (pandas-stubs types .array as ExtensionArray)
    cat = cast(pd.Categorical, stack.array) if isinstance(stack, pd.Series) else stack
    user = _user_line_of(tuple(library), tuple(own))
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


def _user_line_of(library: tuple[str, ...], own: tuple[str, ...] = ()):
    """``line(frame)``: ``file.py:42 forward`` for a file frame of the user's code, else None;
    remembered per frame text."""
    is_library = library_test(library, own)

    @functools.cache
    def line(frame: str) -> str | None:
        m = _FRAME.match(frame)
        return f"{m['file']}:{m['line']} {m['func']}" if m and not is_library(m["file"]) else None

    return line


def user_frame_parts(text: str, is_library) -> tuple[str, int, str, str | None] | None:
    """(file, first line, function, what it called) of a stack text's innermost frame that
    ``is_library(file)`` calls the user's, None where it has none."""
    frames = text.split(SEP)
    for i, frame in enumerate(frames):
        m = _FILE_FRAME.match(frame)
        if m and not is_library(m["file"]):
            return m["file"], int(m["line"]), m["func"], _callee(frames[i - 1]) if i else None
    return None


def frame_parts(frame: str) -> tuple[str, int, str] | None:
    """(file, line, function) of a file frame (``file.py(42): forward``), else None."""
    m = _FILE_FRAME.match(frame)
    return (m["file"], int(m["line"]), m["func"]) if m else None


def callee(frame: str) -> str:
    """The function a frame is in (:func:`_callee`)."""
    return _callee(frame)


def _callee(frame: str) -> str:
    """A frame's function: ``softmax`` of ``torch/nn/functional.py(1): softmax`` or of
    ``<built-in method softmax of Tensor object>``; else the frame as written (``nn.Module: Linear_0``)."""
    m = _FRAME.match(frame) or _CALLEE.match(frame)
    if m:
        return m["func"] if "func" in m.groupdict() else m["name"]
    return _INSTANCE.sub("", frame)  # nn.Module: Linear_35 -> nn.Module: Linear (one row, not one per layer)


@functools.cache
def library_test(extra: tuple[str, ...] = (), own: tuple[str, ...] = ()):
    """``is_library(path)`` under the rules and the user's patterns (a folder ends in ``/``).
    ``own``: patterns of the same form that are the user's code even where the rules or ``extra``
    say library (``transformers/`` when the model's code is what is being profiled)."""
    rules = source_rules()
    folders = tuple(rules.folders) + tuple(p for p in extra if p.endswith("/"))
    files = tuple(rules.files) + tuple(p for p in extra if not p.endswith("/"))
    markers = tuple(rules.markers)
    mine = _matcher(tuple(p for p in own if p.endswith("/")), tuple(p for p in own if not p.endswith("/")))
    theirs = _matcher(folders, files)

    @functools.cache  # per distinct file: a trace names a few hundred
    def is_library(path: str) -> bool:
        p = path.replace("\\", "/")
        return not mine(p) and (p.startswith(markers) or theirs(p))

    return is_library


def _matcher(folders: tuple[str, ...], files: tuple[str, ...]):
    """``matches(path)``: the path lies in one of ``folders`` or is one of ``files``."""
    ends = tuple("/" + f for f in files)

    def matches(p: str) -> bool:
        slashed = "/" + p
        return any("/" + f in slashed for f in folders) or p in files or p.endswith(ends)

    return matches
