"""File names are untrusted text: a name may hold bytes that are not UTF-8.

Python hands such a name over with each stray byte as a lone surrogate (``os.fsdecode``'s
``surrogateescape``: ``b"\\xff"`` becomes ``"\\udcff"``), which opens the file fine but is not
text: pyarrow, msgspec and UTF-8 output refuse it. ``as_text`` is the name as text, for labels,
tables and the cache; the path itself stays as given wherever the file is opened.
"""

from __future__ import annotations

import os


def as_text(name) -> str:
    """``name`` (a path, str or bytes) as valid text: a byte that is not UTF-8 written as
    ``\\xNN``, any other lone surrogate as ``\\udNNN``; a valid name comes back unchanged."""
    text = os.fsdecode(name)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")  # the name's own bytes
    except UnicodeEncodeError:  # a surrogate that stands for no byte (not from the file system)
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")
