"""The backward kernels of kernels/conv/conv2d_backward.cu: references, kernels, and the gradient checker."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.conv import conv2d, conv2d_backward as cb
from kernels.tools.gradcheck import check_gradients

pytestmark = pytest.mark.backend

SHAPES = [
    (1, 1, 5, 5, 1, 1),
    (2, 3, 7, 6, 4, 3),
    (1, 5, 19, 21, 7, 5),
    (3, 2, 17, 18, 9, 2),
    (1, 6, 14, 14, 16, 5),
    (2, 16, 5, 5, 20, 5),  # a C5-like layer: 1 x 1 outputs
]


def data(N, C, H, W, M, K, seed=0):
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((N, C, H, W)) + 0.3).astype(np.float32)
    Wf = (rng.standard_normal((M, C, K, K)) + 0.1).astype(np.float32)
    dY = (rng.standard_normal((N, M, H - K + 1, W - K + 1)) + 0.2).astype(np.float32)
    return X, Wf, dY


def assert_within(got, expected, scale, rtol=1e-5):
    assert got.shape == expected.shape
    err = np.abs(np.asarray(got, np.float64) - expected)
    assert np.all(err <= rtol * scale + 1e-6), f"max error {err.max()} at {np.unravel_index(err.argmax(), err.shape)}"


def test_references_match_the_loops():
    X, Wf, dY = data(2, 3, 7, 6, 4, 3)
    loops = np.stack([cb.backward_input_sequential(dY[n], Wf, 7, 6) for n in range(2)])
    np.testing.assert_allclose(cb.backward_input_reference(dY, Wf), loops, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(cb.backward_weight_reference(X, dY), cb.backward_weight_sequential(X, dY, 3),
                               rtol=1e-10, atol=1e-10)


def test_references_pass_the_gradient_checker():
    """The float64 references are the exact gradients of conv2d.forward_reference."""
    X, Wf, _ = data(2, 2, 6, 5, 3, 3)
    b = np.linspace(-1, 1, 3)
    report = check_gradients(
        conv2d.forward_reference,
        lambda X, Wf, b, dY: (cb.backward_input_reference(dY, Wf), cb.backward_weight_reference(X, dY),
                              cb.backward_bias_reference(dY)),
        [X, Wf, b], names=["X", "W", "b"], rtol=1e-6)
    report.raise_if_failed()


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_backward_input(backend, shape):
    X, Wf, dY = data(*shape)
    scale = cb.backward_input_reference(np.abs(dY), np.abs(Wf))
    assert_within(cb.backward_input(dY, Wf, X.shape), cb.backward_input_reference(dY, Wf), scale)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("version", list(cb.WEIGHT_GRADIENTS))
def test_backward_weight(backend, version, shape):
    X, Wf, dY = data(*shape)
    K = shape[-1]
    scale = cb.backward_weight_reference(np.abs(X), np.abs(dY))
    assert_within(cb.WEIGHT_GRADIENTS[version](X, dY, K), cb.backward_weight_reference(X, dY), scale)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_backward_bias(backend, shape):
    _, _, dY = data(*shape)
    scale = np.abs(dY).astype(np.float64).sum(axis=(0, 2, 3))
    assert_within(cb.backward_bias(dY), cb.backward_bias_reference(dY), scale)


@pytest.mark.parametrize("shape", [(1, 1, 4, 4, 1, 2), (2, 3, 6, 5, 2, 3), (1, 2, 7, 7, 3, 5)],
                         ids=lambda s: "x".join(map(str, s)))
def test_kernels_pass_the_gradient_checker(backend, shape):
    """Central differences of the float64 forward pass against the backward kernels, and the adjoint test."""
    X, Wf, _ = data(*shape, seed=3)
    b = np.linspace(-0.5, 0.5, shape[4])
    K = shape[-1]

    def vjp(X, Wf, b, dY):
        dY32 = dY.astype(np.float32)
        return (cb.backward_input(dY32, Wf, X.shape), cb.backward_weight(X, dY32, K), cb.backward_bias(dY32))

    report = check_gradients(conv2d.forward_reference, vjp, [X, Wf, b], names=["X", "W", "b"],
                             rtol=2e-4, atol=2e-5, adjoint_rtol=1e-4)
    report.raise_if_failed()


def test_backward_input_is_a_convolution_with_the_transposed_filters(backend):
    """dX = dY padded by K - 1, convolved (by the forward kernel) with maps swapped and filters rotated."""
    X, Wf, dY = data(2, 3, 8, 7, 4, 3, seed=5)
    padded = np.pad(dY, ((0, 0), (0, 0), (2, 2), (2, 2)))
    via_forward = conv2d.forward_naive(padded, cb.transposed_filters(Wf))
    np.testing.assert_allclose(cb.backward_input(dY, Wf, X.shape), via_forward, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------- versions 5-12: few launches

#: Shapes for the LeNet-sized versions (5-7): N = 1, odd sizes, maps of one pixel, 3x3 and 5x5 filters.
FEW_LAUNCH_SHAPES = [
    (1, 1, 5, 5, 1, 5),
    (3, 2, 9, 8, 3, 3),
    (1, 5, 19, 21, 7, 5),
    (5, 3, 11, 10, 4, 5),
    (2, 16, 5, 5, 20, 5),
]


def _weight_and_bias(X, dY):
    return (cb.backward_weight_reference(X, dY), cb.backward_weight_reference(np.abs(X), np.abs(dY)),
            cb.backward_bias_reference(dY), np.abs(dY).astype(np.float64).sum(axis=(0, 2, 3)))


@pytest.mark.parametrize("shape", FEW_LAUNCH_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_weight_bias_split(backend, shape):
    """Version 5: dW and db of one launch, for every number of splits from 1 to N."""
    X, _, dY = data(*shape)
    K = shape[-1]
    dW_ref, dW_scale, db_ref, db_scale = _weight_and_bias(X, dY)
    for splits in sorted({1, shape[0], (shape[0] + 1) // 2}):
        dW, db = cb.backward_weight_bias_split(X, dY, K, splits=splits)
        assert_within(dW, dW_ref, dW_scale)
        assert_within(db, db_ref, db_scale)
    # One task per thread, and the samples staged through registers instead of cp.async.
    dW, db = cb.backward_weight_bias_split(X, dY, K, splits=shape[0], defines={"WB_TASKS": 1, "STAGE_ASYNC": 0})
    assert_within(dW, dW_ref, dW_scale)
    assert_within(db, db_ref, db_scale)


@pytest.mark.parametrize("shape", FEW_LAUNCH_SHAPES[:4], ids=lambda s: "x".join(map(str, s)))
def test_bias_split(backend, shape):
    _, _, dY = data(*shape)
    _, _, db_ref, db_scale = _weight_and_bias(dY[:, :1], dY)
    for splits in sorted({1, shape[0]}):
        assert_within(cb.backward_bias_split(dY, splits=splits), db_ref, db_scale)


def test_bias_split_of_one_pixel_maps(backend):
    """An (N, M) dY, as a network keeps the gradient of a layer with 1 x 1 outputs."""
    dY = data(3, 1, 1, 1, 7, 1)[2].reshape(3, 7)
    np.testing.assert_allclose(cb.backward_bias_split(dY, splits=2), dY.astype(np.float64).sum(axis=0), rtol=1e-5)


#: dY shapes (N, M, H_out, W_out) for version 12: planes of 64 floats (16 float4s, 16 planes a step of 256
#: threads), of 1,040 floats (260 float4s, more than a block: a step within the plane), of 42 floats (built
#: with scalar loads, a step of 6 planes and 4 values), and 1 x 1 maps kept as (N, M).
BIAS_PLANES_SHAPES = [(5, 3, 8, 8), (3, 2, 26, 40), (4, 3, 7, 6), (3, 7)]


@pytest.mark.parametrize("shape", BIAS_PLANES_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_bias_planes(backend, shape):
    """Version 12, for one split, for every sample its own split, and for splits of uneven size."""
    dY = (np.random.default_rng(3).standard_normal(shape) + 0.2).astype(np.float32)
    axes = (0, 2, 3) if dY.ndim == 4 else (0,)
    db_ref, db_scale = dY.astype(np.float64).sum(axis=axes), np.abs(dY).astype(np.float64).sum(axis=axes)
    assert cb.bias_planes_plan({"N": shape[0], "C": 1, "H": (shape + (1, 1))[2], "W": (shape + (1, 1))[3],
                                "M": shape[1], "K": 1})["defines"]["BP_VEC"] == (4 if dY[0, 0].size % 4 == 0 else 1)
    for splits in sorted({1, shape[0], 2}):
        assert_within(cb.backward_bias_planes(dY, splits=splits), db_ref, db_scale)


@pytest.mark.parametrize("shape", FEW_LAUNCH_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("defines", [None, {"BI_RW": 1, "BI_CB": 2}, {"BI_RW": 4, "BI_CB": 3, "STAGE_ASYNC": 0}],
                         ids=["default", "rw1-cb2", "rw4-cb3-registers"])
def test_input_shared(backend, shape, defines):
    """Version 7, with the default tile and two others (channel groups that do not divide C, rows that do
    not divide H, rows of pixels that do not divide W)."""
    _, Wf, dY = data(*shape)
    x_shape = shape[:4]
    scale = cb.backward_input_reference(np.abs(dY), np.abs(Wf))
    rows = None if defines is None else max(1, shape[2] // 3 + 1)
    got = cb.backward_input_shared(dY, Wf, x_shape, rows=rows, defines=defines)
    assert_within(got, cb.backward_input_reference(dY, Wf), scale)


#: Version 11 compiles a module per shape and tile: every shape with the default tile, and the two other
#: tiles on the shapes whose channels they do not divide.
INPUT_FIXED_CASES = ([(shape, None) for shape in FEW_LAUNCH_SHAPES]
                     + [(shape, defines) for shape in ((1, 5, 19, 21, 7, 5), (5, 3, 11, 10, 4, 5))
                        for defines in ({"BI_RW": 1, "BI_CB": 2}, {"BI_RW": 4, "BI_CB": 3})])


@pytest.mark.parametrize("shape, defines", INPUT_FIXED_CASES,
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple)
                         else "default" if v is None else f"rw{v['BI_RW']}-cb{v['BI_CB']}")
def test_input_fixed(backend, shape, defines):
    """Version 11, compiled for each shape: channel groups that do not divide C, rows of pixels that do
    not divide W, padded rows whose float count is no multiple of 4 (the zeroing's scalar tail)."""
    _, Wf, dY = data(*shape)
    scale = cb.backward_input_reference(np.abs(dY), np.abs(Wf))
    got = cb.backward_input_fixed(dY, Wf, shape[:4], defines=defines)
    assert_within(got, cb.backward_input_reference(dY, Wf), scale)


def test_input_fixed_compiles_the_layer_in():
    plan = cb.input_fixed_plan({"N": 64, "C": 6, "H": 14, "W": 14, "M": 16, "K": 5})
    assert plan["block"] == (7, 14, 1) and plan["grid"] == (6, 1, 64)
    assert {k: plan["defines"][k] for k in ("BF_M", "BF_H", "BF_W", "BI_K")} == {"BF_M": 16, "BF_H": 14, "BF_W": 14,
                                                                                "BI_K": 5}
    assert plan["shared"] == 4 * (16 * 18 * 18 + 16 * 25)


#: Shapes for the implicit-GEMM versions (8-10), whose tiles are 64 maps x 64 or 128 taps.
GEMM_SHAPES = [
    (1, 1, 5, 5, 1, 5),
    (2, 3, 7, 6, 4, 3),
    (3, 9, 9, 8, 70, 3),   # 70 maps: two tiles of maps, one of them ragged; 81 taps: two tiles of 64
    (2, 16, 5, 5, 20, 5),
]


@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_input_gemm(backend, shape):
    _, Wf, dY = data(*shape)
    scale = cb.backward_input_reference(np.abs(dY), np.abs(Wf))
    assert_within(cb.backward_input_gemm(dY, Wf, shape[:4]), cb.backward_input_reference(dY, Wf), scale)


@pytest.mark.parametrize("shape", [(2, 3, 7, 6, 4, 3), (3, 9, 9, 8, 70, 3), (1, 1, 3, 3, 1, 3)],
                         ids=lambda s: "x".join(map(str, s)))
def test_input_winograd(backend, shape):
    _, Wf, dY = data(*shape)
    scale = cb.backward_input_reference(np.abs(dY), np.abs(Wf))
    assert_within(cb.backward_input_winograd(dY, Wf, shape[:4]), cb.backward_input_reference(dY, Wf), scale)


def test_input_winograd_takes_3x3_filters_only():
    _, Wf, dY = data(2, 3, 7, 6, 4, 5)
    with pytest.raises(ValueError, match="3x3 filters, not 5x5"):
        cb.backward_input_winograd(dY, Wf, (2, 3, 7, 6))


def test_flip_filters_writes_the_transposed_bank(backend):
    from kernels.runtime import empty, to_device

    Wf = data(1, 3, 5, 5, 4, 3)[1]
    Wt = empty((3, 4, 3, 3))
    cb.module().function("conv2d_backward_flip_filters")(to_device(Wf), Wt, 4, 3, 3, grid=1, block=cb.BLOCK_1D)
    np.testing.assert_array_equal(Wt.get(), cb.flip_filters_reference(Wf))


@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("defines", [None, {"WG_BN": 128, "WG_BK": 16}, {"WG_BN": 64, "WG_BK": 32}],
                         ids=["default", "bn128", "bk32"])
def test_weight_bias_gemm(backend, shape, defines):
    """Versions 9 + 10 for one split, the default, and splits that leave the last one short."""
    X, _, dY = data(*shape)
    K = shape[-1]
    dW_ref, dW_scale, db_ref, db_scale = _weight_and_bias(X, dY)
    steps = -(-shape[0] * (shape[2] - K + 1) * (shape[3] - K + 1) // (defines or cb.WEIGHT_GEMM_DEFINES)["WG_BK"])
    for splits in sorted({1, None, steps} - {None}) + [None]:
        dW, db = cb.backward_weight_bias_gemm(X, dY, K, splits=splits, defines=defines)
        assert_within(dW, dW_ref, dW_scale)
        assert_within(db, db_ref, db_scale)


def _device_run(launcher, *arrays, **kwargs):
    """The launcher on device copies, prepared once and enqueued twice: the second run must see counters
    and workspaces as the first left them (the last block resets its counter)."""
    from kernels.runtime import current_backend, empty, to_device

    operands = [to_device(a) for a in arrays]
    outs = kwargs.pop("outs")
    out_buffers = [empty(shape) for shape in outs]
    names = ["out", "out_bias"][:len(outs)]
    enqueue = launcher(*operands, **kwargs, **dict(zip(names, out_buffers)), prepare_only=True)
    results = []
    for _ in range(2):
        for buffer, shape in zip(out_buffers, outs):
            buffer.set(np.full(shape, np.nan, np.float32))
        enqueue()
        current_backend().synchronize()
        results.append([buffer.get() for buffer in out_buffers])
    return results


def test_split_versions_run_again_from_the_state_they_leave(backend):
    X, Wf, dY = data(4, 3, 9, 8, 5, 3, seed=7)
    dW_ref, dW_scale, db_ref, db_scale = _weight_and_bias(X, dY)
    runs = [
        (_device_run(cb.backward_weight_bias_split, X, dY, K=3, splits=3, outs=[(5, 3, 3, 3), (5,)]), (dW_ref, db_ref)),
        (_device_run(cb.backward_weight_bias_gemm, X, dY, K=3, splits=5, outs=[(5, 3, 3, 3), (5,)]), (dW_ref, db_ref)),
        (_device_run(cb.backward_bias_split, dY, splits=2, outs=[(5,)]), (db_ref,)),
        (_device_run(cb.backward_bias_planes, dY, splits=3, outs=[(5,)]), (db_ref,)),
    ]
    for results, refs in runs:
        for result in results:
            for got, ref in zip(result, refs):
                scale = dW_scale if ref.ndim == 4 else db_scale
                assert_within(got, ref, scale)


def test_split_versions_are_deterministic(backend):
    """Versions 5, 6, 9 + 10 and 12 end in a fixed-order sum: run after run, the same bits (on a GPU blocks
    finish in a different order each time; a floating-point atomicAdd would change the last bits)."""
    X, Wf, dY = data(8, 3, 12, 11, 6, 5, seed=11)

    def run():
        return [cb.backward_weight_bias_split(X, dY, 5, splits=8), (cb.backward_bias_split(dY, splits=8),),
                cb.backward_weight_bias_gemm(X, dY, 5, splits=9), (cb.backward_bias_planes(dY, splits=8),)]

    first = run()
    for _ in range(3):
        again = run()
        for a, b in zip(first, again):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("call, message", [
    (lambda X, Wf, dY: cb.backward_weight_bias_split(X, dY, 3, splits=0), "splits must be between 1 and the batch"),
    (lambda X, Wf, dY: cb.backward_weight_bias_split(X, dY, 3, splits=5), "splits must be between 1 and the batch"),
    (lambda X, Wf, dY: cb.backward_bias_split(dY[0], splits=1), "dY must be"),
    (lambda X, Wf, dY: cb.backward_bias_planes(dY[0]), "dY must be"),
    (lambda X, Wf, dY: cb.backward_bias_planes(dY, splits=5), "splits must be between 1 and the batch"),
    (lambda X, Wf, dY: cb.backward_input_shared(dY, Wf, X.shape, rows=0), "rows must be between 1 and H"),
    (lambda X, Wf, dY: cb.backward_weight_bias_gemm(X, dY, 3, splits=10**6), "splits must be between 1 and"),
    (lambda X, Wf, dY: cb.backward_weight_bias_gemm(X, dY[:, :, :-1], 3), "dY has shape"),
    (lambda X, Wf, dY: cb.backward_weight_bias_split(X[0], dY, 3), "X must be"),
])
def test_bad_arguments_are_named(call, message):
    X, Wf, dY = data(4, 3, 9, 8, 5, 3)
    with pytest.raises(ValueError, match=message):
        call(X, Wf, dY)


def test_too_much_shared_memory_is_refused_with_the_way_out():
    X, Wf, dY = data(2, 8, 30, 30, 4, 3)
    with pytest.raises(ValueError, match="use more splits"):
        cb.backward_weight_bias_split(X, dY, 3, splits=1)
    X, Wf, dY = data(1, 1, 30, 30, 64, 3)
    with pytest.raises(ValueError, match="pass fewer rows"):
        cb.backward_input_shared(dY, Wf, X.shape, rows=30)
    with pytest.raises(ValueError, match="use backward_input_shared or backward_input_gemm"):
        cb.backward_input_fixed(dY, Wf, X.shape)


# ----------------------------------------------------------------------- the benchmark's layers, on a GPU

#: LeNet's C1 and C3 at batch 64, and the 56 x 56 layer of the benchmark at batch 8 (the same grids per
#: sample; the float64 references of batch 128 would take minutes of CPU).
GPU_LAYERS = [(64, 1, 32, 32, 6, 5), (64, 6, 14, 14, 16, 5), (8, 64, 56, 56, 64, 3)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_LAYERS, ids=["C1", "C3", "56x56"])
def test_fast_versions_on_the_benchmark_layers(backend, shape):
    X, Wf, dY = data(*shape, seed=2)
    K = shape[-1]
    dW_ref, dW_scale, db_ref, db_scale = _weight_and_bias(X, dY)
    dX_ref = cb.backward_input_reference(dY, Wf)
    dX_scale = cb.backward_input_reference(np.abs(dY), np.abs(Wf))
    weight_and_bias = ((dW_ref, dW_scale), (db_ref, db_scale))
    runs = [(cb.backward_weight_bias_gemm(X, dY, K), weight_and_bias),
            ((cb.backward_input_gemm(dY, Wf, X.shape),), ((dX_ref, dX_scale),)),
            ((cb.backward_bias_split(dY),), ((db_ref, db_scale),)),
            ((cb.backward_bias_planes(dY),), ((db_ref, db_scale),))]
    if K == 5:  # the shared-memory versions: LeNet's layers
        runs += [(cb.backward_weight_bias_split(X, dY, K), weight_and_bias),
                 ((cb.backward_input_shared(dY, Wf, X.shape),), ((dX_ref, dX_scale),)),
                 ((cb.backward_input_fixed(dY, Wf, X.shape),), ((dX_ref, dX_scale),))]
    for results, refs in runs:
        for got, (ref, scale) in zip(results, refs):
            assert_within(got, ref, scale)


@pytest.mark.gpu
def test_split_versions_give_the_same_bits_every_run_at_lenet_size(backend):
    """C3 at batch 64: 16 x 16 blocks finishing in a different order on every run, the same result."""
    X, _, dY = data(64, 6, 14, 14, 16, 5, seed=4)

    def run():
        return (cb.backward_weight_bias_split(X, dY, 5) + (cb.backward_bias_split(dY), cb.backward_bias_planes(dY))
                + cb.backward_weight_bias_gemm(X, dY, 5))

    first = run()
    for _ in range(20):
        for a, b in zip(first, run()):
            np.testing.assert_array_equal(a, b)
