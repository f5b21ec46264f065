"""The perceptron kernels of ``kernels/dense/perceptron.cu``: NumPy references and one launcher per version.

Layout shared by every function here: ``x`` is an ``(n, d)`` float32 matrix,
one sample per row; ``params`` holds the ``d`` weights followed by the bias
(``params[d]``); per-sample gradients are an ``(n, d + 1)`` matrix in the
same order, and the minibatch gradient is their column sum.

References compute in float64 and are what the tests and the exercises
compare the kernels against.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..runtime import DeviceBuffer, Module, blocks_for, empty, to_device, zeros
from ..runtime.loader import grid_stride_blocks, load_topic
from ..runtime.versions import KernelVersion, LaunchConfig, kernel_table, launch_1d

TOPIC = "perceptron"
BLOCK = 256  # threads per block of the one-thread-per-sample kernels
GRADIENT_SUM_BLOCK = 256  # must equal the #define in perceptron.cu (a power of two)


def module() -> Module:
    """``perceptron.cu`` compiled once per backend."""
    return load_topic(TOPIC)


def _matrix(x) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"x must be an (n, d) matrix, got shape {x.shape}")
    return x


def _vector(v) -> np.ndarray:
    return np.ascontiguousarray(v, dtype=np.float32).reshape(-1)


# --------------------------------------------------------------------------- NumPy references


def weighted_sum_reference(x, params) -> np.ndarray:
    """z = x w + b for every sample, in float64."""
    x = np.asarray(x, dtype=np.float64)
    params = np.asarray(params, dtype=np.float64)
    return x @ params[:-1] + params[-1]


def classify_sign_reference(x, params) -> np.ndarray:
    """1, 0 or -1: the side of the line w.x + b = 0 each sample lies on."""
    return np.sign(weighted_sum_reference(x, params))


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def forward_sigmoid_reference(x, params) -> np.ndarray:
    return sigmoid(weighted_sum_reference(x, params))


def sample_gradients_reference(x, t, params) -> np.ndarray:
    """Row i: the gradient of E_i = (y_i - t_i)^2 / 2 with respect to (w, b)."""
    x = np.asarray(x, dtype=np.float64)
    y = forward_sigmoid_reference(x, params)
    delta = (y - np.asarray(t, dtype=np.float64)) * y * (1.0 - y)
    return np.concatenate([delta[:, None] * x, delta[:, None]], axis=1)


def gradient_sum_reference(grads) -> np.ndarray:
    """The column sums of an (n, k) matrix of per-sample gradients."""
    return np.asarray(grads, dtype=np.float64).sum(axis=0)


def update_reference(params, total, learning_rate: float, n: int) -> np.ndarray:
    return np.asarray(params, dtype=np.float64) - learning_rate * np.asarray(total, dtype=np.float64) / n


def loss_reference(x, t, params) -> float:
    """Mean of E_i = (y_i - t_i)^2 / 2 over the samples."""
    y = forward_sigmoid_reference(x, params)
    return float(np.mean((y - np.asarray(t, dtype=np.float64)) ** 2 / 2))


# --------------------------------------------------------------------------- launchers, one per version


def _per_sample_output(kernel: str, x, params) -> np.ndarray:
    """Versions 1 and 2 take the same arguments and launch: one thread per sample, one output each."""
    x = _matrix(x)
    n, d = x.shape
    y = np.empty(n, np.float32)
    module().function(kernel)(x, _vector(params), y, n, d, grid=blocks_for(n, BLOCK), block=BLOCK)
    return y


def classify_sign(x, params) -> np.ndarray:
    """Version 1: ``perceptron_classify_sign``, one thread per sample."""
    return _per_sample_output("perceptron_classify_sign", x, params)


def forward_sigmoid(x, params) -> np.ndarray:
    """Version 2: ``perceptron_forward_sigmoid``."""
    return _per_sample_output("perceptron_forward_sigmoid", x, params)


def sample_gradients(x, t, params, out: DeviceBuffer | None = None):
    """Version 3: ``perceptron_sample_gradients``; an (n, d + 1) matrix (or ``out``, filled on the device)."""
    x = _matrix(x)
    n, d = x.shape
    grads = out if out is not None else np.empty((n, d + 1), np.float32)
    module().function("perceptron_sample_gradients")(
        x, _vector(t), params if isinstance(params, DeviceBuffer) else _vector(params), grads, n, d,
        grid=blocks_for(n, BLOCK), block=BLOCK,
    )
    return grads


def _grads_shape(grads) -> tuple[int, int]:
    if len(grads.shape) != 2:
        raise ValueError(f"grads must be an (n, k) matrix, got shape {grads.shape}")
    return int(grads.shape[0]), int(grads.shape[1])


def _sum_operands(grads, total):
    """grads (on the device or as a float32 matrix), n, k and the zeroed column sums: ``total``, or a new vector."""
    grads = grads if isinstance(grads, DeviceBuffer) else _matrix(grads)
    n, k = _grads_shape(grads)
    out = total if total is not None else np.zeros(k, np.float32)
    if total is not None:
        total.set(np.zeros(k, np.float32))
    return grads, n, k, out


def gradient_sum_atomic(grads, total: DeviceBuffer | None = None):
    """Version 4: ``gradient_sum_atomic``; the column sums of ``grads``.

    Returns a NumPy vector, or fills ``total`` (a device buffer, zeroed here) and returns it.
    """
    grads, n, k, out = _sum_operands(grads, total)
    module().function("gradient_sum_atomic")(grads, out, n, k, grid=blocks_for(n, BLOCK), block=BLOCK)
    return out


def gradient_sum_tree(grads, total: DeviceBuffer | None = None):
    """Version 5: ``gradient_sum_tree``; grid (blocks over rows, one per column), GRADIENT_SUM_BLOCK threads."""
    grads, n, k, out = _sum_operands(grads, total)
    module().function("gradient_sum_tree")(
        grads, out, n, k, grid=(blocks_for(n, GRADIENT_SUM_BLOCK), k), block=GRADIENT_SUM_BLOCK
    )
    return out


def columns_blocks(n: int, k: int) -> int:
    """One wave of GRADIENT_SUM_BLOCK-thread blocks for ``gradient_sum_columns``, never fewer threads than k."""
    blocks = grid_stride_blocks(max(1, -(-n * k // 4)), GRADIENT_SUM_BLOCK)
    return max(blocks, blocks_for(k, GRADIENT_SUM_BLOCK))


def gradient_sum_columns(grads, total: DeviceBuffer | None = None):
    """Version 7: ``gradient_sum_columns``; coalesced float4 reads of the whole matrix, k floats of shared memory."""
    grads, n, k, out = _sum_operands(grads, total)
    module().function("gradient_sum_columns")(
        grads, out, n, k, grid=columns_blocks(n, k), block=GRADIENT_SUM_BLOCK, shared=4 * k
    )
    return out


GRADIENT_SUMS = {"atomic": gradient_sum_atomic, "tree": gradient_sum_tree, "columns": gradient_sum_columns}


def update(params, total, learning_rate: float, n: int):
    """Version 6: ``perceptron_update``, in place on ``params`` (a float32 array or device buffer)."""
    k = int(params.size)
    module().function("perceptron_update")(params, total, float(learning_rate), int(n), k, grid=blocks_for(k, BLOCK), block=BLOCK)
    return params


# --------------------------------------------------------------------------- the versions' facts


def _per_sample(shape) -> LaunchConfig:
    """One thread per sample (or per parameter): what every launcher above but the tree uses."""
    return launch_1d(blocks_for(int(shape["n"]), BLOCK), BLOCK)


def _tree_launch(shape) -> LaunchConfig:
    n, k = int(shape["n"]), int(shape["k"])
    return LaunchConfig((blocks_for(n, GRADIENT_SUM_BLOCK), k, 1), (GRADIENT_SUM_BLOCK, 1, 1), 0)


def _columns_launch(shape) -> LaunchConfig:
    n, k = int(shape["n"]), int(shape["k"])
    return launch_1d(columns_blocks(n, k), GRADIENT_SUM_BLOCK, 4 * k)


def _forward_bytes(shape) -> float:
    """x read and one output per sample (the d + 1 parameters are negligible)."""
    n, d = int(shape["n"]), int(shape["d"])
    return 4.0 * n * (d + 1)


def _sum_bytes(shape) -> float:
    return 4.0 * int(shape["n"]) * int(shape["k"])


KERNELS = kernel_table(
    KernelVersion(TOPIC, "perceptron_classify_sign", classify_sign, _per_sample, _forward_bytes,
                  lambda shape: 2.0 * int(shape["n"]) * int(shape["d"]), classify_sign_reference,
                  number=1, title="one thread per sample: the sign of w.x + b"),
    KernelVersion(TOPIC, "perceptron_forward_sigmoid", forward_sigmoid, _per_sample, _forward_bytes,
                  lambda shape: 2.0 * int(shape["n"]) * (int(shape["d"]) + 1), forward_sigmoid_reference,
                  number=2, title="the same weighted sum through the logistic sigmoid"),
    KernelVersion(TOPIC, "perceptron_sample_gradients", sample_gradients, _per_sample,
                  # x, t and the parameters read; the (n, d + 1) gradients written
                  lambda shape: 4.0 * int(shape["n"]) * (2 * int(shape["d"]) + 2),
                  lambda shape: float(int(shape["n"]) * (2 * int(shape["d"]) + 10)), sample_gradients_reference,
                  number=3, title="each sample's gradient by the chain rule"),
    KernelVersion(TOPIC, "gradient_sum_atomic", gradient_sum_atomic, _per_sample, _sum_bytes,
                  lambda shape: float(int(shape["n"]) * int(shape["k"])), gradient_sum_reference,
                  number=4, title="the minibatch gradient by atomicAdd"),
    KernelVersion(TOPIC, "gradient_sum_tree", gradient_sum_tree, _tree_launch, _sum_bytes,
                  lambda shape: float(int(shape["n"]) * int(shape["k"])), gradient_sum_reference,
                  number=5, title="the minibatch gradient by a tree in shared memory"),
    KernelVersion(TOPIC, "perceptron_update", update, lambda shape: launch_1d(blocks_for(int(shape["k"]), BLOCK), BLOCK),
                  lambda shape: 12.0 * int(shape["k"]), lambda shape: 2.0 * int(shape["k"]), update_reference,
                  number=6, title="the gradient descent step"),
    KernelVersion(TOPIC, "gradient_sum_columns", gradient_sum_columns, _columns_launch, _sum_bytes,
                  lambda shape: float(int(shape["n"]) * int(shape["k"])), gradient_sum_reference,
                  number=7, title="column sums from coalesced float4 loads"),
)


# --------------------------------------------------------------------------- data and training


def make_two_clouds(n: int = 200, seed: int = 0, separation: float = 2.5) -> tuple[np.ndarray, np.ndarray]:
    """Two Gaussian clouds in the plane with labels 0 and 1 (nearly linearly separable)."""
    rng = np.random.default_rng(seed)
    labels = (np.arange(n) % 2).astype(np.float32)
    centres = np.array([[-1.0, -0.5], [1.0, 0.5]]) * separation / 2
    x = centres[labels.astype(int)] + rng.standard_normal((n, 2))
    order = rng.permutation(n)
    return x[order].astype(np.float32), labels[order]


def minibatches(n: int, batch_size: int, rng: np.random.Generator, shuffle: bool = True):
    """Index arrays of the minibatches of one epoch (a fresh shuffle each epoch)."""
    order = rng.permutation(n) if shuffle else np.arange(n)
    return [order[s : s + batch_size] for s in range(0, n, batch_size)]


@dataclass
class TrainingHistory:
    params: list[np.ndarray] = field(default_factory=list)  # after each epoch; params[0] is the start
    loss: list[float] = field(default_factory=list)  # mean E over the data set, same epochs


def train(x, t, params, learning_rate: float = 1.0, epochs: int = 20, batch_size: int = 32, seed: int = 0,
          reduction: str = "tree", shuffle: bool = True) -> TrainingHistory:
    """Minibatch gradient descent with the kernels: per-sample gradients, their sum, the update.

    The parameters stay on the device for the whole run; each minibatch is
    copied in, and the parameters are read back once per epoch for the history.
    """
    x = _matrix(x)
    t = _vector(t)
    n, d = x.shape
    reduce = GRADIENT_SUMS[reduction]
    rng = np.random.default_rng(seed)
    device_params = to_device(_vector(params))
    total = zeros(d + 1)
    history = TrainingHistory()
    history.params.append(device_params.get().copy())
    history.loss.append(loss_reference(x, t, history.params[-1]))
    for _ in range(epochs):
        for batch in minibatches(n, batch_size, rng, shuffle):
            xb, tb = x[batch], t[batch]
            grads = empty((len(batch), d + 1))
            sample_gradients(xb, tb, device_params, out=grads)
            reduce(grads, total)
            update(device_params, total, learning_rate, len(batch))
        history.params.append(device_params.get().copy())
        history.loss.append(loss_reference(x, t, history.params[-1]))
    return history


def train_reference(x, t, params, learning_rate: float = 1.0, epochs: int = 20, batch_size: int = 32, seed: int = 0,
                    shuffle: bool = True) -> TrainingHistory:
    """The same training in NumPy (float64), on the same minibatches."""
    x = np.asarray(x, np.float64)
    t = np.asarray(t, np.float64)
    params = np.asarray(params, np.float64).copy()
    rng = np.random.default_rng(seed)
    history = TrainingHistory(params=[params.copy()], loss=[loss_reference(x, t, params)])
    for _ in range(epochs):
        for batch in minibatches(len(x), batch_size, rng, shuffle):
            total = gradient_sum_reference(sample_gradients_reference(x[batch], t[batch], params))
            params = update_reference(params, total, learning_rate, len(batch))
        history.params.append(params.copy())
        history.loss.append(loss_reference(x, t, params))
    return history
