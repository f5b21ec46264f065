"""How the grader times a kernel and turns the time into speed points (GPU only).

Runs inside the grading child, with trusted code only (a student cannot patch
it: their Python never runs there).  The policy:

* CUDA events recorded on a stream the grader creates; each call timed on its
  own, never a batch divided by its count;
* the student's kernel and the reference kernel alternate (reference,
  student, reference, ...) in the same process, after 3 untimed warm-up pairs;
* before every timed call: the working buffers are reset from pristine device
  copies of an input set (see :class:`InputPool`: a freshly drawn set for
  every timed call while the budgets allow, never the warm-up's; after that
  earlier ones in random order, with the number of timed calls capped so that
  most of them -- the median included -- ran on inputs the kernel had never
  seen: a kernel that keeps answers per input gains nothing), then L2 is
  flushed by writing a buffer twice its size, then the start event is
  recorded;
* after every timed call the whole context is synchronised (work left running
  on another stream is waited for) and the student's output is re-validated
  against the host's float64 reference for that input set: a random sample of
  elements on every call, every element on the first, a middle and the last;
* samples until the standard error of the mean is under 1 % of the mean for
  both kernels (at least 10 pairs) or 100 pairs; the medians are compared;
* a time below the physical floor (bytes over the peak bandwidth, flops over
  the peak rate) is an error, not a record: no speed points and a failed
  status;
* speed points in bands of the speed-up over the reference, only for a kernel
  that passed every correctness case.

Everything that imports PyCUDA does so inside the functions, so this module
imports on a machine without it.
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np

from .comparison import CaseError, compare
from .exercise import Exercise, LaunchError

WARMUP_PAIRS = 3
MIN_PAIRS = 10
MAX_PAIRS = 100
QUICK_MIN, QUICK_MAX = 5, 15
TARGET_STDERR = 0.01
#: device bytes that the distinct input sets of one timing may hold (beyond the minimum count)
INPUT_SET_BYTES = 4 * 2**30
#: host seconds that drawing input sets may take (beyond the minimum count)
INPUT_SET_SECONDS = 20.0
SAMPLE_ELEMENTS = 65536
#: A measured time this far below the floor is impossible (event resolution and clock drift allowance).
FLOOR_MARGIN = 0.9


def speed_points(ex: Exercise, timing: dict) -> tuple[float, str]:
    """(points, explanation) from a timing: 0 below the floor, else by the exercise's bands."""
    if timing.get("below_floor"):
        return 0.0, (
            f"rejected: {timing['student_ms']:.4g} ms is below the physical floor of {timing['floor_ms']:.4g} ms "
            f"({ex.bytes_moved(timing['shape']):.3g} bytes at {timing['peak_bandwidth_gbs']:.0f} GB/s): the kernel cannot "
            f"have done all the work in that time (skipped or cached work?)"
        )
    speedup = float(timing["speedup"])
    for minimum, fraction in ex.speed_bands:
        if speedup >= minimum:
            points = round(ex.speed_points * fraction, 4)
            return points, f"{speedup:.2f}x the reference's speed (band >= {minimum:g}x): {points:g} of {ex.speed_points:g} points"
    lowest = ex.speed_bands[-1][0] if ex.speed_bands else 0
    return 0.0, f"{speedup:.2f}x the reference's speed, below the lowest band ({lowest:g}x): no speed points"


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
    return 1e3 * max(ex.bytes_moved(shape) / peak_bandwidth, ex.flops(shape) / peak_flops)


# ------------------------------------------------------------------ the timing loop


class _InputSet:
    """One freshly drawn set of inputs: its float64 expectations, and pristine device copies to reset from."""

    def __init__(self, ex: Exercise, shape: dict, params, seed: int, gpu):
        self.seed = seed
        rng = np.random.default_rng(seed)
        self.inputs = ex.make_inputs(shape, rng)
        pristine = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.inputs.items()}
        self.expected = ex.reference(pristine)
        self.scale = ex.error_scale(pristine)
        self.pristine_dev: dict[str, object] = {}
        self.host_init: dict[str, np.ndarray] = {}
        for arg, param in zip(ex.args, params):
            if arg.role == "scalar":
                continue
            if arg.role == "out":
                host = np.full(np.shape(self.expected[arg.name]), np.nan if arg.init == "nan" else 0, dtype=param.dtype)
            else:
                host = np.ascontiguousarray(self.inputs[arg.name])
            self.host_init[arg.name] = host
            self.pristine_dev[arg.name] = gpu.to_device(host)


class InputPool:
    """The input sets of one timing: the warm-up's own, then a new one for each timed call.

    New sets are drawn (lazily) until the pool holds :attr:`minimum` sets and
    then while both budgets (device bytes, host seconds) last; after that,
    earlier sets are reused in random order and at most ``2 * sets - 1``
    calls are timed, so more than half of the timed calls -- the median's
    among them -- saw inputs that no earlier call saw.
    """

    def __init__(self, draw, set_bytes: int, minimum: int, max_bytes: int = INPUT_SET_BYTES,
                 max_seconds: float = INPUT_SET_SECONDS, seed: int | None = None, warmup=None):
        self.draw = draw
        self.set_bytes = max(1, int(set_bytes))
        self.minimum = max(1, minimum)
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.spent_s = 0.0
        self.rng = np.random.default_rng(seed if seed is not None else int.from_bytes(os.urandom(8), "little"))
        self.warmup = warmup if warmup is not None else draw()
        self.sets: list = []

    def _can_grow(self) -> bool:
        if len(self.sets) < self.minimum:
            return True
        return (len(self.sets) + 1) * self.set_bytes <= self.max_bytes and self.spent_s < self.max_seconds

    def for_call(self, index: int):
        """The inputs of timed call ``index`` (0, 1, ... in order)."""
        if index >= len(self.sets) and self._can_grow():
            started = time.monotonic()
            self.sets.append(self.draw())
            self.spent_s += time.monotonic() - started
        if index < len(self.sets):
            return self.sets[index]
        return self.sets[int(self.rng.integers(len(self.sets)))]

    def max_calls(self) -> int | None:
        """How many calls may be timed at most (None: no cap yet, new sets can still be drawn)."""
        return None if self._can_grow() else 2 * len(self.sets) - 1


def measure_speed(ex: Exercise, module, launch: dict, backend, quick: bool = False, outputs_dir: str | None = None) -> dict:
    """Time the student's kernel against the exercise's reference kernel on the GPU.

    The measuring itself (events, L2 flush, peaks, raw buffers) is the runtime's
    :mod:`kernels.runtime.measurement`; this function is the policy around it.
    """
    from kernels.runtime import errors as E
    from kernels.runtime.loader import load_topic
    from kernels.runtime.measurement import measurement
    from kernels.runtime.module import compile_source

    gpu = measurement(backend)
    rk = ex.reference_kernel
    shape = dict(ex.timing_shape or ex.hidden_shapes[-1])
    try:
        _, config = ex.resolve_launch(shape, launch)
    except LaunchError as exc:
        raise CaseError("invalid_launch", f"launch configuration refused for the timing size: {exc}") from None
    ref_config = rk.launch(shape)
    if rk.source is not None:
        ref_module = compile_source(rk.source, name=f"{rk.topic}.cu", defines=rk.defines, backend=backend)
    else:
        ref_module = load_topic(rk.topic, rk.defines or None, backend=backend)

    student_sig = module.signatures[ex.kernel]
    ref_sig = ref_module.signatures[rk.kernel]
    stu_fn = gpu.raw_kernel(module, ex.kernel, config.shared)
    ref_fn = gpu.raw_kernel(ref_module, rk.kernel, ref_config.shared)

    info = gpu.info
    stream = gpu.stream()
    lo, hi = (QUICK_MIN, QUICK_MAX) if quick else (MIN_PAIRS, MAX_PAIRS)

    def draw() -> _InputSet:
        return _InputSet(ex, shape, student_sig.params, int.from_bytes(os.urandom(8), "little"), gpu)

    first = draw()
    # a set costs its device copies and, on the host, those copies' sources and the float64 expectations
    set_bytes = sum(h.nbytes for h in first.host_init.values()) + sum(np.asarray(v).nbytes for v in first.expected.values())
    pool = InputPool(draw, set_bytes=set_bytes, minimum=(lo + 1) // 2, warmup=first)
    work = {name: gpu.allocate(host.nbytes) for name, host in first.host_init.items()}
    nbytes = {name: host.nbytes for name, host in first.host_init.items()}

    def arguments(sig, order, input_set):
        args = []
        for name, param in zip(order, sig.params):
            if name in work:
                args.append(work[name])
            else:
                args.append(param.dtype.type(input_set.inputs[name]))
        return args

    stu_order = [a.name for a in ex.args]
    ref_order = list(rk.arg_order or stu_order)

    def prepare(input_set):
        for name, dev in input_set.pristine_dev.items():
            if nbytes[name]:
                gpu.copy_on_device(work[name], dev, nbytes[name], stream)
        gpu.flush_l2(stream)

    def timed(fn, sig, order, cfg, input_set) -> float:
        prepare(input_set)
        args = arguments(sig, order, input_set)
        ms = gpu.elapsed_ms(lambda: fn(*args, grid=cfg.grid, block=cfg.block, shared=cfg.shared, stream=stream), stream)
        gpu.synchronize()  # anything else still running (another stream) finishes before validation
        return ms

    rng = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))

    def validate(input_set, call: int, full: bool, hand_back: bool = False) -> None:
        for arg in ex.outputs:
            host = np.empty_like(input_set.host_init[arg.name])
            gpu.copy_to_host(host, work[arg.name])
            if hand_back and outputs_dir:
                # the grader checks this output again itself, against its own reference for the same inputs
                from . import case_outputs

                case_outputs.save(outputs_dir, "timing", {arg.name: host})
            exp = np.asarray(input_set.expected[arg.name]).reshape(host.shape)
            scale = np.broadcast_to(np.asarray(input_set.scale[arg.name], dtype=np.float64), host.shape)
            if not full and host.size > SAMPLE_ELEMENTS:
                idx = np.concatenate([rng.integers(0, host.size, SAMPLE_ELEMENTS), np.arange(host.size - 1024, host.size)])
                got, exp, scale = host.ravel()[idx], exp.ravel()[idx], scale.ravel()[idx]
            else:
                got = host
            cmp = compare(got, exp, scale, ex.rtol, ex.atol)
            if cmp["n_bad"]:
                raise CaseError(
                    "failed",
                    f"the output of timed call #{call} was wrong ({cmp['n_bad']} of the elements checked; e.g. expected "
                    f"{cmp['expected']:.6g}, got {cmp['got']:.6g}) although the correctness cases passed",
                    "A kernel must compute its result on every call, from the inputs of that call (no results kept "
                    "from an earlier call, no work left running after it returns).",
                )

    def run_timed(call: int, s, full: bool):
        r = timed(ref_fn, ref_sig, ref_order, ref_config, s)
        t = timed(stu_fn, student_sig, stu_order, config, s)
        validate(s, call, full)
        return r, t

    try:
        for call in range(WARMUP_PAIRS):
            run_timed(call, pool.warmup, full=(call == 0))
        ref_ms: list[float] = []
        stu_ms: list[float] = []
        call = WARMUP_PAIRS
        last = pool.warmup
        while not enough_samples(ref_ms, stu_ms, lo, hi):
            cap = pool.max_calls()
            if cap is not None and len(stu_ms) >= cap:
                break  # more calls would reuse inputs in most of them
            last = pool.for_call(len(stu_ms))
            r, t = run_timed(call, last, full=(call == WARMUP_PAIRS + lo // 2))
            ref_ms.append(r)
            stu_ms.append(t)
            call += 1
        # The last call is validated in full, and handed back to the grader.
        validate(last, call - 1, full=True, hand_back=True)
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
        "below_floor": bool(student < FLOOR_MARGIN * floor_ms),
        "student_stderr": stderr_fraction(stu_ms),
        "reference_stderr": stderr_fraction(ref_ms),
        "pairs": len(stu_ms),
        "input_sets": len(pool.sets),
        "validated_seed": int(last.seed),
        "student_launch": {"grid": list(config.grid), "block": list(config.block), "shared": config.shared},
        "reference_kernel": f"kernels/{rk.topic}.cu:{rk.kernel}",
        "peak_bandwidth_gbs": peak_bw / 1e9,
        "measured_copy_bandwidth_gbs": measured_bw / 1e9,
        "peak_gflops": peak_flops / 1e9,
        "device": info.get("name", ""),
        "driver": info.get("driver_version", ""),
        "compute_capability": info.get("compute_capability", ""),
        "clocks": gpu.clocks(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
