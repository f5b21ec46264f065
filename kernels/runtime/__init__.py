"""The kernels runtime: compile CUDA C, launch kernels on NumPy arrays, time them.

One small API for the chapters, the exercises and the grader; it runs on a
real GPU through PyCUDA, or on the CPU emulator when there is none
(``DLK_BACKEND=gpu|cpu`` forces either).
"""

from .backend import Backend, DeviceBuffer, DeviceLimits
from .errors import (
    BarrierDivergenceError,
    KernelArgumentError,
    KernelCompileError,
    KernelError,
    KernelLaunchError,
    KernelMemoryError,
    KernelNotFoundError,
    KernelRaceError,
    KernelTimeoutError,
    LaunchConfigError,
    NoGPUError,
    UninitializedSharedMemoryError,
)
from .module import Kernel, Module, blocks_for, borrow, compile_source, empty, to_device, zeros
from .queueing import queued
from .selection import current_backend, on_gpu, use_backend
from .streams import current_stream, launching_on
from .signature import KernelSignature, Parameter, parse_kernels

__all__ = [
    "Backend", "DeviceBuffer", "DeviceLimits",
    "BarrierDivergenceError", "KernelArgumentError", "KernelCompileError", "KernelError",
    "KernelLaunchError", "KernelMemoryError", "KernelNotFoundError", "KernelRaceError",
    "KernelTimeoutError", "LaunchConfigError", "NoGPUError", "UninitializedSharedMemoryError",
    "Kernel", "Module", "blocks_for", "borrow", "compile_source", "empty", "to_device", "zeros",
    "current_backend", "on_gpu", "use_backend", "current_stream", "launching_on", "queued",
    "KernelSignature", "Parameter", "parse_kernels",
]
