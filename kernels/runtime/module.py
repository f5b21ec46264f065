"""Compile CUDA C source and launch its kernels on NumPy arrays.

The one API chapters, exercises and the grader use::

    from kernels.runtime import compile_source

    module = compile_source(SOURCE, name="vector_add.cu")
    add = module.function("vector_add")
    add(a, b, c, n, grid=blocks, block=256)        # c is copied back

Arguments are checked against the kernel's own declaration before launch:

* a NumPy array for a ``const T*`` parameter is copied to the device;
  for a non-const ``T*`` it is copied to the device and back after the launch
  (the array is updated in place);
* a :class:`~kernels.runtime.backend.DeviceBuffer` (from :func:`to_device`
  or :func:`empty`) is passed as it is, with no copies;
* a Python or NumPy number for a scalar parameter is converted to its C type,
  with an error if it does not fit.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from . import selection, streams
from .queueing import queueing
from .backend import Backend, CompiledModule, DeviceBuffer, Dim3
from .errors import KernelArgumentError, KernelNotFoundError, LaunchConfigError
from .signature import KernelSignature, Parameter, parse_kernels, template_instance


def as_dim3(value: int | Sequence[int], what: str) -> Dim3:
    """``256`` -> ``(256, 1, 1)``; ``(16, 16)`` -> ``(16, 16, 1)``, validated as positive integers."""
    if type(value) is int and value >= 1:  # the common cases, on every launch
        return (value, 1, 1)
    if type(value) is tuple and len(value) in (2, 3) and all(type(v) is int and v >= 1 for v in value):
        return value if len(value) == 3 else (value[0], value[1], 1)
    if isinstance(value, (int, np.integer)):
        items = [value]
    else:
        try:
            items = list(value)
        except TypeError:
            raise LaunchConfigError(f"{what} must be an int or a tuple of 1 to 3 ints, not {value!r}") from None
    if not 1 <= len(items) <= 3:
        raise LaunchConfigError(f"{what} must have 1 to 3 dimensions, not {len(items)}: {value!r}")
    dims = []
    for axis, item in zip("xyz", items):
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
            raise LaunchConfigError(f"{what}.{axis} must be an integer, not {item!r}")
        if item < 1:
            raise LaunchConfigError(f"{what}.{axis} = {item}: every dimension must be at least 1")
        dims.append(int(item))
    while len(dims) < 3:
        dims.append(1)
    return (dims[0], dims[1], dims[2])


def validate_launch(backend: Backend, kernel: str, grid: Dim3, block: Dim3, shared: int) -> None:
    limits = backend.limits()
    threads = block[0] * block[1] * block[2]
    if threads > limits.max_threads_per_block:
        raise LaunchConfigError(
            f"{kernel}: block {block} has {threads} threads; a block holds at most {limits.max_threads_per_block}"
        )
    for axis, size, cap in zip("xyz", block, limits.max_block_dims):
        if size > cap:
            raise LaunchConfigError(f"{kernel}: block.{axis} = {size} is over the limit of {cap}")
    for axis, size, cap in zip("xyz", grid, limits.max_grid_dims):
        if size > cap:
            raise LaunchConfigError(f"{kernel}: grid.{axis} = {size} is over the limit of {cap}")
    if isinstance(shared, bool) or not isinstance(shared, (int, np.integer)) or shared < 0:
        raise LaunchConfigError(f"{kernel}: shared memory must be a byte count >= 0, not {shared!r}")
    if shared > limits.max_shared_bytes_optin:
        raise LaunchConfigError(
            f"{kernel}: {shared} bytes of dynamic shared memory asked for; a block has at most "
            f"{limits.max_shared_bytes_optin}"
        )


@functools.lru_cache(maxsize=None)
def _int_bounds(dtype: np.dtype) -> tuple[int, int]:
    """The range of an integer dtype (np.iinfo takes microseconds, and a launch may check several integers)."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _said(label) -> str:
    return label if isinstance(label, str) else label()


def _number(dtype: np.dtype, value, kernel: str, label):
    """``value`` as one scalar of ``dtype``, or an error naming ``label`` (the parameter, or its field; a
    callable giving it is called only for an error: a launch converts several numbers)."""
    kind = dtype.kind
    if type(value) is float and kind == "f":  # the common cases first
        return dtype.type(value)
    if type(value) is int and kind in "iu":
        low, high = _int_bounds(dtype)
        if low <= value <= high:
            return dtype.type(value)
    if kind in "iub":
        if isinstance(value, (float, np.floating)) and not float(value).is_integer():
            raise KernelArgumentError(f"{kernel}: {_said(label)} is an integer, got {value!r}")
        if not isinstance(value, (int, np.integer, bool, np.bool_, float, np.floating)):
            raise KernelArgumentError(f"{kernel}: {_said(label)} needs a number, got {type(value).__name__}")
        ivalue = int(value)
        if dtype.kind != "b":
            low, high = _int_bounds(dtype)
            if not low <= ivalue <= high:
                raise KernelArgumentError(f"{kernel}: {ivalue} does not fit {_said(label)} ({low}..{high})")
        return dtype.type(ivalue)
    if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
        raise KernelArgumentError(f"{kernel}: {_said(label)} needs a number, got {type(value).__name__}")
    return dtype.type(value)


def _checked_record(dtype: np.dtype, value, kernel: str, label: str):
    """``value`` (a tuple, list or dict of the fields, nested for inner structs and arrays) checked
    field by field against the structured or sub-array ``dtype``; returns what NumPy assigns."""
    if dtype.names is not None:
        names = dtype.names
        if isinstance(value, dict):
            unknown = [k for k in value if k not in names]
            missing = [k for k in names if k not in value]
            if unknown or missing:
                raise KernelArgumentError(
                    f"{kernel}: {label} has the fields {', '.join(names)}; "
                    + (f"'{unknown[0]}' is not one of them" if unknown else f"'{missing[0]}' is missing"))
            items = [value[k] for k in names]
        elif isinstance(value, (tuple, list)):
            if len(value) != len(names):
                raise KernelArgumentError(
                    f"{kernel}: {label} has {len(names)} fields ({', '.join(names)}); {len(value)} values given")
            items = list(value)
        else:
            raise KernelArgumentError(
                f"{kernel}: {label} is a struct: pass a tuple or dict of its fields ({', '.join(names)}) or a NumPy "
                f"structured scalar, not {type(value).__name__}")
        return tuple(_checked_record(dtype.fields[name][0], item, kernel, f"field '{name}' of {label}")
                     for name, item in zip(names, items))
    if dtype.subdtype is not None:
        element, shape = dtype.subdtype
        if not isinstance(value, (tuple, list, np.ndarray)) or len(value) != shape[0]:
            raise KernelArgumentError(f"{kernel}: {label} is an array of {shape[0]} values; got {value!r}")
        inner = np.dtype((element, shape[1:])) if len(shape) > 1 else element
        return [_checked_record(inner, item, kernel, f"{label}[{k}]") for k, item in enumerate(value)]
    return _number(dtype, value, kernel, label)


def _convert_record(param: Parameter, value, kernel: str) -> np.void:
    """A struct or vector type taken by value, laid out as nvcc lays it out (``param.record``)."""
    label = f"parameter '{param.describe()}'"
    if isinstance(value, np.ndarray) and value.dtype.names is not None and value.shape == ():
        value = value[()]
    if isinstance(value, np.void):
        if value.dtype == param.record:
            return value
        if value.dtype.names is None:
            raise KernelArgumentError(f"{kernel}: {label} needs its fields, not raw bytes")
        value = value.item()  # by position, each field checked below
    elif isinstance(value, (np.ndarray, DeviceBuffer)):
        raise KernelArgumentError(
            f"{kernel}: {label} is a {'vector' if param.lanes > 1 else 'struct'} taken by value; pass a tuple "
            f"({', '.join(param.record.names)}), not an array")
    return np.array(_checked_record(param.record, value, kernel, label), dtype=param.record)[()]


def _convert_scalar(param: Parameter, value, kernel: str):
    if param.record is not None:
        return _convert_record(param, value, kernel)
    if isinstance(value, (np.ndarray, DeviceBuffer)):
        raise KernelArgumentError(
            f"{kernel}: parameter '{param.describe()}' is a scalar, but an array was passed"
        )
    return _number(param.dtype, value, kernel, lambda: f"parameter '{param.describe()}'")


def _conversion(dtype: np.dtype) -> str:
    """How to make a NumPy array of ``dtype``: NumPy has no bfloat16 of its own; ml_dtypes (which the runtime
    reads __nv_bfloat16 as) has."""
    if dtype.name == "bfloat16":
        return ": pass an ml_dtypes.bfloat16 array, e.g. x.astype(ml_dtypes.bfloat16) after import ml_dtypes"
    return f" (convert with .astype(np.{dtype}))"


def _check_array(param: Parameter, array, kernel: str) -> None:
    if array.dtype != param.dtype:
        raise KernelArgumentError(
            f"{kernel}: parameter '{param.describe()}' needs {param.dtype} data, got {array.dtype}"
            + (_conversion(param.dtype) if isinstance(array, np.ndarray) else "")
        )
    if param.lanes > 1 and array.size % param.lanes:
        raise KernelArgumentError(
            f"{kernel}: parameter '{param.describe()}' reads {param.lanes} values per element; "
            f"the array's {array.size} values are not a multiple of {param.lanes}"
        )
    if isinstance(array, np.ndarray) and not array.flags.c_contiguous:
        raise KernelArgumentError(
            f"{kernel}: the array for '{param.describe()}' is not C-contiguous (a transposed or sliced view); "
            f"pass np.ascontiguousarray(...) instead"
        )


class Kernel:
    """A ``__global__`` function of a compiled :class:`Module`, callable with NumPy arrays."""

    def __init__(self, module: "Module", signature: KernelSignature):
        self.module = module
        self.signature = signature
        self.name = signature.name

    def __repr__(self) -> str:
        return f"<Kernel {self.signature.describe()} on {self.module.backend.name}>"

    def prepare(self, args: Sequence, grid, block, shared: int = 0):
        """Validate and convert arguments; returns what :meth:`launch_prepared` takes.

        Copies NumPy arrays to the device.  Returns ``(device_args, copy_back,
        grid, block, shared)`` where ``copy_back`` lists (host array, device
        buffer) pairs to copy back after the launch.
        """
        sig = self.signature
        if len(args) != len(sig.params):
            raise KernelArgumentError(
                f"{self.name} takes {len(sig.params)} arguments, {len(args)} given.\n"
                f"  declared: {sig.describe()}"
            )
        grid3 = as_dim3(grid, "grid")
        block3 = as_dim3(block, "block")
        backend = self.module.backend
        checked = self.module.checked_launches
        if type(shared) is not int or (grid3, block3, shared) not in checked:
            validate_launch(backend, self.name, grid3, block3, shared)
            if len(checked) < 4096:  # a launcher repeats a few configurations; a sweep may try thousands
                checked.add((grid3, block3, shared))
        device_args: list = []
        copy_back: list[tuple[np.ndarray, DeviceBuffer]] = []
        for param, value in zip(sig.params, args):
            if not param.is_pointer:
                device_args.append(_convert_scalar(param, value, self.name))
                continue
            if isinstance(value, DeviceBuffer):
                _check_array(param, value, self.name)
                device_args.append(value)
            elif isinstance(value, np.ndarray):
                _check_array(param, value, self.name)
                buf = backend.to_device(value)
                device_args.append(buf)
                if not param.is_const:
                    if not value.flags.writeable:
                        raise KernelArgumentError(
                            f"{self.name}: the array for '{param.describe()}' is read-only, but the kernel may write it "
                            f"(declare the parameter const if it is an input)"
                        )
                    copy_back.append((value, buf))
            else:
                raise KernelArgumentError(
                    f"{self.name}: parameter '{param.describe()}' is a pointer; pass a NumPy array or a device buffer, "
                    f"not {type(value).__name__}"
                )
        return device_args, copy_back, grid3, block3, int(shared)

    def launch_prepared(self, prepared, sync: bool = True) -> None:
        device_args, copy_back, grid3, block3, shared = prepared
        stream = streams.current_stream()
        if stream is None:
            self.module.compiled.launch(self.signature, device_args, grid3, block3, shared)
        else:  # inside launching_on(): a framework's stream
            self.module.compiled.launch(self.signature, device_args, grid3, block3, shared, stream=stream)
        if (sync and not queueing()) or copy_back:
            self.module.backend.synchronize()
        for host, buf in copy_back:
            host[...] = buf.get().reshape(host.shape)

    def __call__(self, *args, grid, block, shared: int = 0, sync: bool = True) -> None:
        """Launch on ``grid`` blocks of ``block`` threads with ``shared`` bytes of dynamic shared memory.

        With ``sync=True`` (the default) the call waits for the kernel, so a
        failure is reported here; pass ``sync=False`` to queue launches on the
        GPU, e.g. when timing.
        """
        self.launch_prepared(self.prepare(args, grid, block, shared), sync=sync)


class Module:
    """Compiled CUDA C source: a dictionary of :class:`Kernel` s plus its global variables."""

    def __init__(self, source: str, name: str, backend: Backend, compiled: CompiledModule, signatures: dict[str, KernelSignature],
                 options: tuple = (), include_dirs: tuple = (), defines: dict | None = None):
        self.source = source
        self.name = name
        self.backend = backend
        self.compiled = compiled
        self.signatures = signatures
        self._build = (tuple(options), tuple(include_dirs), dict(defines or {}))
        self._kernels: dict[str, Kernel] = {}
        #: (grid, block, shared bytes) already checked against the device's limits (a launch checks each once).
        self.checked_launches: set[tuple] = set()

    @property
    def kernel_names(self) -> list[str]:
        return list(self.signatures)

    def function(self, name: str) -> Kernel:
        """The kernel called ``name``; for a template kernel, an instantiation such as ``"sgemm<64, 64, 8>"``
        (the module is compiled again with it)."""
        kernel = self._kernels.get(name)
        if kernel is not None:  # launchers ask on every launch
            return kernel
        if name not in self.signatures and "<" in name:
            options, include_dirs, defines = self._build
            instance = template_instance(self.source, name, self.name, defines)
            if instance is not None:
                if instance.name not in self.signatures:
                    signatures = {**self.signatures, instance.name: instance}
                    self.compiled = self.backend.compile(self.source, self.name, options, include_dirs, signatures)
                    self.signatures = signatures
                return self._kernels.setdefault(name, Kernel(self, self.signatures[instance.name]))
        if name not in self.signatures:
            known = ", ".join(self.signatures) or "none"
            raise KernelNotFoundError(f"{self.name} has no __global__ function '{name}' (kernels defined: {known})")
        return self._kernels.setdefault(name, Kernel(self, self.signatures[name]))

    __getitem__ = function

    def set_constant(self, name: str, host) -> None:
        """Copy ``host`` into the ``__constant__`` (or ``__device__``) array ``name``."""
        self.compiled.set_global(name, np.ascontiguousarray(host))

    def get_global(self, name: str, dtype, count: int) -> np.ndarray:
        return self.compiled.get_global(name, np.dtype(dtype), count)


def compile_source(
    source: str,
    name: str = "kernel.cu",
    options: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
    defines: dict[str, object] | None = None,
    backend: Backend | None = None,
) -> Module:
    """Compile ``source`` on the current backend (or ``backend``).

    ``defines`` become ``-D`` options (``{"TILE": 16}`` -> ``-DTILE=16``) and
    are also known to the signature parser.  Raises
    :class:`~kernels.runtime.errors.KernelCompileError` with the compiler's
    messages at ``name``'s own line numbers.
    """
    backend = backend or selection.current_backend()
    defines = {k: str(v) for k, v in (defines or {}).items()}
    all_options = tuple(options) + tuple(f"-D{k}={v}" for k, v in defines.items())
    signatures = parse_kernels(source, name, defines)
    compiled = backend.compile(source, name, all_options, tuple(str(d) for d in include_dirs), signatures)
    return Module(source, name, backend, compiled, signatures, all_options, tuple(str(d) for d in include_dirs), defines)


def to_device(host: np.ndarray, backend: Backend | None = None) -> DeviceBuffer:
    """Copy a NumPy array to the current device."""
    backend = backend or selection.current_backend()
    return backend.to_device(np.ascontiguousarray(host))


def empty(shape, dtype=np.float32, backend: Backend | None = None) -> DeviceBuffer:
    """An uninitialised device buffer."""
    backend = backend or selection.current_backend()
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    return backend.empty(shape, np.dtype(dtype))


def borrow(ptr: int, shape, dtype=np.float32, backend: Backend | None = None) -> DeviceBuffer:
    """Device memory someone else allocated (a framework's tensor, at address ``ptr``) as a buffer kernels take.

    Nothing is copied and nothing is freed: the owner keeps the memory alive while kernels use it.
    Only the GPU backend can do this (the emulator's memory is its own).
    """
    backend = backend or selection.current_backend()
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    return backend.borrow(int(ptr), shape, np.dtype(dtype))


def zeros(shape, dtype=np.float32, backend: Backend | None = None) -> DeviceBuffer:
    return to_device(np.zeros(shape, dtype), backend)


def blocks_for(n: int, threads_per_block: int) -> int:
    """Blocks needed so that ``blocks * threads_per_block >= n`` (at least one)."""
    return max(1, math.ceil(n / threads_per_block))
