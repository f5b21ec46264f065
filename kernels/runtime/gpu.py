"""The GPU backend: PyCUDA on a real CUDA device.

Source is compiled by nvcc through PyCUDA's ``compile`` (which caches images by
source and options), or its image is taken from the grader's folder of images
(``$DLK_KERNEL_IMAGES``, see :func:`stored_image`).  The reader's source is compiled
as written, as C++, after a ``#line`` directive so that compiler messages give the
reader's own line numbers; its kernels are found in the image by the names C++ gives
them (see :mod:`.kernel_symbols`), so plain kernels, kernels in namespaces, template
instances and explicit instantiations are all asked for by their source names.  A
compile succeeds when nvcc succeeds: what nvcc says then is shown as a
:class:`~kernels.runtime.errors.KernelCompileWarning`, at the reader's lines.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import struct
import time
import warnings

import numpy as np

from .backend import Backend, CompiledModule, DeviceBuffer, DeviceLimits, Dim3
from .cuda_errors import cuda_error_name, launch_error, meaning
from .diagnostics import compile_error_message, compile_warning_message
from .errors import (KernelCompileError, KernelCompileWarning, KernelError, KernelLaunchError, KernelNotFoundError,
                     KernelTimeoutError, LaunchConfigError)
from .cooperative import check_co_resident, grid_sync_line
from .gpu_cooperative import DriverError, DriverModule
from .kernel_symbols import kernel_symbols
from .signature import KernelSignature

try:  # PyCUDA is only needed on a machine with a GPU.
    import pycuda.driver as cuda
except ImportError:  # pragma: no cover - exercised on machines without PyCUDA
    cuda = None


def nvcc_source(source: str, source_name: str) -> str:
    """The text nvcc compiles for ``source``: the source as written, after a ``#line`` directive that
    names the reader's file (nvcc's messages then give its own lines)."""
    escaped = source_name.replace("\\", "\\\\").replace('"', '\\"')
    return f'#line 1 "{escaped}"\n' + source + ("" if source.endswith("\n") else "\n")


#: A folder of compiled kernel images, read-only for whoever compiles: the grader fills it with its own
#: kernels (references, the timing's blends) before a grading starts, so that the grading's
#: sandboxed process loads them instead of running nvcc for each (see ``autograder.kernel_images``).
IMAGES_VARIABLE = "DLK_KERNEL_IMAGES"
_HEADER_SUFFIXES = (".cuh", ".h", ".hpp")


def _image_source(source: str, source_name: str, signatures) -> tuple[str, list, int]:
    """(the text nvcc compiles, the template instances asked for, the line of a grid sync or 0)."""
    text = nvcc_source(source, source_name)
    instances = _instantiations(signatures)
    if instances:
        text += _instantiating(signatures, instances)
    return text, instances, grid_sync_line(source)


def image_key(text: str, options, include_dirs, arch: str) -> str:
    """A name for the image of ``text``: a hash of the text, the options, the architecture, and every
    header in the include folders (a header's change changes the name)."""
    import hashlib

    digest = hashlib.sha256()
    for part in (text, "\0".join(options), arch):
        digest.update(part.encode() + b"\1")
    for folder in sorted(str(d) for d in include_dirs):
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(_HEADER_SUFFIXES))
        except OSError:
            continue
        for name in names:
            digest.update(name.encode() + b"\2")
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(f.read() + b"\3")
    return digest.hexdigest()


def stored_image(text: str, options, include_dirs, arch: str) -> bytes | None:
    """The image the grader stored for this text, if its folder (``$DLK_KERNEL_IMAGES``) has one."""
    folder = os.environ.get(IMAGES_VARIABLE)
    if not folder:
        return None
    try:
        with open(os.path.join(folder, image_key(text, options, include_dirs, arch) + ".cubin"), "rb") as f:
            return f.read()
    except OSError:
        return None


def compiler_log(exc) -> str:
    """The compiler's messages from PyCUDA's CompileError, as text: PyCUDA hands a failed preprocessing
    pass (a missing #include fails there) its stderr as undecoded bytes."""
    log = getattr(exc, "stderr", None) or str(exc)
    return log.decode("utf-8", "replace") if isinstance(log, (bytes, bytearray)) else str(log)


#: A source compiled with ``-DDLK_ARCH_SPECIFIC=1`` uses instructions of its device's own architecture
#: only (Hopper's warpgroup MMA, wgmma, exists for sm_90a, not for the sm_90 that later GPUs also run):
#: its image is built for that exact target.
ARCH_SPECIFIC_OPTION = "-DDLK_ARCH_SPECIFIC=1"


def compile_target(arch: str, options) -> str:
    """The nvcc target for a device of ``arch`` (``sm_90``) and these options (``sm_90a`` when arch-specific)."""
    return arch + "a" if ARCH_SPECIFIC_OPTION in options else arch


def _compile_image(text: str, options, include_dirs, arch: str) -> bytes:
    from pycuda.compiler import compile as compile_to_cubin

    return compile_to_cubin(text, options=list(options), no_extern_c=True, include_dirs=list(include_dirs),
                            arch=compile_target(arch, options))


#: how PyCUDA passes on what nvcc printed when it succeeded (as a Python warning)
_COMPILER_SAID = "The CUDA compiler succeeded, but said the following:"
#: PyCUDA's note, on each compile, that its cache had no image for the source yet: not about the source
_CACHE_MISS = "Could not read cache file"


def compiler_said(compile_image):
    """``(compile_image(), what the compiler said though it succeeded)``.

    PyCUDA hands nvcc's output of a successful compile over as a ``UserWarning`` (and a type demotion nvcc
    reported as another); they are caught here whatever the warning filters say (under ``-W error`` they
    would be raised in the middle of the compile) and returned as text, so that a warning never fails a
    compile.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        image = compile_image()
    said = []
    for w in caught:
        text = str(w.message)
        if text.startswith(_COMPILER_SAID):
            said.append(text[len(_COMPILER_SAID):].strip("\n"))
        elif not text.startswith(_CACHE_MISS):
            said.append(text)
    return image, "\n".join(said)


def show_compiler_warnings(log: str, source: str, source_name: str, shown: set | None = None) -> None:
    """nvcc's warnings about a source that compiled, shown as a :class:`KernelCompileWarning` at the reader's
    lines, once per source and warnings (``shown`` holds those shown: a module is compiled again for each
    template instance asked for); shown, never raised: an "error" warning filter does not apply (nvcc's own
    ``-w`` silences them)."""
    if not log.strip() or (shown is not None and (source, log) in shown):
        return
    if shown is not None:
        shown.add((source, log))
    with warnings.catch_warnings():
        warnings.simplefilter("always", KernelCompileWarning)
        warnings.warn(compile_warning_message(log, source, source_name, "nvcc"), KernelCompileWarning, stacklevel=4)


def image_path(folder: str, source: str, source_name: str, options, include_dirs, signatures, arch: str) -> str:
    """Where :func:`store_image` keeps the image of ``source`` for a device of ``arch``."""
    text, _, _ = _image_source(source, source_name, signatures)
    return os.path.join(folder, image_key(text, options, include_dirs, arch) + ".cubin")


def store_image(folder: str, source: str, source_name: str, options, include_dirs, signatures, arch: str) -> str:
    """Compile ``source`` as :meth:`GPUBackend.compile` would on a device of ``arch`` and keep its image in
    ``folder`` (no GPU context needed: nvcc only); returns the image's path."""
    path = image_path(folder, source, source_name, options, include_dirs, signatures, arch)
    if not os.path.exists(path):
        text, _, _ = _image_source(source, source_name, signatures)
        image = _compile_image(text, options, include_dirs, arch)
        partial = f"{path}.{os.getpid()}.partial"
        with open(partial, "wb") as f:
            f.write(image)
        os.replace(partial, path)
    return path


class _DeviceMemory(DeviceBuffer):
    """Copies to and from device memory at :attr:`ptr` (``shape`` elements of ``dtype``)."""

    def get(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        if self.nbytes:
            # as bytes: NumPy cannot export dtypes such as ml_dtypes' bfloat16 through the buffer protocol
            cuda.memcpy_dtoh(out.reshape(-1).view(np.uint8), self.ptr)
        return out

    def set(self, host: np.ndarray) -> None:
        host = np.ascontiguousarray(host, dtype=self.dtype)
        if host.size != self.size:
            raise KernelError(f"cannot copy {host.size} values into a buffer of {self.size}")
        if self.nbytes:
            cuda.memcpy_htod(self.ptr, host.reshape(-1).view(np.uint8))


class BorrowedBuffer(_DeviceMemory):
    """Device memory the runtime did not allocate (a framework's tensor): its address, shape and dtype.

    The owner keeps the memory alive for as long as kernels use it; the runtime never frees it.
    """

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: np.dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self._ptr = int(ptr)

    @property
    def ptr(self) -> int:
        return self._ptr


class GPUBuffer(_DeviceMemory):
    def __init__(self, shape: tuple[int, ...], dtype: np.dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.allocation = cuda.mem_alloc(max(1, self.nbytes))

    @property
    def ptr(self) -> int:
        return int(self.allocation)


class GPUBufferView(BorrowedBuffer):
    """``shape`` elements of ``base`` from element ``start`` on, passed to a kernel as an array of its own.

    The autograder hands a kernel such a view of a larger allocation, so that
    guard words lie on both sides of what the kernel was given (a write before
    the start or past the end lands in them and is seen after the launch).
    """

    def __init__(self, base: GPUBuffer, start: int, shape: tuple[int, ...]):
        size = int(np.prod(shape))
        if start < 0 or start + size > base.size:
            raise KernelError(f"a view of elements [{start}, {start + size}) of a buffer of {base.size}")
        super().__init__(base.ptr + start * base.dtype.itemsize, shape, base.dtype)
        self.base = base  # keeps the allocation alive as long as the view


def _instantiations(signatures) -> list[str]:
    """Template kernels asked for by name (``sgemm<64, 64, 8>``)."""
    return [name for name in signatures if "<" in name]


def _instantiating(signatures, names: list[str]) -> str:
    """Host code that takes the address of each template kernel asked for by name (named with its
    namespaces, after the reader's last line): nvcc compiles the device code of every kernel host code
    refers to, as for a launch.  An implicit instantiation, unlike an explicit one, may follow the reader's
    own explicit instantiation of the same kernel; the function is not static, so that nvcc does not warn
    that it is unused."""
    qualified = [getattr(signatures[name], "qualified_name", name) for name in names]
    uses = "".join(f" (void)&::{q};" for q in qualified)
    return f"\nvoid __dlk_instances_used_by_the_runtime() {{{uses} }}\n"


def argument_bytes(param, value) -> bytes:
    """One kernel argument as the bytes of its parameter slot (pointers and references: the address)."""
    if param.is_pointer or param.is_reference:
        return struct.pack("<Q", int(value))
    return np.asarray(value).tobytes()


def argument_block(params, values) -> bytes:
    """The kernel's parameter block: each argument at the next multiple of its alignment."""
    block = bytearray()
    for param, value in zip(params, values):
        data = argument_bytes(param, value)
        align = max(1, param.align or len(data))
        block += b"\0" * (-len(block) % align)
        block += data
    return bytes(block)


#: Scalar types PyCUDA packs itself (its struct module takes neither float16 nor bfloat16).
_PACKED_KINDS = set("bBhHiIlLqQfd?")


def packed_format(signature: KernelSignature) -> str | None:
    """The parameter block of ``signature`` as a struct format PyCUDA packs (``P`` for a pointer, the
    scalar's own code for a number), where every parameter is a pointer or a plain number; else None
    (a struct or vector taken by value, a ``const T&``, a 16-bit float: those take the general path)."""
    codes = []
    for param in signature.params:
        if param.is_pointer:
            codes.append("P")
        elif param.record is None and not param.is_reference and param.dtype.char in _PACKED_KINDS:
            codes.append(param.dtype.char)
        else:
            return None
    return "".join(codes)


#: what looking a kernel up in a loaded module may raise (CUDA_ERROR_NOT_FOUND: the image has no such name)
_LOOKUP_ERRORS = (DriverError,) + ((cuda.LogicError,) if cuda is not None else ())


class GPUModule(CompiledModule):
    def __init__(self, backend: "GPUBackend", module, source_name: str, aliases: dict[str, str] | None = None,
                 grid_sync_line: int = 0, cubin=None):
        self.backend = backend
        self.module = module  # PyCUDA's, or a DriverModule where the source uses this_grid()
        self.grid_sync_line = grid_sync_line
        self.source_name = source_name
        self.aliases = dict(aliases or {})  # a kernel's source name -> its name in the image (mangled)
        self._cubin = cubin  # () -> the module's cubin, for loading it through the driver (stream launches)
        self._driver_module: DriverModule | None = module if isinstance(module, DriverModule) else None
        self._functions: dict[str, object] = {}
        self._driver_functions: dict[str, object] = {}
        self._globals_set: dict[str, np.ndarray] = {}  # what set_global wrote, for a driver copy loaded later
        self._last_on_copy = False  # whether the last launch ran the driver copy (get_global reads that one)
        self._references: list = []
        # id(signature) -> (signature, PyCUDA function prepared with its argument format, or None)
        self._prepared: dict[int, tuple] = {}

    def _load(self, module, name: str):
        """Kernel ``name`` of a loaded ``module``, looked up by its name in the image (its C++ mangled name,
        see :mod:`.kernel_symbols`; a module made without the names looks up ``name`` itself)."""
        try:
            return module.get_function(self.aliases.get(name, name))
        except _LOOKUP_ERRORS as exc:
            if getattr(exc, "name", None) != "CUDA_ERROR_NOT_FOUND" and "not found" not in str(exc):
                raise
            raise KernelNotFoundError(f"{self.source_name}: nvcc's image has no kernel '{name}' (kernels found in "
                                      f"it: {', '.join(self.aliases) or 'none'})") from None

    def kernel_function(self, name: str):
        """Kernel ``name`` as the loaded module holds it (PyCUDA's function, or the driver's where the source uses
        ``this_grid()``): what this module's launches call, and what a raw launch calls with no checks and no
        copies (:meth:`~kernels.runtime.measurement.GpuMeasurement.raw_kernel`)."""
        if name not in self._functions:
            self._functions[name] = self._load(self.module, name)
        return self._functions[name]

    def _driver_function(self, name: str):
        """The kernel as a driver function, which launches on any stream: from this module if it was loaded
        through the driver, else from a second copy of the same cubin loaded through the driver (the first
        time it is asked for).  The copy has __constant__ and __device__ variables of its own:
        :meth:`set_global` writes both copies, :meth:`get_global` reads the one the last launch ran."""
        if self._driver_module is None:
            self._driver_module = DriverModule(self._cubin())
            for global_name, host in self._globals_set.items():
                self._set_driver_global(global_name, host)
        if name not in self._driver_functions:
            self._driver_functions[name] = self._load(self._driver_module, name)
        return self._driver_functions[name]

    def launch(self, signature: KernelSignature, args: list, grid: Dim3, block: Dim3, shared_bytes: int,
               stream: int | None = None) -> None:
        """Launch on PyCUDA's default stream, or on ``stream`` (a raw ``CUstream`` handle: a framework's)."""
        if self.grid_sync_line:
            self._launch_cooperative(signature, args, grid, block, shared_bytes, stream or 0)
            return
        if stream:  # PyCUDA launches only on streams it created: this one goes through the driver
            self._launch_on_stream(signature, args, grid, block, shared_bytes, stream)
            return
        function = self.kernel_function(signature.name)
        if shared_bytes > self.backend.limits().max_shared_bytes_per_block:
            function.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_bytes)
        prepared = self._prepared_function(signature)
        if prepared is not None and all(isinstance(a, (_DeviceMemory, np.generic)) for a in args):
            # Pointers and plain numbers: packed by one format made once per kernel (PyCUDA's prepared call).
            # A launch of a small layer takes a few microseconds on the GPU: Python's share decides its time.
            values = [a.ptr if isinstance(a, _DeviceMemory) else a for a in args]
            self._references = []
            self._call(signature, grid, block, shared_bytes,
                       lambda: prepared.prepared_call(grid, block, *values, shared_size=shared_bytes))
            return
        # a half or bfloat16 scalar goes as its 16 bits (PyCUDA packs arguments with struct, which takes
        # neither: "bad char in struct format");
        # a const T& parameter is an address in the kernel's ABI: that of a device copy of the value
        converted = []
        references = []
        for param, a in zip(signature.params, args):
            if isinstance(a, GPUBuffer):
                converted.append(a.allocation)
            elif isinstance(a, BorrowedBuffer):
                converted.append(np.uintp(a.ptr))
            elif param.is_reference:
                copy = cuda.mem_alloc(max(1, np.asarray(a).nbytes))
                cuda.memcpy_htod(copy, np.ascontiguousarray(np.asarray(a)).reshape(-1).view(np.uint8))
                references.append(copy)
                converted.append(copy)
            elif isinstance(a, np.generic) and a.dtype.name in ("bfloat16", "float16"):
                converted.append(a.view(np.uint16))
            else:
                converted.append(a)
        self._references = references  # freed with the next launch (freeing waits for the device)
        if any(p.record is not None and not p.is_reference for p in signature.params):
            # a struct or vector type by value: PyCUDA packs a NumPy record unaligned, so the whole
            # parameter block is laid out here, each argument at its alignment as nvcc places it
            converted = [np.void(argument_block(signature.params, converted))]
        self._call(signature, grid, block, shared_bytes,
                   lambda: function(*converted, grid=grid, block=block, shared=shared_bytes))

    def _prepared_function(self, signature: KernelSignature):
        """The kernel's PyCUDA function prepared with its argument format, or None where it has none."""
        entry = self._prepared.get(id(signature))
        if entry is None or entry[0] is not signature:
            fmt = packed_format(signature)
            entry = (signature, None if fmt is None else self.kernel_function(signature.name).prepare(fmt))
            self._prepared[id(signature)] = entry
        return entry[1]

    def _call(self, signature: KernelSignature, grid: Dim3, block: Dim3, shared_bytes: int, start) -> None:
        """Run ``start`` (which queues the launch), naming what went wrong if it could not."""
        try:
            start()
        except cuda.Error as exc:
            name = cuda_error_name(exc)
            if name in ("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "CUDA_ERROR_INVALID_VALUE"):
                raise LaunchConfigError(
                    f"{signature.name} could not be launched with grid {grid}, block {block}, "
                    f"{shared_bytes} bytes shared: {name} ({exc})" + meaning(name)
                ) from None
            raise launch_error(exc, signature.name) from None
        self._last_on_copy = False
        self.backend.last_kernel = signature.name

    def _argument_bytes(self, signature: KernelSignature, args: list) -> list[bytes]:
        """Each argument as the bytes of its parameter slot, for a launch through the driver."""
        arguments, references = [], []
        for param, a in zip(signature.params, args):
            if isinstance(a, (GPUBuffer, BorrowedBuffer)):
                arguments.append(argument_bytes(param, a.ptr))
            elif param.is_reference:
                copy = cuda.mem_alloc(max(1, np.asarray(a).nbytes))
                cuda.memcpy_htod(copy, np.ascontiguousarray(np.asarray(a)).reshape(-1).view(np.uint8))
                references.append(copy)
                arguments.append(argument_bytes(param, int(copy)))
            else:
                arguments.append(argument_bytes(param, a))
        self._references = references
        return arguments

    def _launch_on_stream(self, signature: KernelSignature, args: list, grid: Dim3, block: Dim3, shared_bytes: int,
                          stream: int) -> None:
        """An ordinary launch queued on ``stream``, through the driver (``cuLaunchKernel``)."""
        name = signature.name
        try:
            function = self._driver_function(name)
            if shared_bytes > self.backend.limits().max_shared_bytes_per_block:
                function.set_max_dynamic_shared(shared_bytes)
            function.launch_on_stream(grid, block, shared_bytes, self._argument_bytes(signature, args), stream)
            self._last_on_copy = self._driver_module is not self.module
        except DriverError as exc:
            if exc.name in ("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "CUDA_ERROR_INVALID_VALUE"):
                raise LaunchConfigError(f"{name} could not be launched with grid {grid}, block {block}, "
                                        f"{shared_bytes} bytes shared on stream {stream:#x}: {exc.name}") from None
            if exc.name in ("CUDA_ERROR_INVALID_HANDLE", "CUDA_ERROR_INVALID_CONTEXT"):
                raise KernelLaunchError(
                    f"kernel {name} could not be queued on stream {stream:#x}: {exc.name} (a stream of another "
                    f"device or context, or one that was destroyed; the kernels run in the primary context of "
                    f"the {self.backend.device.name()})", cuda_error=exc.name) from None
            raise KernelLaunchError(f"kernel {name} failed: {exc}", cuda_error=exc.name) from None
        self.backend.last_kernel = name

    def _launch_cooperative(self, signature: KernelSignature, args: list, grid: Dim3, block: Dim3, shared_bytes: int,
                            stream: int = 0) -> None:
        """A cooperative launch (the module uses this_grid()): every block resident, checked first."""
        name = signature.name
        try:
            function = self.kernel_function(name)
            if shared_bytes > self.backend.limits().max_shared_bytes_per_block:
                function.set_max_dynamic_shared(shared_bytes)
            threads = block[0] * block[1] * block[2]
            per_multiprocessor = function.max_active_blocks_per_multiprocessor(threads, shared_bytes)
        except DriverError as exc:
            raise KernelLaunchError(f"{name} could not be prepared for a cooperative launch: {exc}", cuda_error=exc.name) from None
        multiprocessors = self.backend.device.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
        check_co_resident(name, self.grid_sync_line, grid, block, per_multiprocessor * multiprocessors,
                          f"the {self.backend.device.name()}")
        arguments = self._argument_bytes(signature, args)
        try:
            function.launch(grid, block, shared_bytes, arguments, stream)
        except DriverError as exc:
            if exc.name in ("CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
                            "CUDA_ERROR_INVALID_VALUE"):
                raise LaunchConfigError(f"{name} could not be launched cooperatively with grid {grid}, block {block}, "
                                        f"{shared_bytes} bytes shared: {exc.name}") from None
            raise KernelLaunchError(f"kernel {name} failed: {exc}", cuda_error=exc.name) from None
        self.backend.last_kernel = name

    def _global(self, name: str, module=None):
        try:
            return (module or self.module).get_global(name)
        except (cuda.Error, DriverError):
            raise KernelError(f"{self.source_name} has no __constant__ or __device__ variable '{name}'") from None

    def _set_driver_global(self, name: str, host: np.ndarray) -> None:
        ptr, _ = self._global(name, self._driver_module)
        cuda.memcpy_htod(ptr, host)

    def set_global(self, name: str, host: np.ndarray) -> None:
        ptr, size = self._global(name)
        if host.nbytes > size:
            raise KernelError(f"'{name}' holds {size} bytes; {host.nbytes} bytes given")
        cuda.memcpy_htod(ptr, host)
        if self._driver_module is not None and self._driver_module is not self.module:
            self._set_driver_global(name, host)
        self._globals_set[name] = np.array(host, copy=True)

    def get_global(self, name: str, dtype: np.dtype, count: int) -> np.ndarray:
        ptr, size = self._global(name, self._driver_module if self._last_on_copy else None)
        out = np.empty(count, dtype)
        if out.nbytes > size:
            raise KernelError(f"'{name}' holds {size} bytes; {out.nbytes} bytes asked for")
        cuda.memcpy_dtoh(out, ptr)
        return out


class GPUBackend(Backend):
    """Kernels on the first CUDA device, through PyCUDA."""

    name = "gpu"

    def __init__(self, device: int = 0):
        if cuda is None:
            raise KernelError("the GPU backend needs PyCUDA (pip install pycuda); use DLK_BACKEND=cpu for the emulator")
        cuda.init()
        if cuda.Device.count() == 0:
            raise KernelError("no CUDA device found; use DLK_BACKEND=cpu for the emulator")
        self.device = cuda.Device(device)
        self.ordinal = int(device)  # the device's index, as CUDA (and so torch: cuda:<ordinal>) numbers it
        # The primary context is the one the CUDA runtime (and so torch and
        # cupy) uses too: peers measured in the same process share it.
        self.context = self.device.retain_primary_context()
        self.context.push()
        atexit.register(self._close)
        self.last_kernel: str | None = None
        #: Seconds synchronize() waits for a kernel before calling it hung.
        self.timeout_s = float(os.environ.get("DLK_GPU_TIMEOUT", "120"))
        self._limits: DeviceLimits | None = None
        self._compiler_warnings_shown: set[tuple[str, str]] = set()  # (source, nvcc's warnings) shown once

    def _close(self) -> None:
        try:
            self.context.pop()
        except Exception:
            pass

    @property
    def arch(self) -> str:
        major, minor = self.device.compute_capability()
        return f"sm_{major}{minor}"

    def compile(self, source, source_name, options, include_dirs, signatures) -> GPUModule:
        text, _instances, cooperative_line = _image_source(source, source_name, signatures)
        try:
            image = stored_image(text, options, include_dirs, self.arch)
            if image is None:
                image, said = compiler_said(lambda: _compile_image(text, options, include_dirs, self.arch))
                show_compiler_warnings(said, source, source_name, self._compiler_warnings_shown)
        except cuda.CompileError as exc:
            log = compiler_log(exc)
            raise KernelCompileError(compile_error_message(log, source, source_name, "nvcc"), log=log, source_name=source_name) from None
        module = DriverModule(image) if cooperative_line else cuda.module_from_buffer(image)
        return GPUModule(self, module, source_name, kernel_symbols(image, signatures.values()), cooperative_line,
                         lambda: image)

    @contextlib.contextmanager
    def activated(self):
        """The backend's context (the device's primary context) current on the calling thread for the block.

        The backend pushed it on the thread that made the backend; a framework calls ops from threads of
        its own too (PyTorch runs backward passes on a thread per device), and PyCUDA keeps a stack of
        contexts per thread, so an op running the book's kernels activates the context where it runs.
        """
        self.context.push()
        try:
            yield self
        finally:
            cuda.Context.pop()

    def borrow(self, ptr: int, shape, dtype) -> BorrowedBuffer:
        return BorrowedBuffer(ptr, shape, dtype)

    def empty(self, shape, dtype) -> GPUBuffer:
        try:
            return GPUBuffer(shape, dtype)
        except cuda.MemoryError as exc:
            raise KernelError(f"cannot allocate {np.prod(shape) * np.dtype(dtype).itemsize} bytes on the GPU: {exc}") from None

    def synchronize(self) -> None:
        """Wait for the device, at most ``timeout_s`` seconds, naming any failure."""
        done = cuda.Event()
        try:
            done.record()
            deadline = time.monotonic() + self.timeout_s
            pause = 0.0
            while not done.query():
                if time.monotonic() > deadline:
                    raise KernelTimeoutError(
                        f"kernel {self.last_kernel or '?'} is still running after {self.timeout_s:.0f} s: "
                        f"probably an endless loop (a loop bound or a barrier that is never reached). "
                        f"A running kernel cannot be stopped from Python: restart the notebook kernel.",
                        cuda_error="timeout",
                    )
                time.sleep(pause)
                pause = min(0.01, pause + 0.0002)
            cuda.Context.synchronize()
        except cuda.Error as exc:
            raise launch_error(exc, self.last_kernel) from None

    def limits(self) -> DeviceLimits:
        if self._limits is None:
            a = cuda.device_attribute
            d = self.device
            self._limits = DeviceLimits(
                max_threads_per_block=d.get_attribute(a.MAX_THREADS_PER_BLOCK),
                max_block_dims=(d.get_attribute(a.MAX_BLOCK_DIM_X), d.get_attribute(a.MAX_BLOCK_DIM_Y), d.get_attribute(a.MAX_BLOCK_DIM_Z)),
                max_grid_dims=(d.get_attribute(a.MAX_GRID_DIM_X), d.get_attribute(a.MAX_GRID_DIM_Y), d.get_attribute(a.MAX_GRID_DIM_Z)),
                max_shared_bytes_per_block=d.get_attribute(a.MAX_SHARED_MEMORY_PER_BLOCK),
                max_shared_bytes_optin=d.get_attribute(a.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
                warp_size=d.get_attribute(a.WARP_SIZE),
            )
        return self._limits

    def describe(self) -> dict:
        a = cuda.device_attribute
        d = self.device
        major, minor = d.compute_capability()
        driver = cuda.get_driver_version()
        return {
            "backend": "gpu",
            "name": d.name(),
            "compute_capability": f"{major}.{minor}",
            "driver_version": f"{driver // 1000}.{(driver % 1000) // 10}",
            "multiprocessors": d.get_attribute(a.MULTIPROCESSOR_COUNT),
            "clock_mhz": d.get_attribute(a.CLOCK_RATE) / 1000,
            "memory_clock_mhz": d.get_attribute(a.MEMORY_CLOCK_RATE) / 1000,
            "memory_bus_bits": d.get_attribute(a.GLOBAL_MEMORY_BUS_WIDTH),
            "l2_bytes": d.get_attribute(a.L2_CACHE_SIZE),
            "memory_bytes": d.total_memory(),
        }
