"""Columnar cache of loaded traces (placeholder until the cache lands: no-op)."""
from __future__ import annotations


def lookup(path, cache):
    return None


def store(trace, cache) -> None:
    return None
