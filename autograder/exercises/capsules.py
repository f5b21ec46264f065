"""Exercises of the chapter "Capsule networks": the prediction u_hat = W u and its two gradients, for a
convolutional capsule layer, whose capsules at every position of a grid share one matrix per capsule type.

The chapter's layer gives every input capsule i its own matrices W[i] (DigitCaps).  In a convolutional
capsule layer the in_caps = positions * types input capsules lie on a grid, capsule i = p * types + t
being capsule type t at position p, and every position uses the same matrices: capsule i multiplies by
W[i % types] (the weight sharing of a convolution).  The prediction reads W by type; the input gradient
too; the weight gradient of a matrix is a sum over the batch *and* over the positions that share it.
With one position (types = in_caps) this is the chapter's problem, and there the chapter's kernel is
the speed reference (``ReferenceKernel.solves``); the hidden shapes have several positions, so the
printed kernels are no answer.

Layout as in ``kernels/capsules/capsule_prediction.cu``, all row-major float32:
u [batch, in_caps, in_dim], W [types, out_caps, out_dim, in_dim],
u_hat and G = dE/du_hat [batch, in_caps, out_caps, out_dim].

Shapes never have two equal sizes where a swapped stride could hide (except the 1x1x1x1x1 and the
{4, 8} ones the original custom op was tested on); they include a batch of one, rows (out_caps *
out_dim) that are no multiple of 4, in_dim that is no multiple of 4, more samples than one block of
the reference kernels takes (64 and 128), a 6 x 6 grid of positions (PrimaryCaps'), one shape drawn
per student from the grading secret, and (on the GPU) CapsNet's DigitCaps shape for timing.
Tolerances are relative to the sums of |terms|, the size float32 rounding works on.

The prediction's u_hat passes 2^31 elements for a large layer, and no case of the grader's is that large,
so its kernel must index in 64 bits by its source (:mod:`._index_width`).
"""

from __future__ import annotations

import math

import numpy as np

from kernels.capsules import capsule_prediction, capsule_prediction_backward

from ..exercise import Exercise, FormulaMistake, ReferenceKernel, reducing
from ._index_width import needs_64_bit_indices
from ._parts import BLOCK_256, SHARED, extent, grid_key, one_dimensional_launch, tensor_inputs

PREDICT_REFERENCE = capsule_prediction.KERNELS["capsule_predict_vectorized"]
GRAD_INPUT_REFERENCE = capsule_prediction_backward.KERNELS["capsule_grad_input_shared_weights"]
GRAD_WEIGHT_REFERENCE = capsule_prediction_backward.KERNELS["capsule_grad_weight_register_blocked"]

#: The sizes of a shape: the chapter's five, and the grid of positions (in_caps = positions * types).
AXES = (*capsule_prediction.AXES, "positions", "types")


def layer(batch: int, positions: int, types: int, in_dim: int, out_caps: int, out_dim: int) -> dict:
    """A shape: ``positions`` x ``types`` input capsules of ``in_dim``, ``out_caps`` output capsules of ``out_dim``."""
    return dict(zip(AXES, (batch, positions * types, in_dim, out_caps, out_dim, positions, types)))


def _label(shape) -> str:
    batch, in_caps, in_dim, out_caps, out_dim, positions, types = (int(shape[a]) for a in AXES)
    grid = f"{positions} position{'s' * (positions > 1)} x {types} type{'s' * (types > 1)}"
    return f"batch={batch}, in_caps={in_caps} ({grid}), in_dim={in_dim}, out_caps={out_caps}, out_dim={out_dim}"


VISIBLE = (layer(1, 1, 1, 1, 1, 1), layer(4, 2, 4, 4, 8, 4), layer(2, 3, 2, 4, 5, 6), layer(3, 1, 5, 8, 10, 16))
HIDDEN = (layer(1, 7, 1, 3, 5, 2), layer(67, 1, 3, 8, 10, 16), layer(130, 2, 3, 5, 4, 7), layer(5, 4, 3, 16, 2, 6),
          layer(2, 36, 3, 8, 10, 16), layer(9, 4, 1, 7, 1, 9))
#: CapsNet's DigitCaps layer: every one of the 1152 capsules its own matrices (one position), the chapter's problem.
DIGITCAPS = layer(128, 1, 1152, 8, 10, 16)


def _secret_shapes(rng: np.random.Generator, launch: dict) -> list[dict]:
    """One shape per student: several positions, the other sizes different, the row no multiple of 4."""
    for _ in range(100):
        dims = (int(rng.integers(2, 80)), int(rng.integers(2, 7)), int(rng.integers(2, 9)), int(rng.integers(2, 12)),
                int(rng.integers(2, 12)), int(rng.integers(2, 20)))
        if len(set(dims[2:])) == 4 and (dims[4] * dims[5]) % 4:
            return [layer(*dims)]
    return [layer(37, 3, 5, 6, 3, 7)]


def _scalars(shape) -> dict:
    return {a: int(shape[a]) for a in (*capsule_prediction.AXES, "types")}


#: Every tensor of the three exercises: its axes, and the mean of its test values (inputs only).
TENSORS = {"u": (("batch", "in_caps", "in_dim"), 0.4), "W": (("types", "out_caps", "out_dim", "in_dim"), 0.3),
           "grad_u_hat": (("batch", "in_caps", "out_caps", "out_dim"), 0.3),
           "u_hat": (("batch", "in_caps", "out_caps", "out_dim"), None), "grad_u": (("batch", "in_caps", "in_dim"), None),
           "grad_W": (("types", "out_caps", "out_dim", "in_dim"), None)}


SIGNATURE_TAIL = "int batch, int in_caps, int in_dim, int out_caps, int out_dim, int types"


def _per_capsule(W: np.ndarray, in_caps: int) -> np.ndarray:
    """The shared matrices W [types, ...] as the chapter's layer has them, one per input capsule: W[i % types]."""
    return np.asarray(W)[np.arange(in_caps) % np.asarray(W).shape[0]]


def _by_type(per_capsule: np.ndarray, types: int) -> np.ndarray:
    """A gradient per input capsule [in_caps, ...] summed over the positions that share each matrix: [types, ...]."""
    return per_capsule.reshape(-1, types, *per_capsule.shape[1:]).sum(axis=0)


def _shared_weights(record, output: str, operands: tuple[str, str]) -> dict:
    """The exercise's ``reference`` and ``error_scale``: the chapter's float64 reference ``record.reference`` on the
    matrices expanded to one per capsule (and, for the weight gradient, summed back over the positions); the scale is
    the same on the operands' magnitudes (every output a sum of products)."""

    def compute(inputs, magnitude):
        args = [np.asarray(inputs[name], np.float64) for name in operands]
        args = [np.abs(a) if magnitude else a for a in args]
        args = [_per_capsule(a, inputs["in_caps"]) if name == "W" else a for name, a in zip(operands, args)]
        result = record.reference(*args)
        return {output: _by_type(result, inputs["types"]) if output == "grad_W" else result}

    return {"reference": lambda inputs: compute(inputs, False), "error_scale": lambda inputs: compute(inputs, True)}


def _mistake(key: str, words: str, record, output: str, operands: tuple[str, str], change) -> FormulaMistake:
    """A common mistake of one of the exercises: the exercise's formula on the inputs as ``change`` (inputs ->
    inputs) makes them, with its rounding scale on them."""
    formula = _shared_weights(record, output, operands)
    return FormulaMistake(key, words, lambda inputs: formula["reference"](change(inputs)),
                          lambda inputs: formula["error_scale"](change(inputs)))


def _rows_of_matrix_read(inputs) -> dict:
    """W as a kernel reads it that finds the row of output capsule j alone (row j of its type's out_caps * out_dim
    rows, at j * in_dim) for every d of that capsule."""
    W = np.asarray(inputs["W"])
    types, out_caps, out_dim, in_dim = W.shape
    rows = W.reshape(types, out_caps * out_dim, in_dim)[:, :out_caps]
    return {**inputs, "W": np.broadcast_to(rows[:, :, None, :], W.shape).copy()}


def _columns_stepped_by_one(inputs) -> dict:
    """W as a kernel reads it that steps down column k by 1 instead of by in_dim: term q at k + q of its type's
    matrix in memory."""
    W = np.asarray(inputs["W"])
    types, out_caps, out_dim, in_dim = W.shape
    rows = out_caps * out_dim
    along = np.arange(rows)[:, None] + np.arange(in_dim)[None, :]
    return {**inputs, "W": W.reshape(types, -1)[:, along].reshape(W.shape)}


def _first_position(inputs) -> dict:
    """The inputs of the first position alone: capsules i < types."""
    types = inputs["types"]
    return {**inputs, "in_caps": types, "u": np.asarray(inputs["u"])[:, :types],
            "grad_u_hat": np.asarray(inputs["grad_u_hat"])[:, :types]}


def _capsule_exercise(name: str, title: str, operands: tuple[str, str], output: str, record, description: str,
                      **extra):
    """One of the three exercises: ``name(const float* a, const float* b, float* output, sizes..., int types)``, one
    thread per element of the output by default, timed on CapsNet's DigitCaps shape (one position) against
    ``record``."""

    def output_elements(shape) -> int:
        return math.prod(extent(TENSORS, shape, output))

    return Exercise(
        name=name, title=title, description=description,
        signature=f"{name}(const float* {operands[0]}, const float* {operands[1]}, float* {output}, {SIGNATURE_TAIL})",
        make_inputs=tensor_inputs(TENSORS, operands, output, _scalars), **_shared_weights(record, output, operands),
        visible_shapes=VISIBLE, hidden_shapes=HIDDEN, secret_shapes=_secret_shapes, timing_shape=DIGITCAPS, label=_label,
        launch_keys=(BLOCK_256, grid_key(output_elements, " * ".join(TENSORS[output][0]), ", one thread per element"), SHARED),
        launch_config=one_dimensional_launch, correctness_points=6.0, speed_points=2.0,
        reference_kernel=ReferenceKernel(record, arg_order=(*operands, output, "batch", "in_caps", "out_caps", "out_dim"),
                                         solves={"positions": 1}),
        **extra)


SHARING = ("Capsule i = p * types + t (type t at position p of the grid) uses the matrices W[t] = W[i % types], "
           "shared by every position: W is [types][out_caps][out_dim][in_dim].")

CAPSULE_PREDICT = _capsule_exercise(
    "capsule_predict", "Capsule prediction with matrices shared across positions: u_hat[b, i, j, :] = W[i % types, j] u[b, i]",
    ("u", "W"), "u_hat", PREDICT_REFERENCE,
    "u_hat[b][i][j][d] = sum over k < in_dim of W[i % types][j][d][k] * u[b][i][k] for every sample b, input capsule i, "
    "output capsule j and output dimension d. " + SHARING + " u is [batch][in_caps][in_dim], u_hat "
    "[batch][in_caps][out_caps][out_dim], all row-major. Indices in 64 bits: u_hat of a large layer passes 2^31 "
    "elements. Speed is compared with the chapter's capsule_predict_vectorized with one position (types = in_caps).",
    source_check=needs_64_bit_indices(
        "The exercise needs sizes past 2^31 elements (u_hat of a large layer: batch 16,384 at DigitCaps' shape), "
        "where a 32-bit index overflows; the grader cannot allocate a case that large, so it reads the source."),
    formula_mistakes=(_mistake(
        "row of the output capsule", "with every d of output capsule j multiplied by one row of W: row j of the "
        "type's out_caps * out_dim rows (at j * in_dim), where row j * out_dim + d belongs -- is the row of the output "
        "element (j * out_dim + d) used where W's row is found, not j alone?",
        PREDICT_REFERENCE, "u_hat", ("u", "W"), _rows_of_matrix_read),),
    reductions=reducing("W", 3))

CAPSULE_GRAD_INPUT = _capsule_exercise(
    "capsule_grad_input", "Capsule prediction, backward: dE/du[b, i] = W[i % types]^T dE/du_hat[b, i]",
    ("grad_u_hat", "W"), "grad_u", GRAD_INPUT_REFERENCE,
    "grad_u[b][i][k] = sum over j < out_caps and d < out_dim of W[i % types][j][d][k] * grad_u_hat[b][i][j][d] "
    "(for one sample and input capsule: the transpose of its shared matrix times the gradient of the ROW = "
    "out_caps * out_dim outputs). " + SHARING + " grad_u is [batch][in_caps][in_dim].",
    formula_mistakes=(_mistake(
        "column stepped by one", "with column k of W read one value apart: term q of the sum reads W at k + q of the "
        "type's matrix, along a row, where k + q * in_dim (down column k, a row of in_dim values apart) belongs.",
        GRAD_INPUT_REFERENCE, "grad_u", ("grad_u_hat", "W"), _columns_stepped_by_one),),
    reductions=reducing("grad_u_hat", 2, 3))

CAPSULE_GRAD_WEIGHT = _capsule_exercise(
    "capsule_grad_weight",
    "Capsule prediction, backward: dE/dW[t], a sum over the batch and over the positions that share W[t]",
    ("grad_u_hat", "u"), "grad_W", GRAD_WEIGHT_REFERENCE,
    "grad_W[t][j][d][k] = sum over samples b < batch and positions p < in_caps / types of "
    "grad_u_hat[b][p*types + t][j][d] * u[b][p*types + t][k]: a shared weight is used by every sample at every "
    "position, so its gradient is a reduction over both. " + SHARING + " grad_W is [types][out_caps][out_dim][in_dim].",
    # the batch is the one axis that is summed whole (the positions share the input capsule axis with the types)
    reductions=reducing("grad_u_hat", 0),
    formula_mistakes=(_mistake(
        "first position alone", "with the sum over the batch alone, at the first position: the gradient of W[t] takes "
        "capsule i = t only, where the capsules p * types + t of every position p, which share W[t], add their terms "
        "too (a sum over the batch and the positions).",
        GRAD_WEIGHT_REFERENCE, "grad_W", ("grad_u_hat", "u"), _first_position),))

EXERCISES = [CAPSULE_PREDICT, CAPSULE_GRAD_INPUT, CAPSULE_GRAD_WEIGHT]
