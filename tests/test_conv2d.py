"""The forward convolution kernels of kernels/conv/conv2d.cu against their NumPy references, on the current backend."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.conv import conv2d

pytestmark = pytest.mark.backend

# (N, C, H, W, M, K): 1x1 filters, odd sizes, batch 1, channel and map counts that are no multiple of
# CONV_MAPS or of a tile, outputs smaller than, equal to and past one TILE_WIDTH tile, LeNet's C3.
SHAPES = [
    (1, 1, 5, 5, 1, 1),
    (2, 3, 7, 6, 4, 3),
    (1, 5, 19, 21, 7, 5),
    (3, 2, 20, 20, 9, 5),   # a 16 x 16 output: exactly one tile
    (1, 6, 14, 14, 16, 5),  # LeNet's C3 at batch 1
    (2, 3, 33, 17, 10, 4),  # an even filter, an output two tiles tall and one wide
    (1, 2, 20, 18, 3, 17),  # a filter larger than a tile
]


def data(N, C, H, W, M, K, seed=0):
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((N, C, H, W)) + 0.3).astype(np.float32)
    Wf = (rng.standard_normal((M, C, K, K)) + 0.1).astype(np.float32)
    b = rng.standard_normal(M).astype(np.float32)
    return X, Wf, b


def assert_close_conv(got, X, Wf, b):
    """A float32 sum of C K K products: within a few ulps of the sum of their magnitudes."""
    expected = conv2d.forward_reference(X, Wf, b)
    scale = conv2d.forward_reference(np.abs(X), np.abs(Wf), np.abs(b))
    assert got.shape == expected.shape
    err = np.abs(np.asarray(got, np.float64) - expected)
    assert np.all(err <= 1e-5 * scale + 1e-6), f"max error {err.max()} at {np.unravel_index(err.argmax(), err.shape)}"


def assert_close_fused(got, X, Wf, b, activation):
    """Convolution, bias, activation and 2 x 2 max pooling: within the convolution's bound (the
    activations and the maximum do not widen it)."""
    expected = conv2d.fused_reference(X, Wf, b, activation)
    assert got.shape == expected.shape
    scale = conv2d.fused_reference(np.abs(X), np.abs(Wf), np.abs(b), "none")
    np.testing.assert_array_less(np.abs(got - expected), 1e-5 * scale + 1e-6)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("version", list(conv2d.FORWARDS))
def test_forward_versions(backend, version, shape):
    X, Wf, b = data(*shape)
    assert_close_conv(conv2d.FORWARDS[version](X, Wf, b), X, Wf, b)


@pytest.mark.parametrize("shape", [(1, 1, 6, 6, 1, 3), (2, 3, 9, 8, 5, 3), (1, 6, 14, 14, 16, 5), (3, 1, 32, 32, 6, 5)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("activation", list(conv2d.ACTIVATIONS))
def test_fused_conv_act_pool(backend, activation, shape):
    X, Wf, b = data(*shape, seed=2)
    assert_close_fused(conv2d.forward_fused(X, Wf, b, activation), X, Wf, b, activation)


# Version 7 (conv2d_forward_whole_sample) has an unrolled path (K = 3 or 5 and an even W) and a general
# one; these shapes take both, with odd output sizes (a quad past the last row or column), map counts
# that are no multiple of 2 or of SAMPLE_BLOCK_MAPS (a block with one map, a pair with one map), batch 1,
# and more work items than threads (C1: 3 pairs x 196 quads > SAMPLE_MAX_THREADS).
WHOLE_SAMPLE_SHAPES = [
    (1, 6, 14, 14, 16, 5),  # LeNet's C3 at batch 1: unrolled, 5 x 5
    (2, 3, 11, 12, 9, 5),   # unrolled 5 x 5, a 7 x 8 output, 9 maps: the second block has one map
    (3, 5, 9, 10, 7, 3),    # unrolled 3 x 3, a 7 x 8 output, 7 maps: the last pair has one map
    (2, 1, 32, 32, 6, 5),   # LeNet's C1: 588 work items per block, the threads loop
    (1, 4, 9, 9, 5, 5),     # an odd W: the general path with K = 5
    (1, 7, 6, 7, 11, 2),    # an even filter: the general path
    (2, 3, 8, 8, 4, 1),     # 1 x 1 filters
]


@pytest.mark.parametrize("shape", WHOLE_SAMPLE_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_whole_sample(backend, shape):
    X, Wf, b = data(*shape, seed=3)
    assert_close_conv(conv2d.forward_whole_sample(X, Wf, b), X, Wf, b)


@pytest.mark.parametrize("shape", [(1, 6, 14, 14, 16, 5), (2, 3, 11, 12, 9, 5), (3, 1, 32, 32, 6, 5), (1, 2, 9, 8, 3, 3),
                                   (1, 4, 9, 9, 5, 5)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("activation", list(conv2d.ACTIVATIONS))
def test_whole_sample_fused(backend, activation, shape):
    """Version 7 with bias, activation and 2 x 2 max pooling: odd outputs drop their last row or column."""
    X, Wf, b = data(*shape, seed=4)
    assert_close_fused(conv2d.forward_whole_sample_fused(X, Wf, b, activation), X, Wf, b, activation)


def test_whole_sample_writes_only_the_output(backend):
    """The quads past an odd last row and column compute outputs that must not be stored."""
    X, Wf, b = data(2, 3, 11, 12, 9, 5, seed=5)
    out = np.full((2 * 9 * 7 * 8 + 5,), 123.0, np.float32)
    Y = conv2d.forward_whole_sample(X, Wf, b, out=out[: 2 * 9 * 7 * 8])
    assert_close_conv(np.asarray(Y).reshape(2, 9, 7, 8), X, Wf, b)
    assert np.all(out[2 * 9 * 7 * 8 :] == 123.0)


def test_whole_sample_shared_memory_limit(backend):
    X, Wf, b = data(1, 64, 20, 20, 8, 3)  # a sample of 25600 floats: more than 48 KiB
    assert not conv2d.whole_sample_fits(64, 20, 20, 3)
    with pytest.raises(ValueError, match="shared memory"):
        conv2d.forward_whole_sample(X, Wf, b)


def test_sequential_loops_match_the_reference():
    X, Wf, b = data(2, 3, 6, 7, 2, 3)
    np.testing.assert_allclose(conv2d.conv_layer_minibatch(X, Wf, b), conv2d.forward_reference(X, Wf, b), rtol=1e-12)


def test_reference_matches_a_hand_computed_value():
    """One output value written out term by term, as the chapter's worked example does."""
    X = np.arange(3 * 4 * 4, dtype=np.float64).reshape(1, 3, 4, 4)
    Wf = np.arange(2 * 3 * 2 * 2, dtype=np.float64).reshape(2, 3, 2, 2) - 5
    Y = conv2d.forward_reference(X, Wf)
    m, h, w = 1, 2, 1
    by_hand = sum(X[0, c, h + p, w + q] * Wf[m, c, p, q] for c in range(3) for p in range(2) for q in range(2))
    assert Y[0, m, h, w] == by_hand


def test_constant_memory_limit_is_enforced(backend):
    X, Wf, b = data(1, 64, 5, 5, 64, 3)  # 36864 floats > 16384
    with pytest.raises(ValueError, match="constant memory"):
        conv2d.forward_constant(X, Wf, b)


def test_shape_errors():
    X, Wf, b = data(1, 3, 5, 5, 2, 3)
    with pytest.raises(ValueError, match="input maps"):
        conv2d.output_shape(X.shape, (2, 4, 3, 3))
    with pytest.raises(ValueError, match="does not fit"):
        conv2d.output_shape(X.shape, (2, 3, 6, 6))


@pytest.mark.gpu
@pytest.mark.parametrize("version", list(conv2d.FORWARDS))
def test_forward_versions_large_layer_gpu(version):
    """A layer too large for the emulator: 32 input maps, 64 output maps, 3 x 3 filters."""
    X, Wf, b = data(4, 32, 58, 58, 64, 3)
    if version == "constant" and Wf.size > conv2d.CONSTANT_CAPACITY:
        Wf = Wf[:, :16]
        X = np.ascontiguousarray(X[:, :16])
    if version == "whole_sample":  # a sample must fit shared memory: 8 maps of 30 x 30
        X, Wf = np.ascontiguousarray(X[:, :8, :30, :30]), np.ascontiguousarray(Wf[:, :8])
    assert_close_conv(conv2d.FORWARDS[version](X, Wf, b), X, Wf, b)
