"""Launches PyCUDA cannot make, through the CUDA driver library itself: cooperative ones, and
launches on a stream PyCUDA did not create.

A kernel that calls ``this_grid().sync()`` must be launched with ``cuLaunchCooperativeKernel``
(every block resident at once); launched the ordinary way its grid.sync() is undefined and may
hang.  PyCUDA (2026.1) launches with ``cuLaunchKernel`` only, and exposes neither the cooperative
launch nor a function's ``CUfunction`` handle.  So a module that uses ``this_grid()`` is loaded
from its cubin here, with ``ctypes`` calls into ``libcuda`` in the context PyCUDA made current,
and all of its kernels, globals and occupancy queries go through this module.

PyCUDA also launches only on streams it created itself (its ``Stream`` cannot wrap a handle it
did not make), while an op inside a framework must queue its kernels on the framework's stream
(``torch.cuda.current_stream().cuda_stream``, a raw ``CUstream``).  A module launched on such a
stream is loaded here a second time from the same cubin, and :meth:`DriverFunction.launch_on_stream`
queues its kernels with ``cuLaunchKernel`` on the handle as it is.
"""

from __future__ import annotations

import ctypes
import functools

from .errors import KernelError


class DriverError(KernelError):
    """A CUDA driver call failed; ``name`` is the error's name (``CUDA_ERROR_...``)."""

    def __init__(self, what: str, name: str):
        super().__init__(f"{what} failed: {name}")
        self.name = name


@functools.lru_cache(maxsize=1)
def driver_library():
    lib = ctypes.CDLL("libcuda.so.1")
    p, i, u, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t
    lib.cuModuleLoadData.argtypes = [ctypes.POINTER(p), ctypes.c_char_p]
    lib.cuModuleUnload.argtypes = [p]
    lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(p), p, ctypes.c_char_p]
    lib.cuModuleGetGlobal_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(size), p, ctypes.c_char_p]
    lib.cuOccupancyMaxActiveBlocksPerMultiprocessor.argtypes = [ctypes.POINTER(i), p, i, size]
    lib.cuFuncSetAttribute.argtypes = [p, i, i]
    lib.cuLaunchCooperativeKernel.argtypes = [p, u, u, u, u, u, u, u, p, ctypes.POINTER(p)]
    lib.cuLaunchKernel.argtypes = [p, u, u, u, u, u, u, u, p, ctypes.POINTER(p), ctypes.POINTER(p)]
    lib.cuGetErrorName.argtypes = [i, ctypes.POINTER(ctypes.c_char_p)]
    return lib


def check_driver_call(status: int, what: str) -> None:
    if status != 0:
        name = ctypes.c_char_p()
        driver_library().cuGetErrorName(status, ctypes.byref(name))
        raise DriverError(what, name.value.decode() if name.value else f"CUresult {status}")


_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


def _parameters(arguments: list[bytes]):
    """``kernelParams`` of a launch: a pointer to each argument's bytes (its value, or a pointer's address).

    Returns the array and the buffers it points into (kept alive until the launch has copied them)."""
    buffers = [ctypes.create_string_buffer(data, max(1, len(data))) for data in arguments]
    params = (ctypes.c_void_p * max(1, len(buffers)))(*[ctypes.cast(b, ctypes.c_void_p) for b in buffers])
    return params, buffers


class DriverFunction:
    def __init__(self, handle: ctypes.c_void_p, name: str):
        self.handle = handle
        self.name = name

    def max_active_blocks_per_multiprocessor(self, threads: int, shared_bytes: int) -> int:
        count = ctypes.c_int()
        check_driver_call(driver_library().cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(count), self.handle, threads, shared_bytes), "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        return count.value

    def set_max_dynamic_shared(self, shared_bytes: int) -> None:
        check_driver_call(driver_library().cuFuncSetAttribute(self.handle, _MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_bytes),
                          "cuFuncSetAttribute")

    def launch(self, grid, block, shared_bytes: int, arguments: list[bytes], stream: int = 0) -> None:
        """A cooperative launch; ``arguments``: each parameter's bytes (its value, or a pointer's address)."""
        params, _buffers = _parameters(arguments)
        check_driver_call(driver_library().cuLaunchCooperativeKernel(
            self.handle, *grid, *block, shared_bytes, stream or None, params), "cuLaunchCooperativeKernel")

    def launch_on_stream(self, grid, block, shared_bytes: int, arguments: list[bytes], stream: int) -> None:
        """An ordinary launch queued on ``stream``, a raw ``CUstream`` handle (0: the legacy default stream)."""
        params, _buffers = _parameters(arguments)
        check_driver_call(driver_library().cuLaunchKernel(
            self.handle, *grid, *block, shared_bytes, stream or None, params, None), "cuLaunchKernel")


class DriverModule:
    """A cubin loaded through the driver: ``get_function`` and ``get_global`` as PyCUDA's module has them."""

    def __init__(self, image: bytes):
        self.handle = ctypes.c_void_p()
        check_driver_call(driver_library().cuModuleLoadData(ctypes.byref(self.handle), image), "cuModuleLoadData")

    def get_function(self, name: str) -> DriverFunction:
        function = ctypes.c_void_p()
        check_driver_call(driver_library().cuModuleGetFunction(ctypes.byref(function), self.handle, name.encode()),
                          f"finding kernel {name}")
        return DriverFunction(function, name)

    def get_global(self, name: str) -> tuple[int, int]:
        address, size = ctypes.c_uint64(), ctypes.c_size_t()
        check_driver_call(driver_library().cuModuleGetGlobal_v2(
            ctypes.byref(address), ctypes.byref(size), self.handle, name.encode()), f"finding variable {name}")
        return address.value, size.value

