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

A softmax's maximum and sum of exponentials are declared as a maximum (the terms left out at -inf: the
statistics of the part read), attention's sum over the keys as its sum of P V, and LayerNorm's mean and
variance are computed from the part read by hand (``SAMPLED_BY_HAND``).  Each approximation must fail the
grader's own comparison on every shape where its float32 output is not the right one: the visible and hidden
shapes, a secret one, and the timing size, which the GPU grades too (a quarter-sum scored 18 of 20 there
against its honest twin's 16); at the timing size the sizes along which outputs are independent (a product's
M and N, rows, heads) are cut, its reduction's length kept.  Every exercise declares its reductions or is
listed as elementwise.  The honest twins are float32 sums in the orders a correct kernel sums
(pairwise, one after another, in a random order as one atomicAdd per element does, per thread of a grid then a
tree, one block of 256 threads): each passes at every size, the timing size included but for the orders whose
accumulators there take hundreds of thousands of terms each (one for all, one per thread of a single block), which
stagnate on any data.  The same attacks on the
sum, as CUDA kernels, are graded on a GPU (its hidden cases and the timing size) by the ``gpu`` test at the
end; the quarter-sum is graded end to end, on both backends, as the ``approximate_sum`` notebook of the
hostile suite (test_nbgrader_cycle.py).
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from autograder.comparison import compare
from autograder.exercises import all_exercises, cuda_from_python, warp_shuffle
from autograder.isolation import grade_submission
from autograder.submission import submission_from_cell
from autograder.timing_policy import timed_shape
from planted_corpus import solution_kernel

#: Exercises whose outputs reduce an input (sums of products, sums, maxima).
REDUCING = sorted(name for name, ex in all_exercises().items() if ex.reductions)
#: Exercises with no reduction: each output element is computed from a few inputs of its own (maps, copies, an
#: unroll, elementwise formulas).  A new exercise is in one list or the other (the test after the attacks).
ELEMENTWISE = frozenset({"blocks", "broadcast", "guard", "im2col", "lsoftmax_cos_mtheta", "lsoftmax_patch_logits",
                         "map", "map_2d", "saxpy", "shared_reverse", "zip"})
#: Sizes along which the outputs are independent of each other, cut to these at the timing size so that its
#: float64 references stay cheap (a 4096^3 product is seconds); the reduction's own length (K, a row, the keys)
#: keeps its timing value, and so do its terms' distribution and the tolerance they get.
INDEPENDENT_AT_TIMING_SIZE = {"M": 128, "N": 128, "heads": 1}
#: The same for sizes that are independent only in some exercises: the rows of the row-wise ones (each row a
#: reduction of its own), attention's sequences.
INDEPENDENT_BY_EXERCISE = {"softmax_rows": {"n": 256}, "layernorm_residual": {"n": 256},
                           "online_softmax_resume": {"rows": 256}, "attention_forward_padded": {"batch": 1},
                           "attention_forward_window": {"batch": 1}}
BLOCK = 256


def _kept(length: int, attack: str) -> np.ndarray:
    """Which of ``length`` terms the kernel ``attack`` reads."""
    r = np.arange(length)
    return {"half": r < math.ceil(length / 2), "quarter": r < math.ceil(length / 4), "strided": r % 2 == 0,
            "first_block": r < BLOCK, "skip_1_64": r % 64 != 63, "drop_1_64": r % 64 != 63}[attack]


ATTACKS = ("half", "quarter", "strided", "first_block", "skip_1_64", "drop_1_64")
#: At the timing size (inputs of tens of millions of elements, seconds per reference): the attack that reads the
#: most, and so changes a sum the least -- the ones that read a half, a quarter, every other term or one block's
#: share miss more of the large terms (``_parts.sum_terms``) and fail by more.
ATTACKS_AT_TIMING_SIZE = ("skip_1_64",)


def _attacked(ex, inputs: dict, attack: str) -> dict:
    """The inputs as the approximating kernel ``attack`` uses them."""
    changed = dict(inputs)
    for reduction in ex.reductions:
        for position, (name, axes) in enumerate(reduction.operands):
            value = np.asarray(inputs[name])
            reduced = tuple(value.shape[a] for a in axes)
            length = int(np.prod(reduced))
            kept = _kept(length, attack).reshape(reduced)
            if kept.all():
                continue
            shape = [1] * value.ndim
            for a, size in zip(axes, reduced):
                shape[a] = size
            kept = kept.reshape(shape)  # the reduced axes are declared in order
            if reduction.kind == "max":
                changed[name] = np.where(kept, value, -np.inf).astype(value.dtype)
                continue
            scale = 1.0 if attack == "drop_1_64" or position else length / int(kept.sum())
            changed[name] = np.where(kept, value * scale, 0).astype(value.dtype)
    return changed


def _shapes(ex) -> list[tuple[str, dict]]:
    launch = ex.validate_launch({"block": BLOCK} if any(k.name == "block" and k.required for k in ex.launch_keys) else {})
    secret = list(ex.secret_shapes(np.random.default_rng(7), launch)) if ex.secret_shapes else []
    named = [(f"visible {i}", s) for i, s in enumerate(ex.visible_shapes)]
    named += [(f"hidden {i}", s) for i, s in enumerate(ex.hidden_shapes)] + [("secret", s) for s in secret]
    cut = {**INDEPENDENT_AT_TIMING_SIZE, **INDEPENDENT_BY_EXERCISE.get(ex.name, {})}
    timing = {key: min(value, cut.get(key, value)) for key, value in timed_shape(ex).items()}
    return named + [("timing", timing)]


def _inputs(ex, label: str) -> dict:
    return dict(ex.make_inputs(dict(_shapes(ex))[label], np.random.default_rng(zlib.crc32(f"{ex.name} {label}".encode()))))


def _fails(ex, expected: dict, scales: dict, outputs: dict) -> bool:
    return any(compare(np.asarray(outputs[a.name], np.float32), np.asarray(expected[a.name]), scales[a.name],
                       ex.rtol, ex.atol)["n_bad"] for a in ex.outputs)


def _differs(ex, expected: dict, outputs: dict) -> bool:
    """Whether ``outputs`` are not the right ones in float32, the precision a kernel writes (a maximum of fewer
    terms may still be the maximum, and the terms a peaked softmax leaves out may weigh e^-40 of the row)."""
    return any(not np.array_equal(np.asarray(outputs[a.name], np.float32), np.asarray(expected[a.name], np.float32))
               for a in ex.outputs)


def _row_statistics_sampled(ex, inputs: dict, attack: str) -> dict:
    """LayerNorm with its residual as a kernel computes it that takes each row's mean and variance from the terms
    it reads (their mean and their spread around it, or, not scaled, their sums over all c), every output
    normalised with those."""
    h = inputs["X"].astype(np.float64) + inputs["R"].astype(np.float64)
    c = h.shape[1]
    kept = _kept(c, attack)
    if kept.all():
        return ex.reference(inputs)
    count = c if attack == "drop_1_64" else int(kept.sum())
    mean = h[:, kept].sum(axis=1, keepdims=True) / count
    variance = ((h[:, kept] - mean) ** 2).sum(axis=1, keepdims=True) / count
    normalised = (h - mean) / np.sqrt(variance + float(inputs["eps"]))
    return {"Y": normalised * inputs["gamma"].astype(np.float64) + inputs["beta"].astype(np.float64)}


#: Exercises whose outputs are not a reduction of their inputs but computed from one (a row's statistics): the
#: output of each approximating kernel, computed as it would compute it.
SAMPLED_BY_HAND = {"layernorm_residual": _row_statistics_sampled}


def _approximated(ex, inputs: dict, attack: str) -> dict:
    if ex.name in SAMPLED_BY_HAND:
        return SAMPLED_BY_HAND[ex.name](ex, inputs, attack)
    return ex.reference(_attacked(ex, inputs, attack))


@pytest.mark.parametrize("name", REDUCING)
def test_every_approximation_of_a_reduction_fails_at_every_size(name):
    ex = all_exercises()[name]
    survived = []
    for label, shape in _shapes(ex):
        inputs = _inputs(ex, label)
        expected, scales = ex.reference(inputs), ex.error_scale(inputs)
        for attack in ATTACKS_AT_TIMING_SIZE if label == "timing" else ATTACKS:
            approximate = _approximated(ex, inputs, attack)
            if _differs(ex, expected, approximate) and not _fails(ex, expected, scales, approximate):
                survived.append(f"{attack} at {label} {ex.shape_label(shape)}")
    assert not survived, f"approximations of {name} that pass: {survived}"


def test_every_exercise_declares_whether_it_reduces():
    """An exercise with a reduction that does not declare it would escape the attacks above: each is declared,
    or named here as elementwise."""
    undeclared = sorted(name for name, ex in all_exercises().items() if not ex.reductions and name not in ELEMENTWISE)
    assert not undeclared, f"exercises that neither declare their reductions nor are listed as elementwise: {undeclared}"
    assert not ELEMENTWISE & set(REDUCING)


def _float32_sums(x: np.ndarray, rng, long_accumulators: bool = True) -> dict[str, np.float32]:
    """The sum of ``x`` in float32, in each order a correct kernel may sum it (those whose accumulators each take
    a large share of the terms, one for every term or one per thread of a single block, only if
    ``long_accumulators``)."""
    x = np.asarray(x, np.float32)
    n = x.size
    threads = BLOCK * 1056
    padded = np.zeros(-(-n // threads) * threads, np.float32)
    padded[:n] = x
    per_thread = padded.reshape(-1, threads).cumsum(axis=0, dtype=np.float32)[-1]
    one_block = np.zeros(-(-n // BLOCK) * BLOCK, np.float32)
    one_block[:n] = x
    sums = {
        "pairwise": np.sum(x, dtype=np.float32),
        "grid_stride_then_tree": np.sum(per_thread, dtype=np.float32),
    }
    if long_accumulators:
        sums["one_block_of_256"] = np.sum(one_block.reshape(-1, BLOCK).cumsum(axis=0, dtype=np.float32)[-1],
                                          dtype=np.float32)
        sums["one_after_another"] = np.cumsum(x, dtype=np.float32)[-1]
        sums["one_atomic_per_element"] = np.cumsum(x[rng.permutation(n)], dtype=np.float32)[-1]
    return sums


#: Exercises whose sum is not of one operand's elements as they lie: reduce_sum adds the elements of x incx apart,
#: dot_shuffle the products x * y.
SUMMED_AS = {"reduce_sum": cuda_from_python.summed_terms, "dot_shuffle": warp_shuffle.products}


def _terms(ex, inputs: dict) -> np.ndarray:
    """The terms of each sum of a sum exercise, one row per output."""
    if ex.name in SUMMED_AS:
        terms = np.asarray(SUMMED_AS[ex.name](inputs), np.float32)
    else:
        (name, _), = ex.reductions[0].operands
        terms = np.asarray(inputs[name], np.float32)
    return terms.reshape(-1, terms.shape[-1])


@pytest.mark.parametrize("name", ["reduce_sum", "dot_shuffle", "gradient_sum"])
def test_honest_float32_sums_pass_at_every_size(name):
    """The twins: a sum in any order a correct kernel uses passes, at every size (the timing size included, but
    for one accumulator of every term: at tens of millions of terms it stagnates, on these terms as on any, and
    the planted corpus's one_atomic_per_element.cu says so -- on a GPU that size costs it one shape; nor one block
    of 256 threads there, 262,144 terms an accumulator, 1.4 to 1.7 times the tolerance on most draws of 2**26
    terms).  A kernel that sums tens of millions of terms with one block is no correct way to sum them."""
    ex = all_exercises()[name]
    rng = np.random.default_rng(11)
    output = ex.outputs[0].name
    wrong = []
    for label, _ in _shapes(ex):
        inputs = _inputs(ex, label)
        expected, scales = ex.reference(inputs), ex.error_scale(inputs)
        sums = [_float32_sums(row, rng, long_accumulators=label != "timing") for row in _terms(ex, inputs)]
        for order in sums[0]:
            got = np.array([row[order] for row in sums]).reshape(np.shape(expected[output]))
            if _fails(ex, expected, scales, {output: got}):
                wrong.append(f"{order} at {label}")
    assert not wrong, wrong


@pytest.mark.parametrize("name", ["reduce_sum", "dot_shuffle", "gradient_sum"])
def test_a_kernel_writing_zeros_or_the_mean_fails_every_sum(name):
    ex = all_exercises()[name]
    output = ex.outputs[0].name
    for label, _ in _shapes(ex)[:-1]:  # the timing size is the honest test's and the attacks'
        inputs = _inputs(ex, label)
        expected, scales = ex.reference(inputs), ex.error_scale(inputs)
        terms = _terms(ex, inputs)
        wrong = [np.zeros(np.shape(expected[output]))]
        if terms.shape[-1] > 1:  # one term: its mean is its sum
            wrong.append(terms.astype(np.float64).mean(axis=1).reshape(np.shape(expected[output])))
        for outputs in wrong:
            assert _fails(ex, expected, scales, {output: outputs}), label


# ------------------------------------------------------------------ the same attacks as kernels, graded
#: The honest twin: the solution's kernel (a grid-stride sum per thread, a tree in shared memory, atomicAdd).
HONEST_SUM = "%%cuda reduce_sum block=256 grid=1056 shared=1024\n" + solution_kernel("reduce_sum").source

def _edited(text: str, *edits: tuple[str, str]) -> str:
    """``text`` with each (old, new) replaced; each old occurs exactly once (else the attack would be the twin)."""
    for old, new in edits:
        assert text.count(old) == 1, f"{old!r} is not once in the solution's kernel"
        text = text.replace(old, new)
    return text


LOOP = "for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) {"
BLOCK_TOTAL = "atomicAdd(out, partial[0]);"
#: The approximating kernels: what the loop reads, and what the block's total is scaled by.
SUM_ATTACKS = {
    "quarter": _edited(HONEST_SUM, ("i < n;", "i < (n + 3) / 4;"),
                       (BLOCK_TOTAL, "atomicAdd(out, partial[0] * ((float)n / ((n + 3) / 4)));")),
    "half": _edited(HONEST_SUM, ("i < n;", "i < (n + 1) / 2;"),
                    (BLOCK_TOTAL, "atomicAdd(out, partial[0] * ((float)n / ((n + 1) / 2)));")),
    "strided": _edited(HONEST_SUM, (LOOP, "for (int i = 2 * (blockIdx.x * blockDim.x) + t; i < n; "
                                          "i += 2 * gridDim.x * blockDim.x) {"),
                       (BLOCK_TOTAL, "atomicAdd(out, 2.0f * partial[0]);")),
    "first_block": _edited(HONEST_SUM, (LOOP, "int m = n < 64 * (int)blockDim.x ? n : 64 * (int)blockDim.x;\n"
                                              "    for (int i = t; blockIdx.x == 0 && i < m; i += blockDim.x) {"),
                           (BLOCK_TOTAL, "atomicAdd(out, partial[0] * ((float)n / m));")),
    "skip_1_64": _edited(HONEST_SUM, ("        acc += x[i * incx];", "        if (i % 64 != 63) acc += x[i * incx];"),
                         (BLOCK_TOTAL, "atomicAdd(out, partial[0] * (64.0f / 63.0f));")),
}


def _graded(cell: str, student: str, backend: str):
    return grade_submission(submission_from_cell(cell), mode="hidden", student_key=b"approximation tests",
                            student_id=student, backend=backend)


@pytest.mark.gpu
@pytest.mark.parametrize("attack", sorted(SUM_ATTACKS))
def test_an_approximate_sum_earns_no_more_than_its_twin_on_a_gpu(attack):
    """The issue's case, timed: on an H200 a quarter-sum scored 18 of 20 against its honest twin's 16.  Each
    approximating kernel, graded on the GPU (its hidden cases and the timing size), fails and gets no speed points."""
    twin = _graded(HONEST_SUM, "twin", "gpu")
    assert twin.status == "passed" and twin.speed_measured, twin.feedback_text()
    result = _graded(SUM_ATTACKS[attack], attack, "gpu")
    assert result.status != "passed" and result.speed_score == 0, result.feedback_text()
    assert result.score < twin.score and result.correctness_score < twin.correctness_score
