"""Every plot of measured figures that the book package draws is legible on its own.

A plot read away from its page must say what it shows: each axis that carries numbers has a label
(a quantity, and its unit where it has one), and a plot of a GPU's figures names the GPU they were
measured on. These tests draw each plotting function of the ``book`` package from the recorded results
files (off screen) and read the figure back. Pictures of a kernel's geometry (thread maps, tiles) have
no numeric axes and are not checked here.
"""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from benchmarks import attention, cnn, conv_as_gemm, cuda_from_python, perceptrons_mlp  # noqa: E402
from book import attention_figures, figures, gemm_figures, prose, speed_plots, training_curves  # noqa: E402
from book.speed_figures import SpeedFigures  # noqa: E402
from kernels.tools.roofline import achieved  # noqa: E402

_NUMBER = re.compile(r"^[−\-+]?\$?[\d.,]+(?:\\times ?10\^\{?[−\-]?\d+\}?)?\$?\s*(?:x|×|%)?$|^\$\\mathdefault\{.*\}\$$")


def _numeric(labels: list[str]) -> bool:
    return bool(labels) and all(_NUMBER.match(label.replace("\u2212", "-").strip()) for label in labels)


def _texts(fig) -> str:
    """Every text of a figure: titles, labels, annotations, legends."""
    found = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    return " ".join(found)


def unlabelled_axes(fig) -> list[str]:
    """The numeric axes of ``fig`` that have no label, as "title: x" or "title: y"."""
    fig.canvas.draw()
    missing = []
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        for which, axis, label in (("x", ax.xaxis, ax.get_xlabel()), ("y", ax.yaxis, ax.get_ylabel())):
            ticks = [t.get_text() for t in axis.get_ticklabels() if t.get_text() and t.get_visible()]
            if _numeric(ticks) and not label.strip():
                missing.append(f"{ax.get_title() or '(untitled)'}: {which}")
    return missing


def drawn(draw) -> list:
    """The figures ``draw()`` leaves open (plt.show does nothing off screen)."""
    plt.close("all")
    draw()
    figs = [plt.figure(n) for n in plt.get_fignums()]
    assert figs, "the function drew nothing"
    return figs


def _recorded(name: str) -> SpeedFigures:
    found = SpeedFigures.recorded(name)
    if not found.available:
        pytest.skip(f"{name}.json has not been recorded (make bench on a GPU machine)")
    return found


def _roofline():
    run = _recorded(cuda_from_python.NAME)
    peaks = run.peaks()
    points = {name: achieved(r["bytes"], r["flops"], r["median_ms"] / 1e3, peaks)
              for name in (cuda_from_python.GRID_STRIDE_ADD, cuda_from_python.SUM_WARP_SHUFFLE) for r in [run.row(name)]}
    figures.plot_roofline(peaks, points)
    return run


def _bandwidth_bars():
    run = _recorded(cuda_from_python.NAME)
    speed_plots.bandwidth_bars(run, cuda_from_python.ELEMENTWISE, "elementwise", spec_gbs=prose.dram_bandwidth_gbs(run.data))
    return run


def _gradient_sum_sweep():
    run = _recorded(perceptrons_mlp.NAME)
    speed_plots.gradient_sum_sweep(run)
    return run


def _backward_strips():
    run = _recorded(cnn.BACKWARD_NAME)
    speed_plots.backward_against_torch_strips(run)
    return run


def _training_history():
    run = _recorded(cnn.NAME)
    full = run.section(cnn.LENET)
    fig, axes = plt.subplots(1, 2)
    training_curves.plot_history(axes, full["train_loss"], full["train_accuracy"], full["test_accuracy"],
                                 full["train_samples"], f"full run, {run.label}")
    return run


def _attention_speeds():
    run = _recorded(attention.NAME)
    rows = [r for r in run.rows(attention.FORWARD) if r.get("dtype") == attention.BF16]
    attention_figures.plot_speeds(rows, attention.FORWARD, label=run.label)
    return run


def _sgemm_roofline():
    run = _recorded(conv_as_gemm.NAME)
    gemm_figures.sgemm_roofline(run, conv_as_gemm.SGEMM)
    return run


def _conv_roofline():
    run = _recorded(conv_as_gemm.NAME)
    gemm_figures.conv_roofline(run, conv_as_gemm.CONV, lambda r: r["name"].split(" (")[0], "convolution methods")
    return run


def _direct_conv_roofline():
    run = _recorded(cnn.NAME)
    gemm_figures.conv_roofline(run, cnn.FORWARD, lambda r: r["name"], "direct convolution versions")
    return run


PLOTS = {"roofline": _roofline, "sgemm_roofline": _sgemm_roofline, "conv_roofline": _conv_roofline,
         "direct_conv_roofline": _direct_conv_roofline, "bandwidth_bars": _bandwidth_bars, "gradient_sum_sweep": _gradient_sum_sweep,
         "backward_against_torch_strips": _backward_strips, "plot_history": _training_history,
         "attention_speeds": _attention_speeds}


@pytest.mark.parametrize("name", PLOTS)
def test_every_numeric_axis_is_labelled_and_the_gpu_is_named(name):
    runs = []
    figs = drawn(lambda: runs.append(PLOTS[name]()))
    run = runs[0]
    try:
        for fig in figs:
            assert unlabelled_axes(fig) == [], f"{name}: numeric axes without a label: {unlabelled_axes(fig)}"
            assert run.device_name in _texts(fig), f"{name}: the figure does not name {run.device_name}"
    finally:
        plt.close("all")


def test_the_checker_finds_an_unlabelled_axis_and_a_missing_gpu():
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [10, 20, 30])
    ax.set_xlabel("threads per block")
    assert unlabelled_axes(fig) == ["(untitled): y"]
    ax.set_ylabel("GB/s")
    assert unlabelled_axes(fig) == []
    assert "NVIDIA H100" not in _texts(fig)
    bars, bax = plt.subplots()
    bax.barh(["copy", "vector_add"], [1.0, 2.0])
    bax.set_xlabel("GB/s")
    assert unlabelled_axes(bars) == [], "kernel names on an axis are their own labels"
    plt.close("all")
