"""Fitting a table to a width: shorten long text in the middle, then split the columns.

Widths come from ``COLUMNS`` when it is set, else from the terminal; output that is
piped with no ``COLUMNS`` is not fitted (scripts get whole lines). Numbers are never
shortened; text columns shrink to a floor (30 for names, so a kernel name stays
readable), and when the row is still too wide the columns go on in a second block
that repeats the name column.
"""

from __future__ import annotations

import os
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
    "short_name",
    "input_dims",
}


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
    short = {v: middle(v, width) for v in values}
    clashes: dict[str, list[str]] = {}
    for v, cut in short.items():
        clashes.setdefault(cut, []).append(v)
    for group in clashes.values():  # values that read the same (the column's "8 files" does not)
        if len(group) > 1:
            head, tail = _shared_ends(group)
            short.update((v, _keep_core(v, width, head, tail)) for v in group)
    return [short[v] for v in values]


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


def _floor(header: str, natural: int, numeric: bool) -> int:
    if numeric:
        return natural
    want = NAME_FLOOR if header in NAME_COLUMNS else max(TEXT_FLOOR, min(len(header), 20))
    return min(natural, want)


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
    floors = [_floor(h, n, num) for h, n, num in zip(header, natural, numeric, strict=True)]
    budget = width - edge - gap * (len(header) - 1)
    widths = _cap(natural, floors, budget)
    if sum(widths) <= budget:
        return [list(enumerate(widths))]
    key = next((i for i, h in enumerate(header) if h in NAME_COLUMNS), 0)
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
