"""Every file traceview writes appears whole or not at all, and is never one of its inputs.

A file is written to a temporary name in the folder it will live in, flushed to
disk, and only then renamed over the target (``os.replace`` is atomic within a
file system). Interrupted (Ctrl-C, SIGTERM, SIGHUP, a full disk, an exception), the
temporary file is removed and the target is left as it was: an existing file is never
truncated, and an input is never opened for writing.

The one guard for every writer (``-o``, ``--junit``, ``--plot``, ``annotate -o``, the cache,
the collectors): a target that is the same file as an input (same device and inode: through
symbolic links, hard links and other spellings of its path) is refused, by the command line
before anything is loaded (``refuse_inputs``) and again here for whatever a command reads
(``reading``). A target that exists and is not a regular file is never replaced: a FIFO with a
reader or a character device (``/dev/null``) is written directly, anything else refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from .errors import TraceviewError
from .replay import spoil
from .temporaries import remove, track, untrack

_NAME_KEEP = 100  # characters of the target's name kept in the temporary name (NAME_MAX is 255)
_TRIES = 100  # random temporary names tried before giving up


class OutputError(TraceviewError):
    """A file the user asked for could not be written (no such folder, no space, no permission)."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        super().__init__(f"{self.path}: cannot write: {problem}")


class InputTargetError(OutputError):
    """An output named is one of the command's inputs: writing it would destroy the input."""

    def __init__(self, path, source):
        super().__init__(
            path, f"it is the input {source} itself; name another file (the input stays as it is)"
        )


def identity(path) -> tuple[int, int] | None:
    """(device, inode) of the file ``path`` names, links followed; None when there is none."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # missing, a dangling link, a NUL in the name
        return None
    return st.st_dev, st.st_ino


_INPUTS: list[tuple[tuple[int, int], str]] = []  # identity and name of every file being read (``reading``)


def refuse_inputs(targets, inputs=()) -> None:
    """Raise InputTargetError for the first of ``targets`` (paths; None skipped) that is the
    same file as one of ``inputs`` or of the files registered by ``reading``."""
    known = [(identity(p), str(p)) for p in inputs] + _INPUTS
    for target in targets:
        ident = None if target is None else identity(target)
        if ident is None:  # a new file cannot be an input
            continue
        for other, name in known:
            if other == ident:
                raise InputTargetError(target, name)


@contextlib.contextmanager
def reading(paths):
    """While the block runs, no write here may target any of ``paths`` (the inputs)."""
    added = [(ident, str(p)) for p in paths if (ident := identity(p)) is not None]
    _INPUTS.extend(added)
    try:
        yield
    finally:
        for item in added:
            _INPUTS.remove(item)


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
    spoil("wrote a file")  # a command that writes a file is never answered from a record
    refuse_inputs([shown])
    kind = _kind(shown)
    if kind == "special":  # a FIFO or a device: written in place, never replaced by a regular file
        with _direct(shown) as fd_path:
            yield fd_path
        return
    target = _resolve(shown)
    if kind == "dir":
        raise OutputError(shown, "is a directory")
    if kind == "other":
        raise OutputError(shown, "not a regular file, a FIFO or a character device: it is never replaced")
    if target.exists() and not os.access(target, os.W_OK):  # rename would replace it: respect the protection
        raise OutputError(shown, "permission denied (the file is read-only)")
    tmp = None
    try:
        for name in _temp_names(target, suffix):
            tmp = name  # named before it exists: a Ctrl-C from here on still removes it
            track(name)  # ... and SIGTERM or SIGHUP too
            if _claim(name):
                break
            untrack(name)
            tmp = None  # another writer's file: never removed
        else:
            raise FileExistsError(f"no free temporary name beside {target.name[:_NAME_KEEP]}")
        os.chmod(tmp, _mode_for(target))  # mkstemp makes 0600
        yield Path(tmp)
        _fsync(tmp)
        os.replace(tmp, target)
        untrack(tmp)
        tmp = None
        _fsync(target.parent)  # the rename itself reaches the disk
    except OSError as exc:
        raise OutputError(shown, exc.strerror or str(exc)) from None
    finally:  # also on Ctrl-C (KeyboardInterrupt) and any other exception
        if tmp is not None:
            remove(tmp)
            untrack(tmp)


def _kind(path: Path) -> str:
    """ "new" (nothing there), "file", "dir", "special" (a FIFO or a character device, written in
    place) or "other" (a block device, a socket: refused), links followed."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return "new"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "special" if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) else "other"


@contextlib.contextmanager
def _direct(path: Path):
    """A path that writes into the FIFO or device ``path`` itself. A FIFO is opened without
    waiting: no process reading it is an error, not a hang. The descriptor stays open while
    the caller writes through ``/dev/fd/N``, so the reader sees one stream, not an early end."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        problem = "a FIFO that no process is reading" if exc.errno == errno.ENXIO else exc.strerror
        raise OutputError(path, problem or str(exc)) from None
    try:
        yield Path(f"/dev/fd/{fd}")  # opened again by the caller: a blocking descriptor of its own
    except OSError as exc:
        raise OutputError(path, exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


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
