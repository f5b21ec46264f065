"""Convolution forward as unroll + GEMM and as implicit GEMM (kernels/conv/conv2d_gemm.cu) against float64 references."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.conv import conv2d_gemm as cg

# (N, C, H, W, M, K, pad, stride): the chapter's example (M=2 maps of 2x2 from 3 maps of 3x3),
# batch 1, odd channel counts, M not a multiple of 64 and above it, padding, stride 2, 1x1 filters.
SHAPES = [(1, 3, 3, 3, 2, 2, 0, 1), (2, 5, 9, 7, 6, 3, 1, 1), (3, 4, 11, 10, 5, 3, 0, 2), (1, 1, 5, 5, 1, 1, 0, 1),
          (2, 7, 8, 9, 70, 5, 2, 1), (4, 3, 6, 6, 3, 3, 1, 2), (1, 16, 12, 12, 8, 1, 0, 1), (2, 3, 15, 14, 9, 7, 3, 2)]


def layer(shape, seed=0):
    N, C, H, W, M, K, pad, stride = shape
    rng = np.random.default_rng(seed + sum(shape))
    X = (rng.standard_normal((N, C, H, W)) + 0.5).astype(np.float32)
    Wt = rng.standard_normal((M, C, K, K)).astype(np.float32)
    return X, Wt, pad, stride


def assert_conv(Y, X, Wt, pad, stride):
    ref = cg.reference(X, Wt, pad, stride)
    scale = cg.reference(np.abs(X), np.abs(Wt), pad, stride)
    assert Y.shape == ref.shape
    assert np.isfinite(Y).all(), "some outputs were never written (still NaN)"
    err = np.abs(Y - ref) / (scale + 1e-30)
    assert err.max() < 1e-5, f"worst relative error {err.max():.2e}"


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_references_agree(shape):
    X, Wt, pad, stride = layer(shape)
    np.testing.assert_allclose(cg.reference(X, Wt, pad, stride), cg.direct_reference(X, Wt, pad, stride), rtol=1e-12, atol=1e-9)


@pytest.mark.backend
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("version", list(cg.ANY_FILTER))
def test_conv_forward(backend, version, shape):
    X, Wt, pad, stride = layer(shape)
    assert_conv(cg.ANY_FILTER[version].launcher(X, Wt, pad, stride), X, Wt, pad, stride)


@pytest.mark.backend
def test_unroll_gemm_one_sample_at_a_time(backend):
    """A workspace of one sample (the smallest memory) gives the same result."""
    X, Wt, pad, stride = layer((3, 4, 9, 9, 10, 3, 1, 1))
    assert_conv(cg.conv2d_unroll_gemm(X, Wt, pad, stride, chunk=1), X, Wt, pad, stride)
    assert_conv(cg.conv2d_unroll_gemm(X, Wt, pad, stride, chunk=2), X, Wt, pad, stride)  # a last, smaller chunk


@pytest.mark.backend
@pytest.mark.parametrize("config", [{"IG_BK": 8}, {"IG_BM": 128, "IG_BK": 8},
                                    {"IG_BN": 256, "IG_BK": 8, "IG_NQ": 4, "IG_MIN_BLOCKS": 2},
                                    {"IG_NQ": 4, "IG_MIN_BLOCKS": 4}], ids=str)
def test_implicit_gemm_configurations(backend, config):
    X, Wt, pad, stride = layer((2, 5, 9, 11, 70, 3, 1, 1))
    assert_conv(cg.conv2d_implicit_gemm(X, Wt, pad, stride, config=config), X, Wt, pad, stride)


def test_worked_example_is_one_matrix_product():
    """C=3, M=2, 3x3 inputs, 2x2 filters: Y (2 x 4) = Wmat (2 x 12) times U (12 x 4)."""
    from kernels.conv import im2col

    X, Wt, _, _ = layer(SHAPES[0])
    U = im2col.unroll_sequential(X[0], 2)
    Wmat = Wt.reshape(2, 12)
    np.testing.assert_allclose((Wmat.astype(np.float64) @ U).reshape(2, 2, 2), cg.direct_reference(X, Wt)[0], rtol=1e-12)


def test_implicit_gemm_limits():
    X = np.zeros((1, 1, 12, 12), np.float32)
    with pytest.raises(ValueError, match="too large"):
        cg.conv2d_implicit_gemm(X, np.zeros((1, 1, 9, 9), np.float32))
    with pytest.raises(ValueError, match="tap table"):
        cg.conv2d_implicit_gemm(np.zeros((1, 500, 4, 4), np.float32), np.zeros((1, 500, 3, 3), np.float32))


def test_filters_must_match_channels():
    with pytest.raises(ValueError, match="do not match"):
        cg.reference(np.zeros((1, 3, 5, 5)), np.zeros((2, 4, 3, 3)))


@pytest.mark.backend
def test_unroll_gemm_wide_tiles(backend):
    """The 64x256 SGEMM tile (8x16 results per thread) the benchmark also tries."""
    X, Wt, pad, stride = layer((2, 5, 17, 19, 70, 3, 1, 1))
    config = {"WT_BN": 256, "WT_NQ": 4, "WT_MIN_BLOCKS": 2}
    assert_conv(cg.conv2d_unroll_gemm(X, Wt, pad, stride, config=config), X, Wt, pad, stride)


# 3x3 filters at stride 1, for Winograd's F(4x4, 3x3): output sizes that are and are not multiples of the
# 4x4 tile, padding 0 to 2, M past one 64-row GEMM tile, one channel; as many output maps as input maps
# (the transformed inputs and products then have one shape), one map of one tile (all three have one),
# and rows of whole tiles (stored four floats at a time) with a last row of tiles cut short.
WINOGRAD_SHAPES = [(2, 5, 9, 7, 6, 3, 1, 1), (1, 3, 6, 6, 2, 3, 0, 1), (2, 7, 10, 13, 70, 3, 1, 1),
                   (3, 1, 5, 4, 3, 3, 2, 1), (1, 4, 3, 3, 5, 3, 0, 1), (2, 8, 10, 10, 8, 3, 1, 1),
                   (1, 1, 4, 4, 1, 3, 0, 1), (2, 3, 7, 8, 5, 3, 1, 1)]


@pytest.mark.parametrize("shape", WINOGRAD_SHAPES, ids=str)
def test_winograd_in_float64_is_the_convolution(shape):
    """The transform matrices and the 36 products, in float64: the direct sum up to rounding."""
    X, Wt, pad, _ = layer(shape)
    np.testing.assert_allclose(cg.winograd_reference(X, Wt, pad), cg.direct_reference(X, Wt, pad), rtol=0, atol=1e-11)


@pytest.mark.backend
@pytest.mark.parametrize("shape", WINOGRAD_SHAPES, ids=str)
def test_winograd_forward(backend, shape):
    X, Wt, pad, stride = layer(shape)
    assert_conv(cg.conv2d_winograd(X, Wt, pad, stride), X, Wt, pad, stride)


def test_winograd_takes_3x3_filters_at_stride_1_only():
    X = np.zeros((1, 2, 8, 8), np.float32)
    with pytest.raises(ValueError, match="3x3 filters at stride 1, not 5x5 at stride 1"):
        cg.conv2d_winograd(X, np.zeros((1, 2, 5, 5), np.float32))
    with pytest.raises(ValueError, match="not 3x3 at stride 2"):
        cg.conv2d_winograd(X, np.zeros((1, 2, 3, 3), np.float32), 1, 2)
