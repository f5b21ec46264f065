"""The book's pictures of how a warp meets memory: 32-byte sectors of global memory (``draw_coalescing``), the 32
banks of shared memory (``draw_bank_conflicts``), the steps of a warp shuffle (``draw_warp_shuffle``) and which
thread sums which column of the perceptron's gradients (``draw_column_sums``).  Each draws what
:mod:`book.memory_geometry` computes with the kernels' own index expressions; the sector strips are
:func:`book.figures.draw_warp_accesses`, the capsule chapter's.
"""

from __future__ import annotations

import numpy as np

from book import memory_geometry as geometry
from book.figures import FONT_SIZE, draw_rect, draw_warp_accesses

_LANES = "viridis"  # a lane's colour, lane 0 darkest, as in draw_warp_accesses
_IDLE = "#ececec"  # memory nobody touches in the access drawn
_COLUMNS = ("#9cc3e6", "#f8c997", "#b5dfa9", "#e6b3d6", "#d9d9d9", "#f2e394")  # a column of the gradients each


def draw_coalescing(d: int = 8):
    """One warp's load in three index patterns, on one byte scale: ``a[i]`` (vector_add version 1), ``x[i * d + j]``
    (a row per thread, the perceptron's forward pass) and a ``float4`` per lane (vector_add version 3)."""
    import matplotlib.pyplot as plt

    accesses = [geometry.float_load(), geometry.row_per_thread_load(d), geometry.float4_load()]
    end = max(int(a.start.max()) + a.width for a in accesses)
    span = -(-end // geometry.SECTOR) * geometry.SECTOR
    fig, ax = plt.subplots(figsize=(8.4, 2.3))
    draw_warp_accesses(ax, accesses, span, "one warp's load: 32 lanes, each in its colour (lane 0 darkest)",
                       sector=geometry.SECTOR)
    fig.tight_layout()
    return fig, accesses


def _draw_banks(ax, access, title: str):
    """The tile's words laid out as memory holds them, 32 to a row so that a column is a bank: the tile's own
    words grey, its padding white and hatched, the words the warp reads in their lane's colour."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba

    cmap = plt.get_cmap(_LANES)
    banks = geometry.BANKS
    words = access.rows * access.pitch
    memory_rows = -(-words // banks)
    image = np.ones((memory_rows, banks, 4))  # past the tile's end: white
    word = np.arange(words)
    padding = word % access.pitch >= access.cols
    image.reshape(-1, 4)[word] = to_rgba(_IDLE)
    image.reshape(-1, 4)[word[padding]] = (1, 1, 1, 1)
    first_lane = {}
    for lane, w in enumerate(access.words.tolist()):
        first_lane.setdefault(w, lane)
    for w, lane in first_lane.items():
        image.reshape(-1, 4)[w] = cmap(lane / (geometry.WARP - 1))
    ax.imshow(image, extent=(0, banks, memory_rows, 0), interpolation="nearest")
    ax.hlines(range(1, memory_rows), 0, banks, color="white", linewidth=0.3)
    ax.vlines(range(1, banks), 0, memory_rows, color="white", linewidth=0.3)
    for w in word[padding]:
        draw_rect(ax, w // banks, w % banks, 1, 1, fill=False, hatch="////", edgecolor="#bbbbbb", linewidth=0)
    busiest = int(access.words_per_bank().argmax())
    ways = access.ways
    verdict = f"{ways}-way conflict: bank {busiest} holds\n{ways} of the words, read one by one" if ways > 1 else \
        f"no conflict: {len(first_lane)} words\nin {len(first_lane)} banks, one pass"
    ax.text(banks / 2, memory_rows + 1.0, verdict, ha="center", va="top", fontsize=FONT_SIZE,
            color="firebrick" if ways > 1 else "darkgreen")
    ax.set_xlim(0, banks)
    ax.set_ylim(memory_rows + 6.5, 0)
    ax.set_aspect("equal")
    ax.set_xticks([0.5, 8.5, 16.5, 24.5, 31.5])
    ax.set_xticklabels(["0", "8", "16", "24", "31"])
    ax.set_yticks([])
    ax.tick_params(labelsize=FONT_SIZE - 1, length=2)
    ax.set_xlabel("bank = word % 32", fontsize=FONT_SIZE - 0.5, labelpad=1)
    ax.xaxis.set_label_position("top")
    ax.xaxis.tick_top()
    for side in ("right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.set_title(title, fontsize=FONT_SIZE, loc="left", pad=4)


def draw_bank_conflicts():
    """A column of a square tile read by one warp, without and with the + 1 of padding the kernels declare:
    ``matrix_transpose``'s 32 x 32 tile (its transposed read) and ``fc_forward_tiled``'s ``Ws``."""
    import matplotlib.pyplot as plt

    accesses = [geometry.transpose_column_read(padded=False), geometry.transpose_column_read(padded=True),
                geometry.fc_weight_read(padded=False), geometry.fc_weight_read(padded=True)]
    fig = plt.figure(figsize=(8.6, 4.4))
    grid = fig.add_gridspec(2, 3, height_ratios=[1, 1], wspace=0.12, hspace=0.05)
    panels = [fig.add_subplot(grid[:, 0]), fig.add_subplot(grid[:, 1]), fig.add_subplot(grid[0, 2]),
              fig.add_subplot(grid[1, 2])]
    kernels = ("matrix_transpose", "matrix_transpose", "fc_forward_tiled", "fc_forward_tiled")
    for ax, kernel, access in zip(panels, kernels, accesses):
        name = access.label.split("[")[0]
        if access.pitch > access.cols:
            title = f"{kernel}: {name}[{access.rows}][{access.cols} + {access.pitch - access.cols}]"
        else:
            title = f"{kernel}, if {name} were [{access.rows}][{access.cols}]"
        _draw_banks(ax, access, title)
    fig.suptitle("one warp reads a column of a shared tile; memory drawn 32 words a row, one per bank "
                 "(hatched: padding)", fontsize=FONT_SIZE + 0.5)
    fig.subplots_adjust(left=0.01, right=0.99, top=0.86, bottom=0.0)
    return fig, accesses


def draw_warp_shuffle():
    """``warp_reduce_sum``'s five ``__shfl_down_sync`` steps: a row of 32 lanes per step, an arrow from each lane
    whose value is still needed to the lane that adds it, and in each lane how many of the 32 values it holds."""
    import matplotlib.pyplot as plt

    steps = geometry.shuffle_down_steps()
    lanes = geometry.WARP
    fig, ax = plt.subplots(figsize=(8.6, 3.7))
    cmap = plt.get_cmap("Blues")
    for depth, (offset, terms) in enumerate(steps):
        y = depth * 1.6
        live = lanes if offset == 0 else offset  # lanes below the offset hold partial sums
        for lane in range(lanes):
            count = int(terms[lane].sum())
            used = lane < live
            face = cmap(0.2 + 0.75 * np.log2(count) / 5) if used else "white"
            draw_rect(ax, y, lane, 0.85, 0.92, facecolor=face, edgecolor="#999999", linewidth=0.5,
                  hatch=None if used else "////")
            if used:
                ax.text(lane + 0.46, y + 0.42, str(count), ha="center", va="center", fontsize=FONT_SIZE - 2.5,
                        color="white" if count >= 8 else "black")
        if offset:
            for lane in range(offset):
                ax.annotate("", xy=(lane + 0.46, y), xytext=(lane + offset + 0.46, y - 0.75),
                            arrowprops=dict(arrowstyle="-|>", color="tab:red", lw=0.6, mutation_scale=6,
                                            shrinkA=0, shrinkB=0))
        ax.text(-0.5, y + 0.42, f"offset {offset}" if offset else "start", ha="right", va="center", fontsize=FONT_SIZE)
        held = "one value each" if offset == 0 else ("lane 0: all 32" if offset == 1 else
                                                    f"lanes 0–{offset - 1}: {lanes // offset} each")
        ax.text(lanes + 0.3, y + 0.42, held, ha="left", va="center", fontsize=FONT_SIZE)
    for lane in (0, 8, 16, 24, 31):
        ax.text(lane + 0.46, -0.2, str(lane), ha="center", va="bottom", fontsize=FONT_SIZE - 1, color="dimgray")
    ax.text(-0.5, -0.2, "lane", ha="right", va="bottom", fontsize=FONT_SIZE - 1, color="dimgray")
    ax.set_xlim(-4.2, lanes + 7.6)
    ax.set_ylim(len(steps) * 1.6 - 0.6, -1.0)
    ax.set_axis_off()
    ax.set_title("value += __shfl_down_sync(0xffffffff, value, offset): lane l adds lane l + offset's value\n"
                 "number: how many of the 32 starting values a lane holds; hatched: added, never read again",
                 fontsize=FONT_SIZE, loc="left")
    fig.tight_layout()
    return fig, steps


def draw_column_sums(k: int = 3, floats: int = 36, n: int = 1 << 20, blocks: int | None = None):
    """The first ``floats`` floats of the n x k gradient matrix as memory holds it, coloured by column, with the
    thread of each sum that adds them: ``gradient_sum_tree`` (one row of blocks per column, a thread per row) and
    ``gradient_sum_columns`` (a float4 per thread, in its first pass and one stride later).  ``blocks``:
    gradient_sum_columns' grid, by default what its record launches here for (n, k)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if floats % 4 or floats > n * k:
        raise ValueError(f"floats must be a multiple of 4 and at most n * k = {n * k}, got {floats}")
    tree = geometry.tree_owners(n, k)
    cols = geometry.columns_owners(n, k, blocks)
    B = tree.threads_per_block
    strips = [(f"gradient_sum_tree: block (i / {B}, j) sums column j, threadIdx.x = i % {B} loads row i "
               f"(number: threadIdx.x)", 0, tree.thread),
              ("gradient_sum_columns, first pass: thread t loads the float4 at 4t (tN) and adds its j-th float "
               "into acc[j] (number: j)", 0, cols.slot)]
    if cols.stride + floats <= n * k:
        strips.append((f"second pass, floats {cols.stride:,}– (the stride: 4 × {cols.active:,} threads, a multiple of "
                       f"{k}): the same threads, sums and columns", cols.stride, cols.slot))
    fig, ax = plt.subplots(figsize=(8.6, 0.75 + 0.95 * len(strips)))
    for row, (title, first, numbers) in enumerate(strips):
        y = row * 2.0
        for offset in range(floats):
            e = first + offset
            draw_rect(ax, y, offset, 1, 1, facecolor=_COLUMNS[e % k % len(_COLUMNS)], edgecolor="white", linewidth=0.8)
            ax.text(offset + 0.5, y + 0.5, str(int(numbers[e])), ha="center", va="center", fontsize=FONT_SIZE - 1.5)
        if row:
            for offset in range(0, floats, 4):
                draw_rect(ax, y, offset, 1, 4, fill=False, edgecolor="black", linewidth=1.0)
                ax.text(offset + 2, y + 1.05, f"t{int(cols.thread[first + offset])}", ha="center", va="top",
                        fontsize=FONT_SIZE - 1.5, color="dimgray")
        ax.text(0, y - 0.15, title, ha="left", va="bottom", fontsize=FONT_SIZE - 0.5)
    handles = [Patch(facecolor=_COLUMNS[c % len(_COLUMNS)], label=f"column j = {c}") for c in range(k)]
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=k, fontsize=FONT_SIZE - 1,
              frameon=False, borderaxespad=0)
    ax.set_xlim(-0.2, floats + 0.2)
    ax.set_ylim(len(strips) * 2.0 - 0.4, -1.1)
    ax.set_axis_off()
    fig.tight_layout()
    return fig, (tree, cols)
