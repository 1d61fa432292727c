"""Random forests of parent pointers, for tests that check tree walks against a plain walk."""

from __future__ import annotations

import numpy as np


def deep_forest(rng: np.random.Generator, n: int) -> np.ndarray:
    """Each node's parent is one of the 3 nodes just before it, or none (1 %, and node 0): a
    forest whose chains run deep, as the nesting of real ops does."""
    parent = np.array(
        [-1 if i == 0 or rng.random() < 0.01 else i - 1 - int(rng.integers(0, 3)) for i in range(n)]
    )
    return np.where(parent >= 0, parent, -1)
