"""The line to edit: the line inside a recorded function that made a call, read from the source.

torch's Python tracer records each frame's ``co_firstlineno`` (the ``def`` line, or its first
decorator's), not the line running. Where the file is present locally, the call a frame made
(``masked_fill``, its callee in the stack) is found inside that function with ``ast``: the file
is parsed, never imported or run. The path comes from trace text, which is untrusted: only a
regular ``.py`` file under the given root (the current folder by default) of at most
``MAX_SOURCE_BYTES`` is read, after following links, so a trace cannot make traceview read
anything outside the folder the user named.
"""

from __future__ import annotations

import ast
import os
import re
import stat
from pathlib import Path

from ...replay import depend

#: larger files are not read: the largest module of torch and transformers is under 1 MiB
MAX_SOURCE_BYTES = 4 * 2**20
FROM_SOURCE = "source"
FIRST_LINE = "first line"
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class CallLines:
    """``resolve(file, first_line, function, callee)`` -> (line, how), each file read once."""

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root if root is not None else ".").resolve()
        self._trees: dict[str, ast.Module | None] = {}
        self._found: dict[tuple, tuple[int, str]] = {}

    def resolve(self, file: str, first_line: int, function: str, callee: str | None) -> tuple[int, str]:
        """The line that calls ``callee`` inside ``function`` (which starts at ``first_line``) and
        ``FROM_SOURCE``; else ``first_line`` and ``FIRST_LINE`` (no file, no such function, no such
        call). Several calls of it: the first, and how says how many."""
        key = (file, first_line, function, callee)
        if key not in self._found:
            self._found[key] = self._resolve(*key)
        return self._found[key]

    def _resolve(self, file: str, first_line: int, function: str, callee: str | None) -> tuple[int, str]:
        tree = self._tree(file) if callee else None
        body = _function(tree, first_line, function) if tree is not None else None
        lines = sorted(set(_calls(body, str(callee)))) if body is not None else []
        if not lines:
            return first_line, FIRST_LINE
        how = FROM_SOURCE if len(lines) == 1 else f"{FROM_SOURCE}, first of {len(lines)} calls"
        return lines[0], how

    def _tree(self, file: str) -> ast.Module | None:
        if file not in self._trees:
            depend(self.root / file)  # what the command prints depends on it: a replay checks it first
            self._trees[file] = _parsed(self._readable(file))
        return self._trees[file]

    def _readable(self, file: str) -> Path | None:
        """``file`` (relative to the root, or absolute) as a regular .py file under the root, else None."""
        try:
            path = Path(file)
            path = (path if path.is_absolute() else self.root / path).resolve()
            if path.suffix != ".py" or not path.is_relative_to(self.root):
                return None
            st = path.stat()
        except (OSError, ValueError, RuntimeError):  # NUL in the name, a link loop, no such file
            return None
        return path if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_SOURCE_BYTES else None


def _parsed(path: Path | None) -> ast.Module | None:
    """The file parsed, None where it cannot be. Opened without blocking and checked again once
    open: a file swapped for a FIFO or a device after ``_readable`` looked is not read."""
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            data = f.read(MAX_SOURCE_BYTES + 1)
        return ast.parse(data) if len(data) <= MAX_SOURCE_BYTES else None
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _function(tree: ast.Module, first_line: int, name: str) -> ast.AST | None:
    """The function ``name`` whose code starts at ``first_line`` (its def, or first decorator,
    line: what co_firstlineno is); the module itself for ``<module>``."""
    if name == "<module>":
        return tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            starts = [node.lineno, *(d.lineno for d in node.decorator_list)]
            if min(starts) == first_line or node.lineno == first_line:
                return node
        elif isinstance(node, ast.Lambda) and name == "<lambda>" and node.lineno == first_line:
            return node
    return None


def _calls(scope: ast.AST, callee: str):
    """Lines of the calls of ``callee`` (``f(..)``, ``x.f(..)``) in ``scope``'s own code, not in
    functions or classes defined inside it (those are frames of their own). A call written over
    several lines is at the line of its name (``.masked_fill`` of a chained call)."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, _DEFS):
            continue
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == callee:
                yield f.lineno
            elif isinstance(f, ast.Attribute) and f.attr == callee:
                yield f.end_lineno or f.lineno
        todo.extend(ast.iter_child_nodes(node))


_SOURCE = re.compile(r"^(?P<file>.+):(?P<line>\d{1,9}) (?P<func>\S.*)$")


def line_to_edit(source: str, call: str, lines: CallLines) -> tuple[str, str]:
    """A ``source`` as op_sources writes it (``file:first_line function``) with its line moved to
    the call of ``call`` inside that function where the file is present (:meth:`CallLines.resolve`),
    and how the line was found (``FROM_SOURCE``/``FIRST_LINE``); ``(source, "")`` where the text is
    not a source line."""
    m = _SOURCE.match(source or "")
    if not m:
        return source, ""
    line, how = lines.resolve(m["file"], int(m["line"]), m["func"], call or None)
    return f"{m['file']}:{line} {m['func']}", how
