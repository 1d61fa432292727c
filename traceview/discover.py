"""Which files to load: traces named on the command line, and the trace files in folders.

A file named by the user must be a trace (else an error). A folder contributes its
``.json``/``.json.gz``/``.gz`` files (and, with ``recursive``, its subfolders'); one
that turns out not to be a profiler trace is skipped and named, never silently, except the
collectors' own ``manifest.json``, recognised and left out. A folder with no traces of its own
but some in subfolders says so, and names ``-r/--recursive``.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from .errors import NotATraceError, TraceviewError

TRACE_SUFFIXES = (".json", ".json.gz", ".gz")
MANIFEST_NAME = "manifest.json"
MANIFEST_KEYS = {"collector", "collector_version", "collected"}
MANIFEST_MAX_BYTES = 1 << 20  # a manifest lists variants; anything larger is not one
HINT_COUNT_MAX = 1000


class Candidate(NamedTuple):
    path: str
    in_folder: bool  # found by scanning a folder, so it may be skipped when it is not a trace


def candidates(paths, *, recursive: bool = False) -> list[Candidate]:
    """Files as given; folders contribute their trace-named files, sorted."""
    out = []
    for p in map(Path, map(os.fspath, paths)):
        if not p.is_dir():
            out.append(Candidate(str(p), False))
            continue
        found = _trace_files(p, recursive)
        if not found:
            where = "or its subfolders " if recursive else ""
            raise TraceviewError(
                f"{p}: folder {where}holds no .json or .json.gz files{_deeper_hint(p, recursive)}"
            )
        out += [Candidate(f, True) for f in found]
    return out


def _trace_files(folder: Path, recursive: bool) -> list[str]:
    """The folder's trace-named files, sorted, less the collectors' manifests: a file the tool's
    own collectors write beside their traces is no news when that folder is compared."""
    files = folder.rglob("*") if recursive else folder.iterdir()
    return sorted(
        str(f)
        for f in files
        if f.is_file() and f.name.endswith(TRACE_SUFFIXES) and not is_collector_manifest(f)
    )


def _deeper_hint(folder: Path, recursive: bool) -> str:
    """Without --recursive, say when the traces are one level or more down (the usual layout of
    a collection per run); the count stops early in a huge tree."""
    if recursive:
        return ""
    deeper = (
        f
        for f in folder.rglob("*")
        if f.parent != folder
        and f.name.endswith(TRACE_SUFFIXES)
        and f.is_file()
        and not is_collector_manifest(f)
    )
    n = sum(1 for _ in itertools.islice(deeper, HINT_COUNT_MAX))
    if not n:
        return ""
    many = "+" if n == HINT_COUNT_MAX else ""
    return f"; its subfolders hold {n}{many} trace file(s): use -r/--recursive to include them"


def is_collector_manifest(path: Path) -> bool:
    """``manifest.json`` as the collectors write it (collectors/_common.py ``write_manifest``):
    a small JSON object with their ``collector`` and ``collected`` keys and no ``traceEvents``."""
    if path.name != MANIFEST_NAME:
        return False
    try:
        if path.stat().st_size > MANIFEST_MAX_BYTES:
            return False
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):  # unreadable: let the loader say why
        return False
    return isinstance(doc, dict) and doc.keys() >= MANIFEST_KEYS and "traceEvents" not in doc


def load_all(paths, load: Callable, *, recursive: bool = False) -> tuple[list, list[str]]:
    """Load every candidate with ``load``; returns the traces and the skipped folder files
    (each ``"PATH: why"``). An error when nothing loadable is left."""
    traces, skipped = [], []
    for c in candidates(paths, recursive=recursive):
        try:
            traces.append(load(c.path))
        except NotATraceError as exc:
            if not c.in_folder:
                raise
            skipped.append(str(exc))
    if not traces:
        hints = "".join(
            _deeper_hint(Path(os.fspath(p)), recursive) for p in paths if Path(os.fspath(p)).is_dir()
        )
        raise TraceviewError(
            f"no profiler trace among {len(skipped)} file(s): " + "; ".join(skipped[:3]) + hints
        )
    return traces, skipped
