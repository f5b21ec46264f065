"""The grader's own kernels, compiled once per host for every sandboxed grading to load.

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

The folder is the host's (:data:`HOST_FOLDER` below the grader's cache), so
that the grading processes of a cluster (several per card, started afresh with
each cluster) compile each image once between them, not once each: a grading
process that finds an image there uses it, and one building waits for another
already building (a lock file in the folder).
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import tempfile
import threading
from pathlib import Path

from kernels.runtime.gpu import image_path, store_image
from kernels.runtime.input_blend import CUDA_SOURCE
from kernels.runtime.measurement import POISON_SOURCE
from kernels.runtime.module import compile_source

from .exercise import Exercise
from .host_folders import lent_folder

_lock = threading.Lock()
_folder: str | None = None
_arch: str | None = None
_done: set[str] = set()


class _ImageMissing(Exception):
    """An image the folder does not hold yet."""


class _ImageBackend:
    """A stand-in backend whose ``compile`` stores the image a GPU would build (nvcc only, no context); with
    ``build=False`` it only looks whether the folder holds the image, and raises :class:`_ImageMissing` if not."""

    name = "gpu"

    def __init__(self, folder: str, arch: str, build: bool = True):
        self.folder, self.arch, self.build = folder, arch, build

    def compile(self, source, source_name, options, include_dirs, signatures):
        if self.build:
            store_image(self.folder, source, source_name, options, include_dirs, signatures, self.arch)
        elif not os.path.exists(image_path(self.folder, source, source_name, options, include_dirs, signatures,
                                           self.arch)):
            raise _ImageMissing(source_name)
        return None


def _device_arch() -> str:
    import pycuda.driver as cuda

    cuda.init()
    major, minor = cuda.Device(0).compute_capability()
    return f"sm_{major}{minor}"


#: The folder of the images built on this host, below the grader's cache (each image named by a hash of what
#: built it, so that images of other sources, options or architectures lie side by side).
HOST_FOLDER = "kernel-images-host"


def _own_folder() -> str:
    made = tempfile.mkdtemp(prefix="dlk-kernel-images-")
    os.chmod(made, 0o755)
    atexit.register(shutil.rmtree, made, True)
    return made


def folder_for(ex: Exercise, cache_base: Path | None = None) -> str | None:
    """The folder of images with every grader kernel ``ex``'s grading compiles: the host's below ``cache_base``,
    else (none given, or not usable) one of this process's own; None when they cannot be built here (no
    PyCUDA, no device, a compile error): the child then compiles them itself."""
    global _folder, _arch
    with _lock:
        try:
            if _folder is None:
                _arch = _device_arch()
                host = None
                try:
                    host = lent_folder(cache_base, HOST_FOLDER) if cache_base is not None else None
                except OSError:  # no host cache here: this process's own folder still saves each child nvcc
                    pass
                _folder = str(host) if host is not None else _own_folder()
            runtime = "runtime" not in _done
            reference = ex.reference_kernel is not None and ex.name not in _done
            if runtime or reference:
                try:
                    # Without the lock first: once the host's images are built, the grading processes of a cluster
                    # (32 starting at once on a four-card host) need no turn at the lock to find them.
                    _compile_grader_kernels(ex, runtime, reference, _ImageBackend(_folder, _arch, build=False))
                except _ImageMissing:
                    with open(os.path.join(_folder, ".building"), "a") as guard:
                        fcntl.flock(guard, fcntl.LOCK_EX)  # another grading process building the same images: wait
                        # an image already there is not built again
                        _compile_grader_kernels(ex, runtime, reference, _ImageBackend(_folder, _arch))
                if runtime:
                    _done.add("runtime")
                if reference:
                    _done.add(ex.name)
        except Exception:  # noqa: BLE001 - images only save time: without them the child compiles
            return None
        return _folder


def _compile_grader_kernels(ex: Exercise, runtime: bool, reference: bool, backend: _ImageBackend) -> None:
    """The grader's kernels a grading of ``ex`` compiles, through ``backend``: the timing's blend and the
    shared-memory poisoning (``runtime``), the exercise's reference kernel (``reference``)."""
    if runtime:
        compile_source(CUDA_SOURCE, "input_blend.cu", backend=backend)
        compile_source(POISON_SOURCE, "poison_shared.cu", backend=backend)
    if reference:
        ex.reference_kernel.compile(backend)  # exactly as the timing compiles it
