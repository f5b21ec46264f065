"""The kernels runtime: compile CUDA C, launch kernels on NumPy arrays, time them.

One small API for the chapters, the exercises and the grader; it runs on a
real GPU through PyCUDA, or on the CPU emulator when there is none
(``DLK_BACKEND=gpu|cpu`` forces either).

Its modules stand in layers, lowest first; a module imports from its own layer
and the layers below it only, never from the project above the runtime
(``tests/test_layers.py`` holds them to this list):

1. ``errors``, ``cuda_errors``, ``diagnostics``, ``host_chunks``: what went wrong, in the reader's terms
   (a CUDA error's name and meaning, a compiler's log at the reader's lines); work on host arrays;
2. ``frontend``, ``signature``, ``cooperative``, ``kernel_symbols``, ``input_blend``: what CUDA C source says
   (the kernels' parameters, a grid-wide sync), which kernel of a compiled image is which, and the source of
   the timing's fresh inputs;
3. ``backend``: the seam between the runtime and a machine (buffers, compiled modules, launch limits);
4. ``gpu``, ``gpu_cooperative``, ``tensor_maps``, ``emulator``: the two machines, PyCUDA on a GPU (with what
   the driver library gives beyond PyCUDA: cooperative launches, TMA tensor maps) and the CPU emulator;
5. ``selection``, ``queueing``, ``streams``: which machine this process uses, and how this thread's
   launches queue (waiting once, on a framework's stream);
6. ``module``: compiling source and launching its kernels on NumPy arrays, arguments checked;
7. ``measurement``, ``timing``: measuring kernels on a GPU (events, L2 flush, peaks), for the book and the grader;
8. ``loader``, ``scratch``, ``sources``, ``versions``: what the topic modules build on (a topic's source
   compiled once, scratch buffers, the record of a kernel version).
"""

from .backend import Backend, DeviceBuffer, DeviceLimits
from .errors import (
    BarrierDivergenceError,
    KernelArgumentError,
    KernelCompileError,
    KernelCompileWarning,
    KernelError,
    KernelLaunchError,
    KernelMemoryError,
    KernelNotFoundError,
    KernelRaceError,
    KernelTimeoutError,
    LaunchConfigError,
    LaunchTooLargeError,
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
    "BarrierDivergenceError", "KernelArgumentError", "KernelCompileError", "KernelCompileWarning", "KernelError",
    "KernelLaunchError", "KernelMemoryError", "KernelNotFoundError", "KernelRaceError",
    "KernelTimeoutError", "LaunchConfigError", "LaunchTooLargeError", "NoGPUError", "UninitializedSharedMemoryError",
    "Kernel", "Module", "blocks_for", "borrow", "compile_source", "empty", "to_device", "zeros",
    "current_backend", "on_gpu", "use_backend", "current_stream", "launching_on", "queued",
    "KernelSignature", "Parameter", "parse_kernels",
]
