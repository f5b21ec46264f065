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
