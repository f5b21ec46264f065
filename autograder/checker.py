"""Check a kernel against an exercise's NumPy reference; runs inside the grading child.

For every case (shape, seed): generate inputs, compute the float64 reference
on the host (it is never placed on the device), fill outputs with NaN (or
zeros where the exercise says so), launch the student's kernel with the launch
configuration derived from their integers, synchronise the whole device,
compare every element, check the inputs were not modified, and on a GPU check
guard words before the start and past the end of every buffer.  A failing case is run a second time
with the same inputs: results that change from run to run point to a race.
One whose wrong elements all still hold the NaN an output is filled with is
run once with that output set to 0 instead: elements that then change were
written, but read first (``out[i] += ...``), not left unwritten.

What each launch left in the buffers is handed back to the grader
(:mod:`autograder.case_outputs`), which judges every case again itself
(:mod:`autograder.verdict`); this module's own account (its hints, the race
rerun, the errors the emulator or the GPU reported) can only take points
away.  The words for a pattern of errors are :mod:`autograder.diagnosis`'s.
"""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, replace

import numpy as np

from kernels.runtime import errors as E
from kernels.runtime import selection
from kernels.runtime.gpu import GPUBufferView
from kernels.runtime.measurement import measurement
from kernels.runtime.module import Kernel, compile_source, to_device
from kernels.runtime.signature import KernelSignature, strip_comments

from . import case_outputs
from .case_plan import case_label
from .causes import refine_hint
from .comparison import CaseError, compare
from .diagnosis import GUARD_FLOAT
from .exercise import Exercise, LaunchConfig, LaunchError
from .exercises import get_exercise
from .gpu_turn import take_gpu_turn
from .kernel_profile import case_to_profile, profile_of, profiling_case
from .mistakes import MistakeFinder
from .phase_times import CHILD_CHECKS, COMPILE, INPUTS, LAUNCHES, OUTPUTS, SOURCE_CHECK, TIMING, TRANSFERS, PhaseTimes
from .result import ExerciseResult, ShapeResult
from .scoring import (score_correctness, score_speed, speed_for_information, speed_not_measured_here,
                      speed_only_if_correct, speed_pending, timing_size_failed)
from .source_policy import SourceRefused, check_source
from .thread_maps import thread_map_data, wanted as thread_map_wanted
from .timing_policy import TimingSets, is_seed, measure_speed, timed_shape, times_kernel
from .verdict import case_data, judge_case

#: Elements of guard before and after every buffer on the GPU (the kernel is given the part between:
#: 256 elements keep its start as aligned as the allocation's, for vector loads).
GUARD_ELEMENTS = 256


# ------------------------------------------------------------------ running a case
def kernel_is_empty(source: str, kernel: str) -> bool:
    """True when the body of ``__global__ ... kernel(...)`` has no statement but ``__shared__`` declarations.

    That is the released stub (comments and the shared-memory declaration it gives, ``extern`` or of a fixed
    size) or an empty body.
    """
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
    body = re.sub(r"(?:extern\s+)?__shared__[^;]*;", "", body)
    return not body.strip()


def check_signature(ex: Exercise, module) -> str:
    """'' if the student's kernel has the declared parameters, else what differs."""
    if ex.kernel not in module.signatures:
        defined = ", ".join(module.signatures) or "none"
        return (f"The cell defines no __global__ function '{ex.kernel}' (kernels defined: {defined}). "
                f"Write: __global__ void {ex.signature}")
    got = module.signatures[ex.kernel].params
    want = ex.declared_params
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


#: (exception, status, hint) for a launch that raised, subclasses before their bases: the first match names it.
_LAUNCH_FAILURES = (
    (E.LaunchConfigError, "invalid_launch", ""),
    (E.KernelTimeoutError, "timeout", "A loop that never ends: check that the loop index advances (grid-stride step) "
                                      "and that every thread of a block reaches the same __syncthreads()."),
    (E.KernelRaceError, "launch_error", "A race: threads read shared or global memory that other threads write "
                                        "without a __syncthreads() (or an atomic) in between."),
    (E.BarrierDivergenceError, "launch_error", "Some threads of a block wait at a __syncthreads() that others never "
                                               "reach: keep barriers outside branches that depend on the thread (e.g. "
                                               "put the bounds check around the loads, not around the barrier)."),
    (E.UninitializedSharedMemoryError, "launch_error", "Shared memory read before any thread wrote it: initialise it "
                                                       "(and __syncthreads()) first."),
    (E.KernelMemoryError, "launch_error", "An access outside a buffer: a missing or wrong bounds check (if (i < n)) "
                                          "or wrong index arithmetic."),
    (E.KernelLaunchError, "launch_error", ""),
    (E.KernelArgumentError, "compile_error", ""),
    (MemoryError, "crashed", "The case needs more memory than the grader allows."),
)
#: A GPU's own launch errors for an access outside every buffer (the emulator raises KernelMemoryError instead).
_OUT_OF_BOUNDS_CUDA_ERRORS = ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED")


def _classify(exc: BaseException) -> tuple[str, str]:
    """(status, hint) for an exception from a launch."""
    for kind, status, hint in _LAUNCH_FAILURES:
        if isinstance(exc, kind):
            if kind is E.KernelLaunchError and getattr(exc, "cuda_error", None) in _OUT_OF_BOUNDS_CUDA_ERRORS:
                hint = ("An access outside every buffer: a missing or wrong bounds check (if (i < n)) or wrong index "
                        "arithmetic.")
            return status, hint
    return "crashed", ""


class CaseRunner:
    """Runs cases of one exercise with one compiled kernel on the current backend."""

    def __init__(self, ex: Exercise, kernel, backend, launch: dict, phases: PhaseTimes | None = None):
        self.ex = ex
        self.phases = phases if phases is not None else PhaseTimes()
        if backend.name == "cpu":
            kernel = _inputs_returned(kernel)
        self.kernel = kernel
        self.backend = backend
        self.launch = launch
        self.guard = GUARD_ELEMENTS if backend.name == "gpu" else 0
        self.params = kernel.signature.params
        self._poison = None
        self.probed: dict[str, str] = {}  # per shape probed: the probe's hint, or ''
        self.rerun: dict[str, bool] = {}
        # per shape: what the NaN of an output comes from, as (hint, whether it is the only cause there is): an
        # output read before it was written (the only one) or a NaN the kernel computes (a probe or a named mistake
        # says which computation better); ('', False) when neither
        self.read_first: dict[str, tuple[str, bool]] = {}
        self.mistakes = MistakeFinder(ex)  # names a mistake from a wrong output, within its cost
        self.outputs_dir: str | None = None  # where each case's buffers are handed back to the grader

    # buffers ----------------------------------------------------------
    def _buffer(self, host: np.ndarray):
        """(what the grader reads back, what the kernel is given): on the GPU one allocation with guard
        words before and after the data, and a view of the data between them."""
        if not self.guard:
            buf = to_device(np.ascontiguousarray(host), backend=self.backend)
            return buf, buf
        padded = np.empty(host.size + 2 * self.guard, host.dtype)
        padded[: self.guard] = self._guard_value(host.dtype)
        padded[self.guard: self.guard + host.size] = host.ravel()
        padded[self.guard + host.size:] = self._guard_value(host.dtype)
        whole = to_device(padded, backend=self.backend)
        return whole, self._view(whole, host.size)

    def _view(self, whole, size: int):
        return GPUBufferView(whole, self.guard, (size,))

    @staticmethod
    def _guard_value(dtype):
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            return np.array(GUARD_FLOAT).astype(dtype)
        return np.array(-0x5A5A5A5A).astype(dtype) if dtype.itemsize >= 4 else np.array(-90).astype(dtype)

    def _guard_intact(self, words: np.ndarray) -> bool:
        g = self._guard_value(words.dtype)
        return np.array_equal(words.view(np.uint8), np.full(words.size, g, words.dtype).view(np.uint8))

    def _read(self, buf, size: int, name: str) -> np.ndarray:
        data = buf.get().ravel()
        if not self.guard:
            return data[:size]
        if not self._guard_intact(data[: self.guard]):
            raise CaseError("launch_error", f"The kernel wrote before the start of '{name}' (into the guard the "
                            f"grader placed before its first element).",
                            "An out-of-bounds write at a negative index: index arithmetic that goes below 0 "
                            "(e.g. i - 1 for the first thread) or a missing check (if (i > 0)).")
        if not self._guard_intact(data[self.guard + size:]):
            raise CaseError("launch_error", f"The kernel wrote past the end of '{name}' (into the guard the grader "
                            f"placed after its {size} elements).",
                            "An out-of-bounds write: a missing or wrong bounds check (if (i < n)).")
        return data[self.guard: self.guard + size]

    # one launch -------------------------------------------------------
    def run_once(self, inputs: dict, expected: dict, config: LaunchConfig,
                 zero_filled: tuple[str, ...] = ()) -> tuple[dict, dict]:
        """Launch once on fresh device copies of ``inputs``; returns (outputs, inputs read back).  Outputs are
        filled as the exercise says (NaN or zeros), those named in ``zero_filled`` with zeros."""
        args, buffers = [], {}
        phase = self.phases.phase
        try:
            for arg, param in zip(self.ex.args, self.params):
                value = inputs.get(arg.name)
                if arg.role == "scalar":
                    args.append(value)
                    continue
                if arg.role == "out":
                    shape = np.shape(expected[arg.name])
                    nan = arg.init == "nan" and arg.name not in zero_filled
                    if param.dtype.kind == "f":
                        host = np.full(shape, np.nan if nan else 0, dtype=param.dtype)
                    else:
                        host = np.zeros(shape, dtype=param.dtype)
                        if nan:
                            host[...] = self._guard_value(param.dtype)
                else:
                    host = value
                with phase(TRANSFERS):
                    whole, given = self._buffer(host)
                buffers[arg.name] = (whole, host.size)
                args.append(given)
            with phase(LAUNCHES):
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
            with phase(TRANSFERS):
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
            measurement(self.backend).poison_shared_memory()
        except Exception:  # noqa: BLE001 - best effort: a kernel is still checked without it
            pass


def _inputs_returned(kernel):
    """The same kernel, launched so that the emulator returns its ``const`` buffers too.

    The emulator copies back only what a kernel may write; a kernel that casts
    ``const`` away and writes its input would go unseen.  Declaring every
    pointer writable for the launch makes the emulator return it, so the
    "inputs unchanged" check sees what a GPU would.
    """
    sig = kernel.signature
    params = tuple(replace(p, is_const=False) if p.is_pointer else p for p in sig.params)
    return Kernel(kernel.module, KernelSignature(sig.name, params, sig.line))


def run_case(runner: CaseRunner, ex: Exercise, case: dict) -> ShapeResult:
    shape = case["shape"]
    result = ShapeResult(label=case_label(ex, case), shape=dict(shape), seed_index=case["seed_index"],
                         visible=case["visible"], passed=False)
    try:
        _, config = ex.resolve_launch(shape, runner.launch)
    except LaunchError as exc:
        raise CaseError("invalid_launch", f"Launch configuration refused for {result.label}: {exc}") from None
    phase = runner.phases.phase
    with phase(INPUTS):
        inputs, pristine, expected, scales = case_data(ex, shape, case["seed"])
    outputs, after = runner.run_once(inputs, expected, config)
    # The arrays go back to the grader, which judges the case again itself (autograder.verdict).
    if runner.outputs_dir:
        with phase(OUTPUTS):
            case_outputs.save(runner.outputs_dir, f"case-{case['index']}", outputs, after)
    with phase(CHILD_CHECKS):
        first = judge_case(ex, result, outputs, after, pristine, expected, scales, config)
    if first is not None:
        with phase(LAUNCHES):  # what a failing case costs besides: its probes and reruns
            _explain_failure(runner, ex, case, result, first, pristine, expected, scales, outputs, config)
    return result


def _explain_failure(runner: CaseRunner, ex: Exercise, case: dict, result: ShapeResult, first, pristine: dict,
                     expected: dict, scales: dict, outputs: dict, config: LaunchConfig) -> None:
    """A failing case's hint: a probe's, the mistake under which the reference gives the output, an output read
    before it was written, or a race (its reruns)."""
    shape = case["shape"]
    arg, cmp, got = first
    if ex.probe is not None and result.label not in runner.probed:  # once per shape: probes cost launches
        try:
            runner.probed[result.label] = ex.probe(shape, lambda probe_inputs: runner.run_once(
                probe_inputs, ex.reference(probe_inputs), config)[0])
        except CaseError:
            runner.probed[result.label] = ""
    probe_hint = runner.probed.get(result.label, "")
    if probe_hint:
        result.hint = probe_hint
    mistake_hint = "" if probe_hint else runner.mistakes.hint(result.label, pristine, expected, scales, outputs)
    result.hint = mistake_hint or result.hint
    if _all_nan(arg, cmp, got):
        if result.label not in runner.read_first:  # one launch per shape; every case of that shape says it
            runner.read_first[result.label] = _read_before_written(
                runner, ex, shape, case["seed"], expected, scales[arg.name], config, arg.name, cmp["bad"])
        hint, only_cause = runner.read_first[result.label]
        if hint and (only_cause or not (probe_hint or mistake_hint)):
            result.hint = hint
            return
    if runner.rerun.get(result.label):
        return
    runner.rerun[result.label] = True
    # Same inputs again (once per shape): a result that changes points to a race.
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


def _all_nan(arg, cmp: dict, got: np.ndarray) -> bool:
    """True when every wrong element of an output the grader fills with NaN is still NaN."""
    return (arg.role == "out" and arg.init == "nan" and got.dtype.kind == "f"
            and bool(np.all(np.isnan(got[cmp["bad"]]))))


def _read_before_written(runner: CaseRunner, ex: Exercise, shape: dict, seed: int, expected: dict, scale,
                         config: LaunchConfig, name: str, bad: np.ndarray) -> tuple[str, bool]:
    """The hint for an output ``name`` whose ``bad`` elements came out NaN although the kernel writes them: it read
    them (``+=``) before writing them, and the NaN the grader fills outputs with went through.  One launch, with
    that output set to 0 first, tells it from elements never written (which stay 0) and from a NaN the kernel
    computes (which stays NaN): (the hint, whether it is the only cause there is); ('', False) when neither is it."""
    try:
        again, _ = runner.run_once(ex.make_inputs(shape, np.random.default_rng(seed)), expected, config,
                                   zero_filled=(name,))
    except CaseError:
        return "", False
    now = again[name].astype(np.float64)[bad]
    if now.size and np.all(np.isnan(now)):  # NaN from a 0 start: the kernel computed it, it did not leave it there
        return (f"{name} came out NaN where the answer is a number, and still does with {name} set to 0 before the "
                f"launch: the kernel writes NaN there, it does not leave those elements unwritten. NaN comes from 0/0, "
                f"inf - inf, 0 * inf, the square root or log of a negative number, acos or asin of a value past +-1 "
                f"(a cosine rounded to just over 1), or a value read before anything was stored to it."), False
    written = np.count_nonzero(np.isfinite(now) & (now != 0))
    if not written:
        return "", False
    right = compare(again[name], expected[name], scale, ex.rtol, ex.atol)["n_bad"] == 0
    outcome = "the kernel's result is right" if right else f"{written} of them change"
    return (f"{name} came out NaN where the kernel does write it: it reads {name} before writing it "
            f"(read-before-write), e.g. it adds into the output ({name}[...] += ...) instead of storing to it "
            f"({name}[...] = ...). With {name} set to 0 before the launch, {outcome}; but the grader fills "
            f"every output with NaN before the launch to catch exactly this, as a GPU leaves whatever was in memory "
            f"there. Accumulate in a register and store the result once, or set the element before adding into it."), True


# ------------------------------------------------------------------ the whole request
def backend_for(res: ExerciseResult):
    """The backend this child runs kernels on, named in ``res``; None (``res`` says why) when there is none."""
    try:
        backend = selection.current_backend()
    except Exception as exc:
        res.status, res.message = "crashed", f"No backend to run kernels on: {exc}"
        return None
    res.backend = backend.name
    try:
        res.device = str(backend.describe().get("name") or backend.name)
    except Exception:
        res.device = backend.name
    return backend


def run_request(request: dict, send: Callable[..., None] = lambda *a, **k: None,
                phases: PhaseTimes | None = None) -> ExerciseResult:
    """Check one submission as described by ``request`` (see :mod:`autograder.isolation`); ``phases`` is told
    where the time went."""
    phases = phases if phases is not None else PhaseTimes()
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
    backend = backend_for(res)
    if backend is None:
        return res
    # the timing's input sets are drawn while the kernel compiles and the correctness cases run
    timing_sets = _timing_sets(ex, request) if times_kernel(ex, backend.name == "gpu", mode) else None

    send("stage", stage="compile")
    source = "\n" * max(0, int(request.get("cell_line", 1)) - 1) + request["source"]
    # what the source may include and contain is decided on its preprocessed text (see source_policy)
    try:
        with phases.phase(SOURCE_CHECK):
            problem = check_source(source)
    except SourceRefused as exc:
        problem = str(exc)
    if problem:
        res.status, res.message = "compile_error", problem
        return res
    try:
        with phases.phase(COMPILE):
            module = compile_source(source, name=f"{ex.name}.cu", backend=backend)
    except E.KernelCompileError as exc:
        res.status = "compile_error"
        res.message = f"The kernel did not compile. {exc}"
        res.log = (getattr(exc, "log", "") or "")[-4000:]
        return res
    except E.KernelError as exc:
        res.status, res.message = "compile_error", f"The kernel could not be loaded: {exc}"
        return res
    with phases.phase(SOURCE_CHECK):
        problem = check_signature(ex, module) or (ex.source_check(source, ex.kernel) if ex.source_check else "")
    if problem:
        res.status, res.message = "wrong_kernel", problem
        return res
    if kernel_is_empty(source, ex.kernel):
        res.status = "not_written"
        res.message = (f"No code was written: the body of {ex.kernel} holds only comments and the released "
                       f"declarations. Write the kernel where the cell says YOUR CODE HERE.")
        return res
    kernel = module.function(ex.kernel)
    runner = CaseRunner(ex, kernel, backend, launch, phases)
    runner.outputs_dir = request.get("outputs_dir")

    if request.get("gpu_lock_fd") is not None:  # compiled while another grading had the card: now our turn
        take_gpu_turn(int(request["gpu_lock_fd"]), send)
    send("stage", stage="correctness")
    failure: CaseError | None = None
    # check() on the emulator profiles the kernel on its largest visible case (never in grading)
    profile_at = case_to_profile(cases, bool(request.get("profile")) and mode == "visible" and backend.name == "cpu")
    for index, case in enumerate(cases):
        send("start_case", index=index)
        try:
            with profiling_case(index == profile_at) as profiles:
                shape_result = run_case(runner, ex, {**case, "index": index})
            if shape_result.passed and index == profile_at:
                res.profile = profile_of(profiles, ex.kernel)
            if not shape_result.passed:
                shape_result.hint = refine_hint(shape_result.hint, source=source, launch=launch,
                                                error=shape_result.error, wrong_result=True, shape=case["shape"])
        except CaseError as exc:
            exc.hint = refine_hint(exc.hint, source=source, launch=launch, error=str(exc))
            failure = exc
            shape_result = ShapeResult(label=case_label(ex, case), shape=dict(case["shape"]),
                                       seed_index=case["seed_index"], visible=case["visible"], passed=False,
                                       error=str(exc), hint=exc.hint)
        except MemoryError:
            failure = CaseError("crashed", f"Out of memory on {case_label(ex, case)}.")
            shape_result = ShapeResult(label=case_label(ex, case), shape=dict(case["shape"]),
                                       seed_index=case["seed_index"], visible=case["visible"], passed=False,
                                       error=str(failure))
        res.shapes.append(shape_result)
        send("case", case=_shape_dict(shape_result))
        if failure is not None:
            break  # after a failed launch the device (a CUDA context) may be unusable

    if thread_map_wanted(ex, request, backend.name, failure):  # check()'s picture, of a failing kernel too
        res.thread_map = thread_map_data(ex, module, launch)
    score_correctness(ex, res, failure)
    if res.status == "passed":
        with phases.phase(TIMING):
            _speed(ex, res, module, launch, backend, mode, send, request.get("outputs_dir"), timing_sets)
    else:
        speed_only_if_correct(res)
    res.elapsed_s = round(time.monotonic() - started, 3)
    return res


def _shape_dict(s: ShapeResult) -> dict:
    return asdict(s)


def _timing_sets(ex: Exercise, request: dict) -> TimingSets:
    """The timing's input sets, of the seeds the grading process chose (it draws the same sets to check the
    timed call's output), else of fresh ones; drawn on a thread from now on."""
    seeds = request.get("timing_seeds")
    if isinstance(seeds, list) and len(seeds) == 2 and all(is_seed(v) for v in seeds):
        return TimingSets(ex, timed_shape(ex), seeds[0], seeds[1], with_reference=True)
    return TimingSets.fresh(ex, timed_shape(ex), with_reference=True)


def _speed(ex: Exercise, res: ExerciseResult, module, launch: dict, backend, mode: str, send,
           outputs_dir: str | None = None, timing_sets: TimingSets | None = None) -> None:
    if backend.name != "gpu":
        speed_not_measured_here(ex, res)
        return
    if not times_kernel(ex, backend.name == "gpu", mode):
        return
    send("stage", stage="timing")
    try:
        timing = measure_speed(ex, module, launch, backend, quick=(mode == "visible"),
                               outputs_dir=outputs_dir, sets=timing_sets)
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
        send("timing_failure", error=str(exc), hint=hint)
        timing_size_failed(ex, res, str(exc), hint)
        return
    except Exception as exc:  # a failure of the timing itself: the kernel keeps its correctness points
        speed_pending(res, f"not measured: the timing failed ({type(exc).__name__}: {exc}); please tell the instructor")
        res.log = traceback.format_exc()[-4000:]
        return
    res.timing = timing
    res.speed_measured = True
    if mode != "hidden":
        speed_for_information(res)
        return
    score_speed(ex, res, timing)
