"""Errors raised by the kernels runtime.

Every error a reader can cause (a kernel that does not compile, a wrong
argument, a bad launch configuration, a kernel that crashes) is one of these,
with a message that names the problem in the reader's terms: the kernel, the
argument, the line of their source.  Nothing deeper in the stack should leak
through as a bare traceback.
"""

from __future__ import annotations


class KernelError(Exception):
    """Base class of every error the kernels runtime raises."""


class KernelCompileError(KernelError):
    """The CUDA C source did not compile.

    ``log`` is the compiler's own output; ``str(error)`` adds the offending
    source lines so that the reader sees their code, not just line numbers.
    """

    def __init__(self, message: str, log: str = "", source_name: str = "kernel.cu"):
        super().__init__(message)
        self.log = log
        self.source_name = source_name


class KernelCompileWarning(UserWarning):
    """The source compiled, and the compiler warned about it: its messages at the reader's lines."""


class KernelNotFoundError(KernelError):
    """The module has no ``__global__`` function of the requested name."""


class KernelArgumentError(KernelError):
    """Wrong number, type, dtype or shape of kernel arguments (found before launch)."""


class LaunchConfigError(KernelError):
    """The grid, block or shared-memory size cannot be launched."""


class LaunchTooLargeError(LaunchConfigError):
    """More threads than the CPU emulator could run within its time limit: refused before the launch starts."""


class KernelLaunchError(KernelError):
    """The kernel failed while running (illegal address, assertion, crash...).

    ``cuda_error`` holds the CUDA error name where there is one
    (``CUDA_ERROR_ILLEGAL_ADDRESS`` and so on).
    """

    def __init__(self, message: str, cuda_error: str | None = None):
        super().__init__(message)
        self.cuda_error = cuda_error


class KernelTimeoutError(KernelLaunchError):
    """The kernel ran longer than the time limit and was stopped."""


# --- Bug classes the CPU emulator detects (see kernels.runtime.emulator) ---


class KernelMemoryError(KernelLaunchError):
    """An out-of-bounds read or write of a global buffer or a shared array."""


class KernelRaceError(KernelLaunchError):
    """The result depends on the order in which threads ran: a data race."""


class BarrierDivergenceError(KernelLaunchError):
    """Some threads of a block wait at a barrier that others never reach."""


class UninitializedSharedMemoryError(KernelLaunchError):
    """The kernel read shared memory that no thread of the block wrote."""


class NoGPUError(KernelError):
    """A GPU is needed (for timing, say) and the current backend is the CPU emulator."""
