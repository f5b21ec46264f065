"""Benchmark the L-Softmax layer (FC + margin + softmax cross-entropy, forward and backward) against PyTorch.

    DLK_BACKEND=gpu python3 -m benchmarks.large_margin_softmax   # writes benchmarks/results/large_margin_softmax.json

At batch 4096, feature dimension 512, margin m = 4, for 10 and for 10 000
classes, in one run on one GPU:

* the whole layer, one training step (forward and backward, mean loss), for
  each version of ``kernels/lsoftmax/lsoftmax.py`` (Caffe-style, factored backward,
  fused), against the same layer written in PyTorch (``F.linear``, the margin
  by tensor ops, ``F.cross_entropy``, autograd's backward), TF32 off;
* the part after the GEMM (margin + softmax + cross-entropy, forward and
  backward, given the logits): the fused kernels and the Caffe-style
  kernels, against the memory floor (its least traffic over the copy
  bandwidth measured in the same run);
* the forward pass alone: GEMM then the fused forward (version 3) against
  the GEMM with the margin and the softmax partials in its epilogue (version 4);
* the three GEMMs of a step with our kernel (and the transpose of W it needs)
  against cuBLAS (``torch.matmul``), which bound the layer at 10 000 classes.

Every version is first checked against a float64 PyTorch reference of the
loss and both gradients.  Times are CUDA-event medians with L2 flushed before
each call (kernels/runtime/timing.py).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from benchmarks.common import Contract, print_table, require_gpu_backend, row, write_results
from kernels.gemm import sgemm, sgemm_hopper
from kernels.lsoftmax import lsoftmax as L
from kernels.dense import softmax as S
from kernels.runtime import empty, to_device
from kernels.runtime.timing import time_kernel, time_torch
from kernels.runtime.versions import versions
from kernels.tools.roofline import measure_peaks, peaks_as_dict

BATCH, DIM, CLASSES = 4096, 512, (10, 10_000)
MARGIN, LAMBDA = 4, 5.0


# --- the results file and what the book reads in it ------------------------------------------
NAME = "large_margin_softmax"


def layer_group(C: int) -> str:
    """The whole layer's training step at ``C`` classes: every version and PyTorch's layer."""
    return f"layer_C{C}"


def after_gemm_group(C: int) -> str:
    """The part after the GEMM (margin, softmax, cross-entropy, forward and backward) at ``C`` classes."""
    return f"after_gemm_C{C}"


def forward_group(C: int) -> str:
    """The forward pass alone at ``C`` classes."""
    return f"forward_C{C}"


def gemm_group(C: int) -> str:
    """The three GEMMs of a step at ``C`` classes, ours and cuBLAS's."""
    return f"gemm_C{C}"


LAYER_GROUPS, AFTER_GEMM_GROUPS, FORWARD_GROUPS, GEMM_GROUPS = (
    tuple(group(C) for C in CLASSES) for group in (layer_group, after_gemm_group, forward_group, gemm_group))
OUR_GEMMS = "3 GEMMs + W transposed (sgemm: version 7 or 8 by shape)"

CONTRACT = Contract(
    NAME, groups=(*LAYER_GROUPS, *AFTER_GEMM_GROUPS, *FORWARD_GROUPS, *GEMM_GROUPS),
    rows={group: (OUR_GEMMS,) for group in GEMM_GROUPS}, sections=("peaks", "summary"),
)


def torch_layer(x, w, y, m: int, lam: float):
    """The layer as a PyTorch user writes it: linear, the margin by tensor ops, cross_entropy (mean)."""
    import torch
    import torch.nn.functional as F

    logits = F.linear(x, w)
    f = logits.gather(1, y[:, None]).squeeze(1)
    a = w[y].norm(dim=1)
    b = x.norm(dim=1)
    c = (f / (a.clamp_min(L.EPS) * b.clamp_min(L.EPS))).clamp(-1.0, 1.0)
    t0, t1 = torch.ones_like(c), c
    for _ in range(1, m):
        t0, t1 = t1, 2 * c * t1 - t0
    k = torch.zeros_like(c)
    for j in range(1, m):
        k = k + (c < math.cos(j * math.pi / m)).to(c.dtype)
    sign = 1.0 - 2.0 * torch.remainder(k, 2.0)
    psi = sign * t1 - 2.0 * k
    target = (lam * f + a * b * psi) / (1.0 + lam)
    patched = logits.scatter(1, y[:, None], target[:, None])
    return F.cross_entropy(patched, y)


def check(name, got, expected, rtol):
    got = np.asarray(got, np.float64)
    err = float(np.abs(got - expected).max())
    tol = rtol * (float(np.abs(expected).max()) + 1e-30)
    if not err <= tol:
        raise AssertionError(f"{name}: wrong result (max error {err:.3g} > {tol:.3g}); not timing it")
    return err / (float(np.abs(expected).max()) + 1e-30)


def measure(batch: int = BATCH, dim: int = DIM, classes=CLASSES, m: int = MARGIN, lam: float = LAMBDA,
            repeat: int = 20, naive_repeat: int = 5) -> dict:
    """Validate, then time every version and its peers at each class count."""
    require_gpu_backend()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    peaks = measure_peaks()
    bw = peaks.bandwidth_gbs * 1e9
    hopper = sgemm_hopper.is_hopper()  # the tensor-core version runs on Hopper GPUs only
    rows, summary = [], {"batch": batch, "dim": dim, "margin": m, "lambda": lam, "per_classes": {}}

    for C in classes:
        rng = np.random.default_rng(0)
        X = (0.2 * rng.standard_normal((batch, dim))).astype(np.float32)
        W = (0.2 * rng.standard_normal((C, dim))).astype(np.float32)
        labels = rng.integers(0, C, batch).astype(np.int32)
        group, after = layer_group(C), after_gemm_group(C)
        gemm_flops = L.gemm_flops(batch, C, dim)
        layer_bytes = 4 * (2 * batch * dim + 2 * C * dim + 2 * batch * C)  # X, W, dX, dW, F and G~ once each
        floor_bytes = L.after_gemm_bytes(batch, C, dim)
        floor_s = floor_bytes / bw

        # float64 reference on the GPU
        tx = torch.from_numpy(X).cuda().double().requires_grad_(True)
        tw = torch.from_numpy(W).cuda().double().requires_grad_(True)
        ty = torch.from_numpy(labels.astype(np.int64)).cuda()
        ref_loss = torch_layer(tx, tw, ty, m, lam)
        ref_dx, ref_dw = (g.cpu().numpy() for g in torch.autograd.grad(ref_loss, (tx, tw)))
        ref_loss = float(ref_loss)

        # the PyTorch peer, float32
        px = torch.from_numpy(X).cuda().requires_grad_(True)
        pw = torch.from_numpy(W).cuda().requires_grad_(True)

        def torch_step():
            return torch.autograd.grad(torch_layer(px, pw, ty, m, lam), (px, pw))

        gx, gw = torch_step()
        check("torch dX", gx.cpu().numpy(), ref_dx, 1e-3)
        check("torch dW", gw.cpu().numpy(), ref_dw, 1e-3)
        peer = time_torch(torch_step, repeat=repeat)
        rows.append(row("torch: linear + margin ops + cross_entropy, autograd", group, "peer", peer, layer_bytes,
                        gemm_flops, peaks))

        # our layer, every version
        Xd, Wd, yd = to_device(X), to_device(W), to_device(labels)
        layer_ms = {}
        for version in (*versions(L.KERNELS), *((L.TENSOR_CORES[0],) if hopper else ())):
            layer = L.LargeMarginSoftmax(m, version)
            loss = layer.forward(Xd, Wd, yd, lam)
            dX, dW = layer.backward()
            if abs(loss - ref_loss) > 1e-4 * max(1.0, abs(ref_loss)):
                raise AssertionError(f"{version}: loss {loss} != {ref_loss}")
            err = max(check(f"{version} dX", dX, ref_dx, 1e-3), check(f"{version} dW", dW, ref_dw, 1e-3))

            def step(layer=layer):
                layer.forward(Xd, Wd, yd, lam, sync=False)
                layer.backward(sync=False)

            t = time_kernel(step, repeat=naive_repeat if version == "caffe" else repeat)
            layer_ms[version] = t.median_ms
            rows.append(row(f"lsoftmax layer ({version})", group, "kernel", t, layer_bytes, gemm_flops, peaks,
                            rel_error=err, speedup_vs_torch=peer.median_ms / t.median_ms))

        # the part after the GEMM, given the logits
        F = L.fc_forward(Xd, Wd)
        grad = to_device(np.full(batch, 1.0 / batch, np.float32))
        loss_b, stats = empty((batch,)), empty((batch, 4))
        Gt, beta, delta = empty((batch, C)), empty((batch,)), empty((batch,))

        def fused_after():
            L.fused_forward(F, Xd, Wd, yd, m, lam, loss=loss_b, stats=stats)
            L.fused_backward(F, yd, stats, grad, m, lam, Gt=Gt, beta=beta, delta=delta)

        fused_after()
        if abs(float(loss_b.get().astype(np.float64).mean()) - ref_loss) > 1e-4 * max(1.0, abs(ref_loss)):
            raise AssertionError("fused forward: wrong mean loss; not timing it")
        # The two launches prepared once, as time_version does: the kernels' time, not the Python's around them
        # (the layer rows above include that Python, as a training step does).
        fwd = L.fused_forward(F, Xd, Wd, yd, m, lam, loss=loss_b, stats=stats, prepare_only=True)
        bwd = L.fused_backward(F, yd, stats, grad, m, lam, Gt=Gt, beta=beta, delta=delta, prepare_only=True)
        t_fused = time_kernel(lambda: (fwd(), bwd()), repeat=repeat)
        rows.append(row("margin + softmax + CE, fused (fwd + bwd)", after, "kernel", t_fused, floor_bytes, 0, peaks,
                        floor_us=floor_s * 1e6, times_floor=t_fused.median_s / floor_s))

        P, G = empty((batch, C)), empty((batch, C))

        def caffe_after():
            Fp, _ = L.forward_caffe(F, Xd, Wd, yd, m, lam, in_place=True)  # F drifts from call to call: timing only
            S.cross_entropy_forward(Fp, yd, probs=P, loss=loss_b)
            S.cross_entropy_backward(P, yd, out=G)

        t_caffe = time_kernel(caffe_after, repeat=naive_repeat)
        rows.append(row("margin (3 kernels) + softmax.cu CE fwd + bwd", after, "kernel", t_caffe, floor_bytes, 0,
                        peaks, floor_us=floor_s * 1e6, times_floor=t_caffe.median_s / floor_s))

        # the forward pass alone: GEMM + fused forward (version 3) against the GEMM's epilogue (version 4)
        Wt_f, F_f, target, partial = empty((dim, C)), empty((batch, C)), empty((batch,)), empty((batch, -(-C // 128), 2))

        def forward_fused():
            F_out = L.fc_forward(Xd, Wd, Wt=Wt_f, out=F_f)
            L.fused_forward(F_out, Xd, Wd, yd, m, lam, loss=loss_b, stats=stats)

        def forward_epilogue():
            L.gemm_margin_forward(Xd, Wd, yd, m, lam, Wt=Wt_f, F=F_f, target=target, partial=partial, loss=loss_b,
                                  stats=stats)

        forward_epilogue()
        if abs(float(loss_b.get().astype(np.float64).mean()) - ref_loss) > 1e-4 * max(1.0, abs(ref_loss)):
            raise AssertionError("epilogue forward: wrong mean loss; not timing it")
        t_fwd_fused = time_kernel(forward_fused, repeat=repeat)
        t_fwd_epilogue = time_kernel(forward_epilogue, repeat=repeat)
        rows.append(row("forward: GEMM, then fused margin + softmax + CE", forward_group(C), "kernel", t_fwd_fused,
                        4 * (batch * dim + C * dim + batch * C), gemm_flops / 3, peaks))
        rows.append(row("forward: margin + softmax partials in the GEMM epilogue", forward_group(C), "kernel",
                        t_fwd_epilogue, 4 * (batch * dim + C * dim + batch * C), gemm_flops / 3, peaks))

        # the GEMMs of a step: ours (with the transposes our row-major GEMM needs) and cuBLAS
        Wt, out_f, out_dx, out_dwt = empty((dim, C)), empty((batch, C)), empty((batch, dim)), empty((dim, C))

        # Prepared once (the kernels' time, as cuBLAS's is measured with its launches already decided).
        gemm_steps = (sgemm.transpose(Wd, Wt, prepare_only=True), sgemm.sgemm(Xd, Wt, out=out_f, prepare_only=True),
                      sgemm.sgemm(Gt, Wd, out=out_dx, prepare_only=True),
                      sgemm.sgemm_splitk(Xd, Gt, out=out_dwt, a_transposed=True, prepare_only=True))

        def our_gemms():
            for enqueue in gemm_steps:
                enqueue()

        tg = torch.from_numpy(Gt.get()).cuda()
        xf, wf = px.detach(), pw.detach()

        def cublas_gemms():
            return xf @ wf.T, tg @ wf, tg.T @ xf

        # The dX GEMM (batch x dim, K = classes) has only (batch / 128) x (dim / 128) = 128 tiles of 128 x 128
        # at dim 512: less than one wave on a GPU with 132 multiprocessors.  Smaller tiles give more blocks.
        small_tiles = {"WT_BM": 64, "WT_BN": 128, "WT_BK": 8, "WT_MIN_BLOCKS": 2, "WT_NQ": 2}
        dx_ref = (tg.double() @ torch.from_numpy(W).cuda().double()).cpu().numpy()
        for label, config in (("128x128 tiles", None), ("64x128 tiles", small_tiles)):
            sgemm.sgemm_warptile(Gt, Wd, out=out_dx, config=config)
            check(f"dX GEMM {label}", out_dx.get(), dx_ref, 1e-4)
            t = time_kernel(lambda config=config: sgemm.sgemm_warptile(Gt, Wd, out=out_dx, config=config, sync=False),
                            repeat=repeat)
            rows.append(row(f"dX GEMM only ({label})", gemm_group(C), "kernel", t, 4 * (batch * C + C * dim + batch * dim),
                            2.0 * batch * C * dim, peaks))
        sgemm.sgemm_splitk(Gt, Wd, out=out_dx)
        check("dX GEMM version 8", out_dx.get(), dx_ref, 1e-4)
        t = time_kernel(sgemm.sgemm_splitk(Gt, Wd, out=out_dx, prepare_only=True), repeat=repeat)
        rows.append(row("dX GEMM only (version 8, its plan)", gemm_group(C), "kernel", t,
                        4 * (batch * C + C * dim + batch * dim), 2.0 * batch * C * dim, peaks))
        t_ours = time_kernel(our_gemms, repeat=repeat)
        t_cublas = time_torch(cublas_gemms, repeat=repeat)
        rows.append(row(OUR_GEMMS, gemm_group(C), "kernel", t_ours, layer_bytes,
                        gemm_flops, peaks))
        rows.append(row("3 GEMMs (cuBLAS, torch.matmul)", gemm_group(C), "peer", t_cublas, layer_bytes, gemm_flops, peaks))
        t_tensor = None
        if hopper:  # the same three products on the tensor cores (3xTF32, version 10), X^T written first
            Xt = empty((dim, batch))
            tc_steps = (sgemm_hopper.sgemm_tf32x3_wgmma(Xd, Wd, out=out_f, b_transposed=True, prepare_only=True),
                        sgemm_hopper.sgemm_tf32x3_wgmma(Gt, Wd, out=out_dx, prepare_only=True),
                        sgemm.transpose(Xd, Xt, prepare_only=True),
                        sgemm_hopper.sgemm_tf32x3_wgmma(Xt, Gt, out=out_dwt, prepare_only=True))
            for enqueue in tc_steps:
                enqueue()
            check("dX GEMM on the tensor cores", out_dx.get(), dx_ref, 1e-4)
            t_tensor = time_kernel(lambda: [enqueue() for enqueue in tc_steps], repeat=repeat)
            rows.append(row("3 GEMMs + X transposed (3xTF32 tensor cores, version 10)", gemm_group(C), "kernel", t_tensor,
                            layer_bytes, gemm_flops, peaks))

        fastest = min(layer_ms, key=layer_ms.get)
        summary["per_classes"][str(C)] = {
            "torch_layer_us": peer.median_ms * 1e3,
            "layer_us": {v: t * 1e3 for v, t in layer_ms.items()},
            "fastest_version": fastest,
            "speedup_vs_torch": peer.median_ms / layer_ms[fastest],
            "fused_vs_caffe_layer": layer_ms["caffe"] / layer_ms["fused"],
            "after_gemm_floor_us": floor_s * 1e6,
            "after_gemm_fused_us": t_fused.median_ms * 1e3,
            "after_gemm_fused_times_floor": t_fused.median_s / floor_s,
            "after_gemm_caffe_us": t_caffe.median_ms * 1e3,
            "forward_fused_us": t_fwd_fused.median_ms * 1e3,
            "forward_epilogue_us": t_fwd_epilogue.median_ms * 1e3,
            "gemms_ours_us": t_ours.median_ms * 1e3,
            "gemms_cublas_us": t_cublas.median_ms * 1e3,
            "gemms_tensor_cores_us": t_tensor.median_ms * 1e3 if t_tensor else None,
            "goals_met": {
                "layer_1.5x_faster_than_torch": peer.median_ms / layer_ms[fastest] >= 1.5,
                "after_gemm_within_1.5x_of_floor": t_fused.median_s / floor_s <= 1.5,
            },
        }
        del tx, tw, px, pw, tg
        torch.cuda.empty_cache()
    return {"peaks": peaks_as_dict(peaks), "summary": summary, "results": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--dim", type=int, default=DIM)
    parser.add_argument("--classes", type=int, nargs="+", default=list(CLASSES))
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    data = measure(args.batch, args.dim, tuple(args.classes), repeat=args.repeat)
    path = write_results(NAME, data)
    print(f"\nresults written to {path}")
    print(f"device {data['peaks']['device']}: copy bandwidth {data['peaks']['bandwidth_gbs']:.0f} GB/s")
    print_table(data["results"], "L-Softmax layer, every version and its peers")
    for C, s in data["summary"]["per_classes"].items():
        print(f"\nclasses {C}:")
        for k, v in s.items():
            print(f"  {k}: {v:.4g}" if isinstance(v, float) else f"  {k}: {v}")


if __name__ == "__main__":
    main()
