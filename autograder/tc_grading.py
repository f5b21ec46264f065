"""Grading index notation: the text of a ``%%tc`` cell becomes a kernel in the grading process.

Only the comprehension's text reaches this process (see :mod:`autograder.isolation`); here it is
parsed and checked (:mod:`kernels.index_notation`), its interface compared with the exercise's
declaration, its kernel generated (the naive schedule: what is graded is the notation, not a
schedule) and run on every case, visible, hidden and secret, against the exercise's float64
reference, through the same comparison as the CUDA exercises.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from kernels.runtime import errors as E

from . import case_outputs
from .checker import _shape_dict, backend_for
from .comparison import CaseError, compare
from .exercise import Exercise
from .mistakes import INDEX_LETTERS, ORDINALS, MistakeFinder
from .result import ExerciseResult, ShapeResult
from .scoring import score_correctness
from .verdict import case_data, judge_case


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


def _indices_reordered(ex: Exercise, name: str, got: np.ndarray, want: np.ndarray, scale) -> str:
    """Where ``got`` is the right ``want`` with its axes in another order (a left-hand side whose indices are listed
    in another order than the exercise's), that order in words; else ''."""
    letters = INDEX_LETTERS[:want.ndim]
    scale = np.broadcast_to(np.asarray(scale, np.float64), want.shape)
    for order in itertools.permutations(range(want.ndim)):
        if list(order) == sorted(order) or got.shape != tuple(want.shape[a] for a in order):
            continue
        if not compare(np.asarray(got, np.float64), want.transpose(order), scale.transpose(order), ex.rtol,
                       ex.atol)["n_bad"]:
            stored = "][".join(letters[a] for a in np.argsort(order))  # got[i][j].. holds want[stored]
            return (f"{name} holds the right values with its indices in another order: {name}[{stored}] of the "
                    f"right result is where {name}[{']['.join(letters)}] is (the result transposed) -- are the "
                    f"indices on the left-hand side in the order the exercise gives them?")
    return ""


def _run_case(tc, ex: Exercise, case: dict, outputs_dir: str | None, mistakes: MistakeFinder) -> ShapeResult:
    from kernels.index_notation import TcShapeError  # deferred: as in run_tc_request

    shape = case["shape"]
    result = ShapeResult(label=ex.shape_label(shape), shape=dict(shape), seed_index=case["seed_index"],
                         visible=case["visible"], passed=False)
    inputs, pristine, expected, scales = case_data(ex, shape, case["seed"])
    args = {a.name: inputs[a.name] for a in ex.args if a.role in ("in", "scalar")}
    try:
        got = tc(**args)
    except TcShapeError as exc:
        result.error = f"The comprehension cannot run on these shapes: {exc}."
        return result
    got = got if isinstance(got, tuple) else (got,)
    outputs = {name: np.asarray(value) for name, value in zip(tc.checked.definition.outputs, got)}
    for arg in ex.outputs:
        want = np.shape(expected[arg.name])
        if arg.name in outputs and outputs[arg.name].shape != want:
            result.error = (f"{arg.name} has shape {outputs[arg.name].shape} for these inputs, but should have {want}: "
                            f"are the indices and their ranges right?")
            result.hint = (_indices_reordered(ex, arg.name, outputs[arg.name], np.asarray(expected[arg.name]),
                                              scales[arg.name])
                           or _axes_differ(arg.name, outputs[arg.name].shape, want)
                           or "print the inferred ranges with check_text(...).describe_ranges() to see where they differ")
            return result
    if outputs_dir:
        case_outputs.save(outputs_dir, f"case-{case['index']}", outputs)
    judge_case(ex, result, outputs, {}, pristine, expected, scales, None)
    if not result.passed:
        result.hint = mistakes.hint(result.label, pristine, expected, scales, outputs) or result.hint
    return result


def _axes_differ(name: str, got: tuple, want: tuple) -> str:
    """What the shape ``got`` of output ``name`` shows against ``want``, where one reading alone fits: an axis left
    out of the output, or two axes that have each other's sizes; '' otherwise (a range off is said by the error)."""
    if len(got) == len(want) - 1:
        left_out = [k for k in range(len(want)) if tuple(want[:k] + want[k + 1:]) == tuple(got)]
        if len(left_out) == 1:
            k = left_out[0]
            return (f"{name} has no {ORDINALS[k]} axis: the index of that axis is missing from "
                    f"{name}(...) on the left, so each value of it is not kept apart -- an index on the right only is "
                    f"summed over (or, read at one value, leaves the rest of its range out).")
    if len(got) == len(want):
        differ = [k for k in range(len(want)) if got[k] != want[k]]
        if len(differ) == 2 and (got[differ[0]], got[differ[1]]) == (want[differ[1]], want[differ[0]]):
            first, second = (ORDINALS[k] for k in differ)
            return (f"The {first} and {second} axes of {name} have each other's sizes: their indices are swapped "
                    f"where they are read on the right (their ranges are inferred from there), or on the left.")
    return ""


def run_tc_request(request: dict, ex: Exercise, send) -> ExerciseResult:
    """Check one ``%%tc`` submission as described by ``request`` (correctness only)."""
    from kernels.index_notation import NAIVE, TcError, compile_tc  # deferred: its parser, 100 ms, only in a %%tc child

    mode = request["mode"]
    res = ExerciseResult(exercise=ex.name, status="failed", correctness_max=ex.correctness_points,
                         speed_max=ex.speed_points, mode=mode, launch={})
    started = time.monotonic()
    if backend_for(res) is None:
        return res

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
    mistakes = MistakeFinder(ex)  # names a mistake from a wrong output, within its cost
    for index, case in enumerate(request["cases"]):
        send("start_case", index=index)
        try:
            shape_result = _run_case(tc, ex, {**case, "index": index}, request.get("outputs_dir"), mistakes)
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
    score_correctness(ex, res, failure)
    res.speed_note = "index notation is graded for correctness only"
    res.elapsed_s = round(time.monotonic() - started, 3)
    return res
