"""The classic kernel bugs the CPU emulator reports.

Each bug class is a pair of kernels: the one with the bug is reported with the
right error type and the line of the bug, the fixed one runs clean.
"""

from __future__ import annotations


import numpy as np
import pytest

from kernels.runtime import (
    BarrierDivergenceError,
    KernelLaunchError,
    KernelMemoryError,
    KernelRaceError,
    KernelTimeoutError,
    LaunchConfigError,
    LaunchTooLargeError,
    UninitializedSharedMemoryError,
)
from kernels.runtime.emulator import EmulatorBackend, launch_budget

from emulator_reports import reported


def line_of(source: str, text: str) -> int:
    """1-based line of the first line of ``source`` containing ``text``."""
    for number, line in enumerate(source.splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in source")


# ---- out-of-bounds global read ----------------------------------------------------

SCALE = r"""
__global__ void forward_difference(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i + 1] - x[i];       // BUG: x[n] is read for i = n - 1
}
"""
SCALE_FIXED = SCALE.replace("if (i < n)", "if (i < n - 1)")


def test_out_of_bounds_global_read(emu_build):
    x = np.arange(100, dtype=np.float32)
    y = np.zeros(100, np.float32)
    message = reported(KernelMemoryError, emu_build(SCALE).function("forward_difference"), x, y, 100, grid=1, block=128)
    assert f"line {line_of(SCALE, 'x[i + 1] - x[i]')}" in message
    assert "out-of-bounds read of 4 bytes from argument 'x' (100 float32 values) at element 100" in message
    assert "thread (99,0,0)" in message


def test_out_of_bounds_global_read_fixed(emu_build):
    x = np.arange(100, dtype=np.float32)
    y = np.zeros(100, np.float32)
    emu_build(SCALE_FIXED).function("forward_difference")(x, y, 100, grid=1, block=128)
    np.testing.assert_array_equal(y[:99], 1)


# ---- out-of-bounds global write -----------------------------------------------------

ADD = r"""
__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) c[i] = a[i < n ? i : 0] + b[i < n ? i : 0];   // BUG: <= instead of <
}
"""


def test_out_of_bounds_global_write(emu_build):
    a = np.ones(100, np.float32)
    c = np.zeros(100, np.float32)
    message = reported(KernelMemoryError, emu_build(ADD).function("vector_add"), a, a, c, 100, grid=1, block=128)
    assert "out-of-bounds write of 4 bytes to argument 'c' (100 float32 values) at element 100" in message
    assert f"line {line_of(ADD, 'if (i <= n)')}" in message
    assert "block (0,0,0) thread (100,0,0)" in message


def test_out_of_bounds_global_write_fixed(emu_build):
    a = np.ones(100, np.float32)
    c = np.zeros(100, np.float32)
    emu_build(ADD.replace("i <= n", "i < n")).function("vector_add")(a, a, c, 100, grid=1, block=128)
    assert np.all(c == 2)


# ---- out-of-bounds shared write ----------------------------------------------------------

STENCIL = r"""
#define BLOCK 64
__global__ void smooth(const float* x, float* y, int n) {
    __shared__ float tile[BLOCK + 1];
    int i = blockIdx.x * BLOCK + threadIdx.x;
    tile[threadIdx.x] = x[i];
    if (threadIdx.x == 0) tile[BLOCK + 1] = i + BLOCK < n ? x[i + BLOCK] : 0.0f;   // BUG: halo at BLOCK + 1
    __syncthreads();
    y[i] = 0.5f * (tile[threadIdx.x] + tile[threadIdx.x + 1]);
}
"""


def test_out_of_bounds_shared_write(emu_build):
    x = np.arange(128, dtype=np.float32)
    y = np.zeros(128, np.float32)
    message = reported(KernelMemoryError, emu_build(STENCIL).function("smooth"), x, y, 128, grid=2, block=64)
    assert "shared array 'tile'" in message and "element 65" in message and "write" in message
    assert f"line {line_of(STENCIL, 'tile[BLOCK + 1] =')}" in message


def test_out_of_bounds_shared_write_fixed(emu_build):
    x = np.arange(128, dtype=np.float32)
    y = np.zeros(128, np.float32)
    emu_build(STENCIL.replace("tile[BLOCK + 1] =", "tile[BLOCK] =")).function("smooth")(x, y, 128, grid=2, block=64)
    expected = 0.5 * (x + np.append(x[1:], 0))
    np.testing.assert_allclose(y, expected)


def test_out_of_bounds_dynamic_shared_write(emu_build):
    source = r"""
    __global__ void copy(float* x) {
        extern __shared__ float buffer[];
        buffer[threadIdx.x + 1] = x[threadIdx.x];
        __syncthreads();
        x[threadIdx.x] = buffer[threadIdx.x + 1];
    }
    """
    kernel = emu_build(source).function("copy")
    with pytest.raises(KernelMemoryError, match="dynamic shared memory"):
        kernel(np.zeros(32, np.float32), grid=1, block=32, shared=32 * 4)
    kernel(np.zeros(32, np.float32), grid=1, block=32, shared=33 * 4)


# ---- reading shared memory no thread wrote ---------------------------------------------------

BLOCK_SUM = r"""
__global__ void block_sum(const float* x, float* sums, int n) {
    __shared__ float partial[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) partial[threadIdx.x] = x[i];     // BUG: threads past n leave their slot unwritten
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}
"""


def test_uninitialized_shared_read(emu_build):
    x = np.ones(200, np.float32)
    sums = np.zeros(2, np.float32)
    kernel = emu_build(BLOCK_SUM).function("block_sum")
    message = reported(UninitializedSharedMemoryError, kernel, x, sums, 200, grid=2, block=128)
    assert "shared array 'partial' (line 3): elements 72-127 of 128 were never written in block (1,0,0)" in message
    assert "argument 'sums'" in message


def test_uninitialized_shared_read_fixed(emu_build):
    fixed = BLOCK_SUM.replace("if (i < n) partial[threadIdx.x] = x[i];", "partial[threadIdx.x] = i < n ? x[i] : 0.0f;")
    x = np.ones(200, np.float32)
    sums = np.zeros(2, np.float32)
    emu_build(fixed).function("block_sum")(x, sums, 200, grid=2, block=128)
    assert sums.tolist() == [128, 72]


# ---- missing __syncthreads in a tiled matrix multiply -----------------------------------------

TILED = r"""
#define TILE 8
__global__ void matmul_tiled(const float* A, const float* B, float* C, int n) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < n / TILE; ++t) {
        As[threadIdx.y][threadIdx.x] = A[row * n + t * TILE + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(t * TILE + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    C[row * n + col] = acc;
}
"""


def _matrices(n=16):
    rng = np.random.default_rng(8)
    return rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32), np.zeros((n, n), np.float32)


@pytest.mark.parametrize("which", ["after the loads", "after the products"])
def test_missing_syncthreads_in_tiled_matmul(emu_build, which):
    lines = TILED.splitlines()
    barriers = [k for k, line in enumerate(lines) if "__syncthreads();" in line]
    drop = barriers[0] if which == "after the loads" else barriers[1]
    buggy = "\n".join(line if k != drop else "" for k, line in enumerate(lines))
    A, B, C = _matrices()
    with pytest.raises(KernelRaceError) as info:
        emu_build(buggy).function("matmul_tiled")(A, B, C, 16, grid=(2, 2), block=(8, 8))
    assert "argument 'C'" in str(info.value) and "__syncthreads()" in str(info.value)


def test_tiled_matmul_fixed(emu_build):
    A, B, C = _matrices()
    emu_build(TILED).function("matmul_tiled")(A, B, C, 16, grid=(2, 2), block=(8, 8))
    np.testing.assert_allclose(C, A @ B, rtol=1e-5)


def test_race_between_blocks_without_atomics(emu_build):
    source = r"""
    __global__ void count(const int* x, int* total, int n) {
        __shared__ int block_total;
        if (threadIdx.x == 0) block_total = 0;
        __syncthreads();
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) atomicAdd(&block_total, x[i]);
        __syncthreads();
        if (threadIdx.x == 0) total[0] = total[0] * 2 + block_total;   // BUG: blocks overwrite each other
    }
    """
    x = np.arange(64, dtype=np.int32)
    total = np.zeros(1, np.int32)
    kernel = emu_build(source).function("count")
    with pytest.raises(KernelRaceError):
        kernel(x, total, 64, grid=2, block=32)
    fixed = emu_build(source.replace("total[0] = total[0] * 2 + block_total;", "atomicAdd(total, block_total);"))
    total[0] = 0
    fixed.function("count")(x, total, 64, grid=2, block=32)
    assert total[0] == x.sum()


# ---- barrier divergence -------------------------------------------------------------------------

EARLY_RETURN = r"""
__global__ void normalize(float* x, int n) {
    __shared__ float total;
    int i = threadIdx.x;
    if (i >= n) return;                      // BUG: these threads never reach the barrier
    if (i == 0) total = 0.0f;
    __syncthreads();
    atomicAdd(&total, x[i]);
    __syncthreads();
    x[i] /= total;
}
"""
EARLY_RETURN_FIXED = r"""
__global__ void normalize(float* x, int n) {
    __shared__ float total;
    int i = threadIdx.x;
    if (i == 0) total = 0.0f;
    __syncthreads();
    if (i < n) atomicAdd(&total, x[i]);
    __syncthreads();
    if (i < n) x[i] /= total;
}
"""


def test_barrier_divergence_by_early_return(emu_build):
    x = np.ones(50, np.float32)
    message = reported(BarrierDivergenceError, emu_build(EARLY_RETURN).function("normalize"), x, 50, grid=1, block=64)
    assert f"line {line_of(EARLY_RETURN, '__syncthreads')}" in message
    assert "50 of the block's 64 threads" in message and "exited" in message


def test_barrier_divergence_by_early_return_fixed(emu_build):
    x = np.ones(50, np.float32)
    emu_build(EARLY_RETURN_FIXED).function("normalize")(x, 50, grid=1, block=64)
    np.testing.assert_allclose(x, 1 / 50)


BRANCH = r"""
__global__ void halves(float* x) {
    __shared__ float s[64];
    s[threadIdx.x] = x[threadIdx.x];
    if (threadIdx.x < 32) {
        __syncthreads();                     // BUG: only half the block gets here
        x[threadIdx.x] = s[63 - threadIdx.x];
    } else {
        __syncthreads();
        x[threadIdx.x] = s[63 - threadIdx.x];
    }
}
"""


def test_barrier_in_divergent_branch(emu_build):
    kernel = emu_build(BRANCH).function("halves")
    message = reported(BarrierDivergenceError, kernel, np.zeros(64, np.float32), grid=1, block=64)
    first = line_of(BRANCH, "__syncthreads();                     // BUG")
    assert "different __syncthreads()" in message
    assert f"line {first}" in message and f"line {first + 3}" in message


def test_barrier_in_branch_some_threads_skip(emu_build):
    source = r"""
    __global__ void k(float* x) {
        if (threadIdx.x % 2 == 0) __syncthreads();
        x[threadIdx.x] = 1.0f;
    }
    """
    with pytest.raises(BarrierDivergenceError, match="line 3"):
        emu_build(source).function("k")(np.zeros(8, np.float32), grid=1, block=8)


def test_barrier_outside_branch_fixed(emu_build):
    fixed = BRANCH.replace("__syncthreads();                     // BUG: only half the block gets here", "")
    fixed = fixed.replace("    if (threadIdx.x < 32) {", "    __syncthreads();\n    if (threadIdx.x < 32) {", 1)
    fixed = fixed.replace("    } else {\n        __syncthreads();", "    } else {")
    x = np.arange(64, dtype=np.float32)
    emu_build(fixed).function("halves")(x, grid=1, block=64)
    np.testing.assert_array_equal(x, np.arange(64)[::-1])


def test_shuffle_waiting_for_an_exited_lane(emu_build):
    source = r"""
    __global__ void k(float* x, int n) {
        if (threadIdx.x >= n) return;
        float v = x[threadIdx.x];
        v += __shfl_down_sync(0xffffffff, v, 1);   // BUG: lanes >= n have exited
        x[threadIdx.x] = v;
    }
    """
    with pytest.raises(BarrierDivergenceError, match="exited"):
        emu_build(source).function("k")(np.zeros(32, np.float32), 20, grid=1, block=32)
    fixed = source.replace("0xffffffff", "__activemask()")
    x = np.ones(32, np.float32)
    emu_build(fixed).function("k")(x, 20, grid=1, block=32)
    assert x[:19].tolist() == [2] * 19


# ---- a kernel that runs too long ------------------------------------------------------------------

SPIN = r"""
__global__ void wait_for_flag(volatile int* flag, int* out) {
    while (flag[0] == 0) { }                 // BUG: nothing ever sets the flag
    out[threadIdx.x] = 1;
}
"""


def test_endless_loop_is_stopped_at_the_time_limit(emu_build):
    backend = EmulatorBackend(timeout=2)
    module = emu_build(SPIN, backend=backend)
    out = np.zeros(4, np.int32)
    with pytest.raises(KernelTimeoutError, match="did not finish within 2 s"):
        module.function("wait_for_flag")(np.zeros(1, np.int32), out, grid=1, block=4)
    # the module still works afterwards (a fresh worker)
    module.function("wait_for_flag")(np.ones(1, np.int32), out, grid=1, block=4)
    assert np.all(out == 1)


def test_a_launch_too_large_for_the_time_limit_is_refused_before_it_starts(emu_build):
    """10^9 threads cannot run within the limit even if each did nothing: said at once, not after the limit."""
    backend = EmulatorBackend(timeout=36)
    module = emu_build(SPIN, backend=backend)
    out = np.zeros(4, np.int32)
    with pytest.raises(LaunchTooLargeError) as refused:
        module.function("wait_for_flag")(np.ones(1, np.int32), out, grid=(10**9 // 256 + 1,), block=256)
    message = str(refused.value)
    assert "a launch of 1,000,000,256 threads" in message and "limit of 36 s" in message
    assert f"at most {launch_budget(36, checks=True):,} threads" in message
    assert "launch fewer threads" in message and "GPU" in message and "endless" not in message
    assert isinstance(refused.value, LaunchConfigError)  # graded as a launch the exercise cannot run


def test_the_launch_budget_refuses_only_what_could_not_finish(emu_build):
    """The budget scales with the limit and the checks; a launch within it runs as before."""
    assert launch_budget(36, checks=True) == 360_000_000 and launch_budget(36, checks=False) == 720_000_000
    backend = EmulatorBackend(timeout=0.5, checks=False)  # 10 million threads at most
    module = emu_build(SPIN, backend=backend)
    out = np.zeros(4, np.int32)
    module.function("wait_for_flag")(np.ones(1, np.int32), out, grid=1, block=4)
    assert np.all(out == 1)
    with pytest.raises(LaunchTooLargeError, match="a launch of 10,000,128 threads"):
        module.function("wait_for_flag")(np.ones(1, np.int32), out, grid=(10**7 // 128 + 1,), block=128)


def test_time_limit_from_environment(monkeypatch):
    monkeypatch.setenv("DLK_EMULATOR_TIMEOUT", "3.5")
    assert EmulatorBackend().timeout == 3.5


# ---- a crash inside the kernel --------------------------------------------------------------------

WILD = r"""
__global__ void wild(float* x, long long address) {
    float* p = (float*)address;
    x[threadIdx.x] = *p;                     // BUG: p points nowhere
}
__global__ void tame(float* x) {
    x[threadIdx.x] = threadIdx.x;
}
"""


def test_wild_pointer_crash_is_an_exception(emu_build):
    module = emu_build(WILD)
    x = np.zeros(8, np.float32)
    with pytest.raises(KernelLaunchError) as info:
        module.function("wild")(x, 0x10, grid=1, block=8)
    assert f"line {line_of(WILD, 'x[threadIdx.x] = *p;')}" in str(info.value)
    assert "SIGSEGV" in str(info.value) and "invalid memory read" in str(info.value)
    # the same module runs again (a fresh worker) ...
    module.function("tame")(x, grid=1, block=8)
    np.testing.assert_array_equal(x, np.arange(8))
    # ... and so does a fresh module
    other = emu_build(WILD.replace("wild", "wild2").replace("tame", "tame2"))
    y = np.zeros(8, np.float32)
    other.function("tame2")(y, grid=1, block=8)
    np.testing.assert_array_equal(y, np.arange(8))


def test_abort_in_kernel_is_an_exception(emu_build):
    source = r"""
    #include <cstdlib>
    __global__ void k(float* x) { if (threadIdx.x == 3) abort(); x[threadIdx.x] = 1.0f; }
    """
    with pytest.raises(KernelLaunchError, match="SIGABRT") as info:
        emu_build(source).function("k")(np.zeros(4, np.float32), grid=1, block=4)
    assert not isinstance(info.value, KernelMemoryError)


def test_integer_division_by_zero_is_an_exception(emu_build):
    source = r"""
    __global__ void divide(int* x) { x[threadIdx.x] = 100 / x[threadIdx.x]; }
    """
    with pytest.raises(KernelLaunchError, match="SIGFPE.*line 2"):
        emu_build(source).function("divide")(np.array([1, 2, 0, 4], np.int32), grid=1, block=4)


# ---- sandbox -----------------------------------------------------------------------------------------


def test_sandbox_forbids_writing_files_and_starting_programs(emu_build, tmp_path):
    target = tmp_path / "written.txt"
    spawned = tmp_path / "spawned.txt"
    source = r"""
    #include <cstdio>
    #include <cstdlib>
    #include <signal.h>
    #include <unistd.h>
    __global__ void escape(int* result) {
        FILE* f = fopen("TARGET", "w");
        result[0] = f != 0;
        if (f) { fputs("escaped", f); fclose(f); }
        result[1] = system("touch SPAWNED");
        FILE* r = fopen("/proc/self/status", "r");   // reading stays allowed
        result[2] = r != 0;
        if (r) fclose(r);
        result[3] = kill(getppid(), 0);   // signal 0 only asks whether it could signal Python
    }
    """.replace("TARGET", str(target)).replace("SPAWNED", str(spawned))
    result = np.zeros(4, np.int32)
    module = emu_build(source, backend=EmulatorBackend(sandbox=True, checks=False))
    module.function("escape")(result, grid=1, block=1)
    if module.compiled._worker.sandboxed is not True:
        pytest.skip("seccomp is not available here")
    assert result[0] == 0 and result[2] == 1 and result[3] == -1
    assert not target.exists() and not spawned.exists()


def test_without_sandbox_files_can_be_written(emu_build, tmp_path):
    target = tmp_path / "written.txt"
    source = r"""
    #include <cstdio>
    __global__ void write_file(int* ok) {
        FILE* f = fopen("TARGET", "w");
        ok[0] = f != 0;
        if (f) fclose(f);
    }
    """.replace("TARGET", str(target))
    ok = np.zeros(1, np.int32)
    emu_build(source, backend=EmulatorBackend(sandbox=False, checks=False)).function("write_file")(ok, grid=1, block=1)
    assert ok[0] == 1 and target.exists()


def test_sandbox_from_environment(monkeypatch):
    monkeypatch.setenv("DLK_EMULATOR_SANDBOX", "1")
    assert EmulatorBackend().sandbox is True
    monkeypatch.setenv("DLK_EMULATOR_CHECKS", "0")
    assert EmulatorBackend().checks is False


def test_out_of_bounds_local_array(emu_build):
    source = r"""
    __global__ void local_window(const float* x, float* y) {
        float window[4];
        for (int k = 0; k <= 4; ++k) window[k] = x[threadIdx.x];   // BUG: k <= 4
        y[threadIdx.x] = window[0] + window[3];
    }
    """
    with pytest.raises(KernelMemoryError) as info:
        emu_build(source).function("local_window")(np.ones(4, np.float32), np.zeros(4, np.float32), grid=1, block=4)
    assert "local array 'window'" in str(info.value) and "line 4" in str(info.value)


def test_out_of_bounds_reported_under_sandbox(emu_build):
    source = r"""
    __global__ void shift(float* x) {
        x[threadIdx.x + 1] = 1.0f;
    }
    """
    module = emu_build(source, backend=EmulatorBackend(sandbox=True, checks=False))
    with pytest.raises(KernelMemoryError, match=r"argument 'x' \(8 float32 values\) at element 8, line 3"):
        module.function("shift")(np.zeros(8, np.float32), grid=1, block=8)


def test_crash_without_address_sanitizer_still_names_the_line(emu_build, monkeypatch):
    """The plain build (no AddressSanitizer on the machine, or DLK_EMULATOR_ASAN=0)."""
    monkeypatch.setenv("DLK_EMULATOR_ASAN", "0")
    module = emu_build(WILD.replace("wild", "wild_plain"))
    assert not module.compiled.asan
    with pytest.raises(KernelLaunchError, match="SIGSEGV") as info:
        module.function("wild_plain")(np.zeros(8, np.float32), 0x10, grid=1, block=8)
    assert f"line {line_of(WILD, 'x[threadIdx.x] = *p;')}" in str(info.value)


def test_interrupted_launch_leaves_the_module_usable(emu_build):
    """Ctrl-C (or a stopped notebook cell) during an endless kernel: Python survives, the module works."""
    import os
    import signal
    import threading

    module = emu_build(SPIN.replace("wait_for_flag", "wait_interrupted"))
    # A real SIGINT, as Ctrl-C sends, with Python's own handler (a process started in the
    # background by a non-interactive shell inherits SIGINT ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            module.function("wait_interrupted")(np.zeros(1, np.int32), np.zeros(4, np.int32), grid=1, block=4)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    out = np.zeros(4, np.int32)
    module.function("wait_interrupted")(np.ones(1, np.int32), out, grid=1, block=4)
    assert np.all(out == 1)


# ---- warp-synchronous code that assumes lock-step warps ---------------------------------------------

# The same 64-element reduction twice: its first warp's part (LAST_WARP) written as lock-step code, then fixed.
WARP_REDUCE_FRAME = r"""
__global__ void reduce64(const float* x, float* out) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = x[t];
    __syncthreads();
    if (t < 32) {
LAST_WARP
    }
    if (t == 0) out[0] = s[0];
}
"""
WARP_REDUCE = WARP_REDUCE_FRAME.replace("LAST_WARP", r"""
        volatile float* v = s;      // BUG: lanes are not in lock-step (Volta and later)
        v[t] += v[t + 32];
        v[t] += v[t + 16];
        v[t] += v[t + 8];
        v[t] += v[t + 4];
        v[t] += v[t + 2];
        v[t] += v[t + 1];""".strip("\n"))
WARP_REDUCE_FIXED = WARP_REDUCE_FRAME.replace("LAST_WARP", r"""
        float v = s[t] + s[t + 32];
        s[t] = v;
        __syncwarp();
        for (int offset = 16; offset > 0; offset /= 2) {
            v += s[t + offset];
            __syncwarp();           // everyone has read before anyone writes
            s[t] = v;
            __syncwarp();
        }""".strip("\n"))


def test_warp_synchronous_reduction_without_syncwarp(emu_build):
    x = np.random.default_rng(9).random(64).astype(np.float32)
    with pytest.raises(KernelRaceError):
        emu_build(WARP_REDUCE).function("reduce64")(x, np.zeros(1, np.float32), grid=1, block=64)
    out = np.zeros(1, np.float32)
    emu_build(WARP_REDUCE_FIXED).function("reduce64")(x, out, grid=1, block=64)
    np.testing.assert_allclose(out[0], x.sum(), rtol=1e-5)
