"""Benchmark of the chapter "Convolutional layers": every direct-convolution kernel against cuDNN, and LeNet-5.

    PYTHONPATH=$PWD DLK_BACKEND=gpu python3 -m benchmarks.cnn                  # the three results files below
    PYTHONPATH=$PWD DLK_BACKEND=gpu python3 -m benchmarks.cnn --only backward  # cnn_backward.json alone (~2 min)
    PYTHONPATH=$PWD DLK_BACKEND=gpu python3 -m benchmarks.cnn --only training-step  # cnn_training_step.json

* forward: every version of kernels/conv/conv2d.cu on LeNet's C1 and C3 at batch 64 and on a larger layer
  (N 128, C 64, 56 x 56, M 64, 3 x 3, no padding), against cuDNN (torch.nn.functional.conv2d with TF32
  off) measured in the same run; the fused conv + bias + ReLU + 2 x 2 max-pool kernels (version 6, and
  version 7 with pooling) against cuDNN's convolution alone and against torch's conv2d + relu + max_pool2d;
* LeNet-5 trained on scikit-learn's digits (32 x 32) with the book's kernels: loss and accuracy per
  epoch, and the time per training step;
* the whole training step (its own file, ``cnn_training_step.json``): LeNet-5's forward, backward and
  update with the book's kernels against the same network, weights and minibatches in PyTorch, from the
  host minibatch to the loss and predictions back on the host, same run (wall time per step, median);
* backward (its own results file, ``cnn_backward.json``, so that it can be measured alone): every
  version of kernels/conv/conv2d_backward.cu on the same three layers, the newer ones in a few
  configurations each (``backward_variants``), against PyTorch's own gradients measured in the same
  run (torch.nn.grad.conv2d_input / conv2d_weight, i.e. cuDNN, and a sum for the bias).

The results files have the layout of every benchmark (``benchmarks/common.py``): one row per timed
kernel or peer in ``results``, each row naming its ``layer`` and sizes.  ``cnn.json`` holds the groups
"forward" and "forward_fused", ``summary["goal"]`` (the fastest direct kernel of each LeNet layer
against cuDNN) and ``lenet`` (the training history); ``cnn_backward.json`` holds the group "backward"
(each row with its ``gradient``, ``version`` and ``config``) and ``summary["goal"]`` (the fastest kernel
of each layer and gradient against PyTorch).

Every kernel is first checked against a float64 result, then timed with CUDA events (warm-up, L2 flush
before each call, median).  Each speed is given in GB/s and GFLOP/s and as % of the roof that applies
(the measured copy bandwidth or FP32 peak).  The tables printed last are the summaries.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


from benchmarks.common import (Contract, losses_agree, now_utc, require_gpu_backend, time_training_steps, timed_row,
                               torch_sgd_step, untimed_row, write_results)
from kernels.conv import conv2d, conv2d_backward as cb
from kernels.models import lenet
from kernels.runtime import empty, selection, to_device
from kernels.runtime.timing import time_kernel, time_torch
from kernels.tools.roofline import achieved, measure_peaks, peaks_as_dict

# --- the results files and what the book reads in them --------------------------------------
NAME = "cnn"
BACKWARD_NAME = "cnn_backward"  # the backward group's results file: benchmarks/results/cnn_backward.json
TRAINING_STEP_NAME = "cnn_training_step"  # LeNet-5's whole step against PyTorch's: cnn_training_step.json
FORWARD, FORWARD_FUSED, BACKWARD, TRAINING_STEP = "forward", "forward_fused", "backward", "training_step"
#: (label, N, C, H, W, M, K): the layers of the "measure it" section.
LAYERS = (
    ("LeNet C1", 64, 1, 32, 32, 6, 5),
    ("LeNet C3", 64, 6, 14, 14, 16, 5),
    ("large 56x56 C64 M64 3x3", 128, 64, 56, 56, 64, 3),
)
LAYER_NAMES = LENET_C1, LENET_C3, LARGE_LAYER = tuple(label for label, *_ in LAYERS)
#: The forward rows of our kernels are named by the version (kernels/conv/conv2d.py's KERNEL_NAMES keys).
FORWARD_VERSIONS = NAIVE, CONSTANT, TILED, TILED_MULTIMAP, REGISTER_TILED, WHOLE_SAMPLE = (
    "naive", "constant", "tiled", "tiled_multimap", "register_tiled", "whole_sample")
#: Each version beside the one it builds on.
FORWARD_STEPS = ((CONSTANT, NAIVE), (TILED, NAIVE), (TILED_MULTIMAP, TILED), (REGISTER_TILED, TILED_MULTIMAP),
                 (WHOLE_SAMPLE, TILED_MULTIMAP))
CUDNN = "cuDNN conv2d"
FUSED, WHOLE_SAMPLE_FUSED = "fused conv+bias+relu+maxpool", "whole_sample conv+bias+relu+maxpool"
TORCH_CHAIN = "torch conv2d+relu+max_pool2d"
#: The part of cnn.json that holds LeNet-5's training run.
LENET = "lenet"
#: What a backward row computes (its ``gradient``): one gradient, or the weight and the bias together.
GRADIENTS = INPUT, WEIGHT, BIAS = "input", "weight", "bias"
WEIGHT_AND_BIAS = "weight+bias"
#: The gradients a backward row computes, and the PyTorch call it is compared with.
TORCH_PEERS = {
    INPUT: "torch conv2d_input",
    WEIGHT: "torch conv2d_weight",
    BIAS: "torch sum over (N, H, W)",
    WEIGHT_AND_BIAS: "torch conv2d_weight + sum",
}
#: Versions 1-4 of the backward kernels, as their rows are named, and of them the teaching version of each
#: gradient (versions 1, 3 and 4): the baseline the newer ones are measured from.
BACKWARD_TEACHING_ROWS = BACKWARD_INPUT_1, BACKWARD_WEIGHT_NAIVE, BACKWARD_WEIGHT_REDUCE, BACKWARD_BIAS_4 = (
    "backward_input", "backward_weight_naive", "backward_weight_reduce", "backward_bias")
BACKWARD_BASELINES = {INPUT: BACKWARD_INPUT_1, WEIGHT: BACKWARD_WEIGHT_REDUCE, BIAS: BACKWARD_BIAS_4}
#: The bias gradient's versions 6 and 12, whose rows are named "<prefix> S=<splits>" (S=auto: the default plan).
BIAS_SPLIT, BIAS_PLANES = "bias_split", "bias_planes"


def counted_for(gradient: str) -> tuple[str, ...]:
    """The ``gradient`` values of the rows that count for ``gradient``: a kernel computing the weight and the bias
    together counts for the weight gradient (against PyTorch's weight gradient alone, which does less)."""
    return (WEIGHT, WEIGHT_AND_BIAS) if gradient == WEIGHT else (gradient,)


CONTRACT = Contract(
    NAME, groups=(FORWARD, FORWARD_FUSED),
    rows={FORWARD: (CUDNN, *FORWARD_VERSIONS), FORWARD_FUSED: (FUSED, WHOLE_SAMPLE_FUSED, TORCH_CHAIN)},
    values={"layer": LAYER_NAMES}, sections=("peaks", "summary", LENET),
)
BACKWARD_CONTRACT = Contract(
    BACKWARD_NAME, groups=(BACKWARD,), rows={BACKWARD: (*TORCH_PEERS.values(), *BACKWARD_TEACHING_ROWS)},
    prefixes={BACKWARD: (BIAS_SPLIT, BIAS_PLANES)},
    values={"layer": LAYER_NAMES, "gradient": (*GRADIENTS, WEIGHT_AND_BIAS)}, sections=("summary",),
)
TRAINING_STEP_CONTRACT = Contract(TRAINING_STEP_NAME, groups=(TRAINING_STEP,))

TOL = 1e-4  # relative Frobenius error allowed in float32
TRAIN_EPOCHS = 15
TRAIN_BATCH = 64
TRAIN_LR = 0.05


def rel_error(out, ref) -> float:
    out = np.asarray(out, np.float64).reshape(ref.shape)
    if not np.isfinite(out).all():
        return float("inf")
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300))


def timed(fn, slow: bool = False):
    if slow:
        return time_kernel(fn, warmup=1, repeat=5, max_repeat=5)
    return time_kernel(fn, warmup=5, repeat=30, max_repeat=100)


def result_row(name, group, kind, layer: dict, nbytes, flops, timing, peaks, **extra) -> dict:
    """One row of the results: the common layout, the layer it ran on, and the roof that applies."""
    a = achieved(nbytes, flops, timing.median_s, peaks)
    return timed_row(name, group, kind, timing.median_ms, nbytes, flops, peaks.bandwidth_gbs, min_ms=timing.min_ms,
                     samples=len(timing.samples_ms), **layer, **extra, bound=a.bound,
                     percent_of_limit=a.percent_of_limit)


def layer_fields(label, N, C, H, W, M, K) -> dict:
    return {"layer": label, "N": N, "C": C, "H": H, "W": W, "M": M, "K": K}


def bench_forward(peaks, rng) -> list[dict]:
    """Rows of the groups "forward" and "forward_fused"."""
    import torch
    import torch.nn.functional as F

    rows = []
    for label, N, C, H, W, M, K in LAYERS:
        layer = layer_fields(label, N, C, H, W, M, K)
        X = rng.standard_normal((N, C, H, W), dtype=np.float32)
        Wf = (rng.standard_normal((M, C, K, K)) / np.sqrt(C * K * K)).astype(np.float32)
        b = rng.standard_normal(M, dtype=np.float32) * 0.1
        tX, tW, tb = (torch.from_numpy(a).cuda() for a in (X, Wf, b))
        ref = F.conv2d(tX.double(), tW.double(), tb.double()).cpu().numpy()
        shape = {"N": N, "C": C, "H": H, "W": W, "M": M, "K": K}
        nbytes, flops = conv2d.KERNELS["conv2d_forward_naive"].bytes(shape), conv2d.KERNELS["conv2d_forward_naive"].flops(shape)
        cudnn = time_torch(lambda: F.conv2d(tX, tW, tb), repeat=50)
        rows.append(result_row(CUDNN, FORWARD, "peer", layer, nbytes, flops, cudnn, peaks))
        X_d, W_d, b_d = to_device(X), to_device(Wf), to_device(b)
        N_, M_, H_out, W_out = conv2d.output_shape(X.shape, Wf.shape)
        Y_d = empty((N, M, H_out, W_out))
        for version, kernel_name in conv2d.KERNEL_NAMES.items():
            if version == "fused":
                continue
            W_grid = conv2d.grid_width(version, W_out)
            if version == "constant" and Wf.size > conv2d.CONSTANT_CAPACITY:
                rows.append(untimed_row(version, FORWARD, "kernel", **layer, skipped=
                                        f"filter bank of {Wf.size} floats > {conv2d.CONSTANT_CAPACITY} (64 KiB of constant memory)"))
                continue
            if version == "whole_sample" and not conv2d.whole_sample_fits(C, H, W, K):
                rows.append(untimed_row(version, FORWARD, "kernel", **layer, skipped=
                                        f"sample + filters need {conv2d.whole_sample_shared_bytes(C, H, W, K)} B of "
                                        f"shared memory > {conv2d.SHARED_LIMIT}"))
                continue
            kernel = conv2d.module().function(kernel_name)
            config = conv2d.KERNELS[kernel_name].launch(shape)
            args = (X_d, b_d, Y_d) if version == "constant" else (X_d, W_d, b_d, Y_d)
            if version == "constant":
                conv2d.set_constant_filters(Wf)
            # Version 7 takes (activation, pool) where the others take W_grid: none, no pooling here.
            last = (conv2d.ACTIVATIONS["none"], 0) if version == "whole_sample" else (W_grid,)
            prepared = kernel.prepare((*args, N, C, H, W, M, K, *last), config.grid, config.block, config.shared)
            Y_d.set(np.full(Y_d.shape, np.nan, np.float32))
            kernel.launch_prepared(prepared)
            err = rel_error(Y_d.get(), ref)
            t = timed(lambda: kernel.launch_prepared(prepared, sync=False), slow=(version == "naive" and N * C > 4096))
            rows.append(result_row(version, FORWARD, "kernel", layer, nbytes, flops, t, peaks,
                                   rel_error=err, correct=err < TOL))
            print(f"  {label:<26} {version:<16} {t.median_ms * 1e3:9.1f} µs  (cuDNN {cudnn.median_ms * 1e3:.1f} µs)",
                  flush=True)
        if (H_out >= 2 and W_out >= 2) and Wf.size <= conv2d.CONSTANT_CAPACITY:
            rows += bench_fused(peaks, layer, X, Wf, b, X_d, W_d, b_d, tX, tW, tb, flops, cudnn)
    return rows


def bench_fused(peaks, layer, X, Wf, b, X_d, W_d, b_d, tX, tW, tb, flops, cudnn) -> list[dict]:
    """Rows of the group "forward_fused": conv2d_bias_act_pool_fused, and conv2d_forward_whole_sample with
    pool = 1 (both with ReLU), against cuDNN's convolution alone and torch's conv + relu + pool."""
    import torch.nn.functional as F

    N, C, H, W = X.shape
    M, _, K, _ = Wf.shape
    H_out, W_out = H - K + 1, W - K + 1
    P_d = empty((N, M, H_out // 2, W_out // 2))
    conv2d.set_constant_filters(Wf)
    kernel = conv2d.module().function("conv2d_bias_act_pool_fused")
    grid, block, _ = conv2d.launch_config("fused", N, C, H, W, M, K)
    prepared = kernel.prepare((X_d, b_d, P_d, N, C, H, W, M, K, conv2d.ACTIVATIONS["relu"]), grid, block, 0)
    P_d.set(np.full(P_d.shape, np.nan, np.float32))
    kernel.launch_prepared(prepared)
    err = rel_error(P_d.get(), conv2d.fused_reference(X, Wf, b, "relu"))
    t = timed(lambda: kernel.launch_prepared(prepared, sync=False))
    torch_chain = time_torch(lambda: F.max_pool2d(F.relu(F.conv2d(tX, tW, tb)), 2), repeat=50)
    nbytes = conv2d.KERNELS["conv2d_bias_act_pool_fused"].bytes(layer)
    rows = [result_row(FUSED, FORWARD_FUSED, "kernel", layer, nbytes, flops, t, peaks,
                       rel_error=err, correct=err < TOL, speedup_vs_cudnn_conv=cudnn.median_ms / t.median_ms,
                       speedup_vs_torch_chain=torch_chain.median_ms / t.median_ms)]
    if conv2d.whole_sample_fits(C, H, W, K):
        kernel7 = conv2d.module().function("conv2d_forward_whole_sample")
        grid7, block7, shared7 = conv2d.launch_config("whole_sample", N, C, H, W, M, K)
        prepared7 = kernel7.prepare((X_d, W_d, b_d, P_d, N, C, H, W, M, K, conv2d.ACTIVATIONS["relu"], 1),
                                    grid7, block7, shared7)
        P_d.set(np.full(P_d.shape, np.nan, np.float32))
        kernel7.launch_prepared(prepared7)
        err7 = rel_error(P_d.get(), conv2d.fused_reference(X, Wf, b, "relu"))
        t7 = timed(lambda: kernel7.launch_prepared(prepared7, sync=False))
        rows.append(result_row(WHOLE_SAMPLE_FUSED, FORWARD_FUSED, "kernel", layer, nbytes, flops,
                               t7, peaks, rel_error=err7, correct=err7 < TOL,
                               speedup_vs_cudnn_conv=cudnn.median_ms / t7.median_ms))
    rows.append(result_row(TORCH_CHAIN, FORWARD_FUSED, "peer", layer, nbytes, flops, torch_chain,
                           peaks))
    return rows


def backward_variants(label, N, C, H, W, M, K) -> list[tuple]:
    """The kernels the backward group times on one layer: (gradient, row name, kernel, launcher, options).

    Each new version is timed in its default configuration and in a few others, each differing in one
    design choice, so that one run shows which choice pays on which layer.  The launcher is called with
    device buffers and ``prepare_only=True``; ``options`` are its keyword arguments.  Rows whose launch
    the layer cannot take (shared memory, a filter size) are recorded as skipped, with the reason.
    """
    small = K == 5 and N * C * H * W <= 2**20   # LeNet's layers: the shared-memory versions apply
    shape = {"N": N, "C": C, "H": H, "W": W, "M": M, "K": K}
    rows, seen = [], set()

    def add(gradient, kernel, launcher, options, plan_key, name):
        """One row, unless an earlier one launches the same configuration (a default that equals a variant)."""
        try:
            key = (kernel, plan_key())
        except ValueError:  # the launcher will refuse it too, and the row says why
            key = (kernel, name)
        if key not in seen:
            seen.add(key)
            rows.append((gradient, name, kernel, launcher, options))

    def label(value):
        return "auto" if value is None else value

    if small:
        # Staging: cp.async (the default) or through registers, 8 loads in flight per thread (STAGE_ASYNC 0).
        for splits, tasks, staging in ((None, 2, 1), (None, 1, 1), (None, 2, 0), (N, 2, 1), (N // 2, 2, 1),
                                       (N // 4, 2, 1), (N // 8, 2, 1)):
            defines = {"WB_TASKS": tasks, "STAGE_ASYNC": staging}
            add(WEIGHT_AND_BIAS, "conv2d_backward_weight_bias_split", cb.backward_weight_bias_split,
                {"splits": splits, "defines": defines},
                lambda: (cb.weight_split_plan(shape, splits, defines)["splits"], tasks, staging),
                f"weight_bias_split S={label(splits)} tasks={tasks}{'' if staging else ' via registers'}")
        for rw, cbk, tile_rows, staging in ((2, 1, None, 1), (2, 1, None, 0), (1, 1, None, 1), (4, 1, None, 1),
                                            (2, 2, None, 1), (2, 3, None, 1), (2, 1, max(1, H // 4), 1)):
            if cbk > C:  # channel groups larger than the layer's channels: the same launch as CB = C
                continue
            defines = {"BI_RW": rw, "BI_CB": cbk, "STAGE_ASYNC": staging}
            add(INPUT, "conv2d_backward_input_shared", cb.backward_input_shared,
                {"rows": tile_rows, "defines": defines},
                lambda: (cb.input_shared_plan(shape, tile_rows, defines)["rows"], rw, cbk, staging),
                f"input_shared RW={rw} CB={cbk} rows={label(tile_rows)}{'' if staging else ' via registers'}")
        for rw, cbk in ((2, 1), (1, 1), (2, 2), (1, 2), (2, 3)):
            if cbk > C:
                continue
            defines = {"BI_RW": rw, "BI_CB": cbk}
            add(INPUT, "conv2d_backward_input_fixed", cb.backward_input_fixed, {"defines": defines},
                lambda: (rw, cbk), f"input_fixed RW={rw} CB={cbk}")
    for splits in (None, N, N // 2) if small else (None, 8, 32, 128):
        add(BIAS, "conv2d_backward_bias_split", cb.backward_bias_split, {"splits": splits},
            lambda: cb.bias_split_plan(shape, splits)["splits"], f"{BIAS_SPLIT} S={label(splits)}")
        add(BIAS, "conv2d_backward_bias_planes", cb.backward_bias_planes, {"splits": splits},
            lambda: cb.bias_planes_plan(shape, splits)["splits"], f"{BIAS_PLANES} S={label(splits)}")
    gemm_configs = [("64x128x16 NQ2", None)]
    if not small:
        gemm_configs += [("64x128x8 NQ2", {"IG_BK": 8}),
                         ("64x256x8 NQ4 2/SM", {"IG_BN": 256, "IG_BK": 8, "IG_NQ": 4, "IG_MIN_BLOCKS": 2})]
    for tile, config in gemm_configs:
        add(INPUT, "conv2d_backward_flip_filters", cb.backward_input_gemm, {"config": config},
            lambda: tile, f"input_gemm {tile}")
    if K == 3:  # the GEMM chapter's Winograd F(4x4, 3x3), with its products' tiles
        for tile, config in (("64x128x8", None), ("64x128x16", {"WT_BK": 16})):
            add(INPUT, "conv2d_winograd_inputs", cb.backward_input_winograd, {"config": config},
                lambda: tile, f"input_winograd {tile}")
    # Splits: the default (one wave of 6 blocks per SM of 132), two such waves, one wave of 4 blocks per SM,
    # and 16 blocks per SM (several waves, a small last one).
    auto = cb.weight_gemm_plan(shape)["splits"]
    tiles = -(-C * K * K // 64) * -(-M // 64)
    if small:
        weight_tiles = [(64, 16, None), (64, 16, max(1, 132 * 4 // tiles))]
    else:
        weight_tiles = [(64, 16, None), (128, 16, None), (64, 32, None), (64, 16, 2 * auto),
                        (64, 16, max(1, 132 * 4 // tiles)), (64, 16, max(1, 132 * 16 // tiles))]
    for bn, bk, splits in weight_tiles:
        defines = {"WG_BN": bn, "WG_BK": bk}
        add(WEIGHT_AND_BIAS, "conv2d_backward_weight_gemm", cb.backward_weight_bias_gemm,
            {"splits": splits, "defines": defines},
            lambda: (cb.weight_gemm_plan(shape, splits, defines)["splits"], bn, bk),
            f"weight_bias_gemm BN={bn} BK={bk} S={label(splits)}")
    return rows


def bench_backward(peaks, rng, variants: bool = True) -> list[dict]:
    """Rows of the group "backward": every version of kernels/conv/conv2d_backward.cu on each layer, and the
    PyTorch gradients (cuDNN for dX and dW) measured beside them in the same run.

    Each row names the ``gradient`` it computes ("input", "weight", "bias" or "weight+bias") and carries
    ``torch_ms``, the time of the PyTorch call computing the same gradients, and ``speedup_vs_torch``;
    rows computing weight and bias together also carry ``torch_weight_ms`` and ``speedup_vs_torch_weight``
    (against the weight gradient alone).  ``variants=False`` times each version in its default
    configuration only.
    """
    import torch
    from torch.nn import grad as tgrad

    out = []
    for label, N, C, H, W, M, K in LAYERS:
        X = rng.standard_normal((N, C, H, W), dtype=np.float32)
        Wf = (rng.standard_normal((M, C, K, K)) / np.sqrt(C * K * K)).astype(np.float32)
        H_out, W_out = H - K + 1, W - K + 1
        dY = rng.standard_normal((N, M, H_out, W_out), dtype=np.float32)
        tX, tW, tdY = (torch.from_numpy(a).cuda() for a in (X, Wf, dY))
        refs = {INPUT: (tgrad.conv2d_input(tX.shape, tW.double(), tdY.double()).cpu().numpy(),),
                WEIGHT: (tgrad.conv2d_weight(tX.double(), tW.shape, tdY.double()).cpu().numpy(),),
                BIAS: (tdY.double().sum(dim=(0, 2, 3)).cpu().numpy(),)}
        refs[WEIGHT_AND_BIAS] = refs[WEIGHT] + refs[BIAS]
        X_d, W_d, dY_d = to_device(X), to_device(Wf), to_device(dY)
        layer = layer_fields(label, N, C, H, W, M, K)
        shape = {"N": N, "C": C, "H": H, "W": W, "M": M, "K": K}
        shapes = {INPUT: [(N, C, H, W)], WEIGHT: [(M, C, K, K)], BIAS: [(M,)]}
        shapes[WEIGHT_AND_BIAS] = shapes[WEIGHT] + shapes[BIAS]

        peers = {INPUT: lambda: tgrad.conv2d_input(tX.shape, tW, tdY),
                 WEIGHT: lambda: tgrad.conv2d_weight(tX, tW.shape, tdY),
                 BIAS: lambda: tdY.sum(dim=(0, 2, 3)),
                 WEIGHT_AND_BIAS: lambda: (tgrad.conv2d_weight(tX, tW.shape, tdY), tdY.sum(dim=(0, 2, 3)))}
        torch_ms = {}
        for gradient, call in peers.items():
            t = time_torch(call, repeat=50)
            torch_ms[gradient] = t.median_ms
            record = cb.KERNELS["conv2d_backward_bias" if gradient == BIAS else "conv2d_backward_weight_reduce"
                                if gradient in counted_for(WEIGHT) else "conv2d_backward_input"]
            out.append(result_row(TORCH_PEERS[gradient], BACKWARD, "peer", layer, record.bytes(shape),
                                  record.flops(shape), t, peaks, gradient=gradient))

        def record_row(gradient, name, kernel, enqueue, outs, config=None):
            for buffer in outs:
                buffer.set(np.full(buffer.shape, np.nan, np.float32))
            enqueue()
            err = max(rel_error(buffer.get(), ref) for buffer, ref in zip(outs, refs[gradient]))
            slow = N * C * H * W > 2**22 and kernel in ("conv2d_backward_weight_reduce", "conv2d_backward_input")
            t = timed(enqueue, slow=slow)
            # Version 8 launches the implicit GEMM after it, and its Winograd twin the GEMM chapter's Winograd: count
            # the whole input gradient, in the direct method's operations (as cuDNN's rows are counted).
            whole_input = kernel in ("conv2d_backward_flip_filters", "conv2d_winograd_inputs")
            record = cb.KERNELS["conv2d_backward_input" if whole_input else kernel]
            nbytes, flops = record.bytes(shape), record.flops(shape)
            extra = {}
            if gradient == WEIGHT_AND_BIAS:
                extra = {"torch_weight_ms": torch_ms[WEIGHT], "speedup_vs_torch_weight": torch_ms[WEIGHT] / t.median_ms}
            out.append(result_row(name, BACKWARD, "kernel", layer, nbytes, flops, t, peaks, gradient=gradient,
                                  version=kernel, config=config or {}, rel_error=err, correct=err < TOL, torch_ms=torch_ms[gradient],
                                  speedup_vs_torch=torch_ms[gradient] / t.median_ms, **extra))
            print(f"  {label:<26} {name:<44} {t.median_ms * 1e3:9.1f} µs  (torch {torch_ms[gradient] * 1e3:.1f} µs) "
                  f"{'' if err < TOL else 'WRONG'}", flush=True)

        # Versions 1-4, launched as their records say.
        teaching = [
            (INPUT, BACKWARD_INPUT_1, "conv2d_backward_input",
             lambda o: (dY_d, W_d, o, N, C, H, W, M, K, -(-W // cb.TILE_WIDTH))),
            (WEIGHT, BACKWARD_WEIGHT_NAIVE, "conv2d_backward_weight_naive",
             lambda o: (X_d, dY_d, o, N, C, H, W, M, K)),
            (WEIGHT, BACKWARD_WEIGHT_REDUCE, "conv2d_backward_weight_reduce",
             lambda o: (X_d, dY_d, o, N, C, H, W, M, K)),
            (BIAS, BACKWARD_BIAS_4, "conv2d_backward_bias", lambda o: (dY_d, o, N, M, H_out, W_out)),
        ]
        for gradient, name, kernel_name, args in teaching:
            if kernel_name == "conv2d_backward_weight_naive" and M * C * K * K * N * H_out * W_out > 2**32:
                out.append(untimed_row(name, BACKWARD, "kernel", **layer, gradient=gradient, version=kernel_name,
                                       skipped=f"one thread per weight: {M * C * K * K:,} threads summing "
                                               f"{N * H_out * W_out:,} products each, seconds per call"))
                continue
            config = cb.KERNELS[kernel_name].launch(shape)
            outs = [empty(s) for s in shapes[gradient]]
            kernel = cb.module().function(kernel_name)
            prepared = kernel.prepare(args(outs[0]), config.grid, config.block, config.shared)
            record_row(gradient, name, kernel_name, lambda: kernel.launch_prepared(prepared, sync=False), outs)

        # Versions 5-10, through their launchers, in the configurations backward_variants lists.
        operands = {INPUT: (dY_d, W_d, (N, C, H, W)), WEIGHT_AND_BIAS: (X_d, dY_d, K), BIAS: (dY_d,)}
        chosen = backward_variants(label, N, C, H, W, M, K)
        if not variants:
            chosen = [row for row in chosen if row[1] == next(r[1] for r in chosen if r[2] == row[2])]
        for gradient, name, kernel_name, launcher, options in chosen:
            outs = [empty(s) for s in shapes[gradient]]
            names = ["out", "out_bias"][:len(outs)]
            try:
                enqueue = launcher(*operands[gradient], **options, **dict(zip(names, outs)), prepare_only=True)
            except ValueError as exc:  # the layer does not fit this configuration: say why
                out.append(untimed_row(name, BACKWARD, "kernel", **layer, gradient=gradient, version=kernel_name,
                                       config=_jsonable(options), skipped=str(exc)))
                continue
            record_row(gradient, name, kernel_name, enqueue, outs, _jsonable(options))
    return out


def _jsonable(options: dict) -> dict:
    return {k: v for k, v in options.items() if v is not None}


def backward_goals(rows: list[dict]) -> list[dict]:
    """For each layer and gradient: the fastest correct kernel against PyTorch doing that gradient alone.

    A kernel computing weight and bias together counts for the weight gradient, against PyTorch's weight
    gradient alone (it does more in that time); the bias gradient counts only kernels of the bias alone.
    """
    goals = []
    for label in dict.fromkeys(r["layer"] for r in rows if r["group"] == BACKWARD):
        here = [r for r in rows if r["group"] == BACKWARD and r["layer"] == label and "median_ms" in r]
        for gradient in GRADIENTS:
            peer = next((r for r in here if r["kind"] == "peer" and r["gradient"] == gradient), None)
            kinds = counted_for(gradient)
            mine = [r for r in here if r["kind"] == "kernel" and r["gradient"] in kinds and r.get("correct")]
            if peer is None or not mine:
                continue
            best = min(mine, key=lambda r: r["median_ms"])
            goals.append({"layer": label, "gradient": gradient, "best": best["name"], "best_version": best["version"],
                          "best_ms": best["median_ms"], "torch_ms": peer["median_ms"],
                          "speedup": peer["median_ms"] / best["median_ms"], "met": best["median_ms"] <= peer["median_ms"]})
    return goals


def bench_lenet(epochs: int) -> dict:
    X_train, X_test, y_train, y_test = lenet.load_digits_32()
    model = lenet.KernelLeNet(lenet.init_params(seed=0), **lenet.FASTEST)
    start = time.perf_counter()
    history = lenet.train(model, X_train, y_train, X_test, y_test, epochs=epochs, batch_size=TRAIN_BATCH,
                          learning_rate=TRAIN_LR, seed=0,
                          progress=lambda e, h: print(f"  LeNet epoch {e + 1:2d}: loss {h.train_loss[-1]:.4f}, "
                                                      f"test accuracy {h.test_accuracy[-1]:.4f}", flush=True))
    total = time.perf_counter() - start
    # Time of one training step (forward, backward, update), synchronised, averaged over an epoch's steps.
    steps = lenet.epoch_batches(len(X_train), TRAIN_BATCH, np.random.default_rng(1))
    selection.current_backend().synchronize()
    t0 = time.perf_counter()
    for batch in steps:
        model.train_step(X_train[batch], y_train[batch], TRAIN_LR)
    selection.current_backend().synchronize()
    step_ms = (time.perf_counter() - t0) / len(steps) * 1e3
    return {"epochs": epochs, "batch_size": TRAIN_BATCH, "learning_rate": TRAIN_LR, "train_samples": len(X_train),
            "test_samples": len(X_test), "activation": "relu", "pooling": "max", "kernels": lenet.FASTEST,
            "train_loss": history.train_loss, "train_accuracy": history.train_accuracy,
            "test_loss": history.test_loss, "test_accuracy": history.test_accuracy,
            "seconds_per_epoch": history.seconds, "total_seconds": total, "step_ms_wall": step_ms}


#: Steps of the epoch timed (after as many untimed ones): the digits give 23 minibatches of 64 an epoch.
TIMED_STEPS = 20


def _torch_lenet_step():
    """The same LeNet-5 and SGD step in PyTorch (cuDNN, TF32 off), from the same initial weights:
    ``step(X, labels) -> (mean loss, predicted classes)``, host arrays in and out as the book's model takes them."""
    import torch
    import torch.nn.functional as F

    P = {k: tuple(torch.tensor(a, device="cuda", requires_grad=True) for a in pair)
         for k, pair in lenet.init_params(seed=0).items()}
    flat = [t for pair in P.values() for t in pair]

    def step(X, labels):
        x, y = torch.from_numpy(X).cuda(), torch.from_numpy(labels.astype(np.int64)).cuda()
        h = F.max_pool2d(F.relu(F.conv2d(x, *P["C1"])), lenet.POOL)
        h = F.max_pool2d(F.relu(F.conv2d(h, *P["C3"])), lenet.POOL)
        h = F.relu(F.conv2d(h, *P["C5"])).flatten(1)
        z = F.linear(F.relu(F.linear(h, *P["F6"])), *P["output"])
        loss = F.cross_entropy(z, y)
        torch_sgd_step(torch, flat, loss, TRAIN_LR)
        return loss.item(), z.argmax(1).cpu().numpy()

    return step


def measure_training_step() -> dict:
    """One LeNet-5 training step, forward, backward and update, from a host minibatch to the loss and the
    predictions back on the host: the book's kernels (``KernelLeNet``) against the same network in PyTorch,
    same run (GPU only): ``cnn_training_step.json``. The first step of each, from the same weights on the
    same minibatch, must give the same loss."""
    backend, torch, peaks = _setup()
    X_train, _, y_train, _ = lenet.load_digits_32()
    batches = lenet.epoch_batches(len(X_train), TRAIN_BATCH, np.random.default_rng(1))
    batches = (batches * 2)[: 2 * TIMED_STEPS]
    ours = lenet.KernelLeNet(lenet.init_params(seed=0), **lenet.FASTEST)
    steps = {"KernelLeNet.train_step (the book's kernels)": lambda X, y: ours.train_step(X, y, TRAIN_LR),
             "PyTorch (cuDNN) forward, autograd, SGD update": _torch_lenet_step()}
    rows, first_loss = [], {}
    for (name, step), kind in zip(steps.items(), ("kernel", "peer")):
        timed, first_loss[kind] = time_training_steps(step, X_train, y_train, batches, TIMED_STEPS)
        rows.append(timed_row(name, TRAINING_STEP, kind, float(np.median(timed)), None, None, None,
                              min_ms=float(np.min(timed)), samples=len(timed), layer=f"LeNet-5, batch {TRAIN_BATCH}",
                              first_step_loss=first_loss[kind]))
    rows[0]["speedup_vs_torch"] = rows[1]["median_ms"] / rows[0]["median_ms"]
    rows[0]["correct"] = losses_agree(first_loss["kernel"], first_loss["peer"])
    rows[0].update(launches=ours.launches_per_training_step(), kernels=lenet.FASTEST)
    return {"device": backend.describe(), "tf32": False, "cudnn_version": torch.backends.cudnn.version(),
            "batch_size": TRAIN_BATCH, "learning_rate": TRAIN_LR, "results": rows}


def print_summary(results: dict) -> None:
    rows = results["results"]
    print()
    print(f"Convolution forward on {results['device'].get('name', 'GPU')} (µs, median; speed-up = cuDNN time / ours)")
    print(f"{'layer':<26} {'version':<36} {'µs':>9} {'GB/s':>8} {'GFLOP/s':>9} {'% roof':>7} {'vs cuDNN':>9}")
    for label in dict.fromkeys(r["layer"] for r in rows if r["group"] == FORWARD):
        cudnn = next(r for r in rows if r["group"] == FORWARD and r["layer"] == label and r["kind"] == "peer")
        for r in (r for r in rows if r["group"] in (FORWARD, FORWARD_FUSED) and r["layer"] == label):
            if "median_ms" not in r:
                print(f"{label:<26} {r['name']:<36} {'n/a: ' + r.get('skipped', '')[:40]}")
                continue
            ok = "" if r.get("correct", True) else "  WRONG"
            print(f"{label:<26} {r['name']:<36} {r['median_ms'] * 1e3:>9.1f} {r['gbs']:>8.0f} {r['gflops']:>9.0f} "
                  f"{r['percent_of_limit']:>6.1f}% {cudnn['median_ms'] / r['median_ms']:>8.2f}x{ok}")
    for goal in results.get("summary", {}).get("goal", []):
        print(f"goal {goal['layer']}: best direct kernel {goal['best_version']} {goal['best_ms'] * 1e3:.1f} µs vs "
              f"cuDNN {goal['cudnn_ms'] * 1e3:.1f} µs -> {goal['speedup']:.2f}x ({'met' if goal['met'] else 'NOT met'}); "
              f"best unfused {goal['best_unfused_version']} {goal['best_unfused_speedup']:.2f}x")
    if LENET in results:
        le = results[LENET]
        print(f"LeNet-5 on the digits: test accuracy {le['test_accuracy'][-1]:.4f} after {le['epochs']} epochs, "
              f"{le['step_ms_wall']:.2f} ms per training step (batch {le['batch_size']})")


#: The fused rows that count for the goal, and the name the goal gives them.
FUSED_CANDIDATES = {FUSED: "fused", WHOLE_SAMPLE_FUSED: "whole_sample fused"}


def goals(rows: list[dict]) -> list[dict]:
    """For each LeNet layer: the fastest correct direct kernel (fused or not) against cuDNN."""
    out = []
    for label, *_ in LAYERS[:2]:
        here = [r for r in rows if r.get("layer") == label and "median_ms" in r]
        cudnn = next(r for r in here if r["group"] == FORWARD and r["kind"] == "peer")["median_ms"]
        candidates = [(r["name"], r["median_ms"]) for r in here
                      if r["group"] == FORWARD and r["kind"] == "kernel" and r.get("correct")]
        unfused = min(candidates, key=lambda c: c[1])
        candidates += [(FUSED_CANDIDATES[r["name"]], r["median_ms"]) for r in here
                       if r["group"] == FORWARD_FUSED and r["name"] in FUSED_CANDIDATES and r.get("correct")]
        best = min(candidates, key=lambda c: c[1])
        out.append({"layer": label, "cudnn_ms": cudnn, "best_version": best[0], "best_ms": best[1],
                    "speedup": cudnn / best[1], "met": best[1] <= cudnn,
                    "best_unfused_version": unfused[0], "best_unfused_speedup": cudnn / unfused[1]})
    return out


def _setup():
    """The GPU backend, with TF32 off in PyTorch (cuDNN computes in FP32 as our kernels do), and the measured peaks."""
    backend = require_gpu_backend()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    peaks = measure_peaks()
    print(f"{peaks.device}: {peaks.bandwidth_gbs:.0f} GB/s copy, {peaks.fp32_gflops:.0f} GFLOP/s FP32", flush=True)
    return backend, torch, peaks


def measure(epochs: int = TRAIN_EPOCHS) -> dict:
    """The forward figures of the chapter and the LeNet training run, measured now (GPU only): ``cnn.json``."""
    backend, torch, peaks = _setup()
    rng = np.random.default_rng(0)
    rows = bench_forward(peaks, rng)
    results = {"device": backend.describe(), "peaks": peaks_as_dict(peaks), "tf32": False,
               "cudnn_version": torch.backends.cudnn.version(), "summary": {"goal": goals(rows)}, "results": rows}
    if epochs > 0:
        results[LENET] = bench_lenet(epochs)
    return results


def measure_backward(variants: bool = True) -> dict:
    """The backward figures of the chapter, measured now (GPU only): ``cnn_backward.json``."""
    backend, torch, peaks = _setup()
    rows = bench_backward(peaks, np.random.default_rng(1), variants=variants)
    return {"benchmark": BACKWARD_NAME, "date": now_utc(),
            "device": backend.describe(), "peaks": peaks_as_dict(peaks), "tf32": False,
            "cudnn_version": torch.backends.cudnn.version(), "summary": {"goal": backward_goals(rows)},
            "results": rows}


def print_backward_summary(results: dict) -> None:
    rows = results["results"]
    print()
    print(f"Convolution backward on {results['device'].get('name', 'GPU')} (µs, median; speed-up = PyTorch / ours)")
    print(f"{'layer':<26} {'gradient':<12} {'kernel':<44} {'µs':>9} {'torch µs':>9} {'vs torch':>9}")
    for r in rows:
        if r["kind"] == "peer":
            continue
        if "median_ms" not in r:
            print(f"{r['layer']:<26} {r['gradient']:<12} {r['name']:<44} n/a: {r.get('skipped', '')[:60]}")
            continue
        ok = "" if r.get("correct") else "  WRONG"
        print(f"{r['layer']:<26} {r['gradient']:<12} {r['name']:<44} {r['median_ms'] * 1e3:>9.1f} "
              f"{r['torch_ms'] * 1e3:>9.1f} {r['speedup_vs_torch']:>8.2f}x{ok}")
    for goal in results["summary"]["goal"]:
        print(f"goal {goal['layer']} {goal['gradient']}: {goal['best']} {goal['best_ms'] * 1e3:.1f} µs vs torch "
              f"{goal['torch_ms'] * 1e3:.1f} µs -> {goal['speedup']:.2f}x ({'met' if goal['met'] else 'NOT met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=TRAIN_EPOCHS, help="LeNet training epochs (0 skips training)")
    parser.add_argument("--only", choices=("forward", "backward", "training-step"),
                        help="measure one group only: forward (cnn.json, with the training run), backward "
                             "(cnn_backward.json, about two minutes) or training-step (cnn_training_step.json, "
                             "LeNet-5's whole step against PyTorch's)")
    parser.add_argument("--defaults-only", action="store_true",
                        help="backward: time each version in its default configuration only, not the variants")
    args = parser.parse_args()
    if args.only in (None, "training-step"):
        step = measure_training_step()
        path = write_results(TRAINING_STEP_NAME, {k: v for k, v in step.items() if k != "device"})
        print(f"wrote {path}")
        for r in step["results"]:
            print(f"{r['name']:<48} {r['median_ms']:.3f} ms per step (median of {r['samples']}), "
                  f"first step's loss {r['first_step_loss']:.6f}")
        print(f"ours vs PyTorch: {step['results'][0]['speedup_vs_torch']:.2f}x; same first loss: "
              f"{step['results'][0]['correct']}")
    if args.only in (None, "forward"):
        results = measure(epochs=args.epochs)
        path = write_results(NAME, {k: v for k, v in results.items() if k != "device"})
        print(f"wrote {path}")
        print_summary(results)
    if args.only in (None, "backward"):
        backward = measure_backward(variants=not args.defaults_only)
        path = write_results(BACKWARD_NAME, {k: v for k, v in backward.items()
                                             if k not in ("device", "benchmark", "date")})
        print(f"wrote {path}")
        print_backward_summary(backward)


if __name__ == "__main__":
    main()
