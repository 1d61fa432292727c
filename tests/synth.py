"""Small synthetic GPU traces in Kineto format, for tests that need kernels.

A trace is written from a hand-written list of CPU ops per step. Each op is
``op(name, *children, kernels=[...])``: children run first, then the op launches
its kernels (one ``cudaLaunchKernel``/``cudaMemcpyAsync`` runtime event each,
linked to the GPU activity by a correlation id). Every step is wrapped in a
``ProfilerStep#N`` user annotation and an annotation named after the variant,
as the collectors do.

``attention_trace(variant)`` builds the attention story (naive, naive_inplace,
sdpa_math, sdpa_efficient, sdpa_flash) with the kernel names real GPUs show.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

# ---------------------------------------------------------------- real kernel names

GEMM_TC = "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn"
GEMM_TC_2 = "ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_stages_64x5_nn"
GEMM_SIMT = "ampere_sgemm_128x64_tn"
GEMM_SIMT_2 = "ampere_sgemm_64x64_nn"
MUL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, "
    "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >(int, "
    "at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, "
    "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2>)"
)
MUL_F32 = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >(int, "
    "at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
    "at::detail::Array<char*, 2>)"
)
MEMCPY_DTOD = "Memcpy DtoD (Device -> Device)"
MASKED_FILL = (
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
    "at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)"
    "::{lambda()#1}::operator()() const::{lambda()#10}::operator()() const::{lambda(c10::BFloat16, bool)#1}>"
    "(at::TensorIteratorBase&, at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, "
    "c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#10}::operator()() const::"
    "{lambda(c10::BFloat16, bool)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<"
    "at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)"
    "::{lambda()#1}::operator()() const::{lambda()#10}::operator()() const::{lambda(c10::BFloat16, bool)#1}>"
    "(at::TensorIteratorBase&, at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, "
    "c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#10}::operator()() const::"
    "{lambda(c10::BFloat16, bool)#1} const&)::{lambda(int)#1})"
)
SOFTMAX = (
    "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10, false, false>"
    "(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)"
)
SOFTMAX_F32 = (
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>"
    "(float*, float const*, int, int, int, bool const*, int, bool)"
)
CAST = (
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
    "::{lambda()#3}::operator()() const::{lambda()#10}::operator()() const::{lambda(float)#1}, "
    "at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
    "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, "
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
    "{lambda()#10}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>, "
    "TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
    "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)"
)
FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
    "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"
)
TRIL = (
    "void at::native::triu_tril_kernel<float, int, false, 4, true>(at::cuda::detail::TensorInfo<float, int>, "
    "at::cuda::detail::TensorInfo<float const, int>, long, long, long)"
)
WHERE = (
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
    "(anonymous namespace)::where_kernel_impl(at::TensorIterator&)::{lambda()#1}::operator()() const::"
    "{lambda()#10}::operator()() const::{lambda(bool, float, float)#1}>(at::TensorIteratorBase&, at::native::"
    "(anonymous namespace)::where_kernel_impl(at::TensorIterator&)::{lambda()#1}::operator()() const::"
    "{lambda()#10}::operator()() const::{lambda(bool, float, float)#1} const&)::{lambda(int)#1}>(int, "
    "at::native::gpu_kernel_impl_nocast<at::native::(anonymous namespace)::where_kernel_impl(at::TensorIterator&)"
    "::{lambda()#1}::operator()() const::{lambda()#10}::operator()() const::{lambda(bool, float, float)#1}>"
    "(at::TensorIteratorBase&, at::native::(anonymous namespace)::where_kernel_impl(at::TensorIterator&)"
    "::{lambda()#1}::operator()() const::{lambda()#10}::operator()() const::{lambda(bool, float, float)#1} "
    "const&)::{lambda(int)#1})"
)
ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"
)
ISNEGINF = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "isneginf_kernel_impl(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::"
    "operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::"
    "(anonymous namespace)::isneginf_kernel_impl(at::TensorIteratorBase&)::{lambda()#1}::operator()() const"
    "::{lambda()#4}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)"
)
ALL_REDUCE = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<bool, at::native::func_wrapper_t<bool, "
    "at::native::and_kernel_cuda(at::TensorIterator&)::{lambda(bool, bool)#1}>, unsigned int, bool, 4> >"
    "(at::native::ReduceOp<bool, at::native::func_wrapper_t<bool, at::native::and_kernel_cuda("
    "at::TensorIterator&)::{lambda(bool, bool)#1}>, unsigned int, bool, 4>)"
)
FMHA = (
    "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
    "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)"
)
FLASH = (
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
    "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, "
    "false, false, false, false, true, false>(pytorch_flash::Flash_fwd_params)"
)


# ---------------------------------------------------------------- the builder


@dataclass
class Op:
    name: str
    children: tuple = ()
    kernels: list = field(default_factory=list)  # (name, dur_us[, "memcpy" | "kernel"[, grid]])


def op(name: str, *children: Op, kernels=()) -> Op:
    return Op(name, tuple(children), list(kernels))


class Builder:
    """Lays ops out on one CPU thread and their kernels on one GPU stream, in microseconds."""

    def __init__(
        self, pid: int = 4242, tid: int = 4242, device: int = 0, stream: int = 7, t0: float = 1000.0
    ):
        self.pid, self.tid, self.device, self.stream = pid, tid, device, stream
        self.t = t0
        self.gpu_t = t0
        self.corr = 1
        self.ext = 1
        self.events: list[dict] = []

    def step(self, number: int, ops: list[Op], annotation: str | None = None) -> None:
        start = self.t
        self.t += 2
        if annotation:
            a_start = self.t
            self.t += 1
            for o in ops:
                self._op(o)
            self.t += 1
            self._x("user_annotation", annotation, a_start, self.t - a_start, {})
        else:
            for o in ops:
                self._op(o)
        self.t += 2
        self._x("user_annotation", f"ProfilerStep#{number}", start, self.t - start, {})
        self.t += 5

    def _op(self, o: Op) -> None:
        start = self.t
        ext = self.ext
        self.ext += 1
        self.t += 1
        for c in o.children:
            self._op(c)
        for k in o.kernels:
            self._launch(k, ext)
        self.t += 1
        self._x("cpu_op", o.name, start, self.t - start, {"External id": ext})

    def _launch(self, k, ext: int) -> None:
        name, dur = k[0], float(k[1])
        kind = k[2] if len(k) > 2 else "kernel"
        corr = self.corr
        self.corr += 1
        runtime = "cudaMemcpyAsync" if kind == "memcpy" else "cudaLaunchKernel"
        launch_ts = self.t
        self._x("cuda_runtime", runtime, launch_ts, 3.0, {"correlation": corr, "External id": ext})
        self.t += 4
        begin = max(self.gpu_t, launch_ts + 5)
        args = {"device": self.device, "stream": self.stream, "correlation": corr, "External id": ext}
        cat = "kernel"
        if kind == "kernel":  # every real kernel record carries its launch configuration
            args["grid"] = list(k[3]) if len(k) > 3 else [1, 1, 1]
            args["block"] = [128, 1, 1]
        if kind == "memcpy":
            cat = "gpu_memcpy"
            args["bytes"] = 1 << 20
        self._x(cat, name, begin, dur, args, pid=self.device, tid=self.stream)
        self.gpu_t = begin + dur + 1

    def _x(self, cat, name, ts, dur, args, pid=None, tid=None) -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": self.pid if pid is None else pid,
                "tid": self.tid if tid is None else tid,
                "ts": round(ts, 3),
                "dur": round(dur, 3),
                "args": args,
            }
        )


def kineto(
    events: list[dict], variant: str | None = None, device_name: str = "NVIDIA A100-SXM4-80GB"
) -> dict:
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": 0,
                "name": device_name,
                "computeMajor": 8,
                "computeMinor": 0,
                "totalGlobalMem": 85899345920,
                "numSms": 108,
            }
        ],
        "traceEvents": sorted(events, key=lambda e: e["ts"]),
        "displayTimeUnit": "ms",
    }
    if variant:
        doc["traceview"] = {"collector": "tests.synth", "variant": variant, "device_name": device_name}
    return doc


def write(path, doc: dict) -> str:
    path = Path(path)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return str(path)


# ---------------------------------------------------------------- the attention story


def _matmul(gemm: str, dur: float) -> Op:
    return op(
        "aten::matmul",
        op("aten::expand"),
        op("aten::reshape", op("aten::view")),
        op("aten::bmm", kernels=[(gemm, dur)]),
        op("aten::_unsafe_view"),
    )


def _cast(dur: float = 8.0) -> Op:
    return op(
        "aten::to", op("aten::_to_copy", op("aten::empty_strided"), op("aten::copy_", kernels=[(CAST, dur)]))
    )


def attention_ops(variant: str) -> list[Op]:
    """The CPU ops (and the kernels they launch) of one step of a variant."""
    if variant in ("naive", "naive_inplace"):
        if variant == "naive":
            fill = op(
                "aten::masked_fill",
                op(
                    "aten::clone",
                    op("aten::empty_like", op("aten::empty")),
                    op("aten::copy_", kernels=[(MEMCPY_DTOD, 15.0, "memcpy")]),
                ),
                op("aten::masked_fill_", kernels=[(MASKED_FILL, 10.0)]),
            )
        else:
            fill = op("aten::masked_fill_", kernels=[(MASKED_FILL, 10.0)])
        return [
            op("aten::transpose"),
            _matmul(GEMM_TC, 50.0),
            op("aten::mul", kernels=[(MUL, 10.0)]),
            fill,
            op("aten::softmax", op("aten::_softmax", kernels=[(SOFTMAX, 12.0)])),
            _matmul(GEMM_TC_2, 50.0),
        ]
    if variant == "sdpa_math":
        math = op(
            "aten::_scaled_dot_product_attention_math",
            op("aten::mul", _cast(), kernels=[(MUL_F32, 20.0)]),
            op("aten::ones", op("aten::empty"), op("aten::fill_", kernels=[(FILL, 3.0)])),
            op("aten::tril", kernels=[(TRIL, 5.0)]),
            op("aten::where", op("aten::scalar_tensor"), kernels=[(WHERE, 10.0)]),
            op("aten::transpose"),
            op("aten::mul", _cast(), kernels=[(MUL_F32, 20.0)]),
            _matmul(GEMM_SIMT, 150.0),
            op("aten::add_", kernels=[(ADD, 20.0)]),
            op(
                "aten::_safe_softmax",
                op("aten::softmax", op("aten::_softmax", kernels=[(SOFTMAX_F32, 25.0)])),
                op("aten::isneginf", kernels=[(ISNEGINF, 10.0)]),
                op("aten::all", op("aten::fill_", kernels=[(FILL, 2.0)]), kernels=[(ALL_REDUCE, 10.0)]),
                op("aten::where", kernels=[(WHERE, 10.0)]),
            ),
            _cast(),
            _matmul(GEMM_SIMT_2, 150.0),
            _cast(),
        )
        return [op("aten::scaled_dot_product_attention", math)]
    if variant == "sdpa_efficient":
        return [
            op(
                "aten::scaled_dot_product_attention",
                op(
                    "aten::_scaled_dot_product_efficient_attention",
                    op("aten::transpose"),
                    op("aten::_efficient_attention_forward", op("aten::empty"), kernels=[(FMHA, 40.0)]),
                ),
            )
        ]
    if variant == "sdpa_flash":
        return [
            op(
                "aten::scaled_dot_product_attention",
                op(
                    "aten::_scaled_dot_product_flash_attention",
                    op("aten::transpose"),
                    op("aten::_flash_attention_forward", op("aten::empty"), kernels=[(FLASH, 30.0)]),
                ),
            )
        ]
    raise ValueError(f"unknown variant {variant!r}")


#: GPU activities per step of each variant (what the tests compute independently)
EXPECTED_PER_STEP = {"naive": 6, "naive_inplace": 5, "sdpa_math": 17, "sdpa_efficient": 1, "sdpa_flash": 1}


def attention_trace(
    variant: str,
    steps: int = 3,
    first_step: int = 3,
    label: bool = True,
    device_name: str = "NVIDIA A100-SXM4-80GB",
) -> dict:
    b = Builder()
    for n in range(first_step, first_step + steps):
        b.step(n, attention_ops(variant), annotation=variant)
    return kineto(b.events, variant if label else None, device_name)


def make(folder, variant: str, steps: int = 3, name: str | None = None, **kw) -> str:
    """Write the variant's synthetic trace as ``folder/<name or variant>.json.gz``; returns the path."""
    return write(Path(folder) / f"{name or variant}.json.gz", attention_trace(variant, steps=steps, **kw))
