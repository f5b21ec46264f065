"""The verdict on a submission, computed by the trusted grader from data.

The grading child runs in the sandbox (:mod:`autograder.sandbox`) next to the
student's code, so nothing it says is taken on trust.  It hands back, per
case, the arrays the launch left in the buffers (:mod:`autograder.case_outputs`),
and its own account of each case (hints, errors the emulator or the GPU
reported).  Here, after the sandbox is gone, the grader:

* regenerates every case's inputs from the seeds it planned, computes the
  float64 reference itself, and compares the arrays read back; a case passes
  only if the child saw it pass *and* the grader's own comparison does (the
  child can only lose points, never gain them);
* treats a planned case that has no account or no arrays as failed;
* scores the cases itself (:mod:`autograder.scoring`), ignoring every score
  field the child sent;
* awards speed points only where the grader itself chose the GPU and the
  output of the last timed call, read back the same way, matches the
  reference computed here for the inputs of that call, at the same tolerance
  as every other case.

:func:`judge_case` is also what the child uses for its own account, so both
sides compare and diagnose a case with one piece of code.
"""

from __future__ import annotations

import math

import numpy as np

from . import case_outputs
from .case_plan import case_label, concealed
from .comparison import compare, count_wrong
from .diagnosis import diagnose, error_map
from .exercise import Exercise, LaunchConfig, LaunchError
from .kernel_profile import checked_profile
from .thread_maps import checked_thread_map
from .result import STATUSES, ExerciseResult, ShapeResult
from .scoring import (INCOMPLETE_TIMING, is_below_floor, score_correctness, score_speed, speed_for_information,
                      speed_not_measured_here, speed_only_if_correct, speed_pending, timing_size_failed)
from .timing_policy import TimingSets, blended_inputs, draw_pair, is_seed, timed_shape

#: Statuses of a child's result that are judged case by case here; any other (a compile error, a crash, a
#: hang, a refused launch, no code) already carries no points and is kept as the child reported it.
JUDGED_STATUSES = ("passed", "failed")
#: Statuses only the grader gives (no kernel cell; a notebook that cannot be read): a child claiming one crashed.
GRADER_ONLY = ("missing", "not_gradable")


def case_data(ex: Exercise, shape: dict, seed: int) -> tuple[dict, dict, dict, dict]:
    """(inputs, pristine copies, float64 expected outputs, error scales) of one case."""
    inputs = ex.make_inputs(shape, np.random.default_rng(seed))
    pristine = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    return inputs, pristine, ex.reference(pristine), ex.error_scale(pristine)


def judge_case(ex: Exercise, result: ShapeResult, outputs: dict, after: dict, pristine: dict, expected: dict,
               scales: dict, config: LaunchConfig | None):
    """Fill ``result`` from what one launch left in the buffers; returns (arg, comparison, got) of the first
    wrong output, or None.  ``after`` holds the inputs as read back (checked unchanged)."""
    for arg in ex.args:
        if arg.role == "in" and arg.name in after:
            before = np.asarray(pristine[arg.name]).ravel()
            now = np.asarray(after[arg.name]).ravel()
            if now.dtype != before.dtype or now.size != before.size or not np.array_equal(now.view(np.uint8), before.view(np.uint8)):
                changed = int(np.count_nonzero(now != before)) if now.size == before.size else int(before.size)
                result.error = f"The kernel modified its input '{arg.name}' ({changed} elements changed)."
                result.hint = "Inputs must be left as they are: write results only to the output arguments."
                result.n_total = int(before.size)
                result.n_bad = changed
                result.passed = False
                return None
    total_bad, first = 0, None
    for arg in ex.outputs:
        want = np.asarray(expected[arg.name])
        got = outputs.get(arg.name)
        if got is None or np.shape(got) != want.shape:
            have = "nothing" if got is None else f"shape {np.shape(got)}"
            result.error = f"{arg.name} came back as {have}, but should have shape {want.shape}."
            result.passed = False
            return None
        cmp = compare(got, want, scales[arg.name], ex.rtol, ex.atol)
        result.n_total += int(got.size)
        total_bad += cmp["n_bad"]
        result.max_abs_err = max(result.max_abs_err or 0.0, cmp["max_abs_err"])
        result.max_rel_err = max(result.max_rel_err or 0.0, cmp["max_rel_err"])
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
        result.error_map = error_map(cmp["bad"])
        if config is not None:
            before = np.asarray(pristine[arg.name]).reshape(got.shape) if arg.role == "inout" else None
            prefill = arg.init if arg.role == "out" else None
            result.hint = diagnose(cmp, got, expected[arg.name], before, prefill, config, scales[arg.name])
    return first


def _read_back(ex: Exercise, scratch: str, tag: str, expected: dict, pristine: dict) -> tuple[dict, dict] | None:
    outputs, after = {}, {}
    for arg in ex.outputs:
        want = np.shape(expected[arg.name])
        flat = case_outputs.load(scratch, tag, "out", arg.name, int(np.prod(want, dtype=np.int64)))
        if flat is None:
            return None
        outputs[arg.name] = flat.reshape(want)
    for arg in ex.args if ex.language != "tc" else ():  # a comprehension has no buffers to write its inputs through
        if arg.role == "in" and isinstance(pristine.get(arg.name), np.ndarray):
            flat = case_outputs.load(scratch, tag, "in", arg.name, int(pristine[arg.name].size))
            if flat is None:
                return None
            after[arg.name] = flat
    return outputs, after


def _judge_planned_case(ex: Exercise, index: int, case: dict, scratch: str, launch: dict) -> ShapeResult:
    """The grader's own verdict on a case the child reports as passed."""
    _, pristine, expected, scales = case_data(ex, case["shape"], case["seed"])
    mine = ShapeResult(label=case_label(ex, case), shape=dict(case["shape"]), seed_index=case["seed_index"],
                       visible=case["visible"], passed=False)
    back = _read_back(ex, scratch, f"case-{index}", expected, pristine)
    if back is None:
        mine.error = "The grader could not read back what this case's launch left in the buffers."
        return mine
    try:
        _, config = ex.resolve_launch(case["shape"], launch) if ex.language != "tc" else (None, None)
    except LaunchError:
        config = None
    judge_case(ex, mine, back[0], back[1], pristine, expected, scales, config)
    return mine


def judge(ex: Exercise, request: dict, reported: ExerciseResult, scratch: str, speed_allowed: bool,
          timing_failure: dict | None = None, timing_sets: TimingSets | None = None) -> ExerciseResult:
    """The verdict on the child's report ``reported`` of ``request``, from the arrays in ``scratch``.

    ``timing_failure`` is what the child said went wrong at the timing size ({'error', 'hint'}), if anything.
    ``timing_sets``: the timing's input sets, drawn here from the seeds the grader chose and gave the child.
    """
    cases = request["cases"]
    launch = dict(request.get("launch") or {})
    verdict = ExerciseResult(
        exercise=ex.name, status="failed", correctness_max=ex.correctness_points, speed_max=ex.speed_points,
        mode=request["mode"], launch=dict(request.get("launch") or {}), backend=reported.backend,
        device=reported.device, log=reported.log, elapsed_s=reported.elapsed_s,
    )
    if verdict.mode == "visible":  # shown to the student who ran check(), never scored
        verdict.profile = checked_profile(reported.profile)
        verdict.thread_map = checked_thread_map(reported.thread_map)
    if reported.status not in JUDGED_STATUSES:
        # Nothing to judge: a compile error, a crash, a hang or a refused launch earns nothing.
        verdict.status = (reported.status if reported.status in STATUSES and reported.status not in GRADER_ONLY
                          else "crashed")
        verdict.message = reported.message
        verdict.shapes = conceal_hidden(list(reported.shapes[: len(cases)]), launch)
        verdict.speed_note = reported.speed_note
        return verdict
    shapes: list[ShapeResult] = []
    for index, case in enumerate(cases):
        if index >= len(reported.shapes):
            shapes.append(ShapeResult(label=case_label(ex, case), shape=dict(case["shape"]),
                                      seed_index=case["seed_index"], visible=case["visible"], passed=False,
                                      error="The check ended before this case was reported."))
            continue
        got = reported.shapes[index]
        # labels and flags are the grader's own; the child's words (error, hint) stay only on a failed case
        got.label, got.shape = case_label(ex, case), dict(case["shape"])
        got.seed_index, got.visible = case["seed_index"], case["visible"]
        shapes.append(_judge_planned_case(ex, index, case, scratch, launch) if got.passed else got)
    verdict.shapes = conceal_hidden(shapes, launch)
    score_correctness(ex, verdict, None)
    if ex.language == "tc":
        verdict.speed_note = reported.speed_note
        return verdict
    _judge_speed(ex, verdict, reported, scratch, speed_allowed, timing_failure or {}, timing_sets)
    return verdict


def conceal_hidden(shapes: list[ShapeResult], launch: dict) -> list[ShapeResult]:
    """``shapes`` with every hidden case as a student may read it: no index or picture of its elements, no number in
    its words that could tell its sizes (:func:`autograder.case_plan.concealed`); it is named by number and nature
    already (:func:`autograder.case_plan.case_label`)."""
    for result in shapes:
        if not result.visible:
            result.first_bad_index = None
            result.error_map = None
            result.error = concealed(result.error, launch)
            result.hint = concealed(result.hint, launch)
    return shapes


def _finite_positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _judge_speed(ex: Exercise, verdict: ExerciseResult, reported: ExerciseResult, scratch: str, speed_allowed: bool,
                 timing_failure: dict, timing_sets: TimingSets | None = None) -> None:

    timing = reported.timing or None
    if verdict.status != "passed":
        speed_only_if_correct(verdict)
        return
    if timing_failure and verdict.mode == "hidden":
        # the child saw the kernel go wrong while it was being timed: that costs one more shape and the speed points
        timing_size_failed(ex, verdict, str(timing_failure.get("error", "")), str(timing_failure.get("hint", "")))
        return
    if timing_failure:
        verdict.speed_note = reported.speed_note
        return
    if not speed_allowed or reported.backend != "gpu":
        speed_not_measured_here(ex, verdict)
        return
    if not timing:
        # on the GPU, but not timed (check() without a reference kernel, or the timing itself failed): say so
        speed_pending(verdict, reported.speed_note, pending=bool(reported.speed_pending))
        return
    problem = _timed_output_problem(ex, timing, scratch, timing_sets)
    if problem:
        timing_size_failed(ex, verdict, problem, "A kernel must compute its result on every call, from the inputs "
                                                  "of that call.")
        return
    if not all(_finite_positive(timing.get(k)) for k in ("student_ms", "reference_ms")):
        speed_pending(verdict, INCOMPLETE_TIMING)
        return
    verdict.timing = dict(timing)
    verdict.timing["speedup"] = timing["reference_ms"] / timing["student_ms"]  # from the times, not as reported
    verdict.timing["shape"] = timed_shape(ex)
    verdict.speed_measured = True
    if verdict.mode != "hidden":
        speed_for_information(verdict)
        return
    verdict.timing["below_floor"] = is_below_floor(timing["student_ms"], timing.get("floor_ms"))
    try:
        score_speed(ex, verdict, verdict.timing)
    except (KeyError, TypeError, ValueError):
        verdict.timing, verdict.speed_measured = None, False
        speed_pending(verdict, INCOMPLETE_TIMING)


def timing_case_data(ex: Exercise, shape: dict, seeds, sets: TimingSets | None = None) -> tuple[dict, dict] | None:
    """(float64 expected outputs, error scales) of the inputs of a timed call, rebuilt from its three seeds
    (``seed_a``, ``seed_b``, ``call_seed``: see :mod:`autograder.timing_policy`); None if the seeds are malformed,
    or if ``sets`` (the grader's own draw, of the seeds it chose) is given and is not of the reported seeds."""
    if not isinstance(seeds, dict):
        return None
    values = [seeds.get(k) for k in ("seed_a", "seed_b", "call_seed")]
    if not all(is_seed(v) for v in values):
        return None
    seed_a, seed_b, call_seed = values
    if sets is not None:
        if sets.seeds != (seed_a, seed_b):
            return None
        set_a, set_b = sets.get()[:2]
    else:
        set_a, set_b = draw_pair(ex, shape, seed_a, seed_b)
    inputs = blended_inputs(ex, set_a, set_b, call_seed)
    return ex.reference(inputs), ex.error_scale(inputs)


def _timed_output_problem(ex: Exercise, timing: dict, scratch: str, sets: TimingSets | None = None) -> str:
    """'' if the output handed back after the timed calls matches the reference for that call's inputs."""
    rebuilt = timing_case_data(ex, timed_shape(ex), timing.get("timed_inputs"), sets)
    if rebuilt is None:
        return "the output of the last timed call was not handed back"
    expected, scales = rebuilt
    for arg in ex.outputs:
        want = np.asarray(expected[arg.name])
        flat = case_outputs.load(scratch, "timing", "out", arg.name, int(want.size))
        if flat is None:
            return "the output of the last timed call was not handed back"
        cmp = count_wrong(flat, want, scales[arg.name], ex.rtol, ex.atol)
        if cmp["n_bad"]:
            return (f"the output of the last timed call was wrong ({cmp['n_bad']} of {want.size} elements; e.g. "
                    f"expected {cmp['expected']:.6g}, got {cmp['got']:.6g}) although the correctness cases passed")
    return ""
