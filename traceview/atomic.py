"""Every file traceview writes appears whole or not at all.

A file is written to a temporary name in the folder it will live in, flushed to
disk, and only then renamed over the target (``os.replace`` is atomic within a
file system). Interrupted (Ctrl-C, a full disk, an exception), the temporary
file is removed and the target is left as it was: an existing file is never
truncated, and an input is never opened for writing.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .errors import TraceviewError


class OutputError(TraceviewError):
    """A file the user asked for could not be written (no such folder, no space, no permission)."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        super().__init__(f"{self.path}: cannot write: {problem}")


def same_file(a, b) -> bool:
    """True when paths ``a`` and ``b`` name one file (links and relative paths included)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


@contextlib.contextmanager
def atomic_path(path, suffix: str = ""):
    """Yield a temporary path beside ``path``; rename it onto ``path`` when the block ends
    without an exception, else remove it. ``suffix`` keeps an extension some writers
    look at (matplotlib picks its format by suffix)."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=f"{suffix}.tmp", dir=folder)
    except OSError as exc:
        raise OutputError(target, exc.strerror or str(exc)) from None
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a written file gets the usual mode
        yield Path(tmp)
        _fsync(tmp)
        os.replace(tmp, target)
    except OSError as exc:
        _remove(tmp)
        raise OutputError(target, exc.strerror or str(exc)) from None
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_open(path, mode: str = "w", **kwargs):
    """``open`` for writing, made atomic: the file appears at ``path`` only once complete."""
    if not set(mode) & {"w"}:
        raise ValueError(f"atomic_open writes new files: mode {mode!r}")
    with atomic_path(path) as tmp:
        with open(tmp, mode, **kwargs) as fh:
            yield fh


def write_text(path, text: str, encoding: str = "utf-8") -> None:
    with atomic_open(path, "w", encoding=encoding, newline="") as fh:
        fh.write(text)


def write_bytes(path, data: bytes) -> None:
    with atomic_open(path, "wb") as fh:
        fh.write(data)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync(path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove(path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
