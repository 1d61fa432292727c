"""Plain values (numbers, text, None and their containers) to JSON-able data and back, exactly.

The cache keeps some small results of the analyses (a region's work, a category's efficiency) in a
trace's entry as JSON. JSON alone would bring them back changed: a tuple as a list, a set or a dict
with tuple keys not at all, NaN as null, an ``np.float64`` as a float. ``encode`` tags each of
those, ``decode`` gives back the very value, its types included. Only these types are encoded, and
decoding builds only these (never an object named by the data): anything else raises ``Unplain``,
and the caller works the value out instead.
"""

from __future__ import annotations

import math

import numpy as np

#: numpy scalar types a value may hold, by the tag they are written with
_NUMPY = {t.__name__: t for t in (np.int64, np.int32, np.int8, np.float64, np.bool_)}
_NOT_FINITE = ("nan", "inf", "-inf")


class Unplain(ValueError):
    """A value ``encode`` cannot write, or data ``decode`` cannot read back."""


def encode(value):
    """``value`` as data of JSON's types only (dicts only as tags: ``{"tag": [...]}``)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if type(value) is int:
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if type(value) in _NUMPY.values():
        item = value.item()
        return {
            type(value).__name__: item if not isinstance(item, float) or math.isfinite(item) else repr(item)
        }
    if type(value) in (list, tuple, set, frozenset):
        items = [encode(v) for v in value]
        return {type(value).__name__: items}
    if type(value) is dict:
        return {"dict": [[encode(k), encode(v)] for k, v in value.items()]}
    raise Unplain(f"not a plain value: {type(value).__name__}")


def decode(data):
    """The value ``encode`` gave ``data`` for."""
    if data is None or isinstance(data, (bool, str, int, float)):
        return data
    if not isinstance(data, dict) or len(data) != 1:
        raise Unplain("not encoded data")
    ((tag, body),) = data.items()
    if tag == "float" and body in _NOT_FINITE:
        return float(body)
    if tag in _NUMPY and (isinstance(body, (bool, int, float)) or (tag == "float64" and body in _NOT_FINITE)):
        return _NUMPY[tag](float(body) if isinstance(body, str) else body)
    if not isinstance(body, list):
        raise Unplain(f"not encoded data: {tag!r}")
    try:  # a set's item or a dict's key that is a list: not data encode gave
        if tag == "list":
            return [decode(v) for v in body]
        if tag in ("tuple", "set", "frozenset"):
            return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](decode(v) for v in body)
        if tag == "dict" and all(isinstance(kv, list) and len(kv) == 2 for kv in body):
            return {decode(k): decode(v) for k, v in body}
    except TypeError:
        raise Unplain(f"not encoded data: {tag!r} holds an unhashable key") from None
    raise Unplain(f"not encoded data: {tag!r}")
