"""Every rule that turns a check or a measurement into points: correctness per shape, speed in bands.

Trusted code only: the grader scores the cases it judged itself
(:mod:`autograder.verdict`); the grading child uses the same rules for the
account it reports while it runs (:mod:`autograder.checker`).  How a kernel is
timed is :mod:`autograder.timing_policy`'s; what its time is worth is decided here:

* correctness points per shape, a shape counting only if all of its seeds
  pass; none when a launch failed, hung or crashed;
* a kernel that passed every case but went wrong at the timing size loses that
  size's share of the correctness points, as one more shape, and all the speed
  points;
* speed points only for a kernel that passed every case, in bands of the
  speed-up over the reference (:data:`SPEED_BANDS`, unless the exercise
  declares its own);
* a time below the physical floor (bytes over the peak bandwidth, flops over
  the peak rate, less :data:`FLOOR_MARGIN`) earns no speed points and fails
  the exercise;
* speed not measured (graded without a GPU, or the timing itself failed) is
  pending, not zero: the points are awarded when the instructor grades on a GPU.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .comparison import CaseError
from .mistakes import names_a_mistake
from .result import ExerciseResult, ShapeResult, speed_is_pending  # noqa: F401 (pending speed, beside the rules that make it)

if TYPE_CHECKING:
    from .exercise import Exercise

#: (minimum speed-up over the reference, fraction of the speed points), best first.
SPEED_BANDS: tuple[tuple[float, float], ...] = ((0.9, 1.0), (0.7, 0.75), (0.5, 0.5), (0.25, 0.25))
#: A measured time this far below the floor is impossible (event resolution and clock drift allowance).
FLOOR_MARGIN = 0.9

ONLY_IF_CORRECT = "no speed points: speed counts only for a kernel that passes every case"
FOR_INFORMATION = "measured for information only (check() awards no points)"
INCOMPLETE_TIMING = "not measured: the timing came back incomplete; please tell the instructor"


# ------------------------------------------------------------------ correctness
def score_correctness(ex: Exercise, res: ExerciseResult, failure: CaseError | None) -> None:
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
    # a mistake named from the output itself says more than a symptom of the first case (a sum of one term, 0)
    shown = next((s for s in failed if names_a_mistake(s.hint)), first)
    if shown.hint:
        msg += f"Hint: {shown.hint} " if shown is first else f"Hint (from {shown.label}): {shown.hint} "
    if visible_ok and any(not s.visible for s in failed):
        msg += ("The visible cases pass but hidden ones do not: does the kernel assume something about n that only "
                "the visible sizes satisfy (a fixed size, a multiple of the block, a grid that covers every element "
                "in one pass)? ")
    msg += f"Correctness points for the {n_ok} shapes that pass on every seed."
    res.message = msg.strip()


def timing_size_failed(ex: Exercise, res: ExerciseResult, error: str, hint: str) -> None:
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


# ------------------------------------------------------------------ speed
def is_below_floor(student_ms, floor_ms) -> bool:
    """Whether a measured time is impossibly fast: under :data:`FLOOR_MARGIN` of a known physical floor."""
    known = (isinstance(floor_ms, (int, float)) and not isinstance(floor_ms, bool) and math.isfinite(floor_ms)
             and floor_ms > 0)
    return bool(known and student_ms < FLOOR_MARGIN * floor_ms)


def speed_points(ex: Exercise, timing: dict) -> tuple[float, str]:
    """(points, explanation) from a timing: 0 below the floor, else by the exercise's bands."""
    if timing.get("below_floor"):
        return 0.0, (
            f"rejected: {timing['student_ms']:.4g} ms is below the physical floor of {timing['floor_ms']:.4g} ms "
            f"({ex.bytes_moved(timing['shape']):.3g} bytes at {timing['peak_bandwidth_gbs']:.0f} GB/s): the kernel cannot "
            f"have done all the work in that time (skipped or cached work?)"
        )
    speedup = float(timing["speedup"])
    bands = speed_bands(ex)
    for minimum, fraction in bands:
        if speedup >= minimum:
            points = round(ex.speed_points * fraction, 4)
            return points, f"{speedup:.2f}x the reference's speed (band >= {minimum:g}x): {points:g} of {ex.speed_points:g} points"
    lowest = bands[-1][0] if bands else 0
    return 0.0, f"{speedup:.2f}x the reference's speed, below the lowest band ({lowest:g}x): no speed points"


def speed_bands(ex: Exercise) -> tuple[tuple[float, float], ...]:
    """The bands ``ex`` is scored in: its own, else :data:`SPEED_BANDS`."""
    return SPEED_BANDS if ex.speed_bands is None else tuple(ex.speed_bands)


def score_speed(ex: Exercise, res: ExerciseResult, timing: dict) -> None:
    """The speed points of a graded timing; a time below the floor also fails the exercise.

    Raises KeyError, TypeError or ValueError (``res`` unchanged) when the timing lacks what the points need.
    """
    points, note = speed_points(ex, timing)
    res.speed_score = points
    res.speed_note = note
    if timing.get("below_floor"):
        res.status = "failed"
        res.message += " " + note


def speed_only_if_correct(res: ExerciseResult) -> None:
    """A kernel that failed a case is not timed for points."""
    res.speed_note = ONLY_IF_CORRECT


def speed_for_information(res: ExerciseResult) -> None:
    """check() times a kernel to show its speed-up, and awards nothing for it."""
    res.speed_note = FOR_INFORMATION


def speed_pending(res: ExerciseResult, note: str, pending: bool = True) -> None:
    """Speed not measured, for a reason ``note`` gives: pending when grading (``pending``), never zero points."""
    res.speed_pending = pending and res.mode == "hidden"
    res.speed_note = note


def speed_not_measured_here(ex: Exercise, res: ExerciseResult) -> None:
    """No GPU: the speed points stay pending (while grading) and the student is told why."""
    res.speed_measured = False
    res.speed_score = 0.0
    if ex.speed_points:
        speed_pending(res, f"not measured: this ran on the CPU emulator, which checks results but says nothing "
                           f"about speed. The {ex.speed_points:g} speed points are not awarded here; they are "
                           f"awarded when the instructor grades on a GPU.")
