"""How a time in nanoseconds reads: one formatter for tables and sentences alike."""

from __future__ import annotations

import math


def human_ns(ns) -> str:
    """``1234567`` -> ``"1.235 ms"``; missing values read ``-``."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)) or type(ns).__name__ == "NAType":
        return "-"
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{ns:.0f} ns"
