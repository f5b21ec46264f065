"""The book's pictures: which thread, warp and block handles which data, and the roofline.

``draw_thread_map`` draws what the kernels of ``kernels/basics/indexing.cu`` report,
``draw_reduction_tree`` the shared-memory tree of ``kernels/basics/reduction.cu``'s block sums;
``plot_roofline`` places measured kernels under the roofline of a device's
peaks (:mod:`kernels.tools.roofline` computes them).  The mapping pictures
draw what :mod:`book.tile_geometry` computes with the kernels' own index
formulas and tile sizes: ``draw_conv_tiles`` (a block of the tiled direct
convolution, its output tile and halo), ``draw_sgemm_tiling`` (block, warp and
thread tiles of an SGEMM step; :mod:`book.gemm_figures` draws one a step),
``draw_unrolled_product`` (im2col's unrolled input beside the filter matrix), ``draw_capsule_access_patterns``
(the bytes a warp stores and loads in capsule versions 3 and 4) and
``draw_fc_tiling`` (a block of the tiled dense layer, its strips of X and W cut
into the phases of its k loop).
"""

from __future__ import annotations

import numpy as np

from book.tile_geometry import (WarpAccess, capsule_warp_stores, capsule_warp_weight_loads, conv_tiled_block,
                                 fc_thread_reads, fc_tiled_block)
from kernels.conv import conv2d, im2col
from kernels.tools.roofline import Achieved, Peaks


def _block_colors(blocks: int):
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab10")
    return [cmap(b % 10) for b in range(blocks)]


def draw_thread_map(thread_of, threads_per_block: int, blocks: int, pass_of=None, ax=None, title: str = ""):
    """Draw the grid (blocks of threads, top) over the array (elements, bottom).

    Each element is coloured by the block of the thread that handled it and
    labelled with that thread's index within its block; a line joins each
    thread to the element(s) it handled.  Threads that handled nothing are
    drawn hatched.  With ``pass_of``, elements are grouped by the pass of a
    grid-stride loop that reached them.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    thread_of = np.asarray(thread_of)
    n = thread_of.size
    total = threads_per_block * blocks
    colors = _block_colors(blocks)
    width = max(n, total)
    if ax is None:
        _, ax = plt.subplots(figsize=(min(11, 0.4 * width + 1.6), 3.0))
    used = np.zeros(total, bool)
    used[thread_of[(thread_of >= 0) & (thread_of < total)]] = True
    y_threads, y_elems = 2.2, 0.0
    # threads, grouped by block
    for t in range(total):
        b, lane = divmod(t, threads_per_block)
        x = t + 0.15 * b  # a small gap between blocks
        ax.add_patch(Rectangle((x, y_threads), 0.9, 0.8, facecolor=colors[b] if used[t] else "white",
                               edgecolor=colors[b], hatch=None if used[t] else "///", alpha=0.85 if used[t] else 1))
        ax.text(x + 0.45, y_threads + 0.4, str(lane), ha="center", va="center", fontsize=9)
    for b in range(blocks):
        x0 = b * threads_per_block + 0.15 * b
        ax.text(x0 + threads_per_block / 2 - 0.05, y_threads + 1.05, f"block {b}", ha="center", va="bottom", fontsize=10)
    # elements
    for i in range(n):
        t = int(thread_of[i])
        if t < 0:
            face, label = "white", "?"
        else:
            face, label = colors[t // threads_per_block], str(t % threads_per_block)
        ax.add_patch(Rectangle((i, y_elems), 0.9, 0.8, facecolor=face, edgecolor="black", linewidth=0.5, alpha=0.85))
        ax.text(i + 0.45, y_elems + 0.4, label, ha="center", va="center", fontsize=9)
        if t >= 0:
            b = t // threads_per_block
            ax.plot([t + 0.15 * b + 0.45, i + 0.45], [y_threads, y_elems + 0.8], color=face, linewidth=0.6, alpha=0.6)
    if pass_of is not None:
        pass_of = np.asarray(pass_of)
        for p in range(int(pass_of.max()) + 1):
            idx = np.flatnonzero(pass_of == p)
            ax.text((idx.min() + idx.max() + 0.9) / 2, y_elems - 0.35, f"pass {p}", ha="center", va="top", fontsize=10)
    ax.text(-0.6, y_threads + 0.4, "threads", ha="right", va="center", fontsize=10)
    ax.text(-0.6, y_elems + 0.4, "elements", ha="right", va="center", fontsize=10)
    ax.text(n / 2, y_elems - 0.95, "element index i = 0 … n-1 (label: threadIdx.x of the thread that handled it)",
            ha="center", va="top", fontsize=9, color="dimgray")
    ax.set_xlim(-2.6, width + 0.15 * blocks + 0.2)
    ax.set_ylim(-1.4, y_threads + 1.5)
    ax.set_axis_off()
    if title:
        ax.set_title(title, fontsize=11)
    return ax


def draw_reduction_tree(values) -> None:
    """The shared-memory tree of a block's sum on ``values`` (one per thread, a power of two of them): at each
    stride, thread t adds ``partial[t + stride]`` into ``partial[t]``, then the block waits at a barrier."""
    import matplotlib.pyplot as plt

    levels = [list(values)]
    while len(levels[-1]) > 1:
        prev, half = levels[-1], len(levels[-1]) // 2
        levels.append([prev[t] + prev[t + half] for t in range(half)])
    fig, ax = plt.subplots(figsize=(8, 3))
    width = len(values)
    for depth, level in enumerate(levels):
        y = -depth
        for t, v in enumerate(level):
            ax.add_patch(plt.Rectangle((t, y), 0.85, 0.6, facecolor="tab:blue" if depth else "lightsteelblue", alpha=0.8))
            ax.text(t + 0.42, y + 0.3, f"{v:g}", ha="center", va="center", color="white" if depth else "black", fontsize=9)
            if depth:
                half = len(levels[depth - 1]) // 2
                for src in (t, t + half):
                    ax.annotate("", xy=(t + 0.42, y + 0.6), xytext=(src + 0.42, y + 1),
                                arrowprops=dict(arrowstyle="->", color="gray", lw=0.8))
        who = "thread 0 adds" if len(level) == 1 else f"threads 0..{len(level) - 1} add"
        label = "partial sums" if depth == 0 else f"stride {len(levels[depth - 1]) // 2}: {who}"
        ax.text(width + 0.2, y + 0.3, label + ("" if depth == 0 else ", then __syncthreads()"), va="center", fontsize=8)
    ax.set_xlim(-0.2, width + 5.5)
    ax.set_ylim(-len(levels) + 0.8, 0.9)
    ax.set_axis_off()
    ax.set_title(f"shared-memory tree in one block of {width} threads: partial[t] += partial[t + stride]", fontsize=10)
    plt.show()


def draw_roofs(ax, peaks: Peaks, intensities=(), title: str | None = None):
    """The roofline of ``peaks`` on ``ax`` (log-log): the memory and FP32 roofs, the ridge, a box with their
    figures, labelled axes, and an x range that holds ``intensities`` (flop per byte).  Returns the roof's lowest
    drawn value, for the y range."""
    intensities = [i for i in intensities if np.isfinite(i) and i > 0]
    lo = min([peaks.ridge_intensity / 100] + [i / 2 for i in intensities])
    hi = max([peaks.ridge_intensity * 20] + [i * 2 for i in intensities])
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    roof = np.minimum(peaks.fp32_gflops, x * peaks.bandwidth_gbs)
    ax.loglog(x, roof, color="black", linewidth=2)
    ax.axvline(peaks.ridge_intensity, color="gray", linestyle=":", linewidth=1)
    ax.text(0.02, 0.97, f"memory roof: {peaks.bandwidth_gbs:,.0f} GB/s × intensity\n"
            f"FP32 roof: {peaks.fp32_gflops / 1e3:,.1f} TFLOP/s\nridge: {peaks.ridge_intensity:.1f} flop/B",
            transform=ax.transAxes, va="top", fontsize=8.5,
            bbox=dict(boxstyle="round", facecolor="white", edgecolor="lightgray"))
    ax.set_xlabel("arithmetic intensity (flop per byte moved)")
    ax.set_ylabel("GFLOP/s")
    ax.set_ylim(roof.min() / 3, peaks.fp32_gflops * 3)
    ax.grid(True, which="both", alpha=0.25)
    ax.set_title(title or f"Roofline of {peaks.device} (measured {peaks.measured or 'now'})", fontsize=10)
    return roof.min()


def plot_roofline(peaks: Peaks, points: dict[str, Achieved] | None = None, ax=None, title: str | None = None):
    """Draw the roofline of ``peaks`` (log-log) with one labelled marker per kernel in ``points``."""
    import matplotlib.pyplot as plt

    points = points or {}
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.8))
    draw_roofs(ax, peaks, [a.intensity for a in points.values()], title)
    markers = "osD^vP*X"
    for k, (label, a) in enumerate(points.items()):
        if a.gflops <= 0:  # a copy does no arithmetic: it has no place on a log-log roofline
            continue
        ax.plot(a.intensity, a.gflops, markers[k % len(markers)], markersize=8, label=f"{label} ({a.percent_of_limit:.0f} % of roof)")
    if points:
        ax.legend(fontsize=8, loc="lower right")
    return ax


# --------------------------------------------------------------------------- mapping pictures
# Who touches what: drawn from book.tile_geometry, which applies the kernels' own index formulas.

FONT_SIZE = 9.5  # the smallest label: the figures below are sized for the page column at this size
_TILE, _HALO = "#9cc3e6", "#f8c997"  # a block's output tile and the halo of its input tile
SLICE_COLOUR, THREAD1_COLOUR = "#cfe0f3", (0.85, 0.1, 0.1, 1.0)  # a slice of A or B; thread 1's elements


def draw_rect(ax, row0, col0, rows, cols, **style):
    """A rectangle in (row, column) units, rows growing downwards."""
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((col0, row0), cols, rows, **style))


def draw_conv_tile(ax, tile, H: int, W: int, K: int, title: str = ""):
    """One block of the tiled direct convolution on an H x W input map: its output tile (blue), the halo
    of K - 1 rows and columns that completes its input tile in shared memory (orange), the part of
    that tile beyond the map (loaded as zeros, hatched), the outputs beyond the output map (not
    written, hatched) and the K x K window of the block's last thread (red)."""

    t = conv_tiled_block(tile, H, W, K)
    h0, w0, ext, _ = t.input
    draw_rect(ax, 0, 0, H, W, facecolor="#f4f4f4", edgecolor="black", linewidth=1.0)
    for k in range(1, max(H, W)):  # a faint pixel grid over the map
        if k < H:
            ax.plot([0, W], [k, k], color="white", linewidth=0.5, alpha=0.8, zorder=2)
        if k < W:
            ax.plot([k, k], [0, H], color="white", linewidth=0.5, alpha=0.8, zorder=2)
    draw_rect(ax, *t.input, facecolor=_HALO, edgecolor="tab:orange", linewidth=1.5)
    draw_rect(ax, *t.output, facecolor=_TILE, edgecolor="tab:blue", linewidth=1.5)
    draw_rect(ax, 0, 0, H - K + 1, W - K + 1, fill=False, edgecolor="black", linewidth=1.2, linestyle="--", zorder=3)
    lr, lc, lrows, lcols = t.loaded
    if lrows < ext:  # rows of the input tile below the map
        draw_rect(ax, lr + lrows, w0, ext - lrows, ext, fill=False, hatch="xx", edgecolor="gray", linewidth=0)
    if lcols < ext:
        draw_rect(ax, h0, lc + lcols, lrows, ext - lcols, fill=False, hatch="xx", edgecolor="gray", linewidth=0)
    orow, ocol, T, _ = t.output
    _, _, wrows, wcols = t.written
    # outputs of the tile beyond the output map: computed, not stored
    if wrows < T:
        draw_rect(ax, orow + wrows, ocol, T - wrows, T, fill=False, hatch="////", edgecolor="white", linewidth=0)
    if wcols < T:
        draw_rect(ax, orow, ocol + wcols, wrows, T - wcols, fill=False, hatch="////", edgecolor="white", linewidth=0)
    draw_rect(ax, orow + T - 1, ocol + T - 1, K, K, fill=False, edgecolor="red", linewidth=2.0, zorder=3)
    ax.annotate(f"output tile {T}×{T}", (ocol + T / 2, orow + T / 2), ha="center", va="center",
                fontsize=FONT_SIZE + 0.5, color="black")
    ax.annotate(f"input tile {ext}×{ext} = {T} + {K} − 1", (ocol + ext, orow + ext + 0.4), ha="right",
                va="top", fontsize=FONT_SIZE, color="tab:orange", annotation_clip=False,
                bbox=dict(facecolor="white", edgecolor="none", pad=1.0), zorder=4)
    size = max(H, W, h0 + ext, w0 + ext)
    ax.set_xlim(-0.5, size + 0.5)
    ax.set_ylim(size + 3.2, -0.5)
    ax.set_aspect("equal")
    ax.set_xticks(sorted({0, w0, W})); ax.set_yticks(sorted({0, h0, H}))
    ax.tick_params(labelsize=FONT_SIZE)
    ax.set_title(title or f"block {tile}: tile at row {h0}, column {w0}", fontsize=FONT_SIZE + 1)
    return t


def draw_conv_tiles(H: int, W: int, K: int, tiles=None):
    """:func:`draw_conv_tile` for the first and the last tile of an H x W map (or ``tiles``), side by side."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch


    H_grid, W_grid = conv2d.tile_grid(H - K + 1, W - K + 1)
    tiles = (0, H_grid * W_grid - 1) if tiles is None else tuple(tiles)
    fig, axes = plt.subplots(1, len(tiles), figsize=(4.3 * len(tiles), 5.0), squeeze=False)
    drawn = [draw_conv_tile(ax, tile, H, W, K) for ax, tile in zip(axes[0], tiles)]
    handles = [Patch(facecolor=_TILE, edgecolor="tab:blue", label="outputs the block computes"),
               Patch(facecolor=_HALO, edgecolor="tab:orange", label=f"halo: the other inputs it loads (K − 1 = {K - 1})"),
               Patch(facecolor=_HALO, hatch="xx", edgecolor="gray", label="beyond the map: loaded as 0"),
               Patch(facecolor=_TILE, hatch="////", edgecolor="white", label="beyond the output map: not stored"),
               Patch(fill=False, edgecolor="red", linewidth=2, label=f"{K}×{K} window of the block's last thread"),
               Patch(fill=False, edgecolor="black", linestyle="--", label="output map (pixel at its window's corner)")]
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=FONT_SIZE, frameon=False)
    fig.suptitle(f"{H}×{W} input map, {K}×{K} filters: which pixels one block loads into shared memory", fontsize=FONT_SIZE + 1.5)
    fig.tight_layout(rect=(0, 0.16, 1, 0.97))
    return fig, drawn


def draw_sgemm_tiling(ax, tiling, title: str = ""):
    """One step of the SGEMM ladder: the block's tile of C coloured by warp, the elements of threads 0
    (black) and 1 (red), and the slices of A (left) and B (above) staged per k-step, with the rows of A
    and columns of B that thread 0 reads from them in black.  Drawn to the tile's own scale: the labels
    give the sizes."""
    import matplotlib.pyplot as plt

    bm, bn, bk = tiling.block_m, tiling.block_n, tiling.k_step
    scale = max(bm, bn)
    gap = scale / 16
    warps = tiling.owner // 32
    palette = plt.get_cmap("Pastel1")
    image = np.array([palette(w % 8) for w in warps.ravel()]).reshape(bm, bn, 4)
    for thread, color in ((0, (0, 0, 0, 1)), (1, THREAD1_COLOUR)):
        image[tiling.owner == thread] = color
    ax.imshow(image, extent=(0, bn, bm, 0), interpolation="nearest")
    draw_rect(ax, 0, 0, bm, bn, fill=False, edgecolor="black", linewidth=1.0)
    rows, cols = tiling.elements_of(0)
    style = dict(facecolor=SLICE_COLOUR, edgecolor="tab:blue", linewidth=0.8)
    draw_rect(ax, 0, -gap - bk, bm, bk, **style)  # A: the tile's rows, k_step columns
    draw_rect(ax, -gap - bk, 0, bk, bn, **style)  # B: k_step rows, the tile's columns
    for r in set(rows.tolist()):
        draw_rect(ax, r, -gap - bk, 1, bk, facecolor="black", linewidth=0)
    for c in set(cols.tolist()):
        draw_rect(ax, -gap - bk, c, bk, 1, facecolor="black", linewidth=0)
    where = "in shared memory" if tiling.shared else "from global memory"
    ax.text(-gap - bk - scale / 40, bm / 2, f"A {bm}×{bk}", rotation=90, ha="right", va="center", fontsize=FONT_SIZE)
    ax.text(bn / 2, -gap - bk - scale / 40, f"B {bk}×{bn}", ha="center", va="bottom", fontsize=FONT_SIZE)
    tm, tn = tiling.thread_tile
    ax.text(-gap - bk, bm + gap / 2, f"C {bm}×{bn}: {tiling.threads} threads × {tm}×{tn}\n"
            f"k-step of {bk} {where}" + ("\nK split among blocks (blockIdx.z)" if tiling.k_split else ""),
            ha="left", va="top", fontsize=FONT_SIZE)
    ax.set_xlim(-gap - bk - scale / 7, max(bn, scale * 0.75) + scale / 40)
    ax.set_ylim(bm + scale * 0.42, -gap - bk - scale / 6)
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.set_title(title or f"{tiling.step}. {tiling.name}", fontsize=FONT_SIZE + 1.5, loc="left", fontweight="bold")


def draw_unrolled_product(x, filters, pixel: int = 0):
    """The unrolled input U beside the filter matrix W, as the product Y = W U is laid out: U above Y, W to
    the left of Y, so that row m of W and column p of U meet at Y[m, p].  The input maps sit beside the
    bands of U they are copied into; ``pixel``'s receptive field, its column of U, row 0 of W and their
    product Y[0, pixel] are outlined in red.  ``x``: (C, H, W) maps; ``filters``: (M, C, K, K)."""
    import matplotlib.pyplot as plt


    x = np.asarray(x)
    filters = np.asarray(filters)
    if x.ndim != 3 or filters.ndim != 4 or filters.shape[1] != x.shape[0] or filters.shape[2] != filters.shape[3]:
        raise ValueError(f"x must be (C, H, W) and filters (M, C, K, K) with the same C, "
                         f"got shapes {x.shape} and {filters.shape}")
    C, H, Wd = x.shape
    M, _, K, _ = filters.shape
    U = im2col.unroll_sequential(x, K=K)
    Wmat = filters.reshape(M, C * K * K)
    Y = Wmat @ U
    rows, P = U.shape
    H_out, W_out = im2col.output_size(H, Wd, K)
    colors = plt.get_cmap("Pastel1")(np.arange(C) % 9)
    band = K * K
    fig, ax = plt.subplots(figsize=(0.34 * (rows + P + 6), 0.34 * (rows + M + 6)))
    gx, gy = rows + 1, rows + 1  # where Y's top-left corner is
    red = dict(fill=False, edgecolor="red", linewidth=2.2)

    def cell(row, col, value, face, size=FONT_SIZE):
        draw_rect(ax, row, col, 1, 1, facecolor=face, edgecolor="black", linewidth=0.6)
        ax.text(col + 0.5, row + 0.5, f"{value:g}", ha="center", va="center", fontsize=size)

    for r in range(rows):  # U, above Y
        for p in range(P):
            cell(r, gx + p, U[r, p], colors[r // band])
    draw_rect(ax, 0, gx + pixel, rows, 1, **red)
    for m in range(M):  # W, left of Y
        for r in range(rows):
            cell(gy + m, r, Wmat[m, r], colors[r // band])
        for p in range(P):
            cell(gy + m, gx + p, Y[m, p], "white")
    draw_rect(ax, gy, 0, 1, rows, **red)
    draw_rect(ax, gy, gx + pixel, 1, 1, **red)
    ph, pw = divmod(pixel, W_out)
    for c in range(C):  # the input maps beside their bands of U
        top = c * band + (band - H) / 2
        left = gx - 2 - Wd
        for h in range(H):
            for w in range(Wd):
                cell(top + h, left + w, x[c, h, w], colors[c])
        draw_rect(ax, top + ph, left + pw, K, K, **red)
        ax.text(left - 0.4, top + H / 2, f"input map {c}", ha="right", va="center", fontsize=FONT_SIZE)
        ax.annotate("", (gx - 0.1, c * band + band / 2), (left + Wd + 0.1, top + H / 2),
                    arrowprops=dict(arrowstyle="->", color="gray"))
    ax.text(gx + P / 2, -0.3, f"unrolled input U\n{rows} × {P} (column = output pixel)", ha="center", va="bottom",
            fontsize=FONT_SIZE + 0.5)
    ax.text(rows / 2, gy + M + 0.3, f"filter matrix Wmat: {M} × {rows} (row = output map)", ha="center", va="top",
            fontsize=FONT_SIZE + 0.5)
    ax.text(gx + P / 2, gy + M + 0.3, f"Y = Wmat U\n{M} × {P}", ha="center", va="top", fontsize=FONT_SIZE + 0.5)
    ax.text(rows / 2, gy + M + 1.3, f"red: row 0 of Wmat · column {pixel} of U = Y[0, {pixel}] = {Y[0, pixel]:g}",
            ha="center", va="top", fontsize=FONT_SIZE + 0.5, color="red")
    ax.set_xlim(-4.2, gx + P + 0.3)
    ax.set_ylim(gy + M + 2.3, -2.6)
    ax.set_aspect("equal")
    ax.set_axis_off()
    return fig, (Wmat, U, Y)


def draw_warp_accesses(ax, accesses, span: int, title: str, sector: int = 32):
    """Memory instructions of one warp as rows of a byte strip ``span`` bytes long: each lane's bytes in its
    colour (lane 0 darkest), 32-byte sectors ruled, and beside each row the sectors it touches."""
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("viridis")
    lanes = len(accesses[0].start)
    for row, access in enumerate(accesses):
        draw_rect(ax, row, 0, 0.8, span, facecolor="#f4f4f4", edgecolor="none")
        for lane, start in enumerate(access.start):
            if start < span:
                draw_rect(ax, row, start, 0.8, min(access.width, span - start), facecolor=cmap(lane / max(1, lanes - 1)),
                      edgecolor="none")
        used = access.width * len(access.start)
        ax.text(-4, row + 0.4, access.label, ha="right", va="center", fontsize=FONT_SIZE, family="monospace")
        ax.text(span + 6, row + 0.4, f"{len(access.sectors(sector))} sectors for {used} B", ha="left", va="center",
                fontsize=FONT_SIZE)
    for b in range(0, span + 1, sector):
        ax.plot([b, b], [-0.1, len(accesses) - 0.1], color="white" if b % 128 else "gray", linewidth=0.5)
    ax.set_xlim(-4, span)
    ax.set_ylim(len(accesses), -0.2)
    ax.set_yticks([])
    ax.set_xticks(range(0, span + 1, 128))
    ax.set_xlabel(f"byte offset (white rules: {sector}-byte sectors)", fontsize=FONT_SIZE)
    ax.tick_params(labelsize=FONT_SIZE)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title(title, fontsize=FONT_SIZE + 1, loc="left")


def draw_capsule_access_patterns(in_dim: int, out_caps: int, out_dim: int):
    """Versions 3 and 4 of the capsule prediction: the bytes of u_hat the first warp of a block stores for
    one sample (every lane of the warp), and the bytes of W[i] it loads first (the first 4 lanes)."""
    import matplotlib.pyplot as plt


    stores = [("v3 ", a) for a in capsule_warp_stores(3, out_caps, out_dim)] + \
             [("v4 ", a) for a in capsule_warp_stores(4, out_caps, out_dim)]
    v3_loads, v4_loads = capsule_warp_weight_loads(3, in_dim, out_caps, out_dim), capsule_warp_weight_loads(4, in_dim, out_caps, out_dim)
    loads = [("v3 ", a) for a in v3_loads[:2]] + [("v4 ", a) for a in v4_loads[:2]]
    fig, axes = plt.subplots(2, 1, figsize=(8.4, 5.0), gridspec_kw={"height_ratios": [len(stores), len(loads)]})

    def labelled(pairs):
        return [WarpAccess(prefix + a.label, a.start, a.width) for prefix, a in pairs]

    span = int(max(a.start.max() + a.width for _, a in stores))
    draw_warp_accesses(axes[0], labelled(stores), span,
                       f"stores of u_hat, one sample: lanes 0–{len(stores[0][1].start) - 1} of warp 0 (byte offset in the row)")
    draw_warp_accesses(axes[1], labelled(loads), span,
                       f"first loads of W[i]: lanes 0–{span // (16 * in_dim) - 1} shown, "
                       f"the rest continue {16 * in_dim} B apart")
    fig.tight_layout()
    return fig, (stores, loads)


# The tiled dense layer: X on the left of Y, W^T above it, so that row i of X and column j of W^T (row j
# of W) meet at Y[i, j]; k runs across X and down W^T.
_PHASE0, _READ = "#f8c997", "#d62728"  # the tiles of phase 0 in shared memory; what one thread reads


def draw_fc_tiling(n: int = 32, k: int = 56, m: int = 32, block=(1, 1), thread=(3, 12), tile=None):
    """One block of ``fc_forward_tiled`` for Y = X Wᵀ: its tile of Y (blue), the strips of X rows and W rows
    it stages through shared memory, cut into the phases of its ``k0`` loop (phase 0 filled, the later
    ones outlined, zero padding beyond k hatched), and one thread (tx, ty): its element of Y and, in
    phase 0, the row of Xs and the row of Ws it reads (red).  Sizes default to the kernel's FC_TILE."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch


    b = fc_tiled_block(n, k, m, block, tile)
    T = b.tile
    tx, ty = thread
    if not (0 <= tx < T and 0 <= ty < T):
        raise ValueError(f"thread must be (threadIdx.x, threadIdx.y) with both below FC_TILE = {T}, got {thread}")
    width = len(b.phases) * T  # k rounded up to whole tiles
    gap = 3
    ox, oy = width + gap, width + gap  # Y's top-left corner: X to its left, W^T above it
    fig, ax = plt.subplots(figsize=(7.6, 7.4))
    grey = dict(facecolor="#ececec", edgecolor="black", linewidth=1.0)
    draw_rect(ax, oy, 0, n, k, **grey)  # X: n x k
    draw_rect(ax, 0, ox, k, m, **grey)  # W^T: k x m
    draw_rect(ax, oy, ox, n, m, **grey)  # Y: n x m
    for r in range(T, max(n, m, k), T):  # tile boundaries, as faint rules
        for (y0, x0, rows, cols) in ((oy, 0, n, k), (0, ox, k, m), (oy, ox, n, m)):
            if r < cols:
                ax.plot([x0 + r, x0 + r], [y0, y0 + rows], color="white", linewidth=1.0, zorder=2)
            if r < rows:
                ax.plot([x0, x0 + cols], [y0 + r, y0 + r], color="white", linewidth=1.0, zorder=2)
    xr0, wr0 = b.x_strip[0], b.w_strip[0]
    for p, ks in enumerate(b.phases):
        k0 = p * T
        style = dict(facecolor=_PHASE0, edgecolor="tab:orange", linewidth=1.6, zorder=3) if p == 0 else \
            dict(fill=False, edgecolor="tab:orange", linewidth=1.6, linestyle="--", zorder=3)
        draw_rect(ax, oy + xr0, k0, T, T, **style)  # the tile of X rows loaded in phase p
        draw_rect(ax, k0, ox + wr0, T, T, **style)  # the tile of W rows (W^T columns) loaded in phase p
        if len(ks) < T:  # beyond k: the kernel stores zeros
            pad = T - len(ks)
            draw_rect(ax, oy + xr0, k0 + len(ks), T, pad, fill=False, hatch="xx", edgecolor="gray", linewidth=0, zorder=3)
            draw_rect(ax, k0 + len(ks), ox + wr0, pad, T, fill=False, hatch="xx", edgecolor="gray", linewidth=0, zorder=3)
        if p > 0:  # named at the middle of the part inside the matrices
            middle = k0 + len(ks) / 2
            ax.text(middle, oy + xr0 + T / 2, f"phase {p}", ha="center", va="center", fontsize=FONT_SIZE, zorder=4,
                    rotation=0 if len(ks) > T / 2 else 90)
            ax.text(ox + wr0 + T / 2, middle, f"phase {p}", ha="center", va="center", fontsize=FONT_SIZE,
                    rotation=90 if len(ks) > T / 2 else 0, zorder=4)
    ax.text(T / 2, oy + xr0 + T / 2 - 3, "phase 0\nXs", ha="center", va="center", fontsize=FONT_SIZE, zorder=4)
    ax.text(ox + wr0 + T / 2 + 3, T / 2, "phase 0\nWs", ha="center", va="center", fontsize=FONT_SIZE, zorder=4)
    # the block's tile of Y and one thread's element of it
    orow, ocol = b.output[:2]
    draw_rect(ax, oy + orow, ox + ocol, T, T, facecolor=_TILE, edgecolor="tab:blue", linewidth=1.8, zorder=3)
    i, j = orow + ty, ocol + tx
    draw_rect(ax, oy + i, ox + j, 1, 1, facecolor=_READ, edgecolor=_READ, zorder=5)
    xs_row, ws_row = fc_thread_reads(thread, T)
    draw_rect(ax, oy + xr0 + xs_row[0][0], 0, 1, T, facecolor=_READ, edgecolor=_READ, zorder=5)  # row ty of Xs
    draw_rect(ax, 0, ox + wr0 + ws_row[0][0], T, 1, facecolor=_READ, edgecolor=_READ, zorder=5)  # row tx of Ws
    ax.plot([T, ox + j], [oy + i + 0.5, oy + i + 0.5], color=_READ, linewidth=0.8, linestyle=":", zorder=4)
    ax.plot([ox + j + 0.5, ox + j + 0.5], [T, oy + i], color=_READ, linewidth=0.8, linestyle=":", zorder=4)
    ax.text(ox + ocol + T / 2, oy + orow + 3, f"block ({b.block[0]}, {b.block[1]})\n{T}×{T} of Y", ha="center",
            va="center", fontsize=FONT_SIZE, zorder=6)
    # names and sizes of the matrices
    ax.text(k / 2, oy + n + 1, f"X: {n} × {k}\n(samples × inputs)", ha="center", va="top", fontsize=FONT_SIZE + 0.5)
    ax.text(ox + m / 2, oy + n + 1, f"Y = X Wᵀ: {n} × {m}\n(samples × outputs)", ha="center", va="top",
            fontsize=FONT_SIZE + 0.5)
    ax.text(ox + m + 1, k / 2, f"Wᵀ: {k} × {m}\n(W's rows\nas columns)", ha="left", va="center",
            fontsize=FONT_SIZE + 0.5)
    ax.text(-1, oy + xr0 + T / 2, f"X rows\n{xr0}–{xr0 + T - 1}", ha="right", va="center", fontsize=FONT_SIZE)
    ax.text(ox + wr0 + T / 2, -1, f"W rows {wr0}–{wr0 + T - 1}", ha="center", va="bottom", fontsize=FONT_SIZE)
    ax.text(width / 2, oy - 1, f"k = 0 … {k - 1}: {len(b.phases)} phases of {T} →", ha="center", va="bottom",
            fontsize=FONT_SIZE)
    ax.text(ox - 1, width / 2, f"k = 0 … {k - 1} →", ha="right", va="center", fontsize=FONT_SIZE, rotation=-90)
    handles = [Patch(facecolor=_TILE, edgecolor="tab:blue",
                     label=f"the {T}×{T} outputs that\nblock ({b.block[0]}, {b.block[1]}) computes"),
               Patch(facecolor=_PHASE0, edgecolor="tab:orange", label="phase 0: the tiles in\nshared memory (Xs, Ws)"),
               Patch(fill=False, edgecolor="tab:orange", linestyle="--", label="later phases: the next\ntrips of the k0 loop"),
               Patch(fill=False, hatch="xx", edgecolor="gray", label=f"beyond k = {k}: stored as 0"),
               Patch(facecolor=_READ, edgecolor=_READ,
                     label=f"thread (tx={tx}, ty={ty}): its Y[{i}, {j}],\nrow {ty} of Xs and row {tx} of Ws\nin phase 0")]
    # the key fills the corner that X and Wᵀ leave empty, above X and left of Wᵀ
    ax.legend(handles=handles, loc="upper left", fontsize=FONT_SIZE, frameon=False, labelspacing=0.9,
              borderaxespad=0.2)
    ax.set_xlim(-9, ox + m + 12)
    ax.set_ylim(oy + n + 6, -3)
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.set_title(f"Y = X Wᵀ in tiles of FC_TILE = {T}: what one block stages through shared memory",
                 fontsize=FONT_SIZE + 1.5, pad=14)
    fig.tight_layout()
    return fig, b
