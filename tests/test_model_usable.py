"""The model's short cut past its float64 time checks (``model._surely_near``) keeps exactly the
rows, and writes exactly the notes, that the checks themselves give: random times around every
limit the checks have (the +-2**61 / 2**62 ns range, a day's window), missing and negative
durations and missing times, each compared with the checks run with the short cut turned off."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traceview import model

LIMITS = [2**62 + d for d in (-(10**6), -3000, -100, 0)] + [-(2**61) + d for d in (10**6, 3000, 0, -100)]
BASES = [0, 1_700_000_000_000_000_000, *LIMITS]
DAY = model.TIME_WINDOW_NS
SPREADS = [10, 10**9, DAY // 2 - 3000, DAY // 2 + 3000, DAY - 10**4, DAY + 10**4, 10**15]


def _events(rng) -> pd.DataFrame:
    n = int(rng.integers(1, 40))
    spread = int(rng.choice(SPREADS))
    ts = int(rng.choice(BASES)) + rng.integers(-spread, spread, n)
    dur = rng.integers(0, int(rng.choice([5, 10**6, 10**12, 2**40])), n)
    for column, p in ((ts, 0.2), (dur, 0.1)):
        if rng.random() < p:
            column[rng.integers(0, n)] = model.MISSING
    if rng.random() < 0.1:
        dur[rng.integers(0, n)] = -5
    return pd.DataFrame({"ts_ns": ts.astype(np.int64), "dur_ns": dur.astype(np.int64)})


def test_short_cut_keeps_what_the_float_checks_keep(monkeypatch):
    rng = np.random.default_rng(35)
    cases = [_events(rng) for _ in range(600)]
    surely_near, taken = model._surely_near, []
    monkeypatch.setattr(model, "_surely_near", lambda *args: taken.append(surely_near(*args)) or taken[-1])
    fast = [model._usable(events.copy()) for events in cases]
    monkeypatch.setattr(model, "_surely_near", lambda *args: False)
    for events, (keep, notes) in zip(cases, fast, strict=True):
        want_keep, want_notes = model._usable(events.copy())
        assert np.array_equal(keep, want_keep) and notes == want_notes
    assert 50 < sum(taken) < 550  # the short cut was taken, and not always


@pytest.mark.parametrize("far", [0, 1, 2])
def test_a_far_event_is_still_found(far):
    ts = np.array([1_000, 2_000, 3_000] + [1_000 + model.TIME_WINDOW_NS * 2] * far, dtype=np.int64)
    events = pd.DataFrame({"ts_ns": ts, "dur_ns": np.ones(len(ts), dtype=np.int64)})
    keep, notes = model._usable(events)
    assert keep.tolist() == [True] * 3 + [False] * far
    assert bool(notes) == bool(far)
