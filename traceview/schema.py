"""Checked data files: a TOML table read into ``msgspec.Struct``s, each failure one line.

The kernel rules (``rules/kernels.toml``, ``rules/kernel_words.toml``, a user's ``--rules``) and
the device table (``rules/devices.toml``, a user's ``--devices``) are described by Structs with
``forbid_unknown_fields=True``: msgspec checks types, required and unknown keys and says where.
This module reads the file and puts msgspec's answer in the user's words (TOML's type names,
the key path, the entry's id or name), so the modules that own the Structs keep only the checks
a type cannot say (a regex compiles, a category is declared).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

import msgspec

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from .errors import TraceviewError

#: a required string that may not be empty
NonEmpty = msgspec.Meta(min_length=1)


class Invalid(ValueError):
    """A checked file's content is wrong; the message names the key, not yet the file."""


def read(path, what: str, error: type[TraceviewError] = TraceviewError) -> dict:
    """The TOML document at ``path``; a missing, unreadable or malformed file raises ``error``
    naming the file and ``what`` it should have been."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise error(f"{path}: cannot read the {what}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise error(f"{path}: not a valid TOML {what}: {_one_line(str(e))}") from None


def convert(doc: dict, kind, hints: dict | None = None):
    """``doc`` as a ``kind`` Struct. Raises Invalid: ``key.path: problem (entry; hint)``, where
    the entry is the ``id`` or ``name`` of the array-of-tables item the key is in and the hint
    is ``hints[last key]`` (what the key holds, for a type msgspec names too tersely)."""
    try:
        return msgspec.convert(doc, type=kind)
    except msgspec.ValidationError as e:
        raise Invalid(_explain(str(e), doc, hints or {})) from None


def where(array: str, index: int, entry: dict | None, key: str = "") -> tuple[str, str]:
    """(key path, entry label) for the item ``array[index]``: ``("rule[3].category", "rule 'x'")``."""
    path = f"{array}[{index}]" + (f".{key}" if key else "")
    given = entry or {}
    label = next((given[k] for k in ("id", "name") if isinstance(given.get(k), str) and given[k]), "")
    return path, (f"{array} {label!r}" if label else "")


def problem(path: str, text: str, *notes: str) -> Invalid:
    """The one-line Invalid for ``path``: ``path: text (note; note)``."""
    notes = tuple(n for n in notes if n)
    return Invalid((f"{path}: " if path else "") + text + (f" ({'; '.join(notes)})" if notes else ""))


_AT = re.compile(r"^(?P<text>.*) - at `\$(?P<path>[^`]*)`$", re.DOTALL)
_ITEM = re.compile(r"^\.?(?P<array>[A-Za-z_]\w*)\[(?P<index>\d+)\]")
_TYPE_WORDS = {
    "object": "table",
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "array": "array",
}
_PHRASES = (
    (re.compile(r"^Object contains unknown field `([^`]*)`$"), r"unknown field '\1'"),
    (re.compile(r"^Object missing required field `([^`]*)`$"), r"missing '\1'"),
    (re.compile(r"^Expected `str` of length >= 1$"), "must not be empty"),
    (re.compile(r"^Expected `array` of length >= 1$"), "must not be empty"),
    (re.compile(r"^Invalid enum value (.*)$"), r"bad value \1"),
)


def _explain(message: str, doc: dict, hints: dict) -> str:
    m = _AT.match(message)
    text, path = (m["text"], m["path"]) if m else (message, "")
    text = _words(text)
    if "[...]" in path:  # a value of a table whose keys are free (a precision): msgspec names no key
        path, text = path.replace("[...]", ""), f"a value: {text}"
    path = path.lstrip(".")
    if not path and text.startswith("unknown field"):
        text = text.replace("unknown field", "unknown top-level key", 1)
    item = _ITEM.match(path)
    label = ""
    if item and isinstance(doc.get(item["array"]), list) and int(item["index"]) < len(doc[item["array"]]):
        entry = doc[item["array"]][int(item["index"])]
        label = where(item["array"], int(item["index"]), entry if isinstance(entry, dict) else None)[1]
    last = re.findall(r"[A-Za-z_]\w*", path)
    return str(problem(path, text, label, hints.get(last[-1], "") if last else ""))


def _words(text: str) -> str:
    """msgspec's sentence in TOML's words: ``Expected `bool | str`, got `int``` ->
    ``expected boolean or string, got integer``."""
    for pattern, repl in _PHRASES:
        if pattern.match(text):
            return pattern.sub(repl, text)
    m = re.match(r"^Expected `([^`]*)`(.*?)(?:, got `([^`]*)`)?$", text)
    if not m:
        return _one_line(text)
    kinds = [t.strip() for t in m[1].split("|") if t.strip() != "null"]  # TOML has no null: leave the key out
    want = " or ".join(_TYPE_WORDS.get(t, t) for t in kinds)
    got = f", got {_TYPE_WORDS.get(m[3], m[3])}" if m[3] else ""
    return f"expected {want}{m[2]}{got}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------ the rules of ``traceview check``

#: how a check rule compares its metric with its bound
CHECK_OPS = ("==", "!=", "<", "<=", ">", ">=")


class CheckRule(msgspec.Struct, forbid_unknown_fields=True):
    """One rule of a ``traceview check`` rules file: a metric, an operator and a bound, which
    is ``value`` (absolute) or ``baseline`` (the baseline's value times this factor)."""

    id: Annotated[str, NonEmpty]
    metric: Annotated[str, NonEmpty]
    op: Literal["==", "!=", "<", "<=", ">", ">="]
    value: int | float | str | list[str] | None = None
    baseline: float | None = None
    message: str = ""
    when: Literal["any", "gpu", "cpu-only"] = "any"  # whether the rule applies to the candidate
    noise: bool = True  # a relative rule on a per-step metric judges the steps' noise
    # the scope: the command's selection, each field given here replacing the command's
    step: int | None = None
    annotation: str | None = None
    within: str | None = None  # an op name: only inside that op's spans (as --annotation takes it)
    device: int | None = None
    stream: int | None = None
    kind: Literal["kernel", "memcpy", "memset"] | None = None


class CheckRules(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    rule: Annotated[list[CheckRule], msgspec.Meta(min_length=1)]


_HEADER = re.compile(r"^\s*\[\[\s*(?P<array>[A-Za-z_]\w*)\s*\]\]")


def line_of(text: str, path: str) -> int | None:
    """The line (1-based) of ``path`` (``rule[3].metric``, ``rule[3]`` or a top-level key) in
    the TOML ``text``: the key's line inside the array item's ``[[...]]`` block, else the header's.
    None where it cannot be told (an inline table)."""
    lines = text.splitlines()
    item = _ITEM.match(path)
    key = path[item.end() :].lstrip(".").split(".")[0] if item else path.split(".")[0]
    lo, hi = 0, len(lines)
    if item:
        headers = [i for i, s in enumerate(lines) if (m := _HEADER.match(s)) and m["array"] == item["array"]]
        if int(item["index"]) >= len(headers):
            return None
        lo = headers[int(item["index"])]
        hi = next((i for i in range(lo + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        if not key:
            return lo + 1
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=") if key else None
    found = next((i for i in range(lo, hi) if pattern and pattern.match(lines[i])), None)
    return found + 1 if found is not None else (lo + 1 if item else None)


# ------------------------------------------------------------------ which stack frames are library code


class SourceRules(msgspec.Struct, forbid_unknown_fields=True):
    """``rules/sources.toml``: the frames of a Python stack that are not the user's own code.

    ``folders``: a frame whose file path starts with one, or holds it after a ``/``, is library
    code (``torch/`` matches ``torch/nn/functional.py`` and ``/env/site-packages/torch/x.py``);
    ``files``: a file of that name in no folder, or at the end of a path (``typing.py``);
    ``markers``: a file written with this prefix (``<frozen os>``, ``<string>``)."""

    version: int
    folders: list[Annotated[str, NonEmpty]]
    files: list[Annotated[str, NonEmpty]]
    markers: list[Annotated[str, NonEmpty]]
