"""Check a kernel against an exercise's NumPy reference; runs inside the grading child.

For every case (shape, seed): generate inputs, compute the float64 reference
on the host (it is never placed on the device), fill outputs with NaN (or
zeros where the exercise says so), launch the student's kernel with the launch
configuration derived from their integers, synchronise the whole device,
compare every element, check the inputs were not modified, and on a GPU check
guard words past the end of every buffer.  A failing case is run a second time
with the same inputs: results that change from run to run point to a race.

Feedback names the pattern of the errors (see :func:`diagnose`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import numpy as np

from .causes import refine_hint
from .comparison import CaseError, compare
from .exercise import Exercise, LaunchConfig, LaunchError
from .result import ExerciseResult, ShapeResult
from .timing_policy import measure_speed, speed_points

GUARD_ELEMENTS = 256  # elements of guard after every buffer on the GPU
GUARD_FLOAT = np.float32(-7.0e33)  # an unlikely finite value a kernel would not write
GUARD_MAGNITUDE = 1.0e32  # outputs this large can only come from reading the guard
MAP_BINS_1D = 256
MAP_BINS_2D = 64


def error_map(bad: np.ndarray) -> dict | None:
    """Fraction of wrong elements per bin: a strip for 1-D outputs, a grid for 2-D ones."""
    if bad.size <= 1:
        return None
    if bad.ndim == 1:
        bins = min(MAP_BINS_1D, bad.size)
        edges = np.linspace(0, bad.size, bins + 1).astype(int)
        sums = np.add.reduceat(bad.astype(np.float64), edges[:-1])
        counts = np.diff(edges)
        return {"rows": [[round(float(v), 4) for v in sums / np.maximum(counts, 1)]], "shape": [int(bad.size)]}
    flat2 = bad.reshape(-1, bad.shape[-1])
    rows, cols = flat2.shape
    rb, cb = min(MAP_BINS_2D, rows), min(MAP_BINS_2D, cols)
    re_, ce = np.linspace(0, rows, rb + 1).astype(int), np.linspace(0, cols, cb + 1).astype(int)
    grid = np.add.reduceat(np.add.reduceat(flat2.astype(np.float64), re_[:-1], axis=0), ce[:-1], axis=1)
    grid /= np.maximum(np.outer(np.diff(re_), np.diff(ce)), 1)
    return {"rows": [[round(float(v), 4) for v in row] for row in grid], "shape": [int(s) for s in bad.shape]}


# ------------------------------------------------------------------ hints
def diagnose(
    cmp: dict,
    got: np.ndarray,
    expected: np.ndarray,
    before: np.ndarray | None,
    prefill: str | None,
    config: LaunchConfig,
    scale,
) -> str:
    """Name the pattern of the errors in words a student can act on."""
    bad = cmp["bad"]
    if not cmp["n_bad"]:
        return ""
    n = got.size
    exp = np.asarray(expected, dtype=np.float64).reshape(got.shape)
    got64 = got.astype(np.float64)
    block = config.block[0] * config.block[1] * config.block[2]
    threads = block * config.grid[0] * config.grid[1] * config.grid[2]
    if np.all(got64 == 0) and np.any(exp != 0):
        if prefill == "zeros":
            return ("The output is still 0, as the grader left it before the launch: the kernel never stored or added "
                    "its result (is the final write or atomicAdd reached, and by which thread?).")
        return "Every output value is 0: the kernel writes zeros, or nothing at all (check the store of the result)."
    bad_got = got64[bad]
    nan_bad = np.isnan(bad_got)
    if np.any(np.abs(bad_got[~nan_bad]) >= GUARD_MAGNITUDE):
        return (f"A value as large as the guard the grader places after every input ({float(GUARD_FLOAT):.0e}) reached "
                f"the output: the kernel read past the end of an input -- a missing or wrong bounds check (if (i < n)).")
    if before is not None and np.all(bad_got == before.astype(np.float64)[bad]):
        where = _where(bad, block, threads, n)
        return _sentence(f"{_elements(cmp['n_bad'])} never updated (still holding the input value){where}")
    if prefill == "nan" and np.all(nan_bad):
        where = _where(bad, block, threads, n)
        return _sentence(f"{_elements(cmp['n_bad'])} never written (still holding the NaN the grader filled the output with){where}")
    if np.any(nan_bad):
        return ("NaN in the output where the answer is a number: a value was read before it was written -- an accumulator "
                "that is not initialised (float sum = 0.0f;), shared memory read before every thread stored to it, or an "
                "element read from past the end of an input.")
    if np.any(np.isinf(bad_got)):
        return "Inf in the output: an overflow, e.g. accumulating in half precision (float16 tops out at 65504)."
    where = _where(bad, block, threads, n)
    if where:
        return _sentence(f"Wrong values{where}")
    # Small errors everywhere: precision, not logic.
    err, tol = cmp["err"][bad], cmp["tol"][bad]
    s = np.broadcast_to(np.asarray(scale, dtype=np.float64), got.shape)[bad]
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_to_scale = np.nanmax(err / np.maximum(s, 1e-300)) if err.size else 0.0
    if rel_to_scale < 5e-3 and np.all(err <= 500 * tol):
        return (f"The errors are small (up to {rel_to_scale:.1e} of the values' size), the size of float16 rounding "
                "(about 5e-4): is some arithmetic or accumulation done in half precision, or with a fast, less exact intrinsic?")
    if got.size == 1:
        ratio = float(got64.ravel()[0] / exp.ravel()[0]) if exp.ravel()[0] else float("nan")
        if 0 < ratio < 1:
            return (f"The result is {ratio:.1%} of the right value: some elements were not added (does every element of "
                    f"x reach a thread -- the loop bound, the grid-stride step, the grid size?).")
        if ratio > 1:
            return (f"The result is {ratio:.2f} times the right value: some elements were added more than once (a "
                    f"stride that is too short, or partial sums added twice).")
    return ""


def _sentence(text: str) -> str:
    return text if text.endswith(("?", ".")) else text + "."


def _elements(count: int) -> str:
    return "1 element was" if count == 1 else f"{count} elements were"


def _where(bad: np.ndarray, block: int, threads: int, n: int) -> str:
    """Where the wrong elements of a 1-D output lie, in terms of blocks and grid-stride passes."""
    if bad.ndim != 1 or n < 2:
        return ""
    idx = np.flatnonzero(bad)
    if idx.size == 0:
        return ""
    if n > block and n % block and idx.min() >= (n // block) * block:
        return (f", only in the last, partial block (elements {idx.min()}..{idx.max()} of {n}; n is not a multiple of "
                f"the block size {block}): a missing or wrong bounds check (if (i < n))")
    k = int(idx.min())
    if k > 0 and idx.size >= 0.99 * (n - k):  # (nearly) every element from k on is wrong, every one before it right
        if k == threads:
            return (f", every element from index {k} on (grid x block = {threads} threads, so each thread handled one "
                    f"element): the kernel covers one pass of the grid only -- use a grid-stride loop "
                    f"(i += blockDim.x * gridDim.x) so any grid covers any n")
        if k == block and threads > block:
            return (f", every element from index {k} = blockDim.x on, and none before it: those elements were "
                    f"processed by several blocks -- the grid-stride step must be the whole grid, "
                    f"i += blockDim.x * gridDim.x, not one block (i += blockDim.x)")
        return (f", every element from index {k} on, and none before it: does the kernel stop at a fixed size "
                f"(a constant, a limit) instead of n?")
    if threads < n and k >= threads:
        # Skipped or doubled elements after the first pass only: a wrong grid-stride step.
        return (f", only from the second grid-stride pass on (none among the first {threads} = grid x block "
                f"elements): the grid-stride step (i += blockDim.x * gridDim.x) or the loop condition is off")
    if idx.min() >= n - max(block, 1) and n > block:
        return f", only at the end of the array (elements {idx.min()}..{idx.max()} of {n}): a bounds check at the end"
    if block > 1:
        lanes = idx % block
        if np.all((lanes == 0) | (lanes == block - 1)):
            return (", only at the first or last thread of blocks (block edges): an off-by-one in the index, "
                    "or a bounds check at tile/block edges")
    return ""


# ------------------------------------------------------------------ running a case
def _expected_params(ex: Exercise):
    from kernels.runtime.signature import parse_kernels

    return parse_kernels(f"__global__ void {ex.signature} {{}}", "exercise", {})[ex.kernel].params


def kernel_is_empty(source: str, kernel: str) -> bool:
    """True when the body of ``__global__ ... kernel(...)`` has no statement but ``extern __shared__`` declarations.

    That is the released stub (comments and the shared-memory declaration it gives) or an empty body.
    """
    from kernels.runtime.signature import strip_comments

    text = strip_comments(source)
    m = re.search(r"__global__[^;{]*?\b" + re.escape(kernel) + r"\s*\(", text)
    if not m:
        return False
    start = text.find("{", m.end())
    if start < 0:
        return False
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            body = text[start + 1:i]
            break
    else:
        return False
    body = re.sub(r"extern\s+__shared__[^;]*;", "", body)
    return not body.strip()


def check_signature(ex: Exercise, module) -> str:
    """'' if the student's kernel has the declared parameters, else what differs."""
    if ex.kernel not in module.signatures:
        defined = ", ".join(module.signatures) or "none"
        return (f"The cell defines no __global__ function '{ex.kernel}' (kernels defined: {defined}). "
                f"Write: __global__ void {ex.signature}")
    got = module.signatures[ex.kernel].params
    want = _expected_params(ex)
    if len(got) != len(want):
        return (f"{ex.kernel} takes {len(got)} parameters, the exercise needs {len(want)}: "
                f"__global__ void {ex.signature}")
    for i, (g, w) in enumerate(zip(got, want)):
        if g.is_pointer != w.is_pointer or g.dtype != w.dtype or g.lanes != w.lanes:
            return (f"parameter {i + 1} of {ex.kernel} is '{g.describe()}'; the exercise needs '{w.describe()}' "
                    f"(__global__ void {ex.signature})")
        if g.is_pointer and g.is_const and not w.is_const:
            return f"parameter {i + 1} of {ex.kernel} ('{g.describe()}') is const, but the kernel must write it"
    return ""


def _classify(exc: BaseException) -> tuple[str, str]:
    """(status, hint) for an exception from a launch."""
    from kernels.runtime import errors as E

    if isinstance(exc, E.LaunchConfigError):
        return "invalid_launch", ""
    if isinstance(exc, E.KernelTimeoutError):
        return "timeout", ("A loop that never ends: check that the loop index advances (grid-stride step) and that "
                           "every thread of a block reaches the same __syncthreads().")
    if isinstance(exc, E.KernelRaceError):
        return "launch_error", ("A race: threads read shared or global memory that other threads write without a "
                                "__syncthreads() (or an atomic) in between.")
    if isinstance(exc, E.BarrierDivergenceError):
        return "launch_error", ("Some threads of a block wait at a __syncthreads() that others never reach: keep "
                                "barriers outside branches that depend on the thread (e.g. put the bounds check around "
                                "the loads, not around the barrier).")
    if isinstance(exc, E.UninitializedSharedMemoryError):
        return "launch_error", "Shared memory read before any thread wrote it: initialise it (and __syncthreads()) first."
    if isinstance(exc, E.KernelMemoryError):
        return "launch_error", ("An access outside a buffer: a missing or wrong bounds check (if (i < n)) or wrong index "
                                "arithmetic.")
    if isinstance(exc, E.KernelLaunchError):
        if getattr(exc, "cuda_error", None) in ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED"):
            return "launch_error", ("An access outside every buffer: a missing or wrong bounds check (if (i < n)) or "
                                    "wrong index arithmetic.")
        return "launch_error", ""
    if isinstance(exc, E.KernelArgumentError):
        return "compile_error", ""
    if isinstance(exc, MemoryError):
        return "crashed", "The case needs more memory than the grader allows."
    return "crashed", ""


class CaseRunner:
    """Runs cases of one exercise with one compiled kernel on the current backend."""

    def __init__(self, ex: Exercise, kernel, backend, launch: dict):
        self.ex = ex
        if backend.name == "cpu":
            kernel = _inputs_returned(kernel)
        self.kernel = kernel
        self.backend = backend
        self.launch = launch
        self.guard = GUARD_ELEMENTS if backend.name == "gpu" else 0
        self.params = kernel.signature.params
        self._poison = None
        self.probed: dict[str, bool] = {}
        self.rerun: dict[str, bool] = {}

    # buffers ----------------------------------------------------------
    def _buffer(self, host: np.ndarray):
        from kernels.runtime.module import to_device

        if not self.guard:
            return to_device(np.ascontiguousarray(host), backend=self.backend)
        padded = np.empty(host.size + self.guard, host.dtype)
        padded[: host.size] = host.ravel()
        padded[host.size:] = self._guard_value(host.dtype)
        return to_device(padded, backend=self.backend)

    @staticmethod
    def _guard_value(dtype):
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            return np.array(GUARD_FLOAT).astype(dtype)
        return np.array(-0x5A5A5A5A).astype(dtype) if dtype.itemsize >= 4 else np.array(-90).astype(dtype)

    def _read(self, buf, size: int, name: str) -> np.ndarray:
        data = buf.get().ravel()
        if self.guard:
            tail = data[size:]
            g = self._guard_value(data.dtype)
            if not np.array_equal(tail.view(np.uint8), np.full(tail.size, g, data.dtype).view(np.uint8)):
                raise CaseError("launch_error", f"The kernel wrote past the end of '{name}' (into the guard the grader "
                                f"placed after its {size} elements).",
                                "An out-of-bounds write: a missing or wrong bounds check (if (i < n)).")
        return data[:size]

    # one launch -------------------------------------------------------
    def run_once(self, inputs: dict, expected: dict, config: LaunchConfig) -> tuple[dict, dict]:
        """Launch once on fresh device copies of ``inputs``; returns (outputs, inputs read back)."""
        from kernels.runtime import errors as E

        args, buffers = [], {}
        try:
            for arg, param in zip(self.ex.args, self.params):
                value = inputs.get(arg.name)
                if arg.role == "scalar":
                    args.append(value)
                    continue
                if arg.role == "out":
                    shape = np.shape(expected[arg.name])
                    if param.dtype.kind == "f":
                        host = np.full(shape, np.nan if arg.init == "nan" else 0, dtype=param.dtype)
                    else:
                        host = np.zeros(shape, dtype=param.dtype)
                        if arg.init == "nan":
                            host[...] = self._guard_value(param.dtype)
                else:
                    host = value
                buf = self._buffer(host)
                buffers[arg.name] = (buf, host.size)
                args.append(buf)
            if self.backend.name == "gpu":
                self._poison_shared()
            prepared = self.kernel.prepare(args, grid=config.grid, block=config.block, shared=config.shared)
            self.kernel.launch_prepared(prepared, sync=True)
            # Work left running on any stream, or a failure of any of it, shows up here.
            self.backend.synchronize()
        except E.KernelError as exc:
            status, hint = _classify(exc)
            raise CaseError(status, str(exc), hint) from None
        outputs, after = {}, {}
        for arg in self.ex.args:
            if arg.name not in buffers:
                continue
            buf, size = buffers[arg.name]
            data = self._read(buf, size, arg.name)
            if arg.role in ("out", "inout"):
                outputs[arg.name] = data.reshape(np.shape(expected[arg.name]))
            else:
                after[arg.name] = data
        return outputs, after

    def _poison_shared(self) -> None:
        """Fill every multiprocessor's shared memory with NaN, so a kernel reading it uninitialised sees NaN."""
        if self.backend.name != "gpu":
            return  # the emulator finds reads of unwritten shared memory itself
        try:
            self.backend.measurement().poison_shared_memory()
        except Exception:  # noqa: BLE001 - best effort: a kernel is still checked without it
            pass


def _inputs_returned(kernel):
    """The same kernel, launched so that the emulator returns its ``const`` buffers too.

    The emulator copies back only what a kernel may write; a kernel that casts
    ``const`` away and writes its input would go unseen.  Declaring every
    pointer writable for the launch makes the emulator return it, so the
    "inputs unchanged" check sees what a GPU would.
    """
    from dataclasses import replace

    from kernels.runtime.module import Kernel
    from kernels.runtime.signature import KernelSignature

    sig = kernel.signature
    params = tuple(replace(p, is_const=False) if p.is_pointer else p for p in sig.params)
    return Kernel(kernel.module, KernelSignature(sig.name, params, sig.line))


def _case_label(ex: Exercise, case: dict) -> str:
    return ex.shape_label(case["shape"])


def run_case(runner: CaseRunner, ex: Exercise, case: dict) -> ShapeResult:
    shape = case["shape"]
    result = ShapeResult(label=_case_label(ex, case), shape=dict(shape), seed_index=case["seed_index"],
                         visible=case["visible"], passed=False)
    try:
        _, config = ex.resolve_launch(shape, runner.launch)
    except LaunchError as exc:
        raise CaseError("invalid_launch", f"Launch configuration refused for {result.label}: {exc}") from None
    rng = np.random.default_rng(case["seed"])
    inputs = ex.make_inputs(shape, rng)
    pristine = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    expected = ex.reference(pristine)
    scales = ex.error_scale(pristine)
    outputs, after = runner.run_once(inputs, expected, config)

    # Inputs must come back as they went in.
    for arg in ex.args:
        if arg.role == "in" and arg.name in after:
            if not np.array_equal(after[arg.name].view(np.uint8), pristine[arg.name].ravel().view(np.uint8)):
                changed = int(np.count_nonzero(after[arg.name] != pristine[arg.name].ravel()))
                result.error = f"The kernel modified its input '{arg.name}' ({changed} elements changed)."
                result.hint = "Inputs must be left as they are: write results only to the output arguments."
                result.n_total = int(pristine[arg.name].size)
                result.n_bad = changed
                return result

    total_bad, first = 0, None
    for arg in ex.outputs:
        got = outputs[arg.name]
        cmp = compare(got, expected[arg.name], scales[arg.name], ex.rtol, ex.atol)
        result.n_total += int(got.size)
        total_bad += cmp["n_bad"]
        if result.max_abs_err is None or cmp["max_abs_err"] > result.max_abs_err:
            result.max_abs_err = cmp["max_abs_err"]
        if result.max_rel_err is None or cmp["max_rel_err"] > result.max_rel_err:
            result.max_rel_err = cmp["max_rel_err"]
        if cmp["n_bad"] and first is None:
            first = (arg, cmp, got)
    result.n_bad = total_bad
    result.passed = total_bad == 0
    if first is not None:
        arg, cmp, got = first
        result.output = arg.name
        result.first_bad_index = cmp["first_bad_index"]
        result.expected = cmp["expected"]
        result.got = cmp["got"]
        before = pristine[arg.name].reshape(got.shape) if arg.role == "inout" else None
        prefill = arg.init if arg.role == "out" else None
        result.hint = diagnose(cmp, got, expected[arg.name], before, prefill, config, scales[arg.name])
        result.error_map = error_map(cmp["bad"])
        if ex.probe is not None and not runner.probed.get(result.label):
            runner.probed[result.label] = True  # once per shape: probes cost launches
            try:
                probe_hint = ex.probe(shape, lambda probe_inputs: runner.run_once(
                    probe_inputs, ex.reference(probe_inputs), config)[0])
            except CaseError:
                probe_hint = ""
            if probe_hint:
                result.hint = probe_hint
        # Same inputs again (once per shape): a result that changes points to a race.
        if runner.rerun.get(result.label):
            return result
        runner.rerun[result.label] = True
        try:
            again, _ = runner.run_once(ex.make_inputs(shape, np.random.default_rng(case["seed"])), expected, config)
            g2 = again[arg.name].astype(np.float64)
            g1 = got.astype(np.float64)
            differs = ~((g1 == g2) | (np.isnan(g1) & np.isnan(g2)))
            tol = cmp["tol"]
            with np.errstate(invalid="ignore"):
                big = differs & ~(np.abs(g1 - g2) <= tol)
            if big.any():
                result.hint = (f"The result changed from one run to the next with the same inputs ({int(big.sum())} "
                               f"elements differ): a race -- a missing __syncthreads() between writing and reading "
                               f"shared memory, or threads updating the same global value without atomicAdd.")
        except CaseError:
            pass
    return result


# ------------------------------------------------------------------ the whole request
def run_request(request: dict, send: Callable[..., None] = lambda *a, **k: None) -> ExerciseResult:
    """Check one submission as described by ``request`` (see :mod:`autograder.isolation`)."""
    from kernels.runtime import errors as E
    from kernels.runtime import selection
    from kernels.runtime.module import compile_source

    from .exercises import get_exercise

    ex = get_exercise(request["exercise"])
    mode = request["mode"]
    cases = request["cases"]
    res = ExerciseResult(exercise=ex.name, status="failed", correctness_max=ex.correctness_points,
                         speed_max=ex.speed_points, mode=mode, launch=dict(request["launch"]))
    started = time.monotonic()
    try:
        launch = ex.validate_launch(request["launch"])
    except LaunchError as exc:
        res.status, res.message = "invalid_launch", f"Launch configuration refused: {exc}."
        return res
    try:
        backend = selection.current_backend()
    except Exception as exc:
        res.status, res.message = "crashed", f"No backend to run kernels on: {exc}"
        return res
    res.backend = backend.name
    try:
        info = backend.describe()
        res.device = str(info.get("name") or backend.name)
    except Exception:
        info = {}
        res.device = backend.name

    send("stage", stage="compile")
    source = "\n" * max(0, int(request.get("cell_line", 1)) - 1) + request["source"]
    # what the source may include and contain is decided on its preprocessed text (see source_policy)
    from .source_policy import SourceRefused, check_source

    try:
        problem = check_source(source)
    except SourceRefused as exc:
        problem = str(exc)
    if problem:
        res.status, res.message = "compile_error", problem
        return res
    try:
        module = compile_source(source, name=f"{ex.name}.cu", backend=backend)
    except E.KernelCompileError as exc:
        res.status = "compile_error"
        res.message = f"The kernel did not compile. {exc}"
        res.log = (getattr(exc, "log", "") or "")[-4000:]
        return res
    except E.KernelError as exc:
        res.status, res.message = "compile_error", f"The kernel could not be loaded: {exc}"
        return res
    problem = check_signature(ex, module)
    if problem:
        res.status, res.message = "wrong_kernel", problem
        return res
    if kernel_is_empty(source, ex.kernel):
        res.status = "not_written"
        res.message = (f"No code was written: the body of {ex.kernel} holds only comments and the released "
                       f"declarations. Write the kernel where the cell says YOUR CODE HERE.")
        return res
    kernel = module.function(ex.kernel)
    runner = CaseRunner(ex, kernel, backend, launch)

    send("stage", stage="correctness")
    failure: CaseError | None = None
    for index, case in enumerate(cases):
        send("start_case", index=index)
        try:
            shape_result = run_case(runner, ex, case)
            if not shape_result.passed:
                shape_result.hint = refine_hint(shape_result.hint, source=source, launch=launch,
                                                error=shape_result.error, wrong_result=True, shape=case["shape"])
        except CaseError as exc:
            exc.hint = refine_hint(exc.hint, source=source, launch=launch, error=str(exc))
            failure = exc
            shape_result = ShapeResult(label=_case_label(ex, case), shape=dict(case["shape"]),
                                       seed_index=case["seed_index"], visible=case["visible"], passed=False,
                                       error=str(exc), hint=exc.hint)
        except MemoryError:
            failure = CaseError("crashed", f"Out of memory on {_case_label(ex, case)}.")
            shape_result = ShapeResult(label=_case_label(ex, case), shape=dict(case["shape"]),
                                       seed_index=case["seed_index"], visible=case["visible"], passed=False,
                                       error=str(failure))
        res.shapes.append(shape_result)
        send("case", case=_shape_dict(shape_result))
        if failure is not None:
            break  # after a failed launch the device (a CUDA context) may be unusable

    _score_correctness(ex, res, failure)
    if res.status == "passed":
        _speed(ex, res, module, launch, backend, mode, send)
    else:
        res.speed_note = "no speed points: speed counts only for a kernel that passes every case"
    res.elapsed_s = round(time.monotonic() - started, 3)
    return res


def _shape_dict(s: ShapeResult) -> dict:
    from dataclasses import asdict

    return asdict(s)


def _score_correctness(ex: Exercise, res: ExerciseResult, failure: CaseError | None) -> None:
    """Points per shape (all of its seeds must pass); none when a launch failed, hung or crashed."""
    by_shape: dict[str, bool] = {}
    for s in res.shapes:
        by_shape[s.label] = by_shape.get(s.label, True) and s.passed
    if failure is not None:
        res.status = failure.status
        res.correctness_score = 0.0
        bad = res.shapes[-1]
        res.message = (f"The kernel failed on {'visible' if bad.visible else 'hidden'} case {bad.label} "
                       f"(seed #{bad.seed_index}): {failure}" + (f" Hint: {failure.hint}" if failure.hint else "")
                       + " No correctness points: a kernel must run on every case.")
        return
    n_shapes = len(by_shape)
    n_ok = sum(by_shape.values())
    res.correctness_score = round(ex.correctness_points * n_ok / max(1, n_shapes), 4)
    if n_ok == n_shapes:
        res.status = "passed"
        res.message = f"Correct on all {len(res.shapes)} cases ({n_shapes} shapes)."
        return
    res.status = "failed"
    failed = [s for s in res.shapes if not s.passed]
    first = failed[0]
    visible_ok = all(s.passed for s in res.shapes if s.visible)
    bad_labels = sorted({s.label for s in failed}, key=lambda l: [s.label for s in res.shapes].index(l))
    msg = (f"Wrong on {len(bad_labels)} of {n_shapes} shapes ({', '.join(bad_labels[:6])}"
           f"{', ...' if len(bad_labels) > 6 else ''}). ")
    if first.first_bad_index is not None:
        msg += (f"First on {first.label}: {first.output}[{','.join(map(str, first.first_bad_index))}] expected "
                f"{first.expected:.6g}, got {first.got:.6g}. ")
    elif first.error:
        msg += f"On {first.label}: {first.error} "
    if first.hint:
        msg += f"Hint: {first.hint} "
    if visible_ok and any(not s.visible for s in failed):
        msg += ("The visible cases pass but hidden ones do not: does the kernel assume something about n that only "
                "the visible sizes satisfy (a fixed size, a multiple of the block, a grid that covers every element "
                "in one pass)? ")
    msg += f"Correctness points for the {n_ok} shapes that pass on every seed."
    res.message = msg.strip()


def _timing_size_failed(ex: Exercise, res: ExerciseResult, error: str, hint: str) -> None:
    """The kernel passed every correctness case but went wrong at the timing size.

    The timing size counts as one more shape: it costs that shape's share of
    the correctness points, and all the speed points (a kernel that is only
    correct while not timed, or only below some size, gains nothing).
    """
    label = ex.shape_label(ex.timing_shape)
    res.shapes.append(ShapeResult(label=f"{label} (timing size)", shape=dict(ex.timing_shape), seed_index=0,
                                  visible=False, passed=False, error=error, hint=hint))
    n_shapes = len({s.label for s in res.shapes})
    res.status = "failed"
    res.correctness_score = round(ex.correctness_points * (n_shapes - 1) / n_shapes, 4)
    res.message = (f"Correct on every correctness case, but wrong at the timing size {label}: {error}"
                   + (f" Hint: {hint}" if hint else "")
                   + " That size counts as one more shape: its share of the correctness points and the speed "
                     "points are lost.")
    res.speed_note = "no speed points: the kernel went wrong while being timed"


def _speed(ex: Exercise, res: ExerciseResult, module, launch: dict, backend, mode: str, send) -> None:
    if backend.name != "gpu":
        res.speed_measured = False
        if ex.speed_points:
            res.speed_pending = mode == "hidden"
            res.speed_note = (f"not measured: this ran on the CPU emulator, which checks results but says nothing about "
                              f"speed. The {ex.speed_points:g} speed points are not awarded here; they are awarded when "
                              f"the instructor grades on a GPU.")
        return
    if ex.reference_kernel is None or not ex.speed_points and mode == "hidden":
        return
    from kernels.runtime import errors as E

    send("stage", stage="timing")
    try:
        timing = measure_speed(ex, module, launch, backend, quick=(mode == "visible"))
    except (CaseError, E.KernelError) as exc:  # wrong output of a timed call, or a crash or hang at that size
        hint = exc.hint if isinstance(exc, CaseError) else _classify(exc)[1]
        if mode != "hidden":
            # check() awards no points: say what happened at the timing size, and
            # leave the verdict on the visible cases as it is.
            res.speed_note = (f"not measured: at the timing size {ex.shape_label(ex.timing_shape)}, {exc}"
                              + (f" Hint: {hint}" if hint else "")
                              + " Grading times the kernel at this size too, and a wrong result there costs that "
                                "size's share of the correctness points and the speed points.")
            return
        _timing_size_failed(ex, res, str(exc), hint)
        return
    except Exception as exc:  # a failure of the timing itself: the kernel keeps its correctness points
        import traceback

        res.speed_pending = mode == "hidden"
        res.speed_note = f"not measured: the timing failed ({type(exc).__name__}: {exc}); please tell the instructor"
        res.log = traceback.format_exc()[-4000:]
        return
    res.timing = timing
    res.speed_measured = True
    if mode != "hidden":
        res.speed_note = "measured for information only (check() awards no points)"
        return
    points, note = speed_points(ex, timing)
    res.speed_score = points
    res.speed_note = note
    if timing.get("below_floor"):
        res.status = "failed"
        res.message += " " + note
