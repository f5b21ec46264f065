"""Exercises of the chapter "Perceptrons and multilayer perceptrons" (pages ``perceptrons`` and ``mlp_backprop``).

Perceptrons: batched inference, and the minibatch gradient sum, both on the feature-major layout
(one row per feature, or per parameter, holding every sample: the layout in which one thread per
sample reads consecutive addresses), where the chapter's kernels take one row per sample.  At one
feature (one parameter) the two layouts are one, and there the chapter's kernels are the speed
references (``ReferenceKernel.solves``).  The inference's inputs have a
non-zero mean and varied scale, so a kernel that writes zeros, the mean, or one
sample's value for all cannot pass; the gradient sum's are terms no approximation
survives (``_parts.sum_terms``), judged against a bound of a tree sum's rounding.  Weights are scaled with the number of
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

Rows, a warp per row: a softmax with a temperature over each row's first lengths[i] scores (the rest of the row
is padding, its probabilities 0), and LayerNorm of the sum of a row and its residual.  Where the temperature is
1 and nothing is padded, or the residual is zero, the chapter's one-thread-per-row kernels compute the same, and
there they are the speed references.  Scores reach hundreds once divided by a small temperature (an exponential
taken before the maximum is subtracted overflows), rows are empty or one element long or longer than 4096; rows
to normalise have means of a thousand over a spread of one (where mean(x^2) - mean^2 is all rounding) or no
spread at all (where only eps keeps the division finite).  Tolerances follow the float32 rounding of each
exponent's argument and of the sums over the row.
"""

from __future__ import annotations

import numpy as np

from kernels.dense import fully_connected, layernorm, perceptron, softmax

from ..exercise import (Exercise, FormulaMistake, LaunchConfig, LaunchError, LaunchKey, Reduction, ReferenceKernel,
                        ceil_div, reducing, relative_rounding, varied)
from ..secret_sizes import size_avoiding
from ._parts import (BLOCK_REQUIRED, SHARED, TREE_SUM_RTOL, grid_key, one_dimensional_launch, shapes, sum_terms,
                     tree_sum_scale, warp_per_row_keys)

FORWARD_REFERENCE = perceptron.KERNELS["perceptron_forward_sigmoid"]
SUM_REFERENCE = perceptron.KERNELS["gradient_sum_tree"]

F32_EPS = float(np.finfo(np.float32).eps)


# ------------------------------------------------------------ batched perceptron inference


def _forward_inputs(shape, rng):
    n, d = int(shape["n"]), int(shape["d"])
    x = varied(rng, (d, n), 0.5)  # feature-major: row j holds feature j of every sample
    w = (rng.standard_normal(d) * 0.7 / np.sqrt(d)).astype(np.float32)
    b = np.float32(rng.uniform(-1.0, 1.0))
    return {"x": x, "params": np.append(w, b).astype(np.float32), "y": None, "n": n, "d": d}


def _forward_reference(inputs):
    return {"y": FORWARD_REFERENCE.reference(inputs["x"].T, inputs["params"])}


def _weighted_sum(inputs, bias: bool = True) -> np.ndarray:
    """z[i] = params[0] x[0][i] + ... + params[d-1] x[d-1][i] (+ the bias params[d]), float64."""
    p = inputs["params"].astype(np.float64)
    return inputs["x"].astype(np.float64).T @ p[:-1] + (p[-1] if bias else 0.0)


FORWARD_MISTAKES = (
    FormulaMistake("no bias", "without the bias params[d], sigmoid(w . x) where sigmoid(w . x + params[d]) is asked "
                   "for: is the bias, the last of the d + 1 params, added to the weighted sum?",
                   lambda inputs: {"y": 1.0 / (1.0 + np.exp(-_weighted_sum(inputs, bias=False)))}),
    FormulaMistake("step", "with the step function (1 where the weighted sum is positive, else 0) in place of the "
                   "sigmoid 1 / (1 + exp(-z)): the output is a probability between 0 and 1, not a class",
                   lambda inputs: {"y": (_weighted_sum(inputs) > 0).astype(np.float64)}),
)


def _forward_scale(inputs):
    # The weighted sum is rounded on the scale of sum |w_j x_j| + |b|; the sigmoid's slope is at most 1/4.
    x = inputs["x"].astype(np.float64).T
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
    hidden_shapes=({"n": 31, "d": 1}, {"n": 3, "d": 4}, {"n": 257, "d": 7}, {"n": 3001, "d": 64}, {"n": 65537, "d": 2}),
    secret_shapes=_secret_forward_shapes,
    launch_keys=(BLOCK_REQUIRED, grid_key(lambda shape: int(shape["n"]), "n")),
    launch_config=one_dimensional_launch,
    correctness_points=4.0,
    speed_points=0.0,
    reductions=reducing("x", 0),
    formula_mistakes=FORWARD_MISTAKES,
    reference_kernel=ReferenceKernel(FORWARD_REFERENCE, solves={"d": 1}),
    timing_shape={"n": 2**22 + 3, "d": 1},
    description=("y[i] = sigmoid(params[0] x[0][i] + ... + params[d-1] x[d-1][i] + params[d]) for every sample i < n; "
                 "x is d-by-n, row-major, feature-major: row j holds feature j of every sample (the chapter's "
                 "kernels take one sample per row); params holds the d weights and then the bias. One thread per "
                 "sample."),
)

# ------------------------------------------------------------ minibatch gradient sum


def _sum_inputs(shape, rng):
    n, k = int(shape["n"]), int(shape["k"])
    return {"grads": sum_terms(rng, k, n), "total": None, "n": n, "k": k}  # one row per parameter


def _sum_reference(inputs):
    return {"total": SUM_REFERENCE.reference(inputs["grads"].T)}


def _sum_scale(inputs):
    # A bound of a tree sum's rounding, per row: a float32 sum in any order (one atomicAdd per element included)
    # stays well inside it on these terms; partial sums rounded through float16, or a sum that skips or samples
    # any share of the terms, do not (see sum_terms).
    return {"total": tree_sum_scale(inputs["grads"])}


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
    hidden_shapes=({"n": 31, "k": 5}, {"n": 3, "k": 2}, {"n": 257, "k": 4}, {"n": 10007, "k": 3}, {"n": 65537, "k": 2}),
    secret_shapes=_secret_sum_shapes,
    launch_keys=(
        BLOCK_REQUIRED,
        LaunchKey("grid", 1, 2**31 - 1, default=lambda shape, launch: ceil_div(int(shape["n"]), launch["block"]),
                  help="blocks along x; default ceil(n / block)"),
        LaunchKey("grid_y", 1, 65535, default=lambda shape, launch: int(shape["k"]),
                  help="blocks along y; default k (one row of blocks per parameter, as the tree reference); "
                       "set grid_y=1 for a kernel that loops over the parameters itself"),
        SHARED,
    ),
    launch_config=_sum_launch,
    correctness_points=5.0,
    speed_points=3.0,
    rtol=TREE_SUM_RTOL,
    reductions=reducing("grads", 1),
    reference_kernel=ReferenceKernel(SUM_REFERENCE, solves={"k": 1}),
    timing_shape={"n": 2**24 + 3, "k": 1},
    description=("total[j] = grads[j][0] + ... + grads[j][n-1] for every parameter j < k of the k-by-n row-major matrix "
                 "grads (parameter-major: row j holds parameter j's gradient for every sample; the chapter's "
                 "kernels take one sample per row). total holds zeros before the launch; atomicAdd of per-block "
                 "partial sums is allowed. Speed is compared with the chapter's gradient_sum_tree at k = 1, where "
                 "the two layouts are one."),
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
        raise LaunchError(f"block_x * block_y = {launch['block_x'] * launch['block_y']}; a block holds at most 1024 threads")
    return LaunchConfig(grid=(launch["grid_x"], launch["grid_y"], 1), block=(launch["block_x"], launch["block_y"], 1), shared=0)


#: Every matrix of the two exercises: its rows and columns (axes of the shape), and the mean of its test values.
MATRICES = {"dY": (("n", "out"), 0.5), "W": (("out", "in"), 0.3), "X": (("n", "in"), 0.3),
            "dX": (("n", "in"), None), "dW": (("out", "in"), None)}
#: The kernel's name for each axis.
SIZE_ARGS = {"n": "n", "in": "in_features", "out": "out_features"}

#: The activation whose derivative dE/dX is multiplied by (``activation``), computed from its output X.
ACTIVATIONS = {0: ("identity", lambda X: np.ones_like(X)), 1: ("sigmoid", lambda X: X * (1.0 - X)),
               2: ("tanh", lambda X: 1.0 - X * X), 3: ("relu", lambda X: (X > 0).astype(np.float64))}


def _sizes(shape) -> dict:
    return {SIZE_ARGS[axis]: int(shape[axis]) for axis in SIZE_ARGS}


def _matrix(rng, shape, name):
    axes, mean = MATRICES[name]
    return varied(rng, tuple(int(shape[a]) for a in axes), mean)


def _activated(rng, shape):
    """X as the activation's output: in (0, 1) for the sigmoid, (-1, 1) for tanh, >= 0 with zeros for ReLU."""
    z = (rng.standard_normal((int(shape["n"]), int(shape["in"]))) * 1.5).astype(np.float32)
    kind = int(shape["activation"])
    if kind == 1:
        return (1.0 / (1.0 + np.exp(-z))).astype(np.float32)
    if kind == 2:
        return np.tanh(z).astype(np.float32)
    if kind == 3:
        return np.maximum(z, 0).astype(np.float32)
    return z


def _input_inputs(shape, rng):
    return {"dY": _matrix(rng, shape, "dY"), "W": _matrix(rng, shape, "W"), "X": _activated(rng, shape), "dX": None,
            **_sizes(shape), "activation": int(shape["activation"])}


def _slope(inputs) -> np.ndarray:
    return ACTIVATIONS[int(inputs["activation"])][1](np.asarray(inputs["X"], np.float64))


def _input_reference(inputs):
    return {"dX": (inputs["dY"].astype(np.float64) @ inputs["W"].astype(np.float64)) * _slope(inputs)}


#: The slope is computed from X in float32 (1 - X^2 near X = 1 cancels): an absolute error of a few eps, which the
#: tolerance (rtol = 1e-5 of the scale) covers when the scale carries it as a share of the sum |dY| |W|.
SLOPE_ROUNDING = 4 * F32_EPS / 1e-5


def _input_scale(inputs):
    return {"dX": (np.abs(inputs["dY"].astype(np.float64)) @ np.abs(inputs["W"].astype(np.float64)))
            * (np.abs(_slope(inputs)) + SLOPE_ROUNDING)}


def _weight_inputs(shape, rng):
    return {"dY": _matrix(rng, shape, "dY"), "X": _matrix(rng, shape, "X"), "W": _matrix(rng, shape, "W"),
            "dW": None, **_sizes(shape), "weight_decay": np.float32(shape["weight_decay"])}


def _weight_reference(inputs):
    return {"dW": inputs["dY"].astype(np.float64).T @ inputs["X"].astype(np.float64)
            + float(inputs["weight_decay"]) * inputs["W"].astype(np.float64)}


def _input_slope_of_z(inputs):
    """dX with the sigmoid's slope taken at X as if X were its input Z: sigmoid(X) (1 - sigmoid(X))."""
    if int(inputs["activation"]) != 1:
        return _input_reference(inputs)
    s = 1.0 / (1.0 + np.exp(-np.asarray(inputs["X"], np.float64)))
    return {"dX": (inputs["dY"].astype(np.float64) @ inputs["W"].astype(np.float64)) * s * (1.0 - s)}


#: Sizes of a fixed array a kernel may cache a row of dY in, whose sum then stops at that many outputs.
CACHE_SIZES = (32, 64, 128, 256)


def _first_outputs(count: int):
    """dX from the first ``count`` outputs' terms alone (all of them where there are no more)."""
    def reference(inputs):
        dY = inputs["dY"].astype(np.float64)
        return _input_reference({**inputs, "dY": np.where(np.arange(dY.shape[1]) < count, dY, 0.0)})
    return reference


INPUT_MISTAKES = (
    FormulaMistake("sigmoid of the output", "with the sigmoid's slope taken as sigmoid(X) (1 - sigmoid(X)), as if X "
                   "were the sigmoid's input: X is already its output, so the slope is X (1 - X)",
                   _input_slope_of_z),
    *(FormulaMistake(f"first {count} outputs", f"with the sum over j stopped after the first {count} outputs, the "
                     f"others left out: a row of dY cached in a fixed array of {count}, or a loop bounded by "
                     f"{count} -- the sum runs over all out_features", _first_outputs(count)) for count in CACHE_SIZES),
)


def _decay_times_gradient(inputs):
    """dW with the decay scaling the gradient, (dY^T X) (1 + weight_decay), where weight_decay W is to be added."""
    product = inputs["dY"].astype(np.float64).T @ inputs["X"].astype(np.float64)
    return {"dW": product * (1.0 + float(inputs["weight_decay"]))}


def _mean_over_samples(inputs):
    """dW with the sum over the samples divided by n: (dY^T X) / n + weight_decay W."""
    product = inputs["dY"].astype(np.float64).T @ inputs["X"].astype(np.float64)
    return {"dW": product / int(inputs["n"]) + float(inputs["weight_decay"]) * inputs["W"].astype(np.float64)}


WEIGHT_MISTAKES = (
    FormulaMistake("decay scales the gradient", "with the decay scaling the gradient, (dY^T X) (1 + weight_decay), "
                   "where weight_decay W is to be added to it: the penalty's gradient is weight_decay times W itself",
                   _decay_times_gradient),
    FormulaMistake("mean over the samples", "with the sum over the samples divided by n (their mean), (dY^T X) / n + "
                   "weight_decay W: dY already carries the loss's 1/n, so the outer products are summed, not averaged",
                   _mean_over_samples),
)


def _weight_scale(inputs):
    return {"dW": np.abs(inputs["dY"].astype(np.float64)).T @ np.abs(inputs["X"].astype(np.float64))
            + abs(float(inputs["weight_decay"])) * np.abs(inputs["W"].astype(np.float64))}


def _with(rows, name, values):
    """The shapes ``rows`` with ``name`` set to ``values`` in turn."""
    return tuple({**shape, name: values[i % len(values)]} for i, shape in enumerate(rows))


def _fc_backward(name: str, title: str, signature: str, operands: tuple[str, str], output: str, record, extra: str,
                 values, chapter, inputs, reference, scale, reduced: tuple[str, int], description: str,
                 mistakes: tuple[FormulaMistake, ...] = ()) -> Exercise:
    """A backward kernel on a 2-D grid with, by default, one 16 x 16 block per 16 x 16 tile of the output; its
    extra scalar ``extra`` takes ``values`` over the shapes, and ``chapter`` where the chapter's kernel (which
    reads ``operands``) is the exercise (the timing shape's value)."""
    rows, columns = MATRICES[output][0]

    def secret(rng, launch):
        (shape,) = _secret_shapes(rng, launch)
        return [{**shape, extra: values[int(rng.integers(1, len(values)))]}]

    return Exercise(
        name=name, title=title, description=description, signature=signature,
        make_inputs=inputs, reference=reference, error_scale=scale,
        visible_shapes=_with(VISIBLE, extra, values), hidden_shapes=_with(HIDDEN, extra, values[1:] + values[:1]),
        secret_shapes=secret, timing_shape={**TIMING, extra: chapter}, label=lambda s: f"{_label(s)}, {extra}={s[extra]}",
        launch_keys=_keys(lambda shape, launch: ceil_div(int(shape[columns]), launch["block_x"]),
                          lambda shape, launch: ceil_div(int(shape[rows]), launch["block_y"]),
                          f"blocks along x; default ceil({SIZE_ARGS[columns]} / block_x)",
                          f"blocks along y; default ceil({SIZE_ARGS[rows]} / block_y)"),
        launch_config=_launch, correctness_points=5.0, speed_points=1.0, reductions=reducing(*reduced),
        formula_mistakes=mistakes,
        flops=record.flops, bytes_moved=record.bytes,
        reference_kernel=ReferenceKernel(record, arg_order=(*operands, output, "n", "in_features", "out_features"),
                                         solves={extra: chapter}))


FC_BACKWARD_INPUT = _fc_backward(
    "fc_backward_input", "Fully connected layer, backward through the activation below: dE/dZ = (dE/dY W) f'",
    "fc_backward_input(const float* dY, const float* W, const float* X, float* dX, int n, int in_features, "
    "int out_features, int activation)", ("dY", "W"), "dX", INPUT_REFERENCE, "activation", (0, 1, 2, 3), 0,
    _input_inputs, _input_reference, _input_scale, ("dY", 1),
    "dX[i][k] = (sum over j of dY[i][j] * W[j][k]) * f'[i][k] for every sample i < n and input k < in_features: the "
    "gradient dE/dY W carried on through the activation f that produced this layer's input X = f(Z), fused into "
    "the same kernel (dX is then dE/dZ). f' from f's output X: activation 0 identity (1), 1 sigmoid (X (1 - X)), "
    "2 tanh (1 - X^2), 3 ReLU (1 where X > 0, else 0). dY is n-by-out, W out-by-in, X and dX n-by-in, all "
    "row-major. Speed is compared with the chapter's fc_backward_input at activation 0.", INPUT_MISTAKES)

FC_BACKWARD_WEIGHT = _fc_backward(
    "fc_backward_weight", "Fully connected layer, backward: dE/dW = dE/dY^T X + weight decay",
    "fc_backward_weight(const float* dY, const float* X, const float* W, float* dW, int n, int in_features, "
    "int out_features, float weight_decay)", ("dY", "X"), "dW", WEIGHT_REFERENCE, "weight_decay", (0.0, 0.01, 0.5, 3.0), 0.0,
    _weight_inputs, _weight_reference, _weight_scale, ("dY", 0),
    "dW[j][k] = sum over samples i of dY[i][j] * X[i][k] + weight_decay * W[j][k] for every output j < out_features "
    "and input k < in_features: the outer products dE/dy x^T summed over the minibatch, plus the gradient of the L2 "
    "penalty weight_decay / 2 |W|^2, fused into the same kernel. dY is n-by-out, X n-by-in, W and dW out-by-in, all "
    "row-major. Speed is compared with the chapter's fc_backward_weight at weight_decay 0.", WEIGHT_MISTAKES)


# ============================================================ rows, a warp per row: softmax and LayerNorm

#: float32 rounding in units of the exercises' rtol: an error of k eps of a scale is k * ROUNDING of rtol times it.
ROUNDING = F32_EPS / 1e-5

def _rows_label(extra):
    return lambda shape: ", ".join([f"n={shape['n']}, c={shape['c']}"]
                                   + [f"{key}={shape[key]:g}" for key in extra if key in shape])


def _row_kinds(n: int) -> np.ndarray:
    """Which rows are special: row i of a matrix of n rows gets kind i % 5 once n has 5 rows (kind 0, ordinary,
    for every row of a smaller matrix): 1 quiet, 2 constant, 3 shifted, 4 ordinary."""
    return np.arange(n) % 5 if n >= 5 else np.zeros(n, np.int64)


# ------------------------------------------------------------ softmax with a temperature over a row's first scores

SOFTMAX_REFERENCE = softmax.KERNELS["softmax_stable"]


def _lengths(rng, n: int, c: int, padded: int) -> np.ndarray:
    """Each row's count of real scores: all c, or (padded) drawn from 0..c with an empty, a full and a one-score
    row among them."""
    if not padded:
        return np.full(n, c, np.int32)
    lengths = rng.integers(0, c + 1, n)
    if n >= 3:
        lengths[:3] = (0, c, 1)
        lengths = rng.permutation(lengths)
    return lengths.astype(np.int32)


def _softmax_inputs(shape, rng):
    n, c = int(shape["n"]), int(shape["c"])
    Z = varied(rng, (n, c), 1.0, spread=2.0) + np.float32(shape["shift"])
    return {"Z": Z, "lengths": _lengths(rng, n, c, int(shape["padded"])), "P": None, "n": n, "c": c,
            "temperature": np.float32(shape["temperature"])}


def _tempered(inputs):
    """(Z / temperature in float64 with -inf past each row's length, where the scores are real)."""
    Z = inputs["Z"].astype(np.float64) / float(inputs["temperature"])
    inside = np.arange(Z.shape[1]) < np.asarray(inputs["lengths"])[:, None]
    return np.where(inside, Z, -np.inf), inside


def _softmax_reference(inputs):
    X, inside = _tempered(inputs)
    top = np.where(inside.any(axis=1, keepdims=True), X.max(axis=1, keepdims=True, initial=-np.inf), 0.0)
    e = np.exp(X - top)  # 0 past the length
    total = e.sum(axis=1, keepdims=True)
    return {"P": e / np.where(total > 0, total, 1.0)}


def _softmax_scale(inputs):
    # exp(z/T - max) is off by the rounding of its argument, on the scale |z/T| + |max|; the row's sum by that of
    # c/32 additions in a lane and 5 shuffles (a thread summing the whole row, as the chapter's kernel, does as
    # well on these sizes: its errors grow like the square root of c)
    X, inside = _tempered(inputs)
    size = np.where(inside, np.abs(X), 0.0)
    argument = size + size.max(axis=1, keepdims=True, initial=0.0)
    c = X.shape[1]
    return {"P": _softmax_reference(inputs)["P"] * (1.0 + 4 * ROUNDING * (argument + c / 32 + 5))}


def _softmax_by_lanes(inputs, row_peaks, row_sums) -> dict:
    """P from a maximum and a sum per lane, as a warp-per-row kernel computes them wrongly: lane l holds the scores
    l, l + 32, ...; ``row_peaks(peaks) -> (n, 32)`` and ``row_sums(sums) -> (n, 32)`` give what each lane ends with
    from the lanes' own (n, 32) maxima and sums against them."""
    X, inside = _tempered(inputs)
    n, c = X.shape
    lane_of = np.arange(c) % 32
    padded = np.full((n, 32 * -(-c // 32)), -np.inf)
    padded[:, :c] = X
    by_lane = padded.reshape(n, -1, 32)
    peaks = row_peaks(by_lane.max(axis=1))
    with np.errstate(invalid="ignore"):
        e = np.where(inside, np.exp(X - peaks[:, lane_of]), 0.0)
    sums = row_sums(np.pad(e, ((0, 0), (0, padded.shape[1] - c))).reshape(n, -1, 32).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"P": np.where(inside, e / sums[:, lane_of], 0.0)}


def _half_warp_peaks(peaks: np.ndarray) -> np.ndarray:
    """Each half-warp's maximum, the shuffles starting at 8: lanes 0..15 and 16..31 each fold their own."""
    halves = peaks.reshape(-1, 2, 16).max(axis=2)
    return np.repeat(halves, 16, axis=1)


def _shuffled_down(values: np.ndarray) -> np.ndarray:
    """What each lane holds after v += __shfl_down_sync(v, step) for step 16, 8, 4, 2, 1: lane 0 the sum, the
    others a part of it (a lane whose source is past 31 gets its own value back, and doubles it)."""
    v = values.copy()
    for step in (16, 8, 4, 2, 1):
        source = np.arange(32) + step
        v = v + np.where(source < 32, v[:, np.minimum(source, 31)], v)
    return v


def _every_lane(sums: np.ndarray) -> np.ndarray:
    """The lanes' sums folded with __shfl_xor_sync: every lane holds the row's."""
    return np.repeat(sums.sum(axis=1, keepdims=True), 32, axis=1)


def _row_peak(peaks: np.ndarray) -> np.ndarray:
    return np.repeat(peaks.max(axis=1, keepdims=True), 32, axis=1)


def _lane_mistake(key: str, words: str, row_peaks, row_sums) -> FormulaMistake:
    """A mistake of the lanes' maximum or sum (:func:`_softmax_by_lanes`), rounding as the right formula does
    relative to its values."""
    def reference(inputs):
        return _softmax_by_lanes(inputs, row_peaks, row_sums)

    def rounding(inputs):
        return {"P": relative_rounding(_softmax_reference(inputs)["P"], _softmax_scale(inputs)["P"],
                                       reference(inputs)["P"])}
    return FormulaMistake(key, words, reference, rounding)


def _unmasked(inputs) -> dict:
    return {**inputs, "lengths": np.full_like(inputs["lengths"], int(inputs["c"]))}


SOFTMAX_MISTAKES = (
    FormulaMistake("lengths ignored",
                   "with every row normalised over all c scores, its length ignored: the scores from lengths[i] on "
                   "are padding, left out of the maximum and the sum, and their probabilities 0",
                   lambda inputs: _softmax_reference(_unmasked(inputs)),
                   lambda inputs: _softmax_scale(_unmasked(inputs))),
    _lane_mistake("half-warp maximum",
                   "with the maximum folded over each half of the warp only (lanes 0-15 and 16-31, as shuffles that "
                   "start at 8 fold it): each half subtracts its own maximum, and the sum adds exponentials on two "
                   "scales -- the fold of a warp starts at 16",
                   _half_warp_peaks, _every_lane),
    _lane_mistake("sum left in lane zero",
                   "with each lane dividing by what __shfl_down_sync leaves it: the row's sum reaches lane 0 only, the "
                   "other lanes hold a part of it -- fold with __shfl_xor_sync (every lane gets the total), or "
                   "broadcast lane 0's with __shfl_sync(mask, sum, 0)",
                   _row_peak, _shuffled_down),
)


def _softmax_probe(shape, run) -> str:
    """NaN and inf told apart by rows made for it: an ordinary row, an empty one (length 0) and one whose scores
    pass 88 once divided by the temperature, with the failing case's n, c and temperature."""
    n, c, temperature = int(shape["n"]), int(shape["c"]), np.float32(shape["temperature"])
    if n < 3:
        return ""
    Z = np.tile(np.linspace(-1.0, 1.0, c, dtype=np.float32), (n, 1))
    Z[2] += np.float32(120.0) * temperature
    lengths = np.full(n, c, np.int32)
    lengths[1] = 0
    P = run({"Z": Z, "lengths": lengths, "P": None, "n": n, "c": c, "temperature": temperature})["P"]
    broken = ~np.isfinite(P).all(axis=1)
    if broken[0]:
        return ""
    if broken[1]:
        return ("A row of length 0 comes out NaN: it has no maximum (-inf) and a sum of 0, so e^(z/T - max) / sum is "
                "0 / 0 unless the kernel writes zeros for it (a row skipped altogether keeps the NaN the grader "
                "filled P with).")
    if broken[2]:
        return ("A row whose scores divided by the temperature pass 88.7 (the log of the largest float) comes out inf "
                "or NaN: expf overflows there. "
                "Subtract the row's maximum of z / T inside every exponential, the sum's and the output's.")
    return ""


def _softmax_shape(n, c, temperature, padded, shift=0.0):
    return {"n": n, "c": c, "temperature": temperature, "padded": padded, "shift": shift}


def _secret_softmax_shapes(rng: np.random.Generator, launch: dict) -> list[dict]:
    return [_softmax_shape(size_avoiding(rng, 40, 200, 32), size_avoiding(rng, 33, 1500, 32),
                           float(rng.choice([0.1, 0.7, 1.5])), 1, float(rng.choice([0.0, 60.0])))]


SOFTMAX_ROWS = Exercise(
    name="softmax_rows",
    title="Softmax of each row with a temperature and a length, one warp per row",
    signature="softmax_rows(const float* Z, const int* lengths, float* P, int n, int c, float temperature)",
    make_inputs=_softmax_inputs,
    reference=_softmax_reference,
    error_scale=_softmax_scale,
    formula_mistakes=SOFTMAX_MISTAKES,
    visible_shapes=(_softmax_shape(1, 1, 1.0, 0), _softmax_shape(5, 40, 1.0, 1), _softmax_shape(64, 100, 0.5, 0),
                    _softmax_shape(40, 257, 2.0, 1), _softmax_shape(20, 1000, 1.0, 0, 60.0)),
    hidden_shapes=(_softmax_shape(3, 31, 0.05, 1), _softmax_shape(1, 7, 0.3, 0), _softmax_shape(37, 33, 1.0, 1, 90.0),
                   _softmax_shape(200, 64, 0.5, 0), _softmax_shape(65, 1025, 1.5, 1), _softmax_shape(6, 4099, 0.2, 1)),
    secret_shapes=_secret_softmax_shapes,
    launch_keys=warp_per_row_keys(lambda shape: int(shape["n"]), "n"),
    launch_config=one_dimensional_launch,
    correctness_points=5.0,
    speed_points=2.0,
    reference_kernel=ReferenceKernel(SOFTMAX_REFERENCE, arg_order=("Z", "P", "n", "c"),
                                     solves={"temperature": 1.0, "padded": 0}),
    timing_shape=_softmax_shape(16384, 1024, 1.0, 0),
    #: a warp per row reads each row in 32-float lines where the chapter's thread per row takes one float of
    #: 32 rows at a time (4 warps on an SM at this size); expected about 5x at the memory floor
    speed_bands=((4.0, 1.0), (2.5, 0.75), (1.5, 0.5), (1.1, 0.25)),
    label=_rows_label(("temperature", "padded", "shift")),
    probe=_softmax_probe,
    # its maximum and its sum of exponentials: a kernel that reads part of a row is that row with the rest at -inf
    reductions=reducing("Z", 1, kind="max"),
    description=("P[i][j] = exp(Z[i][j] / T - M_i) / sum over k < len_i of exp(Z[i][k] / T - M_i) for j < len_i = "
                 "lengths[i], and P[i][j] = 0 for len_i <= j < c (padding), with T = temperature and M_i the largest "
                 "Z[i][k] / T, k < len_i; a row of length 0 is all zeros. Z and P are n-by-c, row-major. One warp per "
                 "row (block a multiple of 32; grid by default ceil(n / (block / 32))), its maximum and sum by "
                 "warp shuffles. Speed is compared with the chapter's softmax_stable (one thread per row) at "
                 "temperature 1 with no padding."),
)


# ------------------------------------------------------------ LayerNorm of a row plus its residual

LAYERNORM_REFERENCE = layernorm.KERNELS["layernorm_forward"]


def _layernorm_inputs(shape, rng):
    n, c = int(shape["n"]), int(shape["c"])
    X = varied(rng, (n, c), 0.3, spread=1.0)
    R = varied(rng, (n, c), -0.2, spread=1.0) if shape["residual"] else np.zeros((n, c), np.float32)
    kind = _row_kinds(n)
    quiet = kind == 1  # a spread of 1e-3: eps outweighs the variance
    X[quiet] = X[quiet, :1] + np.float32(1e-3) * rng.standard_normal((int(quiet.sum()), c)).astype(np.float32)
    R[quiet] = 0.0
    X[kind == 2] = X[kind == 2, :1]  # no spread at all: only eps keeps 1 / sqrt(var + eps) finite
    R[kind == 2] = R[kind == 2, :1]
    X[kind == 3] += np.float32(shape["offset"])  # a mean far above the spread
    return {"X": X, "R": R, "gamma": varied(rng, (c,), 1.0, spread=0.3), "beta": varied(rng, (c,), 0.1),
            "Y": None, "n": n, "c": c, "eps": np.float32(shape["eps"])}


def _with_residual(inputs) -> np.ndarray:
    return inputs["X"].astype(np.float64) + inputs["R"].astype(np.float64)


def _layernorm_reference(inputs):
    return {"Y": LAYERNORM_REFERENCE.reference(_with_residual(inputs), inputs["gamma"], inputs["beta"],
                                               float(inputs["eps"]))}


def _layernorm_scale(inputs):
    # h = x + r and the mean are rounded on the scale of the row's |h| (a few eps of it for sums of c/32 terms a
    # lane and a tree; the variance's rounding moves 1 / sqrt(var + eps) by a relative few eps), times
    # gamma / sqrt(var + eps)
    H = _with_residual(inputs)
    mu = H.mean(axis=1, keepdims=True)
    inv_std = 1.0 / np.sqrt(((H - mu) ** 2).mean(axis=1, keepdims=True) + float(inputs["eps"]))
    size = np.abs(H).mean(axis=1, keepdims=True)
    return {"Y": np.abs(inputs["gamma"].astype(np.float64)) * inv_std * (np.abs(H - mu) + 4 * size)
            + np.abs(inputs["beta"].astype(np.float64))}


def _normalised(inputs, variance, root=lambda var, eps: np.sqrt(var + eps)):
    """Y of the rows of H = X + R with ``variance(H)`` (one number per row) in place of the biased variance."""
    H = _with_residual(inputs)
    mu = H.mean(axis=1, keepdims=True)
    sd = root(variance(H - mu), float(inputs["eps"]))
    return {"Y": (H - mu) / sd * inputs["gamma"].astype(np.float64) + inputs["beta"].astype(np.float64)}


def _within_lanes(deviations: np.ndarray) -> np.ndarray:
    """The squared deviations of each lane's elements (lane l holds l, l + 32, ...) from that lane's own mean,
    summed over the lanes, over c: the variance without the spread between the lanes' means."""
    c = deviations.shape[1]
    total = np.zeros((deviations.shape[0], 1))
    for lane in range(min(32, c)):
        part = deviations[:, lane::32]
        total[:, 0] += ((part - part.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    return total / c


LAYERNORM_MISTAKES = (
    FormulaMistake("eps outside the root",
                   "with eps added to the standard deviation, 1 / (sqrt(var) + eps), instead of under the square "
                   "root, 1 / sqrt(var + eps): the two agree only where the spread is far above sqrt(eps).",
                   lambda inputs: _normalised(inputs, lambda d: (d ** 2).mean(axis=1, keepdims=True),
                                              lambda var, eps: np.sqrt(var) + eps)),
    FormulaMistake("unbiased variance",
                   "with the variance divided by c - 1 (the sample variance) instead of by c: LayerNorm's variance "
                   "is the biased one, the mean of the squared deviations.",
                   lambda inputs: _normalised(inputs, lambda d: (d ** 2).sum(axis=1, keepdims=True) / (d.shape[1] - 1))),
    FormulaMistake("variance within the lanes",
                   "with the variance measured inside each lane's part of the row (lane l holding elements l, l + 32, "
                   "...), each about its own mean, and the spread between the parts' means left out: merging two "
                   "parts adds the squared gap between their means, times count_a count_b / (count_a + count_b), "
                   "to the sum of squared deviations.",
                   lambda inputs: _normalised(inputs, _within_lanes)),
)


def _layernorm_probe(shape, run) -> str:
    """The same ramp normalised in rows of 5 and of 64 features: NaN in the short rows alone points at the lanes
    that hold no element."""
    n = int(shape["n"])
    finite = {}
    for c in (5, 64):
        X = np.tile(np.linspace(-1.0, 1.0, c, dtype=np.float32), (n, 1))
        Y = run({"X": X, "R": np.zeros_like(X), "gamma": np.ones(c, np.float32), "beta": np.zeros(c, np.float32),
                 "Y": None, "n": n, "c": c, "eps": np.float32(1e-5)})["Y"]
        finite[c] = bool(np.isfinite(Y).all())
    if finite[64] and not finite[5]:
        return ("Rows shorter than a warp come out NaN (here rows of 5): the lanes past a row's end hold no element, "
                "and a merge of two such lanes' statistics divides by a count of 0. Leave two empty parts as they are.")
    return ""


def _layernorm_shape(n, c, residual, offset=0.0, eps=1e-5):
    return {"n": n, "c": c, "residual": residual, "offset": offset, "eps": eps}


def _secret_layernorm_shapes(rng: np.random.Generator, launch: dict) -> list[dict]:
    return [_layernorm_shape(size_avoiding(rng, 40, 200, 32), size_avoiding(rng, 33, 1500, 32), 1,
                             float(rng.choice([300.0, 1000.0])), float(rng.choice([1e-5, 1e-3])))]


LAYERNORM_RESIDUAL = Exercise(
    name="layernorm_residual",
    title="LayerNorm of each row plus its residual, one warp per row",
    signature=("layernorm_residual(const float* X, const float* R, const float* gamma, const float* beta, float* Y, "
               "int n, int c, float eps)"),
    make_inputs=_layernorm_inputs,
    reference=_layernorm_reference,
    error_scale=_layernorm_scale,
    visible_shapes=(_layernorm_shape(1, 1, 1), _layernorm_shape(5, 40, 1), _layernorm_shape(64, 100, 0, eps=1e-3),
                    _layernorm_shape(30, 257, 1, 20.0), _layernorm_shape(20, 1000, 1)),
    hidden_shapes=(_layernorm_shape(3, 31, 1, eps=0.1), _layernorm_shape(37, 33, 1, 1000.0),
                   _layernorm_shape(200, 64, 1, 1000.0), _layernorm_shape(64, 128, 0, 300.0),
                   _layernorm_shape(11, 1025, 1, 300.0, 1e-3), _layernorm_shape(6, 4099, 1, 1000.0, 1e-4)),
    secret_shapes=_secret_layernorm_shapes,
    launch_keys=warp_per_row_keys(lambda shape: int(shape["n"]), "n"),
    launch_config=one_dimensional_launch,
    correctness_points=5.0,
    speed_points=2.0,
    reference_kernel=ReferenceKernel(LAYERNORM_REFERENCE, arg_order=("X", "gamma", "beta", "Y", "n", "c", "eps"),
                                     solves={"residual": 0}),
    timing_shape=_layernorm_shape(16384, 1024, 0),
    #: as softmax_rows: a warp per row against the chapter's thread per row, which reads each row three times
    speed_bands=((4.0, 1.0), (2.5, 0.75), (1.5, 0.5), (1.1, 0.25)),
    label=_rows_label(("residual", "offset", "eps")),
    probe=_layernorm_probe,
    # the mean and the variance of each row of X + R (tests/autograder/test_approximation.py computes them from a
    # part of the row, as a kernel that samples it would)
    reductions=(Reduction((("X", (1,)), ("R", (1,)))),),
    formula_mistakes=LAYERNORM_MISTAKES,
    description=("Y[i][j] = (H[i][j] - mu_i) / sqrt(var_i + eps) * gamma[j] + beta[j] with H = X + R (a row plus its "
                 "residual, added in the same pass), mu_i and var_i the mean and the (biased) variance of row i of H "
                 "over its c features. X, R and Y are n-by-c, row-major. One warp per row (block a multiple of 32; "
                 "grid by default ceil(n / (block / 32))), the statistics by warp shuffles, in a way that stays "
                 "exact for a row whose mean is large against its spread (two passes, or Welford's update). Speed is "
                 "compared with the chapter's layernorm_forward (one thread per row) where R is zero."),
)

EXERCISES = [PERCEPTRON_FORWARD, GRADIENT_SUM, FC_BACKWARD_INPUT, FC_BACKWARD_WEIGHT, SOFTMAX_ROWS, LAYERNORM_RESIDUAL]
