"""The secret per-student size cannot be collapsed by the launch a student picks."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.exercises import get_exercise
from autograder.case_plan import derive_seed
from autograder.secret_sizes import size_avoiding

STUDENTS = [f"student{k}" for k in range(12)]


def _draw(exercise: str, launch: dict, student: str) -> dict:
    ex = get_exercise(exercise)
    rng = np.random.default_rng(derive_seed(b"secret sizes", student, ex.name, -1, 0))
    (shape,) = ex.secret_shapes(rng, launch)
    return shape


@pytest.mark.parametrize("exercise, key, low, high", [
    ("saxpy", "n", 2_000, 60_000), ("reduce_sum", "n", 2_000, 60_000),
    ("perceptron_forward", "n", 700, 10_000), ("gradient_sum", "n", 700, 15_000)])
def test_every_block_size_leaves_the_size_varying_and_in_range(exercise, key, low, high):
    for block in range(1, 1025):
        sizes = [_draw(exercise, {"block": block}, s)[key] for s in STUDENTS]
        assert all(low <= n < high for n in sizes), (block, sizes)
        assert len(set(sizes)) >= len(STUDENTS) - 1, (block, sizes)  # one student each, not one constant
        if block > 1:
            assert all(n % block and n % 32 for n in sizes), (block, sizes)


@pytest.mark.parametrize("exercise", ["fc_backward_input", "fc_backward_weight"])
def test_fully_connected_sizes_vary_for_every_block_shape(exercise):
    for bx in (1, 2, 16, 32, 1024):
        for by in (1, 3, 16, 1024):
            shapes = [_draw(exercise, {"block_x": bx, "block_y": by}, s) for s in STUDENTS]
            assert len({(s["n"], s["in"]) for s in shapes}) >= len(STUDENTS) - 1, (bx, by, shapes)
            assert all(17 <= s["n"] < 140 and 17 <= s["in"] < 140 for s in shapes)


def test_a_draw_never_falls_back_to_a_constant():
    rng = np.random.default_rng(0)
    sizes = {size_avoiding(rng, 100, 1000, 1, 2, 32) for _ in range(200)}
    assert len(sizes) > 100 and all(n % 2 for n in sizes)
    with pytest.raises(ValueError, match="too narrow"):
        size_avoiding(rng, 10, 12, 2)
