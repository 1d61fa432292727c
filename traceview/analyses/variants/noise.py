"""Whether one trace's steps run beyond another's step-to-step noise: a one-sided Mann-Whitney U test.

``traceview check`` asks it of a relative rule on a per-step metric whose plain bound fails (the
candidate's mean per step beyond ``baseline × factor``): do the candidate's steps rank above the
baseline's steps times the factor more than chance would rank them? The test is exact (every way of
choosing which ranks are the candidate's, mid-ranks for ties, counted by dynamic programming up to
``EXACT_MAX`` steps; the normal approximation with a tie correction beyond), needs no scipy, and
assumes nothing about the shape of a step's time. The rule fails when p <= ``ALPHA``. Where even a
complete separation could not reach ``ALPHA`` (3 steps against 2, or one step), the steps cannot
tell noise from change and the plain bound stands alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

ALPHA = 0.05  # 3 steps against 3, all above, gives exactly 1/20 = 0.05: the smallest trace that can judge
EXACT_MAX = 60  # steps on both sides together; the DP table is (n+1) × (2·N²) at most


@dataclass(frozen=True)
class Verdict:
    p: float | None  # None: too few steps to judge noise
    beyond: bool  # the change is beyond the noise (p <= ALPHA); False when p is None
    words: str  # for the results table: the test, the steps, p


def judge(higher, lower) -> Verdict:
    """Whether the values ``higher`` rank above the values ``lower`` beyond chance (one-sided)."""
    x, y = np.asarray(higher, dtype=float), np.asarray(lower, dtype=float)
    steps = f"{len(x)} vs {len(y)} steps"
    if len(x) == 0 or len(y) == 0 or 1 / math.comb(len(x) + len(y), len(x)) > ALPHA:
        return Verdict(None, False, f"{steps}: too few to judge noise, plain bound")
    p = p_greater(x, y)
    return Verdict(p, p <= ALPHA, f"Mann-Whitney U, {steps}, p={p:.3g} (alpha {ALPHA})")


def p_greater(x: np.ndarray, y: np.ndarray) -> float:
    """One-sided p of the rank sum of ``x`` among ``x`` and ``y`` being this large or larger."""
    both = np.concatenate([x, y])
    ranks2 = (pd.Series(both).rank(method="average").to_numpy() * 2).round().astype(np.int64)  # whole
    observed = int(ranks2[: len(x)].sum())
    if len(both) <= EXACT_MAX:
        return _exact(ranks2, len(x), observed)
    return _normal(ranks2, len(x), observed)


def _exact(ranks2: np.ndarray, n: int, observed: int) -> float:
    """Share of the C(N, n) choices of n ranks whose sum reaches ``observed``."""
    top = int(ranks2.sum())
    ways = np.zeros((n + 1, top + 1))  # ways[k, s]: choices of k ranks (so far) summing to s
    ways[0, 0] = 1.0
    for r in ranks2:
        ways[1:, r:] = ways[1:, r:] + ways[:-1, :-r]  # the right side is read whole before writing
    return float(ways[n, observed:].sum() / ways[n].sum())


def _normal(ranks2: np.ndarray, n: int, observed: int) -> float:
    """The normal approximation of the rank sum, with the tie correction and half a rank of continuity."""
    ranks = ranks2 / 2.0
    big_n, m = len(ranks), len(ranks) - n
    mean = n * (big_n + 1) / 2.0
    var = n * m / (big_n * (big_n - 1)) * float(((ranks - ranks.mean()) ** 2).sum())
    if var <= 0:
        return 1.0  # every value equal: nothing ranks above anything
    z = (observed / 2.0 - mean - 0.5) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))
