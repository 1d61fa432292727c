"""Memory guard: refuse, with a clear message, a trace too large for this machine.

Loading keeps the JSON text, the decoded events and the DataFrames alive at
once; measured peak use is about 3.5x the decompressed text, so we ask for
``MEMORY_FACTOR`` times the text. The check is one read of /proc/meminfo
(Linux), lowered to what an address-space limit (``ulimit -v``) leaves this
process, and is skipped wherever available memory is unknown. The reader checks
it before reading a plain file and again as a gzip stream's output grows.
"""

from __future__ import annotations

MEMORY_FACTOR = 4
#: the reader's default caps (``--max-bytes``, ``--max-ratio``): here, below the reader, so that the
#: command line declares its options without importing it
DEFAULT_MAX_BYTES = 16 * 2**30  # decompressed-size cap
DEFAULT_MAX_RATIO = 200  # decompressed / compressed bytes; ~6x the worst real trace seen


def available_memory() -> int | None:
    """Bytes this process can still allocate: MemAvailable, or less under an address-space
    limit; None where unknown (not Linux, unreadable)."""
    avail = _meminfo_available()
    room = _address_space_left()
    if room is None:
        return avail
    return room if avail is None else min(avail, room)


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _address_space_left() -> int | None:
    """RLIMIT_AS less this process's virtual size (/proc/self/status VmSize); None if unlimited
    or unknown. Without it a ``ulimit -v`` process would plan by the machine's memory."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmSize:"):
                    return max(0, soft - int(line.split()[1]) * 1024)
    except (ImportError, OSError, ValueError, IndexError):
        return None
    return None


def memory_cap(held: int = 0) -> int | None:
    """Largest JSON text (bytes) this machine can load now, or None if unknown. ``held``: bytes
    of that text already in memory (counted in use, yet part of what is being planned for)."""
    avail = available_memory()
    return (avail + held) // MEMORY_FACTOR if avail is not None else None


def memory_problem(text_bytes: int, *, at_least: bool = False) -> str:
    """The one-line problem for a text of ``text_bytes`` that does not fit."""
    avail = available_memory() or 0
    need = text_bytes * MEMORY_FACTOR
    more = "at least " if at_least else ""
    return (
        f"too large for this machine: needs {more}about {need / 2**30:.1f} GiB of memory, "
        f"{avail / 2**30:.1f} GiB available"
    )


#: Characters of one name that per-name text work (classification rules, readable names, diff
#: keys) reads. The longest kernel name in the 48 corpus traces has 5,123; a trace can carry
#: a 10 MB one, and ~100 regex searches each over all of it cost tens of seconds.
NAME_WORK = 16384
_SEAM = " … "  # between head and tail: no rule or bracket matches across it


def name_view(name: str, limit: int = NAME_WORK) -> str:
    """``name`` itself, or for a longer one its first and last ``limit // 2`` characters: where a
    kernel name says what it is (function, template head; the parameter list). Only the work is
    bounded: the full name stays in the data and in every output."""
    if len(name) <= limit:
        return name
    half = limit // 2
    return name[:half] + _SEAM + name[-half:]


def give_back_freed_memory() -> None:
    """Return memory freed by the decoder's threads to the system (glibc's ``malloc_trim``).

    glibc keeps what a thread frees in that thread's arena, and after a large free raises its
    threshold for serving allocations from the arenas rather than from fresh mappings: the
    scanner's per-chunk buffers and the chunks' columns, freed once joined, then stay in the
    process (a third of a gigabyte at 1 GB) while the model and link stages allocate anew on top
    of them (1.46x the file at the peak, against 1.08x with them given back). A no-op where
    the C library has no ``malloc_trim`` (macOS, Windows, musl)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _malloc_trim():
    global _TRIM
    if _TRIM is False:
        try:
            import ctypes

            _TRIM = getattr(ctypes.CDLL(None), "malloc_trim", None)
        except (ImportError, OSError, TypeError):  # no C library to ask (or no ctypes)
            _TRIM = None
    return _TRIM


_TRIM: object = False  # not looked up yet
