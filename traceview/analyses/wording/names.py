"""Kernel names: a key that matches the "same" kernel across traces, and how to show one.

``normalise_kernel_name`` is what diff matches GPU activities on: template arguments
that are types or numbers, tile sizes, architecture prefixes, dtypes and parameter
lists do not hide a match, so ``ampere_sgemm_128x64_tn`` in A and
``volta_sgemm_64x32_tn`` in B are the same kernel family. The other functions name a
kernel for a table or a sentence, or tell its GEMM family.
"""

from __future__ import annotations

import functools
import re

from ...limits import name_view

_ARCH_RE = re.compile(r"(?<![A-Za-z0-9])(maxwell|pascal|volta|turing|ampere|ada|hopper|blackwell)(?=_)")
_DTYPE_RE = re.compile(
    r"(?<![A-Za-z0-9])(bf16|fp16|fp32|fp64|fp8|tf32|f16|f32|f64|e4m3|e5m2|int8|int32|int64|i8|i32|u8|s8|"
    r"half|float|double|bfloat16|float16|float32|float64)(?![A-Za-z0-9])"
)
_DIGITS_RE = re.compile(r"\d+")
_TYPE_ARG_RE = re.compile(
    r"^(?:(?:const|volatile|unsigned|signed|struct|class)\s+)*"
    r"(?:\w+::)*(?:u?int\d*_t|u?int|long|long long|short|char|bool|float|double|size_t|"
    r"half|half2|half_t|__half2?|bfloat16_t|tfloat32_t|float_e\w+|__nv_\w+|BFloat16|Half|Float8_\w+|"
    r"complex<[^<>]*>|c10::complex<[^<>]*>)"
    r"(?:\s*(?:const|volatile))?\s*[*&]*\s*(?:const)?$"
)
_LITERAL_RE = re.compile(r"^(?:\(\w+\))?-?(?:\d+[uUlL]*|true|false|\d*\.\d+f?|0x[0-9a-fA-F]+)$")
_OPEN = {"<": ">", "(": ")", "{": "}"}
_CLOSE = {">", ")", "}"}
_NOISE_RE = re.compile(r"::\{lambda\}|\{lambda\}::|::operator\b|\s+const\b")
_MAX_DEPTH = (
    32  # template arguments read this deep (real names nest 5); deeper ones are dropped, not recursed into
)


@functools.lru_cache(maxsize=65536)
def normalise_kernel_name(name: str) -> str:
    """A key that is equal for the "same" kernel across traces, GPUs and dtypes.

    - ``Memcpy``/``Memset`` names are kept as written (direction matters);
    - ``void `` and ``(anonymous namespace)::`` are dropped;
    - a parameter list ``(...)`` is dropped; a lambda ``{lambda(...)#2}`` becomes ``{lambda}``;
    - template arguments that are types (``float``, ``c10::BFloat16``, ``char*``) or
      literals (``128``, ``true``) are dropped; the others keep their last name
      component (``MulFunctor``), so different functors stay different kernels;
    - GPU architecture prefixes (``ampere_``, ``volta_``) become ``ARCH``, dtype
      tokens in identifiers (``bf16``, ``fp32``) become ``T`` and every other number ``N``
      (``ampere_sgemm_128x64_tn`` -> ``ARCH_sgemm_NxN_tn``).

    A very long name is read on its head and tail (``limits.name_view``): bounded work.
    """
    text = " ".join(name_view(str(name)).split())
    if text.startswith(("Memcpy", "Memset")):
        return text
    text = text.replace("(anonymous namespace)::", "").replace("(anonymous namespace)", "")
    text = text.replace("->", " ")
    if text.startswith("void "):
        text = text[5:]
    out = _norm(text)
    out = _tokens(out)
    return " ".join(out.split()) or text


def _tokens(text: str) -> str:
    text = _ARCH_RE.sub("ARCH", text)
    text = _DTYPE_RE.sub("T", text)
    return _DIGITS_RE.sub("N", text)


def _matching(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``start``; -1 when unbalanced."""
    stack = [_OPEN[text[start]]]
    i = start + 1
    while i < len(text):
        c = text[i]
        if c in _OPEN:
            stack.append(_OPEN[c])
        elif c in _CLOSE:
            if c != stack[-1]:
                return -1
            stack.pop()
            if not stack:
                return i
        i += 1
    return -1


def _norm(text: str, depth: int = 0) -> str:
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in _OPEN:
            j = _matching(text, i)
            if j < 0:  # unbalanced (e.g. ``operator<``): keep the rest as plain text
                out.append(text[i:])
                break
            inner = text[i + 1 : j]
            if c == "<":
                parts = _split_args(inner) if depth < _MAX_DEPTH else []
                args = [a for a in (_norm_arg(x, depth + 1) for x in parts) if a]
                if args:
                    out.append("<" + ", ".join(args) + ">")
            elif c == "{":
                word = re.match(r"\s*(\w*)", inner)  # always matches (both parts may be empty)
                out.append("{" + (word.group(1) if word else "") + "}")
            # "(": a parameter list (or operator()): dropped
            i = j + 1
            continue
        out.append(c)
        i += 1
    result = "".join(out)
    prev = None
    while prev != result:
        prev, result = result, _NOISE_RE.sub("", result)
    return result.strip()


def _split_args(inner: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in inner:
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _norm_arg(arg: str, depth: int) -> str:
    if not arg or _LITERAL_RE.match(arg) or _TYPE_ARG_RE.match(arg):
        return ""
    n = _norm(arg, depth)
    if not n or _LITERAL_RE.match(n) or _TYPE_ARG_RE.match(n):
        return ""
    head, sep, tail = n.partition("<")
    head = head.rsplit("::", 1)[-1].strip()
    return head + sep + tail


def short_kernel_name(name: str) -> str:
    """The kernel's own identifier, for sentences: ``fmha_cutlassF``, ``flash_fwd_kernel``,
    ``ampere_sgemm``."""
    text = str(name).strip()
    if text.startswith(("Memcpy", "Memset")):
        return text.split(" (")[0]
    text = text.replace("(anonymous namespace)::", "")
    if text.startswith("void "):
        text = text[5:]
    head = re.split(r"[<(]", text, maxsplit=1)[0].strip().rsplit("::", 1)[-1]
    cut = re.search(r"_(?:bf16|fp16|fp32|f16|f32|tf32|fp8|\d)", head)
    if cut and cut.start() >= 4:
        head = head[: cut.start()]
    return head or text


_TILE_RE = re.compile(r"(?<![A-Za-z0-9])\d+x\d+(?:x\d+)*(?![0-9])")


def tile(name: str) -> str | None:
    """A GEMM/conv kernel's tile configuration as its name writes it (``ampere_sgemm_128x64_tn`` ->
    ``128x64``; the first ``NxM`` token), None when the name has none. The matching key masks it
    (one family), so a diff says apart when it changed."""
    m = _TILE_RE.search(str(name))
    return m.group(0) if m else None


def finding_name(key: str, example: str, limit: int = 70) -> str:
    """How a sentence names a kernel: its readable name (:func:`readable_kernel_name`, no
    digit masked), shortened in the middle past ``limit`` characters. ``key`` is kept for
    callers that have no example."""
    text = kernel_label(example) if example else key
    if len(text) <= limit:
        return text
    half = (limit - 1) // 2
    return text[:half] + "…" + text[-(limit - 1 - half) :]


def kernel_label(name: str) -> str:
    """How a table or a sentence names a kernel: :func:`readable_kernel_name`, except that
    ``Memcpy``/``Memset`` names are kept whole (the direction in brackets matters)."""
    text = str(name)
    return text if text.startswith(("Memcpy", "Memset")) else readable_kernel_name(text)


_DROP_NS = ("at::native::", "at::cuda::", "at::", "c10::", "cub::", "cuda::", "std::")
_LAUNCHERS = re.compile(r"(^|::)(Kernel\d*|KernelSm\d+|device_kernel|kernel_entry)$")
_PLAIN_ID = re.compile(r"^[A-Za-z_]\w*$")
_HELPER_ARG = re.compile(r"(traits|Traits|Params|params|Config|Policy|Array|Shape|OpaqueType)(Ex)?$")


@functools.lru_cache(maxsize=65536)
def readable_kernel_name(name: str) -> str:
    """A short name a person recognises, no digit masked: the kernel a wrapper launches
    (``cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_relu_128x128_32x3_nn_align8>`` ->
    ``cutlass_80_tensorop_s16816gemm_relu_128x128_32x3_nn_align8``), else the function
    with its first functor argument (``vectorized_elementwise_kernel<GeluCUDAKernelImpl>``,
    ``pytorch_flash::flash_fwd_kernel``); parameter lists and type arguments dropped.
    A very long name is read on its head and tail (``limits.name_view``): bounded work."""
    text = " ".join(name_view(str(name)).split())
    if text.startswith(("Memcpy", "Memset")):
        return text.split(" (")[0]
    text = text.replace("(anonymous namespace)::", "").replace("(anonymous namespace)", "").replace("->", " ")
    if text.startswith("void "):
        text = text[5:]
    out = _drop_return_type(_norm(text) or text)
    head, _, rest = out.partition("<")
    args = _split_args(rest[:-1]) if rest.endswith(">") else []
    heads = [_arg_head(a) for a in args]
    if _LAUNCHERS.search(head) and heads and _PLAIN_ID.match(heads[0]):
        return heads[0]
    for prefix in _DROP_NS:
        if head.startswith(prefix):
            head = head[len(prefix) :]
    own = _drop_return_type(text)  # the kernel's own template arguments, not a return type's
    inner = ", ".join(_literal_args(own) + ([functor] if (functor := _functor(args)) else []))
    dtype = _dtype(own)
    return (f"{head}<{inner}>" if inner else head) + (f" [{dtype}]" if dtype else "")


def _literal_args(text: str) -> list[str]:
    """The kernel's own number arguments (``512, 1`` of ``reduce_kernel<512, 1, ReduceOp<...>>``,
    the vector width 4 of ``vectorized_elementwise_kernel<4, ...>``): launch shapes that tell two
    instances of one template apart."""
    start = text.find("<")
    end = _top_level_params(text, start) if start >= 0 else -1
    if start < 0 or not text[:end].rstrip().endswith(">"):
        return []
    out = []
    for arg in _split_args(text[start + 1 : text[:end].rstrip().rfind(">")]):
        if re.fullmatch(r"-?\d+[uUlL]*", arg):
            out.append(arg.rstrip("uUlL"))
    return out


_FLOAT_TYPES = (
    r"float|double|Half|BFloat16|half|__half|__nv_bfloat16|__nv_half|bfloat16_t|half_t|tfloat32_t|"
    r"Float8_\w+|float_e\w+|complex<(?:float|double|Half)>"
)
_INT_TYPES = r"bool|(?:unsigned |signed )?char|short|int|long long|long|u?int(?:8|16|32|64)_t"
# a type argument standing alone (not a pointer, not part of a longer name, not "unsigned int")
_DTYPE_ARG = r"(?<![\w:])(?<!unsigned )(?<!signed )(?:(?:c10|at|cutlass|std|cuda)::)?({})(?![\w:])(?!\s*[*&])"
_FLOAT_ARG_RE = re.compile(_DTYPE_ARG.format(_FLOAT_TYPES))
_INT_ARG_RE = re.compile(_DTYPE_ARG.format(_INT_TYPES))
_PARAMS_RE = re.compile(
    r"(?<!lambda)\([^()]*\)"
)  # a parameter list, not a lambda's (its dtype is the kernel's)


def _dtype(text: str) -> str | None:
    """The element type among the template arguments (``float`` in ``BinaryFunctor<float, float,
    float, MulFunctor<float>>``, ``double`` in ``{lambda(double)#1}``): two kernels that differ only
    in it must not read the same. A floating type first (an ``int`` is often an index type), else
    an integer or bool one; parameter lists are not looked at."""
    start = text.find("<")
    if start < 0:
        return None
    cut = _top_level_params(text, start)
    args = text[start:cut]
    for _ in range(_MAX_DEPTH):  # innermost first; a lambda's own list is kept
        args, n = _PARAMS_RE.subn("", args)
        if not n:
            break
    hit = _FLOAT_ARG_RE.search(args) or _INT_ARG_RE.search(args)
    return hit.group(1) if hit else None


def _top_level_params(text: str, start: int) -> int:
    """Where the kernel's own parameter list begins (the first ``(`` outside ``<>``), else the end."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth <= 0:
            return i
    return len(text)


def _arg_head(arg: str) -> str:
    return arg.split("<", 1)[0].split("{", 1)[0].strip().rsplit("::", 1)[-1]


def _functor(args: list[str], depth: int = 3) -> str | None:
    """The first argument that is not a helper, with the functors it wraps (two levels):
    ``gpu_kernel_impl<direct_copy_kernel_cuda>``, ``BinaryFunctor<MulFunctor>``."""
    arg = next((a for a in args if _arg_head(a) and not _HELPER_ARG.search(_arg_head(a))), None)
    if arg is None:
        return None
    head, _, rest = arg.partition("<")
    inner = _functor(_split_args(rest[:-1]), depth - 1) if depth > 1 and rest.endswith(">") else None
    return f"{_arg_head(head)}<{inner}>" if inner else _arg_head(head)


def _drop_return_type(text: str) -> str:
    """``enable_if<!, void>::type gemvx::kernel<...>`` -> ``gemvx::kernel<...>``: the part after
    the last space outside brackets."""
    depth, cut = 0, -1
    for i, c in enumerate(text):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == " " and depth == 0:
            cut = i
    return text[cut + 1 :] if 0 <= cut < len(text) - 1 else text


def distinct_labels(names: list[str], width: int = 40) -> list[str]:
    """``kernel_label`` of each name, except where two different names read the same (the
    readable name drops bool template arguments: ``splitKreduce_kernel<true, false, false>`` and
    ``<true, true, false>`` both read ``splitKreduce_kernel [float]``): those get the part of their
    full name in which the group differs, ``splitKreduce_kernel [float] («…false, false>…»)``, so
    that a name in a table or a sentence stands for one kernel (issue 32 item 3)."""
    labels = [kernel_label(n) for n in names]
    groups: dict[str, set[str]] = {}
    for label, name in zip(labels, names, strict=True):
        groups.setdefault(label, set()).add(str(name))
    out = []
    for label, name in zip(labels, names, strict=True):
        same = sorted(groups[label])
        if len(same) < 2:
            out.append(label)
            continue
        head, tail = _common_head(same), _common_head([s[::-1] for s in same])
        name = str(name)  # the differing part, with a little of what stands around it
        middle = name[max(0, head - 12) : max(head, len(name) - tail) + 12]
        out.append(f"{label} («…{middle[:width]}…»)")
    return out


def _common_head(texts: list[str]) -> int:
    """How many leading characters all ``texts`` share (the sorted first and last bound the rest)."""
    first, last = min(texts), max(texts)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return n


def family_label(names: list[str]) -> str:
    """How a table or a sentence names several kernels one matching key stands for: their readable
    names with each number that varies read as ``*`` (``ampere_sgemm_*x*_nn`` for
    ``ampere_sgemm_128x64_nn`` and ``ampere_sgemm_32x128_nn``), else their common head and tail
    around a ``*``; never one of them (issue 32 item 3)."""
    labels = sorted({kernel_label(n) for n in names})
    if len(labels) < 2:
        return labels[0] if labels else ""
    parts = [re.split(r"(\d+)", x) for x in labels]  # words and numbers alternate
    aligned = len({len(p) for p in parts}) == 1
    if aligned and all(len({p[i] for p in parts}) == 1 for i in range(0, len(parts[0]), 2)):
        # the same words, other numbers: each number that varies read as *
        return "".join(p if len({q[i] for q in parts}) == 1 else "*" for i, p in enumerate(parts[0]))
    head = _common_head(labels)
    tail = min(_common_head([s[::-1] for s in labels]), min(len(s) for s in labels) - head)
    return labels[0][:head] + "*" + (labels[0][len(labels[0]) - tail :] if tail else "")
