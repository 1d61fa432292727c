"""``LoadOptions``: how traces are read, as one value built once and passed along.

Every command and API function that reads traces takes the same settings (rule file, device
table, salvage, size limits, cache). They travel as this one frozen object, from the CLI's
options or the API's keywords down to ``load``; plain data, so it also goes to Dask workers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_RATIO

if TYPE_CHECKING:  # for the annotations only: classify and model load when first used
    from .classify import RuleSet
    from .model import Trace


@dataclass(frozen=True)
class LoadOptions:
    """``rules``: a TOML file (or RuleSet) of kernel rules overriding the defaults; ``devices``: a
    TOML file of GPU peaks tried before the built-in table; ``salvage``: load a truncated trace up
    to the cut; ``max_bytes``/``max_ratio``: refuse a trace whose text is larger, or a gzip that
    expands more (None: no ratio limit); ``cache``: True, False or a folder (None: the default)."""

    rules: str | os.PathLike[str] | RuleSet | None = None
    devices: str | os.PathLike[str] | None = None
    salvage: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    max_ratio: float | None = DEFAULT_MAX_RATIO
    cache: bool | str | os.PathLike[str] | None = None

    def checked(self) -> LoadOptions:
        """The same options with the rule and device files checked, so a bad file fails now, in one
        line, before any trace is read. Files stay paths: a RuleSet does not pickle, and these
        options travel to Dask workers (which read the files by path, as they read the traces)."""
        from dataclasses import replace

        from .classify import RuleSet, load_rules

        rules = self.rules
        if rules is not None and not isinstance(rules, RuleSet):
            rules = os.fspath(rules)
            load_rules(rules)
        devices = os.fspath(self.devices) if self.devices is not None else None
        if devices is not None:
            from .devices import load_devices

            load_devices(devices)
        return replace(self, rules=rules, devices=devices)

    def kwargs(self) -> dict[str, Any]:
        """The keywords of ``traceview.load`` these options stand for."""
        return {
            "rules": self.rules,
            "devices": self.devices,
            "salvage": self.salvage,
            "max_bytes": self.max_bytes,
            "max_ratio": self.max_ratio,
            "cache": self.cache,
        }

    def load(self, path: str | os.PathLike[str]) -> Trace:
        """``traceview.load(path)`` with these options."""
        from .load import load

        return load(path, **self.kwargs())
