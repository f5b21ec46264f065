"""The grader's own kernels, compiled once per grading process for every sandboxed grading to load.

A grading child on the GPU needs, besides the student's kernel, the grader's
own: the exercise's reference kernel (timed beside the student's), the
timing's blend and comparison (:mod:`kernels.runtime.input_blend`) and the
shared-memory poisoning.  Compiled in each child, they cost nvcc's start-up
several times per exercise, for sources that never change.  So the grading
process (trusted: no student code runs in it) compiles them here once, into a
folder of its own, and every child gets that folder read-only
(``$DLK_KERNEL_IMAGES``); the GPU backend takes an image from it when the
image's name -- a hash of the exact text nvcc would compile, its options, the
architecture and the headers (:func:`kernels.runtime.gpu.image_key`) --
matches, and runs nvcc itself otherwise.  A child can read the folder but
never write it, so nothing a grading leaves behind reaches another.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading

from kernels.runtime.gpu import store_image
from kernels.runtime.input_blend import CUDA_SOURCE
from kernels.runtime.measurement import POISON_SOURCE
from kernels.runtime.module import compile_source

from .exercise import Exercise

_lock = threading.Lock()
_folder: str | None = None
_arch: str | None = None
_done: set[str] = set()


class _ImageBackend:
    """A stand-in backend whose ``compile`` stores the image a GPU would build (nvcc only, no context)."""

    name = "gpu"

    def __init__(self, folder: str, arch: str):
        self.folder, self.arch = folder, arch

    def compile(self, source, source_name, options, include_dirs, signatures):
        store_image(self.folder, source, source_name, options, include_dirs, signatures, self.arch)
        return None


def _device_arch() -> str:
    import pycuda.driver as cuda

    cuda.init()
    major, minor = cuda.Device(0).compute_capability()
    return f"sm_{major}{minor}"


def folder_for(ex: Exercise) -> str | None:
    """The folder of images with every grader kernel ``ex``'s grading compiles; None when they cannot be
    built here (no PyCUDA, no device, a compile error): the child then compiles them itself."""
    global _folder, _arch
    with _lock:
        try:
            if _folder is None:
                _arch = _device_arch()
                _folder = tempfile.mkdtemp(prefix="dlk-kernel-images-")
                os.chmod(_folder, 0o755)  # the sandbox's processes run as a uid of their own: they read, never write
                atexit.register(shutil.rmtree, _folder, True)
            backend = _ImageBackend(_folder, _arch)
            if "runtime" not in _done:
                compile_source(CUDA_SOURCE, "input_blend.cu", backend=backend)
                compile_source(POISON_SOURCE, "poison_shared.cu", backend=backend)
                _done.add("runtime")
            if ex.name not in _done and ex.reference_kernel is not None:
                ex.reference_kernel.compile(backend)  # exactly as the timing compiles it
                _done.add(ex.name)
        except Exception:  # noqa: BLE001 - images only save time: without them the child compiles
            return None
        return _folder
