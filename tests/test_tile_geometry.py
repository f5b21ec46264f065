"""The book's mapping pictures: the geometry behind them (book.tile_geometry) and what the drawings show
(book.figures).  No kernel runs: the index formulas are checked to tile their outputs exactly, with the
kernels' own tile sizes, and the drawings to draw those regions."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from book import figures  # noqa: E402
from book.tile_geometry import (  # noqa: E402
    capsule_warp_stores, capsule_warp_weight_loads, conv_tiled_block, cuda_defines, sgemm_tiling)
from kernels.capsules import capsule_prediction  # noqa: E402
from kernels.conv import conv2d, conv2d_gemm, im2col  # noqa: E402
from kernels.gemm import sgemm  # noqa: E402
from kernels.runtime.versions import versions  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --------------------------------------------------------------------------- tiled convolution

CONV_SHAPES = [(32, 32, 5), (14, 14, 5), (20, 37, 3), (9, 9, 1), (40, 24, 7)]


def _cells(row0, col0, rows, cols) -> set[tuple[int, int]]:
    return {(r, c) for r in range(row0, row0 + rows) for c in range(col0, col0 + cols)}


@pytest.mark.parametrize("H,W,K", CONV_SHAPES)
def test_every_conv_tile_loads_exactly_the_windows_of_its_outputs(H, W, K):
    T = conv2d.TILE_WIDTH
    H_grid, W_grid = conv2d.tile_grid(H - K + 1, W - K + 1)
    for tile in range(H_grid * W_grid):
        t = conv_tiled_block(tile, H, W, K)
        assert t.input[2:] == (T + K - 1, T + K - 1)
        h0, w0 = t.output[:2]
        windows = set()
        for r in range(T):
            for c in range(T):
                windows |= _cells(h0 + r, w0 + c, K, K)
        assert windows == _cells(*t.input)
        # the part loaded from the map is the input tile cut at the map's edge; the rest is zero-filled
        assert _cells(*t.loaded) == {(r, c) for r, c in _cells(*t.input) if r < H and c < W}
        assert _cells(*t.written) == {(r, c) for r, c in _cells(*t.output) if r <= H - K and c <= W - K}
    # what the launcher asks for: the input tile and one K x K filter, in floats
    extent = T + K - 1
    assert conv2d.launch_config("tiled", 1, 1, H, W, 1, K)[2] == 4 * (extent * extent + K * K)


def test_conv_loads_per_thread_follow_the_strided_loop():
    T, K = conv2d.TILE_WIDTH, 5
    extent = T + K - 1
    counts = [sum(1 for i in range(ty, extent, T) for j in range(tx, extent, T)) for ty in range(T) for tx in range(T)]
    assert sum(counts) == extent * extent
    assert conv_tiled_block(0, 32, 32, K).loads_per_thread == (min(counts), max(counts))


def test_conv_tile_rejects_bad_arguments():
    with pytest.raises(ValueError, match="tile"):
        conv_tiled_block(4, 32, 32, 5)  # a 28 x 28 output has 2 x 2 tiles
    with pytest.raises(ValueError, match="K"):
        conv_tiled_block(0, 4, 4, 5)


def _patches(ax, face):
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_fill() and p.get_facecolor() == to_rgba(face)]


def test_conv_drawing_draws_the_halo_tile_and_the_output_tile():
    K = 5
    fig, drawn = figures.draw_conv_tiles(32, 32, K)
    assert [t.output[:2] for t in drawn] == [(0, 0), (16, 16)]  # the first and the last tile
    for ax, t in zip(fig.axes, drawn):
        (halo,) = _patches(ax, figures._HALO)
        (tile,) = _patches(ax, figures._TILE)
        assert (halo.get_y(), halo.get_x(), halo.get_height(), halo.get_width()) == t.input
        assert (tile.get_y(), tile.get_x(), tile.get_height(), tile.get_width()) == t.output
        assert halo.get_width() == conv2d.TILE_WIDTH + K - 1


# --------------------------------------------------------------------------- the SGEMM ladder

LADDER = list(versions(sgemm.KERNELS))


@pytest.mark.parametrize("name", LADDER)
def test_sgemm_thread_tiles_cover_the_block_tile_exactly(name):
    t = sgemm_tiling(name)
    assert t.owner.shape == (t.block_m, t.block_n)
    assert (t.owner >= 0).all(), "an element of the block's tile that no thread computes"
    counts = np.bincount(t.owner.ravel(), minlength=t.threads)
    tm, tn = t.thread_tile
    assert len(counts) == t.threads and (counts == tm * tn).all()
    assert t.threads * tm * tn == t.block_m * t.block_n


@pytest.mark.parametrize("name", LADDER[:-1])
def test_sgemm_tiling_agrees_with_the_version_record(name):
    """Threads per block and the tile of C are the ones the launch record gives the grid for."""
    t = sgemm_tiling(name)
    launch = sgemm.KERNELS[f"sgemm_{name}"].launch({"M": 1000, "N": 700, "K": 64})
    assert int(np.prod(launch.block)) == t.threads
    assert launch.grid[:2] == (-(-700 // t.block_n), -(-1000 // t.block_m))


def test_sgemm_tile_sizes_are_read_from_the_kernel_source():
    d4, d5, d6 = (cuda_defines(sgemm.KERNELS[k].source) for k in ("sgemm_blocktile_1d", "sgemm_blocktile_2d",
                                                                  "sgemm_vectorized"))
    assert (d4["BT1_BM"], d4["BT1_BN"]) == sgemm.BT1[:2]
    assert (d5["BT2_BM"], d5["BT2_BN"]) == (d6["VEC_BM"], d6["VEC_BN"]) == sgemm.BT2[:2]
    assert cuda_defines(sgemm.KERNELS["sgemm_shared_tiled"].source)["TILE"] == sgemm.TILE
    assert sgemm_tiling("blocktile_1d").thread_tile == (d4["BT1_TM"], 1)
    assert sgemm_tiling("blocktile_1d").k_step == d4["BT1_BK"]
    assert sgemm_tiling("blocktile_2d").thread_tile == (d5["BT2_TM"], d5["BT2_TN"])
    assert sgemm_tiling("vectorized").k_step == d6["VEC_BK"]
    assert cuda_defines("#define A 8\n#define B (A * 2)\n  #define C 3\n") == {"A": 8}


def test_sgemm_warps_own_the_pieces_the_kernel_comments_describe():
    naive, coalesced = sgemm_tiling("naive"), sgemm_tiling("coalesced")
    assert (naive.owner[:, 0] // 32 == 0).all()  # version 1: warp 0 runs down a column of C
    assert (coalesced.owner[0, :] // 32 == 0).all()  # version 2: along a row
    warp = sgemm_tiling("warptile")
    nq = sgemm.WARPTILE_DEFAULT["WT_NQ"]
    for w in range(warp.threads // 32):
        rows, cols = np.nonzero(warp.owner // 32 == w)
        assert rows.max() - rows.min() + 1 == 64 and cols.max() - cols.min() + 1 == 16 * nq
    rows, cols = warp.elements_of(0)  # lane 0: 4 x 4 pieces 32 rows and 16 columns apart
    assert sorted(set(rows.tolist())) == [0, 1, 2, 3, 32, 33, 34, 35]
    assert sorted(set(cols.tolist())) == [c + 16 * g for g in range(nq) for c in range(4)]


def test_sgemm_picture_follows_a_change_of_the_kernels_tile(monkeypatch):
    monkeypatch.setitem(sgemm.WARPTILE_DEFAULT, "WT_NQ", 2)
    t = sgemm_tiling("warptile")
    assert t.threads == sgemm.warptile_threads() == 256 and t.thread_tile == (8, 8)
    assert (t.owner >= 0).all()


def test_sgemm_drawing_shows_the_thread_tile_and_the_k_slices():
    t = sgemm_tiling("blocktile_2d")
    fig, ax = plt.subplots()
    figures.draw_sgemm_tiling(ax, t)
    image = ax.images[0].get_array()
    black = (image[..., :3] == 0).all(axis=-1)
    assert black.sum() == t.thread_tile[0] * t.thread_tile[1]
    assert set(zip(*np.nonzero(black))) == set(zip(*t.elements_of(0)))
    slices = _patches(ax, figures.SLICE_COLOUR)
    assert sorted((p.get_height(), p.get_width()) for p in slices) == sorted([(t.block_m, t.k_step), (t.k_step, t.block_n)])


def test_sgemm_tiling_rejects_unknown_versions():
    with pytest.raises(ValueError, match="name must be one of"):
        sgemm_tiling("fastest")


# --------------------------------------------------------------------------- im2col beside the filter matrix


def test_unrolled_product_is_the_convolution_and_shows_u():
    x = np.arange(1, 28, dtype=np.float32).reshape(3, 3, 3)
    filters = np.random.default_rng(0).integers(-2, 3, size=(2, 3, 2, 2)).astype(np.float32)
    fig, (Wmat, U, Y) = figures.draw_unrolled_product(x, filters)
    np.testing.assert_array_equal(U, im2col.reference(x[None], 2)[0])
    np.testing.assert_array_equal(Y, conv2d_gemm.direct_reference(x[None], filters)[0].reshape(2, 4))
    assert Wmat.shape == (2, U.shape[0])  # W's columns line up with U's rows
    shown = {t.get_text() for t in fig.axes[0].texts}
    assert {f"{v:g}" for v in U.ravel()} <= shown and {f"{v:g}" for v in Y.ravel()} <= shown


def test_unrolled_product_rejects_filters_of_another_depth():
    with pytest.raises(ValueError, match="filters"):
        figures.draw_unrolled_product(np.zeros((3, 3, 3)), np.zeros((2, 4, 2, 2)))


# --------------------------------------------------------------------------- capsule prediction, versions 3 and 4

DIGITCAPS_OUT = (10, 16)


def test_v3_stores_are_strided_and_v4_stores_contiguous():
    per = capsule_prediction.CAPS_OUTS_PER_THREAD
    v3, v4 = capsule_warp_stores(3, *DIGITCAPS_OUT), capsule_warp_stores(4, *DIGITCAPS_OUT)
    assert len(v3) == per and len(v4) == 1
    for s, store in enumerate(v3):  # one 4-byte value per lane, lanes 4 * per bytes apart
        assert store.width == 4 and (np.diff(store.start) == 4 * per).all() and store.start[0] == 4 * s
        assert len(store.bytes_touched()) == 128 and len(store.sectors()) == 16
    (store,) = v4
    assert store.width == 16 and store.bytes_touched() == set(range(512)) and len(store.sectors()) == 16
    # the same bytes in the end: four strided stores or one contiguous one
    assert set().union(*(a.bytes_touched() for a in v3)) == store.bytes_touched()


def test_capsule_weight_loads_cover_each_lanes_rows():
    in_dim = 8
    v3, v4 = capsule_warp_weight_loads(3, in_dim, *DIGITCAPS_OUT), capsule_warp_weight_loads(4, in_dim, *DIGITCAPS_OUT)
    assert len(v3) == 4 * len(v4) == capsule_prediction.CAPS_OUTS_PER_THREAD * in_dim
    per_lane = 4 * capsule_prediction.CAPS_OUTS_PER_THREAD * in_dim  # bytes of W a lane reads
    for loads in (v3, v4):
        assert all((np.diff(a.start) == per_lane).all() for a in loads)
        assert set().union(*(a.bytes_touched() for a in loads)) == set(range(32 * per_lane))
    with pytest.raises(ValueError, match="multiple of 4"):
        capsule_warp_weight_loads(4, 6, *DIGITCAPS_OUT)


def test_a_short_row_leaves_the_warp_to_two_samples():
    """ROW = 64 outputs: 16 threads per row of the block, so the first warp's first 16 lanes store the first sample."""
    (store,) = capsule_warp_stores(4, 4, 16)
    assert capsule_prediction.register_block_shape(4, 16)[0] == 16
    assert store.bytes_touched() == set(range(256))


def test_capsule_drawing_has_the_stores_and_loads_of_both_versions():
    fig, (stores, loads) = figures.draw_capsule_access_patterns(8, *DIGITCAPS_OUT)
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert [lab for lab in labels if lab.startswith("v")] == ["v3 out[0]", "v3 out[1]", "v3 out[2]", "v3 out[3]", "v4 float4 out"]
    assert "16 sectors for 512 B" in labels and labels.count("16 sectors for 128 B") == 4
    assert fig.get_size_inches()[0] <= 9.5
