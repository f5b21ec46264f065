"""Points from the cases' verdicts: per shape for correctness, and what a failure at the timing size costs.

Trusted code only: the grader scores the cases it judged itself
(:mod:`autograder.verdict`); the grading child uses the same rules for the
account it reports while it runs.
"""

from __future__ import annotations

from .comparison import CaseError
from .exercise import Exercise
from .result import ExerciseResult, ShapeResult


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
    if first.hint:
        msg += f"Hint: {first.hint} "
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


def speed_not_measured_here(ex: Exercise, res: ExerciseResult) -> None:
    """No GPU: the speed points stay pending (while grading) and the student is told why."""
    res.speed_measured = False
    res.speed_score = 0.0
    if ex.speed_points:
        res.speed_pending = res.mode == "hidden"
        res.speed_note = (f"not measured: this ran on the CPU emulator, which checks results but says nothing about "
                          f"speed. The {ex.speed_points:g} speed points are not awarded here; they are awarded when "
                          f"the instructor grades on a GPU.")
