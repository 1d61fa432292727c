"""How a trace's events are decoded: one ordered list of strategies, chosen in one place.

Each strategy takes the ``Reading`` (one file being read, its stages done once, when a
strategy first needs them) and gives the event columns, or declines (None) where it does
not apply or is not sure; then the next one runs. First to last:

1. ``from_file``: the compiled scanner on a plain file's chunks, read where they are needed
   (``direct.read_direct``): the text is never held whole.
2. ``from_gzip_stream``: the same on a gzip file's text as it is inflated, chunk by chunk:
   never held whole either (``direct.read_gzip``).
3. ``from_inflated``: the same on a gzip file's whole inflated text (``direct.read_held``),
   where the stream was declined.
4. ``compiled_chunks``: the document split by msgspec, its events text scanned by the
   compiled scanner on threads (``compiled``; chunks read again from the file where they lie
   in one, so that the text is let go first).
5. ``msgspec_processes``: msgspec on forked worker processes (``parallel``).
6. ``msgspec_fast_cut``: msgspec chunk by chunk, cut at ``},{``.
7. ``msgspec_checked``: msgspec, cut only between events found by a full parse: it never
   declines, and says what is wrong with a text that is not valid JSON.

Every strategy gives identical columns (tests/decoders.py compares the compiled ones with
msgspec's on every fuzz case). Where one finds a chunk msgspec refuses (``RefusedChunk``:
the JSON is bad, or a fast cut fell inside a string), no other cut at ``},{`` can do better:
the checked decoder runs next. A plain file read by 1 never reaches the others; the
compiled strategies are skipped where the extension is not built or is turned off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from . import columns, compiled, direct, parallel
from .columns import EventColumns, RefusedChunk
from .document import split_document
from .salvage import salvage_prefix
from .source import Decompressed, read_source


@dataclass
class Reading:
    """One file being read. ``held`` is ``[the text of the current stage]`` (the whole text
    once read, then its events array once split): a strategy may empty it to let the text go
    early. ``meta`` and ``json_bytes`` are set by the split, or by a strategy that splits the
    document itself."""

    path: str
    fh: object  # the file, opened once (``source.opened``)
    max_bytes: int
    max_ratio: float | None
    salvage: bool
    held: list
    source: Decompressed | None = None  # how the text was read (its data moved to ``held``)
    region: compiled.Region | None = None  # where the events text lies in a plain file
    split: bool = False
    meta: dict | None = None
    json_bytes: int = 0
    warnings: list = field(default_factory=list)

    def text(self) -> list:
        """``[the file's whole text]`` (plain, or a gzip file's inflated, or salvaged), read once."""
        if self.source is None:
            got = read_source(
                self.path,
                max_bytes=self.max_bytes,
                max_ratio=self.max_ratio,
                salvage=self.salvage,
                fh=self.fh,
            )
            self.held[:] = [got.data]
            self.source = replace(got, data=b"")
        return self.held

    def events(self) -> list:
        """``[the events array's text]``: the document split once (and salvaged first, if asked)."""
        if not self.split:
            data = whole = self.text().pop()
            self.json_bytes = len(data)
            if self.salvage:
                data, note = salvage_prefix(data, self.path, self.source.cut)  # type: ignore[union-attr]
                self.warnings = [note] * bool(note)
            # the file's own text: its chunks can be read again from the file
            stamp = self.source.stamp if data is whole else None  # type: ignore[union-attr]
            del whole
            meta, events_raw = split_document(data, self.path)
            self.region = compiled.region_of(self.path, data, events_raw, stamp)
            del data  # events_raw keeps the text alive only until the columns are built
            self.held[:] = [events_raw]
            self.meta, self.split = meta, True
        return self.held


def from_file(r: Reading) -> EventColumns | None:
    if r.salvage:
        return None
    got = direct.read_direct(r.fh.fileno(), r.path, r.max_bytes)  # type: ignore[attr-defined]
    return _whole(r, got)


def from_gzip_stream(r: Reading) -> EventColumns | None:
    """A gzip file, scanned as it inflates: its text is never held whole."""
    if r.salvage or r.source is not None:
        return None
    return _whole(r, direct.read_gzip(r.fh, r.path, r.max_bytes, r.max_ratio))


def from_inflated(r: Reading) -> EventColumns | None:
    """A plain file's text was declined by ``from_file`` already; a salvaged one is cut."""
    if r.salvage or not compiled.available():
        return None
    held = r.text()
    if not r.source.inflated:  # type: ignore[union-attr]
        return None
    return _whole(r, direct.read_held(held, r.path))  # empties held where it takes the text


def _whole(r: Reading, got: tuple | None) -> EventColumns | None:
    """A strategy that split the document itself: its metadata and text size are the reading's."""
    if got is None:
        return None
    r.meta, decoded, r.json_bytes = got
    return decoded


def compiled_chunks(r: Reading) -> EventColumns | None:
    """Empties ``held`` once the text is scanned, or once it is cut into chunks where it can
    read them again from the file's region: a lower peak of memory."""
    if not compiled.available():
        return None
    return compiled.event_columns(r.events(), r.path, r.region)


def msgspec_processes(r: Reading) -> EventColumns | None:
    return parallel.event_columns(r.events()[0], r.path)  # looked up at call time: tests replace it


def msgspec_fast_cut(r: Reading) -> EventColumns | None:
    return columns.fast_cut_columns(r.events()[0], r.path)


def msgspec_checked(r: Reading) -> EventColumns:
    return columns.checked_columns(r.events()[0], r.path)


Strategy = Callable[[Reading], EventColumns | None]
#: in order; looked up at call time (tests take some out)
STRATEGIES: tuple[Strategy, ...] = (
    from_file,
    from_gzip_stream,
    from_inflated,
    compiled_chunks,
    msgspec_processes,
    msgspec_fast_cut,
    msgspec_checked,
)


def decode(r: Reading) -> EventColumns:
    """The first strategy's columns that does not decline; after a chunk msgspec refused, the
    checked decoder's (it declines nothing: it gives the columns or the error)."""
    with columns.gc_paused():
        for strategy in STRATEGIES:
            try:
                got = strategy(r)
            except RefusedChunk:
                return msgspec_checked(r)
            if got is not None:
                return got
    raise AssertionError("msgspec_checked never declines")  # pragma: no cover
