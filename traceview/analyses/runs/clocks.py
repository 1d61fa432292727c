"""Clocks across ranks: each rank's offset (and drift) against a reference rank, from the collectives.

The kernels of one collective end together on every rank that takes part (the last
rank to arrive releases them all; a few µs apart on real hardware), so for a matched
collective ``end on rank r - end on the reference rank`` measures rank r's clock,
not the job. The reference is the lowest rank. Per rank, robustly (a few bad
collectives move nothing):

- ``clock_offset_ns``: the median of those end-time differences (with drift: the
  intercept at the middle of the reference's collectives, the median of the
  differences less the drift term);
- ``clock_drift_ppm``: fitted only with at least ``DRIFT_MIN`` matched collectives,
  by the resistant two-halves line: the slope between the medians (time, difference)
  of the earlier and the later half of the collectives; NA otherwise;
- ``clock_residual_ns``: the median absolute end-time difference left after alignment.

The fit needs only the collectives' times, so it runs after the per-rank work,
serially or on Dask alike. Whenever the fit is plausible, every rank's times are put on
the reference clock, however small its offset: with a threshold, a rank's own µs of end
skew would be removed when its clock is also far off and kept when it is not, so moving a
rank's clock by 50 ms would change the waits (issue 24: by 7.5 µs on ``param/``); aligned
always, the waits don't depend on where a rank's clock stands. When a residual stays above
``REFUSE_RESIDUAL_NS`` the clocks can't be trusted to compare ranks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

REFUSE_RESIDUAL_NS = 100_000  # 100 µs left after alignment: arrivals can't be ordered by these clocks
DRIFT_MIN = 16  # matched collectives per rank before a drift is fitted (8 per half)
MAX_DRIFT_PPM = 1_000  # quartz clocks drift under 100 ppm: a steeper fit is no clock's, never applied
MAX_OFFSET_NS = 2**60  # 36 years: beyond it the corrected times could leave int64 (trace text is untrusted)
KEYS = ["name", "n"]


def end_diffs(m: pd.DataFrame) -> pd.DataFrame:
    """Rows (rank, t_ns, diff_ns) per matched collective: the reference rank's end time, and this rank's
    end minus it."""
    end = m["ts_ns"] + m["dur_ns"].clip(lower=0)
    ref = m["rank"].min()
    ref_end = pd.Series(
        end[(m["rank"] == ref).to_numpy()].to_numpy(),
        index=pd.MultiIndex.from_frame(m.loc[m["rank"] == ref, KEYS]),
    )
    t = ref_end.reindex(pd.MultiIndex.from_frame(m[KEYS])).to_numpy(dtype=np.int64)
    return pd.DataFrame(
        {"rank": m["rank"].to_numpy(), "t_ns": t, "diff_ns": end.to_numpy(dtype=np.int64) - t}
    )


def drift(d: pd.DataFrame) -> pd.Series:
    """Per rank, the slope (ns per ns) between the medians of the earlier and later half of its
    collectives (a resistant line); NaN for a rank with fewer than DRIFT_MIN collectives."""
    mid = d.groupby("rank")["t_ns"].transform("median")
    med = (
        d.assign(late=d["t_ns"] > mid).groupby(["rank", "late"])[["t_ns", "diff_ns"]].median().unstack("late")
    )
    if True not in med["t_ns"].columns or False not in med["t_ns"].columns:
        return pd.Series(np.nan, index=d["rank"].unique())
    dt = med["t_ns"][True] - med["t_ns"][False]
    slope = (med["diff_ns"][True] - med["diff_ns"][False]) / dt.where(dt > 0)
    enough = d.groupby("rank").size() >= DRIFT_MIN
    return slope.where(enough.reindex(slope.index, fill_value=False))


def fit(m: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Per rank (index): clock_offset_ns, clock_drift_ppm (NA where not fitted), clock_residual_ns;
    and the middle of the reference's collectives (ns), where the offset holds."""
    d = end_diffs(m)
    t_mid = int(np.median(d["t_ns"]))
    fitted = drift(d)
    slope = fitted.fillna(0.0)
    d = d.assign(x=(d["t_ns"] - t_mid).astype(float))
    d["drift_ns"] = d["x"] * slope.reindex(d["rank"]).to_numpy()
    offset = (d["diff_ns"] - d["drift_ns"]).groupby(d["rank"]).median().round()
    left = (d["diff_ns"] - d["drift_ns"] - offset.reindex(d["rank"]).to_numpy()).abs()
    out = pd.DataFrame(
        {
            "clock_offset_ns": offset.astype(np.int64),
            "clock_drift_ppm": (fitted * 1e6).reindex(offset.index),
            "clock_residual_ns": left.groupby(d["rank"]).median().round().astype(np.int64),
        }
    )
    return out, t_mid


def correction(m: pd.DataFrame, clocks: pd.DataFrame, t_mid: int) -> np.ndarray:
    """ns to subtract from each row's times to put it on the reference clock. The drift term is a function
    of reference time, so a row's own time is first taken back to it: own = t + a + b (t - t_mid)."""
    c = clocks.reindex(m["rank"])
    a = c["clock_offset_ns"].to_numpy(dtype=np.int64)
    b = c["clock_drift_ppm"].fillna(0.0).to_numpy() / 1e6
    # an int64 difference first: epoch ns as float64 would lose ~256 ns
    since_mid = ((m["ts_ns"].to_numpy(dtype=np.int64) - t_mid).astype(float) - a) / (1.0 + b)
    return a + np.rint(b * since_mid).astype(np.int64)


def align(m: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """(matched collectives on the reference clock where needed, the per-rank fit, whether times moved).
    ``m``: rows (rank, name, n, step, ts_ns, dur_ns) of collectives every rank ran."""
    if not len(m):
        empty = pd.DataFrame(
            {
                "clock_offset_ns": pd.Series([], dtype=np.int64),
                "clock_drift_ppm": [],
                "clock_residual_ns": pd.Series([], dtype=np.int64),
            }
        )
        return m, empty, False
    clocks, t_mid = fit(m)
    if not plausible(clocks):
        return m, clocks, False
    shift = correction(m, clocks, t_mid)
    if not len(shift) or not shift.any():
        return m, clocks, False  # the ends agree to the ns: nothing to move
    return m.assign(ts_ns=m["ts_ns"].to_numpy() - shift), clocks, True


def plausible(clocks: pd.DataFrame) -> bool:
    """Whether the fit describes clocks at all: drifts under MAX_DRIFT_PPM, offsets under MAX_OFFSET_NS."""
    drift = clocks["clock_drift_ppm"].abs().max()
    return not (drift > MAX_DRIFT_PPM) and not (clocks["clock_offset_ns"].abs().max() > MAX_OFFSET_NS)
