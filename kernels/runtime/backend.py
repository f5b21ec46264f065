"""The seam between the kernels runtime and the machines it runs kernels on.

Two backends implement it: ``gpu`` (PyCUDA on a real CUDA device) and
``cpu`` (the emulator, which runs the same CUDA C source on the CPU and checks
it).  The front end (:mod:`kernels.runtime.module`) parses kernel signatures,
validates arguments and launch configurations and converts them; a backend
only ever sees validated, converted values:

* a pointer parameter receives a :class:`DeviceBuffer` of the backend;
* a scalar parameter receives a NumPy scalar of exactly the parameter's type.
"""

from __future__ import annotations

import abc
import contextlib
import math
from dataclasses import dataclass

import numpy as np

from .errors import KernelError
from .signature import KernelSignature

Dim3 = tuple[int, int, int]


@dataclass(frozen=True)
class DeviceLimits:
    """What a launch may ask for on this device."""

    max_threads_per_block: int = 1024
    max_block_dims: Dim3 = (1024, 1024, 64)
    max_grid_dims: Dim3 = (2**31 - 1, 65535, 65535)
    max_shared_bytes_per_block: int = 48 * 1024
    # Opt-in dynamic shared memory beyond 48 KiB (Hopper: 227 KiB).
    max_shared_bytes_optin: int = 48 * 1024
    warp_size: int = 32


class DeviceBuffer:
    """Memory of the backend's device holding one C-contiguous array.

    A plain base class, not an ``abc.ABC``: every launch asks ``isinstance(value, DeviceBuffer)`` of its
    arguments, and an ABC answers that through Python code, a microsecond each time."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def size(self) -> int:
        return math.prod(self.shape)  # Python ints: exact, and a tenth of np.prod's time on every launch

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def get(self) -> np.ndarray:
        """Copy the buffer back to a new host array."""
        raise NotImplementedError

    def set(self, host: np.ndarray) -> None:
        """Overwrite the buffer with ``host`` (same shape and dtype)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} shape={self.shape} dtype={self.dtype}>"


class CompiledModule(abc.ABC):
    """A compiled translation unit: its kernels and its ``__constant__`` / ``__device__`` globals."""

    @abc.abstractmethod
    def launch(
        self,
        signature: KernelSignature,
        args: list,
        grid: Dim3,
        block: Dim3,
        shared_bytes: int,
    ) -> None:
        """Launch one kernel.  May return before it finishes (see ``Backend.synchronize``).

        Inside :func:`kernels.runtime.streams.launching_on` the front end passes ``stream=``, a raw
        stream handle of the device (a framework's stream), as a keyword; a backend whose launches
        finish before they return (the emulator) has every stream order already.

        Raises :class:`~kernels.runtime.errors.KernelLaunchError` (or a subclass)
        when the kernel fails.
        """

    @abc.abstractmethod
    def set_global(self, name: str, host: np.ndarray) -> None:
        """Copy ``host`` into the module's ``__constant__`` or ``__device__`` variable ``name``."""

    @abc.abstractmethod
    def get_global(self, name: str, dtype: np.dtype, count: int) -> np.ndarray:
        """Read ``count`` elements of ``dtype`` from the module's global variable ``name``."""


class Backend(abc.ABC):
    """A machine kernels run on."""

    #: "gpu" or "cpu"
    name: str

    @abc.abstractmethod
    def compile(
        self,
        source: str,
        source_name: str,
        options: tuple[str, ...],
        include_dirs: tuple[str, ...],
        signatures: dict[str, KernelSignature],
    ) -> CompiledModule:
        """Compile CUDA C ``source`` (as written by the reader: no ``extern "C"`` added).

        Line numbers in error messages must be those of ``source`` itself and
        name ``source_name``.  Raises
        :class:`~kernels.runtime.errors.KernelCompileError`.
        """

    @abc.abstractmethod
    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> DeviceBuffer:
        """Allocate an uninitialised buffer."""

    def to_device(self, host: np.ndarray) -> DeviceBuffer:
        buf = self.empty(host.shape, host.dtype)
        buf.set(np.ascontiguousarray(host))
        return buf

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait for all launched work; raise KernelLaunchError if any of it failed."""

    @abc.abstractmethod
    def limits(self) -> DeviceLimits:
        """Launch limits of the device."""

    @abc.abstractmethod
    def describe(self) -> dict:
        """Facts about the device for results files: name, driver, clocks..."""

    def activated(self):
        """A context manager that makes the backend usable from the calling thread (GPU: its CUDA context)."""
        return contextlib.nullcontext(self)

    def borrow(self, ptr: int, shape: tuple[int, ...], dtype: np.dtype) -> DeviceBuffer:
        """Device memory at address ``ptr`` that someone else allocated (a framework's tensor), as a buffer."""
        raise KernelError(f"the {self.name} backend cannot use device memory it did not allocate "
                          f"(only the GPU backend borrows a framework's memory)")
