"""Work per CPU op from its recorded shapes: FLOPs and bytes moved.

Needs a trace recorded with ``record_shapes=True``: the op's ``Input Dims``,
``Input type`` and, for convolutions and attention, ``Concrete Inputs``. Which
formula an op goes through, where its arguments sit and the element types are
data (``rules/work.toml``); the formulas are here. Each distinct (op name,
Input Dims, Input type, Concrete Inputs) is worked out once.

FLOPs follow ``torch.utils.flop_counter.FlopCounterMode``: ``2*m*k*n`` per matrix
product; biases, softmax and elementwise work are not counted. Causal attention
is the exception: its kernels skip the masked half of the score matrix, so
``flops`` is half of torch's count (FlashAttention's convention) and
``torch_flops`` keeps torch's full count; the op is marked ``causal``. Bytes are
the tensors read and written, counted once (no cache effects). Nothing is
guessed: an op whose shapes or arguments are missing gets empty columns.

An op's work counts once, at the innermost op that has it (``counted``):
``aten::linear`` -> ``aten::addmm`` counts at ``addmm``; a bytes-only op inside
a counted FLOP op (a bias ``copy_`` inside ``addmm``) is part of that op's work.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from ... import cache
from ...model import list_codes
from .derived import kept_for_trace, of_trace

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

WORK_PATH = Path(__file__).resolve().parents[2] / "rules" / "work.toml"
#: the columns ``op_work`` adds, by their one name
COLUMNS = ("formula", "flops", "torch_flops", "bytes_moved", "precision", "causal", "counted")
_ARG_COLUMNS = ("name", "input_dims", "input_types", "concrete_inputs")


@functools.lru_cache(maxsize=1)
def rules() -> dict:
    doc = tomllib.loads(WORK_PATH.read_text(encoding="utf-8"))
    doc["scalar_types"] = {int(k): v for k, v in doc["scalar_types"].items()}
    return doc


def shapes_recorded(trace) -> bool:
    """``has_shapes`` of the trace's ops, kept in its cache entry (a warm run reads no ops table)."""
    return kept_for_trace(trace, "has_shapes", _ops_have_shapes, value=True)


def _ops_have_shapes(trace) -> bool:
    return has_shapes(trace.ops)


def has_shapes(ops: pd.DataFrame) -> bool:
    """Whether the trace was recorded with shapes (any op has ``Input Dims``)."""
    if "input_dims" not in ops.columns:
        return False
    dims = ops["input_dims"]
    # a block at a time: a trace with shapes answers at its first ops, not after all of them
    return any(bool(dims.iloc[i : i + _BLOCK].notna().any()) for i in range(0, len(dims), _BLOCK))


_BLOCK = 4096


def trace_work(trace) -> pd.DataFrame:
    """``op_work(trace.ops)``, worked out once per loaded trace; a cached trace keeps it in its
    cache entry (``cache.derived_frame``), so a warm run reads it back."""
    return of_trace(trace, "work", lambda t: cache.derived_frame(t, "op_work", lambda t: op_work(t.ops)))


def op_work(ops: pd.DataFrame) -> pd.DataFrame:
    """Per op (aligned with ``ops``): formula, flops (executed), torch_flops (torch's count), bytes,
    precision, causal, counted. ``formula`` and ``precision`` are categoricals (a few distinct
    texts over every op, never a string per row)."""
    if not len(ops) or not has_shapes(ops):
        out = pd.DataFrame(index=ops.index)
        out["formula"] = pd.Series([None] * len(ops), index=ops.index, dtype=object)
        out["flops"] = pd.array([None] * len(ops), dtype="Int64")
        out["torch_flops"] = pd.array([None] * len(ops), dtype="Int64")
        out["bytes_moved"] = pd.array([None] * len(ops), dtype="Int64")
        out["precision"] = pd.Series([None] * len(ops), index=ops.index, dtype=object)
        out["causal"] = pd.array([None] * len(ops), dtype="boolean")
        out["counted"] = np.zeros(len(ops), dtype=bool)
        return out
    # only ops whose name has a formula can have work: the others' args are never read
    names, name_values = _codes(ops["name"])
    known = rules()["ops"]
    has_formula = np.append(np.array([str(v) in known for v in name_values], dtype=bool), False)
    rows = np.flatnonzero(has_formula[names])
    coded = [(names[rows], name_values)] + [_codes(ops[c].iloc[rows]) for c in _ARG_COLUMNS[1:]]
    keys, inverse_known = _distinct_rows(np.stack([c for c, _ in coded], axis=1), [len(u) for _, u in coded])
    cats = [u for _, u in coded]
    work = [
        _work_of(*(cat[k] if k >= 0 else None for cat, k in zip(cats, key, strict=True)))
        for key in keys.tolist()
    ]
    table = pd.DataFrame([*work, _NONE], columns=COLUMNS[:-1])  # last: the ops without a formula
    inverse = np.full(len(ops), len(work), dtype=np.int64)
    inverse[rows] = inverse_known.reshape(-1)
    # typed once per distinct key, then taken per op (a take of Int64, not a cast of objects)
    flops, torch_flops, nbytes = (
        pd.array(table[c].to_numpy(dtype=object), dtype="Int64").take(inverse)
        for c in ("flops", "torch_flops", "bytes_moved")
    )
    parent = ops["parent"].to_numpy()
    return pd.DataFrame(
        {
            "formula": _categorical(table["formula"], inverse),
            "flops": flops,
            "torch_flops": torch_flops,
            "bytes_moved": nbytes,
            "precision": _categorical(table["precision"], inverse),
            "causal": pd.array(table["causal"].to_numpy(dtype=object), dtype="boolean").take(inverse),
            "counted": counted(parent, ~flops.isna(), ~nbytes.isna()),
        },
        index=ops.index,
    )


_NONE = (None, None, None, None, None, None)


def _categorical(per_key: pd.Series, inverse: np.ndarray) -> pd.Categorical:
    """The texts of the distinct keys (None: missing), per op: a categorical whose categories are
    sorted, so that grouping on it orders as grouping on the texts would."""
    codes, uniques = pd.factorize(per_key.to_numpy(dtype=object), sort=True, use_na_sentinel=True)
    return pd.Categorical.from_codes(codes[inverse], categories=pd.Index(uniques, dtype=object))


def _distinct_rows(codes: np.ndarray, sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``codes`` (one column per arg, -1 missing) and each row's position
    among them: the columns are read as the digits of one int64 (``sizes`` + 1 each), hashed,
    not sorted as rows; ``np.unique(axis=0)`` where the digits would not fit in one."""
    if math.prod(n + 1 for n in sizes) >= 2**62:
        return np.unique(codes, axis=0, return_inverse=True)
    key = np.zeros(len(codes), dtype=np.int64)
    for col, n in zip(codes.T, sizes, strict=True):
        key = key * (n + 1) + (col + 1)
    inverse, distinct = pd.factorize(key)
    first = np.empty(len(distinct), dtype=np.int64)
    first[inverse[::-1]] = np.arange(len(key) - 1, -1, -1)  # the last write per key is its first row
    return codes[first], inverse


def _codes(col: pd.Series) -> tuple[np.ndarray, Any]:
    """Codes (-1: missing) and distinct values of an arg column: a categorical of text, or
    ``input_dims``' lists (rows sharing one list share a code, see ``model.list_codes``)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy().astype(np.int64), col.cat.categories
    return list_codes(col.to_numpy())


# ------------------------------------------------------------------ counting once


def _below(parent: np.ndarray, flag: np.ndarray) -> np.ndarray:
    """Ops with a descendant that has ``flag``."""
    out = np.zeros(len(parent), dtype=bool)
    cur = parent[flag]
    while len(cur := cur[cur >= 0]):
        out[cur] = True
        cur = parent[cur]
    return out


def _above(parent: np.ndarray, flag: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Whether each of ``rows`` has an ancestor that has ``flag`` (walked up from those rows only)."""
    out = np.zeros(len(rows), dtype=bool)
    idx, cur = np.arange(len(rows)), parent[rows]
    while len(idx):
        ok = cur >= 0
        idx, cur = idx[ok], cur[ok]
        out[idx] |= flag[cur]
        cur = parent[cur]
    return out


def counted(parent: np.ndarray, has_flops: np.ndarray, has_bytes: np.ndarray) -> np.ndarray:
    """The ops whose work counts: FLOP ops with no FLOP op below them, and bytes-only ops
    with no work below them and no counted FLOP op above them."""
    flop_ops = has_flops & ~_below(parent, has_flops)
    bytes_only = np.flatnonzero(has_bytes & ~has_flops & ~_below(parent, has_flops | has_bytes))
    out = flop_ops.copy()
    out[bytes_only[~_above(parent, flop_ops, bytes_only)]] = True
    return out


def counted_owner(parent: np.ndarray, is_counted: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """For every op (or each op row of ``rows``: a walk up from those alone), the nearest counted op
    at or above it (-1: none)."""
    rows = np.arange(len(parent)) if rows is None else rows
    owner = np.where(is_counted[rows], rows, -1)
    idx = np.flatnonzero(owner < 0)
    cur = parent[rows[idx]]
    while len(idx):
        ok = cur >= 0
        idx, cur = idx[ok], cur[ok]
        hit = is_counted[cur]
        owner[idx[hit]] = cur[hit]
        idx, cur = idx[~hit], parent[cur[~hit]]
    return owner


# ------------------------------------------------------------------ one distinct op


class _Args:
    """One op's decoded args: shapes, element sizes, precisions and concrete values."""

    def __init__(self, dims, types, concrete):
        self.dims = _decode(dims)
        self.types = _decode(types)
        self.concrete = _decode(concrete)

    def shape(self, i: int):
        d = self.dims[i] if i < len(self.dims) else None
        return d if isinstance(d, list) and all(isinstance(x, int) for x in d) and self.type(i) else None

    def type(self, i: int):
        t = self.types[i] if i < len(self.types) else None
        return rules()["types"].get(t) if isinstance(t, str) else None

    def size(self, i: int) -> int | None:
        t = self.type(i)
        return t[1] if t else None

    def value(self, i: int):
        """A concrete input as a Python value ("[1, 1]" -> [1, 1], "False" -> False); None if absent."""
        c = self.concrete[i] if 0 <= i < len(self.concrete) else None
        if not isinstance(c, str) or c == "":
            return None
        if c in ("True", "False"):
            return c == "True"
        try:
            return msgspec.json.decode(c.replace("'", '"'))
        except msgspec.DecodeError:
            return c

    def tensors(self) -> list[int]:
        return [i for i in range(len(self.dims)) if self.shape(i) is not None]


def _decode(text):
    if text is None:
        return []
    if isinstance(text, list):  # ``input_dims``, parsed when the trace was loaded
        return text
    try:
        got = msgspec.json.decode(str(text))
    except msgspec.DecodeError:
        return []
    return got if isinstance(got, list) else []


def _work_of(name, dims, types, concrete) -> tuple:
    name = str(name)
    formula = rules()["ops"][name]
    args = _Args(dims, types, concrete)
    tensors = args.tensors()
    if not tensors:
        return _NONE
    precision = args.type(tensors[0])[0]
    try:
        flops, nbytes, causal = FORMULAS[formula](name, args)
    except (TypeError, ValueError, IndexError, ZeroDivisionError):
        return _NONE  # shapes that do not fit the formula: nothing is guessed
    return formula, executed_flops(flops, causal), flops, nbytes, precision, causal


def executed_flops(torch_flops, causal):
    """The FLOPs the kernels execute: torch's count, halved for causal attention. A causal kernel
    skips the score tiles above the diagonal, so it computes about half of q@k^T and p@v; half is
    the convention of the FlashAttention papers' benchmarks and of TraceLens
    (``4*b*h*s*s*d // (2 if causal else 1)``). torch's count is always even (2*...), so exact."""
    return torch_flops // 2 if causal and torch_flops is not None else torch_flops


def _numel(shape) -> int:
    return math.prod(shape)


def _elem_size(args: _Args, i: int) -> int:
    """Bytes per element of input ``i`` (ValueError when its type is unknown)."""
    size = args.size(i)
    if size is None:
        raise ValueError(f"input {i} has no known type")
    return size


def _tensor_bytes(args: _Args, i: int) -> int:
    """Bytes of input ``i``: its elements times its element size (ValueError when either is unknown)."""
    shape = args.shape(i)
    if shape is None:
        raise ValueError(f"input {i} has no shape")
    return _numel(shape) * _elem_size(args, i)


def _matrix(args: _Args, a: int, b: int, extra: tuple = ()) -> tuple:
    """(flops, bytes) of a @ b with optional extra tensors read (bias)."""
    sa, sb = args.shape(a), args.shape(b)
    *batch_a, m, k = sa
    *batch_b, k2, n = sb
    if k != k2 or (batch_a and batch_b and len(batch_a) != len(batch_b)):
        raise ValueError("inner dimensions differ")
    batch = _numel(batch_a or batch_b)
    read = _tensor_bytes(args, a) + _tensor_bytes(args, b)
    read += sum(_tensor_bytes(args, i) for i in extra if args.shape(i) is not None)
    return 2 * batch * m * k * n, read + batch * m * n * _elem_size(args, a)


def _mm(name, args):
    return (*_matrix(args, 0, 1), None)


def _addmm(name, args):
    return (*_matrix(args, 1, 2, extra=(0,)), None)


def _matmul(name, args):
    sa, sb = args.shape(0), args.shape(1)
    a = sa if len(sa) >= 2 else [1, *sa]
    b = sb if len(sb) >= 2 else [*sb, 1]
    batch = np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
    m, k, n = a[-2], a[-1], b[-1]
    if k != b[-2]:
        raise ValueError("inner dimensions differ")
    out = _numel(batch) * m * n
    nbytes = _numel(sa) * args.size(0) + _numel(sb) * args.size(1) + out * args.size(0)
    return 2 * out * k, nbytes, None


def _linear(name, args):
    x, w = args.shape(0), args.shape(1)
    m, (n, k) = _numel(x[:-1]), w
    if x[-1] != k:
        raise ValueError("inner dimensions differ")
    bias = _numel(args.shape(2)) * args.size(2) if args.shape(2) is not None else 0
    return 2 * m * k * n, (_numel(x) + m * n) * args.size(0) + _numel(w) * args.size(1) + bias, None


def _out_size(name, args, default: int) -> int | None:
    at = rules()["out_dtype_arg"].get(name)
    code = args.value(at) if at is not None else None
    if code is None:
        return default
    text = rules()["scalar_types"].get(code) if isinstance(code, int) else None
    return rules()["types"][text][1] if text in rules()["types"] else None


def _scaled_mm(name, args):
    (m, k), (_, n) = args.shape(0), args.shape(1)
    out = _out_size(name, args, args.size(0))
    nbytes = m * k * args.size(0) + k * n * args.size(1) + m * n * out if out else None
    return 2 * m * k * n, nbytes, None


def _int_mm(name, args):
    (m, k), (_, n) = args.shape(0), args.shape(1)
    return 2 * m * k * n, m * k * args.size(0) + k * n * args.size(1) + 4 * m * n, None


def _conv(name, args):
    x, w = args.shape(0), args.shape(1)
    at = rules()["conv"].get(name)
    if at is None:
        raise ValueError("no argument positions")
    spatial = len(x) - 2

    def arg(key, default):
        pos = at[key]
        v = args.value(pos) if pos >= 0 else default
        if v is None:
            raise ValueError(f"{key} not recorded")
        return [v] * spatial if type(v) is int and key in ("stride", "padding", "dilation") else v

    # groups needs no argument: the weight is [out, in / groups, *kernel], so w[1] already divides
    # by it (the FLOP formula below is checked against torch's FlopCounter with groups=4)
    stride, dilation = arg("stride", None), arg("dilation", [1] * spatial)
    padding = arg("padding", None)
    if arg("transposed", False):
        return (
            2 * _numel(x[2:]) * _numel(w) * x[0],
            None,
            None,
        )  # torch's count; output size needs output_padding
    if padding == "valid":
        padding = [0] * spatial
    if padding == "same":
        out = list(x[2:])
    else:
        out = [
            (i + 2 * p - d * (k - 1) - 1) // s + 1
            for i, p, d, k, s in zip(x[2:], padding, dilation, w[2:], stride, strict=True)
        ]
    flops = 2 * x[0] * w[0] * w[1] * _numel(w[2:]) * _numel(out)
    bias = _numel(args.shape(2)) * args.size(2) if args.shape(2) is not None else 0
    nbytes = (_numel(x) + x[0] * w[0] * _numel(out)) * args.size(0) + _numel(w) * args.size(1) + bias
    return flops, nbytes, None


def _sdpa(name, args):
    at = rules()["attention"][name]
    q, k, v = args.shape(0), args.shape(1), args.shape(2)
    if at["layout"] == "bshd":
        q, k, v = ([s[0], s[2], s[1], s[3]] for s in (q, k, v))
    b, hq, sq, dq = q
    sk, dv = k[2], v[3]
    flops = 2 * b * hq * sq * sk * dq + 2 * b * hq * sq * sk * dv
    nbytes = (_numel(q) + _numel(k) + _numel(v) + b * hq * sq * dv) * args.size(0)
    causal = args.value(at["causal_arg"])
    return flops, nbytes, bool(causal) if causal is not None else None


def _read(args, tensors) -> int:
    return sum(_numel(args.shape(i)) * args.size(i) for i in tensors)


def _elementwise(name, args):
    """Every tensor read, one output the size of the largest (broadcast) input written."""
    t = args.tensors()
    return None, _read(args, t) + max(_numel(args.shape(i)) for i in t) * args.size(t[0]), None


def _reduction(name, args):
    """The input read (the reduced output is small and its size is not recorded)."""
    t = args.tensors()
    return None, _read(args, t[:1]), None


def _norm(name, args):
    """Input, weight and bias read, an output like the input written."""
    t = args.tensors()
    return None, _read(args, t) + _numel(args.shape(t[0])) * args.size(t[0]), None


def _copy(name, args):
    """copy_(self, src): src read, self written; else the input read and written (in the out dtype)."""
    t = args.tensors()
    if len(t) >= 2:
        return None, _read(args, t[:2]), None
    out = _out_size(name, args, args.size(t[0]))
    return None, _numel(args.shape(t[0])) * (args.size(t[0]) + out) if out else None, None


FORMULAS = {
    "mm": _mm,
    "bmm": _mm,
    "addmm": _addmm,
    "baddbmm": _addmm,
    "matmul": _matmul,
    "linear": _linear,
    "scaled_mm": _scaled_mm,
    "int_mm": _int_mm,
    "conv": _conv,
    "sdpa": _sdpa,
    "elementwise": _elementwise,
    "reduction": _reduction,
    "norm": _norm,
    "softmax": _norm,
    "copy": _copy,
}
