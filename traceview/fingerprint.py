"""What a file and traceview itself are now, and where the cache lives: the keys of the columnar
cache (``traceview.cache``) and of the replay of a repeated command (``traceview.replay``).

Standard library only (and ``platformdirs`` when the default cache folder is asked for): the
replay reads these before pandas, numpy or click are imported.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from pathlib import Path

SAMPLE = 64 * 1024  # bytes hashed at each end of a file for its identity
PKG = Path(__file__).parent


def cache_dir(cache=None) -> Path | None:
    """The folder ``cache`` names: None/True -> the default folder, False -> None."""
    if cache is False:
        return None
    if cache is None or cache is True:
        env = os.environ.get("TRACEVIEW_CACHE_DIR")
        if env:
            return Path(env).expanduser()
        import platformdirs  # only here: a folder named by the environment needs no platform look-up

        # the platform's user cache folder: $XDG_CACHE_HOME or ~/.cache on Linux,
        # ~/Library/Caches on macOS, %LOCALAPPDATA% on Windows (no vendor level: appauthor=False)
        return Path(platformdirs.user_cache_dir("traceview", appauthor=False))
    return Path(os.fspath(cache)).expanduser()


def identity(path) -> dict | None:
    """What the file at ``path`` is now: size, mtime_ns, ctime_ns, inode, device and a hash of
    its first and last ``SAMPLE`` bytes. None for what is not a regular file (a pipe or a
    device is never cached, and never read here). The cache takes it before a load reads the
    trace and again after: the entry is stored only when both agree."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # never waits on a swapped-in pipe
    except (OSError, ValueError):
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
            h = hashlib.sha256(fh.read(SAMPLE))
            if st.st_size > SAMPLE:
                fh.seek(max(SAMPLE, st.st_size - SAMPLE))
                h.update(fh.read(SAMPLE))
    except OSError:
        return None
    return {
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "ino": st.st_ino,
        "dev": st.st_dev,
        "sample": h.hexdigest()[:32],
    }


@functools.cache
def _code_digest() -> str:
    """Digest of traceview's modules and rule files, worked out once per process: the replay's key
    and every trace's cache key ask for it (listing and stat-ing its 150 files again at each ask
    took 10 ms), and the code a process runs is what it read when it started (its rule files are
    read once too)."""
    files = sorted(p for p in PKG.rglob("*") if p.suffix in (".py", ".toml") and "__pycache__" not in p.parts)
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(PKG)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()
