"""The GPU peak table (``rules/devices.toml``): dense TFLOP/s per precision on tensor
cores and on CUDA cores/vector ALUs, memory bandwidth and SM count, each device with
its source. A trace's device is found by its ``deviceProperties`` name (and SM count).
A user's own file of the same shape adds devices or replaces one of the same name.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Annotated

import msgspec

from . import schema
from .errors import TraceviewError

DEVICES_PATH = Path(__file__).parent / "rules" / "devices.toml"
PATHS = ("tensor", "vector")
_Peak = Annotated[float, msgspec.Meta(gt=0)]


class Device(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One [[device]] of a device table, as msgspec checked it (types, required and unknown keys)."""

    name: Annotated[str, schema.NonEmpty]
    # a regex the whole name must match, case-insensitively: searched, 'H200' also
    # matched "NVIDIA GH200 480GB" and rated a Grace Hopper as an H200 SXM (issue 32)
    match: Annotated[str, schema.NonEmpty]
    memory_gbps: _Peak
    source: Annotated[str, schema.NonEmpty]
    sms: Annotated[int, msgspec.Meta(ge=1)] | None = None
    tensor: dict[str, _Peak] = {}  # precision -> dense TFLOP/s on tensor/matrix cores
    vector: dict[str, _Peak] = {}  # precision -> TFLOP/s on CUDA cores / vector ALUs
    note: str = ""

    def peak_tflops(self, path: str, precision: str) -> float | None:
        """The peak for a path ("tensor" or "vector") and precision; None if the source gives none."""
        table = self.tensor if path == "tensor" else self.vector
        value = table.get(precision)
        return float(value) if value is not None else None

    def matches(self, name: str, sms: int | None) -> bool:
        if not re.fullmatch(self.match, name.strip(), flags=re.IGNORECASE):
            return False
        return self.sms is None or sms is None or int(sms) == self.sms


class _Table(msgspec.Struct, forbid_unknown_fields=True):
    version: int = 1
    device: list[Device] = []


FIELDS = tuple(f.name for f in msgspec.structs.fields(Device))
_HINTS = {
    "device": f"a device has {', '.join(FIELDS)}",
    **{p: "precision = TFLOP/s, e.g. { bf16 = 989.0 }" for p in PATHS},
}


def _parse(doc: dict, origin: str) -> tuple[Device, ...]:
    """The devices of a table; the one thing a type cannot say (``match`` is a regex) checked here."""
    try:
        table = schema.convert(doc, _Table, _HINTS)
        for i, d in enumerate(table.device):
            try:
                re.compile(d.match)
            except re.error as e:
                path, label = schema.where("device", i, doc["device"][i], "match")
                raise schema.problem(path, f"not a regular expression ({e})", label) from None
    except schema.Invalid as e:
        raise TraceviewError(f"{origin}: {e}") from None
    return tuple(table.device)


def load_devices(path: str | None = None) -> tuple[Device, ...]:
    """The built-in table, with the devices of ``path`` (a TOML file) first: a user's device
    replaces a built-in one of the same name and is tried before the rest. A file that can't
    be read, isn't TOML, or has an unknown or malformed field raises a one-line TraceviewError.
    The file is read at every call (a few lines of TOML; a handful of calls per analysis): no
    cache keyed by its name can answer an edited file from an earlier reading (issue 37)."""
    base = _builtin()
    if path is None:
        return base
    p = os.fspath(path)
    user = _parse(schema.read(p, "device table"), p)
    names = {d.name for d in user}
    return user + tuple(d for d in base if d.name not in names)


@functools.lru_cache(maxsize=1)
def _builtin() -> tuple[Device, ...]:
    return _parse(schema.read(DEVICES_PATH, "device table"), str(DEVICES_PATH))


def find_device(name: str | None, sms: int | None = None, path: str | None = None) -> Device | None:
    """The table's device for a ``deviceProperties`` name (and SM count): the first entry whose
    ``match`` the whole name matches; None if unknown (or the trace's name is not text)."""
    if not isinstance(name, str) or not name.strip():
        return None
    return next((d for d in load_devices(path) if d.matches(name, sms)), None)


def trace_device(trace, path: str | None = None) -> Device | None:
    """The device a trace ran on (its first ``deviceProperties`` entry), found in the built-in
    table plus ``path``, else plus the file the trace was loaded with (``load(..., devices=FILE)``)."""
    path = path if path is not None else getattr(trace, "devices", None)
    props = trace.meta.get("deviceProperties")
    sms = props[0].get("numSms") if isinstance(props, list) and props and isinstance(props[0], dict) else None
    return find_device(trace.device_name, sms if isinstance(sms, int) else None, path)
