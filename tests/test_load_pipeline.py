"""One load is a straight pipeline (issue 37): decode -> events (model) -> link -> annotate -> Trace,
each stage entered once from ``load``; and the Trace is built with its load options, frozen."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections import Counter
from pathlib import Path

import pytest

import traceview as tv

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
# the modules, not the package's attributes of the same names (tv.load is the function)
LOAD_PY, MODEL_PY, LINK_PY, CLASSIFY_PY = (
    importlib.import_module(f"traceview.{m}").__file__ for m in ("load", "model", "link", "classify")
)


def _entries_from_load(path) -> Counter:
    """(module file, function) -> how often ``load.py`` called a function defined in that file,
    following every Python call of one uncached ``tv.load``."""
    watched = {MODEL_PY, LINK_PY, CLASSIFY_PY}
    seen: Counter = Counter()

    def profile(frame, event, arg):
        if event != "call":
            return
        code, caller = frame.f_code, frame.f_back
        if code.co_filename in watched and caller is not None and caller.f_code.co_filename == LOAD_PY:
            seen[(Path(code.co_filename).name, code.co_name)] += 1

    sys.setprofile(profile)
    try:
        tv.load(path, cache=False)
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.parametrize("name", ["naive.json.gz", "sdpa_flash.json.gz"])
def test_one_load_enters_model_and_link_once_each(name):
    seen = _entries_from_load(SAMPLES / name)
    per_module = Counter()
    for (module, _), n in seen.items():
        per_module[module] += n
    assert per_module == {"model.py": 1, "link.py": 1, "classify.py": 1}, seen
    assert seen[("model.py", "build_events")] == 1 and seen[("link.py", "link")] == 1


def test_the_trace_is_built_with_its_options_and_frozen(tmp_path):
    devices = tmp_path / "devices.toml"
    devices.write_text(
        'version = 1\n[[device]]\nname = "x"\nmatch = "x"\nmemory_gbps = 1\nsource = "a test"\n',
        encoding="utf-8",
    )
    for cache in (False, tmp_path / "cache", tmp_path / "cache"):  # uncached, stored, then a hit
        t = tv.load(SAMPLES / "naive.json.gz", devices=devices, cache=cache)
        assert t.devices == str(devices)
        assert t.loaded_with == {"rules": None, "devices": str(devices), "salvage": False}
        with pytest.raises(dataclasses.FrozenInstanceError):
            t.devices = None  # type: ignore[misc]
    assert t.cached
    plain = tv.load(SAMPLES / "naive.json.gz", cache=tmp_path / "cache")
    assert plain.cached and plain.devices is None  # the entry holds no option of an earlier load
