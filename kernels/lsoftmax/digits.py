"""Training a small network with 2-D features on scikit-learn's digits, with softmax or L-Softmax on top.

The network is ``64 -> 64 (ReLU) -> 2 (features) -> L-Softmax over 10 classes``
(no biases in the last layer, as L-Softmax requires).  The hidden layers and
the optimiser (SGD with momentum) are NumPy; the last layer is a function
``layer(features, W, labels, m, lam) -> (mean loss, dF, dW)``:

* :func:`reference_layer`: the float64 NumPy reference of ``kernels/lsoftmax/lsoftmax.py``;
* :func:`kernel_layer`: the book's kernels (the fused version), float32.

Both compute the same thing (the chapter checks it); the reference is what
trains on the CPU emulator, where a kernel launch costs milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import lsoftmax as L
from ..models.mlp import epoch_batches, load_digits_split

HIDDEN = 64


def reference_layer(features, W, labels, m, lam):
    """Mean loss and its gradients by the float64 reference."""
    loss = float(L.loss_reference(features, W, labels, m, lam).mean())
    dF, dW = L.layer_backward_reference(features, W, labels, m, lam)
    return loss, dF, dW


def kernel_layer(features, W, labels, m, lam):
    """Mean loss and its gradients on the book's kernels (fused forward and backward, GEMMs of the GEMM chapter)."""
    loss, dF, dW = L.layer_gradients(np.ascontiguousarray(features, np.float32), np.ascontiguousarray(W, np.float32),
                                     labels, m, lam, "fused")
    return loss, dF.astype(np.float64), dW.astype(np.float64)


@dataclass
class FeatureNet:
    """x -> relu(x W1 + b1) -> h W2 + b2 = 2-D feature -> L-Softmax weights W (10 x 2)."""

    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: np.ndarray
    W: np.ndarray

    @classmethod
    def create(cls, seed: int = 0, inputs: int = 64, classes: int = 10) -> "FeatureNet":
        rng = np.random.default_rng(seed)
        return cls(rng.standard_normal((inputs, HIDDEN)) * np.sqrt(2 / inputs), np.zeros(HIDDEN),
                   rng.standard_normal((HIDDEN, 2)) * np.sqrt(1 / HIDDEN), np.zeros(2),
                   rng.standard_normal((classes, 2)))

    def features(self, x):
        h = np.maximum(x @ self.W1 + self.b1, 0)
        return h @ self.W2 + self.b2, h

    def params(self):
        return [self.W1, self.b1, self.W2, self.b2, self.W]

    def predict(self, x):
        """The class with the largest plain logit W_j . f (the margin is for training only)."""
        return (self.features(x)[0] @ self.W.T).argmax(axis=1)


@dataclass
class Run:
    """One training run: the network, its margin, and the loss and test accuracy per epoch."""

    m: int
    net: FeatureNet
    losses: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)


def train(m: int, epochs: int = 60, batch: int = 128, lr: float = 0.05, momentum: float = 0.9, seed: int = 0,
          layer=reference_layer, lambda_base: float = 1000.0, lambda_gamma: float = 0.05,
          lambda_power: float = 2.0, lambda_min: float = 0.0) -> Run:
    """Train the 2-D feature network with margin ``m`` (1 = softmax); lambda follows :func:`L.lambda_schedule`."""
    x_train, x_test, y_train, y_test = load_digits_split(seed=seed)
    net = FeatureNet.create(seed)
    velocity = [np.zeros_like(p) for p in net.params()]
    rng = np.random.default_rng(seed)
    run = Run(m, net)
    step = 0
    for _ in range(epochs):
        losses = []
        for idx in epoch_batches(len(x_train), batch, rng):
            x, y = x_train[idx].astype(np.float64), y_train[idx]
            f, h = net.features(x)
            lam = L.lambda_schedule(step, lambda_base, lambda_gamma, lambda_power, lambda_min) if m > 1 else 0.0
            loss, dF, dW = layer(f, net.W, y, m, lam)
            dh = (dF @ net.W2.T) * (h > 0)
            grads = [x.T @ dh, dh.sum(axis=0), h.T @ dF, dF.sum(axis=0), dW]
            for p, v, g in zip(net.params(), velocity, grads):
                v *= momentum
                v -= lr * g
                p += v
            losses.append(loss)
            step += 1
        run.losses.append(float(np.mean(losses)))
        run.accuracy.append(float((net.predict(x_test) == y_test).mean()))
    return run


def test_features(run: Run, seed: int = 0):
    """``(features, labels)`` of the test set under the trained network."""
    _, x_test, _, y_test = load_digits_split(seed=seed)
    return run.net.features(x_test.astype(np.float64))[0], y_test
