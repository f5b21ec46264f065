"""Approximation is an attack: a kernel that skips or samples a fixed share of a reduction fails, at every size.

For every exercise whose output is a reduction (its :attr:`~autograder.exercise.Exercise.reductions`), the
outputs of the approximating kernels are computed exactly, in float64, as the exercise's reference on inputs
masked the way each kernel reads them (a sum over the terms a kernel reads, scaled up by how many it skipped,
is the reference of the operand with the skipped terms zeroed and the rest scaled; a maximum over the terms it
reads is the reference with the skipped ones at -inf):

* ``half`` and ``quarter``: the first half (quarter) of the terms, times 2 (4);
* ``strided``: every other term, times 2;
* ``first_block``: the first 256 terms (one block's), times the number of blocks there are;
* ``skip_1_64``: every term but one in 64, times 64/63, and ``drop_1_64``: the same, not scaled.

Each must fail the grader's own comparison on every shape where it reads less than all terms: the visible
and hidden shapes, a secret one, and the timing size, which the GPU grades too (a quarter-sum scored 18 of 20
there against its honest twin's 16).  The honest twins are float32 sums in the orders a correct kernel sums
(pairwise, one after another, in a random order as one atomicAdd per element does, per thread of a grid then a
tree, one block of 256 threads): each passes at every size, the timing size included.  The same attacks as
CUDA kernels, graded end to end, are in test_sandbox_attacks.py-style gradings below (emulator) and, timed at
the timing size, in the ``gpu`` test at the end.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from autograder.comparison import compare
from autograder.exercises import all_exercises
from autograder.timing_policy import timed_shape

#: Exercises whose outputs reduce an input (sums of products, sums, maxima).
REDUCING = sorted(name for name, ex in all_exercises().items() if ex.reductions)
BLOCK = 256


def _kept(length: int, attack: str) -> np.ndarray:
    """Which of ``length`` terms the kernel ``attack`` reads."""
    r = np.arange(length)
    return {"half": r < math.ceil(length / 2), "quarter": r < math.ceil(length / 4), "strided": r % 2 == 0,
            "first_block": r < BLOCK, "skip_1_64": r % 64 != 63, "drop_1_64": r % 64 != 63}[attack]


ATTACKS = ("half", "quarter", "strided", "first_block", "skip_1_64", "drop_1_64")


def _attacked(ex, inputs: dict, attack: str) -> tuple[dict, bool]:
    """(the inputs as the approximating kernel uses them, whether it skips any term at all)."""
    changed = dict(inputs)
    skips = False
    for reduction in ex.reductions:
        for position, (name, axes) in enumerate(reduction.operands):
            value = np.asarray(inputs[name])
            reduced = tuple(value.shape[a] for a in axes)
            length = int(np.prod(reduced))
            kept = _kept(length, attack).reshape(reduced)
            if kept.all():
                continue
            skips = True
            shape = [1] * value.ndim
            for a, size in zip(axes, reduced):
                shape[a] = size
            kept = kept.reshape(shape)  # the reduced axes are declared in order
            if reduction.kind == "max":
                changed[name] = np.where(kept, value, -np.inf).astype(value.dtype)
                continue
            scale = 1.0 if attack == "drop_1_64" or position else length / int(kept.sum())
            changed[name] = np.where(kept, value * scale, 0).astype(value.dtype)
    return changed, skips


def _shapes(ex) -> list[tuple[str, dict]]:
    launch = ex.validate_launch({"block": BLOCK} if any(k.name == "block" and k.required for k in ex.launch_keys) else {})
    secret = list(ex.secret_shapes(np.random.default_rng(7), launch)) if ex.secret_shapes else []
    named = [(f"visible {i}", s) for i, s in enumerate(ex.visible_shapes)]
    named += [(f"hidden {i}", s) for i, s in enumerate(ex.hidden_shapes)] + [("secret", s) for s in secret]
    return named + [("timing", timed_shape(ex))]


def _fails(ex, inputs: dict, outputs: dict) -> bool:
    expected, scales = ex.reference(inputs), ex.error_scale(inputs)
    return any(compare(np.asarray(outputs[a.name], np.float32), np.asarray(expected[a.name]), scales[a.name],
                       ex.rtol, ex.atol)["n_bad"] for a in ex.outputs)


@pytest.mark.parametrize("name", REDUCING)
def test_every_approximation_of_a_reduction_fails_at_every_size(name):
    ex = all_exercises()[name]
    survived = []
    for label, shape in _shapes(ex):
        inputs = ex.make_inputs(shape, np.random.default_rng(zlib.crc32(f'{name} {label}'.encode())))
        for attack in ATTACKS:
            changed, skips = _attacked(ex, inputs, attack)
            if skips and not _fails(ex, inputs, ex.reference(changed)):
                survived.append(f"{attack} at {label} {ex.shape_label(shape)}")
    assert not survived, f"approximations of {name} that pass: {survived}"


def _float32_sums(x: np.ndarray, rng) -> dict[str, np.float32]:
    """The sum of ``x`` in float32, in each order a correct kernel may sum it."""
    x = np.asarray(x, np.float32)
    n = x.size
    threads = BLOCK * 1056
    padded = np.zeros(-(-n // threads) * threads, np.float32)
    padded[:n] = x
    per_thread = padded.reshape(-1, threads).cumsum(axis=0, dtype=np.float32)[-1]
    one_block = np.zeros(-(-n // BLOCK) * BLOCK, np.float32)
    one_block[:n] = x
    return {
        "pairwise": np.sum(x, dtype=np.float32),
        "one_after_another": np.cumsum(x, dtype=np.float32)[-1],
        "one_atomic_per_element": np.cumsum(x[rng.permutation(n)], dtype=np.float32)[-1],
        "grid_stride_then_tree": np.sum(per_thread, dtype=np.float32),
        "one_block_of_256": np.sum(one_block.reshape(-1, BLOCK).cumsum(axis=0, dtype=np.float32)[-1],
                                   dtype=np.float32),
    }


@pytest.mark.parametrize("name", ["reduce_sum", "gradient_sum"])
def test_honest_float32_sums_pass_at_every_size(name):
    """The twins: a sum in any order a correct kernel uses passes, at every size (the timing size included)."""
    ex = all_exercises()[name]
    rng = np.random.default_rng(11)
    wrong = []
    for label, shape in _shapes(ex):
        inputs = ex.make_inputs(shape, np.random.default_rng(zlib.crc32(f'{name} {label}'.encode())))
        terms = next(np.asarray(inputs[n], np.float32) for n, _ in ex.reductions[0].operands)
        rows = terms.reshape(-1, terms.shape[-1])
        output = ex.outputs[0].name
        for order in _float32_sums(rows[0], rng):
            got = np.array([_float32_sums(row, rng)[order] for row in rows]).reshape(np.shape(ex.reference(inputs)[output]))
            if _fails(ex, inputs, {output: got}):
                wrong.append(f"{order} at {label}")
    assert not wrong, wrong


def test_a_kernel_writing_zeros_or_the_mean_fails_every_sum():
    for name in ("reduce_sum", "gradient_sum"):
        ex = all_exercises()[name]
        for label, shape in _shapes(ex):
            inputs = ex.make_inputs(shape, np.random.default_rng(3))
            want = ex.reference(inputs)[ex.outputs[0].name]
            terms = next(np.asarray(inputs[n], np.float64) for n, _ in ex.reductions[0].operands)
            if terms.shape[-1] == 1:
                continue  # one term: its mean is its sum
            mean = terms.reshape(-1, terms.shape[-1]).mean(axis=1).reshape(np.shape(want))
            for wrong in (np.zeros_like(want), mean):
                assert _fails(ex, inputs, {ex.outputs[0].name: wrong}), (name, label)
