"""Benchmark of the chapter "Convolutional layers": every direct-convolution kernel against cuDNN, and LeNet-5.

    PYTHONPATH=$PWD DLK_BACKEND=gpu python3 -m benchmarks.cnn      # -> benchmarks/results/cnn.json

* forward: every version of kernels/conv2d.cu on LeNet's C1 and C3 at batch 64 and on a larger layer
  (N 128, C 64, 56 x 56, M 64, 3 x 3, no padding), against cuDNN (torch.nn.functional.conv2d with TF32
  off) measured in the same run; the fused conv + bias + ReLU + 2 x 2 max-pool kernels (version 6, and
  version 7 with pooling) against cuDNN's convolution alone and against torch's conv2d + relu + max_pool2d;
* backward: the kernels of kernels/conv2d_backward.cu on C1 and C3 against torch's own gradients
  (torch.nn.grad.conv2d_input / conv2d_weight, i.e. cuDNN);
* LeNet-5 trained on scikit-learn's digits (32 x 32) with the book's kernels: loss and accuracy per
  epoch, and the time per training step.

Every kernel is first checked against a float64 result, then timed with CUDA events (warm-up, L2 flush
before each call, median).  Each speed is given in GB/s and GFLOP/s and as % of the roof that applies
(the measured copy bandwidth or FP32 peak).  The table printed last is the summary.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


from benchmarks.common import require_gpu_backend, write_results

NAME = "cnn"
#: (label, N, C, H, W, M, K): the layers of the "measure it" section.
LAYERS = (
    ("LeNet C1", 64, 1, 32, 32, 6, 5),
    ("LeNet C3", 64, 6, 14, 14, 16, 5),
    ("large 56x56 C64 M64 3x3", 128, 64, 56, 56, 64, 3),
)
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
    from kernels.runtime.timing import time_kernel

    if slow:
        return time_kernel(fn, warmup=1, repeat=5, max_repeat=5)
    return time_kernel(fn, warmup=5, repeat=30, max_repeat=100)


def figures(nbytes, flops, timing, peaks) -> dict:
    from kernels.tools.roofline import achieved

    a = achieved(nbytes, flops, timing.median_s, peaks)
    return {"median_us": timing.median_ms * 1e3, "min_us": timing.min_ms * 1e3, "samples": len(timing.samples_ms),
            "gbs": a.gbs, "gflops": a.gflops, "bound": a.bound, "percent_of_limit": a.percent_of_limit}


def bench_forward(peaks, rng) -> list[dict]:
    import torch
    import torch.nn.functional as F

    from kernels import conv2d
    from kernels.runtime import empty, to_device
    from kernels.runtime.timing import time_torch

    layers = []
    for label, N, C, H, W, M, K in LAYERS:
        X = rng.standard_normal((N, C, H, W), dtype=np.float32)
        Wf = (rng.standard_normal((M, C, K, K)) / np.sqrt(C * K * K)).astype(np.float32)
        b = rng.standard_normal(M, dtype=np.float32) * 0.1
        tX, tW, tb = (torch.from_numpy(a).cuda() for a in (X, Wf, b))
        ref = F.conv2d(tX.double(), tW.double(), tb.double()).cpu().numpy()
        shape = {"N": N, "C": C, "H": H, "W": W, "M": M, "K": K}
        nbytes, flops = conv2d.KERNELS["conv2d_forward_naive"].bytes(shape), conv2d.KERNELS["conv2d_forward_naive"].flops(shape)
        rows = []
        cudnn = time_torch(lambda: F.conv2d(tX, tW, tb), repeat=50)
        rows.append({"name": "cuDNN conv2d", "kind": "peer", **figures(nbytes, flops, cudnn, peaks)})
        X_d, W_d, b_d = to_device(X), to_device(Wf), to_device(b)
        N_, M_, H_out, W_out = conv2d.output_shape(X.shape, Wf.shape)
        Y_d = empty((N, M, H_out, W_out))
        for version, kernel_name in conv2d.KERNEL_NAMES.items():
            if version == "fused":
                continue
            W_grid = conv2d.grid_width(version, W_out)
            if version == "constant" and Wf.size > conv2d.CONSTANT_CAPACITY:
                rows.append({"name": version, "kind": "kernel", "skipped":
                             f"filter bank of {Wf.size} floats > {conv2d.CONSTANT_CAPACITY} (64 KiB of constant memory)"})
                continue
            if version == "whole_sample" and not conv2d.whole_sample_fits(C, H, W, K):
                rows.append({"name": version, "kind": "kernel", "skipped":
                             f"sample + filters need {conv2d.whole_sample_shared_bytes(C, H, W, K)} B of shared memory "
                             f"> {conv2d.SHARED_LIMIT}"})
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
            rows.append({"name": version, "kind": "kernel", "rel_error": err, "correct": err < TOL,
                         **figures(nbytes, flops, t, peaks)})
            print(f"  {label:<26} {version:<16} {t.median_ms * 1e3:9.1f} µs  (cuDNN {cudnn.median_ms * 1e3:.1f} µs)",
                  flush=True)
        entry = {"layer": label, "N": N, "C": C, "H": H, "W": W, "M": M, "K": K, "bytes": nbytes, "flops": flops,
                 "rows": rows}
        if (H_out >= 2 and W_out >= 2) and Wf.size <= conv2d.CONSTANT_CAPACITY:
            entry["fused"] = bench_fused(peaks, X, Wf, b, X_d, W_d, b_d, tX, tW, tb, nbytes, flops, cudnn)
        layers.append(entry)
    return layers


def bench_fused(peaks, X, Wf, b, X_d, W_d, b_d, tX, tW, tb, nbytes, flops, cudnn) -> dict:
    """conv2d_bias_act_pool_fused, and conv2d_forward_whole_sample with pool = 1 (both with ReLU), against
    cuDNN's convolution alone and torch's conv + relu + pool."""
    import torch.nn.functional as F

    from kernels import conv2d
    from kernels.runtime import empty
    from kernels.runtime.timing import time_torch

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
    # Bytes the fused kernel must move: X and the filters in, the pooled output (a quarter of Y) out.
    fused_bytes = 4.0 * (X.size + Wf.size + M + N * M * (H_out // 2) * (W_out // 2))
    result = {}
    if conv2d.whole_sample_fits(C, H, W, K):
        kernel7 = conv2d.module().function("conv2d_forward_whole_sample")
        grid7, block7, shared7 = conv2d.launch_config("whole_sample", N, C, H, W, M, K)
        prepared7 = kernel7.prepare((X_d, W_d, b_d, P_d, N, C, H, W, M, K, conv2d.ACTIVATIONS["relu"], 1),
                                    grid7, block7, shared7)
        P_d.set(np.full(P_d.shape, np.nan, np.float32))
        kernel7.launch_prepared(prepared7)
        err7 = rel_error(P_d.get(), conv2d.fused_reference(X, Wf, b, "relu"))
        t7 = timed(lambda: kernel7.launch_prepared(prepared7, sync=False))
        result["whole_sample"] = {"name": "whole_sample conv+bias+relu+maxpool", "kind": "kernel", "rel_error": err7,
                                  "correct": err7 < TOL, **figures(fused_bytes, flops, t7, peaks),
                                  "speedup_vs_cudnn_conv": cudnn.median_ms / t7.median_ms}
    return {
        **result,
        "kernel": {"name": "fused conv+bias+relu+maxpool", "kind": "kernel", "rel_error": err, "correct": err < TOL,
                   **figures(fused_bytes, flops, t, peaks)},
        "torch_conv_relu_pool": {"name": "torch conv2d+relu+max_pool2d", "kind": "peer",
                                 **figures(fused_bytes, flops, torch_chain, peaks)},
        "speedup_vs_cudnn_conv": cudnn.median_ms / t.median_ms,
        "speedup_vs_torch_chain": torch_chain.median_ms / t.median_ms,
    }


def bench_backward(peaks, rng) -> list[dict]:
    import torch
    from torch.nn import grad as tgrad

    from kernels import conv2d_backward as cb
    from kernels.runtime import empty, to_device
    from kernels.runtime.timing import time_torch

    out = []
    for label, N, C, H, W, M, K in LAYERS[:2]:
        X = rng.standard_normal((N, C, H, W), dtype=np.float32)
        Wf = rng.standard_normal((M, C, K, K), dtype=np.float32)
        H_out, W_out = H - K + 1, W - K + 1
        dY = rng.standard_normal((N, M, H_out, W_out), dtype=np.float32)
        tX, tW, tdY = (torch.from_numpy(a).cuda() for a in (X, Wf, dY))
        X_d, W_d, dY_d = to_device(X), to_device(Wf), to_device(dY)
        rows = []
        layer = {"N": N, "C": C, "H": H, "W": W, "M": M, "K": K}
        jobs = [
            ("backward_input", "conv2d_backward_input", (dY, Wf), (N, C, H, W),
             lambda out: (dY_d, W_d, out, N, C, H, W, M, K, -(-W // cb.TILE_WIDTH)),
             lambda: tgrad.conv2d_input(tX.shape, tW, tdY)),
            ("backward_weight_naive", "conv2d_backward_weight_naive", (X, dY), Wf.shape,
             lambda out: (X_d, dY_d, out, N, C, H, W, M, K), lambda: tgrad.conv2d_weight(tX, tW.shape, tdY)),
            ("backward_weight_reduce", "conv2d_backward_weight_reduce", (X, dY), Wf.shape,
             lambda out: (X_d, dY_d, out, N, C, H, W, M, K), lambda: tgrad.conv2d_weight(tX, tW.shape, tdY)),
            ("backward_bias", "conv2d_backward_bias", (dY,), (M,),
             lambda out: (dY_d, out, N, M, H_out, W_out), lambda: tdY.sum(dim=(0, 2, 3))),
        ]
        for name, kernel_name, ref_args, shape, args, peer in jobs:
            record = cb.KERNELS[kernel_name]
            ref = record.reference(*ref_args)
            nbytes, f, config = record.bytes(layer), record.flops(layer), record.launch(layer)
            out_d = empty(shape)
            kernel = cb.module().function(kernel_name)
            prepared = kernel.prepare(args(out_d), config.grid, config.block, config.shared)
            kernel.launch_prepared(prepared)
            err = rel_error(out_d.get(), ref)
            t = timed(lambda: kernel.launch_prepared(prepared, sync=False))
            tp = time_torch(peer, repeat=50)
            rows.append({"name": name, "kind": "kernel", "rel_error": err, "correct": err < TOL,
                         **figures(nbytes, f, t, peaks),
                         "torch_us": tp.median_ms * 1e3, "speedup_vs_torch": tp.median_ms / t.median_ms})
            print(f"  {label:<10} {name:<24} {t.median_ms * 1e3:9.1f} µs  (torch {tp.median_ms * 1e3:.1f} µs)", flush=True)
        out.append({"layer": label, "N": N, "C": C, "H": H, "W": W, "M": M, "K": K, "rows": rows})
    return out


def bench_lenet(epochs: int) -> dict:
    from kernels.models import lenet
    from kernels.runtime import selection

    X_train, X_test, y_train, y_test = lenet.load_digits_32()
    model = lenet.KernelLeNet(lenet.init_params(seed=0))
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
            "test_samples": len(X_test), "activation": "relu", "pooling": "max", "conv": "naive",
            "train_loss": history.train_loss, "train_accuracy": history.train_accuracy,
            "test_loss": history.test_loss, "test_accuracy": history.test_accuracy,
            "seconds_per_epoch": history.seconds, "total_seconds": total, "step_ms_wall": step_ms}


def print_summary(results: dict) -> None:
    print()
    print(f"Convolution forward on {results['device'].get('name', 'GPU')} (µs, median; speed-up = cuDNN time / ours)")
    print(f"{'layer':<26} {'version':<36} {'µs':>9} {'GB/s':>8} {'GFLOP/s':>9} {'% roof':>7} {'vs cuDNN':>9}")
    for layer in results["forward"]:
        cudnn = next(r for r in layer["rows"] if r["kind"] == "peer")
        rows = list(layer["rows"])
        if "fused" in layer:
            rows += [layer["fused"]["kernel"]] + ([layer["fused"]["whole_sample"]] if "whole_sample" in layer["fused"]
                                                  else []) + [layer["fused"]["torch_conv_relu_pool"]]
        for r in rows:
            if "median_us" not in r:
                print(f"{layer['layer']:<26} {r['name']:<36} {'n/a: ' + r.get('skipped', '')[:40]}")
                continue
            ok = "" if r.get("correct", True) else "  WRONG"
            print(f"{layer['layer']:<26} {r['name']:<36} {r['median_us']:>9.1f} {r['gbs']:>8.0f} {r['gflops']:>9.0f} "
                  f"{r['percent_of_limit']:>6.1f}% {cudnn['median_us'] / r['median_us']:>8.2f}x{ok}")
    for goal in results.get("goal", []):
        print(f"goal {goal['layer']}: best direct kernel {goal['best_version']} {goal['best_us']:.1f} µs vs cuDNN "
              f"{goal['cudnn_us']:.1f} µs -> {goal['speedup']:.2f}x ({'met' if goal['met'] else 'NOT met'}); "
              f"best unfused {goal['best_unfused_version']} {goal['best_unfused_speedup']:.2f}x")
    if "lenet" in results:
        le = results["lenet"]
        print(f"LeNet-5 on the digits: test accuracy {le['test_accuracy'][-1]:.4f} after {le['epochs']} epochs, "
              f"{le['step_ms_wall']:.2f} ms per training step (batch {le['batch_size']})")


def goals(forward: list[dict]) -> list[dict]:
    out = []
    for layer in forward[:2]:
        cudnn = next(r for r in layer["rows"] if r["kind"] == "peer")["median_us"]
        candidates = [(r["name"], r["median_us"]) for r in layer["rows"]
                      if r["kind"] == "kernel" and r.get("correct") and "median_us" in r]
        unfused = min(candidates, key=lambda c: c[1])
        if "fused" in layer and layer["fused"]["kernel"].get("correct"):
            candidates.append(("fused", layer["fused"]["kernel"]["median_us"]))
        if "fused" in layer and layer["fused"].get("whole_sample", {}).get("correct"):
            candidates.append(("whole_sample fused", layer["fused"]["whole_sample"]["median_us"]))
        best = min(candidates, key=lambda c: c[1])
        out.append({"layer": layer["layer"], "cudnn_us": cudnn, "best_version": best[0], "best_us": best[1],
                    "speedup": cudnn / best[1], "met": best[1] <= cudnn,
                    "best_unfused_version": unfused[0], "best_unfused_speedup": cudnn / unfused[1]})
    return out


def measure(epochs: int = TRAIN_EPOCHS, backward: bool = True) -> dict:
    """Every figure of the chapter, measured now (GPU only): what the results file holds."""
    backend = require_gpu_backend()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from kernels.tools.roofline import measure_peaks, peaks_as_dict

    peaks = measure_peaks()
    print(f"{peaks.device}: {peaks.bandwidth_gbs:.0f} GB/s copy, {peaks.fp32_gflops:.0f} GFLOP/s FP32", flush=True)
    rng = np.random.default_rng(0)
    results = {"device": backend.describe(), "peaks": peaks_as_dict(peaks), "tf32": False,
               "cudnn_version": torch.backends.cudnn.version()}
    results["forward"] = bench_forward(peaks, rng)
    results["goal"] = goals(results["forward"])
    if backward:
        results["backward"] = bench_backward(peaks, rng)
    if epochs > 0:
        results["lenet"] = bench_lenet(epochs)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=TRAIN_EPOCHS, help="LeNet training epochs (0 skips training)")
    parser.add_argument("--skip-backward", action="store_true")
    args = parser.parse_args()
    results = measure(epochs=args.epochs, backward=not args.skip_backward)
    path = write_results(NAME, {k: v for k, v in results.items() if k != "device"})
    print(f"wrote {path}")
    print_summary(results)


if __name__ == "__main__":
    main()
