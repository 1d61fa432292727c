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
import stat
import tempfile
from pathlib import Path

from .errors import TraceviewError

_NAME_KEEP = 100  # characters of the target's name kept in the temporary name (NAME_MAX is 255)


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
    look at (matplotlib picks its format by suffix). A symbolic link is written through
    (the file it points to is replaced, the link stays), and a file replaced keeps its
    permission bits."""
    shown = Path(path)
    target = _resolve(shown)
    if target.is_dir():
        raise OutputError(shown, "is a directory")
    if target.exists() and not os.access(target, os.W_OK):  # rename would replace it: respect the protection
        raise OutputError(shown, "permission denied (the file is read-only)")
    tmp = None
    try:
        tmp = _make_temp(target, suffix)
        os.chmod(tmp, _mode_for(target))  # mkstemp makes 0600
        yield Path(tmp)
        _fsync(tmp)
        os.replace(tmp, target)
        tmp = None
        _fsync(target.parent)  # the rename itself reaches the disk
    except OSError as exc:
        raise OutputError(shown, exc.strerror or str(exc)) from None
    finally:  # also on Ctrl-C (KeyboardInterrupt) and any other exception
        if tmp is not None:
            _remove(tmp)


@contextlib.contextmanager
def atomic_open(path, mode: str = "w", **kwargs):
    """``open`` for writing, made atomic: the file appears at ``path`` only once complete."""
    if not set(mode) & {"w"}:
        raise ValueError(f"atomic_open writes new files: mode {mode!r}")
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as fh:
        yield fh


def write_text(path, text: str, encoding: str = "utf-8") -> None:
    with atomic_open(path, "w", encoding=encoding, newline="") as fh:
        fh.write(text)


def write_bytes(path, data: bytes) -> None:
    with atomic_open(path, "wb") as fh:
        fh.write(data)


def _resolve(path: Path) -> Path:
    """The file a symbolic link (or a chain of them) points to; any other path as given."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _make_temp(target: Path, suffix: str) -> str:
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:_NAME_KEEP]}.", suffix=f"{suffix}.tmp", dir=folder)
    os.close(fd)
    return tmp


def _mode_for(target: Path) -> int:
    """An existing file's permission bits (a private file stays private), else the usual
    mode of a new file under the umask."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (os.umask can
    only be read by setting it, which races with other threads creating files)."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
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
