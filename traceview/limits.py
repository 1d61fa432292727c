"""Memory guard: refuse, with a clear message, a trace too large for this machine.

Loading keeps the JSON text, the decoded events and the DataFrames alive at
once; measured peak use is about 3.5x the decompressed text, so we ask for
``MEMORY_FACTOR`` times the text. The check is one read of /proc/meminfo
(Linux) and is skipped wherever available memory is unknown.
"""
from __future__ import annotations

MEMORY_FACTOR = 4


def available_memory() -> int | None:
    """MemAvailable in bytes, or None where unknown (not Linux, unreadable)."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_cap() -> int | None:
    """Largest JSON text (bytes) this machine can load now, or None if unknown."""
    avail = available_memory()
    return avail // MEMORY_FACTOR if avail is not None else None


def memory_problem(text_bytes: int, *, at_least: bool = False) -> str:
    """The one-line problem for a text of ``text_bytes`` that does not fit."""
    avail = available_memory() or 0
    need = text_bytes * MEMORY_FACTOR
    more = "at least " if at_least else ""
    return (f"too large for this machine: needs {more}about {need / 2**30:.1f} GiB of memory, "
            f"{avail / 2**30:.1f} GiB available")
