"""Exercises of the chapter "Capsule networks": the prediction u_hat = W u and its two gradients.

Layout as in ``kernels/capsules/capsule_prediction.cu``, all row-major float32:
u [batch, in_caps, in_dim], W [in_caps, out_caps, out_dim, in_dim],
u_hat and G = dE/du_hat [batch, in_caps, out_caps, out_dim].

Shapes never have two equal sizes where a swapped stride could hide (except
the 1x1x1x1x1 and the {4, 8} ones the original custom op was tested on);
they include a batch of one, rows (out_caps * out_dim) that are no multiple
of 4, in_dim that is no multiple of 4, more samples than one block of the
reference kernels takes (64 and 128), one shape drawn per student from the
grading secret, and (on the GPU) CapsNet's DigitCaps shape for timing.
Tolerances are relative to the sums of |terms|, the size float32 rounding
works on.
"""

from __future__ import annotations

import math

import numpy as np

from kernels.capsules import capsule_prediction, capsule_prediction_backward
from kernels.capsules.capsule_prediction import AXES

from ..exercise import Exercise, ReferenceKernel, reducing
from ._parts import BLOCK_256, SHARED, extent, from_record, grid_key, one_dimensional_launch, shapes, tensor_inputs

PREDICT_REFERENCE = capsule_prediction.KERNELS["capsule_predict_vectorized"]
GRAD_INPUT_REFERENCE = capsule_prediction_backward.KERNELS["capsule_grad_input_shared_weights"]
GRAD_WEIGHT_REFERENCE = capsule_prediction_backward.KERNELS["capsule_grad_weight_register_blocked"]


_dims = capsule_prediction.dims

VISIBLE = shapes(AXES, ((1, 1, 1, 1, 1), (4, 8, 4, 8, 4), (2, 3, 4, 5, 6), (3, 5, 8, 10, 16)))
HIDDEN = shapes(AXES, ((1, 7, 3, 5, 3), (67, 3, 8, 10, 16), (130, 2, 5, 3, 7), (5, 11, 16, 2, 6),
                       (2, 96, 8, 10, 16), (9, 4, 7, 1, 9)))
DIGITCAPS = dict(zip(AXES, (128, 1152, 8, 10, 16)))


def _secret_shapes(rng: np.random.Generator, launch: dict) -> list[dict]:
    """One shape per student: five different sizes, the row no multiple of 4."""
    for _ in range(100):
        dims = (int(rng.integers(2, 80)), int(rng.integers(2, 40)), int(rng.integers(2, 12)),
                int(rng.integers(2, 12)), int(rng.integers(2, 20)))
        if len(set(dims)) == 5 and (dims[3] * dims[4]) % 4:
            return [dict(zip(AXES, dims))]
    return [dict(zip(AXES, (37, 13, 5, 3, 7)))]


def _scalars(shape) -> dict:
    return dict(zip(AXES, _dims(shape)))


#: Every tensor of the three exercises: its axes, and the mean of its test values (inputs only).
TENSORS = {"u": (("batch", "in_caps", "in_dim"), 0.4), "W": (("in_caps", "out_caps", "out_dim", "in_dim"), 0.3),
           "grad_u_hat": (("batch", "in_caps", "out_caps", "out_dim"), 0.3),
           "u_hat": (("batch", "in_caps", "out_caps", "out_dim"), None), "grad_u": (("batch", "in_caps", "in_dim"), None),
           "grad_W": (("in_caps", "out_caps", "out_dim", "in_dim"), None)}


SIGNATURE_TAIL = "int batch, int in_caps, int in_dim, int out_caps, int out_dim"


def _capsule_exercise(name: str, title: str, operands: tuple[str, str], output: str, record, description: str,
                      reduced: tuple):
    """One of the three exercises: ``name(const float* a, const float* b, float* output, sizes...)``, one thread
    per element of the output by default, timed on CapsNet's DigitCaps shape against ``record``."""

    def output_elements(shape) -> int:
        return math.prod(extent(TENSORS, shape, output))

    return Exercise(
        name=name, title=title, description=description,
        signature=f"{name}(const float* {operands[0]}, const float* {operands[1]}, float* {output}, {SIGNATURE_TAIL})",
        make_inputs=tensor_inputs(TENSORS, operands, output, _scalars), **from_record(record, output, operands),
        visible_shapes=VISIBLE, hidden_shapes=HIDDEN, secret_shapes=_secret_shapes, timing_shape=DIGITCAPS,
        launch_keys=(BLOCK_256, grid_key(output_elements, " * ".join(TENSORS[output][0]), ", one thread per element"), SHARED),
        launch_config=one_dimensional_launch, correctness_points=6.0, speed_points=2.0, reductions=reducing(*reduced),
        reference_kernel=ReferenceKernel(record, arg_order=(*operands, output, "batch", "in_caps", "out_caps", "out_dim")))


CAPSULE_PREDICT = _capsule_exercise(
    "capsule_predict", "Capsule prediction: u_hat[b, i, j, :] = W[i, j] u[b, i]", ("u", "W"), "u_hat", PREDICT_REFERENCE,
    "u_hat[b][i][j][d] = sum over k < in_dim of W[i][j][d][k] * u[b][i][k] for every sample b, input "
    "capsule i, output capsule j and output dimension d. u is [batch][in_caps][in_dim], W "
    "[in_caps][out_caps][out_dim][in_dim], u_hat [batch][in_caps][out_caps][out_dim], all row-major.", ("W", 3))

CAPSULE_GRAD_INPUT = _capsule_exercise(
    "capsule_grad_input", "Capsule prediction, backward: dE/du[b, i] = W[i]^T dE/du_hat[b, i]",
    ("grad_u_hat", "W"), "grad_u", GRAD_INPUT_REFERENCE,
    "grad_u[b][i][k] = sum over j < out_caps and d < out_dim of W[i][j][d][k] * grad_u_hat[b][i][j][d] "
    "(for one sample and input capsule: W[i]^T times the gradient of the ROW = out_caps * out_dim "
    "outputs). grad_u is [batch][in_caps][in_dim].", ("grad_u_hat", 2, 3))

CAPSULE_GRAD_WEIGHT = _capsule_exercise(
    "capsule_grad_weight", "Capsule prediction, backward: dE/dW[i] = sum over the batch of dE/du_hat[b, i] u[b, i]^T",
    ("grad_u_hat", "u"), "grad_W", GRAD_WEIGHT_REFERENCE,
    "grad_W[i][j][d][k] = sum over samples b < batch of grad_u_hat[b][i][j][d] * u[b][i][k]: each "
    "weight is used by every sample, so its gradient is a reduction over the batch. grad_W is "
    "[in_caps][out_caps][out_dim][in_dim].", ("grad_u_hat", 0))

EXERCISES = [CAPSULE_PREDICT, CAPSULE_GRAD_INPUT, CAPSULE_GRAD_WEIGHT]
