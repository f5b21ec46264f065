"""Plots of a chapter's speed figures (:class:`book.speed_figures.SpeedFigures`), measured now or recorded.

Each takes the figures and names their rows through the benchmark's constants, so that a row
the benchmark renames breaks here, at import or in ``tests/test_benchmark_contracts.py``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import FormatStrFormatter, NullFormatter

from benchmarks import cnn, perceptrons_mlp
from book.speed_figures import SpeedFigures


def bandwidth_bars(figures: SpeedFigures, groups, title: str, spec_gbs: float | None = None) -> None:
    """The rows of ``groups`` as bars of their share of the measured copy bandwidth (blue: ours, gray: a library),
    with the memory's peak by its specification (``spec_gbs``) as a second line where it is known."""
    rows = [r for g in groups for r in figures.rows(g)]
    peak = figures.peaks()
    right = 135.0
    fig, ax = plt.subplots(figsize=(8.5, 0.32 * len(rows) + 1.2))
    colors = ["tab:blue" if r["kind"] == "kernel" else "tab:gray" for r in rows]
    bars = ax.barh([r["name"] for r in rows], [r["percent_of_peak_bandwidth"] for r in rows], color=colors)
    ax.bar_label(bars, labels=[f"{r['gbs']:,.0f} GB/s ({r['percent_of_peak_bandwidth']:.0f} %)" for r in rows],
                 padding=3, fontsize=8, bbox=dict(facecolor="white", edgecolor="none", pad=0.6))
    ax.axvline(100, color="black", linestyle="--", linewidth=1)
    if spec_gbs:
        spec = 100 * spec_gbs / peak.bandwidth_gbs
        ax.axvline(spec, color="tab:red", linestyle=":", linewidth=1.2)
        ax.annotate(f"specification's peak\n{spec_gbs:,.0f} GB/s", (spec, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(3, -3), textcoords="offset points", va="top", fontsize=7, color="tab:red")
        right = max(right, spec + 30)
    ax.set_xlabel(f"% of the measured copy bandwidth ({peak.bandwidth_gbs:,.0f} GB/s)   blue: ours, gray: library")
    ax.set_xlim(0, right)
    ax.invert_yaxis()
    ax.set_title(f"{title}: {figures.label}", fontsize=9)
    plt.tight_layout()
    plt.show()


#: The gradient sums of the perceptron chapter's sweep, and the line style of each.
_SWEEP_STYLES = ((perceptrons_mlp.SUM_ATOMIC, "o-"), (perceptrons_mlp.SUM_TREE, "s-"),
                 (perceptrons_mlp.SUM_COLUMNS, "d-"), (perceptrons_mlp.TORCH_SUM, "^--"))


def gradient_sum_sweep(figures: SpeedFigures) -> None:
    """The perceptron chapter's gradient sums over the minibatch's size, against the time it takes to read the
    matrix at the copy bandwidth; then the atomics against the tree at the largest size, in a line of text."""
    rows = figures.rows(perceptrons_mlp.GRADIENT_SUM_SWEEP)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, style in _SWEEP_STYLES:
        pts = sorted((r["n"], r["median_ms"] * 1e3) for r in rows if r["name"] == name)
        if pts:
            ax.loglog(*zip(*pts), style, label=name)
    peak = figures.section("peaks")["bandwidth_gbs"]
    ns = np.array(sorted({r["n"] for r in rows}))
    ax.loglog(ns, 4 * 3 * ns / (peak * 1e9) * 1e6, "k:", label=f"reading the matrix at {peak:,.0f} GB/s")
    ax.set_xlabel("rows n (k = 3 columns)"); ax.set_ylabel("time per call (µs)")
    ax.set_title(f"Summing per-sample gradients: {figures.label}", fontsize=9)
    ax.legend(fontsize=8); ax.grid(alpha=0.3, which="both")
    plt.show()
    big = max(r["n"] for r in rows)
    atomic = next(r for r in rows if r["name"] == perceptrons_mlp.SUM_ATOMIC and r["n"] == big)
    tree = next(r for r in rows if r["name"] == perceptrons_mlp.SUM_TREE and r["n"] == big)
    print(f"n = {big:,}: atomics {atomic['median_ms'] * 1e3:,.0f} µs, tree {tree['median_ms'] * 1e3:,.0f} µs "
          f"({atomic['median_ms'] / tree['median_ms']:.0f}x faster; {tree['percent_of_peak_bandwidth']:.0f}% of peak bandwidth)")


def warptile_label(config: dict) -> str:
    """A tile of version 7's search as its plot labels it: block tile, blocks per multiprocessor, warp tile, groups."""
    return (f"{config['WT_BM']}×{config['WT_BN']}×{config['WT_BK']}, {config['WT_MIN_BLOCKS']}/SM, "
            f"8×{4 * config.get('WT_NQ', 2)}" + (f", groups of {config['WT_GROUP']}" if config.get("WT_GROUP") else ""))


def backward_against_torch_strips(figures: SpeedFigures) -> None:
    """Every correct backward kernel of the CNN chapter's results as a dot of its speed relative to PyTorch's
    gradient, a panel per layer and a row per gradient: grey for the teaching versions 1-4, blue for 5-12."""
    layers = figures.layers(cnn.BACKWARD)
    fig, axes = plt.subplots(1, len(layers), figsize=(2.9 * len(layers), 3.6), squeeze=False)
    for ax, layer in zip(axes[0], layers):
        here = [r for r in figures.rows(cnn.BACKWARD, "kernel", layer) if "median_ms" in r and r.get("correct")]
        for i, gradient in enumerate(cnn.GRADIENTS):
            mine = [r for r in here if r["gradient"] in cnn.counted_for(gradient)]
            peer = next(r for r in figures.rows(cnn.BACKWARD, "peer", layer) if r["gradient"] == gradient)
            speed = [peer["median_ms"] / r["median_ms"] for r in mine]
            teaching = [r["name"] in cnn.BACKWARD_TEACHING_ROWS for r in mine]
            ax.scatter(speed, [i] * len(mine), c=["#999" if t else "#1f6fb2" for t in teaching], s=18, zorder=3)
        ax.axvline(1.0, color="#888", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_yticks(range(len(cnn.GRADIENTS)), cnn.GRADIENTS)
        ax.set_ylim(len(cnn.GRADIENTS) - 0.5, -0.5)
        ax.set_ylabel("gradient")
        ax.set_xlabel("speed relative to PyTorch (log)")
        ax.set_title(layer, fontsize=9)
        ax.xaxis.set_major_formatter(FormatStrFormatter("%gx"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(axis="x", alpha=0.3)
    legend = [Line2D([], [], marker="o", ls="", color="#999", label="versions 1-4 (teaching)"),
              Line2D([], [], marker="o", ls="", color="#1f6fb2", label="versions 5-12, every configuration"),
              Line2D([], [], ls=":", color="#888", label="PyTorch's speed")]
    fig.legend(handles=legend, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"backward kernels against PyTorch ({figures.label})", fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    plt.show()
