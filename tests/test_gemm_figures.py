"""The GEMM and convolution pictures show what the kernels do: split-K's slices, implicit GEMM's gather,
Winograd's transforms, each step's tile, the pipelines' model and the rooflines' points, checked against the
kernels' NumPy references and the results files (``book/gemm_geometry.py``, ``book/gemm_figures.py``)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from benchmarks import cnn, conv_as_gemm as bench  # noqa: E402
from book import gemm_figures, gemm_geometry  # noqa: E402
from book.tile_geometry import sgemm_tiling  # noqa: E402
from kernels.conv import conv2d_gemm, im2col  # noqa: E402
from kernels.gemm import sgemm  # noqa: E402
from kernels.runtime.versions import versions  # noqa: E402
from tests.test_book_figures import _recorded  # noqa: E402


@pytest.mark.parametrize("M, N, K, sms", [(4096, 10, 512, 132), (512, 10, 4096, 132), (300, 10, 700, 132),
                                          (4096, 1024, 1024, 132), (1024, 1024, 4096, 132), (97, 40, 75, 8)])
def test_splitk_slices_cover_k_once_at_k_tile_bounds_as_the_plan_says(M, N, K, sms):
    s = gemm_geometry.splitk_schedule(M, N, K, sms)
    covered = np.zeros(K, int)
    for k0, k1 in s.slices:
        assert k0 % s.k_step == 0 and k0 < k1, s.slices
        covered[k0:k1] += 1
    assert (covered == 1).all(), f"K = {K} is not covered exactly once by {s.slices}"
    assert s.splits == s.grid[2] == sgemm.sgemm_plan(M, N, K, sms=sms)["splits"]
    assert s.grid[:2] == (-(-N // s.block_n), -(-M // s.block_m))


def test_the_slices_partial_products_add_up_to_the_product():
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((40, 300)), rng.standard_normal((300, 10))
    s = gemm_geometry.splitk_schedule(40, 10, 300, 132, plan={"config": "128x16", "splits": 5})
    partial = gemm_geometry.splitk_partials(A, B, s)
    assert partial.shape == (s.splits, 40, 10) and s.partial_floats == partial.size
    np.testing.assert_allclose(partial.sum(axis=0), A @ B, rtol=1e-12, atol=1e-12)
    assert gemm_geometry.splitk_schedule(40, 10, 300, 132, plan={"config": "128x16", "splits": 1}).partial_floats == 0


@pytest.mark.parametrize("shape", [(2, 3, 8, 8, 3, 1, 1), (3, 2, 12, 10, 5, 2, 2), (1, 4, 9, 7, 3, 0, 1)])
def test_the_gather_reads_the_rows_of_im2col(shape):
    N, C, H, W, K, pad, stride = shape
    numbered = np.arange(1, N * C * H * W + 1, dtype=np.float64).reshape(N, C, H, W)  # 0: a zero of the padding
    U = im2col.reference(numbered, K, pad, stride)  # (N, C*K*K, P)
    P = U.shape[2]
    BN = gemm_geometry.implicit_config()["IG_BN"]
    for row in (0, C * K * K // 2, C * K * K - 1):
        whole_row = np.concatenate([U[n, row] for n in range(N)])  # the virtual matrix's row over the batch
        for block in range(-(-N * P // BN)):
            g = gemm_geometry.implicit_gather(N, C, H, W, K, pad, stride, row=row, block=block)
            expected = np.full(BN, -1.0)
            part = whole_row[block * BN:(block + 1) * BN]
            expected[:part.size] = part - 1
            np.testing.assert_array_equal(g.source, expected)
            assert g.warp == (row % gemm_geometry.implicit_config()["IG_BK"]) % 4 and (g.lane == np.arange(BN) % 32).all()


def test_the_gather_refuses_a_row_or_block_the_launch_has_not():
    with pytest.raises(ValueError, match="row must be between 0 and 26"):
        gemm_geometry.implicit_gather(2, 3, 8, 8, 3, 1, 1, row=27)
    with pytest.raises(ValueError, match="block must be between 0 and 0"):
        gemm_geometry.implicit_gather(2, 3, 8, 8, 3, 1, 1, row=0, block=1)


def test_winograd_does_36_multiplications_for_144_and_reproduces_the_direct_correlation():
    rng = np.random.default_rng(3)
    d, g = rng.standard_normal((6, 6)), rng.standard_normal((3, 3))
    t = gemm_geometry.winograd_tile(d, g)
    assert (t.multiplications, t.direct_multiplications) == (36, 144)
    assert t.V.shape == t.U.shape == (6, 6) and t.Y.shape == (4, 4)
    direct = conv2d_gemm.direct_reference(d[None, None], g[None, None])[0, 0]  # the kernels' own direct sum
    np.testing.assert_allclose(gemm_geometry.correlate_valid(d, g), direct, rtol=0, atol=1e-13)
    np.testing.assert_allclose(t.Y, direct, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="d must be 6 x 6"):
        gemm_geometry.winograd_tile(d[:4, :4], g)


@pytest.mark.parametrize("name", list(versions(sgemm.KERNELS)))
def test_a_steps_figure_states_what_its_tile_does(name):
    facts = gemm_figures.sgemm_step_facts(name)
    t = sgemm_tiling(name)
    tm, tn = facts["thread_tile"]
    assert facts["threads"] * tm * tn == t.block_m * t.block_n, "the threads' results tile the block exactly"
    assert (facts["loads_per_k"], facts["fmas_per_k"]) == (tm + tn, tm * tn)
    fig, _ = gemm_figures.draw_sgemm_step(name)
    assert fig.get_size_inches()[0] <= 8.5
    plt.close(fig)


def test_the_pipeline_model_waits_less_with_every_schedule():
    busy = {}
    for schedule in gemm_figures.SCHEDULES:
        events = gemm_figures.pipeline_events(schedule, k_tiles=6)
        tiles = sorted((s, e) for lane, s, e, kind in events if kind == "k-tile")
        assert len(tiles) == 6
        lane = sorted((s, e) for lane, s, e, kind in events if lane == "math")
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(lane, lane[1:])), f"{schedule}: the math lane overlaps itself"
        busy[schedule] = 6 / max(e for _, _, e, _ in events)
    order = list(gemm_figures.SCHEDULES)
    assert [busy[s] for s in order] == sorted(busy.values()), busy
    assert not [e for e in gemm_figures.pipeline_events("TMA") if e[3] == "sync"], "TMA waits on no block barrier"
    with pytest.raises(ValueError, match="schedule must be one of"):
        gemm_figures.pipeline_events("three buffers")


def test_the_sgemm_rooflines_points_are_the_results_files():
    run = _recorded(bench.NAME)
    fig, points = gemm_figures.sgemm_roofline(run, bench.SGEMM)
    plt.close(fig)
    rows = run.rows(bench.SGEMM)
    assert len(points) == len(rows)
    by_name = {r["name"]: r for r in rows}
    for label, a in points.items():
        r = by_name[label.split(". ", 1)[-1]] if ". " in label else next(r for r in rows if r["kind"] == "peer")
        assert a.gflops == pytest.approx(r["gflops"], rel=1e-9)
        assert a.intensity == pytest.approx(r["flops"] / r["bytes"], rel=1e-12)


@pytest.mark.parametrize("name, group", [(bench.NAME, bench.CONV), (cnn.NAME, cnn.FORWARD)])
def test_the_convolution_rooflines_keep_each_versions_fastest_row_per_layer(name, group):
    run = _recorded(name)
    fig, points = gemm_figures.conv_roofline(run, group, lambda r: r["name"].split(" (")[0], "test")
    plt.close(fig)
    for layer, drawn in points.items():
        timed = [r for r in run.rows(group, layer=layer) if r.get("median_ms") and r.get("flops")]
        for method, a in drawn.items():
            best = max(r["gflops"] for r in timed if r["name"].split(" (")[0] == method)
            assert a.gflops == pytest.approx(best, rel=1e-9)
        assert set(drawn) == {r["name"].split(" (")[0] for r in timed}


def test_the_mapping_figures_draw():
    s = gemm_geometry.splitk_schedule(4096, 10, 512, 132)
    g = gemm_geometry.implicit_gather(2, 3, 8, 8, 3, 1, 1, row=5)
    t = gemm_geometry.winograd_tile(np.ones((6, 6)), np.ones((3, 3)))
    for fig, _ in (gemm_figures.draw_splitk(s, 132, "a GPU"), gemm_figures.draw_implicit_gather(g),
                   gemm_figures.draw_winograd(t), gemm_figures.draw_sgemm_pipelines()):
        assert fig.get_size_inches()[0] <= 8.7
        plt.close(fig)
