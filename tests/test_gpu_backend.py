"""The GPU backend names what went wrong: compile errors at the reader's lines, bad
launches before they happen, CUDA errors by name.  Runs only where a GPU is usable."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu():
    from kernels.runtime import selection

    backend = selection.current_backend()  # the session's: a new one would leave its fixtures' backend behind
    assert backend.name == "gpu", "make test-gpu runs with DLK_BACKEND=gpu"
    return backend


def test_compile_error_quotes_the_readers_line(gpu):
    from kernels.runtime import KernelCompileError, compile_source

    source = "#include <cstdint>\n__global__ void f(float* x) {\n  x[0] = undefined_name;\n}\n"
    with pytest.raises(KernelCompileError) as info:
        compile_source(source, "broken.cu", backend=gpu)
    message = str(info.value)
    assert "broken.cu:3" in message
    assert "x[0] = undefined_name;" in message


def test_a_warning_never_fails_a_compile_and_is_shown_at_its_line():
    """``#pragma once`` (a header's first line, kept when a header becomes a notebook's kernel) makes nvcc warn.
    The compile succeeds even where warnings are errors (``-W error::UserWarning``: PyCUDA passes nvcc's words on
    as a UserWarning), and the warning names the reader's line.  In a fresh
    process, with a source no earlier run compiled (PyCUDA's cache would give the image without nvcc's words)."""
    import uuid

    script = textwrap.dedent(
        f"""
        import warnings
        import numpy as np
        from kernels.runtime import KernelCompileWarning, compile_source, use_backend
        use_backend("gpu")
        source = "#pragma once\\n// {uuid.uuid4()}\\n__global__ void one(float* x) {{ x[threadIdx.x] = 1.0f; }}\\n"
        with warnings.catch_warnings(record=True) as shown:
            module = compile_source(source, "header_kernel.cu")
        x = np.zeros(32, np.float32)
        module.function("one")(x, grid=1, block=32)
        print("RAN", float(x.sum()))
        for w in shown:
            print("WARNING", w.category.__name__, str(w.message).replace("\\n", " | "))
        """
    )
    out = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", script], capture_output=True, text=True, timeout=300)
    assert "RAN 32.0" in out.stdout, out.stdout + out.stderr
    assert "WARNING KernelCompileWarning header_kernel.cu compiled, with warnings (nvcc):" in out.stdout, out.stdout
    assert "header_kernel.cu:1: warning: #pragma once in main file |      1 | #pragma once" in out.stdout, out.stdout


def test_constant_memory_and_launch_roundtrip(gpu):
    from kernels.runtime import compile_source

    module = compile_source(
        "__constant__ float scale[2];\n"
        "__global__ void scaled(const float* x, float* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) y[i] = scale[0] * x[i] + scale[1];\n}\n",
        "scaled.cu",
        backend=gpu,
    )
    module.set_constant("scale", np.array([2.0, 1.0], np.float32))
    x = np.arange(1000, dtype=np.float32)
    y = np.full_like(x, np.nan)
    module.function("scaled")(x, y, x.size, grid=4, block=256)
    np.testing.assert_array_equal(y, 2 * x + 1)


def test_every_plain_scalar_type_reaches_the_kernel_at_its_place_in_the_parameter_block(gpu):
    """Pointers and plain numbers go packed by one format per kernel (PyCUDA's prepared call): each value, of
    every width, lands where nvcc reads it, padding included (a char before a double, a bool before a pointer)."""
    from kernels.runtime import compile_source, to_device
    from kernels.runtime.gpu import packed_format

    module = compile_source(
        "__global__ void spread(char a, double b, unsigned char c, short d, unsigned short e, int f, bool g,\n"
        "                       double* out, unsigned int h, long long i, unsigned long long j, float k) {\n"
        "  out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; out[5] = f; out[6] = g;\n"
        "  out[7] = h; out[8] = (double)i; out[9] = (double)j; out[10] = k;\n}\n",
        "spread.cu", backend=gpu)
    kernel = module.function("spread")
    assert packed_format(kernel.signature) == "bdBhHi?PIlLf"
    values = [-7, 2.5e300, 250, -30000, 65000, -2_000_000_000, True, 4_000_000_000, -(2**62), 2**63 + 2**20, 0.375]
    out = to_device(np.zeros(11))
    for _ in range(2):  # the second launch takes the format made by the first
        kernel(*values[:7], out, *values[7:], grid=1, block=1)
        np.testing.assert_array_equal(out.get(), np.array(values, dtype=np.float64))


def test_dynamic_shared_memory_over_48k(gpu):
    from kernels.runtime import compile_source

    module = compile_source(
        "__global__ void fill(float* out) {\n"
        "  extern __shared__ float s[];\n"
        "  for (int i = threadIdx.x; i < 16384; i += blockDim.x) s[i] = i;\n"
        "  __syncthreads();\n"
        "  out[threadIdx.x] = s[16383 - threadIdx.x];\n}\n",
        "fill.cu",
        backend=gpu,
    )
    out = np.zeros(256, np.float32)
    module.function("fill")(out, grid=1, block=256, shared=16384 * 4)
    np.testing.assert_array_equal(out, 16383 - np.arange(256, dtype=np.float32))


def test_illegal_address_is_named_in_a_fresh_process():
    # An illegal address kills the CUDA context, so it runs in its own process.
    script = textwrap.dedent(
        """
        import numpy as np
        from kernels.runtime import compile_source, KernelLaunchError, use_backend
        use_backend("gpu")
        m = compile_source("__global__ void wild(float* x) { x[threadIdx.x + (1 << 28)] = 1.0f; }", "wild.cu")
        try:
            m.function("wild")(np.zeros(4, np.float32), grid=1, block=32)
        except KernelLaunchError as e:
            print("ERROR", e.cuda_error)
            print("MEANING" if "meaning: " in str(e) and "bounds guard" in str(e) else "UNEXPLAINED")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    # Where a write 1 GiB past the buffer lands decides which of the two the GPU reports
    # (memory that is not there, or the window of shared/local memory); either is named and explained.
    named = ("ERROR CUDA_ERROR_ILLEGAL_ADDRESS" in out.stdout) or ("ERROR CUDA_ERROR_INVALID_ADDRESS_SPACE" in out.stdout)
    assert named and "MEANING" in out.stdout, out.stdout + out.stderr


def test_event_timing_measures_gpu_time_not_python_overhead(gpu):
    # The timed launch is a kernel that waits a known number of clock cycles
    # on the GPU: the measurement must find that duration, not the time Python
    # took to enqueue the launch (tens of microseconds) nor nothing at all.
    from kernels.runtime import timing

    t = timing.time_kernel(lambda: timing.gpu_busy_wait(500.0), repeat=10)
    assert 400 < t.median_ms * 1e3 < 700, t
