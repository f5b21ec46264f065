"""Versions 12 to 16 of the GEMM: C = A B^T with BF16 inputs on the tensor cores, summed in float.

``kernels/gemm/sgemm_bf16.cu`` holds the kernels and says what changes at each step; here are the float64
references, a launcher per version and the facts the chapter, the tests and the benchmark use (``KERNELS``).

``A`` is (M, K) and ``B`` is (N, K), row-major: B is given as the transpose of the K x N factor, the layout of a
linear layer's weights and of attention's keys, in which both operands hold consecutive k in a row.  A batch of
products of one shape is given as (batch, M, K) and (batch, N, K) arrays.  Inputs are BF16 (ml_dtypes' bfloat16;
float arrays are rounded to it); C is BF16, or float32 with ``out_dtype=np.float32``.  Every launcher takes NumPy
arrays or device buffers and returns C (a new array, NaN-filled before the launch, or ``out``); with
``prepare_only=True`` a function that only enqueues the launch, for timing.

Version 12 is CUDA C and runs on the CPU emulator too.  Versions 13 to 16 are PTX assembly built for Hopper
(sm_90a) and run on a Hopper GPU only; versions 14 to 16 are fed by the TMA unit through tensor maps that the
driver writes on the host (:mod:`kernels.runtime.tensor_maps`), and so need K to be a multiple of 8.
"""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np

from kernels.runtime import DeviceBuffer, blocks_for, selection, to_device
from kernels.runtime.errors import KernelError
from kernels.runtime.loader import launch, load_topic, multiprocessors, output_like
from kernels.runtime.tensor_maps import encode_tiled
from kernels.runtime.versions import KernelVersion, as_launch, kernel_table
from kernels.gemm.sgemm_hopper import KERNELS as HOPPER_KERNELS, is_hopper

TOPIC = "sgemm_bf16"
bfloat16 = np.dtype(ml_dtypes.bfloat16)


WMMA_TILE, WMMA_THREADS = 128, 256              # sgemm_bf16.cu: W_BM = W_BN, W_THREADS
MMA_TILE, MMA_THREADS, MMA_TILE_BYTES = 128, 256, 128 * 64 * 2   # R_BM = R_BN, R_THREADS, R_TILE_BYTES
TMA_BM, TMA_BK = 128, 64                        # T_BM, T_BK
ALIGNMENT_SLACK = 1024                          # the swizzle's 1024-byte alignment of the stages (swizzle_aligned)
MAX_SHARED_BYTES = 227 * 1024                   # dynamic shared memory a Hopper multiprocessor gives one block
#: The tile configurations (sgemm_bf16.cu's defines); the benchmark compares a few.
DEFAULTS = {
    "sgemm_bf16_mma": {"R_STAGES": 4},
    "sgemm_bf16_wgmma_tma": {"T_BN": 256, "T_STAGES": 4, "T_GROUP": 8},
    "sgemm_bf16_warp_specialized": {"T_BN": 256, "S_STAGES": 3, "S_CLUSTER": 2, "S_GROUP": 8, "S_TMA_STORE": 1},
    "sgemm_bf16_fused": {"T_BN": 256, "S_STAGES": 3, "S_CLUSTER": 2, "S_GROUP": 8, "S_TMA_STORE": 1},
}
ACTIVATIONS = {None: 0, "relu": 1, "gelu": 2}   # BF_ACTIVATION
#: Version 12, the one kernel written in CUDA C; the others are PTX for sm_90a (``HOPPER_ONLY``, below ``KERNELS``).
CUDA_C_KERNEL = "sgemm_bf16_wmma"


# ------------------------------------------------------------------------------------------------ references

def bf16(x) -> np.ndarray:
    """``x`` rounded to BF16 (to nearest, ties to even), as the kernels' inputs are."""
    return np.asarray(x, dtype=np.float32).astype(bfloat16)


def reference(A, B) -> np.ndarray:
    """C = A B^T in float64 (B given as N x K; batched over a leading dimension)."""
    A, B = np.asarray(A).astype(np.float64), np.asarray(B).astype(np.float64)
    return A @ np.swapaxes(B, -1, -2)


#: How far the kernels' GELU may be from the float64 one, relative to its argument: the hardware's tanh
#: (tanh.approx.f32) is within about 2^-11 of tanh, and GELU(x) = x (1 + tanh(...)) / 2.
GELU_TOLERANCE = 2.0 ** -11


def apply_activation(x: np.ndarray, activation: str | None) -> np.ndarray:
    """What BF_ACTIVATION applies, in float64: nothing, ReLU, or GELU in its tanh form."""
    if activation is None:
        return x
    if activation == "relu":
        return np.maximum(x, 0.0)
    if activation == "gelu":
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))
    raise ValueError(f"activation must be one of {', '.join(map(str, ACTIVATIONS))}, not {activation!r}")


def fused_reference(A, B, bias, activation: str | None = "gelu") -> np.ndarray:
    """activation(A B^T + bias) in float64, bias one value per column of C."""
    return apply_activation(reference(A, B) + np.asarray(bias).astype(np.float64), activation)


def flops(M: int, N: int, K: int, batch: int = 1) -> float:
    return 2.0 * M * N * K * batch


def min_bytes(M: int, N: int, K: int, batch: int = 1, out_itemsize: int = 2) -> float:
    """A and B (BF16) read once, C written once."""
    return (2.0 * (M * K + N * K) + out_itemsize * M * N) * batch


# ------------------------------------------------------------------------------------------------ launchers

def require_ptx_gpu(kernel: str, backend=None) -> None:
    """Raise a clear error unless the backend is a Hopper GPU, where versions 13 to 16 run."""
    backend = backend or selection.current_backend()
    number, title = KERNELS[kernel].number, KERNELS[kernel].title
    if backend.name != "gpu":
        raise KernelError(
            f"version {number} ({title}) runs on a Hopper GPU only: it is written in PTX assembly, which the CPU "
            f"emulator cannot run. Version 12 (sgemm_bf16_wmma) is the same product in CUDA C.")
    if not is_hopper(backend):
        raise KernelError(f"version {number} ({title}) needs a Hopper GPU (sm_90, built for sm_90a); this one is "
                          f"{backend.arch}")


def _operand(x):
    """A launcher's input: NumPy data as a contiguous BF16 array, a device buffer as it is."""
    if isinstance(x, DeviceBuffer):
        return x
    x = np.asarray(x)
    return np.ascontiguousarray(x if x.dtype == bfloat16 else bf16(x))


def _shapes(A, B) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of A (M, K) or (batch, M, K) and B (N, K) or (batch, N, K)."""
    if len(A.shape) != len(B.shape) or len(A.shape) not in (2, 3):
        raise ValueError(f"A and B must be matrices (M x K, N x K) or batches of them (batch x M x K, batch x N x K), "
                         f"got shapes {tuple(A.shape)} and {tuple(B.shape)}")
    batch = int(A.shape[0]) if len(A.shape) == 3 else 1
    M, K = int(A.shape[-2]), int(A.shape[-1])
    N, K2 = int(B.shape[-2]), int(B.shape[-1])
    if K != K2:
        raise ValueError(f"A is {M}x{K} but B is {N}x{K2}: C = A B^T needs rows of the same length K")
    if len(A.shape) == 3 and int(B.shape[0]) != batch:
        raise ValueError(f"A holds {batch} matrices and B {int(B.shape[0])}: a batch pairs them one to one")
    if min(batch, M, N, K) < 1:
        raise ValueError(f"empty product: batch, M, N, K = {batch}, {M}, {N}, {K}")
    for name, x in (("A", A), ("B", B)):
        if x.dtype != bfloat16:
            raise ValueError(f"{name} holds {x.dtype} values; the BF16 versions take bfloat16 (kernels.gemm.sgemm_bf16.bf16(x))")
    return batch, M, N, K


def _output(A, out, batch, M, N, out_dtype):
    shape = (batch, M, N) if len(A.shape) == 3 else (M, N)
    C = output_like(A, shape, out_dtype) if out is None else out
    if tuple(C.shape) != shape:
        raise ValueError(f"out has shape {tuple(C.shape)}, C is {'x'.join(map(str, shape))}")
    if np.dtype(C.dtype) != np.dtype(out_dtype):
        raise ValueError(f"out holds {C.dtype} values; this call writes {np.dtype(out_dtype).name} (out_dtype)")
    return C


def _defines(kernel: str, config: dict | None, out_dtype, extra: dict | None = None) -> dict:
    defines = {**DEFAULTS.get(kernel, {}), **(config or {}), **(extra or {})}
    if np.dtype(out_dtype) == np.float32:
        defines["BF_OUT_FLOAT"] = 1
    elif np.dtype(out_dtype) != bfloat16:
        raise ValueError(f"out_dtype must be bfloat16 or float32, not {np.dtype(out_dtype)}")
    if kernel != CUDA_C_KERNEL:
        defines["DLK_ARCH_SPECIFIC"] = 1
    return defines


def sgemm_bf16_wmma(A, B, out=None, *, out_dtype=bfloat16, sync=True, prepare_only=False):
    """Version 12: WMMA, a 128 x 128 tile per block of 8 warps; any M, N, K >= 1."""
    A, B = _operand(A), _operand(B)
    batch, M, N, K = _shapes(A, B)
    C = _output(A, out, batch, M, N, out_dtype)
    kernel = load_topic(TOPIC, _defines("sgemm_bf16_wmma", None, out_dtype)).function("sgemm_bf16_wmma")
    config = _wmma_launch({"M": M, "N": N, "K": K, "batch": batch})
    enqueue = launch(kernel, (M, N, K, A, B, C), grid=config.grid, block=config.block, sync=sync,
                     prepare_only=prepare_only)
    return enqueue if prepare_only else C


def sgemm_bf16_mma(A, B, out=None, *, out_dtype=bfloat16, config: dict | None = None, sync=True, prepare_only=False):
    """Version 13: mma.sync m16n8k16 fed by ldmatrix from a cp.async pipeline (``config``: R_STAGES); any M, N,
    K a multiple of 8."""
    require_ptx_gpu("sgemm_bf16_mma")
    A, B = _operand(A), _operand(B)
    batch, M, N, K = _shapes(A, B)
    _require_k(K, 13)
    C = _output(A, out, batch, M, N, out_dtype)
    defines = _defines("sgemm_bf16_mma", config, out_dtype)
    kernel = load_topic(TOPIC, defines).function("sgemm_bf16_mma")
    lc = _mma_launch({"M": M, "N": N, "K": K, "batch": batch}, defines)
    enqueue = launch(kernel, (M, N, K, A, B, C), grid=lc.grid, block=lc.block, shared=lc.shared, sync=sync,
                     prepare_only=prepare_only)
    return enqueue if prepare_only else C


def _require_k(K: int, number: int) -> None:
    if K % 8:
        raise ValueError(f"version {number} needs K to be a multiple of 8 (rows of 16 bytes for its copies), got "
                         f"K = {K}: pad A and B with zero columns, or use version 12")


def tensor_maps(A: DeviceBuffer, B: DeviceBuffer, batch: int, M: int, N: int, K: int, b_rows: int,
                C: DeviceBuffer | None = None) -> np.ndarray:
    """The tensor maps of A and B for versions 14 to 16, one after the other (``uint64`` words, 16 a map): 3-D (k,
    row, matrix of the batch), boxes of 64 k (128 bytes, the 128-byte swizzle) by 128 rows of A and ``b_rows`` rows
    of B; and with ``C``, C's map for versions 15 and 16's TMA stores (boxes of 64 x 64, swizzled alike)."""
    a = encode_tiled(A.ptr, bfloat16, (K, M, batch), (2 * K, 2 * K * M), (TMA_BK, TMA_BM, 1))
    b = encode_tiled(B.ptr, bfloat16, (K, N, batch), (2 * K, 2 * K * N), (TMA_BK, b_rows, 1))
    maps = [a, b]
    if C is not None:
        maps.append(encode_tiled(C.ptr, bfloat16, (N, M, batch), (2 * N, 2 * N * M), (64, 64, 1)))
    return np.concatenate(maps)


def _stores_through_tma(kernel: str, defines: dict, N: int) -> bool:
    """Whether versions 15 and 16 write C with TMA stores (S_TMA_STORE, a BF16 C whose rows are whole 16 bytes)."""
    return (kernel != "sgemm_bf16_wgmma_tma" and bool(int(defines.get("S_TMA_STORE", 0)))
            and not int(defines.get("BF_OUT_FLOAT", 0)) and N % 8 == 0)


# (backend, the maps' bytes) -> the device buffer the kernels read them from; kept, so that a queued launch's maps
# stay on the device, and a launch repeated on the same operands copies nothing.
_maps_on_device: dict = {}
MAPS_KEPT = 256


def maps_on_device(words: np.ndarray) -> DeviceBuffer:
    """The tensor maps ``words`` in global memory (where versions 14 to 16 read them)."""
    key = (id(selection.current_backend()), words.tobytes())
    buffer = _maps_on_device.get(key)
    if buffer is None:
        if len(_maps_on_device) >= MAPS_KEPT:
            _maps_on_device.pop(next(iter(_maps_on_device)))
        buffer = _maps_on_device[key] = to_device(words)
    return buffer


def _b_box_rows(kernel: str, defines: dict) -> int:
    """Rows of B one TMA copy moves: T_BN up to 128, or for versions 15 and 16 sharing B's tile in a cluster, the
    block's share if smaller."""
    bn = int(defines["T_BN"])
    share = bn // int(defines.get("S_CLUSTER", 1)) if kernel != "sgemm_bf16_wgmma_tma" else bn
    return min(share, 128)


class SizePlan(NamedTuple):
    """A configuration of versions 15 and 16 (over DEFAULTS) for products whose DEFAULTS tiles number at most
    ``tiles_per_multiprocessor`` a multiprocessor, and whose K is at least ``least_k``."""
    tiles_per_multiprocessor: float
    least_k: int
    config: dict


#: What versions 15 and 16 run a product with when no configuration is given: the first plan that holds, else
#: DEFAULTS.  The one table to edit after measuring (benchmarks/sgemm_bf16_small.py prints the plans its run
#: supports).  In 128 x 256 tiles, 1024^3 makes 0.24 a multiprocessor of an H100 (132), 2048^3 0.97, 4096^3 3.9.
#: Measured on an H100 (benchmarks/results/sgemm_bf16_small.json, each against cuBLAS in the same run): at 1024^3,
#: 128 x 64 tiles without clusters (128 blocks) were fastest, ahead of each 128 x 128 tile split along K by a
#: cluster's two blocks (also 128 blocks: the exchange through distributed shared memory costs more than the
#: narrower tiles lose); at 2048^3 (one tile a multiprocessor), 128 x 128 tiles six stages deep.  Only where
#: measured: a batch of short products (K of 64, attention's shapes) keeps DEFAULTS.
SIZE_PLANS = (
    SizePlan(0.48, 0, {"T_BN": 64, "S_STAGES": 8, "S_CLUSTER": 1}),
    SizePlan(1.0, 1024, {"T_BN": 128, "S_STAGES": 6}),
)


def tiles_per_multiprocessor(kernel: str, shape, sms: int | None = None) -> float:
    """DEFAULTS' tiles of a product of ``shape`` (versions 15 and 16), per multiprocessor."""
    batch, M, N, _ = _sizes(shape)
    sms = multiprocessors() if sms is None else sms
    return blocks_for(M, TMA_BM) * blocks_for(N, int(DEFAULTS[kernel]["T_BN"])) * batch / sms


def planned_config(kernel: str, shape, sms: int | None = None, plans=None) -> dict:
    """The configuration versions 15 and 16 run a product of ``shape`` with when none is given: the first of
    ``plans`` (SIZE_PLANS) that holds for it, over DEFAULTS; else DEFAULTS."""
    per_multiprocessor, K = tiles_per_multiprocessor(kernel, shape, sms), _sizes(shape)[3]
    for plan in SIZE_PLANS if plans is None else plans:
        if per_multiprocessor <= plan.tiles_per_multiprocessor and K >= plan.least_k:
            return {**DEFAULTS[kernel], **plan.config}
    return dict(DEFAULTS[kernel])


def _tma_product(kernel: str, A, B, out, out_dtype, config, sync, prepare_only, bias=None, activation=None):
    require_ptx_gpu(kernel)
    A, B = _operand(A), _operand(B)
    batch, M, N, K = _shapes(A, B)
    _require_k(K, KERNELS[kernel].number)
    C = _output(A, out, batch, M, N, out_dtype)
    extra = {"BF_ACTIVATION": ACTIVATIONS[activation]} if kernel == "sgemm_bf16_fused" else None
    if config is None and kernel != "sgemm_bf16_wgmma_tma":
        config = planned_config(kernel, {"batch": batch, "M": M, "N": N, "K": K})
    defines = _defines(kernel, config, out_dtype, extra)
    # The tensor maps hold device addresses: NumPy operands are copied to the device first (kept until the launch),
    # and so is a NumPy C that TMA stores write.
    A_dev = A if isinstance(A, DeviceBuffer) else to_device(A)
    B_dev = B if isinstance(B, DeviceBuffer) else to_device(B)
    tma_stores = _stores_through_tma(kernel, defines, N)
    host_C = None if isinstance(C, DeviceBuffer) or not tma_stores else C
    if host_C is not None:
        C = to_device(host_C)
    maps = maps_on_device(tensor_maps(A_dev, B_dev, batch, M, N, K, _b_box_rows(kernel, defines),
                                      C if tma_stores else None))
    shape = {"M": M, "N": N, "K": K, "batch": batch}
    function = load_topic(TOPIC, defines).function(kernel)
    if kernel == "sgemm_bf16_wgmma_tma":
        lc = _tma_launch(shape, defines)
        args = (M, N, K, maps, C)
    else:
        lc = _persistent_launch(shape, defines)
        args = (M, N, K, batch, maps, C)
        if kernel == "sgemm_bf16_fused":
            bias = _operand(bias)
            if tuple(bias.shape) != (N,) or bias.dtype != bfloat16:
                raise ValueError(f"bias must hold one bfloat16 value per column of C ({N}), got shape "
                                 f"{tuple(bias.shape)} of {bias.dtype}")
            args = args + (bias,)
    enqueue = launch(function, args, grid=lc.grid, block=lc.block, shared=lc.shared, sync=sync or host_C is not None,
                     prepare_only=prepare_only)

    def copy_back():
        if host_C is not None:
            host_C[...] = C.get()
        return host_C if host_C is not None else C

    if prepare_only:
        # the operands' device copies live as long as the launch
        return lambda: (A_dev, B_dev, enqueue(), copy_back() if host_C is not None else None)[2]
    return copy_back()


def sgemm_bf16_wgmma_tma(A, B, out=None, *, out_dtype=bfloat16, config: dict | None = None, sync=True,
                         prepare_only=False):
    """Version 14: wgmma on tiles the TMA unit copies, paced by mbarriers (``config``: T_BN, T_STAGES, T_GROUP);
    any M, N, K a multiple of 8."""
    return _tma_product("sgemm_bf16_wgmma_tma", A, B, out, out_dtype, config, sync, prepare_only)


def sgemm_bf16_warp_specialized(A, B, out=None, *, out_dtype=bfloat16, config: dict | None = None, sync=True,
                                prepare_only=False):
    """Version 15: a producer and two consumer warpgroups, one persistent block per multiprocessor, clusters of
    two sharing B's tiles (``config``: T_BN 64, 128 or 256, S_STAGES, S_CLUSTER, S_SPLIT_K, S_GROUP, S_BLOCKS,
    S_TMA_STORE; by default planned_config's); any M, N, K a multiple of 8."""
    return _tma_product("sgemm_bf16_warp_specialized", A, B, out, out_dtype, config, sync, prepare_only)


def sgemm_bf16_fused(A, B, bias, out=None, *, activation: str | None = "gelu", out_dtype=bfloat16,
                     config: dict | None = None, sync=True, prepare_only=False):
    """Version 16: C = activation(A B^T + bias) with version 15's products, ``bias`` one BF16 value per column;
    ``activation`` None, "relu" or "gelu" (tanh form)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(map(str, ACTIVATIONS))}, not {activation!r}")
    return _tma_product("sgemm_bf16_fused", A, B, out, out_dtype, config, sync, prepare_only, bias, activation)


# ------------------------------------------------------------------------------------------------ launches

def _sizes(shape) -> tuple[int, int, int, int]:
    return int(shape.get("batch", 1)), int(shape["M"]), int(shape["N"]), int(shape["K"])


def _wmma_launch(shape):
    batch, M, N, _ = _sizes(shape)
    return as_launch((blocks_for(N, WMMA_TILE), blocks_for(M, WMMA_TILE), batch), WMMA_THREADS)


def _mma_launch(shape, defines=None):
    batch, M, N, _ = _sizes(shape)
    stages = int((defines or DEFAULTS["sgemm_bf16_mma"])["R_STAGES"])
    return as_launch((blocks_for(M, MMA_TILE) * blocks_for(N, MMA_TILE), 1, batch), MMA_THREADS,
                     stages * 2 * MMA_TILE_BYTES)


def _stage_bytes(defines) -> int:
    return (TMA_BM + int(defines["T_BN"])) * TMA_BK * 2


def _tma_launch(shape, defines=None):
    batch, M, N, _ = _sizes(shape)
    d = defines or DEFAULTS["sgemm_bf16_wgmma_tma"]
    stages = int(d["T_STAGES"])
    tiles = blocks_for(M, TMA_BM) * blocks_for(N, int(d["T_BN"]))
    return as_launch((tiles, 1, batch), 256, stages * _stage_bytes(d) + 2 * stages * 8 + ALIGNMENT_SLACK)


def persistent_blocks(shape, defines=None, sms: int | None = None) -> int:
    """Blocks of versions 15 and 16: one per multiprocessor (or S_BLOCKS), a whole number of clusters (S_CLUSTER
    tile rows times S_SPLIT_K halves of K), and no more clusters than there are cluster tiles."""
    batch, M, N, _ = _sizes(shape)
    d = defines or DEFAULTS["sgemm_bf16_warp_specialized"]
    rows = int(d["S_CLUSTER"])
    cluster = rows * int(d.get("S_SPLIT_K", 1))
    sms = int(d.get("S_BLOCKS") or (multiprocessors() if sms is None else sms))
    cluster_tiles = blocks_for(blocks_for(M, TMA_BM), rows) * blocks_for(N, int(d["T_BN"])) * batch
    return max(cluster, min(sms // cluster, cluster_tiles) * cluster)


def persistent_shared_bytes(defines: dict) -> int:
    """Dynamic shared memory of a block of versions 15 and 16 (sgemm_bf16.cu's warp_specialized): the stages, the
    staging tiles of TMA stores, split-K's buffer of the partner's float sums, the barriers, the alignment."""
    stages, bn = int(defines["S_STAGES"]), int(defines["T_BN"])
    staging = 2 * 64 * bn * 2 if int(defines.get("S_TMA_STORE", 0)) and not int(defines.get("BF_OUT_FLOAT", 0)) else 0
    reduce = 64 * bn * 4 if int(defines.get("S_SPLIT_K", 1)) > 1 else 0
    return stages * _stage_bytes(defines) + staging + reduce + (2 * stages + 2) * 8 + ALIGNMENT_SLACK


def _persistent_launch(shape, defines=None):
    d = defines or planned_config("sgemm_bf16_warp_specialized", shape)
    shared = persistent_shared_bytes(d)
    if shared > MAX_SHARED_BYTES:
        raise ValueError(f"the configuration T_BN={d['T_BN']}, S_STAGES={d['S_STAGES']} needs {shared} bytes of shared "
                         f"memory a block, more than the {MAX_SHARED_BYTES} a Hopper multiprocessor gives one: use "
                         f"fewer S_STAGES (or S_TMA_STORE=0)")
    return as_launch(persistent_blocks(shape, d), 384, shared)


def _record_defines(kernel: str) -> dict:
    return _defines(kernel, None, bfloat16, {"BF_ACTIVATION": ACTIVATIONS["gelu"]} if kernel == "sgemm_bf16_fused" else None)


def _bytes(shape) -> float:
    batch, M, N, K = _sizes(shape)
    return min_bytes(M, N, K, batch)


def _flops(shape) -> float:
    batch, M, N, K = _sizes(shape)
    return flops(M, N, K, batch)


def _version(launcher, launch_for, number: int, title: str, reference_for=reference) -> KernelVersion:
    return KernelVersion(TOPIC, launcher.__name__, launcher, launch_for, bytes=_bytes, flops=_flops,
                         reference=reference_for, defines=_record_defines(launcher.__name__), number=number,
                         title=title)


KERNELS = kernel_table(
    _version(sgemm_bf16_wmma, _wmma_launch, 12, "WMMA, 16 x 16 x 16 BF16 fragments"),
    _version(sgemm_bf16_mma, _mma_launch, 13, "mma.sync with ldmatrix and a cp.async pipeline"),
    _version(sgemm_bf16_wgmma_tma, _tma_launch, 14, "wgmma fed by the TMA unit through tensor maps, mbarriers"),
    _version(sgemm_bf16_warp_specialized, _persistent_launch, 15,
             "warp specialisation, persistent blocks, clusters with TMA multicast"),
    _version(sgemm_bf16_fused, _persistent_launch, 16, "version 15 with bias and activation fused into its epilogue",
             fused_reference),
    continues=HOPPER_KERNELS,
)

#: Versions 13 to 16: PTX for sm_90a, run on a Hopper GPU only.
HOPPER_ONLY = tuple(kernel for kernel in KERNELS if kernel != CUDA_C_KERNEL)
