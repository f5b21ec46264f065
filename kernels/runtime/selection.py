"""Which backend kernels run on: a GPU when one is usable, the CPU emulator otherwise.

``DLK_BACKEND=gpu`` or ``DLK_BACKEND=cpu`` forces one; ``auto`` (the default)
picks the GPU when PyCUDA imports and finds a CUDA device.
"""

from __future__ import annotations

import contextlib
import os

from .backend import Backend
from .emulator import EmulatorBackend
from .errors import KernelError
from .gpu import GPUBackend

ENV_VAR = "DLK_BACKEND"
_current: Backend | None = None


def gpu_usable() -> bool:
    """Whether PyCUDA imports and finds a CUDA device (what ``auto`` picks the GPU for)."""
    try:
        import pycuda.driver as cuda
    except ImportError:
        return False
    try:
        cuda.init()
        return cuda.Device.count() > 0
    except Exception:
        return False


def requested() -> str:
    value = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
    if value not in ("auto", "gpu", "cpu"):
        raise KernelError(f"{ENV_VAR}={value!r}: use 'gpu', 'cpu' or 'auto'")
    return value


def make_backend(name: str) -> Backend:
    if name == "gpu":
        return GPUBackend()
    if name == "cpu":
        return EmulatorBackend()
    raise KernelError(f"unknown backend {name!r}")


def current_backend() -> Backend:
    """The backend for this process, chosen on first use."""
    global _current
    if _current is None:
        choice = requested()
        if choice == "auto":
            choice = "gpu" if gpu_usable() else "cpu"
        _current = make_backend(choice)
    return _current


def use_backend(name: str) -> Backend:
    """Switch this process to backend ``name`` ("gpu" or "cpu")."""
    global _current
    _current = make_backend(name)
    return _current


def on_gpu() -> bool:
    return current_backend().name == "gpu"


@contextlib.contextmanager
def using(backend: Backend):
    """Launch on ``backend`` inside the ``with``, then on the backend chosen before (a profile of the book's
    kernels runs on the emulator on a GPU machine too)."""
    global _current
    before = _current
    _current = backend
    try:
        yield backend
    finally:
        _current = before
