"""The outcome of grading one exercise: points, per-case errors, hints, timing.

An :class:`ExerciseResult` is what the isolated checker sends back over its
pipe (as JSON) and what the nbgrader side writes into the gradebook and the
student's feedback.  Everything in it is plain data: ``to_json()`` /
``from_json()`` round-trip exactly.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from . import feedback
from .exercises import get_exercise

#: Every status an exercise can end in.
STATUSES = (
    "passed",  # every case correct
    "failed",  # ran, but some case was wrong
    "compile_error",  # the source did not compile
    "wrong_kernel",  # it compiled, but no kernel of the exercise's name and parameters is defined
    "not_written",  # the cell is empty or still the released stub: no code was written
    "launch_error",  # the kernel failed while running (illegal address, race found by the emulator, ...)
    "timeout",  # the check did not finish within its time limit
    "crashed",  # the checking process died (signal, memory limit) or sent no result
    "invalid_launch",  # the launch integers are missing, unknown or out of range
    "missing",  # no %%cuda cell for this exercise
    "not_gradable",  # the submitted notebook cannot be read as this assignment's (not JSON, another assignment's)
)


@dataclass
class ShapeResult:
    """One case: one shape with one seed."""

    label: str  # "n=1000003"
    shape: dict
    seed_index: int  # 0, 1, 2 ... (the seed itself is never reported in hidden mode)
    visible: bool  # True for the shapes check() shows students
    passed: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None  # |got - expected| / tolerance scale, worst element
    first_bad_index: list[int] | None = None
    expected: float | None = None  # at first_bad_index
    got: float | None = None
    n_bad: int = 0
    n_total: int = 0
    output: str = ""  # which output argument the numbers are about
    hint: str = ""
    error: str = ""  # an exception's message, when the case did not run to the end
    error_map: dict | None = None  # {"rows": [[frac bad, ...], ...], "shape": [...]} for pictures

    def summary(self) -> str:
        tag = "PASS" if self.passed else "FAIL"
        text = f"{tag}  {self.label:<22} seed #{self.seed_index}"
        if self.max_abs_err is not None:
            text += f"  max abs err {feedback.number(self.max_abs_err)}  max rel err {feedback.number(self.max_rel_err)}"
        if not self.passed and self.first_bad_index is not None:
            idx = ",".join(str(i) for i in self.first_bad_index)
            text += f"\n        {self.n_bad} of {self.n_total} wrong; first at {self.output}[{idx}]: expected {feedback.number(self.expected)}, got {feedback.number(self.got)}"
        elif not self.passed and self.n_bad and not self.visible:  # a hidden case: how much is wrong, not where
            text += (f"\n        {feedback.wrong_share(self.n_bad, self.n_total)} of {self.output or 'the output'} "
                     f"wrong; e.g. expected {feedback.number(self.expected)}, got {feedback.number(self.got)}")
        if self.error:
            text += "\n        " + self.error.replace("\n", "\n        ")
        if self.hint and not self.passed:
            text += f"\n        hint: {self.hint}"
        return text


def json_safe(value):
    """JSON has no NaN/Inf: encode them as strings and decode them back."""
    if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()  # NumPy scalars as plain Python numbers
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def json_default(value):
    """NumPy scalars and arrays (from an exercise's shapes or timings) as plain JSON values (``json.dumps``'s
    ``default``: what crosses between the grader and its grading child)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot send {type(value).__name__} to or from the grading process")


def speed_is_pending(result) -> bool:
    """Whether the speed points of a result (an :class:`ExerciseResult`, or its entry in a results file) are
    pending: a correct kernel whose speed was not measured (graded without a GPU), so neither a fail nor a
    zero.  When they become pending is :mod:`autograder.scoring`'s rule."""
    get = result.get if isinstance(result, dict) else (lambda key: getattr(result, key, None))
    return bool(get("speed_pending")) and not get("speed_measured")


_SPECIAL = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _unclean_number(value):
    return _SPECIAL.get(value, value) if isinstance(value, str) else value


@dataclass
class ExerciseResult:
    exercise: str
    status: str
    correctness_score: float = 0.0
    correctness_max: float = 0.0
    speed_score: float = 0.0
    speed_max: float = 0.0
    speed_measured: bool = False
    shapes: list[ShapeResult] = field(default_factory=list)
    message: str = ""  # one paragraph a student can act on
    timing: dict | None = None  # student_ms, reference_ms, speedup, floor_ms, percent_of_floor, device, driver, clocks
    backend: str = ""  # "gpu" | "cpu"
    device: str = ""
    # --- additions beyond the core fields ---
    mode: str = "hidden"  # "visible" (check()) or "hidden" (grading)
    launch: dict = field(default_factory=dict)  # the validated launch integers
    speed_pending: bool = False  # correct, but speed could not be measured here (no GPU)
    #: correctness graded without a GPU (on the CPU emulator): provisional until a grading on a GPU confirms it
    provisional: bool = False
    speed_note: str = ""  # why speed points were or were not given
    log: str = ""  # compiler log / captured output, trimmed
    elapsed_s: float = 0.0
    profile: dict | None = None  # check() on the emulator: the profile of one launch (autograder.kernel_profile)
    thread_map: dict | None = None  # check() on the emulator: which thread touched which element (autograder.thread_maps)
    #: wall seconds per phase of this grading (autograder.phase_times): where its time went, never part of a verdict
    phases: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ points
    @property
    def score(self) -> float:
        return self.correctness_score + self.speed_score

    @property
    def max_score(self) -> float:
        return self.correctness_max + self.speed_max

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def speed_is_pending(self) -> bool:
        """Its speed points wait for a grading on a GPU (:func:`speed_is_pending`)."""
        return speed_is_pending(self)

    def part_score(self, part: str) -> float:
        """The points of ``part`` ("correctness" or "speed")."""
        return {"correctness": self.correctness_score, "speed": self.speed_score}[part]

    def part_max(self, part: str) -> float:
        """The most ``part`` ("correctness" or "speed") can get."""
        return {"correctness": self.correctness_max, "speed": self.speed_max}[part]

    # -------------------------------------------------------------------- JSON
    def to_dict(self) -> dict:
        return json_safe(asdict(self))

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict) -> "ExerciseResult":
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        shape_fields = {f.name for f in fields(ShapeResult)}
        shapes = []
        for s in kwargs.get("shapes") or []:
            s = {k: v for k, v in s.items() if k in shape_fields}
            for key in ("max_abs_err", "max_rel_err", "expected", "got"):
                if key in s:
                    s[key] = _unclean_number(s[key])
            shapes.append(ShapeResult(**s))
        kwargs["shapes"] = shapes
        if kwargs.get("timing"):
            kwargs["timing"] = {k: _unclean_number(v) for k, v in kwargs["timing"].items()}
        return cls(**kwargs)

    @classmethod
    def from_json(cls, text: str) -> "ExerciseResult":
        return cls.from_dict(json.loads(text))

    @classmethod
    def missing(cls, exercise: str, correctness_max: float = 0.0, speed_max: float = 0.0) -> "ExerciseResult":
        """The result for an exercise with no ``%%cuda`` cell."""
        if not correctness_max and not speed_max:
            try:
                ex = get_exercise(exercise)
                correctness_max, speed_max = ex.correctness_points, ex.speed_points
            except Exception:
                pass
        return cls(
            exercise=exercise,
            status="missing",
            correctness_max=correctness_max,
            speed_max=speed_max,
            message=f"No '%%cuda {exercise}' cell was found in the notebook, so there was nothing to grade. "
            f"The kernel for this exercise must be in a code cell whose first line is '%%cuda {exercise} ...'.",
        )

    @classmethod
    def not_gradable(cls, exercise: str, reason: str) -> "ExerciseResult":
        """The result for an exercise of a notebook that cannot be graded (``reason``, one sentence): 0 points."""
        result = cls.missing(exercise)
        result.status = "not_gradable"
        result.message = (f"The submission could not be graded: {reason}. Every test of this notebook scores 0 until "
                          f"a notebook that can be read is submitted.")
        return result

    # ---------------------------------------------------------------- feedback
    def feedback_text(self) -> str:
        """Plain text for the student's feedback (see :func:`autograder.feedback.feedback_text`)."""
        return feedback.feedback_text(self)

    def case_lines(self) -> list[str]:
        return feedback.case_lines(self)

    def __str__(self) -> str:
        return feedback.feedback_text(self)


