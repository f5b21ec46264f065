"""Exercises of the chapter "Capsule networks": the prediction u_hat = W u and its two gradients.

Layout as in ``kernels/capsule_prediction.cu``, all row-major float32:
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

import numpy as np

from kernels import capsule_prediction, capsule_prediction_backward
from kernels.capsule_prediction import AXES

from ..exercise import Arg, Exercise, LaunchConfig, LaunchKey, ReferenceKernel, ceil_div, varied

PREDICT_REFERENCE = capsule_prediction.KERNELS["capsule_predict_vectorized"]
GRAD_INPUT_REFERENCE = capsule_prediction_backward.KERNELS["capsule_grad_input_shared_weights"]
GRAD_WEIGHT_REFERENCE = capsule_prediction_backward.KERNELS["capsule_grad_weight_register_blocked"]


_dims = capsule_prediction.dims


def _label(shape) -> str:
    return ", ".join(f"{a}={shape[a]}" for a in AXES)


def _shape(batch, in_caps, in_dim, out_caps, out_dim) -> dict:
    return dict(zip(AXES, (batch, in_caps, in_dim, out_caps, out_dim)))


VISIBLE = (_shape(1, 1, 1, 1, 1), _shape(4, 8, 4, 8, 4), _shape(2, 3, 4, 5, 6), _shape(3, 5, 8, 10, 16))
HIDDEN = (_shape(1, 7, 3, 5, 3), _shape(67, 3, 8, 10, 16), _shape(130, 2, 5, 3, 7), _shape(5, 11, 16, 2, 6),
          _shape(2, 96, 8, 10, 16), _shape(9, 4, 7, 1, 9))
DIGITCAPS = _shape(128, 1152, 8, 10, 16)


def _secret_shapes(rng: np.random.Generator, launch: dict) -> list[dict]:
    """One shape per student: five different sizes, the row no multiple of 4."""
    for _ in range(100):
        dims = (int(rng.integers(2, 80)), int(rng.integers(2, 40)), int(rng.integers(2, 12)),
                int(rng.integers(2, 12)), int(rng.integers(2, 20)))
        if len(set(dims)) == 5 and (dims[3] * dims[4]) % 4:
            return [_shape(*dims)]
    return [_shape(37, 13, 5, 3, 7)]


BLOCK = LaunchKey("block", 1, 1024, default=256, help="threads per block, 1..1024; default 256")


def _grid_key(count, what):
    return LaunchKey("grid", 1, 2**31 - 1, default=lambda shape, launch: ceil_div(count(shape), launch["block"]),
                     help=f"blocks in the grid; default ceil({what} / block), one thread per element")


SHARED = LaunchKey("shared", 0, 227 * 1024, default=0, help="bytes of dynamic shared memory; default 0")


def _launch(shape, launch) -> LaunchConfig:
    return LaunchConfig(grid=(launch["grid"], 1, 1), block=(launch["block"], 1, 1), shared=launch["shared"])


def _scalars(shape) -> dict:
    return dict(zip(AXES, _dims(shape)))


def _from_record(record, output: str, operands: tuple[str, ...]):
    """The exercise's reference and error scale, both the record's float64 reference: the scale is it on the
    operands' magnitudes (every output a sum of products, so that is the sum of |terms| rounding works on)."""

    def reference(inputs):
        return {output: record.reference(*(inputs[name] for name in operands))}

    def scale(inputs):
        return {output: record.reference(*(np.abs(np.asarray(inputs[name], np.float64)) for name in operands))}

    return reference, scale


SIGNATURE_TAIL = "int batch, int in_caps, int in_dim, int out_caps, int out_dim"
SCALAR_ARGS = tuple(Arg(a, "scalar") for a in AXES)

#: What the three exercises share: shapes, launch, points, the timing shape.
CAPSULE_COMMON = dict(visible_shapes=VISIBLE, hidden_shapes=HIDDEN, secret_shapes=_secret_shapes, launch_config=_launch,
                      correctness_points=6.0, speed_points=2.0, timing_shape=DIGITCAPS, label=_label)

# ------------------------------------------------------------ forward: u_hat = W u


def _forward_inputs(shape, rng):
    b, ic, idim, oc, od = _dims(shape)
    return {"u": varied(rng, (b, ic, idim), 0.4), "W": varied(rng, (ic, oc, od, idim), 0.3), "u_hat": None,
            **_scalars(shape)}


_forward_reference, _forward_scale = _from_record(PREDICT_REFERENCE, "u_hat", ("u", "W"))


def _u_hat_elements(shape) -> int:
    b, ic, _, oc, od = _dims(shape)
    return b * ic * oc * od


CAPSULE_PREDICT = Exercise(
    name="capsule_predict",
    title="Capsule prediction: u_hat[b, i, j, :] = W[i, j] u[b, i]",
    kernel="capsule_predict",
    signature=f"capsule_predict(const float* u, const float* W, float* u_hat, {SIGNATURE_TAIL})",
    args=(Arg("u", "in"), Arg("W", "in"), Arg("u_hat", "out"), *SCALAR_ARGS),
    make_inputs=_forward_inputs,
    reference=_forward_reference,
    error_scale=_forward_scale,
    **CAPSULE_COMMON,
    launch_keys=(BLOCK, _grid_key(_u_hat_elements, "batch * in_caps * out_caps * out_dim"), SHARED),
    reference_kernel=ReferenceKernel(PREDICT_REFERENCE,
                                     arg_order=("u", "W", "u_hat", "batch", "in_caps", "out_caps", "out_dim")),
    description=("u_hat[b][i][j][d] = sum over k < in_dim of W[i][j][d][k] * u[b][i][k] for every sample b, input "
                 "capsule i, output capsule j and output dimension d. u is [batch][in_caps][in_dim], W "
                 "[in_caps][out_caps][out_dim][in_dim], u_hat [batch][in_caps][out_caps][out_dim], all row-major."),
)

# ------------------------------------------------------------ input gradient: du = W^T G


def _grad_input_inputs(shape, rng):
    b, ic, idim, oc, od = _dims(shape)
    return {"grad_u_hat": varied(rng, (b, ic, oc, od), 0.3), "W": varied(rng, (ic, oc, od, idim), 0.3),
            "grad_u": None, **_scalars(shape)}


_grad_input_reference, _grad_input_scale = _from_record(GRAD_INPUT_REFERENCE, "grad_u", ("grad_u_hat", "W"))


CAPSULE_GRAD_INPUT = Exercise(
    name="capsule_grad_input",
    title="Capsule prediction, backward: dE/du[b, i] = W[i]^T dE/du_hat[b, i]",
    kernel="capsule_grad_input",
    signature=f"capsule_grad_input(const float* grad_u_hat, const float* W, float* grad_u, {SIGNATURE_TAIL})",
    args=(Arg("grad_u_hat", "in"), Arg("W", "in"), Arg("grad_u", "out"), *SCALAR_ARGS),
    make_inputs=_grad_input_inputs,
    reference=_grad_input_reference,
    error_scale=_grad_input_scale,
    **CAPSULE_COMMON,
    launch_keys=(BLOCK, _grid_key(lambda s: _dims(s)[0] * _dims(s)[1] * _dims(s)[2], "batch * in_caps * in_dim"),
                 SHARED),
    reference_kernel=ReferenceKernel(GRAD_INPUT_REFERENCE,
                                     arg_order=("grad_u_hat", "W", "grad_u", "batch", "in_caps", "out_caps", "out_dim")),
    description=("grad_u[b][i][k] = sum over j < out_caps and d < out_dim of W[i][j][d][k] * grad_u_hat[b][i][j][d] "
                 "(for one sample and input capsule: W[i]^T times the gradient of the ROW = out_caps * out_dim "
                 "outputs). grad_u is [batch][in_caps][in_dim]."),
)

# ------------------------------------------------------------ weight gradient: dW = sum_b G u^T


def _grad_weight_inputs(shape, rng):
    b, ic, idim, oc, od = _dims(shape)
    return {"grad_u_hat": varied(rng, (b, ic, oc, od), 0.3), "u": varied(rng, (b, ic, idim), 0.4),
            "grad_W": None, **_scalars(shape)}


_grad_weight_reference, _grad_weight_scale = _from_record(GRAD_WEIGHT_REFERENCE, "grad_W", ("grad_u_hat", "u"))


CAPSULE_GRAD_WEIGHT = Exercise(
    name="capsule_grad_weight",
    title="Capsule prediction, backward: dE/dW[i] = sum over the batch of dE/du_hat[b, i] u[b, i]^T",
    kernel="capsule_grad_weight",
    signature=f"capsule_grad_weight(const float* grad_u_hat, const float* u, float* grad_W, {SIGNATURE_TAIL})",
    args=(Arg("grad_u_hat", "in"), Arg("u", "in"), Arg("grad_W", "out"), *SCALAR_ARGS),
    make_inputs=_grad_weight_inputs,
    reference=_grad_weight_reference,
    error_scale=_grad_weight_scale,
    **CAPSULE_COMMON,
    launch_keys=(BLOCK, _grid_key(lambda s: _dims(s)[1] * _dims(s)[3] * _dims(s)[4] * _dims(s)[2],
                                  "in_caps * out_caps * out_dim * in_dim"), SHARED),
    reference_kernel=ReferenceKernel(GRAD_WEIGHT_REFERENCE,
                                     arg_order=("grad_u_hat", "u", "grad_W", "batch", "in_caps", "out_caps", "out_dim")),
    description=("grad_W[i][j][d][k] = sum over samples b < batch of grad_u_hat[b][i][j][d] * u[b][i][k]: each "
                 "weight is used by every sample, so its gradient is a reduction over the batch. grad_W is "
                 "[in_caps][out_caps][out_dim][in_dim]."),
)

EXERCISES = [CAPSULE_PREDICT, CAPSULE_GRAD_INPUT, CAPSULE_GRAD_WEIGHT]
