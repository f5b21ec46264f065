"""Benchmark of the Perceptrons and MLP chapters: their kernels against PyTorch, in the same run.

Run on a GPU machine with ``make bench`` (or ``DLK_BACKEND=gpu python3 -m
benchmarks.perceptrons_mlp``).  Every kernel is first checked against its
NumPy reference at the benchmark size, then timed with CUDA events (warm-up,
L2 flushed before each call, median of the calls).  Writes
``benchmarks/results/perceptrons_mlp.json``, which the chapters show when they
are built without a GPU.

Groups of rows (``kind`` is "kernel" for ours, "peer" for PyTorch):

* ``gradient_sum_sweep``: the minibatch gradient sum, atomics against the
  shared-memory tree against ``torch.sum(dim=0)``, for n = 2^10 .. 2^24 rows of
  k = 3 (a 2-D perceptron's two weights and bias);
* ``perceptron``: per-sample gradients and inference at n = 2^24;
* ``fc_digits`` and ``fc_large``: the fully connected kernels at the digits
  network's size (128 x 64 -> 64) and at 4096 x 1024 -> 1024, and the same
  three products on the GEMM chapter's kernels (transposes and bias included),
  against cuBLAS through torch (TF32 off, so float32 against float32);
* ``softmax``: softmax + cross-entropy and ReLU at 65536 x 10;
* ``training_step``: the chapter's whole training step (the 64-64-10 network on the
  digits, minibatches of 64), from a host minibatch to the loss and predictions back
  on the host: ``KernelMLP`` with its teaching kernels and with ``mlp.FASTEST``
  against the same network and SGD step in PyTorch, from the same weights.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.common import (Contract, losses_agree, print_table, require_gpu_backend, row, time_training_steps,
                               time_version, timed_row, torch_sgd_step, write_results)
from kernels.dense import activations, fully_connected as fc, perceptron as P, softmax
from kernels.gemm import sgemm
from kernels.models import mlp
from kernels.runtime import empty, to_device, zeros
from kernels.runtime.timing import time_kernel, time_torch
from kernels.tools.roofline import Peaks, measure_bandwidth_gbs, measure_fp32_gflops

# --- the results file and what the book reads in it ------------------------------------------
NAME = "perceptrons_mlp"
GRADIENT_SUM_SWEEP, PERCEPTRON, SOFTMAX, TRAINING_STEP = "gradient_sum_sweep", "perceptron", "softmax", "training_step"
FC_DIGITS, FC_LARGE = "fc_digits", "fc_large"  # the dense layer at the digits network's size and at a large one
#: The gradient sums, in the order they are timed, and the library's sum.
GRADIENT_SUMS = SUM_ATOMIC, SUM_TREE, SUM_COLUMNS = "gradient_sum_atomic", "gradient_sum_tree", "gradient_sum_columns"
TORCH_SUM = "torch.sum(dim=0)"
PERCEPTRON_GRADIENTS, PERCEPTRON_FORWARD = "perceptron_sample_gradients", "perceptron_forward_sigmoid"
#: The dense layer's kernels (fully_connected versions 1-4), its products on the GEMM chapter's kernels, and cuBLAS's.
FC_KERNELS = FORWARD_NAIVE, FORWARD_TILED, BACKWARD_INPUT, BACKWARD_WEIGHT = (
    "fc_forward_naive", "fc_forward_tiled", "fc_backward_input", "fc_backward_weight")
GEMM_FORWARD = "fc forward on the GEMM (W^T, GEMM + bias)"
GEMM_INPUT = "fc input gradient on the GEMM (dY W)"
GEMM_WEIGHT = "fc weight gradient on the GEMM (dY^T X, dY read transposed)"
TORCH_FORWARD, TORCH_INPUT, TORCH_WEIGHT = ("torch linear (forward)", "torch dY @ W (input gradient)",
                                            "torch dY.T @ X (weight gradient)")
#: The dense layer's three products: per product, our kernels and the peer doing the same product.
DENSE_PRODUCTS = {"forward": ((FORWARD_NAIVE, FORWARD_TILED, GEMM_FORWARD), TORCH_FORWARD),
                  "input gradient": ((BACKWARD_INPUT, GEMM_INPUT), TORCH_INPUT),
                  "weight gradient": ((BACKWARD_WEIGHT, GEMM_WEIGHT), TORCH_WEIGHT)}
#: The products on the GEMM chapter's kernels, each beside cuBLAS doing it.
GEMM_PRODUCTS = ((GEMM_FORWARD, TORCH_FORWARD), (GEMM_INPUT, TORCH_INPUT), (GEMM_WEIGHT, TORCH_WEIGHT))
CROSS_ENTROPY, RELU = "softmax_cross_entropy_forward", "relu_forward"
TORCH_CROSS_ENTROPY, TORCH_RELU = "torch cross_entropy", "torch relu"

_FC_ROWS = (*FC_KERNELS, GEMM_FORWARD, GEMM_INPUT, GEMM_WEIGHT, TORCH_FORWARD, TORCH_INPUT, TORCH_WEIGHT)
CONTRACT = Contract(
    NAME, groups=(GRADIENT_SUM_SWEEP, PERCEPTRON, FC_DIGITS, FC_LARGE, SOFTMAX, TRAINING_STEP),
    rows={GRADIENT_SUM_SWEEP: (*GRADIENT_SUMS, TORCH_SUM), PERCEPTRON: (PERCEPTRON_FORWARD,),
          FC_DIGITS: _FC_ROWS, FC_LARGE: _FC_ROWS, SOFTMAX: (CROSS_ENTROPY, RELU, TORCH_CROSS_ENTROPY, TORCH_RELU)},
    sections=("peaks",),
)

SWEEP = tuple(1 << p for p in range(10, 25, 2))
PERCEPTRON_N = 1 << 24
FC_SHAPES = ((FC_DIGITS, (128, 64, 64)), (FC_LARGE, (4096, 1024, 1024)))
SOFTMAX_N = 1 << 16
#: The chapter's network and step: layer sizes, minibatch, learning rate (book/mlp_backprop.md).
STEP_SIZES, STEP_BATCH, STEP_LR = (64, 64, 10), 64, 0.2
#: Training steps timed, after as many untimed ones (the digits give 23 minibatches of 64 an epoch).
TIMED_STEPS = 20


def _torch():
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


def measure(verbose: bool = False, sweep=SWEEP, perceptron_n: int = PERCEPTRON_N, fc_shapes=FC_SHAPES,
            softmax_n: int = SOFTMAX_N) -> dict:
    """Validate, then time every kernel and its peer; returns the results (without device and date)."""
    log = print if verbose else (lambda *args, **kwargs: None)
    backend = require_gpu_backend()
    info = backend.describe()
    peaks = Peaks(bandwidth_gbs=measure_bandwidth_gbs(), fp32_gflops=measure_fp32_gflops(), device=str(info.get("name")))
    log(f"device: {info.get('name')}; measured peaks {peaks.bandwidth_gbs:,.0f} GB/s, {peaks.fp32_gflops / 1e3:,.1f} TFLOP/s")
    torch = _torch()
    rows: list[dict] = []
    rng = np.random.default_rng(0)

    # --- the minibatch gradient sum: atomics against the tree, over n -------------------------
    k = 3
    for n in sweep:
        grads_host = (rng.standard_normal((n, k)) + 0.5).astype(np.float32)
        expected = P.gradient_sum_reference(grads_host)
        scale = np.abs(grads_host).astype(np.float64).sum(axis=0)
        grads, total = to_device(grads_host), zeros(k)
        for version, reduce in P.GRADIENT_SUMS.items():
            got = reduce(grads, total).get()
            assert np.all(np.abs(got - expected) <= 1e-4 * scale + 1e-3), (version, n, got, expected)
        shape = {"n": n, "k": k}
        for kernel in GRADIENT_SUMS:
            rows.append(time_version(P.KERNELS[kernel], shape, (grads, total, n, k), GRADIENT_SUM_SWEEP, peaks))
        nbytes, flops = P.KERNELS[SUM_TREE].bytes(shape), P.KERNELS[SUM_TREE].flops(shape)
        if torch is not None:
            tg = torch.from_numpy(grads_host).cuda()
            rows.append(row(TORCH_SUM, GRADIENT_SUM_SWEEP, "peer", time_torch(lambda: tg.sum(dim=0)),
                            nbytes, flops, peaks, n=n, k=k))
        log(f"gradient sums, n = {n:,}: done")

    # --- per-sample gradients and inference ----------------------------------------------------
    n, d = perceptron_n, 2
    x = rng.standard_normal((n, d)).astype(np.float32)
    t = (rng.random(n) < 0.5).astype(np.float32)
    params = rng.standard_normal(d + 1).astype(np.float32)
    got = P.sample_gradients(x[:4096], t[:4096], params)
    np.testing.assert_allclose(got, P.sample_gradients_reference(x[:4096], t[:4096], params), rtol=1e-4, atol=1e-6)
    xd, td, pd, gd, yd = to_device(x), to_device(t), to_device(params), zeros((n, d + 1)), zeros(n)
    shape = {"n": n, "d": d}
    rows.append(time_version(P.KERNELS[PERCEPTRON_GRADIENTS], shape, (xd, td, pd, gd, n, d), PERCEPTRON, peaks))
    forward = P.KERNELS[PERCEPTRON_FORWARD]
    rows.append(time_version(forward, shape, (xd, pd, yd, n, d), PERCEPTRON, peaks))
    if torch is not None:
        tx, tp = torch.from_numpy(x).cuda(), torch.from_numpy(params).cuda()
        rows.append(row("torch.sigmoid(x @ w + b)", PERCEPTRON, "peer", time_torch(lambda: torch.sigmoid(tx @ tp[:-1] + tp[-1])),
                        forward.bytes(shape), forward.flops(shape), peaks, **shape))

    # --- fully connected layers ------------------------------------------------------------------
    for group, (n, k_in, m) in fc_shapes:
        X = rng.standard_normal((n, k_in)).astype(np.float32)
        W = (rng.standard_normal((m, k_in)) / np.sqrt(k_in)).astype(np.float32)
        b = rng.standard_normal(m).astype(np.float32)
        dY = rng.standard_normal((n, m)).astype(np.float32)
        for forward in fc.FORWARDS.values():
            np.testing.assert_allclose(forward(X, W, b), fc.forward_reference(X, W, b), rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(fc.backward_input(dY, W), fc.backward_input_reference(dY, W), rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(fc.backward_weight(dY, X), fc.backward_weight_reference(dY, X), rtol=1e-3, atol=1e-2)
        Xd, Wd, bd, dYd = (to_device(a) for a in (X, W, b, dY))
        Y, dX, dW = zeros((n, m)), zeros((n, k_in)), zeros((m, k_in))
        shape = {"n": n, "in": k_in, "out": m}
        flops, fwd_bytes = fc.KERNELS[FORWARD_NAIVE].flops(shape), fc.KERNELS[FORWARD_NAIVE].bytes(shape)
        for kernel, args in ((FORWARD_NAIVE, (Xd, Wd, bd, Y)), (FORWARD_TILED, (Xd, Wd, bd, Y)),
                             (BACKWARD_INPUT, (dYd, Wd, dX)), (BACKWARD_WEIGHT, (dYd, Xd, dW))):
            rows.append(time_version(fc.KERNELS[kernel], shape, (*args, n, k_in, m), group, peaks))
        # The same three products on the GEMM chapter's kernels (fully_connected versions 7-9), each launch
        # prepared once as time_version does (the kernels' time, not the Python's): what forward_gemm,
        # backward_input_gemm and backward_weight_gemm launch, the transpose of W and the bias included.
        np.testing.assert_allclose(fc.forward_gemm(X, W, b), fc.forward_reference(X, W, b), rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(fc.backward_input_gemm(dY, W), fc.backward_input_reference(dY, W), rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(fc.backward_weight_gemm(dY, X), fc.backward_weight_reference(dY, X), rtol=1e-3, atol=1e-2)
        Wt = empty((k_in, m))
        prepared = {
            GEMM_FORWARD: (
                sgemm.transpose(Wd, Wt, prepare_only=True),
                sgemm.sgemm_splitk(Xd, Wt, out=Y, bias=bd, plan=sgemm.sgemm_plan(n, m, k_in), prepare_only=True)),
            GEMM_INPUT: (sgemm.sgemm(dYd, Wd, out=dX, prepare_only=True),),
            GEMM_WEIGHT: (
                sgemm.sgemm_splitk(dYd, Xd, out=dW, a_transposed=True, prepare_only=True),),
        }
        fc.forward_gemm(Xd, Wd, bd, out=Y, Wt=Wt)  # the launchers and the prepared launches agree
        np.testing.assert_allclose(Y.get(), fc.forward_reference(X, W, b), rtol=1e-3, atol=1e-3)
        for name, steps in prepared.items():
            rows.append(row(name, group, "kernel", time_kernel(lambda steps=steps: [s() for s in steps]),
                            fwd_bytes, flops, peaks, **shape))
        if torch is not None:
            tX, tW, tb, tdY = (torch.from_numpy(a).cuda() for a in (X, W, b, dY))
            rows.append(row(TORCH_FORWARD, group, "peer", time_torch(lambda: torch.nn.functional.linear(tX, tW, tb)),
                            fwd_bytes, flops, peaks, **shape))
            rows.append(row(TORCH_INPUT, group, "peer", time_torch(lambda: tdY @ tW),
                            fwd_bytes, flops, peaks, **shape))
            rows.append(row(TORCH_WEIGHT, group, "peer", time_torch(lambda: tdY.T @ tX),
                            fwd_bytes, flops, peaks, **shape))
        log(f"{group}: done")

    # --- softmax + cross-entropy, ReLU -----------------------------------------------------------
    n, c = softmax_n, 10
    Z = (3 * rng.standard_normal((n, c))).astype(np.float32)
    labels = rng.integers(0, c, n).astype(np.int32)
    _, loss = softmax.cross_entropy_forward(Z, labels)
    np.testing.assert_allclose(loss, softmax.cross_entropy_reference(Z, labels), rtol=1e-4, atol=1e-4)
    Zd, ld, Pd, Ld = to_device(Z), to_device(labels), zeros((n, c)), zeros(n)
    cross_entropy, relu = softmax.KERNELS[CROSS_ENTROPY], activations.KERNELS[RELU]
    shape, count = {"n": n, "c": c}, n * c
    rows.append(time_version(cross_entropy, shape, (Zd, ld, Pd, Ld, n, c), SOFTMAX, peaks))
    rows.append(time_version(relu, {"n": count}, (Zd, Pd, count), SOFTMAX, peaks, sizes=shape))
    if torch is not None:
        tZ, tl = torch.from_numpy(Z).cuda(), torch.from_numpy(labels).long().cuda()
        rows.append(row(TORCH_CROSS_ENTROPY, SOFTMAX, "peer",
                        time_torch(lambda: torch.nn.functional.cross_entropy(tZ, tl, reduction="none")),
                        cross_entropy.bytes(shape), cross_entropy.flops(shape), peaks, **shape))
        rows.append(row(TORCH_RELU, SOFTMAX, "peer", time_torch(lambda: torch.relu(tZ)), relu.bytes({"n": count}),
                        relu.flops({"n": count}), peaks, **shape))

    rows += measure_training_step(torch)
    log("training_step: done")

    return {
        "peaks": {"bandwidth_gbs": peaks.bandwidth_gbs, "fp32_gflops": peaks.fp32_gflops},
        "peer": "torch (cuBLAS, TF32 off)" if torch is not None else "none (torch not available)",
        "results": rows,
    }


def _torch_mlp_step(torch):
    """The chapter's network and SGD step in PyTorch, from the same initial weights:
    ``step(X, labels) -> (mean loss, predicted classes)``, host arrays in and out as ``KernelMLP`` takes them."""
    import torch.nn.functional as F

    layers = [tuple(torch.tensor(a, device="cuda", requires_grad=True) for a in pair)
              for pair in mlp.init_params(list(STEP_SIZES), seed=0)]
    flat = [t for pair in layers for t in pair]

    def step(X, labels):
        h, y = torch.from_numpy(X).cuda(), torch.from_numpy(labels.astype(np.int64)).cuda()
        for i, (W, b) in enumerate(layers):
            h = F.linear(h, W, b)
            if i < len(layers) - 1:
                h = F.relu(h)
        loss = F.cross_entropy(h, y)
        torch_sgd_step(torch, flat, loss, STEP_LR)
        return loss.item(), h.argmax(1).cpu().numpy()

    return step


def measure_training_step(torch) -> list[dict]:
    """Rows of the ``training_step`` group: the time of one whole step, host minibatch in, loss and
    predictions out (median of TIMED_STEPS after as many untimed), for our kernels with the teaching
    versions and with ``mlp.FASTEST``, and for PyTorch.  The first step of each, from the same weights on
    the same minibatch, must give the same loss (``correct``)."""
    X_train, _, y_train, _ = mlp.load_digits_split()
    batches = mlp.epoch_batches(len(X_train), STEP_BATCH, np.random.default_rng(1))
    batches = (batches * 2)[: 2 * TIMED_STEPS]
    start = mlp.init_params(list(STEP_SIZES), seed=0)
    steps = {("KernelMLP.train_step, teaching kernels", "kernel"): (mlp.KernelMLP(start), {"forward": "naive"}),
             ("KernelMLP.train_step, mlp.FASTEST", "kernel"): (mlp.KernelMLP(start, **mlp.FASTEST), mlp.FASTEST)}
    if torch is not None:
        steps[("PyTorch forward, autograd, SGD update", "peer")] = (_torch_mlp_step(torch), None)
    rows, first_loss = [], {}
    for (name, kind), (model, kernels) in steps.items():
        step = model if kernels is None else (lambda X, y, model=model: model.train_step(X, y, STEP_LR))
        timed, first_loss[name] = time_training_steps(step, X_train, y_train, batches, TIMED_STEPS)
        extra = {} if kernels is None else {"kernels": kernels}
        rows.append(timed_row(name, TRAINING_STEP, kind, float(np.median(timed)), None, None, None,
                              min_ms=float(np.min(timed)), samples=len(timed), batch=STEP_BATCH,
                              layers="-".join(map(str, STEP_SIZES)), first_step_loss=first_loss[name], **extra))
    peer = next((r for r in rows if r["kind"] == "peer"), None)
    for r in rows:
        if r["kind"] == "kernel" and peer is not None:
            r["speedup_vs_torch"] = peer["median_ms"] / r["median_ms"]
            r["correct"] = losses_agree(r["first_step_loss"], peer["first_step_loss"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    results = measure(verbose=True)
    path = write_results(NAME, results)
    print_table([r for r in results["results"] if "gbs" in r],
                f"\nmeasured peak {results['peaks']['bandwidth_gbs']:,.0f} GB/s")
    for r in (r for r in results["results"] if r["group"] == TRAINING_STEP):
        print(f"{r['name']:<48} {r['median_ms']:.3f} ms per step, first step's loss {r['first_step_loss']:.6f}"
              + (f", {r['speedup_vs_torch']:.2f}x PyTorch" if "speedup_vs_torch" in r else ""))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
