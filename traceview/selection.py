"""What a command narrows a trace to (``--step``, ``--annotation``, ``--device``, ``--stream``,
``--kind``): plain data, without pandas, so that the command line can parse and check its options
before any table is imported."""

from __future__ import annotations

from dataclasses import dataclass, fields

KINDS = ("kernel", "memcpy", "memset")
#: what "per step" means, in a sentence, for each kind of region
PER_WORD = {"step": "step", "steps": "step", "annotation": "annotated region", "trace": "trace"}


@dataclass(frozen=True)
class Selection:
    step: int | None = None
    annotation: str | None = None
    device: int | None = None
    stream: int | None = None
    kind: str | None = None

    def describe(self) -> str:
        parts = [
            f"{f.name}={getattr(self, f.name)}" for f in fields(self) if getattr(self, f.name) is not None
        ]
        return ", ".join(parts) or "all"
