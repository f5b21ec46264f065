"""Tensor maps for Hopper's TMA unit, written by the CUDA driver.

A kernel that copies 2-D tiles with ``cp.async.bulk.tensor`` names the matrix by a *tensor map*: 128 bytes in
which ``cuTensorMapEncodeTiled`` records where the matrix lies in global memory, its sizes and row strides, the
box (tile) one copy moves, and how the copy lays the box out in shared memory (the swizzle).  The driver writes
it on the host; the kernel takes it by value as a ``__grid_constant__`` parameter, a struct of 16 unsigned
64-bit words (``kernels/gemm/sgemm_bf16.cu``'s ``TensorMap``).  PyCUDA has no wrapper for the call, so it goes
to ``libcuda`` through ``ctypes``, as :mod:`.gpu_cooperative` launches cooperative kernels.  Encoding needs no
context and no device: it only checks and packs the description.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .errors import KernelError
from .gpu_cooperative import check_driver_call, driver_library  # the one libcuda handle, and its error names

#: CUtensorMapDataType (cuda.h) by NumPy dtype name.
DATA_TYPES = {"uint8": 0, "uint16": 1, "uint32": 2, "int32": 3, "uint64": 4, "int64": 5, "float16": 6,
              "float32": 7, "float64": 8, "bfloat16": 9}
SWIZZLE_NONE, SWIZZLE_128B = 0, 3  # CUtensorMapSwizzle
L2_PROMOTION_256B = 3  # CUtensorMapL2promotion: a copy's misses fetch 256 bytes into L2
TENSOR_MAP_BYTES = 128


@functools.lru_cache(maxsize=1)
def _encode_tiled():
    function = driver_library().cuTensorMapEncodeTiled
    p, u32 = ctypes.c_void_p, ctypes.c_uint32
    u64_array, u32_array = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
    function.argtypes = [p, ctypes.c_int, u32, p, u64_array, u64_array, u32_array, u32_array,
                         ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    return function


def check_tiled(address: int, dtype, sizes, strides_bytes, box, swizzle: int = SWIZZLE_128B) -> None:
    """Raise KernelError, in one sentence with the fix, where the driver would refuse this description:
    ``sizes`` and ``box`` innermost first, ``strides_bytes`` from the second dimension on."""
    itemsize = np.dtype(dtype).itemsize
    if address % 16:
        raise KernelError(f"the TMA unit copies from addresses that are multiples of 16 bytes; this matrix starts at "
                          f"{address:#x} (allocate it on its own rather than as a slice)")
    for size, stride in zip(sizes[1:], strides_bytes):
        if stride % 16:
            raise KernelError(f"the TMA unit needs rows whose length in bytes is a multiple of 16; a row here is "
                              f"{stride} bytes ({stride // itemsize} values): pad the inner dimension to a multiple of "
                              f"{16 // itemsize}")
    if any(not 1 <= b <= 256 for b in box):
        raise KernelError(f"a TMA box is 1 to 256 values along each dimension, not {tuple(box)}")
    if swizzle == SWIZZLE_128B and box[0] * itemsize > 128:
        raise KernelError(f"with the 128-byte swizzle a box row holds at most 128 bytes, not {box[0] * itemsize}")


def encode_tiled(address: int, dtype, sizes, strides_bytes, box, swizzle: int = SWIZZLE_128B,
                 l2_promotion: int = L2_PROMOTION_256B) -> np.ndarray:
    """The tensor map of a ``len(sizes)``-dimensional array at device address ``address``: ``sizes`` in values,
    innermost (contiguous) first; ``strides_bytes``, the byte distance between consecutive indices of every
    dimension but the first; ``box``, the values one copy moves along each dimension.  Elements of a box that
    fall outside the array are copied as zeros.  Returns the 128 bytes as 16 ``uint64`` words."""
    dtype = np.dtype(dtype)
    if dtype.name not in DATA_TYPES:
        raise KernelError(f"the TMA unit copies {', '.join(DATA_TYPES)} elements, not {dtype.name}")
    rank = len(sizes)
    if len(box) != rank or len(strides_bytes) != rank - 1:
        raise ValueError(f"{rank} sizes need {rank} box sizes and {rank - 1} strides")
    check_tiled(address, dtype, sizes, strides_bytes, box, swizzle)
    words = np.zeros(TENSOR_MAP_BYTES // 8, np.uint64)
    dims = (ctypes.c_uint64 * rank)(*[int(s) for s in sizes])
    strides = (ctypes.c_uint64 * max(1, rank - 1))(*[int(s) for s in strides_bytes])
    boxes = (ctypes.c_uint32 * rank)(*[int(b) for b in box])
    steps = (ctypes.c_uint32 * rank)(*([1] * rank))
    check_driver_call(_encode_tiled()(words.ctypes.data, DATA_TYPES[dtype.name], rank, ctypes.c_void_p(int(address)),
                                      dims, strides, boxes, steps, 0, swizzle, l2_promotion, 0),
                      "cuTensorMapEncodeTiled")
    return words
