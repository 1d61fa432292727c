"""Which files to load: traces named on the command line, and the trace files in folders.

A file named by the user must be a trace (else an error). A folder contributes its
``.json``/``.json.gz``/``.gz`` files (and, with ``recursive``, its subfolders'); one
that turns out not to be a profiler trace is skipped and named, never silently.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, NamedTuple

from .errors import NotATraceError, TraceviewError

TRACE_SUFFIXES = (".json", ".json.gz", ".gz")


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
        files = p.rglob("*") if recursive else p.iterdir()
        found = sorted(str(f) for f in files if f.is_file() and f.name.endswith(TRACE_SUFFIXES))
        if not found:
            where = "or its subfolders " if recursive else ""
            raise TraceviewError(f"{p}: folder {where}holds no .json or .json.gz files")
        out += [Candidate(f, True) for f in found]
    return out


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
        raise TraceviewError(f"no profiler trace among {len(skipped)} file(s): " + "; ".join(skipped[:3]))
    return traces, skipped
