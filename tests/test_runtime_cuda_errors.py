"""A CUDA error reads the same from the GPU backend and from the grader's raw timed launches: its enum name,
what it means for the kernel, and whether the process must restart.  (PyCUDA's exceptions carry CUDA's
description; the GPU suite raises real ones in ``test_gpu_backend.py``.)"""

from kernels.runtime.cuda_errors import cuda_error_name, launch_error, meaning
from kernels.runtime.errors import KernelLaunchError


def test_an_illegal_address_is_named_explained_and_says_the_context_is_lost():
    error = launch_error(RuntimeError("cuCtxSynchronize failed: an illegal memory access was encountered"), "saxpy")
    assert isinstance(error, KernelLaunchError)
    assert error.cuda_error == "CUDA_ERROR_ILLEGAL_ADDRESS"
    text = str(error)
    assert text.startswith("kernel saxpy failed: CUDA_ERROR_ILLEGAL_ADDRESS")
    assert "meaning: a thread read or wrote memory outside every buffer" in text
    assert "restart the Python process" in text


def test_an_error_the_context_survives_is_explained_without_a_restart():
    error = launch_error(RuntimeError("cuLaunchKernel failed: too many resources requested for launch"), None)
    assert error.cuda_error == "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"
    assert str(error).startswith("the last kernel failed")
    assert "use fewer threads per block" in str(error) and "restart" not in str(error)


def test_an_error_not_listed_keeps_cudas_own_words():
    error = launch_error(RuntimeError("cuMemcpyDtoH failed: something new"), "k")
    assert error.cuda_error is None and cuda_error_name(RuntimeError("something new")) is None
    assert str(error) == "kernel k failed: CUDA error (cuMemcpyDtoH failed: something new)"
    assert meaning(None) == "" and meaning("CUDA_ERROR_INVALID_VALUE") == ""
