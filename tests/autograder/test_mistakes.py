"""A mistake named from a wrong output alone: the inputs, or the layout, under which the reference gives it.

Each case is an output a kernel with that mistake would write, made here with NumPy from the exercise's own
reference (no kernel runs); each has its honest twin (a right output, rounded as float32 rounds it) and its
ambiguous twin (a shape on which two mistakes give the same output), on which nothing is named.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from autograder.exercises import get_exercise
from autograder.mistakes import MIN_OUTPUT_ELEMENTS, MistakeFinder, name_the_mistake, names_a_mistake
from autograder.result import ExerciseResult, ShapeResult
from autograder.scoring import score_correctness
from autograder.tc_grading import _indices_reordered
from autograder.verdict import case_data


def _case(exercise: str, shape: dict, seed: int = 7):
    ex = get_exercise(exercise)
    _, pristine, expected, scales = case_data(ex, shape, seed)
    return ex, pristine, expected, scales


def _under(ex, pristine: dict, **changed) -> dict:
    """The outputs the reference gives with some inputs changed, as float32, as a kernel writes them."""
    inputs = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in pristine.items()}
    return {k: np.asarray(v, dtype=np.float32) for k, v in ex.reference({**inputs, **changed}).items()}


FC = {"n": 6, "in": 5, "out": 7, "activation": 1}


def test_a_sum_one_term_short_is_named_and_the_right_sum_is_not():
    ex, inputs, expected, scales = _case("fc_backward_input", FC)
    short = inputs["dY"].copy()
    short[:, -1] = 0
    hint = name_the_mistake(ex, inputs, expected, scales, _under(ex, inputs, dY=short))
    assert names_a_mistake(hint) and "without its last term" in hint and "stops one short" in hint, hint
    assert "second index of dY" in hint, hint
    right = {k: np.asarray(v, dtype=np.float32) for k, v in expected.items()}
    assert name_the_mistake(ex, inputs, expected, scales, right) == ""


def test_an_unrolled_loop_without_its_remainder_is_named_by_its_step():
    ex, inputs, expected, scales = _case("capsule_predict", {"batch": 2, "in_caps": 3, "in_dim": 7, "out_caps": 2,
                                                             "out_dim": 3, "positions": 3, "types": 1})
    cut = inputs["W"].copy()
    cut[..., 4:] = 0  # in_dim = 7 unrolled by 4: the last 3 terms left out
    hint = name_the_mistake(ex, inputs, expected, scales, _under(ex, inputs, W=cut))
    assert "only its first 4 of its 7 terms" in hint and "unrolled by four" in hint, hint


def test_an_input_read_at_index_zero_of_one_axis_names_that_index():
    ex, inputs, expected, scales = _case("capsule_predict", {"batch": 3, "in_caps": 2, "in_dim": 4, "out_caps": 2,
                                                             "out_dim": 3, "positions": 2, "types": 1})
    first = np.broadcast_to(inputs["u"][:1], inputs["u"].shape).copy()  # every sample reads sample 0
    hint = name_the_mistake(ex, inputs, expected, scales, _under(ex, inputs, u=first))
    assert "u is read as if the first index of u were always 0" in hint, hint


def test_an_input_never_read_and_a_scalar_left_out_are_named():
    ex, inputs, expected, scales = _case("conv2d_forward", {"N": 2, "C": 2, "H": 6, "W": 5, "M": 3, "K": 3, "pad": 1,
                                                            "stride": 1})
    hint = name_the_mistake(ex, inputs, expected, scales, _under(ex, inputs, b=np.zeros_like(inputs["b"])))
    assert "with b all 0" in hint, hint
    ex, inputs, expected, scales = _case("fc_backward_input", FC)
    hint = name_the_mistake(ex, inputs, expected, scales, _under(ex, inputs, activation=0))
    assert "as if activation were 0" in hint, hint


def test_a_stride_or_dilation_ignored_is_named_though_its_value_is_also_a_size():
    """A kernel that ignores the stride (or dilation) writes the corner of the stride-1 output that its own output's
    size covers; the stride here is 2, as C is, and is still tried (a size set to 1 never makes the output larger).
    Its honest twin, the right output, names nothing."""
    for exercise, shape, name in (
            ("conv2d_forward", {"N": 1, "C": 2, "H": 9, "W": 8, "M": 3, "K": 3, "pad": 1, "stride": 2}, "stride"),
            ("conv2d_forward_tiled", {"N": 1, "C": 2, "H": 11, "W": 10, "M": 3, "K": 3, "dilation": 2}, "dilation")):
        ex, inputs, expected, scales = _case(exercise, shape)
        larger = _under(ex, inputs, **{name: 1})
        corner = {k: v[tuple(slice(0, n) for n in expected[k].shape)].copy() for k, v in larger.items()}
        hint = name_the_mistake(ex, inputs, expected, scales, corner)
        assert names_a_mistake(hint) and f"as if {name} were 1" in hint, hint
        right = {k: np.asarray(v, dtype=np.float32) for k, v in expected.items()}
        assert name_the_mistake(ex, inputs, expected, scales, right) == ""


def test_a_term_that_two_changes_leave_out_alike_is_named_once():
    """weight_decay = 0 and W all 0 both drop weight_decay * W: the term is named, not either change alone."""
    ex, inputs, expected, scales = _case("fc_backward_weight", {"n": 6, "in": 5, "out": 7, "weight_decay": 0.5})
    hint = name_the_mistake(ex, inputs, expected, scales, _under(ex, inputs, weight_decay=np.float32(0)))
    assert "without its term in weight_decay and W" in hint, hint


def test_a_formula_mistake_of_the_exercise_is_named_and_its_honest_twin_is_not():
    ex, inputs, expected, scales = _case("layernorm_residual", {"n": 12, "c": 40, "residual": 1, "offset": 0.0,
                                                                "eps": 1e-5})
    unbiased = next(m for m in ex.formula_mistakes if m.key == "unbiased variance")
    wrong = {k: np.asarray(v, np.float32) for k, v in unbiased.reference(inputs).items()}
    hint = name_the_mistake(ex, inputs, expected, scales, wrong)
    assert "variance divided by c - 1" in hint, hint
    right = {k: np.asarray(v, np.float32) for k, v in expected.items()}
    assert name_the_mistake(ex, inputs, expected, scales, right) == ""


def test_an_input_read_transposed_or_rotated_is_named():
    ex, inputs, expected, scales = _case("conv2d_forward", {"N": 1, "C": 2, "H": 7, "W": 6, "M": 3, "K": 3, "pad": 0,
                                                            "stride": 1})
    wf = inputs["Wf"]
    swapped = np.ascontiguousarray(wf).reshape(2, 3, 3, 3).swapaxes(0, 1).copy()  # W[c][m] for W[m][c]
    hint = name_the_mistake(ex, inputs, expected, scales, _under(ex, inputs, Wf=swapped))
    assert "Wf is read with the first index and the second index swapped" in hint, hint
    hint = name_the_mistake(ex, inputs, expected, scales, _under(ex, inputs, Wf=wf[..., ::-1, ::-1].copy()))
    assert "rotated by 180 degrees" in hint, hint


def test_an_output_stored_transposed_or_packed_too_small_is_named():
    ex, inputs, expected, scales = _case("fc_backward_weight", {"n": 4, "in": 3, "out": 5,
                                                                "weight_decay": 0.0})
    dw = np.asarray(expected["dW"], dtype=np.float32)
    hint = name_the_mistake(ex, inputs, expected, scales, {"dW": dw.T.copy().reshape(dw.shape)})
    assert "the value of dW[j][i] is stored where dW[i][j] belongs" in hint, hint
    ex, inputs, expected, scales = _case("conv2d_forward", {"N": 2, "C": 1, "H": 6, "W": 6, "M": 2, "K": 3, "pad": 1,
                                                            "stride": 1})
    y = np.asarray(expected["Y"], dtype=np.float32)
    packed = np.full(y.size, np.nan, dtype=np.float32)
    packed[: y[..., :-1, :-1].size] = y[..., :-1, :-1].ravel()  # the map one row and column short, written packed
    hint = name_the_mistake(ex, inputs, expected, scales, {"Y": packed.reshape(y.shape)})
    assert "one row and one column fewer" in hint and "+ 1" in hint, hint


def test_a_common_factor_is_named_only_over_enough_elements():
    ex, inputs, expected, scales = _case("fc_backward_weight", {"n": 5, "in": 3, "out": 5,
                                                                "weight_decay": 0.0})
    quarter = {"dW": np.asarray(expected["dW"] / 4, dtype=np.float32)}
    hint = name_the_mistake(ex, inputs, expected, scales, quarter)
    assert "1/4 of the right one" in hint, hint
    ex, inputs, expected, scales = _case("broadcast", {"rows": 1, "cols": 1})  # one element agrees with any factor
    assert name_the_mistake(ex, inputs, expected, scales, {"out": np.float32(2) * expected["out"]}) is None


def test_where_two_mistakes_give_the_output_only_what_it_shows_is_said():
    # a sum of two terms with its last left out is also the sum of its first term alone: only that is said
    ex, inputs, expected, scales = _case("fc_backward_input", {**FC, "out": 2})
    short = inputs["dY"].copy()
    short[:, -1] = 0
    hint = name_the_mistake(ex, inputs, expected, scales, _under(ex, inputs, dY=short))
    assert "first term alone, the second of its two left out" in hint and "stops one short" not in hint, hint


def test_tiny_or_zero_outputs_are_left_to_the_hints_on_the_symptom():
    ex, inputs, expected, scales = _case("fc_backward_input", {**FC, "n": 1, "in": 1})
    assert expected["dX"].size < MIN_OUTPUT_ELEMENTS
    assert name_the_mistake(ex, inputs, expected, scales, {"dX": np.float32(3) * expected["dX"]}) is None
    ex, inputs, expected, scales = _case("fc_backward_input", FC)
    assert name_the_mistake(ex, inputs, expected, scales, {"dX": np.zeros_like(expected["dX"])}) is None


def test_the_finder_says_a_mistake_once_a_second_shape_bears_it_out_and_stops_after_a_few_shapes():
    ex, inputs, expected, scales = _case("fc_backward_input", FC)
    other = _case("fc_backward_input", {**FC, "n": 9, "out": 4}, seed=8)[1:]
    wrong, wrong_other = _under(ex, inputs, activation=0), _under(ex, other[0], activation=0)
    noise = {"dX": np.asarray(expected["dX"], dtype=np.float32) + np.float32(1)}
    finder = MistakeFinder(ex)
    assert finder.hint("shape 0", inputs, expected, scales, wrong) == ""  # one shape: maybe a coincidence
    hint = finder.hint("shape 1", *other, wrong_other)
    assert names_a_mistake(hint) and "as if activation were 0" in hint, hint
    assert finder.hint("shape 2", *other, wrong_other) == ""  # said once: the rest cost nothing
    finder = MistakeFinder(ex)
    assert finder.hint("shape 0", inputs, expected, scales, wrong) == ""
    assert finder.hint("shape 1", inputs, expected, scales, noise) == ""  # not borne out: a coincidence
    assert finder.hint("shape 2", inputs, expected, scales, noise) == ""
    assert finder.hint("shape 3", inputs, expected, scales, wrong) == ""
    assert finder.hint("shape 4", *other, wrong_other) == ""  # the budget is spent


def test_the_message_shows_a_named_mistake_before_a_symptom_of_the_first_case():
    ex = get_exercise("fc_backward_input")
    named = "Compared with the reference, the output is what the sum ... gives without its last term: ..."
    res = ExerciseResult(exercise=ex.name, status="failed", correctness_max=ex.correctness_points,
                         speed_max=ex.speed_points, mode="hidden", launch={})
    res.shapes = [ShapeResult(label="n=1", shape={}, seed_index=0, visible=True, passed=False,
                              hint="Every output value is 0: ..."),
                  ShapeResult(label="n=4", shape={}, seed_index=0, visible=True, passed=False, hint=named)]
    score_correctness(ex, res, None)
    assert f"Hint (from n=4): {named}" in res.message and "Every output value is 0" not in res.message, res.message


@pytest.mark.parametrize("mistake", ["none", "noise"])
def test_an_output_no_mistake_explains_names_none(mistake):
    ex, inputs, expected, scales = _case("conv2d_forward", {"N": 1, "C": 2, "H": 7, "W": 6, "M": 3, "K": 3, "pad": 0,
                                                            "stride": 1})
    y = np.asarray(expected["Y"], dtype=np.float32)
    if mistake == "noise":
        y = y + np.random.default_rng(1).normal(size=y.shape).astype(np.float32)
    assert name_the_mistake(ex, inputs, expected, scales, {"Y": y}) == ""


def test_a_reference_that_cannot_take_a_changed_input_names_nothing_and_breaks_nothing():
    ex, inputs, expected, scales = _case("fc_backward_input", FC)

    def refusing(changed):
        raise AttributeError("a reference given inputs it was never written for")

    wrong = _under(ex, inputs, activation=0)
    assert names_a_mistake(name_the_mistake(ex, inputs, expected, scales, wrong))
    assert name_the_mistake(replace(ex, reference=refusing), inputs, expected, scales, wrong) == ""


def test_a_formula_mistake_and_a_factor_that_give_the_same_output_name_neither():
    # over n = 4 samples without decay, the mean over the samples is the sum divided by 4: the output cannot tell
    ex, inputs, expected, scales = _case("fc_backward_weight", {"n": 4, "in": 3, "out": 5, "weight_decay": 0.0})
    assert name_the_mistake(ex, inputs, expected, scales, {"dW": np.asarray(expected["dW"] / 4, np.float32)}) == ""
    ex, inputs, expected, scales = _case("fc_backward_weight", {"n": 4, "in": 3, "out": 5, "weight_decay": 0.5})
    mean = expected["dW"] - 0.75 * (expected["dW"] - 0.5 * inputs["W"].astype(np.float64))
    hint = name_the_mistake(ex, inputs, expected, scales, {"dW": np.asarray(mean, np.float32)})
    assert "divided by n (their mean)" in hint, hint


def test_a_mistake_on_a_bf16_output_is_judged_within_the_rounding_of_its_own_values():
    ex = get_exercise("gemm_bf16_wmma")
    mistake, = (m for m in ex.formula_mistakes if m.key == "B fragments transposed")
    ex, inputs, expected, scales = _case("gemm_bf16_wmma", {"M": 40, "N": 72, "K": 24, "alpha": 0.5, "beta": 1.0})
    bf16 = inputs["B"].dtype
    misread = {"C": mistake.reference(inputs)["C"].astype(bf16).astype(np.float32)}  # stored in BF16, as C is
    hint = name_the_mistake(ex, inputs, expected, scales, misread)
    assert "every 16 x 16 block of B read transposed" in hint, hint
    unscaled = replace(ex, formula_mistakes=(replace(mistake, result_scale=None),))
    assert not names_a_mistake(name_the_mistake(unscaled, inputs, expected, scales, misread))
    right = {"C": expected["C"].astype(bf16).astype(np.float32)}
    assert name_the_mistake(ex, inputs, expected, scales, right) == ""


def test_a_comprehension_whose_result_has_its_indices_in_another_order_is_told_which():
    ex, inputs, expected, scales = _case("tc_batched_matmul", {"B": 2, "M": 3, "K": 4, "N": 5})
    want = expected["Z"]
    hint = _indices_reordered(ex, "Z", want.transpose(0, 2, 1).astype(np.float32), want, scales["Z"])
    assert "Z[i][k][j] of the right result is where Z[i][j][k] is" in hint, hint
    rotated = want.transpose(1, 2, 0)  # rotated[i][j][k] = want[k][i][j]
    hint = _indices_reordered(ex, "Z", rotated.astype(np.float32), want, scales["Z"])
    assert "Z[k][i][j] of the right result is where Z[i][j][k] is" in hint, hint
    wrong = want.transpose(0, 2, 1) * 1.5  # the shape of the transpose, other values: not the result reordered
    assert _indices_reordered(ex, "Z", wrong.astype(np.float32), want, scales["Z"]) == ""
