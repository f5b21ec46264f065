"""The pictures of how a warp meets memory: the geometry behind them (book.memory_geometry) obeys the rule each
picture teaches, with the kernels' own index expressions, and the drawings (book.memory_figures) say what the
geometry says.  No kernel runs."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from book import memory_figures  # noqa: E402
from book import memory_geometry as geometry  # noqa: E402
from kernels import read_source  # noqa: E402
from kernels.basics import vector_add  # noqa: E402
from kernels.dense import fully_connected, perceptron  # noqa: E402
from kernels.gemm import sgemm  # noqa: E402

TABLES = {**vector_add.KERNELS, **perceptron.KERNELS, **fully_connected.KERNELS, **sgemm.KERNELS}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _texts(fig) -> str:
    return " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))


@pytest.mark.parametrize("kernel,line", geometry.COALESCING_LINES + geometry.BANK_LINES + geometry.COLUMN_SUM_LINES)
def test_the_lines_the_geometry_applies_are_in_the_kernels(kernel, line):
    assert line in TABLES[kernel].source, f"{kernel} no longer has `{line}`: update book/memory_geometry.py"


def test_the_shuffle_loop_is_the_one_in_the_reduction():
    source = read_source("reduction")
    body = source[source.index("__device__ float warp_reduce_sum"):]
    for line in geometry.SHUFFLE_LINES:
        assert line in body[:body.index("}\n")], f"warp_reduce_sum no longer has `{line}`"
    assert geometry.shuffle_offsets() == [16, 8, 4, 2, 1]


# --------------------------------------------------------------------------- coalescing


@pytest.mark.parametrize("block,warp", [(0, 0), (3, 5), (1000, 7)])
def test_a_warp_of_floats_side_by_side_fills_4_sectors_and_of_float4s_16(block, warp):
    floats, quads = geometry.float_load(block, warp), geometry.float4_load(block, warp)
    assert len(floats.sectors()) == 4 and len(floats.bytes_touched()) == 128
    assert len(quads.sectors()) == 16 and len(quads.bytes_touched()) == 512
    # every byte of every sector touched is used
    assert len(floats.bytes_touched()) == 32 * len(floats.sectors())
    assert len(quads.bytes_touched()) == 32 * len(quads.sectors())


@pytest.mark.parametrize("d,sectors", [(1, 4), (2, 8), (4, 16), (8, 32), (9, 32), (784, 32)])
def test_a_warp_reading_a_column_touches_a_sector_per_lane_once_rows_are_8_floats_long(d, sectors):
    access = geometry.row_per_thread_load(d, j=d - 1, block=2, warp=3)
    assert len(access.sectors()) == sectors
    assert len(access.bytes_touched()) == 128


def test_the_float4_loads_of_one_thread_lie_a_block_of_float4s_apart():
    first, second = geometry.float4_load(u=0), geometry.float4_load(u=1)
    threads = vector_add.KERNELS["vector_add_float4"].launch({"n": 1 << 20}).block[0]
    assert (second.start - first.start == 16 * threads).all()
    with pytest.raises(ValueError, match="u must be"):
        geometry.float4_load(u=vector_add.UNROLL)


def test_the_coalescing_picture_names_the_sectors_of_each_load():
    fig, accesses = memory_figures.draw_coalescing(d=8)
    text = _texts(fig)
    for count, used in ((4, 128), (32, 128), (16, 512)):
        assert f"{count} sectors for {used} B" in text
    assert fig.axes[0].get_xlabel().startswith("byte offset")
    assert [a.label for a in accesses] == ["a[i]", "x[i * 8 + j]", "a4[i] (float4)"]


# --------------------------------------------------------------------------- shared-memory banks


def test_the_kernels_pad_their_tiles_by_one_float():
    assert geometry.transpose_column_read(padded=True).pitch == sgemm.TRANSPOSE_TILE + 1
    tile = geometry.fc_weight_read(padded=True)
    assert tile.pitch == tile.cols + 1 == fully_connected.FC_TILE + 1


@pytest.mark.parametrize("column", [0, 5, 31])
def test_a_column_of_a_32_wide_tile_is_a_32_way_conflict_and_padding_removes_it(column):
    plain, padded = geometry.transpose_column_read(False, column), geometry.transpose_column_read(True, column)
    assert plain.ways == 32 and len(set(plain.banks.tolist())) == 1
    assert padded.ways == 1 and len(set(padded.banks.tolist())) == 32


@pytest.mark.parametrize("kk", [0, 7, 15])
def test_fc_tiled_reads_a_column_of_ws_in_8_passes_without_padding_and_1_with_it(kk):
    plain, padded = geometry.fc_weight_read(False, kk), geometry.fc_weight_read(True, kk)
    # two rows of threads read the same 16 words: a broadcast, counted once
    assert len(set(plain.words.tolist())) == 16
    assert plain.ways == 8 and sorted(set(plain.banks.tolist())) == sorted({kk % 32, (kk + 16) % 32})
    assert padded.ways == 1


def test_the_tile_shape_is_read_from_the_declaration():
    source = "#define T 8\n__shared__ float a[T][T + 1];\n__shared__ float b[4][T];\n"
    assert geometry.shared_tile_shape(source, "a") == (8, 9)
    assert geometry.shared_tile_shape(source, "b") == (4, 8)
    with pytest.raises(ValueError, match="no declaration"):
        geometry.shared_tile_shape(source, "c")


def test_the_bank_picture_states_each_conflict():
    fig, accesses = memory_figures.draw_bank_conflicts()
    assert [a.ways for a in accesses] == [32, 1, 8, 1]
    text = _texts(fig)
    assert "32-way conflict" in text and "8-way conflict" in text and text.count("no conflict") == 2
    assert all(ax.get_xlabel() == "bank = word % 32" for ax in fig.axes)


# --------------------------------------------------------------------------- the warp shuffle


def test_after_each_shuffle_the_lanes_below_the_offset_hold_each_of_their_values_once():
    steps = geometry.shuffle_down_steps()
    assert [offset for offset, _ in steps] == [0, 16, 8, 4, 2, 1]
    assert (steps[0][1] == np.eye(32, dtype=int)).all()
    for offset, terms in steps[1:]:
        for lane in range(offset):
            expected = np.zeros(32, int)
            expected[lane::offset] = 1  # lanes l, l + o, l + 2o, ...
            assert (terms[lane] == expected).all(), f"offset {offset}, lane {lane}"
            assert terms[lane].sum() == 32 // offset
    assert (steps[-1][1][0] == 1).all(), "lane 0 ends with every value once"


def test_the_lanes_a_step_needs_are_the_ones_the_last_step_left_whole():
    for (previous, _), (offset, _) in zip(geometry.shuffle_down_steps()[1:], geometry.shuffle_down_steps()[2:]):
        read = {lane + offset for lane in range(offset)}  # what lanes below the new offset receive
        assert read <= set(range(previous)), f"offset {offset} reads a lane the offset {previous} left spoilt"
    # a lane past the top gets its own value back: it counts it twice, which is why it is hatched
    assert geometry.shuffle_down_steps()[1][1][31, 31] == 2


def test_the_shuffle_picture_numbers_what_each_used_lane_holds():
    fig, _ = memory_figures.draw_warp_shuffle()
    text = _texts(fig)
    for offset in (16, 8, 4, 2):
        assert f"lanes 0–{offset - 1}: {32 // offset} each" in text
    assert "lane 0: all 32" in text


# --------------------------------------------------------------------------- the perceptron's column sums


@pytest.mark.parametrize("n,k", [(1, 1), (700, 3), (1000, 7), (257, 33)])
def test_the_tree_gives_each_column_a_row_of_blocks_and_each_row_a_thread(n, k):
    tree = geometry.tree_owners(n, k)
    e = np.arange(n * k)
    assert (tree.block_y == e % k).all(), "block (., j) loads column j only"
    assert (tree.block_x * tree.threads_per_block + tree.thread == e // k).all()
    owners = set(zip(tree.block_x.tolist(), tree.block_y.tolist(), tree.thread.tolist()))
    assert len(owners) == n * k, "no thread loads two elements"
    assert tree.grid == (-(-n // tree.threads_per_block), k)
    assert len(tree.warp_load().sectors()) == min(32, -(-(31 * 4 * k + 4) // 32))


@pytest.mark.parametrize("n,k,blocks", [(1000, 3, None), (10_000, 3, 2), (5000, 7, 1), (4099, 5, 3), (300, 256, 1),
                                        (30, 300, 2)])
def test_each_register_sum_of_the_columns_kernel_stays_in_one_column(n, k, blocks):
    owners = geometry.columns_owners(n, k, blocks)
    e = np.arange(n * k)
    assert owners.stride % k == 0 and owners.active % k == 0
    assert (owners.thread < owners.active).all()
    assert (owners.column_added_to == e % k).all(), "an element added into another column's sum"
    slots = set(zip(owners.thread.tolist(), owners.slot.tolist(), owners.pass_.tolist()))
    assert len(slots) == n * k, "an element loaded twice"
    assert len(owners.warp_load().sectors()) == 16


def test_a_stride_that_is_no_multiple_of_k_would_mix_the_columns():
    owners = geometry.columns_owners(10_000, 3, blocks=2)
    wrong_stride = 4 * 2 * owners.threads_per_block  # every thread of the grid, 512: no multiple of 3
    e = np.arange(owners.n * owners.k)
    thread, slot = (e % wrong_stride) // 4, e % 4
    assert ((4 * thread + slot) % 3 != e % 3).any()


def test_the_column_sum_picture_draws_both_passes_with_the_kernels_stride():
    fig, (tree, cols) = memory_figures.draw_column_sums(k=3, n=1000, blocks=2)
    text = _texts(fig)
    assert f"floats {cols.stride:,}–" in text and f"4 × {cols.active:,}" in text
    assert cols.active == 2 * 256 // 3 * 3
    with pytest.raises(ValueError, match="multiple of 4"):
        memory_figures.draw_column_sums(floats=30)
