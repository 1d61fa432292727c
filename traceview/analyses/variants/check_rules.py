"""Reading a ``traceview check`` rules file: TOML checked by ``schema.CheckRules``, then the checks a
type cannot say (the metric exists, a bound of the metric's kind, one of ``value``/``baseline``).
Every problem is one line, ``FILE:LINE: key: problem``, raised as CheckRuleError (exit 2)."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from pathlib import Path

import msgspec

from ... import schema
from ...errors import CheckRuleError
from .check_metrics import check_metrics

DEFAULT = Path(__file__).resolve().parents[2] / "rules" / "check_default.toml"
_HINTS = {
    "op": f"one of {', '.join(schema.CHECK_OPS)}",
    "when": "any, gpu or cpu-only",
    "kind": "kernel, memcpy or memset",
    "value": "a number, a string or an array of strings",
    "baseline": "a factor of the baseline's value",
}
_UNKNOWN = re.compile(r"unknown (?:field|top-level key) '([^']*)'")


def read_rules(path=None) -> list[schema.CheckRule]:
    """The rules of ``path`` (None: the built-in set, rules/check_default.toml)."""
    path = Path(path) if path is not None else DEFAULT
    doc = schema.read(path, "check rules file", CheckRuleError)
    text = path.read_text(encoding="utf-8")
    try:
        spec = schema.convert(doc, schema.CheckRules, _HINTS)
        if spec.version != 1:
            raise schema.problem("version", f"unsupported version {spec.version} (this traceview reads 1)")
        for i, rule in enumerate(spec.rule):
            spec.rule[i] = _check_rule(i, rule, doc["rule"][i])
        _no_duplicate(spec.rule)
    except schema.Invalid as e:
        raise CheckRuleError(_located(path, text, str(e))) from None
    return spec.rule


def _located(path: Path, text: str, message: str) -> str:
    """``FILE:LINE: message``, the line of the key the message starts with (when it can be told)."""
    key = message.split(":", 1)[0] if ":" in message.split(" ", 1)[0] else ""
    unknown = _UNKNOWN.search(message)
    if unknown:
        key = f"{key}.{unknown[1]}" if key else unknown[1]
    line = schema.line_of(text, key) if key else None
    return f"{path}:{line}: {message}" if line else f"{path}: {message}"


def _check_rule(i: int, rule: schema.CheckRule, raw: dict) -> schema.CheckRule:
    """The rule, checked; a size given for a bytes metric (``"100 MiB"``) as its number of bytes."""
    metrics = check_metrics()

    def bad(key: str, text: str) -> schema.Invalid:
        where, label = schema.where("rule", i, raw, key)
        return schema.problem(where, text, label)

    metric = metrics.get(rule.metric)
    if metric is None:
        raise bad("metric", f"unknown metric {rule.metric!r} (metrics: {', '.join(metrics)})")
    if (rule.value is None) == (rule.baseline is None):
        raise bad("value", "give value (an absolute bound) or baseline (a factor of the baseline's), one")
    if rule.annotation is not None and rule.within is not None:
        raise bad("within", "give annotation or within, not both (both name the spans to look inside)")
    rule = _sized(rule, metric.unit, bad)
    _check_bound(rule, metric.unit, bad)
    return rule


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|TiB)\s*$")
_SCALE = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def _sized(rule: schema.CheckRule, unit: str, bad) -> schema.CheckRule:
    """A bytes metric's ``value`` given as a size (``"100 MiB"``, binary units as torch prints them)
    becomes its whole number of bytes, so the metric keeps the one unit memory and summary use."""
    if unit != "bytes" or not isinstance(rule.value, str):
        return rule
    m = _SIZE.match(rule.value)
    if m is None:
        raise bad("value", f'{rule.metric} is compared with bytes: a number or a size such as "100 MiB"')
    return msgspec.structs.replace(rule, value=int(Decimal(m[1]) * _SCALE[m[2]]))


def _check_bound(rule: schema.CheckRule, unit: str, bad) -> None:
    numeric = unit not in ("text", "set")
    for key in ("value", "baseline"):  # TOML reads nan and inf as floats: no bound can be compared with them
        v = getattr(rule, key)
        if isinstance(v, float) and not math.isfinite(v):
            raise bad(key, f"{v} is not a finite number (a bound must be one)")
    if rule.value is not None:
        v = rule.value
        fits = (
            isinstance(v, (int, float))
            if numeric
            else isinstance(v, str)
            if unit == "text"
            else isinstance(v, list)
        )
        want = "a number" if numeric else "a string" if unit == "text" else "an array of strings"
        if not fits:
            raise bad("value", f"{rule.metric} is compared with {want}")
    if rule.baseline is not None and not numeric and rule.baseline != 1:
        raise bad("baseline", f"{rule.metric} is not a number: its baseline factor can only be 1")
    if rule.baseline is not None and rule.baseline < 0:
        raise bad("baseline", "a factor must not be negative")
    if not numeric and rule.op in ("<", ">"):
        raise bad("op", f"{rule.metric} takes ==, !=, <= or >= (a {unit}), not {rule.op}")


def _no_duplicate(rules: list[schema.CheckRule]) -> None:
    seen = set()
    for i, r in enumerate(rules):
        if r.id in seen:
            raise schema.problem(f"rule[{i}].id", f"duplicate rule id {r.id!r}")
        seen.add(r.id)
