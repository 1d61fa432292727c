"""Columnar cache of loaded traces: the second load of an unchanged trace reads Parquet.

``load(path)`` (``cache=None``, the default) looks in the default folder:
``$TRACEVIEW_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/traceview``, else
``~/.cache/traceview`` -- never next to the trace. ``cache="/some/dir"`` uses that
folder, ``cache=False`` bypasses the cache.

One entry per trace path (a folder named by a hash of the absolute path) holds the
four DataFrames as Arrow IPC (Feather v2) files plus ``entry.json`` (meta, warnings, stats, dtypes, and
the key). The key is the trace's size and mtime_ns, the traceview version, a digest
of traceview's code and kernel rules (so a classification change invalidates), the
cache format and the pandas/pyarrow versions. Anything else -- a changed trace, a
missing or corrupt entry -- is a miss, and the next load rewrites the entry.

Caching needs pyarrow (the optional extra ``traceview[cache]``); without it there
is simply no cache. Failures to write (read-only folder, full disk) never break a
load: the entry is skipped.

Why Arrow IPC and not Parquet: a reload is dominated by fixed costs, and
``import pyarrow.parquet`` alone takes ~25 ms (``pyarrow.feather`` ~2 ms, pyarrow
itself is already imported by pandas); uncompressed IPC also needs no decoding.
On the 28 MB corpus trace a fresh-process reload took 56-86 ms with Parquet and
~30 ms with IPC (parsing the JSON: ~1 s). Categoricals are stored as their codes
with the categories (and their dtype) in ``entry.json``, so dtypes come back exactly.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

FORMAT = 1
_TABLES = ("events", "kernels", "ops", "steps")
_PKG = Path(__file__).parent


def cache_dir(cache=None) -> Path | None:
    """The folder ``cache`` names: None/True -> the default folder, False -> None."""
    if cache is False:
        return None
    if cache is None or cache is True:
        env = os.environ.get("TRACEVIEW_CACHE_DIR")
        if env:
            return Path(env).expanduser()
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
        return base / "traceview"
    return Path(os.fspath(cache)).expanduser()


def available() -> bool:
    try:
        import pyarrow  # noqa: F401
        import pyarrow.feather  # noqa: F401
    except ImportError:
        return False
    return True


def lookup(path, cache):
    """The cached Trace of ``path`` if the entry matches the trace as it is now, else None."""
    try:
        folder = cache_dir(cache)
        if folder is None or not available():
            return None
        entry = _entry(folder, path)
        info_path = entry / "entry.json"
        if not info_path.is_file():
            return None
        info = msgspec.json.decode(info_path.read_bytes())
        if info.get("key") != _key(path):
            return None
        return _read(entry, info, path)
    except Exception:  # a broken entry is a miss; the next store replaces it
        return None


def store(trace, cache) -> None:
    """Write ``trace``'s entry; any failure just means no cache."""
    tmp = None
    try:
        folder = cache_dir(cache)
        if folder is None or not available():
            return
        key = _key(trace.path)
        if key is None:
            return
        folder.mkdir(parents=True, exist_ok=True)
        entry = _entry(folder, trace.path)
        tmp = Path(tempfile.mkdtemp(prefix=entry.name + ".tmp-", dir=folder))
        _write(tmp, trace, key)
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        os.replace(tmp, entry)
        tmp = None
    except Exception:
        return
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _entry(folder: Path, path) -> Path:
    name = hashlib.sha256(os.path.abspath(os.fspath(path)).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return folder / name


def _key(path) -> dict | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    import pyarrow

    from . import __version__

    return {"path": os.path.abspath(os.fspath(path)), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "version": __version__, "code": _code_digest(), "format": FORMAT,
            "pandas": pd.__version__, "pyarrow": pyarrow.__version__}


_digest_memo: dict = {}


def _code_digest() -> str:
    """Digest of traceview's modules and rule files (re-hashed only when one changes)."""
    files = sorted(p for p in _PKG.rglob("*") if p.suffix in (".py", ".toml") and "__pycache__" not in p.parts)
    sig = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    if sig not in _digest_memo:
        h = hashlib.sha256()
        for p in files:
            h.update(str(p.relative_to(_PKG)).encode() + b"\0" + p.read_bytes() + b"\0")
        _digest_memo.clear()
        _digest_memo[sig] = h.hexdigest()
    return _digest_memo[sig]


def _enc_hook(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    raise NotImplementedError(type(obj))


def _write(folder: Path, trace, key: dict) -> None:
    import pyarrow as pa
    import pyarrow.feather as feather

    dtypes = {}
    for name in _TABLES:
        frame = getattr(trace, name)
        dtypes[name] = _describe(frame)
        plain = frame.copy(deep=False)
        for col, dtype in frame.dtypes.items():  # categoricals as their codes; categories in entry.json
            if isinstance(dtype, pd.CategoricalDtype):
                plain[col] = frame[col].cat.codes.to_numpy()
        table = pa.Table.from_pandas(plain, preserve_index=None)
        feather.write_feather(table, folder / f"{name}.arrow", compression="uncompressed")
    info = {"key": key, "meta": trace.meta, "warnings": list(trace.warnings), "stats": trace.stats,
            "dtypes": dtypes}
    (folder / "entry.json").write_bytes(msgspec.json.encode(info, enc_hook=_enc_hook))


def _describe(frame: pd.DataFrame) -> dict:
    """What Parquet may not bring back by itself: the exact dtype of each column."""
    out = {}
    for col, dtype in frame.dtypes.items():
        d = {"dtype": str(dtype)}
        if isinstance(dtype, pd.CategoricalDtype):
            d["categories_dtype"] = str(dtype.categories.dtype)
            d["categories"] = dtype.categories.tolist()
            d["ordered"] = bool(dtype.ordered)
        out[str(col)] = d
    return {"columns": [str(c) for c in frame.columns], "dtypes": out, "index": str(frame.index.dtype)}


def _read(entry: Path, info: dict, path) -> object:
    import pyarrow.feather as feather

    from .model import Trace

    frames = {}
    for name in _TABLES:
        frame = feather.read_table(entry / f"{name}.arrow", memory_map=False).to_pandas()
        frames[name] = _restore(frame, info["dtypes"][name])
    return Trace(path=os.fspath(path), meta=info["meta"], warnings=info["warnings"], stats=info["stats"],
                 **frames)


def _restore(frame: pd.DataFrame, spec: dict) -> pd.DataFrame:
    if [str(c) for c in frame.columns] != spec["columns"]:
        raise ValueError("columns differ")
    for col in frame.columns:
        want = spec["dtypes"][str(col)]
        have = frame[col].dtype
        if "categories" in want:
            cats = pd.Index(want["categories"], dtype=want["categories_dtype"])
            dtype = pd.CategoricalDtype(cats, ordered=want["ordered"])
            frame[col] = pd.Categorical.from_codes(frame[col].to_numpy(), dtype=dtype, validate=False)
        elif str(have) != want["dtype"]:
            frame[col] = frame[col].astype(want["dtype"])
    if str(frame.index.dtype) != spec["index"]:
        frame.index = frame.index.astype(spec["index"])
    return frame
