"""The GPU peak table (``rules/devices.toml``): dense TFLOP/s per precision on tensor
cores and on CUDA cores/vector ALUs, memory bandwidth and SM count, each device with
its source. A trace's device is found by its ``deviceProperties`` name (and SM count).
A user's own file of the same shape adds devices or replaces one of the same name.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from .errors import TraceviewError

DEVICES_PATH = Path(__file__).parent / "rules" / "devices.toml"
PATHS = ("tensor", "vector")


@dataclass(frozen=True)
class Device:
    name: str
    match: str
    sms: int | None
    tensor: dict           # precision -> dense TFLOP/s on tensor/matrix cores
    vector: dict           # precision -> TFLOP/s on CUDA cores / vector ALUs
    memory_gbps: float
    source: str
    note: str = ""

    def peak_tflops(self, path: str, precision: str) -> float | None:
        """The peak for a path ("tensor" or "vector") and precision; None if the source gives none."""
        table = self.tensor if path == "tensor" else self.vector
        value = table.get(precision)
        return float(value) if value is not None else None

    def matches(self, name: str, sms: int | None) -> bool:
        if not re.search(self.match, name, flags=re.IGNORECASE):
            return False
        return self.sms is None or sms is None or int(sms) == self.sms


FIELDS = ("name", "match", "sms", "tensor", "vector", "memory_gbps", "source", "note")
REQUIRED = ("name", "match", "memory_gbps", "source")


def _parse(doc: dict, origin: str) -> tuple[Device, ...]:
    unknown = sorted(set(doc) - {"version", "device"})
    if unknown:
        raise TraceviewError(f"{origin}: unknown top-level key {unknown[0]!r} (a device table has "
                             "'version' and [[device]] entries)")
    if not isinstance(doc.get("device", []), list):
        raise TraceviewError(f"{origin}: 'device' must be a list of tables ([[device]])")
    return tuple(_device(raw, f"{origin}: device #{i + 1}") for i, raw in enumerate(doc.get("device", [])))


def _device(raw, where: str) -> Device:
    """One [[device]] entry, checked: known fields, required ones, numbers where numbers go, a valid regex."""
    if not isinstance(raw, dict):
        raise TraceviewError(f"{where}: not a table")
    where = f"{where} ({raw['name']})" if isinstance(raw.get("name"), str) else where
    unknown = sorted(set(raw) - set(FIELDS))
    if unknown:
        raise TraceviewError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(FIELDS)})")
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise TraceviewError(f"{where}: lacks {', '.join(missing)}")
    for path in PATHS:
        peaks = raw.get(path, {})
        if not isinstance(peaks, dict) or not all(_number(v) for v in peaks.values()):
            raise TraceviewError(f"{where}: '{path}' must map precisions to TFLOP/s numbers, "
                                 "e.g. { bf16 = 989.0 }")
    if not _number(raw["memory_gbps"]) or ("sms" in raw and not isinstance(raw["sms"], int)):
        raise TraceviewError(f"{where}: 'memory_gbps' must be a number and 'sms' an integer")
    try:
        re.compile(raw["match"])
    except (re.error, TypeError) as e:
        raise TraceviewError(f"{where}: 'match' is not a regular expression ({e})") from None
    return Device(name=str(raw["name"]), match=raw["match"], sms=raw.get("sms"),
                  tensor=dict(raw.get("tensor", {})), vector=dict(raw.get("vector", {})),
                  memory_gbps=float(raw["memory_gbps"]), source=str(raw["source"]), note=str(raw.get("note", "")))


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@functools.lru_cache(maxsize=8)
def load_devices(path: str | None = None) -> tuple[Device, ...]:
    """The built-in table, with the devices of ``path`` (a TOML file) first: a user's device
    replaces a built-in one of the same name and is tried before the rest. A file that can't
    be read, isn't TOML, or has an unknown or malformed field raises a one-line TraceviewError."""
    base = _parse(tomllib.loads(DEVICES_PATH.read_text(encoding="utf-8")), str(DEVICES_PATH))
    if path is None:
        return base
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise TraceviewError(f"{path}: cannot read the device table: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TraceviewError(f"{path}: not a valid TOML device table: {e}") from None
    user = _parse(doc, str(path))
    names = {d.name for d in user}
    return user + tuple(d for d in base if d.name not in names)


def find_device(name: str | None, sms: int | None = None, path: str | None = None) -> Device | None:
    """The table's device for a ``deviceProperties`` name (and SM count); None if unknown."""
    if not name:
        return None
    return next((d for d in load_devices(path) if d.matches(name, sms)), None)


def trace_device(trace, path: str | None = None) -> Device | None:
    """The device a trace ran on (its first ``deviceProperties`` entry), found in the built-in
    table plus ``path``, else plus the file the trace was loaded with (``load(..., devices=FILE)``)."""
    path = path if path is not None else getattr(trace, "devices", None)
    props = trace.meta.get("deviceProperties")
    sms = props[0].get("numSms") if isinstance(props, list) and props and isinstance(props[0], dict) else None
    return find_device(trace.device_name, sms if isinstance(sms, int) else None, path)
