"""An exercise's kernel name and arguments are read from its declaration, the one place they are written.

A const pointer is an input, any other pointer an output (filled with NaN before each launch, zeros where
the exercise says ``zeroed``, or read and written where it says ``inout``), a value a scalar; an index-
notation exercise's inputs and outputs are those of its comprehension's signature.
"""

from __future__ import annotations

import dataclasses

import pytest

from autograder.exercise import Arg
from autograder.exercises import all_exercises, get_exercise


def test_roles_follow_the_declaration():
    saxpy = get_exercise("saxpy")
    assert saxpy.kernel == "saxpy"
    assert saxpy.args == (Arg("n", "scalar"), Arg("alpha", "scalar"), Arg("x", "in"), Arg("incx", "scalar"),
                          Arg("y", "inout"), Arg("incy", "scalar"))
    written_only = dataclasses.replace(saxpy, inout=())
    assert written_only.args[-2] == Arg("y", "out")


def test_an_output_the_kernel_adds_into_starts_at_zero():
    args = {a.name: a for a in get_exercise("reduce_sum").args}
    assert args["out"] == Arg("out", "out", init="zeros")
    assert args["x"].init == "nan" and args["x"].role == "in"


def test_integer_pointers_keep_their_roles():
    args = {a.name: a.role for a in get_exercise("lsoftmax_cos_mtheta").args}
    assert args == {"cos_theta": "in", "cos_mtheta": "out", "k_out": "out", "N": "scalar", "m": "scalar",
                    "angle_margin": "scalar"}
    assert {a.name: a.role for a in get_exercise("lsoftmax_patch_logits").args}["labels"] == "in"


@pytest.mark.parametrize("field", ["inout", "zeroed"])
def test_a_misspelt_argument_name_is_refused_naming_it(field):
    broken = dataclasses.replace(get_exercise("saxpy"), **{field: ("Y",)})
    with pytest.raises(ValueError, match=r"exercise saxpy: Y not among the kernel's arguments"):
        broken.args


def test_index_notation_arguments_come_from_the_comprehension_signature():
    exercise = get_exercise("tc_depthwise_conv")
    assert exercise.signature == "def depthwise_multiplier(float(N,C,H,W) X, float(C,Q,KH,KW) F) -> (Y)"
    assert exercise.kernel == "tc_depthwise_conv"
    assert exercise.args == (Arg("X", "in"), Arg("F", "in"), Arg("Y", "out"))


@pytest.mark.parametrize("name", sorted(n for n, e in all_exercises().items() if e.language == "cuda"))
def test_every_kernel_argument_has_one_role_in_declaration_order(name):
    exercise = get_exercise(name)
    params = exercise.declared_params
    assert [a.name for a in exercise.args] == [p.name for p in params]
    for arg, param in zip(exercise.args, params):
        assert (arg.role == "scalar") == (not param.is_pointer)
        assert (arg.role == "in") == (param.is_pointer and param.is_const)
    assert exercise.outputs, f"{name} writes nothing"
