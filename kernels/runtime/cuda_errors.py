"""A failed CUDA call in the reader's terms: the error's name, what it means, whether the context survives.

PyCUDA's exceptions carry CUDA's description of an error (``an illegal memory
access was encountered``); the runtime names the error by the driver's enum
(``CUDA_ERROR_ILLEGAL_ADDRESS``), which the grader's verdicts read.  The GPU
backend (:mod:`kernels.runtime.gpu`) and the measuring primitives
(:mod:`kernels.runtime.measurement`, whose raw launches the grader times) both
turn a CUDA error into a :class:`~kernels.runtime.errors.KernelLaunchError`
here, so that a failing kernel reads the same wherever it failed.
"""

from __future__ import annotations

from .errors import KernelLaunchError

# CUDA's descriptions (what PyCUDA puts in its messages) -> the error enum name.
CUDA_ERRORS = {
    "an illegal memory access was encountered": "CUDA_ERROR_ILLEGAL_ADDRESS",
    "unspecified launch failure": "CUDA_ERROR_LAUNCH_FAILED",
    "device-side assert triggered": "CUDA_ERROR_ASSERT",
    "too many resources requested for launch": "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
    "the launch timed out and was terminated": "CUDA_ERROR_LAUNCH_TIMEOUT",
    "misaligned address": "CUDA_ERROR_MISALIGNED_ADDRESS",
    "an illegal instruction was encountered": "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "operation not supported on global/shared address space": "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "invalid program counter": "CUDA_ERROR_INVALID_PC",
    "out of memory": "CUDA_ERROR_OUT_OF_MEMORY",
    "invalid argument": "CUDA_ERROR_INVALID_VALUE",
    "invalid resource handle": "CUDA_ERROR_INVALID_HANDLE",
}
# After these the context is unusable: every later CUDA call fails too.
STICKY = {
    "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ASSERT",
    "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_LAUNCH_TIMEOUT",
}
EXPLAIN = {
    "CUDA_ERROR_ILLEGAL_ADDRESS": "a thread read or wrote memory outside every buffer (check the bounds guard and the index arithmetic)",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE": "a thread used an address far outside every buffer, one that falls in the"
                                        " shared or local memory window (check the bounds guard and the index arithmetic)",
    "CUDA_ERROR_ASSERT": "an assert() in the kernel failed",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "the block needs more registers or shared memory than a multiprocessor has; use fewer threads per block",
    "CUDA_ERROR_MISALIGNED_ADDRESS": "a vector load/store (float4, ...) used an address that is not a multiple of its size",
}


def cuda_error_name(exc: BaseException) -> str | None:
    """The enum name of the CUDA error ``exc`` describes (``CUDA_ERROR_...``), or None for one not listed."""
    text = str(exc).lower()
    for description, name in CUDA_ERRORS.items():
        if description in text:
            return name
    return None


def meaning(name: str | None) -> str:
    """A line saying what error ``name`` means for the kernel (to end a message with), or ``""``."""
    return f"\n  meaning: {EXPLAIN[name]}" if name in EXPLAIN else ""


def launch_error(exc: BaseException, kernel: str | None) -> KernelLaunchError:
    """The runtime's error for the CUDA error ``exc`` of ``kernel`` (None: the last kernel launched)."""
    name = cuda_error_name(exc)
    where = f"kernel {kernel}" if kernel else "the last kernel"
    message = f"{where} failed: {name or 'CUDA error'} ({exc})" + meaning(name)
    if name in STICKY:
        message += "\n  The CUDA context is unusable after this error: restart the Python process (the notebook kernel) to run kernels again."
    return KernelLaunchError(message, cuda_error=name)
