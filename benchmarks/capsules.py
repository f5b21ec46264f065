"""Benchmark the capsule prediction kernels (forward and both gradients) against PyTorch, in one run on one GPU.

    PYTHONPATH=$PWD DLK_BACKEND=gpu python3 -m benchmarks.capsules     # writes benchmarks/results/capsules.json

At CapsNet's DigitCaps shape (batch 128, 1152 input capsules of 8, 10 output
capsules of 16) every kernel version is first checked against PyTorch in
float64, then timed with CUDA events (warm-up, L2 flush before each call,
median).  Peers, measured in the same run with TF32 off: ``torch.einsum``,
the transpose + batched matmul route (what a framework without a custom op
does), and torch autograd's backward of the einsum (both gradients), against
the two separate gradient kernels and the fused one.  The memory floor is the
least traffic (read u and W, write u_hat; for the gradients read G and the
other operand, write the gradient) over the copy bandwidth measured now.

Every forward kernel writes u_hat as a contiguous [batch, in_caps, out_caps,
out_dim] array, so each peer is timed until it has produced the same: the
transpose + bmm route ends with ``.contiguous()``, and so does the einsum
peer.  ``torch.einsum`` on its own returns a strided view whose memory is laid
out [in_caps, batch, out_caps, out_dim] (the batched matmul's output); it is
timed too, as a separate row, and the summary gives the speed-up against both.

Last, a whole training step of a capsule layer in PyTorch (``kernels/frameworks/torch_capsule_layer.py``:
the predictions, three iterations of routing by agreement and the margin loss written in PyTorch,
backward to u and W), once with the predictions from the op ``dlk::capsule_predict`` over the book's
kernels (``kernels/frameworks/torch_capsule.py``) and once from ``torch.einsum``: the group
``training_step``.  The two steps are checked against each other first.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from benchmarks.common import Contract, print_table, require_gpu_backend, row, write_results

from kernels.capsules import capsule_prediction as cp
from kernels.capsules import capsule_prediction_backward as cb
from kernels.runtime import empty, to_device
from kernels.tools.roofline import measure_peaks, peaks_as_dict
from kernels.runtime.measurement import measurement
from kernels.runtime.timing import Timing, time_kernel, time_torch
from kernels.runtime.versions import versions

DIGITCAPS = (128, 1152, 8, 10, 16)  # batch, in_caps, in_dim, out_caps, out_dim

# --- the results file and what the book reads in it ------------------------------------------
NAME = "capsules"
FORWARD, GRAD_INPUT, GRAD_WEIGHT, BACKWARD, TRAINING_STEP = (
    "forward", "grad_input", "grad_weight", "backward", "training_step")
#: The forward rows of our kernels are this and the version: capsule_predict_naive, ...
PREDICT = "capsule_predict_"
REGISTER_BLOCKED, VECTORIZED = f"{PREDICT}register_blocked", f"{PREDICT}vectorized"  # versions 3 and 4
#: einsum's result copied to the contiguous array our kernels write, its strided view alone, and a batched product.
EINSUM, EINSUM_VIEW, TRANSPOSE_BMM = ("torch.einsum + .contiguous()", "torch.einsum (strided view, not contiguous)",
                                      "torch transpose + bmm")
GRAD_INPUT_SHARED, GRAD_WEIGHT_REGISTER = "capsule_grad_input_shared_weights", "capsule_grad_weight_register_blocked"
GRAD_FUSED = "capsule_grad_fused (du and dW)"
AUTOGRAD_INPUT, AUTOGRAD_WEIGHT, AUTOGRAD_BOTH = ("torch autograd du only", "torch autograd dW only",
                                                  "torch autograd backward (du and dW)")
#: The fastest backward kernels, each beside PyTorch's autograd computing the same gradients.
BACKWARD_PAIRS = ((GRAD_INPUT_SHARED, AUTOGRAD_INPUT), (GRAD_WEIGHT_REGISTER, AUTOGRAD_WEIGHT),
                  (GRAD_FUSED, AUTOGRAD_BOTH))

CONTRACT = Contract(
    NAME, groups=(FORWARD, GRAD_INPUT, GRAD_WEIGHT, BACKWARD, TRAINING_STEP),
    rows={FORWARD: (EINSUM, EINSUM_VIEW, TRANSPOSE_BMM, REGISTER_BLOCKED, VECTORIZED),
          GRAD_INPUT: (AUTOGRAD_INPUT, GRAD_INPUT_SHARED), GRAD_WEIGHT: (AUTOGRAD_WEIGHT, GRAD_WEIGHT_REGISTER),
          BACKWARD: (AUTOGRAD_BOTH, GRAD_FUSED)},
    prefixes={FORWARD: (PREDICT,)}, sections=("peaks", "summary"),
)


def check(name, got, expected, terms):
    got = np.asarray(got, np.float64)
    tol = 1e-5 * terms ** 0.5 * (np.abs(expected).max() + 1.0)
    err = np.abs(got - expected).max()
    if not err <= tol:
        raise AssertionError(f"{name}: wrong result (max error {err:.3g} > {tol:.3g}); not timing it")


def measure(shape=DIGITCAPS, repeat: int = 30) -> dict:
    """Validate, then time every version and its peers; returns the results (``peaks``, ``summary``, ``results``)."""
    require_gpu_backend()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    batch, in_caps, in_dim, out_caps, out_dim = shape = tuple(int(x) for x in shape)
    row_len = out_caps * out_dim
    rng = np.random.default_rng(0)
    u = rng.standard_normal((batch, in_caps, in_dim)).astype(np.float32)
    W = rng.standard_normal((in_caps, out_caps, out_dim, in_dim)).astype(np.float32)
    G = rng.standard_normal((batch, in_caps, out_caps, out_dim)).astype(np.float32)

    peaks = measure_peaks()
    bw = peaks.bandwidth_gbs * 1e9
    sizes = dict(zip(cp.AXES, shape))
    forward = cp.KERNELS["capsule_predict_vectorized"]
    fwd_bytes, fwd_flops = forward.bytes(sizes), forward.flops(sizes)
    gin_bytes = cb.KERNELS["capsule_grad_input_shared_weights"].bytes(sizes)   # read G and W, write du
    gw_bytes = cb.KERNELS["capsule_grad_weight_register_blocked"].bytes(sizes)  # read G and u, write dW
    bwd_bytes = 4 * (G.size + 2 * W.size + 2 * u.size)  # both: read G, W and u once, write du and dW

    # Float64 references from PyTorch on the GPU (a NumPy loop would take minutes at this size).
    tu, tW, tG = (torch.from_numpy(a).cuda() for a in (u, W, G))
    ref_fwd = torch.einsum("bik,ijdk->bijd", tu.double(), tW.double()).cpu().numpy()
    ref_gin = torch.einsum("ijdk,bijd->bik", tW.double(), tG.double()).cpu().numpy()
    ref_gw = torch.einsum("bijd,bik->ijdk", tG.double(), tu.double()).cpu().numpy()

    du_, dW_, dG_ = to_device(u), to_device(W), to_device(G)
    out = empty(G.shape)
    gin_out = empty(u.shape)
    gw_out = empty(W.shape)

    rows = []

    def kernel_row(name, group, launch, nbytes, flops, floor_s, peer_ms):
        t = time_kernel(launch, repeat=repeat)
        rows.append(row(name, group, "kernel", t, nbytes, flops, peaks,
                        floor_us=floor_s * 1e6, times_floor=t.median_s / floor_s,
                        speedup_vs_peers={k: v / t.median_ms for k, v in peer_ms.items()}))
        return t

    def peer_row(name, group, fn, nbytes, flops, floor_s):
        t = time_torch(fn, repeat=repeat)
        rows.append(row(name, group, "peer", t, nbytes, flops, peaks, floor_us=floor_s * 1e6,
                        times_floor=t.median_s / floor_s))
        return t

    # ---------------------------------------------------------------- forward
    fwd_floor = fwd_bytes / bw

    def torch_einsum_view():
        return torch.einsum("bik,ijdk->bijd", tu, tW)

    def torch_einsum():
        return torch.einsum("bik,ijdk->bijd", tu, tW).contiguous()

    def torch_transpose_bmm():
        x = tu.transpose(0, 1)                                   # [in_caps, batch, in_dim]
        w = tW.view(in_caps, row_len, in_dim).transpose(1, 2)    # [in_caps, in_dim, row]
        return torch.bmm(x, w).transpose(0, 1).contiguous()      # [batch, in_caps, row]

    check("torch.einsum", torch_einsum().cpu().numpy(), ref_fwd, in_dim)
    check("transpose + bmm", torch_transpose_bmm().view(G.shape).cpu().numpy(), ref_fwd, in_dim)
    einsum_is_view = not torch_einsum_view().is_contiguous()
    einsum_t = peer_row(EINSUM, FORWARD, torch_einsum, fwd_bytes, fwd_flops, fwd_floor)
    einsum_view_t = peer_row(EINSUM_VIEW if einsum_is_view else "torch.einsum",
                             FORWARD, torch_einsum_view, fwd_bytes, fwd_flops, fwd_floor)
    bmm_t = peer_row(TRANSPOSE_BMM, FORWARD, torch_transpose_bmm, fwd_bytes, fwd_flops, fwd_floor)
    fwd_peers = {EINSUM: einsum_t.median_ms, "torch.einsum view": einsum_view_t.median_ms,
                 "transpose + bmm": bmm_t.median_ms}

    for version, record in versions(cp.KERNELS).items():
        if not cp.runs_version(version, in_dim, out_caps, out_dim):
            continue
        launcher = record.launcher
        launcher(du_, dW_, out=out)
        check(version, out.get(), ref_fwd, in_dim)
        kernel_row(f"{PREDICT}{version}", FORWARD,
                   lambda launcher=launcher: launcher(du_, dW_, out=out, sync=False),
                   fwd_bytes, fwd_flops, fwd_floor, fwd_peers)

    # ---------------------------------------------------------------- backward
    tu_r = tu.clone().requires_grad_(True)
    tW_r = tW.clone().requires_grad_(True)
    y = torch.einsum("bik,ijdk->bijd", tu_r, tW_r)
    gin_floor, gw_floor = gin_bytes / bw, gw_bytes / bw

    def autograd_both():
        return torch.autograd.grad(y, (tu_r, tW_r), tG, retain_graph=True)

    def autograd_input():
        return torch.autograd.grad(y, (tu_r,), tG, retain_graph=True)

    def autograd_weight():
        return torch.autograd.grad(y, (tW_r,), tG, retain_graph=True)

    g_u, g_W = autograd_both()
    check("autograd du", g_u.cpu().numpy(), ref_gin, row_len)
    check("autograd dW", g_W.cpu().numpy(), ref_gw, batch)
    bwd_floor = bwd_bytes / bw
    both_t = peer_row(AUTOGRAD_BOTH, BACKWARD, autograd_both,
                      bwd_bytes, 2 * fwd_flops, bwd_floor)
    gin_peer = peer_row(AUTOGRAD_INPUT, GRAD_INPUT, autograd_input, gin_bytes, fwd_flops, gin_floor)
    gw_peer = peer_row(AUTOGRAD_WEIGHT, GRAD_WEIGHT, autograd_weight, gw_bytes, fwd_flops, gw_floor)

    best = {}
    for name, launcher, result, ref, terms, nbytes, floor, peer in [
        ("grad_input_naive", cb.grad_input_naive, gin_out, ref_gin, row_len, gin_bytes, gin_floor, gin_peer),
        ("grad_input_shared_weights", cb.grad_input_shared_weights, gin_out, ref_gin, row_len, gin_bytes, gin_floor, gin_peer),
        ("grad_weight_naive", cb.grad_weight_naive, gw_out, ref_gw, batch, gw_bytes, gw_floor, gw_peer),
        ("grad_weight_register_blocked", cb.grad_weight_register_blocked, gw_out, ref_gw, batch, gw_bytes, gw_floor, gw_peer),
    ]:
        operand = dW_ if "input" in name else du_
        launcher(dG_, operand, out=result)
        check(name, result.get(), ref, terms)
        t = kernel_row(f"capsule_{name}", GRAD_INPUT if "input" in name else GRAD_WEIGHT,
                       lambda launcher=launcher, operand=operand, result=result:
                       launcher(dG_, operand, out=result, sync=False),
                       nbytes, fwd_flops, floor, {"torch autograd": peer.median_ms})
        group = GRAD_INPUT if "input" in name else GRAD_WEIGHT
        best[group] = min(best.get(group, float("inf")), t.median_ms)

    # Version 5: both gradients from one pass over G.
    cb.grad_fused(dG_, dW_, du_, out_u=gin_out, out_W=gw_out)
    check("grad_fused du", gin_out.get(), ref_gin, row_len)
    check("grad_fused dW", gw_out.get(), ref_gw, batch)
    fused_t = kernel_row(GRAD_FUSED, BACKWARD,
                         lambda: cb.grad_fused(dG_, dW_, du_, out_u=gin_out, out_W=gw_out, sync=False),
                         bwd_bytes, 2 * fwd_flops, bwd_floor,
                         {"torch autograd": both_t.median_ms})
    separate_ms = best[GRAD_INPUT] + best[GRAD_WEIGHT]
    backward_ms = min(separate_ms, fused_t.median_ms)

    # ---------------------------------------------------------------- summary
    fwd_rows = [r for r in rows if r["group"] == FORWARD and r["kind"] == "kernel"]
    fastest = min(fwd_rows, key=lambda r: r["median_ms"])
    naive = next(r for r in fwd_rows if r["name"] == f"{PREDICT}naive")
    summary = {
        "shape": dict(zip(("batch", "in_caps", "in_dim", "out_caps", "out_dim"), shape)),
        "forward_floor_us": fwd_floor * 1e6,
        "forward_bytes": fwd_bytes,
        "fastest_forward": fastest["name"],
        "fastest_forward_us": fastest["median_ms"] * 1e3,
        "naive_forward_us": naive["median_ms"] * 1e3,
        "fastest_forward_speedup_vs_einsum": einsum_t.median_ms / fastest["median_ms"],
        "einsum_returns_strided_view": einsum_is_view,
        "fastest_forward_speedup_vs_einsum_view": einsum_view_t.median_ms / fastest["median_ms"],
        "fastest_forward_speedup_vs_transpose_bmm": bmm_t.median_ms / fastest["median_ms"],
        "fastest_forward_times_floor": fastest["median_ms"] / 1e3 / fwd_floor,
        "fastest_separate_backward_us": separate_ms * 1e3,
        "fused_backward_us": fused_t.median_ms * 1e3,
        "fastest_backward_us": backward_ms * 1e3,
        "backward_floor_us": bwd_floor * 1e6,
        "torch_autograd_backward_us": both_t.median_ms * 1e3,
        "backward_speedup_vs_autograd": both_t.median_ms / backward_ms,
        "grad_input_speedup_vs_autograd_du": gin_peer.median_ms / best[GRAD_INPUT],
        "grad_weight_speedup_vs_autograd_dW": gw_peer.median_ms / best[GRAD_WEIGHT],
    }
    step_rows, step_summary = measure_training_step(shape, peaks, repeat)
    rows += step_rows
    summary.update(step_summary)
    summary["goals_met"] = {
        "forward_2x_faster_than_einsum": summary["fastest_forward_speedup_vs_einsum"] >= 2.0,
        "forward_2x_faster_than_einsum_view": summary["fastest_forward_speedup_vs_einsum_view"] >= 2.0,
        "forward_2x_faster_than_transpose_bmm": summary["fastest_forward_speedup_vs_transpose_bmm"] >= 2.0,
        "forward_within_1.5x_of_floor": summary["fastest_forward_times_floor"] <= 1.5,
        "backward_at_least_as_fast_as_autograd": summary["backward_speedup_vs_autograd"] >= 1.0,
        "training_step_at_least_as_fast_as_pure_pytorch": summary["training_step_speedup_vs_pure_pytorch"] >= 1.0,
    }
    return {"peaks": peaks_as_dict(peaks), "summary": summary, "results": rows}


def time_step(step, repeat: int) -> tuple[Timing, float]:
    """GPU time of ``step()`` (events on torch's current stream, L2 flushed first), and the host's time to queue it.

    A training step is dozens of launches, and Python may take longer to queue them than the GPU takes to run
    them.  Before each timed call the GPU is kept busy for longer than the host needs to queue the whole step
    (measured in the warm-up), so the events time the GPU's work and not gaps where it waited for Python; the
    host's own time per step is returned beside it (median ms), to say which of the two limits the step.
    """
    import torch

    warmup_ms = []
    for _ in range(5):
        start = time.perf_counter()
        step()
        warmup_ms.append(1e3 * (time.perf_counter() - start))
        torch.cuda.synchronize()
    gpu = measurement()
    busy_us = min(20_000.0, max(1000.0, 2e3 * max(warmup_ms[2:])))  # the first calls may still set things up
    flush = torch.empty(2 * gpu.l2_bytes // 4, dtype=torch.float32, device="cuda")
    timing, host_ms = Timing(), []
    for _ in range(repeat):
        flush.zero_()
        gpu.busy_wait(busy_us)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        start = time.perf_counter()
        step()
        host_ms.append(1e3 * (time.perf_counter() - start))
        end.record()
        end.synchronize()
        timing.samples_ms.append(begin.elapsed_time(end))
    return timing, statistics.median(host_ms)


def measure_training_step(shape, peaks, repeat: int) -> tuple[list[dict], dict]:
    """One training step of a capsule layer, predictions by the op and by torch.einsum: rows and summary entries."""
    import torch

    from kernels.frameworks.torch_capsule_layer import (  # deferred: imports torch, which a CPU-only machine lacks
        PREDICTIONS, ROUTING_ITERATIONS, training_step)

    batch, in_caps, in_dim, out_caps, out_dim = shape
    g = torch.Generator().manual_seed(1)
    u = (0.3 * torch.randn(batch, in_caps, in_dim, generator=g)).cuda().requires_grad_(True)
    W = (0.3 * torch.randn(in_caps, out_caps, out_dim, in_dim, generator=g)).cuda().requires_grad_(True)
    labels = (torch.arange(batch) % out_caps).cuda()

    results = {name: training_step(predict, u, W, labels) for name, predict in PREDICTIONS.items()}
    (loss, du, dW), (loss_ref, du_ref, dW_ref) = results["dlk::capsule_predict"], results["torch.einsum"]
    if not abs(loss.item() - loss_ref.item()) <= 1e-4 * abs(loss_ref.item()):
        raise AssertionError(f"training step: loss {loss.item()} through the op, {loss_ref.item()} through einsum")
    for name, got, ref in (("du", du, du_ref), ("dW", dW, dW_ref)):
        err, scale = (got - ref).abs().max().item(), ref.abs().max().item()
        if not err <= 1e-3 * scale:
            raise AssertionError(f"training step: {name} through the op is off by {err:.3g} (largest {scale:.3g})")

    rows, times = [], {}
    for name, predict in PREDICTIONS.items():
        timing, host_ms = time_step(lambda predict=predict: training_step(predict, u, W, labels), repeat)
        times[name] = (timing, host_ms)
        rows.append(row(f"training step, predictions by {name}", TRAINING_STEP,
                        "kernel" if name.startswith("dlk::") else "peer", timing, None, None, peaks,
                        host_ms=host_ms, predictions=name, routing=f"PyTorch, {ROUTING_ITERATIONS} iterations",
                        loss="margin", backward_to="u and W", loss_value=float(loss_ref.item())))
    op_t, op_host = times["dlk::capsule_predict"]
    torch_t, torch_host = times["torch.einsum"]
    summary = {
        "training_step_us": op_t.median_ms * 1e3,
        "training_step_pure_pytorch_us": torch_t.median_ms * 1e3,
        "training_step_speedup_vs_pure_pytorch": torch_t.median_ms / op_t.median_ms,
        "training_step_host_us": op_host * 1e3,
        "training_step_pure_pytorch_host_us": torch_host * 1e3,
    }
    return rows, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=5, default=DIGITCAPS, metavar=("B", "IC", "ID", "OC", "OD"))
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    data = measure(tuple(args.shape), args.repeat)
    path = write_results(NAME, data)
    rows, summary, peaks = data["results"], data["summary"], data["peaks"]
    shape = tuple(summary["shape"].values())

    print(f"\nresults written to {path}")
    print(f"device {peaks['device']}: copy bandwidth {peaks['bandwidth_gbs']:.0f} GB/s; shape {shape}")
    print(f"forward floor {summary['forward_floor_us']:.1f} us ({summary['forward_bytes'] / 1e6:.1f} MB)\n")
    kernel_rows = [r for r in rows if r["group"] != TRAINING_STEP]
    print_table(kernel_rows, "capsule prediction, every version and its peers")
    print(f"\n{'':<44} {'x floor':>8}   speed-up vs peer(s)")
    for r in kernel_rows:
        sp = ", ".join(f"{k} {v:.2f}x" for k, v in r.get("speedup_vs_peers", {}).items())
        print(f"{r['name']:<44} {r['times_floor']:>8.2f}   {sp}")
    print(f"\n{'a training step (GPU time; host time to queue it)':<60} {'GPU µs':>9} {'host µs':>9}")
    for r in rows:
        if r["group"] == TRAINING_STEP:
            print(f"{r['name']:<60} {r['median_ms'] * 1e3:>9.1f} {r['host_ms'] * 1e3:>9.1f}")
    print("\nsummary:")
    for k, v in summary.items():
        print(f"  {k}: {v:.3g}" if isinstance(v, float) else f"  {k}: {v}")


if __name__ == "__main__":
    main()
