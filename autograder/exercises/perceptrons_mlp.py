"""Exercises of the chapter "Perceptrons and multilayer perceptrons" (pages ``perceptrons`` and ``mlp_backprop``).

Perceptrons: batched inference, and the minibatch gradient sum.  Inputs have a
non-zero mean and varied scale, so a kernel that writes zeros, the mean, or one
sample's value for all cannot pass.  Weights are scaled with the number of
features so that the sigmoid stays away from saturation, where a wrong weighted
sum would still give 0 or 1.  Sizes include 1, primes, sizes that are no
multiple of any block, one drawn per student from the grading secret, and (on
the GPU) a large one for timing.

Multilayer perceptrons: the two backward kernels of a fully connected layer.
Layout as in ``kernels/dense/fully_connected.cu``: X is n-by-in, W is out-by-in (one
row per output neuron), dY = dE/dY is n-by-out, all row-major.  Shapes include
1x1x1, sizes that are no multiple of a 16x16 block, more outputs than inputs
and the reverse.  Tolerances are relative to the sums of |terms| (|dY| |W| and
|dY|^T |X|), the size float32 rounding works on.
"""

from __future__ import annotations

import numpy as np

from kernels.dense import fully_connected, perceptron

from ..exercise import Exercise, LaunchConfig, LaunchKey, ReferenceKernel, ceil_div, varied
from ..secret_sizes import size_avoiding
from ._parts import BLOCK_REQUIRED, SHARED, from_record, grid_key, one_dimensional_launch, shapes, tensor_inputs

FORWARD_REFERENCE = perceptron.KERNELS["perceptron_forward_sigmoid"]
SUM_REFERENCE = perceptron.KERNELS["gradient_sum_tree"]

F32_EPS = float(np.finfo(np.float32).eps)


# ------------------------------------------------------------ batched perceptron inference


def _forward_inputs(shape, rng):
    n, d = int(shape["n"]), int(shape["d"])
    x = varied(rng, (n, d), 0.5)
    w = (rng.standard_normal(d) * 0.7 / np.sqrt(d)).astype(np.float32)
    b = np.float32(rng.uniform(-1.0, 1.0))
    return {"x": x, "params": np.append(w, b).astype(np.float32), "y": None, "n": n, "d": d}


def _forward_reference(inputs):
    return {"y": FORWARD_REFERENCE.reference(inputs["x"], inputs["params"])}


def _forward_scale(inputs):
    # The weighted sum is rounded on the scale of sum |w_j x_j| + |b|; the sigmoid's slope is at most 1/4.
    x = inputs["x"].astype(np.float64)
    p = inputs["params"].astype(np.float64)
    return {"y": 0.25 * (np.abs(x) @ np.abs(p[:-1]) + abs(p[-1])) + 1.0}


def _secret_forward_shapes(rng: np.random.Generator, launch: dict) -> list[dict]:
    n = size_avoiding(rng, 700, 10_000, int(launch.get("block", 256)), 32)
    return [{"n": n, "d": int(rng.integers(1, 20))}]


PERCEPTRON_FORWARD = Exercise(
    name="perceptron_forward",
    title="Batched perceptron inference",
    signature="perceptron_forward(const float* x, const float* params, float* y, int n, int d)",
    make_inputs=_forward_inputs,
    reference=_forward_reference,
    error_scale=_forward_scale,
    rtol=1e-5,  # float32 sums are within ~1e-6 of the scale; float16 inputs or sums are ~5e-4 off
    atol=1e-7,
    visible_shapes=({"n": 1, "d": 2}, {"n": 100, "d": 2}, {"n": 256, "d": 3}, {"n": 1000, "d": 5}, {"n": 4099, "d": 2}),
    hidden_shapes=({"n": 31, "d": 1}, {"n": 257, "d": 7}, {"n": 3001, "d": 64}, {"n": 65537, "d": 2}),
    secret_shapes=_secret_forward_shapes,
    launch_keys=(BLOCK_REQUIRED, grid_key(lambda shape: int(shape["n"]), "n")),
    launch_config=one_dimensional_launch,
    correctness_points=4.0,
    speed_points=0.0,
    reference_kernel=ReferenceKernel(FORWARD_REFERENCE),
    timing_shape={"n": 2**22 + 3, "d": 2},
    description=("y[i] = sigmoid(params[0] x[i][0] + ... + params[d-1] x[i][d-1] + params[d]) for every sample i < n; "
                 "x is n-by-d, row-major; params holds the d weights and then the bias. One thread per sample."),
)

# ------------------------------------------------------------ minibatch gradient sum


def _sum_inputs(shape, rng):
    n, k = int(shape["n"]), int(shape["k"])
    return {"grads": varied(rng, (n, k), 1.0), "total": None, "n": n, "k": k}


def _sum_reference(inputs):
    return {"total": SUM_REFERENCE.reference(inputs["grads"])}


def _sum_scale(inputs):
    # Relative to the column sums of |grads|: a float32 sum in any order (one atomicAdd per element
    # included) stays within about eps * sqrt(n) of it; partial sums rounded through float16 do not.
    g = inputs["grads"]
    n = max(1, g.shape[0])
    factor = 1.0 + 0.5 * F32_EPS * np.sqrt(n) / 1e-5
    return {"total": np.abs(g).astype(np.float64).sum(axis=0) * factor}


def _sum_launch(shape, launch) -> LaunchConfig:
    return LaunchConfig(grid=(launch["grid"], launch["grid_y"], 1), block=(launch["block"], 1, 1), shared=launch["shared"])


def _secret_sum_shapes(rng: np.random.Generator, launch: dict) -> list[dict]:
    n = size_avoiding(rng, 700, 15_000, int(launch.get("block", 256)), 32)
    return [{"n": n, "k": int(rng.integers(2, 6))}]


GRADIENT_SUM = Exercise(
    name="gradient_sum",
    title="Summing per-sample gradients over a minibatch",
    signature="gradient_sum(const float* grads, float* total, int n, int k)",
    zeroed=("total",),
    make_inputs=_sum_inputs,
    reference=_sum_reference,
    error_scale=_sum_scale,
    visible_shapes=({"n": 1, "k": 3}, {"n": 100, "k": 3}, {"n": 256, "k": 2}, {"n": 1000, "k": 1}, {"n": 4099, "k": 3}),
    hidden_shapes=({"n": 31, "k": 5}, {"n": 257, "k": 4}, {"n": 10007, "k": 3}, {"n": 65537, "k": 2}),
    secret_shapes=_secret_sum_shapes,
    launch_keys=(
        BLOCK_REQUIRED,
        LaunchKey("grid", 1, 2**31 - 1, default=lambda shape, launch: ceil_div(int(shape["n"]), launch["block"]),
                  help="blocks along x; default ceil(n / block)"),
        LaunchKey("grid_y", 1, 65535, default=lambda shape, launch: int(shape["k"]),
                  help="blocks along y; default k (one row of blocks per column, as the tree reference); "
                       "set grid_y=1 for a kernel that loops over the columns itself"),
        SHARED,
    ),
    launch_config=_sum_launch,
    correctness_points=5.0,
    speed_points=3.0,
    reference_kernel=ReferenceKernel(SUM_REFERENCE),
    timing_shape={"n": 2**24 + 3, "k": 3},
    description=("total[j] = grads[0][j] + ... + grads[n-1][j] for every column j < k of the n-by-k row-major matrix "
                 "grads (one row of per-sample gradients per sample). total holds zeros before the launch; "
                 "atomicAdd of per-block partial sums is allowed. Speed is compared with gradient_sum_tree."),
)

# ============================================================ multilayer perceptrons: backward kernels


INPUT_REFERENCE = fully_connected.KERNELS["fc_backward_input"]
WEIGHT_REFERENCE = fully_connected.KERNELS["fc_backward_weight"]


_dims = fully_connected.layer


def _label(shape):
    n, k, m = _dims(shape)
    return f"n={n}, in={k}, out={m}"


def _secret_shapes(rng: np.random.Generator, launch: dict) -> list[dict]:
    # Sizes that are no multiple of the student's block in either direction.
    bx, by = int(launch.get("block_x", 16)), int(launch.get("block_y", 16))
    n = size_avoiding(rng, 17, 140, by, 32)
    k = size_avoiding(rng, 17, 140, bx, 32)
    m = int(rng.integers(2, 40))
    return [{"n": n, "in": k, "out": m}]


VISIBLE = shapes("n in out", ((1, 1, 1), (4, 5, 3), (16, 16, 16), (33, 64, 10), (100, 20, 40)))
HIDDEN = shapes("n in out", ((1, 300, 7), (17, 17, 17), (128, 64, 64), (257, 31, 129), (7, 513, 2), (3, 9, 300)))
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


#: Every matrix of the two exercises: its rows and columns (axes of the shape), and the mean of its test values.
MATRICES = {"dY": (("n", "out"), 0.5), "W": (("out", "in"), 0.3), "X": (("n", "in"), 0.3),
            "dX": (("n", "in"), None), "dW": (("out", "in"), None)}
#: The kernel's name for each axis.
SIZE_ARGS = {"n": "n", "in": "in_features", "out": "out_features"}


def _sizes(shape) -> dict:
    return {SIZE_ARGS[axis]: int(shape[axis]) for axis in SIZE_ARGS}


def _fc_backward(name: str, title: str, operands: tuple[str, str], output: str, record, description: str) -> Exercise:
    """``name(const float* a, const float* b, float* output, int n, int in_features, int out_features)`` on a 2-D
    grid with, by default, one 16 x 16 block per 16 x 16 tile of the output."""
    rows, columns = MATRICES[output][0]
    return Exercise(
        name=name, title=title, description=description,
        signature=(f"{name}(const float* {operands[0]}, const float* {operands[1]}, float* {output}, "
                   "int n, int in_features, int out_features)"),
        make_inputs=tensor_inputs(MATRICES, operands, output, _sizes), **from_record(record, output, operands),
        visible_shapes=VISIBLE, hidden_shapes=HIDDEN, secret_shapes=_secret_shapes, timing_shape=TIMING, label=_label,
        launch_keys=_keys(lambda shape, launch: ceil_div(int(shape[columns]), launch["block_x"]),
                          lambda shape, launch: ceil_div(int(shape[rows]), launch["block_y"]),
                          f"blocks along x; default ceil({SIZE_ARGS[columns]} / block_x)",
                          f"blocks along y; default ceil({SIZE_ARGS[rows]} / block_y)"),
        launch_config=_launch, correctness_points=5.0, speed_points=1.0, reference_kernel=ReferenceKernel(record))


FC_BACKWARD_INPUT = _fc_backward(
    "fc_backward_input", "Fully connected layer, backward: dE/dX = dE/dY W", ("dY", "W"), "dX", INPUT_REFERENCE,
    "dX[i][k] = sum over j of dY[i][j] * W[j][k] for every sample i < n and input k < in_features "
    "(for one sample: dE/dx = W^T dE/dy). dY is n-by-out, W out-by-in, dX n-by-in, all row-major.")

FC_BACKWARD_WEIGHT = _fc_backward(
    "fc_backward_weight", "Fully connected layer, backward: dE/dW = dE/dY^T X", ("dY", "X"), "dW", WEIGHT_REFERENCE,
    "dW[j][k] = sum over samples i of dY[i][j] * X[i][k] for every output j < out_features and input "
    "k < in_features: the outer products dE/dy x^T summed over the minibatch. dY is n-by-out, X n-by-in, "
    "dW out-by-in, all row-major.")

EXERCISES = [PERCEPTRON_FORWARD, GRADIENT_SUM, FC_BACKWARD_INPUT, FC_BACKWARD_WEIGHT]
