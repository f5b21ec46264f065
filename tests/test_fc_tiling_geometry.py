"""The tiled dense layer as the MLP chapter teaches it: the geometry of ``fc_forward_tiled`` (book.tile_geometry),
the counts the chapter states, and the picture (book.figures).  No kernel runs: the kernel's index formulas are
applied thread by thread, checked to compute Y = X Wᵀ, and the counts checked against that simulation."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from book import figures  # noqa: E402
from book.tile_geometry import (  # noqa: E402
    FC_TILED_LINES, fc_grid, fc_thread_loads, fc_thread_reads, fc_tile_size, fc_tiled_block, fc_traffic,
    fc_worked_example)
from kernels import read_source
from kernels.dense import fully_connected  # noqa: E402

CHAPTER = Path(__file__).resolve().parent.parent / "book" / "mlp_backprop.md"
SHAPES = [(37, 41, 23), (16, 16, 16), (5, 100, 40), (33, 7, 17)]  # (n, k, m): edges in every direction


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_tile_size_and_index_formulas_are_the_kernels():
    source = read_source("fully_connected")
    assert fc_tile_size() == fully_connected.FC_TILE
    lines = {line.split("//")[0].strip() for line in source.splitlines()}  # code without its comment
    for line in FC_TILED_LINES:
        assert line in lines, f"fc_forward_tiled no longer has {line!r}: update book/tile_geometry.py"


@pytest.mark.parametrize("k", [1, 15, 16, 17, 56, 784])
@pytest.mark.parametrize("tile", [None, 32, 7])
def test_phases_cover_k_exactly(k, tile):
    b = fc_tiled_block(20, k, 20, tile=tile)
    T = b.tile
    assert [c for phase in b.phases for c in phase] == list(range(k))
    assert all(phase.start == p * T and 1 <= len(phase) <= T for p, phase in enumerate(b.phases))
    assert len(b.phases) == fc_traffic(20, k, 20, tile=tile).phases
    width = b.x_strip[3]
    assert width == b.w_strip[3] == len(b.phases) * T and k <= width < k + T


def _simulate(n, k, m, block, T):
    """Run fc_forward_tiled's loops for one block with the geometry's index formulas: what each thread
    copies (in bounds) per phase, and the pairs of global elements each thread multiplies."""
    copied = []  # per phase: ({X cell: copies}, {W cell: copies})
    products = {}  # thread -> [(X cell or None, W cell or None)]
    for k0 in range(0, k, T):
        xs, ws, loads_x, loads_w = {}, {}, {}, {}
        for ty in range(T):
            for tx in range(T):
                (xr, xc), (wr, wc) = fc_thread_loads(block, (tx, ty), k0, T)
                xs[ty, tx] = (xr, xc) if xr < n and xc < k else None  # the bounds check of the kernel
                ws[ty, tx] = (wr, wc) if wr < m and wc < k else None
                for cell, loads in ((xs[ty, tx], loads_x), (ws[ty, tx], loads_w)):
                    if cell is not None:
                        loads[cell] = loads.get(cell, 0) + 1
        copied.append((loads_x, loads_w))
        for ty in range(T):
            for tx in range(T):
                x_cells, w_cells = fc_thread_reads((tx, ty), T)
                products.setdefault((tx, ty), []).extend((xs[a], ws[b]) for a, b in zip(x_cells, w_cells))
    return copied, products


@pytest.mark.parametrize("n,k,m", SHAPES)
def test_every_thread_multiplies_its_row_of_x_by_its_row_of_w(n, k, m):
    T = fc_tile_size()
    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((n, k)), rng.standard_normal((m, k))
    Y = np.zeros((n, m))
    grid_x, grid_y = fc_grid(n, m)
    for bx in range(grid_x):
        for by in range(grid_y):
            b = fc_tiled_block(n, k, m, (bx, by))
            _, products = _simulate(n, k, m, (bx, by), T)
            for (tx, ty), pairs in products.items():
                i, j = b.output[0] + ty, b.output[1] + tx
                if i >= n or j >= m:  # computed, not stored
                    continue
                real = [(x, w) for x, w in pairs if x is not None and w is not None]
                assert [x for x, _ in real] == [(i, c) for c in range(k)]
                assert [w for _, w in real] == [(j, c) for c in range(k)]
                Y[i, j] = sum(X[x] * W[w] for x, w in real)
    np.testing.assert_allclose(Y, X @ W.T, rtol=1e-12)


@pytest.mark.parametrize("n,k,m", SHAPES)
def test_a_block_loads_its_strips_once_each_phase(n, k, m):
    T = fc_tile_size()
    grid_x, grid_y = fc_grid(n, m)
    total = 0
    for bx in range(grid_x):
        for by in range(grid_y):
            b = fc_tiled_block(n, k, m, (bx, by))
            copied, _ = _simulate(n, k, m, (bx, by), T)
            assert len(copied) == len(b.phases)
            for phase, (loads_x, loads_w) in zip(b.phases, copied):
                xr0, _, rows, _ = b.x_strip
                wr0, _, wrows, _ = b.w_strip
                assert set(loads_x) == {(r, c) for r in range(xr0, min(xr0 + rows, n)) for c in phase}
                assert set(loads_w) == {(r, c) for r in range(wr0, min(wr0 + wrows, m)) for c in phase}
                assert set(loads_x.values()) | set(loads_w.values()) == {1}, "an element copied twice in a phase"
                total += len(loads_x) + len(loads_w)
    assert total == fc_traffic(n, k, m).tiled_loads


@pytest.mark.parametrize("n,k,m", SHAPES)
@pytest.mark.parametrize("tile", [None, 32])
def test_counts_per_output_element_follow_the_loops(n, k, m, tile):
    t = fc_traffic(n, k, m, tile=tile)
    T = t.tile
    _, products = _simulate(n, k, m, (0, 0), T)
    (pairs,) = {len(p) for p in products.values()}  # every thread the same number of products
    assert 2 * pairs == t.shared_reads_per_output  # one read of Xs and one of Ws per product
    assert t.tiled_loads_per_output == 2 * len(range(0, k, T))  # one copy into Xs, one into Ws, per phase
    assert t.naive_loads_per_output == 2 * k and t.naive_loads == 2 * n * m * k
    assert t.syncs_per_block == 2 * t.phases and t.shared_floats_per_block == T * T + T * (T + 1)
    assert t.threads_per_block == T * T


def test_worked_example_states_the_computed_counts():
    text = fc_worked_example(fc_traffic(64, 784, 128))
    assert "⌈784 / 16⌉ = 49" in text and "2 × 784 = 1,568" in text and "2 × 49 = 98, 16 times fewer" in text
    assert "= 12,845,056 loads" in text and "64 × 784 × 8 + 128 × 784 × 4 = 802,816, 16 times fewer" in text
    assert "98 per block" in text and "zeros" not in text  # 784 is a whole number of tiles
    padded = fc_worked_example(fc_traffic(64, 784, 128, tile=32))
    assert "25 trips" in padded and "16 columns of the matrices and 16 of zeros" in padded


def test_chapter_states_the_kernels_tile_and_the_answers_follow_from_it():
    text = CHAPTER.read_text()
    assert f"`FC_TILE` = {fc_tile_size()}, a `#define`" in text
    assert "fc_worked_example(fc_traffic(n=64, k=784, m=128))" in text
    answers = text[text.index("2. 784 / 32"):]
    t16, t32 = fc_traffic(64, 784, 128), fc_traffic(64, 784, 128, tile=32)
    assert f"so {t32.phases} phases" in answers
    assert f"2 × {t32.phases} = {t32.tiled_loads_per_output} loads from global memory instead of " \
           f"{t16.tiled_loads_per_output} (against {t16.naive_loads_per_output:,}" in answers
    assert f"{t32.threads_per_block:,} threads" in answers
    assert f"{t32.shared_floats_per_block:,} floats ({4 * t32.shared_floats_per_block:,} bytes)" in answers


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="block"):
        fc_tiled_block(32, 56, 32, (2, 0))  # 32 outputs: blockIdx.x is 0 or 1
    with pytest.raises(ValueError, match="k must be"):
        fc_tiled_block(32, 0, 32)
    with pytest.raises(ValueError, match="n must be"):
        fc_traffic(-1, 8, 8)
    with pytest.raises(ValueError, match="thread"):
        figures.draw_fc_tiling(thread=(fc_tile_size(), 0))


def _filled(ax, face):
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_fill() and p.get_facecolor() == to_rgba(face)]


def _box(p):
    return p.get_y(), p.get_x(), p.get_height(), p.get_width()


def test_drawing_shows_the_block_the_phases_and_the_threads_reads():
    T = fc_tile_size()
    n, k, m, (tx, ty) = 32, 56, 32, (3, 12)
    fig, b = figures.draw_fc_tiling(n, k, m, block=(1, 1), thread=(tx, ty))
    ax = fig.axes[0]
    (tile,) = _filled(ax, figures._TILE)
    assert (tile.get_height(), tile.get_width()) == (T, T)
    phase0 = sorted(_filled(ax, figures._PHASE0), key=lambda p: p.get_x())
    assert [(p.get_height(), p.get_width()) for p in phase0] == [(T, T), (T, T)]
    x_tile, w_tile = phase0  # X's on the left, Wᵀ's above Y
    assert x_tile.get_y() == tile.get_y() and w_tile.get_x() == tile.get_x()  # they line up with the block's tile
    later = [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill() and p.get_linestyle() == "--"]
    assert len(later) == 2 * (len(b.phases) - 1)
    element, w_row, x_row = sorted(_filled(ax, figures._READ), key=lambda p: (p.get_width(), p.get_height()))
    assert _box(element)[2:] == (1, 1) and _box(x_row)[2:] == (1, T) and _box(w_row)[2:] == (T, 1)
    assert (element.get_y() - tile.get_y(), element.get_x() - tile.get_x()) == (ty, tx)
    assert x_row.get_y() - x_tile.get_y() == ty and x_row.get_x() == x_tile.get_x()  # row ty of Xs
    assert w_row.get_x() - w_tile.get_x() == tx and w_row.get_y() == w_tile.get_y()  # row tx of Ws, as a column
    hatched = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_hatch()]
    assert sorted(_box(p)[2:] for p in hatched) == sorted([(T, len(b.phases) * T - k), (len(b.phases) * T - k, T)])
    labels = [t.get_text() for t in ax.texts]
    assert sum(bool(re.fullmatch(r"phase \d", s)) for s in labels) == 2 * (len(b.phases) - 1)
    assert f"X: {n} × {k}\n(samples × inputs)" in labels
    assert fig.get_size_inches()[0] <= 9.5, "wider than the page column"
