"""How the grader times a kernel against the reference kernel (GPU only).

Runs inside the grading child, with trusted code only (a student cannot patch
it: their Python never runs there).  The policy:

* CUDA events recorded on a stream the grader creates; each call timed on its
  own, never a batch divided by its count;
* the student's kernel and the reference kernel alternate (student,
  reference, student, ...) in the same process, after 3 untimed warm-up pairs;
* before every timed call: the working buffers are filled with inputs no
  earlier call saw.  Two input sets, A and B, are drawn on the host once;
  every call gets its own blend of them, made on the device from a fresh seed
  (:mod:`kernels.runtime.input_blend`: about half of the elements change from
  one call to the next, so a kernel that keeps answers per input gains
  nothing).  Then L2 is flushed by writing a buffer twice its size, then the
  start event is recorded;
* after every timed call the whole context is synchronised (work left running
  on another stream is waited for); the student's output is kept, and the
  reference kernel runs on the same inputs (after the student's kernel has
  finished, so it cannot touch the reference's output); the two outputs are
  compared element by element on the device, at four times the exercise's
  tolerance (two float32 results).  The first call runs on set A itself and
  is checked against the host's float64 reference at the exercise's own
  tolerance; after the last timed call one more call on a blend of its own
  hands its output back, and the grader rebuilds that call's inputs from the
  three seeds and checks it against its own float64 reference
  (``autograder.verdict``) -- a kernel that does less work on later calls,
  or overwrites its inputs' sources on the device, fails there;
* samples until the standard error of the mean is under 1 % of the mean for
  both kernels (at least 10 pairs) or 100 pairs; the medians are compared;
* the physical floor (bytes over the peak bandwidth, flops over the peak
  rate) is measured with the times, and a time below it is marked so.

What the times are worth in points is :mod:`autograder.scoring`'s.  The
runtime's measuring layer imports PyCUDA only when it is used, so this module
imports on a machine without it.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from kernels.runtime import errors as E
from kernels.runtime import measurement as gpu_measurement  # the module, so that a stand-in can replace measurement()
from kernels.runtime.input_blend import TOLERANCE_FACTOR, argument_seed, blend_host, mismatches_host

from . import case_outputs
from .comparison import CaseError, count_wrong
from .exercise import Exercise, LaunchError
from .scoring import is_below_floor

WARMUP_PAIRS = 3
MIN_PAIRS = 10
MAX_PAIRS = 100
QUICK_MIN, QUICK_MAX = 5, 15
TARGET_STDERR = 0.01


def stderr_fraction(samples: list[float]) -> float:
    if len(samples) < 2:
        return float("inf")
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / len(samples) ** 0.5 / mean if mean > 0 else float("inf")


def enough_samples(ref: list[float], stu: list[float], minimum: int, maximum: int, target: float = TARGET_STDERR) -> bool:
    n = min(len(ref), len(stu))
    if n >= maximum:
        return True
    return n >= minimum and stderr_fraction(ref) < target and stderr_fraction(stu) < target


def physical_floor_ms(ex: Exercise, shape: dict, peak_bandwidth: float, peak_flops: float) -> float:
    """``peak_flops`` is the FP32 units' peak; an exercise on the tensor cores runs up to ``peak_over_fp32`` times it."""
    return 1e3 * max(ex.bytes_moved(shape) / peak_bandwidth, ex.flops(shape) / (peak_flops * ex.peak_over_fp32))


# ------------------------------------------------------------------ the timing loop


def draw_pair(ex: Exercise, shape: dict, seed_a: int, seed_b: int) -> tuple[dict, dict]:
    """The two input sets every blend of a timing is made of (drawn side by side: each takes seconds at timing sizes)."""
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(lambda seed: ex.make_inputs(shape, np.random.default_rng(seed)), (seed_a, seed_b))
    return a, b


def element_scales(scale, shape) -> np.ndarray:
    """The error scale of each element of an output of ``shape`` for the timed comparison: the exercise's scale
    (any shape that broadcasts to it), raised to its mean where below it; float32, C-contiguous."""
    scale = np.abs(np.broadcast_to(np.asarray(scale, np.float64), shape))
    floor = float(np.mean(scale)) if scale.size else 0.0
    return np.ascontiguousarray(np.maximum(scale, floor), dtype=np.float32)


class TimingSets:
    """The two input sets of one timing, drawn on a thread of their own once started.

    Drawing them takes seconds at timing sizes.  The grading child starts it before compiling, so that it
    overlaps the compilation and the correctness cases.  The grading process, which chose the seeds,
    starts it when the child says it is timing (the ``timing`` stage), so that no CPU goes to drawing the
    sets of a kernel that fails its cases (most of a class's first submissions, several gradings of a
    course on one machine at once); :meth:`get` starts it if nothing did.  With ``with_reference`` set
    A's float64 reference and error scale are computed too (the first timed call is checked against them).
    """

    def __init__(self, ex: Exercise, shape: dict, seed_a: int, seed_b: int, with_reference: bool = False,
                 start: bool = True):
        self.seeds = (int(seed_a), int(seed_b))
        self._done = threading.Event()
        self._value: tuple | None = None
        self._error: BaseException | None = None
        self._started = False
        self._start_lock = threading.Lock()

        def draw() -> None:
            try:
                set_a, set_b = draw_pair(ex, shape, seed_a, seed_b)
                extra = ()
                if with_reference:
                    pristine = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in set_a.items()}
                    extra = (ex.reference(pristine), ex.error_scale(pristine))
                self._value = (set_a, set_b, *extra)
            except BaseException as exc:  # handed to whoever waits for the sets
                self._error = exc
            finally:
                self._done.set()

        self._draw = draw
        if start:
            self.start()

    @classmethod
    def fresh(cls, ex: Exercise, shape: dict, with_reference: bool = False, start: bool = True) -> "TimingSets":
        return cls(ex, shape, _new_seed(), _new_seed(), with_reference, start)

    def start(self) -> None:
        """Start drawing the sets on a thread (once: later calls do nothing)."""
        with self._start_lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._draw, name="timing-sets", daemon=True).start()

    @property
    def started(self) -> bool:
        return self._started

    def get(self) -> tuple:
        """(set A, set B) and, drawn ``with_reference``, (A's float64 outputs, A's error scales); waits for the draw."""
        self.start()
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


def timed_shape(ex: Exercise) -> dict:
    """The shape every timing runs at: the exercise's timing shape, else its last hidden shape."""
    return dict(ex.timing_shape or ex.hidden_shapes[-1])


def blended_inputs(ex: Exercise, a: dict, b: dict, call_seed: int) -> dict:
    """The inputs of the call drawn with ``call_seed``, on the host: every array argument blended, scalars from A."""
    out = {}
    for position, arg in enumerate(ex.args):
        value = a.get(arg.name)
        if arg.role != "scalar" and isinstance(value, np.ndarray):
            out[arg.name] = blend_host(value, b[arg.name], argument_seed(call_seed, position))
        else:
            out[arg.name] = value
    return out


def is_seed(value) -> bool:
    """A timing seed as the grader makes them: a plain integer (not a bool) of at most 64 bits."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64


def times_kernel(ex: Exercise, on_gpu: bool, mode: str) -> bool:
    """Whether a check of ``ex`` times the kernel (if it passes): on a GPU, against a reference kernel, for
    speed points (grading) or for information (check())."""
    return on_gpu and ex.reference_kernel is not None and bool(ex.speed_points or mode != "hidden")


def _new_seed() -> int:
    return int.from_bytes(os.urandom(8), "little") >> 1


def measure_speed(ex: Exercise, module, launch: dict, backend, quick: bool = False, outputs_dir: str | None = None,
                  sets: TimingSets | None = None) -> dict:
    """Time the student's kernel against the exercise's reference kernel on the GPU.

    The measuring itself (events, L2 flush, peaks, raw buffers, the blends) is
    the runtime's :mod:`kernels.runtime.measurement`; this function is the
    policy around it.  ``sets``: the input sets, drawn ``with_reference`` (default: drawn here, fresh seeds).
    """
    gpu = gpu_measurement.measurement(backend)
    rk = ex.reference_kernel
    shape = timed_shape(ex)
    try:
        _, config = ex.resolve_launch(shape, launch)
    except LaunchError as exc:
        raise CaseError("invalid_launch", f"launch configuration refused for the timing size: {exc}") from None
    ref_config = rk.launch(shape)
    ref_module = rk.compile(backend)

    student_sig = module.signatures[ex.kernel]
    ref_sig = ref_module.signatures[rk.kernel]
    stu_fn = gpu.raw_kernel(module, ex.kernel, config.shared)
    ref_fn = gpu.raw_kernel(ref_module, rk.kernel, ref_config.shared)

    info = gpu.info
    stream = gpu.stream()
    lo, hi = (QUICK_MIN, QUICK_MAX) if quick else (MIN_PAIRS, MAX_PAIRS)

    # Two sets drawn on the host; every call gets its own blend of them, made on the device.
    sets = sets or TimingSets.fresh(ex, shape, with_reference=True)
    seed_a, seed_b = sets.seeds
    set_a, set_b, expected_a, scale_a = sets.get()
    params = dict(zip((a.name for a in ex.args), student_sig.params))
    source_a, source_b, out_init, work, keep, n_elements = {}, {}, {}, {}, {}, {}
    for position, arg in enumerate(ex.args):
        if arg.role == "scalar":
            continue
        param = params[arg.name]
        if arg.role == "out":
            host = np.full(np.shape(expected_a[arg.name]), np.nan if arg.init == "nan" else 0, dtype=param.dtype)
            out_init[arg.name] = gpu.to_device(host)
            keep[arg.name] = gpu.allocate(host.nbytes)
        else:
            host = np.ascontiguousarray(set_a[arg.name])
            source_a[arg.name] = (position, gpu.to_device(host))
            source_b[arg.name] = gpu.to_device(np.ascontiguousarray(set_b[arg.name]))
            if arg.role == "inout":
                keep[arg.name] = gpu.allocate(host.nbytes)
        work[arg.name] = gpu.allocate(host.nbytes)
        n_elements[arg.name] = (host.size, host.itemsize, host.dtype, host.shape)
    # The comparison's bound: the exercise's tolerance, widened for two float32 results (student's, reference's),
    # on each element's error scale.  Set A's scale stands for every call's (the blend draws each element from
    # set A or B, alike in kind), never below its mean: an element whose rounding set A shows to be large (a row
    # of LayerNorm with almost no spread) keeps its larger bound, the rest share the average one.
    bound_scale = {arg.name: element_scales(scale_a[arg.name], np.shape(expected_a[arg.name]))
                   for arg in ex.outputs}
    bound_scale_on_device = {name: gpu.to_device(scale) for name, scale in bound_scale.items()
                             if n_elements[name][2] == np.float32}

    def arguments(sig, order):
        args = []
        for name, param in zip(order, sig.params):
            args.append(work[name] if name in work else param.dtype.type(set_a[name]))
        return args

    stu_order = [a.name for a in ex.args]
    ref_order = list(rk.arg_order or stu_order)

    def prepare(call_seed):
        """The working buffers hold the inputs of the call drawn with ``call_seed`` (None: set A itself)."""
        for name, (position, dev_a) in source_a.items():
            size, itemsize, _, _ = n_elements[name]
            if call_seed is None:
                gpu.copy_on_device(work[name], dev_a, size * itemsize, stream)
            else:
                gpu.blend(work[name], dev_a, source_b[name], size, itemsize, argument_seed(call_seed, position), stream)
        for name, dev in out_init.items():
            size, itemsize, _, _ = n_elements[name]
            gpu.copy_on_device(work[name], dev, size * itemsize, stream)
        gpu.flush_l2(stream)

    def timed(fn, sig, order, cfg, call_seed) -> float:
        prepare(call_seed)
        args = arguments(sig, order)
        ms = gpu.elapsed_ms(lambda: fn(*args, grid=cfg.grid, block=cfg.block, shared=cfg.shared, stream=stream), stream)
        gpu.synchronize()  # anything else still running (another stream) finishes before the next step
        return ms

    def wrong(call: int, detail: str) -> CaseError:
        return CaseError(
            "failed",
            f"the output of timed call #{call} was wrong ({detail}) although the correctness cases passed",
            "A kernel must compute its result on every call, from the inputs of that call (no results kept "
            "from an earlier call, no work left running after it returns).",
        )

    def read(name) -> np.ndarray:
        size, _, dtype, host_shape = n_elements[name]
        host = np.empty(host_shape, dtype)
        gpu.copy_to_host(host, work[name])
        return host

    def check_against_float64(call: int) -> None:
        """Call on set A: every element against the float64 reference, at the exercise's tolerance."""
        for arg in ex.outputs:
            host = read(arg.name)
            cmp = count_wrong(host, expected_a[arg.name], scale_a[arg.name], ex.rtol, ex.atol)
            if cmp["n_bad"]:
                raise wrong(call, f"{cmp['n_bad']} of {host.size} elements; e.g. expected {cmp['expected']:.6g}, "
                                  f"got {cmp['got']:.6g}")

    def check_against_reference(call: int) -> None:
        """The student's output (kept) against the reference kernel's (in the working buffers), same inputs."""
        for arg in ex.outputs:
            size, _, dtype, host_shape = n_elements[arg.name]
            rtol = TOLERANCE_FACTOR * ex.rtol
            if dtype == np.float32:
                bad, first = gpu.count_mismatches(keep[arg.name], work[arg.name], size, rtol, ex.atol,
                                                  bound_scale_on_device[arg.name], stream)
            else:
                got = np.empty(host_shape, dtype)
                gpu.copy_to_host(got, keep[arg.name])
                bad, first = mismatches_host(got, read(arg.name), rtol, ex.atol, bound_scale[arg.name])
            if bad:
                raise wrong(call, f"{bad} of {size} elements differ from the reference kernel's on the same inputs, "
                                  f"the first at index {first}")

    def run_pair(call: int, call_seed) -> tuple[float, float]:
        """The student's kernel, then the reference on the same inputs; the student's output checked."""
        t = timed(stu_fn, student_sig, stu_order, config, call_seed)
        if call_seed is None:
            check_against_float64(call)
        for name, buffer in keep.items():
            size, itemsize, _, _ = n_elements[name]
            gpu.copy_on_device(buffer, work[name], size * itemsize, stream)
        # The student's kernel has finished (the context was synchronised) before the reference starts,
        # so nothing of it can touch the reference's output.
        r = timed(ref_fn, ref_sig, ref_order, ref_config, call_seed)
        check_against_reference(call)
        return r, t

    seeds_used: set[int] = set()

    def fresh_seed() -> int:
        seed = _new_seed()
        while seed & 0xFFFFFFFF in seeds_used:
            seed = _new_seed()
        seeds_used.add(seed & 0xFFFFFFFF)
        return seed

    try:
        run_pair(0, None)  # set A: the one call checked against float64 here
        for call in range(1, WARMUP_PAIRS):
            run_pair(call, fresh_seed())
        ref_ms: list[float] = []
        stu_ms: list[float] = []
        call = WARMUP_PAIRS
        while not enough_samples(ref_ms, stu_ms, lo, hi):
            r, t = run_pair(call, fresh_seed())
            ref_ms.append(r)
            stu_ms.append(t)
            call += 1
        # One more call, on inputs of its own, whose output the grader checks again itself (it rebuilds the
        # inputs from the three seeds and computes the float64 reference).
        last_seed = fresh_seed()
        timed(stu_fn, student_sig, stu_order, config, last_seed)
        if outputs_dir:
            case_outputs.save(outputs_dir, "timing", {arg.name: read(arg.name) for arg in ex.outputs})
    except gpu.error as exc:
        raise gpu.launch_error(exc, ex.kernel) from None
    except E.KernelError:
        raise

    peak_bw, measured_bw = gpu.peak_bandwidth(stream)
    peak_flops = gpu.peak_fp32()
    floor_ms = physical_floor_ms(ex, shape, peak_bw, peak_flops)
    student = statistics.median(stu_ms)
    reference = statistics.median(ref_ms)
    return {
        "shape": shape,
        "student_ms": student,
        "reference_ms": reference,
        "speedup": reference / student if student > 0 else float("inf"),
        "floor_ms": floor_ms,
        "percent_of_floor": 100.0 * floor_ms / student if student > 0 else float("inf"),
        "below_floor": is_below_floor(student, floor_ms),
        "student_stderr": stderr_fraction(stu_ms),
        "reference_stderr": stderr_fraction(ref_ms),
        "pairs": len(stu_ms),
        "input_sets": len(seeds_used) + 1,
        "timed_inputs": {"seed_a": seed_a, "seed_b": seed_b, "call_seed": last_seed},
        "student_launch": {"grid": list(config.grid), "block": list(config.block), "shared": config.shared},
        "reference_kernel": f"{rk.version.source_file if rk.source is None else rk.topic + '.cu (generated)'}:{rk.kernel}",
        "peak_bandwidth_gbs": peak_bw / 1e9,
        "measured_copy_bandwidth_gbs": measured_bw / 1e9,
        "peak_gflops": peak_flops / 1e9,
        "device": info.get("name", ""),
        "driver": info.get("driver_version", ""),
        "compute_capability": info.get("compute_capability", ""),
        "clocks": gpu.clocks(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
