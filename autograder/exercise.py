"""How an exercise is declared: once, in a module under ``autograder/exercises/``.

An :class:`Exercise` says everything the grader needs and nothing else needs
to change when a chapter adds one:

* the kernel the student writes: its C declaration, from which its name and
  arguments are read (a const pointer is an input, any other pointer an output
  filled with NaN before every launch, or zeros where the exercise says so, or
  read and written where it says so; a value is a scalar);
* a NumPy reference computed in float64, an input generator, and the scale
  errors are measured against (so that tolerances are relative to the size of
  the numbers float32 rounding works on, not to values that cancel);
* visible shapes (what ``check()`` runs), hidden shapes (grading only), and
  shapes drawn per student from the student's key (derived from the course secret);
* the launch integers the student chooses (``block=256 grid=512``): their
  ranges and defaults, and how grid, block and shared memory follow from them;
* points for correctness and for speed, the reference kernel speed is
  measured against (``kernels/<part>/<topic>.cu``), and the flop and byte counts that
  give the physical floor of the run time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter

import numpy as np

from kernels.runtime import loader
from kernels.runtime.host_chunks import chunk_ranges, over_chunks
from kernels.runtime.module import compile_source
from kernels.runtime.signature import parse_kernels
from kernels.runtime.versions import KernelVersion, LaunchConfig

Shape = dict  # {"n": 1000003}
Inputs = dict  # argument name -> np.ndarray or Python number


class LaunchError(ValueError):
    """The student's launch integers cannot be used (status ``invalid_launch``)."""


@dataclass(frozen=True)
class LaunchKey:
    """One ``key=int`` of the ``%%cuda`` line."""

    name: str
    minimum: int = 1
    maximum: int = 2**31 - 1
    required: bool = False
    #: Used when the key is not given: an int, or ``f(shape, launch) -> int``
    #: (resolved per shape, after the other keys).  None: the key stays absent.
    default: int | Callable[[Shape, dict], int] | None = None
    multiple_of: int = 1
    help: str = ""

    def check(self, value: int) -> str:
        """'' when ``value`` is acceptable, else why not."""
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{self.name} must be an integer, not {value!r}"
        if not self.minimum <= value <= self.maximum:
            return f"{self.name}={value} is out of range: it must be between {self.minimum} and {self.maximum}" + (
                f" ({self.help})" if self.help else ""
            )
        if self.multiple_of > 1 and value % self.multiple_of:
            return f"{self.name}={value} must be a multiple of {self.multiple_of}"
        return ""


@dataclass(frozen=True)
class Arg:
    """One kernel argument, in the order of the declared signature."""

    name: str
    role: str  # "in" | "out" | "inout" | "scalar"
    #: For "out": what the buffer holds before the launch ("nan" or "zeros").
    init: str = "nan"

    def __post_init__(self):
        if self.role not in ("in", "out", "inout", "scalar"):
            raise ValueError(f"argument {self.name}: role must be in/out/inout/scalar, not {self.role!r}")
        if self.init not in ("nan", "zeros"):
            raise ValueError(f"argument {self.name}: init must be 'nan' or 'zeros'")


@dataclass(frozen=True)
class ReferenceKernel:
    """The trusted kernel speed is compared with: one :class:`~kernels.runtime.versions.KernelVersion`.

    Its topic, CUDA name, launch configuration and compile-time definitions
    are the version's own (``kernels/<part>/<topic>.py``), so the grader times the
    kernel exactly as the chapter launches it.  ``arg_order`` names the
    exercise's arguments in the reference kernel's order when that differs
    from the exercise's declaration.

    An exercise asks for more than the chapter prints (a stride, a padding, a
    layout, an epilogue the chapter's kernel does not handle), so the chapter's
    kernel computes the exercise's function only where those extras take the
    values of the chapter's problem: ``solves`` names them (``{"pad": 0,
    "stride": 1}``), and the exercise's timing shape must have them.  There the
    grader times the book's kernel on the same problem, and nowhere else is it
    a solution: the hidden shapes take other values.
    """

    version: KernelVersion
    arg_order: tuple[str, ...] | None = None
    #: Use this source instead of kernels/<part>/<topic>.cu (a provisional reference).
    source: str | None = None
    #: The sizes and scalars of a shape at which the kernel computes the exercise's function (all of them: {}).
    solves: Mapping[str, object] = field(default_factory=dict)

    def solves_shape(self, shape: Shape) -> bool:
        return all(shape.get(key) == value for key, value in self.solves.items())

    topic = property(attrgetter("version.topic"), doc="The version's topic (kernels/<part>/<topic>.cu).")
    kernel = property(attrgetter("version.kernel"), doc="The version's CUDA kernel name.")

    @property
    def defines(self) -> dict:
        return dict(self.version.defines)

    def launch(self, shape: Shape) -> LaunchConfig:
        return self.version.launch(shape)

    def compile(self, backend):
        """The compiled module holding the kernel, on ``backend``: the one way the grader builds it, so
        that the grading process's stored images (``autograder.kernel_images``) match the child's compile."""
        if self.source is not None:
            return compile_source(self.source, name=f"{self.topic}.cu", defines=self.defines, backend=backend)
        return loader.load_topic(self.topic, self.defines or None, backend=backend)


@dataclass(frozen=True)
class Reduction:
    """Terms an output sums (or takes the maximum of): what a kernel that approximates would read only part of.

    ``operands`` pairs input names with the axes of that input the output reduces over, in order (several inputs
    read term by term together, e.g. both factors of a dot product's norm).  The approximation attacks of the
    grader's tests mask these axes (``tests/autograder/test_approximation.py``): every exercise with a reduction
    declares it, so that skipping or sampling any share of it fails at every size.
    """

    operands: tuple[tuple[str, tuple[int, ...]], ...]
    kind: str = "sum"  # "sum" or "max"

    def __post_init__(self):
        if self.kind not in ("sum", "max"):
            raise ValueError(f"a reduction is a 'sum' or a 'max', not {self.kind!r}")
        for name, axes in self.operands:
            if list(axes) != sorted(set(axes)):
                raise ValueError(f"reduction over {name}: its axes are named once each, in order ({axes})")


@dataclass(frozen=True)
class FormulaMistake:
    """A common way to get an exercise's formula wrong, as its own float64 reference: the grader names it when a
    kernel's output matches it, and only it, on two shapes (:mod:`autograder.mistakes`).

    ``words`` say what the formula does wrong and what is right, as the hint ends ``Compared with the reference,
    the output is what the formula gives ...``; ``reference`` takes a case's inputs and returns the mistaken
    formula's outputs, as ``Exercise.reference`` returns the right one's.  The right formula's error scale serves
    the mistaken one too (its terms are of the same size), except where ``error_scale`` gives the mistaken
    formula's own (from the case's inputs: it adds terms the right one has not, a value where the right one is 0)
    or ``result_scale`` the part of it that grows with its result (from its outputs: a BF16 output); the largest
    then serves."""

    key: str
    words: str
    reference: Callable[[Mapping], dict]
    error_scale: Callable[[Mapping], dict] | None = None
    result_scale: Callable[[Mapping], dict] | None = None


def relative_rounding(right: np.ndarray, scale: np.ndarray, wrong: np.ndarray) -> np.ndarray:
    """A mistaken formula's error scale where the right one's grows with its (non-negative) values: the right
    formula's rounding relative to its values, ``scale / right``, on the mistaken values ``wrong`` (0 where the right
    value is 0, and a NaN or Inf the mistake gives counts as 0)."""
    relative = np.divide(scale, right, out=np.zeros_like(scale, dtype=np.float64), where=right > 0)
    return np.nan_to_num(np.abs(wrong)) * relative


def reducing(name: str, *axes: int, kind: str = "sum") -> tuple[Reduction, ...]:
    """The ``reductions`` of an exercise whose outputs reduce input ``name`` over ``axes``."""
    return (Reduction(((name, tuple(axes)),), kind),)


@dataclass(frozen=True, kw_only=True)
class Exercise:
    name: str
    title: str
    #: The C declaration of the __global__ function the student writes, e.g.
    #: "saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)"; for index notation, the comprehension's
    #: "def name(float(M,K) A, ...) -> (C)".  The kernel's name and arguments are read from it.
    signature: str
    #: Outputs the kernel reads too (default: a non-const pointer is written only).
    inout: tuple[str, ...] = ()
    #: Outputs that hold zeros, not NaN, before every launch (a kernel may add into them).
    zeroed: tuple[str, ...] = ()
    #: The function the cell must define; default: the name in the signature.
    kernel: str = ""
    make_inputs: Callable[[Shape, np.random.Generator], Inputs]
    #: float64 results, one array per output ("out"/"inout") argument.
    reference: Callable[[Inputs], dict[str, np.ndarray]]
    #: Per output: the magnitude rounding errors scale with (same shape as the output,
    #: or a scalar).  Tolerance per element = atol + rtol * scale.
    error_scale: Callable[[Inputs], dict[str, np.ndarray]]
    visible_shapes: tuple[Shape, ...]
    hidden_shapes: tuple[Shape, ...]
    launch_keys: tuple[LaunchKey, ...]
    launch_config: Callable[[Shape, dict], LaunchConfig]
    correctness_points: float
    speed_points: float
    reference_kernel: ReferenceKernel | None
    #: Tolerance per element = atol + rtol * scale; the default suits float32 sums of any order.
    rtol: float = 1e-5
    atol: float = 1e-30
    #: The flop and byte counts of one run (the physical floor); default: the reference kernel's record's.
    flops: Callable[[Shape], float] | None = None
    bytes_moved: Callable[[Shape], float] | None = None
    #: How many times the FP32 units' peak rate the exercise's flops may run at: 1 on the FP32 units; more for
    #: work on the tensor cores (BF16: 15 times on an H100, about 30 on the newest cards).  The physical floor
    #: of the run time divides the flops by this rate.
    peak_over_fp32: float = 1.0
    #: The shape speed is measured on (large enough that launch overhead does not dominate).
    timing_shape: Shape | None = None
    #: A visible shape just past one pass of the student's own grid, f(launch) -> shape or None (no fixed
    #: grid, or too large to check quickly): a kernel without a grid-stride loop fails check() on it.
    past_one_pass: Callable[[dict], Shape | None] | None = None
    #: Shapes drawn per student and exercise from the student's key: f(rng, launch) -> shapes.
    secret_shapes: Callable[[np.random.Generator, dict], list[Shape]] | None = None
    #: (minimum speed-up over the reference, fraction of the speed points), best first; None: the grader's
    #: (:data:`autograder.scoring.SPEED_BANDS`).
    speed_bands: tuple[tuple[float, float], ...] | None = None
    visible_seeds: int = 1
    hidden_seeds: int = 3
    #: Hard limit for one grading child process (seconds), hidden and visible mode.
    time_limit_s: float = 120.0
    visible_time_limit_s: float = 60.0
    #: The largest output / input the grader allocates for this exercise (elements).
    max_elements: int = 1 << 26
    label: Callable[[Shape], str] | None = None
    description: str = ""
    #: Names the cause of a failure by running the kernel on chosen inputs:
    #: ``probe(shape, run) -> hint`` where ``run(inputs) -> outputs`` launches the
    #: student's kernel once (same launch configuration).  '' when it cannot tell.
    probe: Callable[[Shape, Callable[[Inputs], dict]], str] | None = None
    #: A requirement on the kernel's source that no case can show (64-bit indices for sizes past what the grader
    #: allocates): ``source_check(source, kernel name) -> ''`` or one sentence saying what is wrong and how to fix
    #: it.  Checked before any case runs; a kernel that fails it earns nothing (status ``wrong_kernel``).
    source_check: Callable[[str, str], str] | None = None
    #: A small shape on which ``check()`` on the CPU emulator draws which thread read and which wrote each element,
    #: beside the same map of the instructor's solution on the same launch (:mod:`autograder.thread_maps`; the
    #: warm-up puzzles).  None: no map.
    thread_map: Shape | None = None
    #: What the cell holds: "cuda" (a kernel) or "tc" (index notation, ``kernels/index_notation``):
    #: a "tc" exercise is graded by generating the kernel from the text in the grading process.
    language: str = "cuda"
    #: The reductions its outputs are made of (:class:`Reduction`); none for an elementwise exercise.
    reductions: tuple[Reduction, ...] = ()
    #: Common ways to get the formula wrong (:class:`FormulaMistake`), named when the output shows one.
    formula_mistakes: tuple[FormulaMistake, ...] = ()

    def __post_init__(self):
        if not self.kernel:
            object.__setattr__(self, "kernel", re.match(r"\s*(?:def\s+)?(\w+)", self.signature).group(1))
        if self.reference_kernel is not None and not self.reference_kernel.solves_shape(self.timing_shape or self.hidden_shapes[-1]):
            raise ValueError(f"exercise {self.name}: its reference kernel solves it only where {dict(self.reference_kernel.solves)}, "
                             f"and the timing shape is not such a shape")
        for fact, record_fact in (("flops", "flops"), ("bytes_moved", "bytes")):
            if getattr(self, fact) is None:
                if self.reference_kernel is None:
                    raise ValueError(f"exercise {self.name}: {fact} is needed when there is no reference kernel")
                object.__setattr__(self, fact, getattr(self.reference_kernel.version, record_fact))

    @cached_property
    def args(self) -> tuple[Arg, ...]:
        """The kernel's arguments in the order of its declaration, with their roles (read on first use:
        reading a C declaration loads the C parser)."""
        if self.language == "tc":
            from kernels.index_notation import parse  # deferred: its grammar loads only for a %%tc exercise

            definition = parse(self.signature + " {}")[0]
            return tuple(Arg(p.name, "in") for p in definition.params) + tuple(Arg(o, "out") for o in definition.outputs)
        unknown = set(self.inout + self.zeroed) - {p.name for p in self.declared_params}
        if unknown:
            raise ValueError(f"exercise {self.name}: {', '.join(sorted(unknown))} not among the kernel's arguments")

        def role(param) -> str:
            if not param.is_pointer:
                return "scalar"
            if param.is_const:
                return "in"
            return "inout" if param.name in self.inout else "out"

        return tuple(Arg(p.name, role(p), "zeros" if p.name in self.zeroed else "nan") for p in self.declared_params)

    @cached_property
    def declared_params(self):
        """The parameters of the declared kernel, as the runtime reads a kernel's (types, constness)."""
        return parse_kernels(f"__global__ void {self.signature} {{}}", "exercise", {})[self.kernel].params

    # ----------------------------------------------------------------- helpers
    def shape_label(self, shape: Shape) -> str:
        if self.label is not None:
            return self.label(shape)
        return ", ".join(f"{k}={v}" for k, v in shape.items())

    @property
    def outputs(self) -> tuple[Arg, ...]:
        return tuple(a for a in self.args if a.role in ("out", "inout"))

    @property
    def max_points(self) -> float:
        return self.correctness_points + self.speed_points

    def validate_launch(self, launch: dict) -> dict:
        """Check the student's integers: unknown keys, required keys, ranges.

        Returns the launch with every fixed (non-callable) default filled in;
        raises :class:`LaunchError` with every problem found.
        """
        known = {k.name: k for k in self.launch_keys}
        problems = []
        for key in launch:
            if key not in known:
                problems.append(f"unknown launch key '{key}' (this exercise takes: {', '.join(known) or 'none'})")
        result: dict = {}
        for key in self.launch_keys:
            if key.name in launch:
                why = key.check(launch[key.name])
                if why:
                    problems.append(why)
                else:
                    result[key.name] = int(launch[key.name])
            elif key.required:
                problems.append(f"the launch key '{key.name}' is required, e.g. '%%cuda {self.name} {key.name}=256'" + (f" ({key.help})" if key.help else ""))
            elif isinstance(key.default, int):
                result[key.name] = key.default
        if problems:
            raise LaunchError("; ".join(problems))
        return result

    def resolve_launch(self, shape: Shape, launch: dict) -> tuple[dict, LaunchConfig]:
        """The launch integers for one shape (callable defaults applied) and the launch configuration."""
        resolved = dict(launch)
        for key in self.launch_keys:
            if key.name not in resolved and callable(key.default):
                value = int(key.default(shape, resolved))
                why = key.check(value)
                if why:
                    raise LaunchError(f"for {self.shape_label(shape)} the default {why}")
                resolved[key.name] = value
        config = self.launch_config(shape, resolved)
        return resolved, config

    def all_shapes(self, mode: str) -> list[tuple[Shape, bool]]:
        shapes = [(s, True) for s in self.visible_shapes]
        if mode == "hidden":
            shapes += [(s, False) for s in self.hidden_shapes]
        return shapes


#: Arrays larger than this are drawn in chunks of this many elements, side by side on threads.
VARIED_CHUNK = 1 << 22


def _varied_values(rng: np.random.Generator, size: int, mean: float, decades: float, spread: float) -> np.ndarray:
    # Drawn and combined in float32, in place: the grader draws timing sets of tens of millions of values for
    # every submission, and float64 draws and a float64 power take more than twice as long.
    scale = rng.random(size, dtype=np.float32)
    scale -= np.float32(0.5)
    scale *= np.float32(decades * np.log(10.0))
    np.exp(scale, out=scale)  # 10 ** uniform(-decades / 2, decades / 2)
    values = rng.standard_normal(size, dtype=np.float32)
    values *= np.float32(spread)
    values += np.float32(mean)
    values *= scale
    return values


def varied(rng: np.random.Generator, shape, mean: float, decades: float = 1.0, spread: float = 0.5) -> np.ndarray:
    """Float32 values around ``mean`` (normal, standard deviation ``spread``), each times a scale spread
    evenly over ``decades`` decades around 1: inputs with a non-zero mean and varied magnitude, so that
    a kernel writing zeros, the mean, or one element's value everywhere cannot pass.

    The values depend only on ``rng``'s state: a large array is drawn in chunks of
    :data:`VARIED_CHUNK` from generators spawned from ``rng``, on several threads (NumPy's
    generators and ufuncs release the GIL), because the grader draws sets of tens of millions of
    elements while a student waits."""
    size = int(np.prod(shape))
    if size <= VARIED_CHUNK:
        return _varied_values(rng, size, mean, decades, spread).reshape(shape)
    children = rng.spawn(len(chunk_ranges(size, VARIED_CHUNK)))
    out = np.empty(size, np.float32)

    def fill(start: int, stop: int) -> None:
        out[start:stop] = _varied_values(children[start // VARIED_CHUNK], stop - start, mean, decades, spread)

    over_chunks(size, fill, VARIED_CHUNK, max_threads=8)  # two sets are drawn side by side
    return out.reshape(shape)


def ceil_div(a: int, b: int) -> int:
    return max(1, math.ceil(a / b))
