"""The emulator's profiler counts what the hardware counts, on kernels whose counts are known by hand.

A warp-level load or store is one request; its sectors are the distinct 32-byte segments its lanes
touch; a shared-memory request takes as many passes as the most distinct words one bank holds (64-
and 128-bit accesses in 2 and 4 phases).  One module of small kernels, built once (its checking and
its profiling builds), launched with one or two blocks.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels.runtime import compile_source
from kernels.runtime.emulator import EmulatorBackend, profiling
from kernels.runtime.errors import KernelMemoryError
from kernels.tools.profiler import occupancy
from kernels.tools.thread_maps import record

SOURCE = r"""
__global__ void copy(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}
__global__ void strided(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i * 32];
}
__global__ void copy4(const float4* in, float4* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}
__global__ void shared_words(float* out, int stride) {
    __shared__ float s[32 * 33];
    int t = threadIdx.x;
    s[t * stride] = (float)t;
    __syncthreads();
    out[t] = s[t * stride];
}
__global__ void shared_broadcast(float* out) {
    __shared__ float s[32];
    s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x / 16];
}
__global__ void shared_vectors(float* out, int stride2, int stride4) {
    __shared__ float s[32 * 16];
    int t = threadIdx.x;
    for (int k = t; k < 32 * 16; k += 32) s[k] = (float)k;
    __syncthreads();
    float2 a = reinterpret_cast<const float2*>(s)[t * stride2];
    float4 b = reinterpret_cast<const float4*>(s)[t * stride4];
    out[t] = a.x + a.y + b.x + b.y + b.z + b.w;
}
__global__ void shared_rows_by_thread(float* out) {
    __shared__ float s[32 * 8];
    for (int k = threadIdx.x; k < 32 * 8; k += 32) s[k] = (float)k;
    __syncthreads();
    float v = 0.0f;
    for (int k = 0; k < 8; ++k) v += s[threadIdx.x * 8 + k];   // a row of 8 words per thread
    out[threadIdx.x] = v;
}
__global__ void branches(float* out, int rounds) {
    int t = threadIdx.x;
    float v = 0.0f;
    for (int r = 0; r < rounds; ++r) {
        if (t % 2 == 0) v = sinf(v + r);   // calls: the compiler keeps the branch
        else v = cosf(v + r);
        if (blockIdx.x == 0) v *= 2.0f;
    }
    out[blockIdx.x * blockDim.x + t] = v;
}
__global__ void total(const float* x, float* sum) {
    atomicAdd(sum, x[blockIdx.x * blockDim.x + threadIdx.x]);
}
__global__ void neighbours(const float* in, float* out, int sync) {
    __shared__ float s[8];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = in[i];
    if (sync) __syncthreads();
    out[i + 1] = s[(t + 1) % 8];   // the last thread writes past the end of out
}
"""


def line_of(text: str) -> int:
    return next(n for n, line in enumerate(SOURCE.splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def module():
    built = compile_source(SOURCE, "profiled.cu", backend=EmulatorBackend(sandbox=False, timeout=60, checks=False))
    yield built
    built.compiled.close()


def run(module, kernel, *args, grid=1, block=32, blocks=profiling.DEFAULT_BLOCKS):
    with profiling.collecting(blocks) as profiles:
        module.function(kernel)(*args, grid=(grid, 1, 1), block=(block, 1, 1))
    (profile,) = profiles
    assert profile.kernel == kernel and not profile.note, profile.note
    return profile


def row(profile, space, op):
    (found,) = [r for r in profile.memory if r.space == space and r.op == op]
    return found


def test_a_coalesced_copy_touches_4_sectors_per_request(module):
    n = 256
    p = run(module, "copy", np.arange(n, dtype=np.float32), np.zeros(n, np.float32), np.int32(n), grid=2, block=128)
    for op in ("load", "store"):
        r = row(p, "global", op)
        assert (r.line, r.requests, r.sectors, r.sectors_per_request) == (line_of("out[i] = in[i];"), 8, 32, 4.0)
    assert not p.hints()


def test_a_stride_of_32_floats_touches_32_sectors_per_request_and_says_why(module):
    n = 64
    p = run(module, "strided", np.zeros(32 * n, np.float32), np.zeros(n, np.float32), np.int32(n), block=64)
    load, store = row(p, "global", "load"), row(p, "global", "store")
    assert (load.requests, load.sectors_per_request, load.ideal_sectors_per_request, load.stride_bytes) == (2, 32, 4, 128)
    assert store.sectors_per_request == 4
    (hint,) = p.hints()
    line = line_of("in[i * 32]")
    assert hint.startswith(f"line {line} reads 32 sectors") and "32 floats apart" in hint, hint


def test_a_float4_per_lane_is_one_request_of_16_sectors(module):
    n = 64
    p = run(module, "copy4", np.zeros((n, 4), np.float32), np.zeros((n, 4), np.float32), np.int32(n), block=64)
    r = row(p, "global", "load")
    assert (r.requests, r.bytes_per_lane, r.sectors_per_request) == (2, 16, 16)


@pytest.mark.parametrize("stride, ways", [(33, 1), (1, 1), (2, 2), (8, 8), (32, 32)])
def test_shared_words_a_stride_apart_conflict_as_their_common_factor_with_32_banks(module, stride, ways):
    p = run(module, "shared_words", np.zeros(32, np.float32), np.int32(stride))
    for op in ("load", "store"):
        r = row(p, "shared", op)
        assert (r.requests, r.wavefronts, r.conflicts, r.max_ways) == (1, ways, ways - 1, ways), (op, r)
    said = " ".join(p.hints())
    if ways == 32:
        assert f"line {line_of('s[t * stride] = (float)t;')} writes shared memory with 32-way bank conflicts" in said
        assert "[32][33]" in said
    elif ways == 1:
        assert "bank" not in said


def test_lanes_reading_one_word_share_it_without_a_conflict(module):
    p = run(module, "shared_broadcast", np.zeros(32, np.float32))
    r = row(p, "shared", "load")
    assert (r.wavefronts, r.conflicts) == (1, 0)


@pytest.mark.parametrize("stride2, stride4, wavefronts", [
    (1, 1, 2 + 4),  # 64-bit: two half-warp phases; 128-bit: four quarter-warp phases; no conflict
    (2, 1, 4 + 4),  # float2s 16 bytes apart: each half-warp's 16 lanes two deep in its banks
    (1, 2, 2 + 8),  # float4s 32 bytes apart: each quarter-warp two deep
])
def test_64_and_128_bit_shared_reads_are_counted_by_phase(module, stride2, stride4, wavefronts):
    p = run(module, "shared_vectors", np.zeros(32, np.float32), np.int32(stride2), np.int32(stride4))
    assert [(r.bytes_per_lane, r.requests) for r in p.memory if r.space == "shared" and r.op == "load"] == [(8, 1), (16, 1)]
    assert (p.total("shared", "load", "phases"), p.total("shared", "load", "wavefronts")) == (6, wavefronts)
    assert p.bank_conflicts("load") == wavefronts - 6


def test_a_thread_s_neighbouring_shared_words_merge_into_128_bit_loads_as_nvcc_makes_them(module):
    p = run(module, "shared_rows_by_thread", np.zeros(32, np.float32))
    load, store = row(p, "shared", "load"), row(p, "shared", "store")
    # two LDS.128 per thread (8 words); each quarter-warp's 8 lanes are 32 bytes apart: 2 deep in 16 banks
    assert (load.bytes_per_lane, load.requests, load.phases, load.wavefronts) == (16, 2, 8, 16)
    # the stores of a thread are 32 words apart: each stays one 32-bit store, a warp's 32 consecutive words
    assert (store.bytes_per_lane, store.requests, store.wavefronts) == (4, 8, 8)


def test_a_branch_a_warp_splits_is_divergent_and_one_it_takes_whole_is_not(module):
    p = run(module, "branches", np.zeros(128, np.float32), np.int32(4), grid=2, block=64)
    (b,) = p.branches
    assert b.line in (line_of("v = sinf(v + r);"), line_of("v = cosf(v + r);"))
    assert b.divergent == b.branches == 4 * 2 * 2  # 4 rounds, 2 warps, 2 blocks
    assert any(h.startswith(f"near line {b.line}") for h in p.hints())


def test_an_atomic_is_counted_as_one_not_as_a_load_and_a_store(module):
    p = run(module, "total", np.ones(64, np.float32), np.zeros(1, np.float32), block=64)
    assert {(r.space, r.op) for r in p.memory} == {("global", "load"), ("global", "atomic")}
    assert row(p, "global", "atomic").requests == 2


def test_only_the_sampled_blocks_run_and_say_so(module):
    n = 32 * 16
    p = run(module, "copy", np.zeros(n, np.float32), np.zeros(n, np.float32), np.int32(n), grid=16, blocks=3)
    assert (p.blocks_profiled, row(p, "global", "load").requests) == (3, 3)
    assert "the first 3 of 16 blocks profiled" in p.table()
    whole = run(module, "copy", np.zeros(n, np.float32), np.zeros(n, np.float32), np.int32(n), grid=16, blocks=0)
    assert whole.blocks_profiled == 16 and "whole grid (16 blocks)" in whole.table()


def test_a_launch_not_profiled_builds_and_runs_nothing_more(module, monkeypatch):
    monkeypatch.delenv(profiling.ENV_VAR, raising=False)
    fresh = compile_source(SOURCE, "unprofiled.cu", backend=EmulatorBackend(sandbox=False, timeout=60, checks=False))
    out = np.zeros(64, np.float32)
    fresh.function("copy")(np.ones(64, np.float32), out, np.int32(64), grid=(1, 1, 1), block=(64, 1, 1))
    assert out.sum() == 64 and fresh.compiled._profile_build is None and fresh.compiled._profiler is None
    fresh.compiled.close()


def test_the_environment_variable_prints_each_launch_s_table(module, monkeypatch, capsys):
    monkeypatch.setenv(profiling.ENV_VAR, "1")
    module.function("strided")(np.zeros(32 * 32, np.float32), np.zeros(32, np.float32), np.int32(32),
                               grid=(1, 1, 1), block=(32, 1, 1))
    said = capsys.readouterr().out
    assert "profile of strided" in said and "32 sectors" in said, said


def test_a_profile_reads_back_from_its_plain_data(module):
    p = run(module, "shared_words", np.zeros(32, np.float32), np.int32(32))
    again = profiling.LaunchProfile.from_dict(p.as_dict())
    assert again.table() == p.table() and again.summary() == p.summary()


@pytest.mark.parametrize("registers, shared, threads, blocks, limited_by, percent", [
    (32, 0, 1024, 2, "threads", 100.0),
    (64, 0, 256, 4, "registers", 50.0),
    (147, 8192, 256, 1, "registers", 12.5),  # sgemm_blocktile_2d: ncu's achieved occupancy is 12.48%
    (16, 48 * 1024, 128, 4, "shared memory", 25.0),
    (16, 0, 32, 32, "blocks", 50.0),
])
def test_occupancy_follows_the_h100_s_limits(registers, shared, threads, blocks, limited_by, percent):
    o = occupancy(registers, shared, threads)
    assert (o.blocks_per_sm, o.limited_by, o.percent) == (blocks, limited_by, percent)


def test_occupancy_comes_from_nvcc_s_report_or_says_nvcc_was_not_found(module, monkeypatch):
    from kernels.tools import profiler

    n = 256
    p = run(module, "copy", np.zeros(n, np.float32), np.zeros(n, np.float32), np.int32(n), block=256)
    if profiler.nvcc_path() is not None:
        o = profiler.with_occupancy(p).occupancy
        assert o.registers > 0 and (o.blocks_per_sm, o.limited_by, o.percent) == (8, "threads", 100.0)
    monkeypatch.setattr(profiler, "nvcc_path", lambda: None)
    again = run(module, "copy", np.zeros(n, np.float32), np.zeros(n, np.float32), np.int32(n), block=256)
    assert profiler.with_occupancy(again).occupancy is None
    assert "occupancy: nvcc not found" in again.table()


def test_a_thread_map_names_the_thread_of_every_element_also_past_the_end_and_in_each_block_s_shared_array(module):
    """Every block recorded: each element's thread, an access past the end of an array in the margin the profiled
    launch gives it (the checked launch reports it as an error), and a shared array a row per block."""
    args = (np.arange(16, dtype=np.float32), np.zeros(16, np.float32))
    (tmap,), error = record(module.function("neighbours"), *args, np.int32(1), grid=(2, 1, 1), block=(8, 1, 1))
    assert isinstance(error, KernelMemoryError) and "element 16" in str(error)
    assert tmap.find("in", "read").threads == {i: (i,) for i in range(16)}
    assert tmap.find("out", "written").threads == {i + 1: (i,) for i in range(16)}  # 16: past the end
    (shared,) = [a for a in tmap.arrays if a.space == "shared"]
    assert (shared.name, shared.shape) == ("s", (2, 8))
    assert tmap.find("s", "written").threads == {e: (e,) for e in range(16)}
    assert tmap.find("s", "read").of(8) == (15,)  # block 1's s[0], read by its thread 7
    assert not tmap.unordered  # the barrier orders every read after the write it reads


def test_a_thread_map_names_the_elements_threads_touch_with_no_barrier_between(module):
    args = (np.arange(16, dtype=np.float32), np.zeros(16, np.float32))
    (tmap,), _ = record(module.function("neighbours"), *args, np.int32(0), grid=(2, 1, 1), block=(8, 1, 1))
    # s[0] of block 0 is written by thread 0 and read by thread 7 between the same barriers (none)
    assert tmap.unordered["s"][0] == (0, 7) and set(tmap.unordered["s"]) == set(range(16))
    assert "out" not in tmap.unordered  # each element of out has one writer
