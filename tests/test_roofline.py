"""Speeds against limits (kernels.tools.roofline) and where a chapter's figures come from
(book.speed_figures).  No GPU needed."""

from __future__ import annotations

import json

import matplotlib
import pytest

matplotlib.use("Agg")

from book.figures import plot_roofline  # noqa: E402
from kernels.tools.roofline import Peaks, achieved, peaks_from_results  # noqa: E402
from book.speed_figures import SpeedFigures  # noqa: E402

PEAKS = Peaks(bandwidth_gbs=4000.0, fp32_gflops=60000.0, device="test card", measured="2026-01-01")


def test_memory_bound_kernel_is_measured_against_bandwidth():
    # vector add of 2^20 floats: 12 bytes and 1 flop per element, in 4 microseconds
    n = 1 << 20
    a = achieved(12 * n, n, 4e-6, PEAKS)
    assert a.gbs == pytest.approx(12 * n / 4e-6 / 1e9)
    assert a.intensity == pytest.approx(1 / 12)
    assert a.bound == "memory"
    assert a.percent_of_limit == pytest.approx(100 * a.gbs / 4000.0)
    assert a.limit_gflops == pytest.approx(4000.0 / 12)


def test_compute_bound_kernel_is_measured_against_flops():
    a = achieved(1e6, 1e10, 0.5e-3, PEAKS)  # 10^4 flop per byte
    assert a.bound == "compute"
    assert a.gflops == pytest.approx(2e4)
    assert a.percent_of_limit == pytest.approx(100 * 2e4 / 60000.0)
    assert a.limit_gflops == pytest.approx(60000.0)
    assert PEAKS.ridge_intensity == pytest.approx(15.0)


def test_non_positive_time_is_an_error():
    with pytest.raises(ValueError):
        achieved(1, 1, 0.0, PEAKS)


def test_roofline_plot_draws_every_kernel_with_flops():
    points = {"add": achieved(12e6, 1e6, 5e-6, PEAKS), "copy": achieved(8e6, 0, 3e-6, PEAKS)}
    ax = plot_roofline(PEAKS, points)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == 1 and labels[0].startswith("add")  # a copy has no flops to plot


def write_results(directory, **extra):
    data = {
        "benchmark": "demo",
        "date": "2026-02-03T04:05:06+00:00",
        "device": {"name": "Test GPU 80GB", "driver_version": "580.1"},
        "peaks": {"bandwidth_gbs": 3000.0, "fp32_gflops": 50000.0},
        "results": [{"name": "k", "group": "g", "kind": "kernel", "median_ms": 0.5, "gbs": 2500.0}],
    }
    data.update(extra)
    (directory / "demo.json").write_text(json.dumps(data))


def test_recorded_figures_are_labelled_with_their_gpu_and_date(tmp_path):
    write_results(tmp_path)
    figures = SpeedFigures("demo", json.loads((tmp_path / "demo.json").read_text()), False, tmp_path / "demo.json")
    assert figures.available
    assert "Test GPU 80GB" in figures.source_text() and "2026-02-03" in figures.source_text()
    assert figures.row("k")["gbs"] == 2500.0
    assert figures.peaks().bandwidth_gbs == 3000.0
    assert peaks_from_results(tmp_path / "demo.json").device == "Test GPU 80GB"


def test_missing_results_file_says_so(tmp_path, monkeypatch):
    from kernels.runtime import selection

    monkeypatch.setattr(selection, "on_gpu", lambda: False)

    def measure():
        pytest.fail("measured without a GPU")

    figures = SpeedFigures.load("demo", measure, results_dir=tmp_path)
    assert not figures.available and figures.peaks() is None and figures.rows() == []
    assert "does not exist" in figures.source_text() and "make bench" in figures.source_text()
    write_results(tmp_path)
    assert SpeedFigures.load("demo", measure, results_dir=tmp_path).available
