"""The book's pictures: 1-D launches (which thread handles which element) and the roofline.

``draw_thread_map`` draws what the kernels of ``kernels/indexing.cu`` report;
``plot_roofline`` places measured kernels under the roofline of a device's
peaks (:mod:`kernels.tools.roofline` computes them).
"""

from __future__ import annotations

import numpy as np

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


def plot_roofline(peaks: Peaks, points: dict[str, Achieved] | None = None, ax=None, title: str | None = None):
    """Draw the roofline of ``peaks`` (log-log) with one labelled marker per kernel in ``points``."""
    import matplotlib.pyplot as plt

    points = points or {}
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.8))
    intensities = [a.intensity for a in points.values() if np.isfinite(a.intensity) and a.intensity > 0]
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
    markers = "osD^vP*X"
    for k, (label, a) in enumerate(points.items()):
        if a.gflops <= 0:  # a copy does no arithmetic: it has no place on a log-log roofline
            continue
        ax.plot(a.intensity, a.gflops, markers[k % len(markers)], markersize=8, label=f"{label} ({a.percent_of_limit:.0f} % of roof)")
    ax.set_xlabel("arithmetic intensity (flop per byte moved)")
    ax.set_ylabel("GFLOP/s")
    ax.set_ylim(roof.min() / 3, peaks.fp32_gflops * 3)
    ax.grid(True, which="both", alpha=0.25)
    if points:
        ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title or f"Roofline of {peaks.device} (measured {peaks.measured or 'now'})", fontsize=10)
    return ax
