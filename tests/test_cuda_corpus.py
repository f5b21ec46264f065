"""A corpus of CUDA kernels written the ways public code writes them, run as written.

``tests/cuda_corpus/*.cu`` holds kernels in the style of tutorials, kernel
ladders and mixed-precision training code: typedefs and ``using`` aliases,
kernels made by function-like macros, namespaces, template device helpers,
``half``/``__nv_bfloat16`` arrays, warp intrinsics, atomics, dynamic shared
memory.  Each kernel runs on the current backend (the CPU emulator under
``make test``, the GPU under ``make test-gpu``) and is compared with NumPy.
The features the emulator cannot run must be named in one sentence at their line
(those tests, and the emulator's own checks at the end, run on the emulator only).
The GPU backend compiles each file as written (C++ names, no ``extern "C"``): with
nvcc alone (no GPU), every kernel the cases launch is looked up in nvcc's image of
its file by the name the case asks for.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kernels.runtime import compile_source, gpu, to_device
from kernels.runtime.errors import KernelArgumentError, KernelCompileError
from kernels.runtime.kernel_symbols import comparable_name, kernel_symbols, source_name
from kernels.runtime.signature import parse_kernels, template_instance

CORPUS = Path(__file__).resolve().parent / "cuda_corpus"
_modules: dict = {}


def module(backend, file: str):
    key = (id(backend), file)
    if key not in _modules:
        _modules[key] = compile_source((CORPUS / file).read_text(), file, backend=backend)
    return _modules[key]


def blocks(n: int, block: int) -> int:
    return (n + block - 1) // block


CASES = {}


def case(file: str, *features: str):
    def register(fn):
        CASES[fn.__name__] = (file, features, fn)
        return fn
    return register


rng = np.random.default_rng


def output_of(m, kernel: str, x, *args, **launch):
    """``kernel(x, y, *args)`` run with ``y`` a zeroed array shaped like ``x``; returns ``y``."""
    y = np.zeros_like(x)
    m.function(kernel)(x, y, *args, **launch)
    return y


# ---- basics.cu -----------------------------------------------------------------------------


@case("basics.cu", "elementwise")
def vector_add(m):
    a, b = rng(1).standard_normal(1000).astype(np.float32), rng(2).standard_normal(1000).astype(np.float32)
    c = np.zeros_like(a)
    m.function("vector_add")(a, b, c, 1000, grid=blocks(1000, 128), block=128)
    return c, a + b


@case("basics.cu", "grid-stride loop", "__restrict__")
def saxpy_grid_stride(m):
    x, y = rng(3).standard_normal(5000).astype(np.float32), rng(4).standard_normal(5000).astype(np.float32)
    out = y.copy()
    m.function("saxpy_grid_stride")(5000, 1.5, x, out, grid=4, block=128)
    return out, 1.5 * x + y


@case("basics.cu", "elementwise")
def relu_inplace(m):
    x = rng(5).standard_normal(300).astype(np.float32)
    y = x.copy()
    m.function("relu_inplace")(y, 300, grid=3, block=128)
    return y, np.maximum(x, 0)


@case("basics.cu", "typedef", "using alias")
def leaky_relu(m):
    x = rng(6).standard_normal(300).astype(np.float32)
    return output_of(m, "leaky_relu", x, 0.1, 300, grid=3, block=128), np.where(x > 0, x, np.float32(0.1) * x)


def _transpose(m, name, seed):
    x = rng(seed).standard_normal((37, 53)).astype(np.float32)
    y = np.zeros((53, 37), np.float32)
    m.function(name)(x, y, 37, 53, grid=(blocks(53, 16), blocks(37, 16)), block=(16, 16))
    return y, x.T


@case("basics.cu", "2D grid")
def transpose_naive(m):
    return _transpose(m, "transpose_naive", seed=7)


@case("basics.cu", "shared memory tile")
def transpose_tiled(m):
    return _transpose(m, "transpose_tiled", seed=8)


def _gemm(m, name):
    A = rng(9).standard_normal((33, 20)).astype(np.float32)
    B = rng(10).standard_normal((20, 41)).astype(np.float32)
    C = np.zeros((33, 41), np.float32)
    m.function(name)(A, B, C, 33, 41, 20, grid=(blocks(41, 16), blocks(33, 16)), block=(16, 16))
    return C, A @ B


@case("basics.cu", "2D grid")
def matmul_naive(m):
    return _gemm(m, "matmul_naive")


@case("basics.cu", "shared memory tile", "#pragma unroll")
def matmul_tiled(m):
    return _gemm(m, "matmul_tiled")


@case("basics.cu", "shared-memory reduction", "math intrinsics")
def softmax_rows(m):
    x = rng(11).standard_normal((6, 300)).astype(np.float32)
    y = output_of(m, "softmax_rows", x, 300, grid=6, block=128)
    e = np.exp(x - x.max(1, keepdims=True))
    return y, e / e.sum(1, keepdims=True)


@case("basics.cu", "warp shuffle", "device function")
def layernorm_rows(m):
    x = rng(12).standard_normal((5, 70)).astype(np.float32)
    g, b = rng(13).standard_normal(70).astype(np.float32), rng(14).standard_normal(70).astype(np.float32)
    y = np.zeros_like(x)
    m.function("layernorm_rows")(x, g, b, y, 70, 1e-5, grid=5, block=32)
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    return y, (x - mu) / np.sqrt(var + 1e-5) * g + b


def _sum(m, name, seed):
    x = rng(seed).standard_normal(3000).astype(np.float32)
    out = np.zeros(1, np.float32)
    m.function(name)(x, out, 3000, grid=5, block=128)
    return out, x.sum(keepdims=True)


@case("basics.cu", "shared-memory reduction", "atomicAdd")
def reduce_shared_atomic(m):
    return _sum(m, "reduce_shared_atomic", 15)


@case("basics.cu", "warp shuffle", "atomicAdd")
def reduce_warp_shuffle(m):
    return _sum(m, "reduce_warp_shuffle", 16)


@case("basics.cu", "atomicAdd", "shared memory")
def histogram_atomic(m):
    data = rng(17).integers(0, 256, 5000).astype(np.uint8)
    bins = np.zeros(256, np.uint32)
    m.function("histogram_atomic")(data, bins, 5000, grid=4, block=128)
    return bins, np.bincount(data, minlength=256).astype(np.uint32)


@case("basics.cu", "shared memory double buffer")
def scan_block(m):
    x = rng(18).integers(-5, 5, 100).astype(np.int32)
    return output_of(m, "scan_block", x, 100, grid=1, block=128), np.cumsum(x).astype(np.int32)


@case("basics.cu", "elementwise")
def conv1d_valid(m):
    x, w = rng(19).standard_normal(200).astype(np.float32), rng(20).standard_normal(7).astype(np.float32)
    y = np.zeros(194, np.float32)
    m.function("conv1d_valid")(x, w, y, 200, 7, grid=2, block=128)
    return y, np.correlate(x, w, mode="valid")


@case("basics.cu", "2D grid")
def maxpool2x2(m):
    x = rng(21).standard_normal((20, 30)).astype(np.float32)
    y = np.zeros((10, 15), np.float32)
    m.function("maxpool2x2")(x, y, 20, 30, grid=(1, 1), block=(16, 16))
    return y, x.reshape(10, 2, 15, 2).max(axis=(1, 3))


@case("basics.cu", "float4")
def scale_float4(m):
    x = rng(22).standard_normal(400).astype(np.float32)
    return output_of(m, "scale_float4", x, 3.0, 100, grid=1, block=128), 3 * x


@case("basics.cu", "__ldg", "math functions")
def gelu_tanh(m):
    x = rng(23).standard_normal(500).astype(np.float32)
    y = output_of(m, "gelu_tanh", x, 500, grid=4, block=128)
    return y, 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


@case("basics.cu", "dynamic shared memory", "atomicAdd")
def dot_dynamic_shared(m):
    a, b = rng(24).standard_normal(2000).astype(np.float32), rng(25).standard_normal(2000).astype(np.float32)
    out = np.zeros(1, np.float32)
    m.function("dot_dynamic_shared")(a, b, out, 2000, grid=4, block=128, shared=128 * 4)
    return out, np.dot(a, b).reshape(1)


@case("basics.cu", "warp shuffle")
def argmax_rows(m):
    x = rng(26).standard_normal((7, 100)).astype(np.float32)
    idx = np.zeros(7, np.int32)
    m.function("argmax_rows")(x, idx, 100, grid=7, block=32)
    return idx, x.argmax(1).astype(np.int32)


@case("basics.cu", "math functions")
def cross_entropy_rows(m):
    z = rng(27).standard_normal((64, 10)).astype(np.float32)
    labels = rng(28).integers(0, 10, 64).astype(np.int32)
    loss = np.zeros(64, np.float32)
    m.function("cross_entropy_rows")(z, labels, loss, 10, grid=1, block=64)
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    return loss, lse - z[np.arange(64), labels]


@case("basics.cu", "int64_t")
def embedding_lookup(m):
    ids = rng(29).integers(0, 50, 12).astype(np.int64)
    table = rng(30).standard_normal((50, 24)).astype(np.float32)
    out = np.zeros((12, 24), np.float32)
    m.function("embedding_lookup")(ids, table, out, 24, 12, grid=12, block=32)
    return out, table[ids]


@case("basics.cu", "many parameters")
def adam_step(m):
    n = 300
    p, g = rng(31).standard_normal(n).astype(np.float32), rng(32).standard_normal(n).astype(np.float32)
    mm, v = rng(33).standard_normal(n).astype(np.float32) * 0.1, rng(34).random(n).astype(np.float32) * 0.1
    p2, m2, v2 = p.copy(), mm.copy(), v.copy()
    m.function("adam_step")(p2, g, m2, v2, 1e-3, 0.9, 0.999, 1e-8, 3, n, grid=3, block=128)
    mr = 0.9 * mm + 0.1 * g
    vr = 0.999 * v + 0.001 * g * g
    pr = p - 1e-3 * (mr / (1 - 0.9**3)) / (np.sqrt(vr / (1 - 0.999**3)) + 1e-8)
    return np.concatenate([p2, m2, v2]), np.concatenate([pr, mr, vr])


@case("basics.cu", "2D grid")
def bias_add_2d(m):
    x = rng(35).standard_normal((9, 70)).astype(np.float32)
    b = rng(36).standard_normal(70).astype(np.float32)
    y = x.copy()
    m.function("bias_add_2d")(y, b, 9, 70, grid=(1, 9), block=128)
    return y, x + b


@case("basics.cu", "atomicAdd")
def column_sums_atomic(m):
    x = rng(37).standard_normal((9, 70)).astype(np.float32)
    s = np.zeros(70, np.float32)
    m.function("column_sums_atomic")(x, s, 9, 70, grid=(1, 9), block=128)
    return s, x.sum(0)


@case("basics.cu", "__ballot_sync", "__popc")
def count_positive_ballot(m):
    x = rng(38).standard_normal(1000).astype(np.float32)
    c = np.zeros(1, np.int32)
    m.function("count_positive_ballot")(x, c, 1000, grid=8, block=128)
    return c, np.array([(x > 0).sum()], np.int32)


@case("basics.cu", "__syncthreads_count")
def count_nonzero_syncthreads_count(m):
    x = rng(39).integers(0, 3, 1000).astype(np.int32)
    c = np.zeros(1, np.int32)
    m.function("count_nonzero_syncthreads_count")(x, c, 1000, grid=8, block=128)
    return c, np.array([(x != 0).sum()], np.int32)


@case("basics.cu", "bit intrinsics")
def bit_tricks(m):
    x = rng(40).integers(1, 2**32 - 1, 200, dtype=np.uint64).astype(np.uint32)
    y = output_of(m, "bit_tricks", x, 200, grid=2, block=128)
    popc = np.array([bin(int(v)).count("1") for v in x], np.uint32)
    clz = np.array([32 - int(v).bit_length() for v in x], np.uint32)
    brev = np.array([int(f"{int(v):032b}"[::-1], 2) for v in x], np.uint32)
    return y, popc + (clz << 8) + (brev & 0xFF0000)


@case("basics.cu", "math intrinsics")
def fast_math(m):
    x = rng(41).standard_normal(300).astype(np.float32)
    y = output_of(m, "fast_math", x, 300, grid=3, block=128)
    return y, 1 / (1 + np.exp(-x)) / np.sqrt(x * x + 1) + np.sqrt(np.abs(x))


@case("basics.cu", "double")
def double_reduce(m):
    x = rng(42).standard_normal(1000)
    out = np.zeros(4, np.float64)
    m.function("double_reduce")(x, out, 1000, grid=4, block=128)
    return np.array([out.sum()]), np.array([x.sum()])


@case("basics.cu", "3D grid")
def index_3d(m):
    out = np.zeros((3, 5, 9), np.float32)
    m.function("index_3d")(out, 9, 5, 3, grid=(2, 2, 3), block=(8, 4, 1))
    z, y, x = np.meshgrid(np.arange(3), np.arange(5), np.arange(9), indexing="ij")
    return out, (x + 100 * y + 10000 * z).astype(np.float32)


@case("basics.cu", "float2")
def complex_multiply(m):
    a = (rng(43).standard_normal(100) + 1j * rng(44).standard_normal(100)).astype(np.complex64)
    b = (rng(45).standard_normal(100) + 1j * rng(46).standard_normal(100)).astype(np.complex64)
    c = np.zeros(200, np.float32)
    m.function("complex_multiply")(a.view(np.float32), b.view(np.float32), c, 100, grid=1, block=128)
    return c, (a * b).view(np.float32)


@case("basics.cu", "long long", "size_t")
def clamp_int64(m):
    x = rng(47).integers(-10**12, 10**12, 100).astype(np.int64)
    y = output_of(m, "clamp_int64", x, -10**11, 10**11, 100, grid=1, block=128)
    return y, np.clip(x, -10**11, 10**11)


@case("basics.cu", "__launch_bounds__")
def sigmoid_backward(m):
    y, dy = rng(48).random(300).astype(np.float32), rng(49).standard_normal(300).astype(np.float32)
    dx = np.zeros_like(y)
    m.function("sigmoid_backward")(y, dy, dx, 300, grid=2, block=256)
    return dx, dy * y * (1 - y)


@case("basics.cu", "clock64", "<time.h>")
def timed_copy(m):
    x = rng(50).standard_normal(100).astype(np.float32)
    y, ticks = np.zeros_like(x), np.zeros(1, np.int64)
    m.function("timed_copy")(x, y, ticks, 100, grid=1, block=128)
    return np.concatenate([y, ticks.astype(np.float32)]), np.concatenate([x, [1.0]]).astype(np.float32)


# ---- low_precision.cu --------------------------------------------------------------------------

bfloat16 = None


def bf16():
    import ml_dtypes

    return ml_dtypes.bfloat16


@case("low_precision.cu", "half", "cuda_fp16.h")
def half_axpy(m):
    x, y = rng(51).standard_normal(300).astype(np.float16), rng(52).standard_normal(300).astype(np.float16)
    out = y.copy()
    m.function("half_axpy")(300, np.float16(0.5), x, out, grid=3, block=128)
    ref = (np.float32(0.5) * x.astype(np.float32) + y.astype(np.float32)).astype(np.float16)
    return out.astype(np.float32), ref.astype(np.float32)


@case("low_precision.cu", "half2")
def half2_add(m):
    a, b = rng(53).standard_normal(200).astype(np.float16), rng(54).standard_normal(200).astype(np.float16)
    c = np.zeros_like(a)
    m.function("half2_add")(a, b, c, 100, grid=1, block=128)
    return c.astype(np.float32), (a + b).astype(np.float32)


@case("low_precision.cu", "half", "typedef")
def float_to_half(m):
    x = rng(55).standard_normal(300).astype(np.float32)
    y = np.zeros(300, np.float16)
    m.function("float_to_half")(x, y, 300, grid=3, block=128)
    return y.view(np.uint16), x.astype(np.float16).view(np.uint16)


@case("low_precision.cu", "half")
def half_to_float(m):
    x = rng(56).standard_normal(300).astype(np.float16)
    y = np.zeros(300, np.float32)
    m.function("half_to_float")(x, y, 300, grid=3, block=128)
    return y, x.astype(np.float32)


@case("low_precision.cu", "half comparisons")
def half_relu(m):
    x = rng(57).standard_normal(300).astype(np.float16)
    y = output_of(m, "half_relu", x, 300, grid=3, block=128)
    return y.astype(np.float32), np.maximum(x, 0).astype(np.float32)


@case("low_precision.cu", "half", "warp shuffle")
def half_dot(m):
    a, b = rng(58).standard_normal(1000).astype(np.float16), rng(59).standard_normal(1000).astype(np.float16)
    out = np.zeros(1, np.float32)
    m.function("half_dot")(a, b, out, 1000, grid=4, block=128)
    return out, np.dot(a.astype(np.float32), b.astype(np.float32)).reshape(1)


@case("low_precision.cu", "bfloat16", "cuda_bf16.h")
def bf16_to_float(m):
    x = rng(60).standard_normal(300).astype(bf16())
    y = np.zeros(300, np.float32)
    m.function("bf16_to_float")(x, y, 300, grid=3, block=128)
    return y, x.astype(np.float32)


@case("low_precision.cu", "bfloat16", "math functions")
def bf16_gelu(m):
    from math import erf

    x = rng(61).standard_normal(300).astype(bf16())
    y = np.zeros(300, bf16())
    m.function("bf16_gelu")(x, y, 300, grid=3, block=128)
    xf = x.astype(np.float32)
    ref = (0.5 * xf * (1 + np.array([erf(v / np.sqrt(2)) for v in xf]))).astype(np.float32)
    return y.astype(np.float32), ref.astype(bf16()).astype(np.float32)


@case("low_precision.cu", "bfloat16")
def bf16_matmul(m):
    A = rng(62).standard_normal((17, 12)).astype(bf16())
    B = rng(63).standard_normal((12, 19)).astype(bf16())
    C = np.zeros((17, 19), np.float32)
    m.function("bf16_matmul")(A, B, C, 17, 19, 12, grid=(2, 2), block=(16, 16))
    return C, A.astype(np.float32) @ B.astype(np.float32)


@case("low_precision.cu", "half2", "float2")
def half2_scale_sum(m):
    x = rng(64).standard_normal(200).astype(np.float16)
    out = np.zeros(1, np.float32)
    m.function("half2_scale_sum")(x, out, 2.0, 100, grid=1, block=128)
    return out, np.array([2 * x.astype(np.float32).sum()])


# ---- structure.cu ----------------------------------------------------------------------------------


def _elementwise(m, name, dtype, fn):
    x = (rng(65).standard_normal(200) * 10).astype(dtype)
    return output_of(m, name, x, 200, grid=2, block=128), fn(x)


@case("structure.cu", "kernel made by a macro")
def square_f32(m):
    return _elementwise(m, "square_f32", np.float32, lambda x: x * x)


@case("structure.cu", "kernel made by a macro", "double")
def negate_f64(m):
    return _elementwise(m, "negate_f64", np.float64, lambda x: -x)


@case("structure.cu", "kernel made by a macro", "int")
def abs_i32(m):
    return _elementwise(m, "abs_i32", np.int32, np.abs)


@case("structure.cu", "kernel made by a macro", "__shared__ in a macro")
def block_sums_i64(m):
    x = rng(66).integers(-1000, 1000, 200).astype(np.int64)
    out = np.zeros(4, np.int64)
    m.function("block_sums_i64")(x, out, 200, grid=4, block=64)
    return out, np.add.reduceat(np.concatenate([x, np.zeros(56, np.int64)]), [0, 64, 128, 192])


@case("structure.cu", "namespace", "template device function")
def softplus_kernel(m):
    x = (rng(67).standard_normal(300) * 10).astype(np.float32)
    y = output_of(m, "softplus_kernel", x, 300, grid=3, block=128)
    return y, np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


@case("structure.cu", "namespace", "template device function")
def rows_dot8(m):
    a, b = rng(68).standard_normal((30, 8)).astype(np.float32), rng(69).standard_normal((30, 8)).astype(np.float32)
    y = np.zeros(30, np.float32)
    m.function("rows_dot8")(a, b, y, 30, grid=1, block=128)
    return y, (a * b).sum(1)


@case("structure.cu", "struct with operator()")
def affine_struct_inside(m):
    x = rng(70).standard_normal(100).astype(np.float32)
    return output_of(m, "affine_struct_inside", x, 2.0, -1.0, 100, grid=1, block=128), 2 * x - 1


@case("structure.cu", "using alias", "typedef uint")
def xorshift_hash(m):
    seeds = rng(71).integers(1, 2**32 - 1, 100, dtype=np.uint64).astype(np.uint32)
    out = np.zeros_like(seeds)
    m.function("xorshift_hash")(seeds, out, 3, 100, grid=1, block=128)
    s = seeds.copy()
    for _ in range(3):
        s ^= s << np.uint32(13)
        s ^= s >> np.uint32(17)
        s ^= s << np.uint32(5)
    return out, s


@case("structure.cu", "__launch_bounds__(2 args)", "function-like macro")
def tiles_ceil_div(m):
    x = rng(72).standard_normal(1000).astype(np.float32)
    y = np.zeros(143, np.float32)
    m.function("tiles_ceil_div")(x, y, 1000, 7, grid=1, block=128)
    return y, np.add.reduceat(x, np.arange(0, 1000, 7))


@case("structure.cu", "recursive device function")
def recursive_device_function(m):
    out = np.zeros(15, np.int32)
    m.function("recursive_device_function")(out, 15, grid=1, block=32)
    fib = [0, 1]
    while len(fib) < 15:
        fib.append(fib[-1] + fib[-2])
    return out, np.array(fib, np.int32)


@case("structure.cu", "__shfl_xor_sync")
def warp_allreduce_xor(m):
    x = rng(73).standard_normal(32).astype(np.float32)
    return output_of(m, "warp_allreduce_xor", x, grid=1, block=32), np.full(32, x.sum(), np.float32)


@case("structure.cu", "__shfl_up_sync")
def warp_inclusive_scan(m):
    x = rng(74).integers(-9, 9, 64).astype(np.int32)
    y = output_of(m, "warp_inclusive_scan", x, grid=1, block=64)
    return y, np.concatenate([np.cumsum(x[:32]), np.cumsum(x[32:])]).astype(np.int32)


@case("structure.cu", "atomicMax")
def atomic_max_int(m):
    x = rng(75).integers(-10**6, 10**6, 500).astype(np.int32)
    best = np.full(1, np.iinfo(np.int32).min, np.int32)
    m.function("atomic_max_int")(x, best, 500, grid=4, block=128)
    return best, x.max(keepdims=True)


@case("structure.cu", "atomicCAS", "__float_as_int")
def atomic_cas_float_max(m):
    x = rng(76).standard_normal(500).astype(np.float32)
    best = np.full(1, -np.inf, np.float32)
    m.function("atomic_cas_float_max")(x, best, 500, grid=4, block=128)
    return best, x.max(keepdims=True)


@case("structure.cu", "__threadfence", "atomicInc")
def last_block_sum(m):
    x = rng(77).standard_normal(300).astype(np.float32)
    partial, ticket, out = np.zeros(5, np.float32), np.zeros(1, np.uint32), np.zeros(1, np.float32)
    m.function("last_block_sum")(x, partial, ticket, out, 300, grid=5, block=64)
    return out, x.sum(keepdims=True)


@case("structure.cu", "__constant__ memory")
def constant_filter_conv(m):
    w = rng(78).standard_normal(9).astype(np.float32)
    x = rng(79).standard_normal(200).astype(np.float32)
    y = np.zeros(192, np.float32)
    m.set_constant("c_filter", w)
    m.function("constant_filter_conv")(x, y, 200, grid=2, block=128)
    return y, np.correlate(x, w, mode="valid")


@case("structure.cu", "__syncwarp")
def syncwarp_tile_sum(m):
    x = rng(80).standard_normal(256).astype(np.float32)
    y = np.zeros(8, np.float32)
    m.function("syncwarp_tile_sum")(x, y, grid=4, block=64)
    return y, x.reshape(8, 32).sum(1)


@case("structure.cu", "__byte_perm", "__dp4a", "SIMD __v* intrinsics", "__sad")
def integer_intrinsics(m):
    a = rng(86).integers(0, 2**32 - 1, 100, dtype=np.uint64).astype(np.uint32)
    b = rng(87).integers(0, 2**32 - 1, 100, dtype=np.uint64).astype(np.uint32)
    y = np.zeros_like(a)
    m.function("integer_intrinsics")(a, b, y, 100, grid=1, block=128)
    ab, bb = a.view(np.uint8).reshape(-1, 4).astype(np.int64), b.view(np.uint8).reshape(-1, 4).astype(np.int64)
    both = np.concatenate([ab, bb], axis=1)
    perm = sum(both[:, sel] << (8 * k) for k, sel in enumerate([0, 4, 1, 5]))
    dp4a = (ab.astype(np.int8).astype(np.int64) * bb.astype(np.int8).astype(np.int64)).sum(1) + 7
    r = (perm ^ (dp4a & 0xFFFFFFFF)) & 0xFFFFFFFF
    sadu4 = np.abs(ab - bb).sum(1)
    sad = np.abs((a & 0xFFFF).astype(np.int64) - (b & 0xFFFF).astype(np.int64)) + 3
    r = (r + sadu4 + sad) & 0xFFFFFFFF
    vadd4 = sum(((ab[:, k] + bb[:, k]) & 0xFF) << (8 * k) for k in range(4))
    return y, (r ^ vadd4).astype(np.uint32)


@case("structure.cu", "erfinvf", "normcdfinvf", "rhypotf", "__fadd_rz")
def special_functions(m):
    from statistics import NormalDist

    p = rng(88).uniform(0.02, 0.98, 100).astype(np.float32)
    y = np.zeros_like(p)
    m.function("special_functions")(p, y, 100, grid=1, block=128)
    q = np.array([NormalDist().inv_cdf(float(v)) for v in p])
    return y, q / np.sqrt(2) + q + 1 / np.hypot(p, 1) + p


def _scale_passed_first(m, name, a, seed):
    """``name(a, x, y, n)`` computes ``y = a * x``; the kernels differ in how they declare ``a``."""
    x = rng(seed).standard_normal(100).astype(np.float32)
    y = np.zeros_like(x)
    m.function(name)(a, x, y, 100, grid=1, block=128)
    return y, np.float32(a) * x


@case("structure.cu", "__grid_constant__")
def grid_constant_scale(m):
    return _scale_passed_first(m, "grid_constant_scale", 2.5, seed=92)


@case("structure.cu", "const T& parameters")
def const_reference_scale(m):
    return _scale_passed_first(m, "const_reference_scale", 1.5, seed=98)


# ---- cooperative.cu ----------------------------------------------------------------------------------


@case("cooperative.cu", "cooperative groups", "cg::reduce")
def cg_block_reduce(m):
    x = rng(81).standard_normal(3000).astype(np.float32)
    out = np.zeros(1, np.float32)
    m.function("cg_block_reduce")(x, out, 3000, grid=4, block=128)
    return out, x.sum(keepdims=True)


@case("cooperative.cu", "cooperative groups", "thread_block_tile<16>")
def cg_tile16_shfl_down(m):
    x = rng(82).integers(-50, 50, 256).astype(np.int32)
    y = np.zeros(16, np.int32)
    m.function("cg_tile16_shfl_down")(x, y, grid=2, block=128)
    return y, x.reshape(16, 16).sum(1).astype(np.int32)


@case("cooperative.cu", "cooperative groups", "cg::inclusive_scan")
def cg_tile_scan(m):
    x = rng(83).integers(-9, 9, 64).astype(np.int32)
    y = output_of(m, "cg_tile_scan", x, grid=1, block=64)
    return y, np.cumsum(x.reshape(8, 8), axis=1).ravel().astype(np.int32)


@case("cooperative.cu", "cooperative groups", "block.sync()", "ballot")
def cg_ballot_and_sync(m):
    x = rng(84).standard_normal(64).astype(np.float32)
    counts, y = np.zeros(2, np.uint32), np.zeros(64, np.float32)
    m.function("cg_ballot_and_sync")(x, counts, y, grid=1, block=64)
    return np.concatenate([y, counts.astype(np.float32)]), np.concatenate(
        [2 * x[::-1], (x.reshape(2, 32) > 0).sum(1)]).astype(np.float32)


@case("cooperative.cu", "cooperative groups", "cg::greater")
def cg_max_reduce(m):
    x = rng(85).standard_normal(32).astype(np.float32)
    out = np.zeros(1, np.float32)
    m.function("cg_max_reduce")(x, out, grid=1, block=32)
    return out, x.max(keepdims=True)


@case("cooperative.cu", "cp.async (cuda_pipeline.h)", "__pipeline_wait_prior")
def pipelined_tile_sums(m):
    x = rng(89).standard_normal(5 * 64).astype(np.float32)
    y = np.zeros(5, np.float32)
    m.function("pipelined_tile_sums")(x, y, 5, grid=1, block=64)
    return y, x.reshape(5, 64).sum(1)


@case("cooperative.cu", "wmma (mma.h)", "half")
def wmma_gemm(m):
    A = rng(90).standard_normal((32, 48)).astype(np.float16)
    B = rng(91).standard_normal((48, 32)).astype(np.float16)
    C = np.zeros((32, 32), np.float32)
    m.function("wmma_gemm")(A, B, C, 32, 32, 48, grid=(2, 2), block=32)
    return C, A.astype(np.float32) @ B.astype(np.float32)


# ---- templates.cu --------------------------------------------------------------------------------------


@case("templates.cu", "template kernel", "default template argument")
def template_scale_float(m):
    x = rng(93).standard_normal(300).astype(np.float32)
    return output_of(m, "scale<float>", x, 2.0, 300, grid=3, block=128), 2 * x


@case("templates.cu", "template kernel", "two instantiations")
def template_scale_double(m):
    x = rng(94).standard_normal(300)
    return output_of(m, "scale<double, 64>", x, 3.0, 300, grid=5, block=64), 3 * x


@case("templates.cu", "template kernel", "non-type template parameters")
def template_sgemm(m):
    A = rng(95).standard_normal((40, 20)).astype(np.float32)
    B = rng(96).standard_normal((20, 36)).astype(np.float32)
    C = np.zeros((40, 36), np.float32)
    m.function("sgemm<16, 16, 8>")(40, 36, 20, A, B, C, grid=(3, 3), block=(16, 16))
    return C, A @ B


@case("templates.cu", "template kernel", "template device function")
def template_block_reduce(m):
    x = rng(97).integers(-100, 100, 1000).astype(np.int32)
    out = np.zeros(4, np.int32)
    m.function("block_reduce<int, 128>")(x, out, 1000, grid=4, block=128)
    return np.array([out.sum()], np.int32), np.array([x.sum()], np.int32)


@case("templates.cu", "template kernel", "namespace")
def template_axpy_in_namespace(m):
    x, y = rng(98).standard_normal(700).astype(np.float32), rng(99).standard_normal(700).astype(np.float32)
    out = y.copy()
    m.function("axpy<float>")(np.float32(0.5), x, out, 700, grid=2, block=128)
    return out, y + np.float32(0.5) * x


# ---- structs.cu: structs and vector types by value ------------------------------------------------------


@case("structs.cu", "struct by value", "tuple")
def struct_affine(m):
    x = rng(120).standard_normal(500).astype(np.float32)
    return output_of(m, "affine", x, (2.5, -1.0), 500, grid=blocks(500, 128), block=128), 2.5 * x - 1.0


@case("structs.cu", "struct by value", "padding and alignment", "NumPy structured scalar")
def struct_clip_normalize(m):
    x = rng(121).standard_normal(400).astype(np.float32)
    y = np.zeros_like(x)
    params = m.function("clip_normalize").signature.params[2].record
    p = np.zeros((), params)
    p["relu"], p["clip"], p["eps"], p["pad"] = 1, (-0.5, 1.5, 0.25, 2.0), 1e-3, (1, 2, -3)
    m.function("clip_normalize")(x, y, p, 400, grid=blocks(400, 128), block=128)
    v = np.clip((x - np.float32(0.25)) / np.float32(2.0 + 1e-3), -0.5, 1.5)
    return y, np.maximum(v, 0)


@case("structs.cu", "vector type by value", "float4")
def struct_add_bias4(m):
    x = rng(122).standard_normal(4 * 100).astype(np.float32)
    data = x.copy()
    m.function("add_bias4")(data, (1.0, 2.0, 3.0, 4.0), 100, grid=1, block=128)
    return data, x + np.tile(np.float32([1, 2, 3, 4]), 100)


@case("structs.cu", "vector type by value", "float2")
def struct_complex_scale(m):
    z = rng(123).standard_normal(2 * 300).astype(np.float32)
    out = np.zeros_like(z)
    m.function("complex_scale")(z, out, {"x": 0.5, "y": -2.0}, 300, grid=3, block=128)
    c = (z[0::2] + 1j * z[1::2]) * (0.5 - 2.0j)
    return out, np.stack([c.real, c.imag], axis=1).reshape(-1).astype(np.float32)


@case("structs.cu", "vector type by value", "int2")
def struct_index_map(m):
    rows, cols = 7, 19
    out = np.zeros(rows * cols, np.int32)
    m.function("index_map")(out, (rows, cols), grid=(2, 1), block=(16, 8))
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return out, (r * 1000 + c).reshape(-1).astype(np.int32)


@case("structs.cu", "vector type by value", "uint3")
def struct_volume_sum_z(m):
    v = rng(124).standard_normal((5, 6, 40)).astype(np.float32)
    out = np.zeros(6 * 40, np.float32)
    m.function("volume_sum_z")(v, out, np.uint32([40, 6, 5]).view([("x", "<u4"), ("y", "<u4"), ("z", "<u4")])[0],
                               grid=(1, 6), block=64)
    return out, v.sum(axis=0).reshape(-1)


@case("structs.cu", "struct by const reference", "namespace")
def struct_nchw_to_nhwc(m):
    x = rng(125).standard_normal((2, 3, 4, 5)).astype(np.float32)
    out = np.zeros(x.size, np.float32)
    m.function("nchw_to_nhwc")(x, out, (2, 3, 4, 5), grid=1, block=128)
    return out, x.transpose(0, 2, 3, 1).reshape(-1)


@case("structs.cu", "struct by value", "__grid_constant__", "array field")
def struct_conv1d_taps(m):
    x = rng(126).standard_normal(200).astype(np.float32)
    y = np.zeros_like(x)
    w = np.float32([0.1, 0.2, 0.4, 0.2, 0.1])
    m.function("conv1d_taps")(x, y, (w, 2), 200, grid=2, block=128)
    return y, np.convolve(x, w[::-1], mode="same").astype(np.float32)


@case("structs.cu", "struct template by value", "template kernel")
def struct_clamp_range(m):
    x = rng(127).standard_normal(300).astype(np.float32)
    y = x.copy()
    m.function("clamp_range<float>")(y, (-0.5, 0.75), 300, grid=3, block=128)
    return y, np.clip(x, -0.5, 0.75)


@case("structs.cu", "struct by value", "array of structs")
def struct_integrate(m):
    n = 100
    particle = m.function("integrate").signature.params[0].dtype
    ps = np.zeros(n, particle)
    ps["pos"] = [tuple(p) for p in rng(128).standard_normal((n, 3)).astype(np.float32)]
    ps["mass"] = 1.0
    vel = rng(129).standard_normal(3 * n).astype(np.float32)
    pos0, vel0 = ps["pos"].copy(), vel.copy()
    m.function("integrate")(ps, vel, (0.01, (0.0, -9.8, 0.0)), n, grid=1, block=128)
    v_expected = vel0.reshape(n, 3) + np.float32(0.01) * np.float32([0, -9.8, 0])
    pos = np.stack([pos0["x"], pos0["y"], pos0["z"]], axis=1) + np.float32(0.01) * v_expected
    got = np.concatenate([np.stack([ps["pos"]["x"], ps["pos"]["y"], ps["pos"]["z"]], axis=1).reshape(-1), vel])
    return got, np.concatenate([pos.reshape(-1), v_expected.reshape(-1)]).astype(np.float32)


@case("structs.cu", "vector type by value", "half2")
def struct_scale_half2(m):
    x = rng(130).standard_normal(2 * 64).astype(np.float16)
    y = x.copy()
    m.function("scale_half2")(y, (0.5, 2.0), 64, grid=1, block=64)
    return y.astype(np.float32), (x.reshape(-1, 2) * np.float16([0.5, 2.0])).reshape(-1).astype(np.float32)


# ---- grid_sync.cu: grid-wide cooperative groups (a cooperative launch) ------------------------------------


@case("grid_sync.cu", "grid.sync()", "grid.thread_rank()", "grid.size()")
def grid_sum(m):
    x = rng(140).standard_normal(3000).astype(np.float32)
    partial, out = np.zeros(4, np.float32), np.zeros(1, np.float32)
    m.function("grid_sum")(x, partial, out, 3000, grid=4, block=256)
    return out, np.array([x.astype(np.float64).sum()], np.float32)


@case("grid_sync.cu", "grid.sync()", "grid.num_blocks()", "auto")
def grid_normalize_sum(m):
    x = rng(141).random(2000).astype(np.float32) + 0.5
    y = x.copy()
    m.function("normalize_sum")(y, np.zeros(6, np.float32), 2000, grid=6, block=128)
    return y, (x / x.astype(np.float64).sum()).astype(np.float32)


@case("grid_sync.cu", "grid.sync() in a loop", "cg::sync(grid)", "persistent kernel")
def grid_jacobi_1d(m):
    a = rng(142).standard_normal(500).astype(np.float32)
    b = np.zeros_like(a)
    ref = a.astype(np.float64)
    for _ in range(6):
        padded = np.concatenate([ref[:1], ref, ref[-1:]])
        ref = 0.25 * padded[:-2] + 0.5 * padded[1:-1] + 0.25 * padded[2:]
    work = a.copy()
    m.function("jacobi_1d")(work, b, 500, 6, grid=3, block=64)
    return work, ref.astype(np.float32)  # an even number of sweeps ends in a


@case("grid_sync.cu", "grid.sync()", "scan")
def grid_blocked_prefix_sum(m):
    x = rng(143).integers(-20, 20, 300).astype(np.int32)
    y = output_of(m, "blocked_prefix_sum", x, np.zeros(5, np.int32), 300, grid=5, block=64)
    return y, np.cumsum(x).astype(np.int32)


# ---- sgemm_ladder.cu: a GEMM ladder that starts with #pragma once ------------------------------------------


def _sgemm(m, name, M, N, K, grid, block, seed):
    A = rng(seed).standard_normal((M, K)).astype(np.float32)
    B = rng(seed + 1).standard_normal((K, N)).astype(np.float32)
    C0 = rng(seed + 2).standard_normal((M, N)).astype(np.float32)
    C = C0.copy()
    m.function(name)(M, N, K, 1.5, A, B, 0.5, C, grid=grid, block=block)
    return C, 1.5 * (A @ B) + 0.5 * C0


@case("sgemm_ladder.cu", "#pragma once", "template kernel", "const uint template parameter")
def sgemm_coalesced(m):
    return _sgemm(m, "sgemm_coalesced<16>", 40, 36, 20, grid=(3, 3), block=256, seed=160)


@case("sgemm_ladder.cu", "#pragma once", "template kernel", "register strip", "assert")
def sgemm_strip_per_thread(m):
    return _sgemm(m, "sgemm_strip_per_thread<32, 32, 8, 4>", 64, 64, 32, grid=(2, 2), block=256, seed=163)


@case("sgemm_ladder.cu", "template kernel", "float4", "double buffering", "__launch_bounds__ of template arguments")
def sgemm_double_buffered(m):
    return _sgemm(m, "sgemm_double_buffered<32, 32, 8, 4, 4>", 64, 96, 48, grid=(3, 2), block=64, seed=166)


# ---- reduction_ladder.cu: template reductions made concrete by explicit instantiations ---------------------


def _block_partials(m, name, x, block, grid, shared=0):
    out = np.zeros(grid, x.dtype)
    m.function(name)(x, out, x.size, grid=grid, block=block, shared=shared)
    return np.array([out.sum()], x.dtype), np.array([x.sum()], x.dtype)


@case("reduction_ladder.cu", "explicit instantiation", "cooperative groups in a template kernel", "dynamic shared memory")
def reduce_interleaved_float(m):
    return _block_partials(m, "reduce_interleaved<float>", rng(170).standard_normal(1000).astype(np.float32),
                           block=128, grid=8, shared=128 * 4)


@case("reduction_ladder.cu", "explicit instantiation", "cooperative groups in a template kernel", "int")
def reduce_interleaved_int(m):
    return _block_partials(m, "reduce_interleaved<int>", rng(171).integers(-1000, 1000, 700).astype(np.int32),
                           block=64, grid=11, shared=64 * 4)


@case("reduction_ladder.cu", "explicit instantiation", "thread_block_tile<32>.shfl_down")
def reduce_warp_tiles_float(m):
    return _block_partials(m, "reduce_warp_tiles<float, 128>", rng(172).standard_normal(3000).astype(np.float32),
                           block=128, grid=4)


@case("reduction_ladder.cu", "explicit instantiation", "thread_block_tile<32>.shfl_down", "double")
def reduce_warp_tiles_double(m):
    return _block_partials(m, "reduce_warp_tiles<double, 64>", rng(173).standard_normal(1000), block=64, grid=3)


@case("reduction_ladder.cu", "explicit instantiation", "float4", "scalar tail")
def block_sum_f32x4(m):
    x = rng(174).standard_normal(1001).astype(np.float32)  # not a multiple of 4: the tail is read by scalars
    out = np.zeros(1, np.float32)
    m.function("block_sum_f32x4<128>")(x, out, x.size, grid=blocks(x.size, 4 * 128), block=128)
    return out, x.sum(keepdims=True)


@case("reduction_ladder.cu", "explicit instantiation with deduced arguments")
def scale_inplace_double(m):
    x = rng(175).standard_normal(500)
    y = x.copy()
    m.function("scale_inplace<double>")(y, -2.5, 500, grid=2, block=128)
    return y, -2.5 * x


# ---- online_softmax.cu: cg::reduce with a struct and the program's own operators ---------------------------


def _softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@case("online_softmax.cu", "cg::reduce of a struct", "__device__ function as the operator")
def softmax_online_warp(m):
    x = (rng(180).standard_normal((7, 70)) * 4).astype(np.float32)
    y = np.zeros_like(x)
    m.function("softmax_online_warp")(y, x, 7, 70, grid=4, block=64)
    return y, _softmax(x)


@case("online_softmax.cu", "cg::reduce of a struct", "functor as the operator", "template kernel")
def softmax_online_block(m):
    x = (rng(181).standard_normal((3, 300)) * 4).astype(np.float32)
    y = np.zeros_like(x)
    m.function("softmax_online_block<128>")(y, x, 300, grid=3, block=128)
    return y, _softmax(x)


@case("online_softmax.cu", "cg::reduce", "lambda as the operator")
def logsumexp_rows(m):
    x = (rng(182).standard_normal((5, 50)) * 3).astype(np.float32)
    lse = np.zeros(5, np.float32)
    m.function("logsumexp_rows")(x, lse, 5, 50, grid=3, block=64)
    mx = x.max(1)
    return lse, mx + np.log(np.exp(x - mx[:, None]).sum(1))


# ---- vectorized.cu: 64- and 128-bit accesses through casting macros ---------------------------------------


@case("vectorized.cu", "float4 through a macro")
def elementwise_add_f32x4(m):
    a, b = rng(185).standard_normal(512).astype(np.float32), rng(186).standard_normal(512).astype(np.float32)
    c = np.zeros_like(a)
    m.function("elementwise_add_f32x4")(a, b, c, 512, grid=1, block=128)
    return c, a + b


@case("vectorized.cu", "const float4 through a macro", "math functions")
def sigmoid_f32x4(m):
    x = rng(187).standard_normal(400).astype(np.float32)
    return output_of(m, "sigmoid_f32x4", x, 400, grid=1, block=128), 1 / (1 + np.exp(-x))


@case("vectorized.cu", "bfloat16", "__nv_bfloat162 through a macro")
def relu_bf16x2(m):
    x = rng(188).standard_normal(300).astype(bf16())
    y = output_of(m, "relu_bf16x2", x, 300, grid=2, block=128)
    return y.astype(np.float32), np.maximum(x.astype(np.float32), 0)


@case("vectorized.cu", "bfloat16", "128-bit load and store of eight values")
def scale_bf16x8(m):
    x = rng(189).standard_normal(256).astype(bf16())
    y = output_of(m, "scale_bf16x8", x, 0.5, 256, grid=1, block=32)
    return y.astype(np.float32), (x.astype(np.float32) * 0.5).astype(bf16()).astype(np.float32)


@pytest.mark.backend
@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_kernel_runs_as_written_and_matches_numpy(backend, name):
    file, _features, run = CASES[name]
    got, expected = run(module(backend, file))
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if got.dtype.kind in "iub":
        np.testing.assert_array_equal(got, expected)
    else:
        # a bfloat16 result may round the other way where the device's float math differs in the last bit
        tol = 1e-2 if "bfloat16" in _features else 2e-3
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=tol, atol=tol)


def test_corpus_is_large_enough():
    assert len(CASES) >= 60, len(CASES)


# ---- on the GPU backend, every kernel the corpus launches is found by its source name (nvcc, no GPU) ------------


class _Unlaunched:
    def __init__(self, signature):
        self.signature = signature

    def __call__(self, *args, **launch):
        pass


class _LaunchRecorder:
    """Stands in for a corpus file's module: gives each case the signatures it asks for (as the runtime makes
    them) and launches nothing, so that the kernels the cases launch are known without running them."""

    def __init__(self, file: str):
        self.file = file
        self.source = (CORPUS / file).read_text()
        self.signatures = parse_kernels(self.source, file)
        self.asked: set[str] = set()

    def function(self, name: str):
        instance = self.signatures.get(name) or template_instance(self.source, name, self.file)
        self.signatures.setdefault(instance.name, instance)
        self.asked.add(instance.name)
        return _Unlaunched(instance)

    def set_constant(self, name, host):
        pass


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed: the GPU backend's image cannot be made")
@pytest.mark.parametrize("file", sorted({file for file, _, _ in CASES.values()}))
def test_every_kernel_the_corpus_launches_is_found_in_nvccs_image_by_its_source_name(file, tmp_path):
    """The GPU backend compiles the source as written (no extern "C"), so its kernels carry C++ names in the
    image; each kernel the cases launch (plain, in a namespace, a template instance, an explicit instantiation)
    must be found by the name the case asks for, and be the kernel of that name."""
    recorder = _LaunchRecorder(file)
    for case_file, _features, run in CASES.values():
        if case_file == file:
            try:
                run(recorder)
            except Exception:  # a reference computed from the outputs of kernels that did not run
                pass
    text, _, _ = gpu._image_source(recorder.source, file, recorder.signatures)
    (tmp_path / "image.cu").write_text(text)
    done = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", "image.cubin", "image.cu"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    found = kernel_symbols((tmp_path / "image.cubin").read_bytes(), recorder.signatures.values())
    assert recorder.asked and recorder.asked <= set(found), sorted(recorder.asked - set(found))
    for name in recorder.asked:
        assert comparable_name(source_name(found[name])) == comparable_name(name), (name, found[name])
    assert len({found[name] for name in recorder.asked}) == len(recorder.asked)


# ---- tf32.cu: TF32 tensor cores through wmma (both backends; the truncation check on the emulator) --------


def tf32_module(backend):
    arch = getattr(backend, "arch", "sm_80")
    if int(arch.split("_")[1]) < 80:
        pytest.skip(f"TF32 tensor cores need sm_80 or newer; this GPU is {arch}")
    return module(backend, "tf32.cu")


def tf32_rna(x):
    """NumPy model of cvt.rna.tf32.f32, in float64 arithmetic (not bit tricks): round to the nearest
    multiple of the TF32 ulp (10 explicit mantissa bits, the float32 exponent range), ties away from zero;
    infinities and NaNs are kept, and a rounding past the largest TF32 value gives infinity."""
    x = np.asarray(x, np.float32)
    out = x.astype(np.float64)
    finite = np.isfinite(out) & (out != 0)
    mag = np.abs(out[finite])
    ulp = np.exp2(np.maximum(np.floor(np.log2(mag)), -126) - 10)
    out[finite] = np.sign(out[finite]) * np.floor(mag / ulp + 0.5) * ulp
    with np.errstate(over="ignore"):
        return out.astype(np.float32)


def tf32_truncated(x):
    """What the tensor cores read of a tf32 input: its top 19 bits (the low 13 mantissa bits zeroed)."""
    return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def gemm_error(C, A, B):
    """The largest error of ``C`` against the float64 product, each element's error relative to
    ``(|A| |B|)_ij``, the scale of a dot product's rounding errors (a near-zero element from cancellation
    does not blow it up)."""
    A, B = A.astype(np.float64), B.astype(np.float64)
    return float(np.max(np.abs(C.astype(np.float64) - A @ B) / (np.abs(A) @ np.abs(B))))


def float32_gemm(A, B):
    """A plain float32 GEMM: one float32 multiply and one float32 add per step of k."""
    C = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for k in range(A.shape[1]):
        C = C + A[:, k, None] * B[None, k, :]
    return C


TF32_SPECIAL = np.float32([
    1 + 2**-11, -(1 + 2**-11),                  # ties: away from zero (ties to even would give 1 and -1)
    1 + 5 * 2**-11, -(1 + 5 * 2**-11),          # ties whose nearest even neighbour is below
    1 + 3 * 2**-11,                             # a tie whose even neighbour is also the one away from zero
    1 + 2**-11 - 2**-23, 1 + 2**-11 + 2**-23,   # just below and just above a tie
    2 - 2**-11, -(2 - 2**-11), 2 - 2**-23,      # rounding that carries into the exponent: to 2 and -2
    2.0**100 * (2 - 2**-12), -(2.0**-100) * (2 - 2**-12),  # carries far from 1: to 2**101 and -2**-99
    0.0, -0.0, 1.0, -3.0, 1e-30, -6.5e30, np.inf, -np.inf, np.nan,
])


@pytest.mark.backend
def test_float_to_tf32_rounds_to_nearest_ties_away_like_cvt_rna(backend):
    m = tf32_module(backend)
    x = np.concatenate([TF32_SPECIAL, (rng(150).standard_normal(2000) * 10.0 ** rng(151).uniform(-30, 30, 2000))
                        .astype(np.float32)])
    y = output_of(m, "tf32_round", x, x.size, grid=blocks(x.size, 128), block=128)
    expected = tf32_rna(x)
    nan = np.isnan(x)
    assert np.isnan(y[nan]).all(), y[nan]
    np.testing.assert_array_equal(y[~nan].view(np.uint32), expected[~nan].view(np.uint32))
    assert not (y[~nan].view(np.uint32) & 0x1FFF).any()
    # the ties went away from zero and the carries reached the exponent
    np.testing.assert_array_equal(y[:11], np.float32([1 + 2**-10, -(1 + 2**-10), 1 + 3 * 2**-10, -(1 + 3 * 2**-10),
                                                      1 + 2 * 2**-10, 1, 1 + 2**-10, 2, -2, 2, 2.0**101]))
    if backend.name == "cpu":
        # past the largest TF32 value the carry reaches infinity, as ptxas's code for cvt.rna does; checked on
        # the emulator only, since the PTX manual does not say so for the conversion without .satfinite
        big = np.float32([np.finfo(np.float32).max, -np.finfo(np.float32).max])
        np.testing.assert_array_equal(output_of(m, "tf32_round", big, 2, grid=1, block=32), [np.inf, -np.inf])


@pytest.mark.backend
def test_tf32_mma_of_converted_inputs_is_their_exact_product_accumulated_in_float(backend):
    m = tf32_module(backend)
    A = rng(152).standard_normal((16, 8)).astype(np.float32)
    B = rng(153).standard_normal((8, 16)).astype(np.float32)
    C = np.zeros((16, 16), np.float32)
    m.function("tf32_gemm")(A, B, C, 16, 16, 8, 1, grid=(1, 1), block=32)
    At, Bt = tf32_rna(A), tf32_rna(B)
    # the products of TF32 values are exact; the float additions (on hardware perhaps rounded toward
    # zero) are the only error: within 2 K float32 ulps of the scale |A_t| |B_t|
    bound = 2 * 8 * 2.0**-23
    assert gemm_error(C, At, Bt) <= bound, gemm_error(C, At, Bt)
    # and that is TF32's product, not float32's: the unrounded inputs' product is far outside it
    assert gemm_error(C, A, B) > 10 * bound


@pytest.mark.backend
def test_3xtf32_split_recovers_float32_accuracy(backend):
    m = tf32_module(backend)
    M = N = 32
    K = 64
    A = rng(154).standard_normal((M, K)).astype(np.float32)
    B = rng(155).standard_normal((K, N)).astype(np.float32)
    C3, C1 = np.zeros((M, N), np.float32), np.zeros((M, N), np.float32)
    m.function("tf32x3_gemm")(A, np.ascontiguousarray(B.T), C3, M, N, K, grid=(N // 16, M // 16), block=32)
    m.function("tf32_gemm")(A, B, C1, M, N, K, 1, grid=(N // 16, M // 16), block=32)
    err3, err1, err32 = gemm_error(C3, A, B), gemm_error(C1, A, B), gemm_error(float32_gemm(A, B), A, B)
    assert err3 <= 8 * err32, (err3, err32)
    assert err1 >= 100 * err3, (err1, err3)


def test_tf32_mma_reads_only_the_top_19_bits_of_unconverted_inputs_on_the_emulator():
    """A kernel that forgets __float_to_tf32 gets the truncated inputs' product (the emulator models the
    tensor cores reading 19 bits), never float32 accuracy.  Emulator only: the hardware's treatment of
    unconverted inputs is not documented."""
    from kernels.runtime.emulator import EmulatorBackend

    m = compile_source((CORPUS / "tf32.cu").read_text(), "tf32.cu", backend=EmulatorBackend(sandbox=False, checks=True))
    A = rng(156).standard_normal((16, 16)).astype(np.float32)
    B = rng(157).standard_normal((16, 16)).astype(np.float32)
    # every low mantissa bit set: truncation moves each input by almost a TF32 ulp
    A, B = ((x.view(np.uint32) | np.uint32(0x1FFF)).view(np.float32) for x in (A, B))
    C = np.zeros((16, 16), np.float32)
    m.function("tf32_gemm")(A, B, C, 16, 16, 16, 0, grid=(1, 1), block=32)
    bound = 16 * 2.0**-24
    At, Bt = tf32_truncated(A), tf32_truncated(B)
    assert gemm_error(C, At, Bt) <= bound, gemm_error(C, At, Bt)
    assert gemm_error(C, A, B) > 10 * bound and gemm_error(C, tf32_rna(A), tf32_rna(B)) > 10 * bound


# ---- what the emulator cannot run: one sentence, at the line ------------------------------------

UNSUPPORTED = {
    "inline PTX": ("__global__ void k(int* out) {\n    int lane;\n    asm volatile(\"mov.u32 %0, %%laneid;\" : \"=r\"(lane));\n"
                   "    out[threadIdx.x] = lane;\n}\n", 3, "inline PTX assembly"),
    "dynamic parallelism": ("__global__ void child(int* x) { x[threadIdx.x] = 1; }\n"
                            "__global__ void parent(int* x) {\n    child<<<1, 32>>>(x);\n}\n", 3, "dynamic parallelism"),
    "textures": ("texture<float, 1, cudaReadModeElementType> tex;\n__global__ void k(float* y) {\n"
                 "    y[threadIdx.x] = tex1Dfetch(tex, threadIdx.x);\n}\n", 1, "textures"),
    "cooperative groups' memcpy_async header": ("#include <cooperative_groups/memcpy_async.h>\n__global__ void k(float* y) { y[0] = 1; }\n",
                                     1, "cooperative_groups/memcpy_async.h"),
    "a header that is nowhere": ("#include \"my_helpers.h\"\n__global__ void k(float* y) { y[0] = 1; }\n", 1,
                                 "no header 'my_helpers.h'"),
    "fp8 header": ("#include <cuda_fp8.h>\n__global__ void k(float* y) { y[0] = 1; }\n", 1, "8-bit floating-point"),
}


@pytest.mark.parametrize("feature", sorted(UNSUPPORTED))
def test_unsupported_feature_is_named_at_its_line(feature):
    from kernels.runtime.emulator import EmulatorBackend

    source, line, words = UNSUPPORTED[feature]
    with pytest.raises(KernelCompileError) as info:
        compile_source(source, "unsupported.cu", backend=EmulatorBackend(sandbox=False, checks=True))
    text = str(info.value)
    assert f"unsupported.cu:{line}:" in text and words in text and "CPU emulator" in text, text
    assert "prelude.h" not in text


def test_reading_an_async_copy_before_waiting_for_it_is_caught_on_the_emulator():
    from kernels.runtime.emulator import EmulatorBackend
    from kernels.runtime.errors import UninitializedSharedMemoryError

    source = (CORPUS / "cooperative.cu").read_text().replace("__pipeline_wait_prior(1);", "")
    module = compile_source(source, "cooperative.cu", backend=EmulatorBackend(sandbox=False, checks=True))
    with pytest.raises(UninitializedSharedMemoryError):
        module.function("pipelined_tile_sums")(np.ones(5 * 64, np.float32), np.zeros(5, np.float32), 5, grid=1, block=64)


def test_an_async_copy_from_a_buffer_the_launch_may_write_is_a_tracked_read():
    """While a launch tracks races, every buffer it may write is poisoned for AddressSanitizer (and the grader makes
    every buffer writable, to read the inputs back): a cp.async from one is a read like any other, not an error."""
    from kernels.runtime.emulator import EmulatorBackend

    source = (CORPUS / "cooperative.cu").read_text().replace(
        "pipelined_tile_sums(const float* x,", "pipelined_tile_sums(float* x,")
    module = compile_source(source, "cooperative.cu", backend=EmulatorBackend(sandbox=False, checks=True))
    x = rng(89).standard_normal(5 * 64).astype(np.float32)
    y = np.zeros(5, np.float32)
    module.function("pipelined_tile_sums")(x, y, 5, grid=1, block=64)
    np.testing.assert_allclose(y, x.reshape(5, 64).sum(1), rtol=1e-5, atol=1e-5)


def test_nan_in_a_bfloat16_output_is_the_same_value_in_every_run():
    """The emulator runs a launch under two fills of shared memory and compares the outputs: a NaN the kernel writes
    to a bfloat16 output (a NaN it was given, say) is the same in both runs, not garbage read from shared memory."""
    from kernels.runtime.emulator import EmulatorBackend

    source = r"""
    #include <cuda_bf16.h>
    __global__ void scale(const __nv_bfloat16* x, __nv_bfloat16* y, int n) {
        __shared__ float s[64];
        s[threadIdx.x] = __bfloat162float(x[threadIdx.x]);
        __syncthreads();
        y[threadIdx.x] = __float2bfloat16(2.0f * s[63 - threadIdx.x]);
    }
    """
    module = compile_source(source, "bf16_nan.cu", backend=EmulatorBackend(sandbox=False, checks=True))
    x = np.arange(64, dtype=np.float32).astype(bf16())
    x[5] = np.nan
    y = np.zeros(64, bf16())
    module.function("scale")(x, y, 64, grid=1, block=64)
    assert np.isnan(y[58].astype(np.float32)) and y[0].astype(np.float32) == 126.0


def test_vector_load_before_its_bounds_test_is_caught_on_the_emulator():
    """A float4 load made before the bounds test (its value used only under the test, then a shuffle):
    the load happens in the source, so the emulator must check it as written."""
    from kernels.runtime.emulator import EmulatorBackend
    from kernels.runtime.errors import KernelMemoryError

    source = r"""
    __global__ void sum4(const float* x, float* out, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        float4 v = reinterpret_cast<const float4*>(x)[i];
        float s = 0.0f;
        if (4 * i < n) s = v.x + v.y + v.z + v.w;
        s += __shfl_down_sync(0xffffffffu, s, 1);
        if (4 * i < n) out[i] = s;
    }
    """
    module = compile_source(source, "sum4.cu", backend=EmulatorBackend(sandbox=False, checks=True))
    with pytest.raises(KernelMemoryError) as info:
        module.function("sum4")(np.ones(100, np.float32), np.zeros(25, np.float32), 100, grid=1, block=32)
    assert "argument 'x'" in str(info.value) and "line 4" in str(info.value)


# a vectorised block sum whose last vector is read whole and used only for the lanes below n: on a GPU
# that is one 16-byte (8-byte) load that reads past the end of the array when n is not a multiple of the width
VECTOR_TAIL_SOURCE = r"""
#include <cuda_runtime.h>
template <typename V, typename T, int WIDTH>
__global__ void sum_tail(const T* x, T* out, int n) {
    T s = 0;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (WIDTH * i < n) {
        V v = reinterpret_cast<const V*>(x)[i];
        s = v.x;
        if (WIDTH * i + 1 < n) s += v.y;
        if constexpr (WIDTH == 4) {
            if (WIDTH * i + 2 < n) s += v.z;
            if (WIDTH * i + 3 < n) s += v.w;
        }
    }
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
    if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}
"""
VECTOR_TAILS = {"float4": ("float4, float, 4", np.float32), "float2": ("float2, float, 2", np.float32),
                "int4": ("int4, int, 4", np.int32), "double2": ("double2, double, 2", np.float64)}


@pytest.fixture(scope="module")
def vector_tail_module():
    from kernels.runtime.emulator import EmulatorBackend

    return compile_source(VECTOR_TAIL_SOURCE, "tail.cu", backend=EmulatorBackend(sandbox=False, checks=True))


@pytest.mark.parametrize("vector", sorted(VECTOR_TAILS))
def test_a_vector_read_past_the_end_is_caught_like_a_scalar_one_on_the_emulator(vector_tail_module, vector):
    """The lanes past n are never used, so a compiler that splits the vector into its lanes would read only
    the ones in the array; the emulator checks the read as written, all its bytes (the GPU makes one load)."""
    from kernels.runtime.errors import KernelMemoryError

    arguments, dtype = VECTOR_TAILS[vector]
    width = int(arguments.rsplit(",", 1)[1])
    kernel = vector_tail_module.function(f"sum_tail<{arguments}>")
    x = np.arange(1, 4 * width + 2).astype(dtype)  # one past a multiple of the width
    with pytest.raises(KernelMemoryError) as info:
        kernel(x, np.zeros(1, dtype), x.size, grid=1, block=32)
    message = str(info.value)
    assert f"out-of-bounds read of {width * x.itemsize} bytes from argument 'x'" in message and "line 8" in message, message
    # its honest twin: the same kernel on an array of whole vectors reads nothing past the end
    x = np.arange(1, 4 * width + 1).astype(dtype)
    out = np.zeros(1, dtype)
    kernel(x, out, x.size, grid=1, block=32)
    assert out[0] == x.sum()


@pytest.mark.backend
def test_float32_arrays_for_a_bfloat16_kernel_say_what_to_pass(backend):
    m = module(backend, "vectorized.cu")
    x = rng(190).standard_normal(64).astype(np.float32)
    with pytest.raises(KernelArgumentError) as info:
        m.function("relu_bf16x2")(x, np.zeros_like(x), 64, grid=1, block=32)
    message = str(info.value)
    assert "needs bfloat16 data, got float32" in message and "x.astype(ml_dtypes.bfloat16)" in message, message
    assert "\n" not in message
    # what it says works
    import ml_dtypes

    y = np.zeros(64, ml_dtypes.bfloat16)
    m.function("relu_bf16x2")(x.astype(ml_dtypes.bfloat16), y, 64, grid=1, block=32)
    np.testing.assert_array_equal(y.astype(np.float32), np.maximum(x.astype(ml_dtypes.bfloat16).astype(np.float32), 0))


# ---- grid-wide cooperative groups: co-residency (both backends) and divergence (the emulator) -----------


@pytest.mark.backend
def test_a_cooperative_grid_larger_than_the_device_holds_is_refused(backend):
    from kernels.runtime.errors import LaunchConfigError

    m = module(backend, "grid_sync.cu")
    x = np.ones(64, np.float32)
    with pytest.raises(LaunchConfigError, match=r"cannot be resident at once.*grid.sync\(\) \(this_grid\(\), line 9\)"
                                                 r".*launch at most \d+ blocks"):
        m.function("grid_sum")(x, np.zeros(100_000, np.float32), np.zeros(1, np.float32), 64, grid=100_000, block=256)


GRID_DIVERGENCE = {
    "early return": ("__global__ void k(float* x, int n) {\n    auto grid = cg::this_grid();\n"
                     "    int i = grid.thread_rank();\n    if (i >= n) return;\n    x[i] += 1.0f;\n    grid.sync();\n"
                     "    x[i] *= 2.0f;\n}\n", r"grid.sync\(\) on line 8 is reached by 8 of the block's 32 threads"),
    "a branch per block": ("__global__ void k(float* x, int n) {\n    if (blockIdx.x == 0) {\n"
                           "        cg::this_grid().sync();\n    }\n    x[threadIdx.x] = 1.0f;\n}\n",
                           r"grid.sync\(\) on line 5 is reached by 1 of the grid's 2 blocks \(e.g. block \(0,0,0\)\), but 1 block "
                           r"\(e.g. block \(1,0,0\)\) exited"),
    "two different calls": ("__global__ void k(float* x, int n) {\n    auto grid = cg::this_grid();\n"
                            "    if (threadIdx.x % 2) grid.sync();\n    else grid.sync();\n    x[threadIdx.x] = 1.0f;\n}\n",
                            r"the threads wait at different grid.sync\(\) calls"),
}


@pytest.mark.parametrize("case_name", sorted(GRID_DIVERGENCE))
def test_a_divergent_grid_sync_is_reported_like_a_divergent_barrier(case_name):
    from kernels.runtime.emulator import EmulatorBackend
    from kernels.runtime.errors import BarrierDivergenceError

    body, message = GRID_DIVERGENCE[case_name]
    source = "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n" + body
    m = compile_source(source, "grid.cu", backend=EmulatorBackend(sandbox=False, checks=True))
    with pytest.raises(BarrierDivergenceError, match=message):
        m.function("k")(np.zeros(64, np.float32), 40, grid=2, block=32)


def test_a_race_between_blocks_before_grid_sync_is_still_caught():
    """grid.sync() orders what comes before it with what comes after; two blocks writing one element
    between the same two grid.sync() calls still race."""
    from kernels.runtime.emulator import EmulatorBackend
    from kernels.runtime.errors import KernelRaceError

    source = ("#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
              "__global__ void k(float* x) {\n    auto grid = cg::this_grid();\n    x[threadIdx.x] = blockIdx.x;\n"
              "    grid.sync();\n    x[threadIdx.x] += 1.0f;\n}\n")
    m = compile_source(source, "race.cu", backend=EmulatorBackend(sandbox=False, checks=True))
    with pytest.raises(KernelRaceError):
        m.function("k")(np.zeros(32, np.float32), grid=2, block=32)
