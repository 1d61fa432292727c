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
import secrets
import stat
from pathlib import Path

from .errors import TraceviewError

_NAME_KEEP = 100  # characters of the target's name kept in the temporary name (NAME_MAX is 255)
_TRIES = 100  # random temporary names tried before giving up


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
        for name in _temp_names(target, suffix):
            tmp = name  # named before it exists: a Ctrl-C from here on still removes it
            if _claim(name):
                break
            tmp = None  # another writer's file: never removed
        else:
            raise FileExistsError(f"no free temporary name beside {target.name[:_NAME_KEEP]}")
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


def _temp_names(target: Path, suffix: str):
    """Hidden names beside ``target`` for its temporary file, a fresh random one each time."""
    folder = target.parent if str(target.parent) else Path(".")
    for _ in range(_TRIES):
        yield str(folder / f".{target.name[:_NAME_KEEP]}.{secrets.token_hex(4)}{suffix}.tmp")


def _claim(name: str) -> bool:
    """Create ``name`` (private, 0600), or False when it exists already (``O_EXCL``: a link
    there is not followed)."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


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
