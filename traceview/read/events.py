"""The typed event structs and the decode of one JSON array of events into them.

The structs hold only the fields traceview uses; msgspec skips the rest without
building them. An event that does not fit (a list as ``ts``, invalid UTF-8 in
one string) is dropped and counted rather than losing the whole trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from .document import raw_items

_DECODE_ERRORS = (msgspec.ValidationError, msgspec.DecodeError, RecursionError)


# gc=False: these structs never hold cycles, and untracked objects make the
# collector skip millions of them (3-4x faster decode of large traces).
class Args(msgspec.Struct, omit_defaults=True, gc=False):
    correlation: int | None = None
    external_id: int | None = msgspec.field(default=None, name="External id")
    external_id_2021: int | None = msgspec.field(default=None, name="external id")
    device: int | str | None = None
    stream: int | str | None = None
    bytes: Any = None
    name: Any = None
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Concrete Inputs")
    # with_stack=True: a python_function event's frame id and its caller's, or (older traces) the
    # ";"-joined frames on a CPU op, innermost first; Any so that junk counts, never drops the event
    python_id: Any = msgspec.field(default=None, name="Python id")
    python_parent_id: Any = msgspec.field(default=None, name="Python parent id")
    call_stack: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Call stack")
    # a [memory] instant event's args (profile_memory=True); absent from other events, so free there
    mem_addr: Any = msgspec.field(default=None, name="Addr")
    mem_bytes: Any = msgspec.field(default=None, name="Bytes")
    mem_total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    mem_total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    mem_device_type: Any = msgspec.field(default=None, name="Device Type")
    mem_device_id: Any = msgspec.field(default=None, name="Device Id")


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: Any = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: int | float | str | None = None  # a str is re-read from the JSON text ("12.5" works)
    dur: int | float | str | None = None
    id: int | str | None = None
    bp: str | None = None
    args: Args | None = None


NO_ARGS = Args()
TYPED_INT_ARGS = ("correlation", "external_id", "external_id_2021")  # Args declares them int | None
#: the op args kept as raw JSON text (factorized; each distinct text decoded once, later)
TEXT_ARGS = ("input_dims", "input_types", "concrete_inputs", "call_stack")
#: the args of a ``[memory]`` instant event, kept as masked integers (a 2021 trace has no Addr or totals)
MEMORY_ARGS = (
    "mem_addr",
    "mem_bytes",
    "mem_total_allocated",
    "mem_total_reserved",
    "mem_device_type",
    "mem_device_id",
)
MEMORY_NAME = "[memory]"


@dataclass
class DecodedEvents:
    """One array's events; ``kept`` marks which items became events (None: all did)."""

    events: list
    dropped: int
    kept: np.ndarray | None


def decode_events(events_raw, path: str) -> DecodedEvents:
    """Typed decode; on a type error fall back to event-by-event and count drops.
    Raises ``TraceReadError`` when the array itself is not valid JSON."""
    try:
        return DecodedEvents(msgspec.json.decode(events_raw, type=list[Event]), 0, None)
    except _DECODE_ERRORS:
        pass  # e.g. invalid UTF-8 in one event's string: drop that event, not the trace
    items = raw_items(events_raw, path)
    decoder = msgspec.json.Decoder(Event)
    events = []
    kept = np.ones(len(items), dtype=bool)
    for i, item in enumerate(items):
        try:
            events.append(decoder.decode(item))
        except _DECODE_ERRORS:
            kept[i] = False
    return DecodedEvents(events, len(items) - len(events), kept)
