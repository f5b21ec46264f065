"""Grading index notation: the text of a ``%%tc`` cell becomes a kernel in the grading process.

Only the comprehension's text reaches this process (see :mod:`autograder.isolation`); here it is
parsed and checked (:mod:`kernels.comprehensions`), its interface compared with the exercise's
declaration, its kernel generated (the naive schedule: what is graded is the notation, not a
schedule) and run on every case, visible, hidden and secret, against the exercise's float64
reference, through the same comparison as the CUDA exercises.
"""

from __future__ import annotations

import time

import numpy as np

from .checker import _score_correctness, _shape_dict, error_map
from .comparison import CaseError, compare
from .exercise import Exercise
from .result import ExerciseResult, ShapeResult


def _interface_problem(ex: Exercise, cd) -> str:
    """'' if the definition takes the exercise's inputs and writes its outputs, else what differs."""
    want_in = [a.name for a in ex.args if a.role in ("in", "scalar")]
    want_out = [a.name for a in ex.outputs]
    have_in = [p.name for p in cd.definition.params]
    have_out = list(cd.definition.outputs)
    problems = []
    if sorted(have_in) != sorted(want_in):
        problems.append(f"its inputs are {', '.join(have_in) or 'none'}, but the exercise gives {', '.join(want_in)}")
    if sorted(have_out) != sorted(want_out):
        problems.append(f"its outputs are {', '.join(have_out) or 'none'}, but the exercise expects {', '.join(want_out)}")
    if problems:
        return (f"The definition does not have the exercise's interface: {'; '.join(problems)}. "
                f"Declare it as: {ex.signature}")
    return ""


def _run_case(tc, ex: Exercise, case: dict) -> ShapeResult:
    from kernels.comprehensions import TcShapeError

    shape = case["shape"]
    result = ShapeResult(label=ex.shape_label(shape), shape=dict(shape), seed_index=case["seed_index"],
                         visible=case["visible"], passed=False)
    inputs = ex.make_inputs(shape, np.random.default_rng(case["seed"]))
    pristine = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    expected = ex.reference(pristine)
    scales = ex.error_scale(pristine)
    args = {a.name: inputs[a.name] for a in ex.args if a.role in ("in", "scalar")}
    try:
        got = tc(**args)
    except TcShapeError as exc:
        result.error = f"The comprehension cannot run on these shapes: {exc}."
        return result
    got = got if isinstance(got, tuple) else (got,)
    outputs = dict(zip(tc.checked.definition.outputs, got))
    total_bad, first = 0, None
    for arg in ex.outputs:
        out = np.asarray(outputs[arg.name])
        want = np.asarray(expected[arg.name])
        if out.shape != want.shape:
            result.error = (f"{arg.name} has shape {out.shape} for these inputs, but should have {want.shape}: "
                            f"are the indices and their ranges right?")
            result.hint = "print the inferred ranges with check_text(...).describe_ranges() to see where they differ"
            return result
        cmp = compare(out, want, scales[arg.name], ex.rtol, ex.atol)
        result.n_total += int(out.size)
        total_bad += cmp["n_bad"]
        result.max_abs_err = max(result.max_abs_err or 0.0, cmp["max_abs_err"])
        result.max_rel_err = max(result.max_rel_err or 0.0, cmp["max_rel_err"])
        if cmp["n_bad"] and first is None:
            first = (arg, cmp)
    result.n_bad = total_bad
    result.passed = total_bad == 0
    if first is not None:
        arg, cmp = first
        result.output = arg.name
        result.first_bad_index = cmp["first_bad_index"]
        result.expected = cmp["expected"]
        result.got = cmp["got"]
        result.error_map = error_map(cmp["bad"])
    return result


def run_tc_request(request: dict, ex: Exercise, send) -> ExerciseResult:
    """Check one ``%%tc`` submission as described by ``request`` (correctness only)."""
    from kernels.comprehensions import NAIVE, TcError, compile_tc
    from kernels.runtime import errors as E
    from kernels.runtime import selection

    mode = request["mode"]
    res = ExerciseResult(exercise=ex.name, status="failed", correctness_max=ex.correctness_points,
                         speed_max=ex.speed_points, mode=mode, launch={})
    started = time.monotonic()
    try:
        backend = selection.current_backend()
    except Exception as exc:
        res.status, res.message = "crashed", f"No backend to run kernels on: {exc}"
        return res
    res.backend = backend.name
    try:
        res.device = str(backend.describe().get("name") or backend.name)
    except Exception:
        res.device = backend.name

    send("stage", stage="compile")
    text = "\n" * max(0, int(request.get("cell_line", 1)) - 1) + request["source"]
    try:
        tc = compile_tc(text, NAIVE)
    except TcError as exc:
        res.status = "compile_error"
        res.message = f"The index notation is not valid (line numbers are the cell's). {exc}"
        return res
    problem = _interface_problem(ex, tc.checked)
    if problem:
        res.status, res.message = "compile_error", problem
        return res

    send("stage", stage="correctness")
    failure = None
    for index, case in enumerate(request["cases"]):
        send("start_case", index=index)
        try:
            shape_result = _run_case(tc, ex, case)
        except E.KernelCompileError as exc:
            res.status, res.message = "compile_error", f"The generated kernel did not compile: {exc}"
            res.log = (getattr(exc, "log", "") or "")[-4000:]
            return res
        except E.KernelError as exc:
            failure = CaseError("crashed", f"The generated kernel failed: {exc}")
            shape_result = ShapeResult(label=ex.shape_label(case["shape"]), shape=dict(case["shape"]),
                                       seed_index=case["seed_index"], visible=case["visible"], passed=False,
                                       error=str(failure))
        res.shapes.append(shape_result)
        send("case", case=_shape_dict(shape_result))
        if failure is not None:
            break
    _score_correctness(ex, res, failure)
    res.speed_note = "index notation is graded for correctness only"
    res.elapsed_s = round(time.monotonic() - started, 3)
    return res
