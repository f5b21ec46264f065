"""A kernel that does not compile on the GPU backend is reported at the student's line, whichever of
PyCUDA's passes failed.

PyCUDA runs nvcc twice: a preprocessing pass (for its cache key), then the
compilation.  A missing ``#include`` fails in the first, and PyCUDA hands that
failure's stderr over as undecoded bytes; the message must still be text that
names the line.  Needs nvcc, not a GPU: the messages are nvcc's own.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kernels.runtime.diagnostics import compile_error_message
from kernels.runtime.gpu import compiler_log

SOURCE = '#ifdef __CUDA_ARCH__\n#include "/no/such/header.h"\n#endif\n__global__ void k(float *x) { x[0] = 1.0f; }\n'


class _PyCudaCompileError(Exception):
    """What pycuda.driver.CompileError carries (its attributes, as PyCUDA 2026.1 sets them)."""

    def __init__(self, msg, command_line, stdout=None, stderr=None):
        super().__init__(msg)
        self.msg, self.command_line, self.stdout, self.stderr = msg, command_line, stdout, stderr


@pytest.fixture(scope="module")
def preprocessing_stderr(tmp_path_factory) -> bytes:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    path = tmp_path_factory.mktemp("missing_include") / "kernel.cu"
    path.write_text(SOURCE)
    done = subprocess.run(["nvcc", "-E", "-arch=sm_90", str(path)], capture_output=True, cwd=path.parent)
    assert done.returncode != 0, "nvcc found a header that does not exist"
    return done.stderr


@pytest.mark.parametrize("as_bytes", [True, False], ids=["preprocessing pass (bytes)", "compilation pass (text)"])
def test_a_missing_include_is_reported_at_its_line(preprocessing_stderr, as_bytes):
    stderr = preprocessing_stderr if as_bytes else preprocessing_stderr.decode()
    log = compiler_log(_PyCudaCompileError("nvcc preprocessing of kernel.cu failed", ["nvcc"], stderr=stderr))
    assert isinstance(log, str) and "/no/such/header.h" in log
    message = compile_error_message(log, SOURCE, "kernel.cu", "nvcc")
    assert "kernel.cu did not compile (nvcc)" in message
    assert "line 2" in message or "kernel.cu:2" in message, message


def test_without_stderr_the_exception_s_own_text_is_the_log():
    log = compiler_log(_PyCudaCompileError("nvcc compilation of kernel.cu failed", ["nvcc"], stderr=None))
    assert log == "nvcc compilation of kernel.cu failed"


# ---- a compile succeeds when nvcc succeeds: its warnings are shown at the reader's lines, never raised -----------

PRAGMA_ONCE = "#pragma once\n#include <cstdio>\n__global__ void k(float *x) { x[0] = 1.0f; }\n"


def _nvcc(tmp_path, source: str, name: str) -> subprocess.CompletedProcess:
    from kernels.runtime.gpu import nvcc_source

    (tmp_path / "kernel.cu").write_text(nvcc_source(source, name))
    return subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", "kernel.cubin", "kernel.cu"], cwd=tmp_path,
                          capture_output=True, text=True)


@pytest.fixture
def pragma_once_log(tmp_path) -> str:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    done = _nvcc(tmp_path, PRAGMA_ONCE, "sgemm.cu")
    assert done.returncode == 0 and "#pragma once in main file" in done.stderr, done.stderr
    return done.stdout + done.stderr


def _compile_like_pycuda(log: str):
    """What pycuda.compiler.compile (2026.1) does when nvcc succeeds and prints something: it warns."""
    def compile_image():
        import warnings

        warnings.warn("The CUDA compiler succeeded, but said the following:\n" + log, UserWarning, stacklevel=2)
        return b"image"
    return compile_image


def test_a_warning_is_shown_at_the_readers_line_and_never_raised(pragma_once_log):
    import warnings

    from kernels.runtime import KernelCompileWarning
    from kernels.runtime.gpu import compiler_said, show_compiler_warnings

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("error")  # python -W error: a warning would be raised in the middle of the compile
        image, said = compiler_said(_compile_like_pycuda(pragma_once_log))
        show_compiler_warnings(said, PRAGMA_ONCE, "sgemm.cu")
    assert image == b"image"
    (warning,) = shown
    assert warning.category is KernelCompileWarning
    text = str(warning.message)
    assert text.startswith("sgemm.cu compiled, with warnings (nvcc):")
    assert "sgemm.cu:1: warning: #pragma once in main file\n     1 | #pragma once" in text, text


def test_a_compile_that_said_nothing_shows_nothing():
    import warnings

    from kernels.runtime.gpu import compiler_said, show_compiler_warnings

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        image, said = compiler_said(lambda: b"image")
        show_compiler_warnings(said, PRAGMA_ONCE, "sgemm.cu")
    assert (image, said, shown) == (b"image", "", [])


def test_a_failed_compile_leads_with_its_errors_even_those_at_no_line(tmp_path):
    """ptxas's errors name no line of the reader's file: a warning must not be all the message shows."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    source = "#pragma once\n__global__ void big(float *x) {\n    __shared__ float tile[65536];\n" \
             "    tile[threadIdx.x] = x[threadIdx.x];\n    __syncthreads();\n    x[threadIdx.x] = tile[65535 - threadIdx.x];\n}\n"
    done = _nvcc(tmp_path, source, "big.cu")
    assert done.returncode != 0
    message = compile_error_message(done.stdout + done.stderr, source, "big.cu", "nvcc")
    lines = message.splitlines()
    assert lines[0] == "big.cu did not compile (nvcc):"
    assert lines[1].startswith("ptxas error") and "too much shared data" in lines[1], message
    assert "big.cu:1: warning: #pragma once in main file" in message


def test_errors_come_before_warnings(pragma_once_log):
    log = pragma_once_log + 'sgemm.cu(3): error: identifier "y" is undefined\n'
    message = compile_error_message(log, PRAGMA_ONCE, "sgemm.cu", "nvcc")
    assert message.index('error: identifier "y"') < message.index("warning: #pragma once"), message
