"""Inputs of the large-margin softmax page's checks: a layer's features, weights and labels.

The layer has kinks where ``m θ`` crosses a multiple of π (``k`` steps there); a gradient
checked by central differences across one is meaningless, so the checks draw their inputs
away from them.
"""

from __future__ import annotations

import numpy as np

from kernels.lsoftmax import lsoftmax as L


def layer_data(N: int, C: int, D: int, seed: int):
    """``N`` features of dimension ``D`` (shifted off zero), ``C`` class weights and labels, the first label 0 and
    the last ``C - 1``."""
    r = np.random.default_rng(seed)
    X = (r.standard_normal((N, D)) + 0.3).astype(np.float32)
    W = r.standard_normal((C, D)).astype(np.float32)
    labels = r.integers(0, C, N).astype(np.int32)
    labels[0], labels[-1] = 0, C - 1
    return X, W, labels


def away_from_kinks(N: int, C: int, D: int, m: int, seed: int):
    """:func:`layer_data` of the first seed from ``seed`` on (of 50) whose true-class cosines all stay 0.01 away from
    the kinks ``cos(k π / m)``; None if none does."""
    for s in range(seed, seed + 50):
        X, W, labels = layer_data(N, C, D, s)
        b, a = L.norms(X, W, labels)
        c = L.cosine((X.astype(np.float64) * W[labels]).sum(axis=1), a, b)
        if m == 1 or np.abs(c[:, None] - np.cos(np.arange(1, m) * np.pi / m)).min() > 1e-2:
            return X, W, labels
    return None
