"""Attention (``kernels/attention/``): every version against float64, the merge rule, the gradients, the records.

On the CPU emulator (``make test``) every version runs at small sizes with the emulator's race and bounds checks:
the float versions, and the BF16 ones with their tensor-core instructions written as warp shuffles
(``kernels/warp_mma.cuh``).  The same ``backend`` tests run on the GPU under ``make test-gpu``; the ``gpu`` tests there
also run the BF16 kernels' real ``mma.sync``/``ldmatrix`` at sizes of many tiles, every configuration the
benchmark may pick.  Sequence lengths are multiples of no tile; batch x heads > 1.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from kernels.attention import attention as A
from kernels.attention import attention_bf16 as B16
from kernels.tools.gradcheck import check_gradients


def operands(shape, seed=0, spread=1.0):
    """Q, K, V of shape (batch, heads, N, d), float32."""
    rng = np.random.default_rng(seed)
    return tuple((spread * rng.standard_normal(shape)).astype(np.float32) for _ in range(3))


def assert_close(got, expected, tol, what):
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    finite = np.isfinite(expected)
    assert np.array_equal(np.isfinite(got), finite), f"{what}: infinities or NaN where float64 has none"
    err = np.abs(got[finite] - expected[finite]).max()
    scale = max(1.0, np.abs(expected[finite]).max())
    assert err <= tol * scale, f"{what}: max error {err:.3g} > {tol * scale:.3g}"


# (batch, heads, N, d): N a multiple of no tile (64), several tiles, one short tile, batch x heads > 1
SHAPES = [(2, 2, 37, 16), (1, 3, 100, 64), (2, 1, 129, 32)]
IDS = ["37x16", "100x64", "129x32"]


# --------------------------------------------------------------------------- versions 1 and 3: the forward pass


@pytest.mark.backend
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_the_unfused_version_matches_float64(backend, shape, causal):
    Q, K, V = operands(shape, seed=1)
    assert_close(A.attention_unfused(Q, K, V, causal), A.output_reference(Q, K, V, causal), 1e-5, "version 1")


@pytest.mark.backend
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_the_fused_float_forward_matches_float64_and_saves_the_log_sum_exp(backend, shape, causal):
    Q, K, V = operands(shape, seed=2)
    O, lse = A.attention_forward(Q, K, V, causal)
    O_ref, lse_ref = A.reference(Q, K, V, causal)
    assert_close(O, O_ref, 1e-5, "version 3: O")
    assert_close(lse, lse_ref, 1e-5, "version 3: log-sum-exp")


@pytest.mark.backend
def test_the_fused_forward_takes_a_scale_and_large_scores(backend):
    """Scores of tens of thousands (large inputs, scale 1): exp of them would overflow; the running maximum keeps
    every exponent at most 0."""
    Q, K, V = operands((1, 2, 70, 16), seed=3, spread=60.0)
    O, lse = A.attention_forward(Q, K, V, scale=1.0)
    O_ref, lse_ref = A.reference(Q, K, V, scale=1.0)
    assert np.abs(lse_ref).max() > 1e3
    assert_close(O, O_ref, 1e-4, "O at large scores")
    np.testing.assert_allclose(lse, lse_ref, rtol=1e-6)


# --------------------------------------------------------------------------- version 2 and the merge rule


@pytest.mark.backend
def test_the_online_softmax_handles_masked_rows_and_huge_logits(backend):
    rng = np.random.default_rng(4)
    S = (8 * rng.standard_normal((6, 300))).astype(np.float32)
    S[1] = -np.inf                       # a row with every key masked
    S[2, ::2] = -np.inf                  # half of a row masked
    S[3] *= 1e4                          # logits far past exp's range (float32 overflows at 88)
    S[4, 7] = 3e38                       # one logit near float32's largest
    S[5, :299] = -np.inf                 # a single key left
    P, lse = A.online_softmax(S)
    P_ref, lse_ref = A.online_softmax_reference(S)
    assert np.isfinite(P).all(), "NaN or inf in P"
    np.testing.assert_allclose(P, P_ref, atol=2e-6)
    assert np.all(P[1] == 0) and lse[1] == -np.inf
    np.testing.assert_allclose(P.sum(axis=1), [1, 0, 1, 1, 1, 1], atol=1e-5)
    np.testing.assert_allclose(lse[np.isfinite(lse_ref)], lse_ref[np.isfinite(lse_ref)], rtol=1e-6)


@pytest.mark.parametrize("split", [1, 5, 17, 31])
def test_merging_two_partial_states_gives_the_state_of_the_whole_row(split):
    """(m, l, o) of a row from (m, l, o) of its two parts, for any split, equals the state computed at once."""
    rng = np.random.default_rng(split)
    x, values = 40 * rng.standard_normal(32), rng.standard_normal((32, 5))
    merged = A.softmax_merge(A.softmax_state(x[:split], values[:split]), A.softmax_state(x[split:], values[split:]))
    whole = A.softmax_state(x, values)
    assert merged[0] == whole[0]
    np.testing.assert_allclose(merged[1], whole[1], rtol=1e-12)
    np.testing.assert_allclose(merged[2], whole[2], rtol=1e-12)
    np.testing.assert_allclose(merged[2] / merged[1], A.softmax_rows_reference(x[None])[0][0] @ values, rtol=1e-12)


def test_the_merge_rule_with_an_empty_part_and_huge_logits():
    values = np.eye(3)
    empty = A.softmax_state(np.full(3, -np.inf), values)
    assert empty[0] == -np.inf and empty[1] == 0 and not empty[2].any()
    part = A.softmax_state(np.array([1e4, -np.inf, 1e4 - 1]), values)
    assert A.softmax_merge(empty, part)[0] == part[0] and A.softmax_merge(part, empty)[1] == part[1]
    both_empty = A.softmax_merge(empty, empty)
    assert both_empty[0] == -np.inf and both_empty[1] == 0 and not np.isnan(both_empty[2]).any()
    huge = A.softmax_merge(A.softmax_state(np.array([3e5]), values[:1]), A.softmax_state(np.array([3e5 + 1]), values[1:2]))
    np.testing.assert_allclose(huge[2] / huge[1], [1 / (1 + np.e), np.e / (1 + np.e), 0])


# --------------------------------------------------------------------------- version 5: the backward pass


@pytest.mark.backend
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_the_float_backward_matches_float64(backend, shape, causal):
    Q, K, V = operands(shape, seed=5)
    dO = operands(shape, seed=6)[0]
    O, lse = A.attention_forward(Q, K, V, causal)
    for name, got, expected in zip(("dQ", "dK", "dV"), A.attention_backward(Q, K, V, O, lse, dO, causal),
                                   A.backward_reference(Q, K, V, dO, causal)):
        assert_close(got, expected, 2e-5, f"version 5: {name}")


@pytest.mark.backend
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_float_backward_agrees_with_finite_differences(backend, causal):
    """Central differences of the float64 forward pass against the kernels' gradients, at a tiny size."""
    Q, K, V = operands((1, 2, 5, 16), seed=7)

    def forward(Q, K, V):
        return A.output_reference(Q, K, V, causal)

    def gradients(Q, K, V, dO):
        O, lse = A.attention_forward(Q, K, V, causal)
        return A.attention_backward(Q, K, V, O, lse, dO.astype(np.float32), causal)

    report = check_gradients(forward, gradients, [Q.astype(np.float64), K.astype(np.float64), V.astype(np.float64)],
                             names=["Q", "K", "V"], rtol=1e-4, atol=1e-5)
    report.raise_if_failed()


# --------------------------------------------------------------------------- versions 4 and 5 in BF16


def bf16_operands(shape, seed):
    return tuple(B16.bf16(a) for a in operands(shape, seed))


def as64(*arrays):
    return tuple(np.asarray(a, np.float64) for a in arrays)


#: BF16 has 8 significant bits: P and O are rounded to it (2^-9 relative each), so errors of a few 1e-3.
BF16_TOL = 1.5e-2


@pytest.mark.backend
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [(1, 2, 37, 16), (2, 1, 100, 64)], ids=["37x16", "100x64"])
def test_the_bf16_forward_matches_float64(backend, shape, causal):
    Q, K, V = bf16_operands(shape, seed=8)
    O, lse = B16.attention_forward(Q, K, V, causal)
    O_ref, lse_ref = A.reference(*as64(Q, K, V), causal)
    assert O.dtype == B16.BF16
    assert_close(O, O_ref, BF16_TOL, "version 4: O")
    assert_close(lse, lse_ref, 1e-5, "version 4: log-sum-exp")


#: Backward tilings: 4 or 8 warps (64 or 128 keys a block), 32 to 128 queries a tile; the dQ products split
#: among the warps by 16-row tiles and by columns (8 warps on 2 or 4 row tiles, 4 warps on 8).
BWD_CONFIGS = [{"BF_BWD_WARPS": 4, "BF_BWD_BQ": 64}, {"BF_BWD_WARPS": 8, "BF_BWD_BQ": 64},
               {"BF_BWD_WARPS": 8, "BF_BWD_BQ": 32}, {"BF_BWD_WARPS": 4, "BF_BWD_BQ": 128}]


@pytest.mark.backend
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("config", BWD_CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
def test_the_bf16_backward_matches_float64(backend, config, causal):
    shape = (2, 1, 70, 32)
    Q, K, V = bf16_operands(shape, seed=9)
    dO = B16.bf16(operands(shape, seed=10)[0])
    O, lse = B16.attention_forward(Q, K, V, causal)
    for name, got, expected in zip(("dQ", "dK", "dV"), B16.attention_backward(Q, K, V, O, lse, dO, causal, config=config),
                                   A.backward_reference(*as64(Q, K, V, dO), causal)):
        assert_close(got, expected, 3 * BF16_TOL, f"BF16 backward with {config}: {name}")


#: The GPU's sizes: many tiles of every kind, the head dimensions the benchmark measures, and each configuration
#: a tuning run may choose (4 or 8 warps, 32 to 128 keys per forward tile, one or two 16-row tiles per warp), over
#: the head dimension's default (attention_bf16.default_config).
GPU_SHAPES = [(2, 3, 1000, 64), (1, 2, 777, 128), (1, 1, 4096, 64)]
CONFIGS = [{}, {"BF_WARPS": 4, "BF_MIN_BLOCKS": 0}, {"BF_WARPS": 8, "BF_MIN_BLOCKS": 0}, {"BF_BN": 32}, {"BF_BN": 128},
           {"BF_WARPS": 4, "BF_M_TILES": 2, "BF_MIN_BLOCKS": 0},
           {"BF_WARPS": 4, "BF_M_TILES": 2, "BF_BN": 32, "BF_MIN_BLOCKS": 0}]


@pytest.mark.backend
@pytest.mark.parametrize("config", [CONFIGS[1], CONFIGS[4], CONFIGS[6]], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_the_bf16_forward_in_other_tile_configurations(backend, config):
    Q, K, V = bf16_operands((1, 2, 150, 16), seed=17)
    O, lse = B16.attention_forward(Q, K, V, True, config=config)
    O_ref, lse_ref = A.reference(*as64(Q, K, V), True)
    assert_close(O, O_ref, BF16_TOL, f"version 4 with {config}: O")
    assert_close(lse, lse_ref, 1e-5, f"version 4 with {config}: log-sum-exp")


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
@pytest.mark.parametrize("shape", GPU_SHAPES[:2], ids=["1000x64", "777x128"])
def test_the_bf16_forward_on_the_tensor_cores(backend, shape, config, causal):
    Q, K, V = bf16_operands(shape, seed=11)
    O, lse = B16.attention_forward(Q, K, V, causal, config=config)
    O_ref, lse_ref = A.reference(*as64(Q, K, V), causal)
    assert_close(O, O_ref, BF16_TOL, "version 4: O")
    assert_close(lse, lse_ref, 1e-5, "version 4: log-sum-exp")


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("config", [{}, {"BF_BWD_WARPS": 4}, {"BF_BWD_WARPS": 4, "BF_BWD_BQ": 32}, {"BF_BWD_BQ": 32}],
                         ids=["default", "4 warps", "4 warps, 32 queries", "32 queries"])
@pytest.mark.parametrize("shape", GPU_SHAPES[:2], ids=["1000x64", "777x128"])
def test_the_bf16_backward_on_the_tensor_cores(backend, shape, config, causal):
    Q, K, V = bf16_operands(shape, seed=12)
    dO = B16.bf16(operands(shape, seed=13)[0])
    O, lse = B16.attention_forward(Q, K, V, causal, config=config)
    for name, got, expected in zip(("dQ", "dK", "dV"), B16.attention_backward(Q, K, V, O, lse, dO, causal, config=config),
                                   A.backward_reference(*as64(Q, K, V, dO), causal)):
        assert_close(got, expected, 3 * BF16_TOL, f"BF16 backward: {name}")


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_every_float_version_at_a_long_sequence(backend, causal):
    """N = 4096 (the goals' length), one head: 64 key tiles per row, the float versions and the BF16 ones."""
    shape = GPU_SHAPES[2]
    Q, K, V = operands(shape, seed=14)
    O_ref, lse_ref = A.reference(Q, K, V, causal)
    assert_close(A.attention_unfused(Q, K, V, causal), O_ref, 1e-5, "version 1")
    O, lse = A.attention_forward(Q, K, V, causal)
    assert_close(O, O_ref, 1e-5, "version 3")
    assert_close(lse, lse_ref, 1e-5, "version 3: log-sum-exp")
    Qb, Kb, Vb = (B16.bf16(a) for a in (Q, K, V))
    Ob, lseb = B16.attention_forward(Qb, Kb, Vb, causal)
    assert_close(Ob, A.reference(*as64(Qb, Kb, Vb), causal)[0], BF16_TOL, "version 4")


# --------------------------------------------------------------------------- the records


SMALL = {"batch": 2, "heads": 3, "seq": 70, "head_dim": 64, "causal": 1}


def _run_attention(version, rng):
    shape = (SMALL["batch"], SMALL["heads"], SMALL["seq"], SMALL["head_dim"])
    Q, K, V = operands(shape, seed=15)
    if version.topic == B16.TOPIC:
        Q, K, V = (B16.bf16(a) for a in (Q, K, V))
        O, lse = B16.attention_forward(Q, K, V, True)
        return B16.attention_backward(Q, K, V, O, lse, Q, True) if "forward" not in version.kernel else O
    if version.kernel == "attention_online_softmax":
        return A.online_softmax(rng.standard_normal((30, 70)).astype(np.float32))
    if version.launcher is A.attention_unfused:
        return A.attention_unfused(Q, K, V, True)
    O, lse = A.attention_forward(Q, K, V, True)
    return A.attention_backward(Q, K, V, O, lse, Q, True) if version.kernel != "attention_forward_float" else O


RECORDS = [(module, kernel) for module in (A, B16) for kernel in module.KERNELS]


@pytest.mark.backend
@pytest.mark.parametrize("module, kernel", RECORDS, ids=[k for _, k in RECORDS])
def test_the_record_launches_as_its_launcher_does(backend, launches, module, kernel):
    version = module.KERNELS[kernel]
    _run_attention(version, np.random.default_rng(0))
    mine = [config for name, config in launches if name == kernel]
    assert mine, f"the launcher of {kernel} did not launch it"
    shape = {"rows": 30, "cols": 70} if kernel == "attention_online_softmax" else SMALL
    assert mine[0] == version.launch(shape)


@pytest.mark.parametrize("module", [A, B16], ids=["attention", "attention_bf16"])
def test_every_kernel_has_a_record_a_number_and_a_title(module):
    from kernels.runtime.signature import parse_kernels
    from kernels.runtime.sources import source_path

    declared = parse_kernels(source_path(module.TOPIC).read_text(), f"{module.TOPIC}.cu", module.defines(64))
    assert set(declared) == set(module.KERNELS)
    for name, version in module.KERNELS.items():
        assert version.topic == module.TOPIC and version.kernel == name
        assert importlib.import_module(version.launcher.__module__) is module
        assert version.number in (1, 2, 3, 4, 5) and version.title
    rungs = {v.number for m in (A, B16) for v in m.KERNELS.values()}
    assert rungs == {1, 2, 3, 4, 5}, "the chapter's ladder runs 1 to 5 across its two files"


def test_the_records_count_the_work_of_the_mask():
    full, causal = {**SMALL, "causal": 0}, SMALL
    n = SMALL["seq"]
    assert A.forward_flops(causal) / A.forward_flops(full) == pytest.approx((n + 1) / (2 * n))
    assert A.backward_flops(full) == 2.5 * A.forward_flops(full)
    assert B16.KERNELS["attention_forward_bf16"].bytes(full) < A.KERNELS["attention_forward_float"].bytes(full)


def test_a_record_of_the_fused_kernels_refuses_another_head_dimension():
    with pytest.raises(ValueError, match="head dimension 64"):
        A.KERNELS["attention_forward_float"].launch({**SMALL, "head_dim": 128})
    with pytest.raises(ValueError, match="16, 32, 48"):
        A.defines(40)


# --------------------------------------------------------------------------- the numerics the chapter tabulates


def test_the_numerics_models_rank_the_precisions():
    from kernels.attention import numerics

    [row] = numerics.error_table(lengths=(1024,))
    assert row["float32"] < 1e-5 < row["bf16"] < 1e-2 < row["bf16 accumulation"]
    assert np.isnan(numerics.without_running_max(np.array([[1.0, 100.0, 3.0]]))).any()
    assert np.isnan(numerics.masked_row(guarded=False)).all() and not numerics.masked_row(guarded=True).any()


@pytest.mark.backend
def test_the_bf16_model_is_the_arithmetic_of_version_4(backend):
    """The NumPy model of version 4's rounding agrees with version 4 to BF16's last bit or so."""
    from kernels.attention import numerics

    Q, K, V = bf16_operands((1, 1, 100, 32), seed=16)
    O, _ = B16.attention_forward(Q, K, V)
    model = numerics.forward_model(*(np.asarray(a[0, 0], np.float32) for a in (Q, K, V)), "bf16")
    assert np.abs(np.asarray(O[0, 0], np.float64) - model).max() <= 2 ** -7 * np.abs(model).max()
