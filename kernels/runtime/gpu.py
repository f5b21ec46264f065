"""The GPU backend: PyCUDA on a real CUDA device.

Source is compiled by nvcc through PyCUDA's ``compile`` (which caches images by
source and options), or its image is taken from the grader's folder of images
(``$DLK_KERNEL_IMAGES``, see :func:`stored_image`).  Each ``__global__``
function of the reader's source is declared ``extern "C"`` so that kernels are found by their plain names (the
rest stays C++: templates, overloads, headers), with a ``#line`` directive so
that compiler messages give the reader's own line numbers.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import struct
import time

import numpy as np

from .backend import Backend, CompiledModule, DeviceBuffer, DeviceLimits, Dim3
from .cuda_errors import cuda_error_name, launch_error, meaning
from .diagnostics import compile_error_message
from .errors import KernelCompileError, KernelError, KernelLaunchError, KernelTimeoutError, LaunchConfigError
from .cooperative import check_co_resident, grid_sync_line
from .gpu_cooperative import DriverError, DriverModule
from .signature import KernelSignature, strip_comments

try:  # PyCUDA is only needed on a machine with a GPU.
    import pycuda.driver as cuda
except ImportError:  # pragma: no cover - exercised on machines without PyCUDA
    cuda = None


def _wrap_source(source: str, source_name: str) -> str:
    """The source with ``extern "C"`` in front of each (non-template) ``__global__`` function, so that
    kernels are found by their own names while templates, C++ headers and overloads of device
    functions compile as C++; line numbers preserved."""
    clean = strip_comments(source)
    text = source
    for m in reversed(list(re.finditer(r"\b__global__\b", clean))):
        before = clean[max(0, m.start() - 300) : m.start()]
        if re.search(r"template\s*<[^;{}]*>\s*$", before) or re.search(r'extern\s*"C"\s*$', before):
            continue
        if re.search(r"\bstatic\s*$", before):
            continue
        text = text[: m.start()] + 'extern "C" ' + text[m.start() :]
    escaped = source_name.replace("\\", "\\\\").replace('"', '\\"')
    return f'#line 1 "{escaped}"\n' + text + ("" if text.endswith("\n") else "\n")


#: A folder of compiled kernel images, read-only for whoever compiles: the grader fills it with its own
#: kernels (references, the timing's blends) before a grading starts, so that the grading's
#: sandboxed process loads them instead of running nvcc for each (see ``autograder.kernel_images``).
IMAGES_VARIABLE = "DLK_KERNEL_IMAGES"
_HEADER_SUFFIXES = (".cuh", ".h", ".hpp")


def _image_source(source: str, source_name: str, signatures) -> tuple[str, list, int]:
    """(the text nvcc compiles, the template instances asked for, the line of a grid sync or 0)."""
    wrapped = _wrap_source(source, source_name)
    instances = _instantiations(signatures)
    cooperative_line = grid_sync_line(source)
    if instances or cooperative_line:
        wrapped += _instantiating(signatures, instances)
    return wrapped, instances, cooperative_line


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


def store_image(folder: str, source: str, source_name: str, options, include_dirs, signatures, arch: str) -> str:
    """Compile ``source`` as :meth:`GPUBackend.compile` would on a device of ``arch`` and keep its image in
    ``folder`` (no GPU context needed: nvcc only); returns the image's path."""
    text, _, _ = _image_source(source, source_name, signatures)
    path = os.path.join(folder, image_key(text, options, include_dirs, arch) + ".cubin")
    if not os.path.exists(path):
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
    """An explicit instantiation of each kernel asked for by name, so that nvcc compiles its device code
    (named with its namespaces, after the reader's last line).

    (Taking the address in host code is not enough: a cubin holds device code only.)
    """
    qualified = [getattr(signatures[name], "qualified_name", name) for name in names]
    return "".join(f"\ntemplate __global__ decltype({q}) {q};" for q in qualified) + "\n"


def _elf_function_names(image: bytes) -> list[str]:
    """Names of the FUNC symbols of an ELF64 image (a cubin)."""
    import struct

    if image[:4] != b"\x7fELF" or image[4] != 2:
        return []
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", image, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + k * shentsize) for k in range(shnum)]
    names = []
    for sh in sections:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        offset, size, link, entsize = sh[4], sh[5], sh[6], sh[9] or 24
        strtab = sections[link]
        for k in range(size // entsize):
            st_name, st_info = struct.unpack_from("<IB", image, offset + k * entsize)
            if st_info & 0xF == 2:  # STT_FUNC
                start = strtab[4] + st_name
                names.append(image[start : image.index(b"\0", start)].decode())
    return names


def _normal(text: str) -> str:
    # cu++filt writes unsigned and long template arguments as 64u, 64ul
    return re.sub(r"(?<=\d)[uUlL]+\b", "", re.sub(r"\s+", "", text))


def _demangle(name: str) -> str:
    """``name`` demangled by the C++ runtime's own ``__cxa_demangle`` (libstdc++), or as it is."""
    import ctypes
    import ctypes.util

    try:
        runtime = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
    except OSError:
        return name
    demangle = runtime.__cxa_demangle
    demangle.restype = ctypes.c_void_p
    demangle.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    status = ctypes.c_int()
    pointer = demangle(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not pointer:
        return name
    try:
        return ctypes.string_at(pointer).decode()
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(pointer))


def _mangled_names(image: bytes, wanted: list[str]) -> dict[str, str]:
    """``{"sgemm<64, 64, 8>": "_Z5sgemmILi64ELi64ELi8EEvPKfS1_Pfiii"}`` for the instantiations in a cubin."""
    import shutil
    import subprocess

    mangled = [n for n in _elf_function_names(image) if n.startswith("_Z")]
    if not mangled:
        return {}
    # The C++ runtime's demangler first: it writes template arguments as C++ does (cu++filt of CUDA 13
    # writes scale<double, (int)64>), and needs no tool (nvcc from PyPI ships no cu++filt).
    readable_names = [_demangle(name) for name in mangled]
    tool = shutil.which("c++filt") or shutil.which("cu++filt")
    if tool and any(r == m for r, m in zip(readable_names, mangled)):
        filtered = subprocess.run([tool], input="\n".join(mangled), capture_output=True, text=True,
                                  timeout=60).stdout.splitlines()
        readable_names = [f if r == m else r for r, m, f in zip(readable_names, mangled, filtered)]
    found = {}
    for raw, readable in zip(mangled, readable_names):
        head = _normal(re.sub(r"^\s*void\s+", "", readable.split("(", 1)[0]))  # kernels return void
        for name in wanted:
            if name not in found and (head == _normal(name) or head.endswith("::" + _normal(name).lstrip(":"))):
                found[name] = raw
    return found


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


class GPUModule(CompiledModule):
    def __init__(self, backend: "GPUBackend", module, source_name: str, aliases: dict[str, str] | None = None,
                 grid_sync_line: int = 0, cubin=None):
        self.backend = backend
        self.module = module  # PyCUDA's, or a DriverModule where the source uses this_grid()
        self.grid_sync_line = grid_sync_line
        self.source_name = source_name
        self.aliases = dict(aliases or {})  # template instantiation -> its mangled name
        self._cubin = cubin  # () -> the module's cubin, for loading it through the driver (stream launches)
        self._driver_module: DriverModule | None = module if isinstance(module, DriverModule) else None
        self._functions: dict[str, object] = {}
        self._driver_functions: dict[str, object] = {}
        self._globals_set: dict[str, np.ndarray] = {}  # what set_global wrote, for a driver copy loaded later
        self._last_on_copy = False  # whether the last launch ran the driver copy (get_global reads that one)
        self._references: list = []
        # id(signature) -> (signature, PyCUDA function prepared with its argument format, or None)
        self._prepared: dict[int, tuple] = {}

    def kernel_function(self, name: str):
        """Kernel ``name`` as the loaded module holds it (PyCUDA's function, or the driver's where the source uses
        ``this_grid()``): what this module's launches call, and what a raw launch calls with no checks and no
        copies (:meth:`~kernels.runtime.measurement.GpuMeasurement.raw_kernel`)."""
        if name not in self._functions:
            self._functions[name] = self.module.get_function(self.aliases.get(name, name))
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
            self._driver_functions[name] = self._driver_module.get_function(self.aliases.get(name, name))
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
        text, instances, cooperative_line = _image_source(source, source_name, signatures)
        try:
            image = stored_image(text, options, include_dirs, self.arch)
            if image is None:
                image = _compile_image(text, options, include_dirs, self.arch)
        except cuda.CompileError as exc:
            log = compiler_log(exc)
            raise KernelCompileError(compile_error_message(log, source, source_name, "nvcc"), log=log, source_name=source_name) from None
        module = DriverModule(image) if cooperative_line else cuda.module_from_buffer(image)
        aliases = _mangled_names(image, instances) if instances else {}
        return GPUModule(self, module, source_name, aliases, cooperative_line, lambda: image)

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
