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


def _parse(doc: dict, origin: str) -> tuple[Device, ...]:
    out = []
    for i, raw in enumerate(doc.get("device", [])):
        missing = [k for k in ("name", "match", "memory_gbps", "source") if k not in raw]
        if missing:
            raise TraceviewError(f"{origin}: device #{i + 1} lacks {', '.join(missing)}")
        out.append(Device(name=raw["name"], match=raw["match"], sms=raw.get("sms"),
                          tensor=dict(raw.get("tensor", {})), vector=dict(raw.get("vector", {})),
                          memory_gbps=float(raw["memory_gbps"]), source=raw["source"], note=raw.get("note", "")))
    return tuple(out)


@functools.lru_cache(maxsize=8)
def load_devices(path: str | None = None) -> tuple[Device, ...]:
    """The built-in table, with the devices of ``path`` (a TOML file) first: a user's device
    replaces a built-in one of the same name and is tried before the rest."""
    base = _parse(tomllib.loads(DEVICES_PATH.read_text(encoding="utf-8")), str(DEVICES_PATH))
    if path is None:
        return base
    try:
        user = _parse(tomllib.loads(Path(path).read_text(encoding="utf-8")), str(path))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise TraceviewError(f"{path}: cannot read the device table: {e}") from None
    names = {d.name for d in user}
    return user + tuple(d for d in base if d.name not in names)


def find_device(name: str | None, sms: int | None = None, path: str | None = None) -> Device | None:
    """The table's device for a ``deviceProperties`` name (and SM count); None if unknown."""
    if not name:
        return None
    return next((d for d in load_devices(path) if d.matches(name, sms)), None)


def trace_device(trace, path: str | None = None) -> Device | None:
    """The device a trace ran on (its first ``deviceProperties`` entry)."""
    props = trace.meta.get("deviceProperties")
    sms = props[0].get("numSms") if isinstance(props, list) and props and isinstance(props[0], dict) else None
    return find_device(trace.device_name, sms if isinstance(sms, int) else None, path)
