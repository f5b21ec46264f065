"""LeNet-5 built from the book's kernels, beside its float32 NumPy twin.

The network (LeCun et al., 1998), on 1 x 32 x 32 images::

    C1  convolution 1 -> 6 maps, 5 x 5 filters       6 x 28 x 28   (+ activation)
    S2  2 x 2 pooling                                6 x 14 x 14
    C3  convolution 6 -> 16 maps (96 filters)        16 x 10 x 10  (+ activation)
    S4  2 x 2 pooling                                16 x 5 x 5
    C5  convolution 16 -> 120 maps, 5 x 5            120 x 1 x 1   (+ activation)
    F6  fully connected 120 -> 84                    84            (+ activation)
    out fully connected 84 -> 10, softmax + cross-entropy

As in most modern re-creations, every C3 map reads all six S2 maps (the paper
used a sparse connection table), the pooling layers have no trainable
coefficient, the activation defaults to ReLU and the pooling to max pooling
(``activation="tanh", pooling="avg"`` is closer to the original), and the
output layer is a softmax instead of the paper's radial basis functions.

:class:`KernelLeNet` keeps every weight, gradient and activation on the device
and launches ``conv2d.cu``, ``conv2d_backward.cu``, ``pooling.cu`` and the MLP
chapter's ``fully_connected.cu``, ``activations.cu``, ``softmax.cu`` and
``sgd.cu``.  :class:`NumpyLeNet` does the same arithmetic in float32 NumPy.
Both plug into :func:`kernels.models.mlp.train`.
"""

from __future__ import annotations

import numpy as np

from ..conv import conv2d, conv2d_backward, pooling
from ..dense import activations, fully_connected, sgd, softmax
from .mlp import History, epoch_batches, evaluate, train  # noqa: F401  (re-exported for the chapter)
from .mlp import load_digits_split
from ..runtime import empty, queued, to_device

# (name, input maps, output maps, filter size) of the three convolutions; the two dense layers.
CONV_LAYERS = (("C1", 1, 6, 5), ("C3", 6, 16, 5), ("C5", 16, 120, 5))
DENSE_LAYERS = (("F6", 120, 84), ("output", 84, 10))
LAYER_NAMES = tuple(name for name, *_ in CONV_LAYERS) + tuple(name for name, *_ in DENSE_LAYERS)
IMAGE_SIZE = 32
POOL = 2


def init_params(seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{layer: (W, b)}``, He-normal weights (variance 2 / fan_in) and zero biases, float32."""
    rng = np.random.default_rng(seed)
    params = {}
    for name, C, M, K in CONV_LAYERS:
        W = rng.standard_normal((M, C, K, K)) * np.sqrt(2.0 / (C * K * K))
        params[name] = (W.astype(np.float32), np.zeros(M, np.float32))
    for name, fan_in, fan_out in DENSE_LAYERS:
        W = rng.standard_normal((fan_out, fan_in)) * np.sqrt(2.0 / fan_in)
        params[name] = (W.astype(np.float32), np.zeros(fan_out, np.float32))
    return params


def parameter_count() -> int:
    return sum(M * C * K * K + M for _, C, M, K in CONV_LAYERS) + sum(i * o + o for _, i, o in DENSE_LAYERS)


def upscale_digits(X64, size: int = IMAGE_SIZE) -> np.ndarray:
    """scikit-learn's 8 x 8 digits (rows of 64 pixels) -> float32 ``(n, 1, size, size)``.

    Each pixel becomes a ``size/8 x size/8`` block (nearest-neighbour upscaling: the
    strokes keep their shape, only larger).
    """
    X64 = np.asarray(X64, np.float32).reshape(-1, 8, 8)
    factor = size // 8
    big = np.kron(X64, np.ones((factor, factor), np.float32))
    return np.ascontiguousarray(big[:, None, :, :])


def load_digits_32(test_size: float = 0.2, seed: int = 0):
    """The digits at 32 x 32: ``(X_train, X_test, y_train, y_test)``, the split of :func:`kernels.models.mlp.load_digits_split`."""
    X_train, X_test, y_train, y_test = load_digits_split(test_size, seed)
    return upscale_digits(X_train), upscale_digits(X_test), y_train, y_test


def _check_activation(activation: str, pooling_kind: str) -> None:
    if activation not in activations.NAMES:
        raise ValueError(f"unknown activation {activation!r}; known: {', '.join(activations.NAMES)}")
    if pooling_kind not in ("max", "avg"):
        raise ValueError(f"pooling must be 'max' or 'avg', not {pooling_kind!r}")


class NumpyLeNet:
    """The reference network in float32 NumPy, layer by layer as the kernels do it."""

    def __init__(self, params, activation: str = "relu", pooling_kind: str = "max"):
        _check_activation(activation, pooling_kind)
        self.params = {k: (W.copy(), b.copy()) for k, (W, b) in params.items()}
        self.activation = activation
        self.pooling_kind = pooling_kind

    def _act(self, z):
        return activations.forward_reference(self.activation, z).astype(np.float32)

    def _act_back(self, z, y, dy):
        saved = z if activations.SAVES[self.activation] == "input" else y
        return activations.backward_reference(self.activation, saved, dy).astype(np.float32)

    def _pool(self, h):
        ref = pooling.max_pool_reference if self.pooling_kind == "max" else pooling.avg_pool_reference
        return ref(h, POOL).astype(np.float32)

    def _pool_back(self, h, dp):
        if self.pooling_kind == "max":
            return pooling.max_pool_backward_reference(h, dp, POOL).astype(np.float32)
        return pooling.avg_pool_backward_reference(dp, h.shape, POOL).astype(np.float32)

    def _conv(self, x, name):
        W, b = self.params[name]
        return conv2d.forward_reference(x, W, b).astype(np.float32)

    def _forward(self, X):
        s = {"x": np.asarray(X, np.float32)}
        s["a1"] = self._conv(s["x"], "C1")
        s["h1"] = self._act(s["a1"])
        s["p1"] = self._pool(s["h1"])
        s["a3"] = self._conv(s["p1"], "C3")
        s["h3"] = self._act(s["a3"])
        s["p3"] = self._pool(s["h3"])
        s["a5"] = self._conv(s["p3"], "C5").reshape(len(X), -1)
        s["h5"] = self._act(s["a5"])
        W6, b6 = self.params["F6"]
        s["a6"] = s["h5"] @ W6.T + b6
        s["h6"] = self._act(s["a6"])
        W7, b7 = self.params["output"]
        s["z"] = s["h6"] @ W7.T + b7
        return s

    def logits(self, X) -> np.ndarray:
        return self._forward(X)["z"]

    def gradients(self, X, labels):
        """``(mean loss, logits, {layer: (dW, db)})`` for one minibatch."""
        s = self._forward(X)
        n = len(X)
        loss = softmax.cross_entropy_reference(s["z"], labels)
        dz = softmax.cross_entropy_backward_reference(s["z"], labels).astype(np.float32)
        grads = {}
        W7, _ = self.params["output"]
        grads["output"] = (dz.T @ s["h6"], dz.sum(axis=0))
        da6 = self._act_back(s["a6"], s["h6"], dz @ W7)
        W6, _ = self.params["F6"]
        grads["F6"] = (da6.T @ s["h5"], da6.sum(axis=0))
        da5 = self._act_back(s["a5"], s["h5"], da6 @ W6).reshape(n, -1, 1, 1)
        dp3 = self._conv_backward("C5", s["p3"], da5, grads)
        da3 = self._act_back(s["a3"], s["h3"], self._pool_back(s["h3"], dp3))
        dp1 = self._conv_backward("C3", s["p1"], da3, grads)
        da1 = self._act_back(s["a1"], s["h1"], self._pool_back(s["h1"], dp1))
        self._conv_backward("C1", s["x"], da1, grads, need_input=False)
        grads = {k: (dW.astype(np.float32), db.astype(np.float32)) for k, (dW, db) in grads.items()}
        return float(loss.mean()), s["z"], grads

    def _conv_backward(self, name, x, dy, grads, need_input=True):
        W, _ = self.params[name]
        grads[name] = (conv2d_backward.backward_weight_reference(x, dy), conv2d_backward.backward_bias_reference(dy))
        if need_input:
            return conv2d_backward.backward_input_reference(dy, W).astype(np.float32)
        return None

    def train_step(self, X, labels, learning_rate: float) -> tuple[float, np.ndarray]:
        loss, z, grads = self.gradients(X, labels)
        for name, (dW, db) in grads.items():
            W, b = self.params[name]
            W -= np.float32(learning_rate) * dW
            b -= np.float32(learning_rate) * db
        return loss, z.argmax(axis=1)

    def parameters(self):
        return {k: (W.copy(), b.copy()) for k, (W, b) in self.params.items()}


def _input_fixed_where_it_fits(dY, Wf, x_shape, out):
    """Version 11 of the input gradient where a sample fits one block (C3), else version 1 (C5: its 120 maps
    of dY, padded to 9 x 9, and their filters exceed 48 KiB of shared memory)."""
    (N, C, H, W), (M, _, K, _) = x_shape, Wf.shape
    plan = conv2d_backward.input_fixed_plan({"N": N, "C": C, "H": H, "W": W, "M": M, "K": K})
    if conv2d_backward.input_fixed_fits(plan):
        return conv2d_backward.backward_input_fixed(dY, Wf, x_shape, out=out)
    return conv2d_backward.backward_input(dY, Wf, x_shape, out=out)


#: The input-gradient kernels a :class:`KernelLeNet` can train with: version 1, or version 11 where it fits.
INPUT_GRADS = {"naive": conv2d_backward.backward_input, "fixed": _input_fixed_where_it_fits}
#: The filter-gradient kernels: those of :data:`kernels.conv.conv2d_backward.WEIGHT_GRADIENTS` (the bias then by
#: version 4), or "split", version 5, which computes the filter and the bias gradients in one launch.
WEIGHT_GRADS = (*conv2d_backward.WEIGHT_GRADIENTS, "split")
#: The fastest correct kernels for training on a GPU at batch 64, as the benchmarks measured them on C1 and
#: C3 (``cnn.json``, ``cnn_backward.json``) and on the digits-sized dense layer (``perceptrons_mlp.json``):
#: the whole-sample forward convolution, version 5 (filter and bias gradients in one launch), version 11
#: for the input gradient (version 1 for C5, whose sample does not fit one block of version 11), the tiled
#: dense layer.  C5 takes the same versions as C3; it has no benchmark of its own.  The defaults of
#: :class:`KernelLeNet` are the teaching versions, which are also the cheapest on the CPU emulator.
FASTEST = {"conv": "whole_sample", "weight_grad": "split", "input_grad": "fixed", "dense": "tiled"}


class KernelLeNet:
    """LeNet-5 with every step a kernel launch; parameters, gradients and activations live on the device.

    ``conv`` picks the forward convolution of :data:`kernels.conv.conv2d.FORWARDS`
    used in training, ``dense`` the dense layers' forward kernel of
    :data:`kernels.dense.fully_connected.FORWARDS` ("naive" or "tiled"), ``weight_grad`` the
    filter-gradient kernel of :data:`WEIGHT_GRADS` ("naive" is the cheapest on the
    CPU emulator, where every barrier of a block costs a switch between its
    threads) and ``input_grad`` the input-gradient kernel of :data:`INPUT_GRADS`.
    ``KernelLeNet(params, **FASTEST)`` trains with the fastest kernels on a GPU.
    :meth:`launches_per_training_step` counts the kernels a step launches.
    """

    def __init__(self, params, activation: str = "relu", pooling_kind: str = "max", conv: str = "naive",
                 weight_grad: str = "auto", input_grad: str = "naive", dense: str = "naive"):
        _check_activation(activation, pooling_kind)
        if conv not in conv2d.FORWARDS:
            raise ValueError(f"unknown convolution {conv!r}; known: {', '.join(conv2d.FORWARDS)}")
        if weight_grad not in WEIGHT_GRADS:
            raise ValueError(f"unknown weight gradient {weight_grad!r}; known: {', '.join(WEIGHT_GRADS)}")
        if input_grad not in INPUT_GRADS:
            raise ValueError(f"unknown input gradient {input_grad!r}; known: {', '.join(INPUT_GRADS)}")
        if dense not in ("naive", "tiled"):
            raise ValueError(f"unknown dense layer {dense!r}; known: naive, tiled")
        # "split": version 5 gives the bias gradient too, so no separate bias launch.
        self.weight_and_bias = weight_grad == "split"
        self.weight_grad = None if self.weight_and_bias else conv2d_backward.WEIGHT_GRADIENTS[weight_grad]
        self.input_grad = INPUT_GRADS[input_grad]
        self.dense = fully_connected.FORWARDS[dense]
        self.activation = activation
        self.pooling_kind = pooling_kind
        self.conv = conv2d.FORWARDS[conv]
        self.weights = {k: to_device(W) for k, (W, _) in params.items()}
        self.biases = {k: to_device(b) for k, (_, b) in params.items()}
        self.weight_grads = {k: empty(W.shape) for k, (W, _) in params.items()}
        self.bias_grads = {k: empty(b.shape) for k, (_, b) in params.items()}
        self._buffers: dict[int, dict] = {}

    def _batch(self, n: int) -> dict:
        """Activation and gradient buffers for a batch of n samples, allocated once per batch size."""
        if n not in self._buffers:
            shapes = {
                "a1": (n, 6, 28, 28), "h1": (n, 6, 28, 28), "p1": (n, 6, 14, 14),
                "a3": (n, 16, 10, 10), "h3": (n, 16, 10, 10), "p3": (n, 16, 5, 5),
                "a5": (n, 120), "h5": (n, 120), "a6": (n, 84), "h6": (n, 84), "z": (n, 10),
                "probs": (n, 10), "loss": (n,),
            }
            buf = {k: empty(s) for k, s in shapes.items()}
            # Gradients: d<name> has the shape of <name>.
            for k in ("a1", "h1", "p1", "a3", "h3", "p3", "a5", "h5", "a6", "h6", "z"):
                buf["d" + k] = empty(shapes[k])
            self._buffers[n] = buf
        return self._buffers[n]

    def _pool(self, h, out):
        return pooling.FORWARDS[self.pooling_kind](h, POOL, out=out)

    def _pool_back(self, h, dp, out):
        if self.pooling_kind == "max":
            return pooling.max_pool_backward(h, dp, POOL, out=out)
        return pooling.avg_pool_backward(dp, h.shape, POOL, out=out)

    def _act(self, z, out):
        return activations.forward(self.activation, z, out=out)

    def _act_back(self, z, y, dy, out):
        saved = z if activations.SAVES[self.activation] == "input" else y
        return activations.backward(self.activation, saved, dy, out=out)

    def _forward(self, X, n: int) -> dict:
        b = self._batch(n)
        W, B = self.weights, self.biases
        self.conv(X, W["C1"], B["C1"], out=b["a1"])
        self._act(b["a1"], b["h1"])
        self._pool(b["h1"], b["p1"])
        self.conv(b["p1"], W["C3"], B["C3"], out=b["a3"])
        self._act(b["a3"], b["h3"])
        self._pool(b["h3"], b["p3"])
        self.conv(b["p3"], W["C5"], B["C5"], out=b["a5"])   # N x 120 x 1 x 1, kept as N x 120
        self._act(b["a5"], b["h5"])
        self.dense(b["h5"], W["F6"], B["F6"], out=b["a6"])
        self._act(b["a6"], b["h6"])
        self.dense(b["h6"], W["output"], B["output"], out=b["z"])
        return b

    def logits(self, X, batch_size: int = 512) -> np.ndarray:
        X = np.ascontiguousarray(X, np.float32)
        parts = []
        for start in range(0, len(X), batch_size):
            chunk = X[start : start + batch_size]
            parts.append(self._forward(to_device(chunk), len(chunk))["z"].get())
        return np.concatenate(parts) if parts else np.zeros((0, 10), np.float32)

    def logits_fused(self, X) -> np.ndarray:
        """Inference with C1+S2 and C3+S4 each one fused launch (``conv2d_bias_act_pool_fused``; max pooling only)."""
        if self.pooling_kind != "max":
            raise ValueError("the fused kernel pools with max; this network uses average pooling")
        X = to_device(np.ascontiguousarray(X, np.float32))
        n = int(X.shape[0])
        b = self._batch(n)
        W, B = self.weights, self.biases
        conv2d.forward_fused(X, W["C1"], B["C1"], self.activation, out=b["p1"])
        conv2d.forward_fused(b["p1"], W["C3"], B["C3"], self.activation, out=b["p3"])
        self.conv(b["p3"], W["C5"], B["C5"], out=b["a5"])
        self._act(b["a5"], b["h5"])
        self.dense(b["h5"], W["F6"], B["F6"], out=b["a6"])
        self._act(b["a6"], b["h6"])
        self.dense(b["h6"], W["output"], B["output"], out=b["z"])
        return b["z"].get()

    def gradients(self, X, labels) -> tuple[float, np.ndarray]:
        """Forward and backward on one minibatch; fills ``weight_grads`` / ``bias_grads``.  Returns (mean loss, logits).

        The launches are queued and waited for once (:func:`kernels.runtime.queued`): waiting for each of
        them would cost more than most of the kernels take.
        """
        X = to_device(np.ascontiguousarray(X, np.float32))
        labels = to_device(np.ascontiguousarray(labels, np.int32))
        with queued():
            b = self._launch_gradients(X, labels)
        return float(b["loss"].get().mean()), b["probs"].get()

    def _launch_gradients(self, X, labels) -> dict:
        n = int(X.shape[0])
        b = self._forward(X, n)
        W, dW, dB = self.weights, self.weight_grads, self.bias_grads
        softmax.cross_entropy_forward(b["z"], labels, probs=b["probs"], loss=b["loss"])
        softmax.cross_entropy_backward(b["probs"], labels, out=b["dz"])
        # Dense layers.
        fully_connected.backward_weight(b["dz"], b["h6"], out=dW["output"])
        fully_connected.backward_bias(b["dz"], out=dB["output"])
        fully_connected.backward_input(b["dz"], W["output"], out=b["dh6"])
        self._act_back(b["a6"], b["h6"], b["dh6"], b["da6"])
        fully_connected.backward_weight(b["da6"], b["h5"], out=dW["F6"])
        fully_connected.backward_bias(b["da6"], out=dB["F6"])
        fully_connected.backward_input(b["da6"], W["F6"], out=b["dh5"])
        self._act_back(b["a5"], b["h5"], b["dh5"], b["da5"])
        # C5: its N x 120 gradient read as N x 120 x 1 x 1.
        self._conv_backward("C5", b["p3"], b["da5"], out=b["dp3"])
        # S4, C3.
        self._pool_back(b["h3"], b["dp3"], b["dh3"])
        self._act_back(b["a3"], b["h3"], b["dh3"], b["da3"])
        self._conv_backward("C3", b["p1"], b["da3"], out=b["dp1"])
        # S2, C1 (no gradient for the images).
        self._pool_back(b["h1"], b["dp1"], b["dh1"])
        self._act_back(b["a1"], b["h1"], b["dh1"], b["da1"])
        self._conv_backward("C1", X, b["da1"])
        return b

    def _conv_backward(self, name, x, dy, out=None):
        """The filter and bias gradients of layer ``name``, and the input gradient into ``out`` if given."""
        dW, dB = self.weight_grads[name], self.bias_grads[name]
        if self.weight_and_bias:
            conv2d_backward.backward_weight_bias_split(x, dy, 5, out=dW, out_bias=dB)
        else:
            self.weight_grad(x, dy, 5, out=dW)
            conv2d_backward.backward_bias(dy, out=dB)
        if out is not None:
            self.input_grad(dy, self.weights[name], x.shape, out=out)

    def launches_per_training_step(self) -> int:
        """Kernels one :meth:`train_step` launches: 13 forward, 20 backward (17 when one launch gives a
        layer's filter and bias gradients) and 10 updates."""
        return 13 + (17 if self.weight_and_bias else 20) + 10

    def train_step(self, X, labels, learning_rate: float) -> tuple[float, np.ndarray]:
        """One SGD step on a minibatch; returns (mean loss, predicted classes)."""
        loss, probs = self.gradients(X, labels)
        # Update only after every gradient is computed: the input gradients needed the old weights.
        with queued():
            for name in LAYER_NAMES:
                sgd.sgd_update(self.weights[name], self.weight_grads[name], learning_rate)
                sgd.sgd_update(self.biases[name], self.bias_grads[name], learning_rate)
        return loss, probs.argmax(axis=1)

    def parameters(self):
        return {k: (self.weights[k].get(), self.biases[k].get()) for k in LAYER_NAMES}


def draw_architecture(ax=None):
    """LeNet-5 as stacks of feature maps (one square per map, drawn to scale), with the layer names."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, Rectangle

    if ax is None:
        _, ax = plt.subplots(figsize=(12, 3.6))
    # (label, maps, size, shown maps): the feature maps of each layer; dense layers as columns.
    stages = [("input\n1@32x32", 1, 32), ("C1\n6@28x28", 6, 28), ("S2\n6@14x14", 6, 14), ("C3\n16@10x10", 16, 10),
              ("S4\n16@5x5", 16, 5), ("C5\n120", 120, 1), ("F6\n84", 84, 1), ("output\n10", 10, 1)]
    x = 0.0
    centres = []
    for i, (label, maps, size) in enumerate(stages):
        if size > 1:
            shown = min(maps, 8)
            step = 1.6
            for k in range(shown):
                colour = "#dbe9f6" if label.startswith(("C", "input")) else "#fde6c8"
                ax.add_patch(Rectangle((x + k * step, k * step), size, size, facecolor=colour, edgecolor="#3a5a80", lw=0.8))
            width = size + (shown - 1) * step
            top = size + (shown - 1) * step
        else:
            height = {120: 36, 84: 28, 10: 12}[maps]
            ax.add_patch(Rectangle((x, (36 - height) / 2), 3, height, facecolor="#e4f2e1", edgecolor="#2e6b30", lw=0.8))
            width, top = 3, 36
        ax.text(x + width / 2, -6, label, ha="center", va="top", fontsize=9)
        centres.append((x, x + width, top))
        x += width + 9
    ops = ["5x5 conv", "2x2 pool", "5x5 conv", "2x2 pool", "5x5 conv", "full", "full"]
    for (x0, x1, _), (n0, _, _), op in zip(centres[:-1], centres[1:], ops):
        ax.add_patch(FancyArrowPatch((x1 + 1, 18), (n0 - 1, 18), arrowstyle="->", mutation_scale=10, color="#555"))
        ax.text((x1 + n0) / 2, 21, op, ha="center", fontsize=7.5, color="#444")
    ax.set_xlim(-2, x)
    ax.set_ylim(-16, 48)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("LeNet-5: feature maps drawn to scale (at most 8 maps of a layer shown)")
    return ax
