"""A multilayer perceptron trained entirely with the book's kernels, beside its NumPy twin.

The network is ``Linear -> activation -> ... -> Linear -> softmax + cross-entropy``,
trained by plain minibatch SGD.  :class:`KernelMLP` keeps every weight,
gradient and activation on the device and launches
``fully_connected.cu``, ``activations.cu``, ``softmax.cu`` and ``sgd.cu``;
:class:`NumpyMLP` does the same arithmetic in float32 NumPy.  Started from the
same parameters (:func:`init_params`) and fed the same minibatches
(:func:`epoch_batches`), the two follow the same path up to float32 rounding.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..dense import activations, fully_connected, sgd, softmax
from ..runtime import empty, queued, to_device

#: The fastest correct kernels for training the digits network on a GPU, as ``perceptrons_mlp.json`` measured
#: them on the digits-sized dense layer (128 x 64 -> 64): the tiled forward (version 3); for the two backward
#: products versions 4 and 5, as fast as the GEMM chapter's kernels (versions 8 and 9) at this size, with no
#: transposed copies.  At 4096 x 1024 -> 1024 the GEMM is five times faster: ``forward="gemm"`` there.  The
#: default of :class:`KernelMLP` is the teaching version, which is also the cheapest on the CPU emulator.
FASTEST = {"forward": "tiled"}


def init_params(sizes, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """(W, b) per layer: He-normal weights (variance 2 / fan_in, suited to ReLU), zero biases, float32."""
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        W = (rng.standard_normal((fan_out, fan_in)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        params.append((W, np.zeros(fan_out, np.float32)))
    return params


def load_digits_split(test_size: float = 0.2, seed: int = 0):
    """scikit-learn's 8x8 handwritten digits: pixels scaled to [0, 1], a stratified train/test split.

    Returns ``(X_train, X_test, y_train, y_test)``: float32 ``(n, 64)`` and int32 labels.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    X = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    return train_test_split(X, y, test_size=test_size, random_state=seed, stratify=y)


def epoch_batches(n: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The minibatches of one epoch: a fresh shuffle, cut into consecutive slices."""
    order = rng.permutation(n)
    return [order[s : s + batch_size] for s in range(0, n, batch_size)]


class NumpyMLP:
    """The reference network in float32 NumPy, layer by layer as the kernels do it."""

    def __init__(self, params, activation: str = "relu"):
        self.params = [(W.copy(), b.copy()) for W, b in params]
        self.activation = activation

    def _act(self, z):
        return activations.forward_reference(self.activation, z).astype(np.float32)

    def logits(self, X) -> np.ndarray:
        h = np.asarray(X, np.float32)
        for layer, (W, b) in enumerate(self.params):
            h = h @ W.T + b
            if layer < len(self.params) - 1:
                h = self._act(h)
        return h

    def train_step(self, X, labels, learning_rate: float) -> tuple[float, np.ndarray]:
        """One SGD step on a minibatch; returns (mean loss, predicted classes)."""
        inputs, saved = [], []
        h = np.asarray(X, np.float32)
        for layer, (W, b) in enumerate(self.params):
            inputs.append(h)
            z = h @ W.T + b
            if layer < len(self.params) - 1:
                h = self._act(z)
                saved.append(z if activations.SAVES[self.activation] == "input" else h)
            else:
                h = z
        loss = softmax.cross_entropy_reference(h, labels)
        grad = softmax.cross_entropy_backward_reference(h, labels).astype(np.float32)
        predictions = h.argmax(axis=1)
        for layer in reversed(range(len(self.params))):
            W, b = self.params[layer]
            dW = grad.T @ inputs[layer]
            db = grad.sum(axis=0)
            if layer > 0:
                grad = grad @ W
                grad = activations.backward_reference(self.activation, saved[layer - 1], grad).astype(np.float32)
            W -= np.float32(learning_rate) * dW
            b -= np.float32(learning_rate) * db
        return float(loss.mean()), predictions

    def parameters(self):
        return [(W.copy(), b.copy()) for W, b in self.params]


class KernelMLP:
    """The same network with every step a kernel launch; parameters and activations live on the device.

    Per training step, for L layers: L forward and L - 1 activation launches,
    the loss and its gradient (2), L weight, L bias and L - 1 input gradients,
    L - 1 activation gradients and 2 L updates.
    """

    def __init__(self, params, activation: str = "relu", forward: str = "naive"):
        if forward not in fully_connected.FORWARDS:
            raise ValueError(f"forward must be one of {', '.join(fully_connected.FORWARDS)}, got {forward!r}")
        self.activation = activation
        self.forward_kernel = fully_connected.FORWARDS[forward]
        # "gemm": all three products of every dense layer on the GEMM chapter's kernels, with the transposes
        # they need kept in buffers of this network.
        self.on_gemm = forward == "gemm"
        self.weights = [to_device(W) for W, _ in params]
        self.biases = [to_device(b) for _, b in params]
        self.weight_grads = [empty(W.shape) for W, _ in params]
        self.bias_grads = [empty(b.shape) for _, b in params]
        self.sizes = [params[0][0].shape[1]] + [W.shape[0] for W, _ in params]
        self._buffers: dict[int, dict] = {}
        self._transposes: dict[tuple, object] = {}

    def _transposed(self, name: str, layer: int, shape) -> object:
        """The device buffer a GEMM-based layer transposes into, allocated once per layer and shape."""
        key = (name, layer, tuple(shape))
        if key not in self._transposes:
            self._transposes[key] = empty(tuple(shape))
        return self._transposes[key]

    def _batch_buffers(self, n: int) -> dict:
        """Activation buffers for a batch of n samples, allocated once per batch size."""
        if n not in self._buffers:
            L = len(self.weights)
            self._buffers[n] = {
                "z": [empty((n, s)) for s in self.sizes[1:]],  # pre-activations
                "h": [empty((n, s)) for s in self.sizes[1:-1]],  # activations of the hidden layers
                "dh": [empty((n, s)) for s in self.sizes[1:-1]],
                "dz": [empty((n, s)) for s in self.sizes[1:]],
                "probs": empty((n, self.sizes[-1])),
                "loss": empty((n,)),
                "L": L,
            }
        return self._buffers[n]

    def _forward(self, X, n: int) -> dict:
        buf = self._batch_buffers(n)
        h = X
        for layer in range(buf["L"]):
            if self.on_gemm:
                fully_connected.forward_gemm(h, self.weights[layer], self.biases[layer], out=buf["z"][layer],
                                             Wt=self._transposed("Wt", layer, self.weights[layer].shape[::-1]))
            else:
                self.forward_kernel(h, self.weights[layer], self.biases[layer], out=buf["z"][layer])
            if layer < buf["L"] - 1:
                h = activations.forward(self.activation, buf["z"][layer], out=buf["h"][layer])
        return buf

    def logits(self, X) -> np.ndarray:
        X = np.ascontiguousarray(X, np.float32)
        buf = self._forward(to_device(X), len(X))
        return buf["z"][-1].get()

    def train_step(self, X, labels, learning_rate: float) -> tuple[float, np.ndarray]:
        """One SGD step on a minibatch; returns (mean loss, predicted classes).

        The launches are queued and waited for once (:func:`kernels.runtime.queued`): at this size waiting
        for each of them would cost more than the kernels take.
        """
        X = to_device(np.ascontiguousarray(X, np.float32))
        labels = to_device(np.ascontiguousarray(labels, np.int32))
        with queued():
            buf = self._launch_step(X, labels, learning_rate)
        loss = buf["loss"].get()
        predictions = buf["probs"].get().argmax(axis=1)
        return float(loss.mean()), predictions

    def _launch_step(self, X, labels, learning_rate: float) -> dict:
        """Every launch of a training step: forward, loss, backward, updates; returns the batch's buffers."""
        n = int(X.shape[0])
        buf = self._forward(X, n)
        L = buf["L"]
        softmax.cross_entropy_forward(buf["z"][-1], labels, probs=buf["probs"], loss=buf["loss"])
        softmax.cross_entropy_backward(buf["probs"], labels, out=buf["dz"][-1])
        for layer in reversed(range(L)):
            layer_input = X if layer == 0 else buf["h"][layer - 1]
            if self.on_gemm:
                fully_connected.backward_weight_gemm(buf["dz"][layer], layer_input, out=self.weight_grads[layer])
            else:
                fully_connected.backward_weight(buf["dz"][layer], layer_input, out=self.weight_grads[layer])
            fully_connected.backward_bias(buf["dz"][layer], out=self.bias_grads[layer])
            if layer > 0:
                backward_input = fully_connected.backward_input_gemm if self.on_gemm else fully_connected.backward_input
                backward_input(buf["dz"][layer], self.weights[layer], out=buf["dh"][layer - 1])
                saved = buf["z"][layer - 1] if activations.SAVES[self.activation] == "input" else buf["h"][layer - 1]
                activations.backward(self.activation, saved, buf["dh"][layer - 1], out=buf["dz"][layer - 1])
        # Update only after every gradient is computed: backward_input above needed the old weights.
        for layer in range(L):
            sgd.sgd_update(self.weights[layer], self.weight_grads[layer], learning_rate)
            sgd.sgd_update(self.biases[layer], self.bias_grads[layer], learning_rate)
        return buf

    def parameters(self):
        return [(W.get(), b.get()) for W, b in zip(self.weights, self.biases)]


@dataclass
class History:
    """Per-epoch curves of one training run."""

    train_loss: list[float] = field(default_factory=list)  # mean minibatch loss over the epoch
    train_accuracy: list[float] = field(default_factory=list)  # on the minibatches, before each step
    test_loss: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # wall time of each epoch


def evaluate(model, X, labels) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of ``model`` on a data set."""
    logits = np.asarray(model.logits(X), np.float64)
    loss = float(softmax.cross_entropy_reference(logits, labels).mean())
    return loss, float((logits.argmax(axis=1) == np.asarray(labels)).mean())


def train(model, X_train, y_train, X_test, y_test, epochs: int = 10, batch_size: int = 128,
          learning_rate: float = 0.5, seed: int = 0, steps_per_epoch: int | None = None,
          progress=None) -> History:
    """Minibatch SGD; the minibatch order depends only on ``seed``, so two models see the same batches.

    ``steps_per_epoch`` cuts epochs short (for tests); ``progress(epoch, history)`` is called after each.
    """
    rng = np.random.default_rng(seed)
    history = History()
    for epoch in range(epochs):
        start = time.perf_counter()
        losses, correct, seen = [], 0, 0
        batches = epoch_batches(len(X_train), batch_size, rng)
        for batch in batches[:steps_per_epoch]:
            loss, predictions = model.train_step(X_train[batch], y_train[batch], learning_rate)
            losses.append(loss * len(batch))
            correct += int((predictions == y_train[batch]).sum())
            seen += len(batch)
        test_loss, test_accuracy = evaluate(model, X_test, y_test)
        history.train_loss.append(sum(losses) / seen)
        history.train_accuracy.append(correct / seen)
        history.test_loss.append(test_loss)
        history.test_accuracy.append(test_accuracy)
        history.seconds.append(time.perf_counter() - start)
        if progress is not None:
            progress(epoch, history)
    return history
