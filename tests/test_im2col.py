"""The unroll (im2col) kernel and its references: the worked example of the chapter and general shapes."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.conv import im2col
from kernels.runtime.versions import versions

# (N, C, H, W, K, pad, stride): the chapter's example, channels and sizes that fill no warp evenly,
# batch 1, padding, stride 2, a 1x1 filter, a filter as large as the input.
SHAPES = [(1, 3, 3, 3, 2, 0, 1), (2, 5, 9, 7, 3, 1, 1), (3, 4, 11, 10, 3, 0, 2), (1, 1, 5, 5, 1, 0, 1),
          (2, 7, 8, 9, 5, 2, 1), (1, 2, 6, 6, 6, 0, 1), (4, 3, 13, 6, 3, 1, 2)]


def test_worked_example_shapes():
    """C = 3 maps of 3x3, 2x2 filters: a 12 x 4 unrolled matrix, 16 values per 9 inputs."""
    x = np.arange(27, dtype=np.float32).reshape(3, 3, 3)
    U = im2col.unroll_sequential(x, K=2)
    assert U.shape == (12, 4)
    np.testing.assert_array_equal(U[:4, 0], [0, 1, 3, 4])      # channel 0, output pixel (0, 0)
    np.testing.assert_array_equal(U[4:8, 3], [13, 14, 16, 17])  # channel 1, output pixel (1, 1)
    assert im2col.expansion_ratio(3, 3, 3, 2) == pytest.approx(16 / 9)
    # For large maps the ratio approaches K^2.
    assert 8.5 < im2col.expansion_ratio(64, 224, 224, 3) < 9.0


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_references_agree(shape):
    N, C, H, W, K, pad, stride = shape
    X = np.random.default_rng(0).standard_normal((N, C, H, W)).astype(np.float32)
    U = im2col.reference(X, K, pad, stride)
    for n in range(N):
        np.testing.assert_array_equal(U[n], im2col.unroll_sequential(X[n], K, pad, stride))


@pytest.mark.backend
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("version", list(versions(im2col.KERNELS)))
def test_im2col_kernel(backend, version, shape):
    N, C, H, W, K, pad, stride = shape
    X = (np.random.default_rng(sum(shape)).standard_normal((N, C, H, W)) + 1).astype(np.float32)
    U = versions(im2col.KERNELS)[version].launcher(X, K, pad, stride)
    np.testing.assert_array_equal(U, im2col.reference(X, K, pad, stride))  # a copy: bit-exact


@pytest.mark.backend
@pytest.mark.parametrize("version", list(versions(im2col.KERNELS)))
def test_im2col_chunk_of_samples(backend, version):
    """Unrolling samples n0..n0+count (the memory-bounded path) picks the right samples."""
    X = np.random.default_rng(5).standard_normal((5, 3, 7, 6)).astype(np.float32)
    U = versions(im2col.KERNELS)[version].launcher(X, 3, 1, 1, n0=2, count=2)
    np.testing.assert_array_equal(U, im2col.reference(X[2:4], 3, 1, 1))
    X = np.random.default_rng(6).standard_normal((5, 3, 8, 6)).astype(np.float32)  # 8 x 6 pixels: float4 stores
    U = versions(im2col.KERNELS)[version].launcher(X, 3, 1, 1, n0=1, count=3)
    np.testing.assert_array_equal(U, im2col.reference(X[1:4], 3, 1, 1))
    with pytest.raises(ValueError, match="not within the batch"):
        im2col.im2col_unroll(X, 3, 1, 1, n0=4, count=2)


def test_output_size_rejects_filters_that_do_not_fit():
    with pytest.raises(ValueError, match="does not fit"):
        im2col.output_size(2, 2, 3)
