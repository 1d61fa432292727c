"""The replay of a repeated command: the very same command line, run again on unchanged inputs
with the same traceview, prints what it printed the first time from a record of its output,
before pandas, numpy, click or any command is imported (issue 35).

Standard library only (and ``platformdirs`` for the default cache folder): ``_entry`` asks here
first. A record is written by a normal run of an analysis command (``RECORDED``) that

* exits 0 and printed at most ``MAX_OUTPUT`` bytes, every one of them delivered (a pipe closed
  early, ``| head``, is never recorded);
* wrote no file (``-o``, ``--junit``, ``--plot``: ``atomic`` calls ``spoil``), read no standard
  input (``-``, a pipe or a device among the arguments is never recorded) and runs no Dask workers;
* ran with the cache on: no ``--no-cache``, ``TRACEVIEW_CACHE_MAX_MB`` not 0, a usable folder;
* drew no progress display: stderr on a terminal that got a carriage return (``ranks``' live
  count) is never recorded, so a replay never shows a display of work it did not do;
* said nothing that only one run can say (a cache entry rebuilt after failing its check: the
  cache calls ``spoil``), and whose inputs were the same files after the run as before it.

Beyond its arguments, a command's output can depend on files a trace names: the Python source
files under the current folder in which the line to edit is looked for (``call_lines`` calls
``depend`` first). A record holds their identities (or that they were absent), and a replay
checks them before it prints.

The record's key (``key``) is a SHA-256 of a canonical JSON of: the arguments (as their own
hash), the current folder, the identity (``fingerprint.identity``) of every argument that names
a file (a ``--opt=value``'s value too) and, for a folder, the sorted listing of its files with
theirs (more than ``MAX_LISTED`` entries: no replay); traceview's version and code digest and
its compiled parts' sizes and times; the interpreter, its flags (``-X``, ``-W``, ``-O``) and
the folders it imports from (an installed or upgraded package changes them); every environment
variable that can change the output (``ENV_NAMES``, ``ENV_PREFIXES``); whether
stdin/stdout/stderr are terminals and their size. The arguments' text reaches the disk only
through that hash: the record is named by the key and holds the output and the files it depends
on.

Records live in ``<cache folder>/replay/`` (private, 0700), each written to a temporary name and
renamed, CRC-32 checked when read (a damaged one is a miss, and removed), at most
``MAX_RECORDS`` of them and ``MAX_BYTES`` in all (the least recently used go first);
``traceview cache info`` counts them, ``traceview cache clear`` removes them. A replay writes the
same bytes to the same streams, flushed where the run flushed them, and exits 0.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import secrets
import stat
import struct
import sys
import time
import zlib
from pathlib import Path

from . import fingerprint
from ._version import __version__
from .temporaries import remove as _remove
from .temporaries import temporary

FORMAT = 1
MAGIC = b"TVREPLAY2\n"
FOLDER = "replay"  # inside the cache folder
SUFFIX = ".rec"
MAX_OUTPUT = 4 * 2**20  # stdout + stderr bytes a record may hold
MAX_RECORDS = 256
MAX_BYTES = 64 * 2**20
MAX_LISTED = 2_000  # entries of the folders named on the command line (each file's ends are read)
_TMP_MAX_AGE_S = 3600  # a temporary record older than this was left by a crash

#: commands that read traces and print: the others write files, run programs or change the cache
RECORDED = frozenset(
    {"summary", "kernels", "diff", "compare", "timeline", "exposed", "memory", "ranks", "advise", "stacks"}
)
#: options after which a run is never recorded: no cache, Dask workers (their own processes)
NEVER = frozenset({"--no-cache", "--workers", "--scheduler"})
#: options that print click's help or version instead of running the command
HELP = frozenset({"--help", "-h", "--version"})
#: the environment that can change what a command prints (the renderers, rich, click, Python's I/O)
ENV_NAMES = (
    "COLUMNS",
    "LINES",
    "NO_COLOR",
    "FORCE_COLOR",
    "TERM",
    "COLORTERM",
    "TERM_PROGRAM",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "JUPYTER_COLUMNS",
    "JUPYTER_LINES",
    "DATABRICKS_RUNTIME_VERSION",
    "LANG",
    "LANGUAGE",
    "TZ",
    "HOME",
    "XDG_CACHE_HOME",
)
ENV_PREFIXES = ("TRACEVIEW_", "_TRACEVIEW", "LC_", "PYTHON")
_CHUNK = struct.Struct("<cBI")  # stream (b"o"/b"e"), flushed after it (0/1), length

#: why this process's output may not be recorded (``spoil``); process-wide by nature, like
#: ``atomic``'s list of inputs: any layer may find a reason while the command runs
_SPOILED: list[str] = []


def spoil(reason: str) -> None:
    """This run's output must not be recorded: it wrote a file, or said what only it can say."""
    _SPOILED.append(reason)


def spoiled() -> bool:
    """Whether this run's output must not be recorded (``spoil``)."""
    return bool(_SPOILED)


#: the files beyond its arguments that this run's output depends on (``depend``), each with its
#: identity when first looked at (None: absent, or not a regular file)
_DEPENDS: dict[str, dict | None] = {}
MAX_DEPENDS = 1000


def depend(path) -> None:
    """This run's output depends on the file at ``path`` (a source file a trace names, read from the
    current folder to find a line): a record holds its identity, and a replay first checks that it
    is still that file, or still absent. Called before the file is read."""
    try:
        name = os.fspath(path)
        if name not in _DEPENDS:
            _DEPENDS[name] = fingerprint.identity(name)
    except (TypeError, ValueError):  # no path: nothing a replay could check
        spoil("a file that cannot be named")
    if len(_DEPENDS) > MAX_DEPENDS:
        spoil("too many files to check")


def depends() -> bool:
    """Whether this run's output depends on files beyond its arguments (``depend``)."""
    return bool(_DEPENDS)


def _unchanged(depends: dict) -> bool:
    return all(fingerprint.identity(name) == ident for name, ident in depends.items())


# --------------------------------------------------------------------------- the key


def folder() -> Path | None:
    """``<cache folder>/replay``, or None when the cache is off (``TRACEVIEW_CACHE_MAX_MB`` 0 or
    not a number: the run itself says what is wrong with it)."""
    raw = os.environ.get("TRACEVIEW_CACHE_MAX_MB", "").strip()
    try:
        if raw and not float(raw) > 0:
            return None
    except ValueError:
        return None
    base = fingerprint.cache_dir(None)
    return None if base is None else base / FOLDER


def key(argv: list[str], files: list | None = None) -> str | None:
    """The record's name for command line ``argv`` (the arguments after the program's name) as
    things are now; None when this command line is never replayed. ``files``: ``_files(argv)``
    already taken (else taken here)."""
    if not argv or argv[0] not in RECORDED or any(a == "-" or a.split("=")[0] in NEVER for a in argv):
        return None
    if any(a in HELP for a in argv):  # click's help names the program as it was called: not recorded
        return None
    files = _files(argv) if files is None else files
    if files is None:
        return None
    parts = {
        "format": FORMAT,
        "argv": _hash(json.dumps(argv)),
        "cwd": _hash(os.getcwd()),
        "files": files,
        **interpreter(),
        "env": sorted((k, v) for k, v in os.environ.items() if k in ENV_NAMES or k.startswith(ENV_PREFIXES)),
        "tty": [_terminal(fd) for fd in (0, 1, 2)],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def interpreter() -> dict:
    """What runs: traceview's version, code digest and compiled parts, the interpreter, its flags,
    and the folders it imports from (installing or upgrading a package changes them: pandas,
    pyarrow, rich), so that what was printed by one of them is known to be what this one prints."""
    return {
        "version": __version__,
        "code": fingerprint._code_digest(),
        "native": _stats(p for p in fingerprint.PKG.rglob("*") if p.suffix in (".so", ".pyd")),
        "python": [sys.version, sys.executable, sys.prefix],
        # the interpreter's own flags: -X utf8, -W error, -O, -I ... can change what is printed
        "flags": [list(sys.flags), sys.warnoptions, sorted(map(str, sys._xoptions.items()))],
        "paths": _stats(Path(p) for p in sys.path[1:] if p),
    }


def _files(argv: list[str]) -> list | None:
    """[hash of the argument, identity or listing] of each argument naming a file or folder;
    None when one can never be replayed."""
    files = []
    for name in dict.fromkeys(a for arg in argv for a in (arg, arg.partition("=")[2]) if a):
        found = _named(name)
        if found is False:
            return None
        if found is not None:
            files.append([_hash(name), found])
    return files


def _named_bytes(files: list) -> int:
    """The size of the files the arguments name (``_files``), folders' files included."""
    listed = [f[1] for f in files]
    return sum(x["size"] for x in listed if isinstance(x, dict)) + sum(
        x[1]["size"] for f in listed if isinstance(f, list) for x in f
    )


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _named(arg: str):
    """What ``arg`` names: a file's identity, a folder's listing, None for no such path, False for
    what is never replayed (a pipe, a device, an unreadable or too large folder)."""
    try:
        st = os.stat(arg)
    except (OSError, ValueError):
        return None if not os.path.islink(arg) else False  # a dangling link: its target may appear
    if stat.S_ISREG(st.st_mode):
        return fingerprint.identity(arg) or False
    if stat.S_ISDIR(st.st_mode):
        return _listing(arg)
    return False


def _listing(top: str):
    """Every file under folder ``top`` (sorted, relative) with its identity; False past
    ``MAX_LISTED`` entries, for a link to a folder, a pipe or what cannot be read."""
    found = []
    failed: list[OSError] = []
    for here, dirs, names in os.walk(top, onerror=failed.append):
        dirs.sort()
        for name in dirs:
            if os.path.islink(os.path.join(here, name)):
                return False  # followed by some readers, not by this walk
        for name in sorted(names):
            ident = fingerprint.identity(os.path.join(here, name))
            if ident is None:
                return False
            found.append([os.path.relpath(os.path.join(here, name), top), ident])
        if len(found) + len(dirs) > MAX_LISTED:
            return False
    return False if failed else found


def _stats(paths) -> list:
    out = []
    for p in sorted(paths):
        try:
            st = p.stat()
        except OSError:
            continue
        out.append([str(p), st.st_size, st.st_mtime_ns, st.st_ino])
    return out


def _terminal(fd: int):
    """False, or the size of the terminal ``fd`` is."""
    try:
        return list(os.get_terminal_size(fd)) if os.isatty(fd) else False
    except OSError:
        return False


# --------------------------------------------------------------------------- reading, replaying


def replay(name: str, where: Path) -> bool:
    """Write record ``name``'s output to stdout and stderr, as it was written; False (nothing
    written) when there is no such record or it fails its check (then it is removed)."""
    path = where / (name + SUFFIX)
    found = _read(path)
    if found is None:
        return False
    depends, chunks = found
    if not _unchanged(depends):  # a source file it read changed: a miss (the run records anew)
        return False
    streams = {b"o": sys.stdout, b"e": sys.stderr}
    try:
        for tag, flushed, data in chunks:
            stream = streams[tag]
            stream.flush()
            stream.buffer.write(data)
            if flushed:
                stream.buffer.flush()
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # as a run does (``friendly``): a closed pipe is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    with contextlib.suppress(OSError):
        os.utime(path)  # the least recently used go first
    return True


def _read(path: Path):
    """(files it depends on, chunks) of the record at ``path``, or None; a damaged one is removed."""
    try:
        # O_NONBLOCK: a FIFO put under a record's name is refused below, not waited on
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        mine = not hasattr(os, "getuid") or st.st_uid == os.getuid()
        if not stat.S_ISREG(st.st_mode) or not mine or st.st_size > MAX_OUTPUT * 2:
            return None
        raw = fh.read()
    chunks = _parse(raw, path.name[: -len(SUFFIX)])
    if chunks is None:
        _remove(path)
    return chunks


def _parse(raw: bytes, name: str):
    head = len(MAGIC) + 8
    if len(raw) < head or not raw.startswith(MAGIC):
        return None
    crc, size = struct.unpack("<II", raw[len(MAGIC) : head])
    body = raw[head:]
    if len(body) != size or zlib.crc32(body) != crc or body[:64] != name.encode():
        return None
    if len(body) < 68:
        return None
    (n_depends,) = struct.unpack_from("<I", body, 64)
    try:
        depends = json.loads(body[68 : 68 + n_depends])
    except ValueError:
        return None
    if not isinstance(depends, dict):
        return None
    chunks, at = [], 68 + n_depends
    while at < len(body):
        if at + _CHUNK.size > len(body):
            return None
        tag, flushed, n = _CHUNK.unpack_from(body, at)
        at += _CHUNK.size
        if tag not in (b"o", b"e") or at + n > len(body):
            return None
        chunks.append((tag, flushed, body[at : at + n]))
        at += n
    return depends, chunks


# --------------------------------------------------------------------------- recording


class _Tee(io.BufferedIOBase):
    """The binary stream under a recorded ``sys.stdout``/``sys.stderr``: passes every write to
    the real one (its buffering unchanged) and keeps a copy."""

    def __init__(self, real, tag: bytes, recorder: Recorder):
        super().__init__()
        self.real, self.tag, self.recorder = real, tag, recorder

    def write(self, data) -> int:
        try:
            n = self.real.write(data)
        except BaseException:  # a closed pipe (``| head``): the user saw less than the run printed
            self.recorder.broken = True
            raise
        self.recorder.add(self.tag, bytes(data))
        return len(data) if n is None else n

    def flush(self) -> None:
        try:
            self.real.flush()
        except BaseException:
            self.recorder.broken = True
            raise
        self.recorder.flushed(self.tag)

    def close(self) -> None:  # the real stream stays open
        if not self.closed:
            self.flush()
        super().close()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.real.isatty()

    def fileno(self) -> int:
        return self.real.fileno()


class Recorder:
    """Copies what this process writes to stdout and stderr while a command runs (``start``);
    ``finish`` writes the record when the run may be replayed."""

    def __init__(self, name: str, where: Path, argv: list[str]):
        self.name, self.where, self.argv = name, where, argv
        self.chunks: list[list] = []  # [tag, flushed, bytearray]
        self.size = 0
        self.saved: tuple = ()
        self.broken = False  # a write or flush failed: what was seen is not what a record holds

    def add(self, tag: bytes, data: bytes) -> None:
        self.size += len(data)
        if self.size > MAX_OUTPUT:
            self.chunks = []
            return
        if self.chunks and self.chunks[-1][0] == tag and not self.chunks[-1][1]:
            self.chunks[-1][2] += data
        else:
            self.chunks.append([tag, 0, bytearray(data)])

    def flushed(self, tag: bytes) -> None:
        if self.chunks and self.chunks[-1][0] == tag:
            self.chunks[-1][1] = 1

    def start(self) -> None:
        self.saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = (self._wrap(s, t) for s, t in ((sys.stdout, b"o"), (sys.stderr, b"e")))

    def _wrap(self, stream, tag: bytes):
        return io.TextIOWrapper(
            _Tee(stream.buffer, tag, self),
            encoding=stream.encoding,
            errors=stream.errors,
            line_buffering=stream.line_buffering,
            write_through=True,
        )

    def stop(self) -> None:
        if not self.saved:
            return
        for s in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                s.flush()
        sys.stdout, sys.stderr = self.saved
        self.saved = ()

    def finish(self, code, least: float | None) -> None:
        """The run ended with status ``code``: record its output if it may be replayed and the
        files it read hold at least ``least`` bytes (the cache's threshold for storing a trace:
        a command on small files is not recorded into the default folder, as they are not
        cached; None: it read nothing through the cache)."""
        self.stop()
        if code not in (0, None) or _SPOILED or self.broken or self.size > MAX_OUTPUT or least is None:
            return
        err = b"".join(c[2] for c in self.chunks if c[0] == b"e")
        if b"\r" in err and _terminal(2):  # a progress display drawn on the terminal
            return
        # a full disk, a read-only folder, a current folder removed meanwhile: no record, no error
        with contextlib.suppress(Exception):
            files = _files(self.argv)  # every named file's identity taken once for both
            if files is None:  # an argument names what is never replayed (now)
                return
            unchanged = key(self.argv, files) == self.name and _unchanged(_DEPENDS)  # inputs, source files
            if _named_bytes(files) >= least and unchanged:
                _store(self.where, self.name, self.chunks, _DEPENDS)


def _store(where: Path, name: str, chunks: list, depends: dict) -> None:
    listed = json.dumps(depends, sort_keys=True).encode()  # ASCII: odd bytes of names as escapes
    parts = [name.encode(), struct.pack("<I", len(listed)), listed]
    for tag, flushed, data in chunks:
        parts += [_CHUNK.pack(tag, flushed, len(data)), bytes(data)]
    body = b"".join(parts)
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = where / f"{name}{SUFFIX}.tmp-{secrets.token_hex(4)}"
    made = False  # a name another writer holds already (O_EXCL) is theirs: never removed
    try:
        with temporary(tmp):  # SIGTERM or SIGHUP while it is written: removed, as on Ctrl-C
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            made = True
            with os.fdopen(fd, "wb") as fh:
                fh.write(MAGIC + struct.pack("<II", zlib.crc32(body), len(body)) + body)
            os.replace(tmp, where / (name + SUFFIX))
    finally:
        if made:
            _remove(tmp)
    trim(where)


# --------------------------------------------------------------------------- size, info, clear


def _found(where: Path) -> list[tuple[int, int, str, bool]]:
    """(last use ns, size, path, temporary) of each record and temporary record in ``where``."""
    out = []
    try:
        with os.scandir(where) as it:
            for f in it:
                tmp = ".rec.tmp-" in f.name
                if not (f.name.endswith(SUFFIX) or tmp) or not f.is_file(follow_symlinks=False):
                    continue
                try:
                    st = f.stat(follow_symlinks=False)
                except OSError:
                    continue
                out.append((st.st_mtime_ns, st.st_size, f.path, tmp))
    except OSError:
        pass
    return out


def trim(where: Path) -> None:
    """Keep the ``MAX_RECORDS`` most recently used records within ``MAX_BYTES``; remove
    temporary records left by a crash."""
    now = time.time_ns()
    total = kept = 0
    for used, size, path, tmp in sorted(_found(where), reverse=True):
        if tmp:
            if now - used > _TMP_MAX_AGE_S * 10**9:
                _remove(path)
            continue
        total, kept = total + size, kept + 1
        if kept > MAX_RECORDS or total > MAX_BYTES:
            _remove(path)


def info(cache_folder: Path) -> dict:
    """``records`` and their ``bytes`` in the cache folder ``cache_folder``."""
    found = [f for f in _found(Path(cache_folder) / FOLDER) if not f[3]]
    return {"records": len(found), "bytes": sum(f[1] for f in found)}


def clear(cache_folder: Path) -> dict:
    """Remove every record (and temporary one): ``records`` removed and ``bytes`` freed."""
    found = _found(Path(cache_folder) / FOLDER)
    for f in found:
        _remove(f[2])
    with contextlib.suppress(OSError):
        (Path(cache_folder) / FOLDER).rmdir()  # when empty: nothing of ours is left
    return {"records": sum(not f[3] for f in found), "bytes": sum(f[1] for f in found)}
