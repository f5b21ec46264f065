"""Exercises of the chapter "Multilayer perceptrons and backpropagation": the two backward kernels of a fully connected layer.

Layout as in ``kernels/fully_connected.cu``: X is n-by-in, W is out-by-in (one
row per output neuron), dY = dE/dY is n-by-out, all row-major.  Inputs have a
non-zero mean and varied scale; shapes include 1x1x1, sizes that are no
multiple of a 16x16 block, more outputs than inputs and the reverse, one shape
drawn per student from the grading secret, and (on the GPU) a large one for
timing.  Tolerances are relative to the sums of |terms| (|dY| |W| and
|dY|^T |X|), the size float32 rounding works on.
"""

from __future__ import annotations

import numpy as np

from kernels import fully_connected

from ..exercise import Arg, Exercise, LaunchConfig, LaunchKey, ReferenceKernel, ceil_div

INPUT_REFERENCE = fully_connected.KERNELS["fc_backward_input"]
WEIGHT_REFERENCE = fully_connected.KERNELS["fc_backward_weight"]


def varied(rng: np.random.Generator, shape, mean: float) -> np.ndarray:
    scale = 10.0 ** rng.uniform(-0.5, 0.5, shape)
    return ((mean + 0.5 * rng.standard_normal(shape)) * scale).astype(np.float32)


_dims = fully_connected.layer


def _label(shape):
    n, k, m = _dims(shape)
    return f"n={n}, in={k}, out={m}"


def _secret_shapes(rng: np.random.Generator, launch: dict) -> list[dict]:
    # Sizes that are no multiple of the student's block in either direction.
    bx, by = int(launch.get("block_x", 16)), int(launch.get("block_y", 16))
    n = by * int(rng.integers(1, 8)) + int(rng.integers(1, max(2, by)))
    k = bx * int(rng.integers(1, 8)) + int(rng.integers(1, max(2, bx)))
    m = int(rng.integers(2, 40))
    return [{"n": n, "in": k, "out": m}]


VISIBLE = ({"n": 1, "in": 1, "out": 1}, {"n": 4, "in": 5, "out": 3}, {"n": 16, "in": 16, "out": 16},
           {"n": 33, "in": 64, "out": 10}, {"n": 100, "in": 20, "out": 40})
HIDDEN = ({"n": 1, "in": 300, "out": 7}, {"n": 17, "in": 17, "out": 17}, {"n": 128, "in": 64, "out": 64},
          {"n": 257, "in": 31, "out": 129}, {"n": 7, "in": 513, "out": 2}, {"n": 3, "in": 9, "out": 300})
TIMING = {"n": 4096, "in": 1024, "out": 1024}


def _keys(x_default, y_default, x_help, y_help):
    return (
        LaunchKey("block_x", 1, 1024, default=16, help="threads per block along x; default 16"),
        LaunchKey("block_y", 1, 1024, default=16, help="threads per block along y; default 16"),
        LaunchKey("grid_x", 1, 2**31 - 1, default=x_default, help=x_help),
        LaunchKey("grid_y", 1, 65535, default=y_default, help=y_help),
    )


def _launch(shape, launch) -> LaunchConfig:
    if launch["block_x"] * launch["block_y"] > 1024:
        from ..exercise import LaunchError

        raise LaunchError(f"block_x * block_y = {launch['block_x'] * launch['block_y']}; a block holds at most 1024 threads")
    return LaunchConfig(grid=(launch["grid_x"], launch["grid_y"], 1), block=(launch["block_x"], launch["block_y"], 1), shared=0)


# ------------------------------------------------------------ dX = dY W


def _input_inputs(shape, rng):
    n, k, m = _dims(shape)
    return {"dY": varied(rng, (n, m), 0.5), "W": varied(rng, (m, k), 0.3), "dX": None,
            "n": n, "in_features": k, "out_features": m}


def _input_reference(inputs):
    return {"dX": INPUT_REFERENCE.reference(inputs["dY"], inputs["W"])}


def _input_scale(inputs):
    return {"dX": np.abs(inputs["dY"].astype(np.float64)) @ np.abs(inputs["W"].astype(np.float64))}


FC_BACKWARD_INPUT = Exercise(
    name="fc_backward_input",
    title="Fully connected layer, backward: dE/dX = dE/dY W",
    kernel="fc_backward_input",
    signature="fc_backward_input(const float* dY, const float* W, float* dX, int n, int in_features, int out_features)",
    args=(Arg("dY", "in"), Arg("W", "in"), Arg("dX", "out"), Arg("n", "scalar"), Arg("in_features", "scalar"),
          Arg("out_features", "scalar")),
    make_inputs=_input_inputs,
    reference=_input_reference,
    error_scale=_input_scale,
    rtol=1e-5,
    atol=1e-30,
    visible_shapes=VISIBLE,
    hidden_shapes=HIDDEN,
    secret_shapes=_secret_shapes,
    launch_keys=_keys(lambda shape, launch: ceil_div(_dims(shape)[1], launch["block_x"]),
                      lambda shape, launch: ceil_div(_dims(shape)[0], launch["block_y"]),
                      "blocks along x; default ceil(in_features / block_x)",
                      "blocks along y; default ceil(n / block_y)"),
    launch_config=_launch,
    correctness_points=5.0,
    speed_points=1.0,
    reference_kernel=ReferenceKernel(INPUT_REFERENCE),
    flops=INPUT_REFERENCE.flops,
    bytes_moved=INPUT_REFERENCE.bytes,
    timing_shape=TIMING,
    label=_label,
    description=("dX[i][k] = sum over j of dY[i][j] * W[j][k] for every sample i < n and input k < in_features "
                 "(for one sample: dE/dx = W^T dE/dy). dY is n-by-out, W out-by-in, dX n-by-in, all row-major."),
)

# ------------------------------------------------------------ dW = dY^T X


def _weight_inputs(shape, rng):
    n, k, m = _dims(shape)
    return {"dY": varied(rng, (n, m), 0.5), "X": varied(rng, (n, k), 0.3), "dW": None,
            "n": n, "in_features": k, "out_features": m}


def _weight_reference(inputs):
    return {"dW": WEIGHT_REFERENCE.reference(inputs["dY"], inputs["X"])}


def _weight_scale(inputs):
    return {"dW": np.abs(inputs["dY"].astype(np.float64)).T @ np.abs(inputs["X"].astype(np.float64))}


FC_BACKWARD_WEIGHT = Exercise(
    name="fc_backward_weight",
    title="Fully connected layer, backward: dE/dW = dE/dY^T X",
    kernel="fc_backward_weight",
    signature="fc_backward_weight(const float* dY, const float* X, float* dW, int n, int in_features, int out_features)",
    args=(Arg("dY", "in"), Arg("X", "in"), Arg("dW", "out"), Arg("n", "scalar"), Arg("in_features", "scalar"),
          Arg("out_features", "scalar")),
    make_inputs=_weight_inputs,
    reference=_weight_reference,
    error_scale=_weight_scale,
    rtol=1e-5,
    atol=1e-30,
    visible_shapes=VISIBLE,
    hidden_shapes=HIDDEN,
    secret_shapes=_secret_shapes,
    launch_keys=_keys(lambda shape, launch: ceil_div(_dims(shape)[1], launch["block_x"]),
                      lambda shape, launch: ceil_div(_dims(shape)[2], launch["block_y"]),
                      "blocks along x; default ceil(in_features / block_x)",
                      "blocks along y; default ceil(out_features / block_y)"),
    launch_config=_launch,
    correctness_points=5.0,
    speed_points=1.0,
    reference_kernel=ReferenceKernel(WEIGHT_REFERENCE),
    flops=WEIGHT_REFERENCE.flops,
    bytes_moved=WEIGHT_REFERENCE.bytes,
    timing_shape=TIMING,
    label=_label,
    description=("dW[j][k] = sum over samples i of dY[i][j] * X[i][k] for every output j < out_features and input "
                 "k < in_features: the outer products dE/dy x^T summed over the minibatch. dY is n-by-out, X n-by-in, "
                 "dW out-by-in, all row-major."),
)

EXERCISES = [FC_BACKWARD_INPUT, FC_BACKWARD_WEIGHT]
