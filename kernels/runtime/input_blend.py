"""Fresh inputs for every timed call, made on the device: a blend of two drawn sets chosen by a hash.

Timing a kernel on inputs it has seen before rewards a kernel that keeps its
answers.  Drawing a new input set on the host for every timed call is slow
(seconds per set at timing sizes), so the grader draws two sets, A and B,
once, and before every call the device builds a new set from them: element
``i`` of an array comes from B when bit 31 of ``hash(i, seed)`` is set and
from A otherwise, with a new ``seed`` for every call and every array.  Every
element is one the exercise's own generator drew, so a blend is as valid an
input as A or B; about half of the elements change from one call to the
next, so no earlier answer is right again.

:data:`CUDA_SOURCE` holds the device side (the blend, and the comparison of a
kernel's output with the reference kernel's output on the same blend);
:func:`blend_host` is the same blend in NumPy, bit for bit, so that the
grader can rebuild the inputs of any call from its three seeds.  The tests
run :data:`CUDA_SOURCE` on the emulator against :func:`blend_host`.
"""

from __future__ import annotations

import numpy as np

from .host_chunks import over_chunks

#: Constants of the hash (Murmur3's finaliser after a Weyl step), shared by both sides.
_WEYL, _MIX1, _MIX2 = 0x9E3779B1, 0x85EBCA6B, 0xC2B2AE35

#: The second operand of the comparison's bound: |got - want| <= atol + TOLERANCE_FACTOR * rtol * (|want| + mean scale).
TOLERANCE_FACTOR = 4.0

CUDA_SOURCE = r"""
__device__ __forceinline__ unsigned int dlk_blend_hash(unsigned int i, unsigned int seed) {
    unsigned int h = i * 0x9E3779B1u + seed;
    h ^= h >> 16; h *= 0x85EBCA6Bu;
    h ^= h >> 13; h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

// dst[i] = (hash(i, seed) has bit 31 set) ? b[i] : a[i], for n elements of itemsize bytes.
__global__ void dlk_blend(unsigned char* dst, const unsigned char* a, const unsigned char* b,
                          unsigned int n, int itemsize, unsigned int seed) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        const unsigned char* src = (dlk_blend_hash(i, seed) >> 31) ? b : a;
        if (itemsize == 4) {
            reinterpret_cast<unsigned int*>(dst)[i] = reinterpret_cast<const unsigned int*>(src)[i];
        } else if (itemsize == 8) {
            reinterpret_cast<unsigned long long*>(dst)[i] = reinterpret_cast<const unsigned long long*>(src)[i];
        } else if (itemsize == 2) {
            reinterpret_cast<unsigned short*>(dst)[i] = reinterpret_cast<const unsigned short*>(src)[i];
        } else {
            for (int k = 0; k < itemsize; ++k) dst[(size_t)i * itemsize + k] = src[(size_t)i * itemsize + k];
        }
    }
}

// counts[0] += elements where got and want disagree beyond the bound; counts[1] = the first such index.
__global__ void dlk_count_mismatches(const float* got, const float* want, unsigned int n, float rtol, float atol,
                                     const float* scale, unsigned int* counts) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        double g = got[i], w = want[i];
        bool bad;
        if (w != w) {
            bad = !(g != g);
        } else {
            bad = !(fabs(g - w) <= (double)atol + (double)rtol * (fabs(w) + (double)scale[i]));
        }
        if (bad) {
            atomicAdd(&counts[0], 1u);
            atomicMin(&counts[1], i);
        }
    }
}
"""


def _hash(n: int, seed: int, start: int = 0) -> np.ndarray:
    """The hash of the element indices ``start .. start + n - 1``."""
    with np.errstate(over="ignore"):
        h = np.arange(start, start + n, dtype=np.uint32) * np.uint32(_WEYL) + np.uint32(seed & 0xFFFFFFFF)
        h ^= h >> np.uint32(16)
        h *= np.uint32(_MIX1)
        h ^= h >> np.uint32(13)
        h *= np.uint32(_MIX2)
        h ^= h >> np.uint32(16)
    return h


def takes_b(n: int, seed: int, start: int = 0) -> np.ndarray:
    """Which of ``n`` elements (from index ``start`` on) a blend with ``seed`` takes from B."""
    return (_hash(n, seed, start) >> np.uint32(31)).astype(bool)


def blend_host(a: np.ndarray, b: np.ndarray, seed: int) -> np.ndarray:
    """The blend the device makes with ``seed``, of two arrays of one shape and dtype."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ValueError(f"blend of arrays that differ: {a.shape} {a.dtype} and {b.shape} {b.dtype}")
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    out = np.empty_like(flat_a)

    def blend_chunk(start: int, stop: int) -> None:
        np.copyto(out[start:stop], np.where(takes_b(stop - start, seed, start), flat_b[start:stop], flat_a[start:stop]))

    over_chunks(flat_a.size, blend_chunk)
    return out.reshape(a.shape)


def argument_seed(call_seed: int, position: int) -> int:
    """The blend seed of the argument at ``position`` for a call drawn with ``call_seed`` (32 bits)."""
    return (int(call_seed) + _WEYL * (position + 1)) & 0xFFFFFFFF


def mismatches_host(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, scale) -> tuple[int, int]:
    """(count, first index) of the elements the device comparison counts; the same bound, in NumPy.  ``scale``:
    the error scale of each element (an array of the outputs' size, as the device comparison reads it), or one
    for all."""
    g = np.asarray(got, np.float64).ravel()
    w = np.asarray(want, np.float64).ravel()
    s = np.broadcast_to(np.asarray(scale, np.float64), np.shape(want)).ravel()
    with np.errstate(invalid="ignore", over="ignore"):
        bound = atol + rtol * (np.abs(w) + s)
        bad = np.where(np.isnan(w), ~np.isnan(g), ~(np.abs(g - w) <= bound))
    count = int(np.count_nonzero(bad))
    return count, (int(np.argmax(bad)) if count else -1)
