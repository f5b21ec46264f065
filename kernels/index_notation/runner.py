"""Run a generated comprehension through the book's runtime on NumPy arrays or device buffers.

    from kernels.index_notation import compile_tc
    mv = compile_tc("def mv(float(M,K) A, float(K) x) -> (C) { C(i) +=! A(i,k) * x(k) }")
    C = mv(A, x)              # NumPy in, NumPy out (float32)

Sizes are read from the arrays' shapes and checked against the declaration
(the same size name must mean the same length everywhere); an empty range
for the given shapes is an error naming the index.
"""

from __future__ import annotations

import numpy as np

from ..runtime import selection as select
from ..runtime.backend import DeviceBuffer
from ..runtime.module import compile_source, empty, to_device
from .codegen import GeneratedProgram
from .errors import TcShapeError

_modules: dict = {}


def module_for(program: GeneratedProgram, backend=None):
    """The compiled source of ``program`` (once per process, backend and source)."""
    backend = backend or select.current_backend()
    key = (id(backend), program.source)
    hit = _modules.get(key)
    if hit is not None and hit[0] is backend:
        return hit[1]
    module = compile_source(program.source, name=f"{program.checked.name}.cu", backend=backend)
    _modules[key] = (backend, module)
    return module


def bind_sizes(program: GeneratedProgram, args: dict) -> dict:
    """Size name -> value, from the input arrays; :class:`TcShapeError` naming the argument on a mismatch."""
    cd = program.checked
    env: dict[str, int] = {}
    where: dict[str, str] = {}
    for t in cd.inputs:
        value = args[t.name]
        shape = tuple(int(s) for s in value.shape)
        if len(shape) != len(t.dims):
            raise TcShapeError(f"argument '{t.name}' must have {len(t.dims)} dimensions "
                               f"({', '.join(map(str, t.dims))}), got shape {shape}")
        for d, (size, n) in enumerate(zip(t.dims, shape)):
            names = size.names()
            if not names:
                if size.eval({}) != n:
                    raise TcShapeError(f"argument '{t.name}': dimension {d} must be {size}, got {n}")
                continue
            (sym,) = names
            if sym in env and env[sym] != n:
                raise TcShapeError(f"argument '{t.name}': dimension {d} is {sym} = {env[sym]} (from {where[sym]}), "
                                   f"got {n}")
            env[sym] = n
            where[sym] = f"{t.name}.shape[{d}]"
    return env


def check_ranges(program: GeneratedProgram, env: dict) -> list:
    """Parallel extents per kernel; :class:`TcShapeError` if some range is empty for these sizes."""
    cd = program.checked
    for cs in cd.statements:
        for v in cs.parallel + cs.reduction:
            lo, hi = cs.ranges[v]
            a, b = lo.eval(env), hi.eval(env)
            if b < a:
                raise TcShapeError(f"for these shapes ({', '.join(f'{k}={v}' for k, v in env.items())}) index '{v}' "
                                   f"has the empty range [{lo}, {hi}] = [{a}, {b}]")
    extents = []
    for plan in program.kernels:
        cs = cd.statements[plan.statements[0]]
        extents.append([cs.ranges[v][1].eval(env) - cs.ranges[v][0].eval(env) + 1 for v in cs.parallel])
    return extents


def run(program: GeneratedProgram, *args, backend=None, prepare_only: bool = False, **kwargs):
    """Launch every kernel of ``program`` in order; returns the outputs (one array, or a tuple).

    Arguments go by position in the declaration's order or by name.  NumPy
    inputs give NumPy outputs (filled with NaN before the launches, so a
    forgotten element shows); device buffers give device buffers.  With
    ``prepare_only`` the result is a function that only enqueues the launches
    (for timing), and the outputs are device buffers allocated once.
    """
    cd = program.checked
    backend = backend or select.current_backend()
    order = [n for kind, n, _ in program.params if kind in ("scalar", "input")]
    if len(args) > len(order):
        raise TypeError(f"{cd.name} takes {len(order)} arguments ({', '.join(order)}), {len(args)} given")
    values = dict(zip(order, args))
    for k, v in kwargs.items():
        if k not in order:
            raise TypeError(f"{cd.name} has no argument '{k}' (arguments: {', '.join(order)})")
        if k in values:
            raise TypeError(f"{cd.name}: argument '{k}' given twice")
        values[k] = v
    missing = [n for n in order if n not in values]
    if missing:
        raise TypeError(f"{cd.name}: missing argument{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    for t in cd.inputs:
        v = values[t.name]
        if isinstance(v, DeviceBuffer):
            continue
        if not hasattr(v, "shape"):
            raise TcShapeError(f"argument '{t.name}' must be an array, not {type(v).__name__}")
        dtype = np.float32 if t.type == "float" else np.int32
        if t.type == "int" and not np.issubdtype(np.asarray(v).dtype, np.integer):
            raise TcShapeError(f"argument '{t.name}' is declared int: pass integers, not {np.asarray(v).dtype}")
        values[t.name] = np.ascontiguousarray(v, dtype=dtype)
    env = bind_sizes(program, values)
    extents = check_ranges(program, env)
    host = any(isinstance(values[t.name], np.ndarray) for t in cd.inputs) and not prepare_only
    device = {t.name: values[t.name] if isinstance(values[t.name], DeviceBuffer) else to_device(values[t.name], backend)
              for t in cd.inputs}
    outputs = {}
    for t in cd.outputs:
        shape = tuple(d.eval(env) for d in t.dims)
        outputs[t.name] = to_device(np.full(shape, np.nan, np.float32), backend)
    module = module_for(program, backend)
    call_args = []
    for kind, name, ctype in program.params:
        if kind == "size":
            call_args.append(env[name])
        elif kind == "scalar":
            call_args.append(values[name])
        elif kind == "input":
            call_args.append(device[name])
        else:
            call_args.append(outputs[name])
    prepared = []
    for plan, ext in zip(program.kernels, extents):
        kernel = module.function(plan.name)
        prepared.append((kernel, kernel.prepare(call_args, plan.grid(ext), plan.block, 0)))

    def enqueue():
        for kernel, prep in prepared:
            kernel.launch_prepared(prep, sync=False)

    if prepare_only:
        return enqueue
    enqueue()
    backend.synchronize()
    result = [outputs[t.name].get() if host else outputs[t.name] for t in cd.outputs]
    return result[0] if len(result) == 1 else tuple(result)
