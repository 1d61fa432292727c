"""Fitting a table to a width: shorten long text in the middle, then split the columns.

Widths come from ``COLUMNS`` when it is set, else from the terminal; output that is
piped with no ``COLUMNS`` fits ``PIPED_WIDTH`` (a kernel name of thousands of characters
padded every row of its table to that width: 68 KB for one diff); whole names stay in
JSON/CSV, in a file (``-o``) and with ``--wide``. Numbers are never
shortened; text columns shrink to a floor (30 for names, so a kernel name stays
readable; a label of up to 32 characters not at all; a list cell to its first item and
``+N more``), and when the row is still too wide the columns go on in a second block
that repeats the key column (the first name, rule or cause column, else the first).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap

ELLIPSIS = "…"
NAME_FLOOR = 30
TEXT_FLOOR = 12
#: columns that hold names (kernels, ops, chains, traces): shortened no further than NAME_FLOOR
NAME_COLUMNS = {
    "name",
    "kernel",
    "example",
    "a_example",
    "b_example",
    "match_key",
    "launched_by",
    "chain",
    "op",
    "trace",
    "label",
    "short_name",
    "input_dims",
}
#: a label this short in these columns (or the key column) is never shortened
KEEP_WHOLE = 32
#: short labels: kept whole up to KEEP_WHOLE, so "idle: host-bound" and a rule id read as written
LABEL_COLUMNS = NAME_COLUMNS | {"rule", "cause", "device", "category", "family", "metric", "status"}
#: the widest a list column's floor (its first item and ``+N more``) gets
LIST_FLOOR = 40
#: the column each continuation block repeats: the first of these (by position), else the first
KEY_COLUMNS = NAME_COLUMNS | {"rule", "cause"}


#: the width of a table piped with no ``COLUMNS``: wide enough for every column of a row whole
#: but the long names, which are cut here instead of padding each line to thousands of characters
PIPED_WIDTH = 200


def output_width() -> int:
    """The width a table is fitted to when none is given: the terminal's, else ``PIPED_WIDTH``."""
    return terminal_width() or PIPED_WIDTH


def terminal_width() -> int | None:
    """``COLUMNS`` when set, else the terminal's width; None (unlimited) when piped."""
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, the middle replaced by an ellipsis."""
    if len(text) <= width:
        return text
    if width <= 1:
        return text[:width]
    head = (width - 1 + 1) // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def column(values: list[str], width: int) -> list[str]:
    """One column's cells in ``width``: each shortened in the middle, unless that makes different
    values read the same (every rank file ``dlrm_kine….json.gz``); then the text the column's
    values share at both ends gives way first, so the part that tells them apart survives."""
    # a cell that fits stays as it is, list or not (both cuts return it whole)
    short = {
        v: v if len(v) <= width else _list_cut(v, width) if _is_list(v) else middle(v, width) for v in values
    }
    clashes: dict[str, list[str]] = {}
    for v, cut in short.items():
        clashes.setdefault(cut, []).append(v)
    if any(len(group) > 1 for group in clashes.values()):  # "8 files" stays: only cut values count
        short.update(_distinct_parts([v for v in short if len(v) > width], width))
    for group in clashes.values():  # values that read the same still: the shared ends give way
        if len(group) > 1 and len({short[v] for v in group}) < len(group):
            head, tail = _shared_ends(group)
            short.update((v, _keep_core(v, width, head, tail)) for v in group)
    return [short[v] for v in values]


_TOKEN = re.compile(r"[^._\-\s/]+")


def _distinct_parts(values: list[str], width: int) -> dict[str, str]:
    """Each value as ``…part…``, ``part`` the shortest word of the name that tells them all apart
    (``…worker0…`` for ``dlrm_kineto__worker0_step_12.1694128201545.pt.trace.json.gz``); {} when
    no one word does (or it does not fit ``width``)."""
    words = [_TOKEN.findall(v) for v in values]
    if len(values) < 2 or len({len(w) for w in words}) != 1:
        return {}
    best = None
    for i in range(len(words[0])):
        column = [w[i] for w in words]
        if len(set(column)) == len(values):
            size = max(map(len, column))
            best = best if best is not None and best[0] <= size else (size, i)
    if best is None or best[0] + 2 > width:
        return {}
    return {v: _marked(v, w[best[1]]) for v, w in zip(values, words, strict=True)}


def _marked(value: str, part: str) -> str:
    """``part`` with an ellipsis on each side where ``value`` goes on."""
    return (
        (ELLIPSIS if not value.startswith(part) else "")
        + part
        + (ELLIPSIS if not value.endswith(part) else "")
    )


def _items(text: str) -> list[str]:
    """``text`` split at its top-level ", " (not inside brackets: ``f<int, float>`` is one item)."""
    if ", " not in text:  # one item: no character walked
        return [text]
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "([{<") - (ch in ")]}>")
        if depth == 0 and text.startswith(", ", i):
            items.append(text[start:i])
            start = i + 2
    return [*items, text[start:]]


#: a cell with any of these is a kernel's signature, not a list of names
_BRACKETS = frozenset("()<>[]{}")


def _is_list(text: str) -> bool:
    """A list cell: two or more items of one to three words (``sgemm 63%, splitK reduce 37%``); a
    sentence with a comma is not one (its clauses run longer). A bracket anywhere is in some item,
    so such a cell is none, told before its items are walked (a kernel signature's hundreds of
    characters, in every cell of a diff's kernel tables); without brackets every ", " is an item's
    end."""
    if ", " not in text or not _BRACKETS.isdisjoint(text):
        return False
    return all(0 < len(i.split()) <= 3 for i in text.split(", "))


def _list_cut(text: str, width: int) -> str:
    """A list cell in ``width``: as many whole items as fit, then ``+N more``; never mid-item
    (the first item alone is shortened in the middle only where nothing else fits)."""
    if len(text) <= width:
        return text
    items = _items(text)
    for k in range(len(items) - 1, 0, -1):
        cut = ", ".join(items[:k]) + f", +{len(items) - k} more"
        if len(cut) <= width:
            return cut
    more = f", +{len(items) - 1} more"
    return middle(items[0], width - len(more)) + more if width - len(more) >= 8 else middle(text, width)


def _list_floor(cells: list[str]) -> int:
    """The width a list column needs for each cell's first item and its ``+N more``."""
    lists = [_items(c) for c in cells if _is_list(c)]
    return max((len(f"{items[0]}, +{len(items) - 1} more") for items in lists), default=0)


def fit_rows(rows: list[list[str]], block: list[tuple[int, int]]) -> list[list[str]]:
    """The rows with the cells of ``block``'s columns fitted to their widths by ``column``."""
    out = [list(r) for r in rows]
    for i, w in block:
        for r, cell in zip(out, column([r[i] for r in rows], w), strict=True):
            r[i] = cell
    return out


def _shared_ends(values: list[str]) -> tuple[int, int]:
    """How many leading and trailing characters all ``values`` share (not overlapping)."""
    # character-wise on purpose: these are display strings, not paths
    head = len(os.path.commonprefix(values))  # noqa: RUF071
    tail = len(os.path.commonprefix([v[::-1] for v in values]))  # noqa: RUF071
    return head, min(tail, min(map(len, values)) - head)


def _keep_core(text: str, width: int, head: int, tail: int) -> str:
    """``text`` in ``width`` keeping its middle ``text[head:-tail]`` whole where it fits, with what
    room is left split between the ends; else the ends of that middle, where the values differ."""
    if len(text) <= width:
        return text
    core, start, end = text[head : len(text) - tail], text[:head], text[len(text) - tail :]
    dots = bool(start) + bool(end)
    room = width - len(core) - dots
    if room < 0:
        inner = max(width - dots, 1)
        return (ELLIPSIS if start else "") + middle(core, inner) + (ELLIPSIS if end else "")
    n_end = min(len(end), room // 2)
    n_start = min(len(start), room - n_end)
    n_end = min(len(end), room - n_start)
    left = start[:n_start] + (ELLIPSIS if n_start < len(start) else "")
    right = (ELLIPSIS if n_end < len(end) else "") + (end[len(end) - n_end :] if n_end else "")
    return left + core + right


def wrap(text: str, width: int | None, first: str = "", rest: str = "") -> list[str]:
    if width is None:
        return [first + text]
    return textwrap.wrap(
        text, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False
    ) or [first.rstrip()]


def _floor(header: str, natural: int, numeric: bool, cells: list[str], key: bool = False) -> int:
    """How narrow a column may get: numbers and short labels (the key's too) not at all."""
    if numeric or ((key or header in LABEL_COLUMNS) and natural <= KEEP_WHOLE):
        return natural
    want = NAME_FLOOR if header in NAME_COLUMNS else max(TEXT_FLOOR, min(len(header), 20))
    # a list's floor at most LIST_FLOOR: with a 32-wide key it still fits 80 columns
    return min(natural, max(want, min(_list_floor(cells), LIST_FLOOR)))


def _cap(widths: list[int], floors: list[int], budget: int) -> list[int]:
    """The widths with the widest shrunk to a common cap (not below their floor) to fit ``budget``."""
    if sum(widths) <= budget:
        return widths
    lo, hi = 0, max(widths)
    while lo < hi:  # the largest cap that fits
        mid = (lo + hi + 1) // 2
        if sum(min(w, max(mid, f)) for w, f in zip(widths, floors, strict=True)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return [min(w, max(lo, f)) for w, f in zip(widths, floors, strict=True)]


def layout(
    header: list[str],
    rows: list[list[str]],
    numeric: list[bool],
    width: int | None,
    gap: int = 2,
    edge: int = 0,
) -> list[list[tuple[int, int]]]:
    """Blocks of (column index, width) whose lines fit ``width`` (``gap`` between columns,
    ``edge`` around the row). One block with the natural widths when ``width`` is None."""
    natural = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    if width is None:
        return [list(enumerate(natural))]
    key = next((i for i, h in enumerate(header) if h in KEY_COLUMNS), 0)
    floors = [
        _floor(h, n, num, [r[i] for r in rows], i == key)
        for i, (h, n, num) in enumerate(zip(header, natural, numeric, strict=True))
    ]
    budget = width - edge - gap * (len(header) - 1)
    widths = _cap(natural, floors, budget)
    if sum(widths) <= budget:
        return [list(enumerate(widths))]
    widths = [min(w, f) for w, f in zip(widths, floors, strict=True)]
    blocks, current = [], [key]
    for i in range(len(header)):
        if i == key:
            continue
        trial = [*current, i]
        if len(current) > 1 and sum(widths[j] for j in trial) + gap * (len(trial) - 1) + edge > width:
            blocks.append(current)
            current = [key, i]
        else:
            current = trial
    blocks.append(current)
    out = []
    for block in blocks:  # each block's spare room goes back to its shortened columns
        room = width - edge - gap * (len(block) - 1)
        fitted = _cap([natural[j] for j in block], [min(widths[j], floors[j]) for j in block], room)
        out.append(list(zip(block, fitted, strict=True)))
    return out
