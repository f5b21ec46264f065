"""Plots of a chapter's speed figures (:class:`book.speed_figures.SpeedFigures`), measured now or recorded.

Each takes the figures and names their rows through the benchmark's constants, so that a row
the benchmark renames breaks here, at import or in ``tests/test_benchmark_contracts.py``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from benchmarks import perceptrons_mlp
from book.speed_figures import SpeedFigures


def bandwidth_bars(figures: SpeedFigures, groups, title: str) -> None:
    """The rows of ``groups`` as bars of their share of the measured copy bandwidth (blue: ours, gray: a library)."""
    rows = [r for g in groups for r in figures.rows(g)]
    peak = figures.peaks()
    fig, ax = plt.subplots(figsize=(8.5, 0.32 * len(rows) + 1.2))
    colors = ["tab:blue" if r["kind"] == "kernel" else "tab:gray" for r in rows]
    bars = ax.barh([r["name"] for r in rows], [r["percent_of_peak_bandwidth"] for r in rows], color=colors)
    ax.bar_label(bars, labels=[f"{r['gbs']:,.0f} GB/s ({r['percent_of_peak_bandwidth']:.0f} %)" for r in rows],
                 padding=3, fontsize=8, bbox=dict(facecolor="white", edgecolor="none", pad=0.6))
    ax.axvline(100, color="black", linestyle="--", linewidth=1)
    ax.set_xlabel(f"% of the measured copy bandwidth ({peak.bandwidth_gbs:,.0f} GB/s)   blue: ours, gray: library")
    ax.set_xlim(0, 135)
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
