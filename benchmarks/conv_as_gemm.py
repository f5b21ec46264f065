"""Benchmark of the chapter "Convolution as matrix multiplication": the SGEMM ladder, the unroll kernel
and the GEMM convolutions, each against its library peer measured in the same run.

    PYTHONPATH=$PWD DLK_BACKEND=gpu python3 -m benchmarks.conv_as_gemm      # -> benchmarks/results/conv_as_gemm.json

* SGEMM: every version of kernels/gemm/sgemm.cu at 4096^3 (FP32, TF32 off) against cuBLAS (torch.matmul),
  and a few tile configurations of version 7 (the best is the ladder's step 7);
* SGEMM at the shapes of the book's layers (the L-Softmax layer's products at 10 classes, the MLP's dense
  layer, 1024^3): version 7, version 8 as sgemm_plan schedules it, version 8's search over tiles and
  K-splits, and cuBLAS, also with A stored transposed;
* unroll: kernels/conv/im2col.cu against the measured device-to-device copy bandwidth;
* convolution: unroll + GEMM, implicit GEMM, the direct convolution of kernels/conv/conv2d.cu (if present)
  and cuDNN (torch.nn.functional.conv2d, TF32 off) on the same layers, with the name of the kernel
  cuDNN ran (which says which algorithm it chose).

Every kernel is first checked against a float64 result (torch on the GPU), then timed with CUDA events
(warm-up, L2 flush before each call, median).  The table printed last is the summary.

The results file has the layout of every benchmark (``benchmarks/common.py``): one row per timed
kernel or peer in ``results``, in the groups "sgemm" (the ladder, its last step the best tile
configuration), "sgemm_warptile" (every configuration tried), "im2col" and "conv" (each row naming its
``layer`` and sizes); ``summary["im2col"]`` names the layer unrolled and the fastest unroll kernel.
"""

from __future__ import annotations

import argparse
import traceback

import numpy as np


from benchmarks.common import Contract, require_gpu_backend, timed_row, untimed_row, write_results
from kernels.conv import conv2d, conv2d_gemm as cg, im2col
from kernels.gemm import sgemm
from kernels.runtime import empty, to_device
from kernels.runtime.loader import multiprocessors
from kernels.runtime.timing import time_kernel, time_torch
from kernels.runtime.versions import ladder, versions
from kernels.tools import roofline

NAME = "conv_as_gemm"
GEMM_SIZE = 4096
#: Tile configurations of sgemm_warptile tried at GEMM_SIZE (the chapter plots this search): block tiles
#: of 64 to 256 rows and columns, 8 or 16 k per stage, one or two blocks per multiprocessor, 8 x 8 or
#: 8 x 16 results per thread, tiles handed out in groups of 0 (none), 2, 4, 8 or 16 tile rows.  Every one
#: fits the kernel's 48 KiB of static shared memory; ptxas spills registers for one (128 x 128 x 16 in
#: groups of 8 at two blocks per multiprocessor: 84 bytes).
WT_KEYS = ("WT_BM", "WT_BN", "WT_BK", "WT_MIN_BLOCKS", "WT_GROUP", "WT_NQ")
WARPTILE_CONFIGS = ((128, 128, 16, 2, 0, 4), (128, 128, 16, 2, 0, 2), (128, 128, 16, 2, 8, 4), (128, 128, 16, 1, 0, 4),
                    (128, 128, 8, 1, 0, 4), (128, 128, 8, 2, 0, 2), (64, 256, 8, 2, 0, 4), (256, 64, 8, 2, 0, 4),
                    (256, 128, 8, 1, 0, 4), (256, 128, 8, 1, 8, 4), (128, 256, 8, 1, 0, 4), (128, 256, 8, 1, 4, 4),
                    (128, 256, 8, 1, 8, 4), (128, 256, 8, 1, 16, 4), (128, 256, 8, 1, 2, 4))
#: Implicit-GEMM tiles tried on the main layer.
IG_KEYS = ("IG_BM", "IG_BN", "IG_BK", "IG_MIN_BLOCKS", "IG_NQ")
IMPLICIT_CONFIGS = ((64, 128, 16, 1, 2), (64, 128, 8, 1, 2), (64, 256, 8, 2, 4))
WINOGRAD_KEYS = ("WT_BM", "WT_BN", "WT_BK", "WT_MIN_BLOCKS", "WT_NQ")
#: The SGEMM tiles tried for Winograd's 36 products (M x C times C x T: C and M are 64 or 128).
WINOGRAD_CONFIGS = ((64, 128, 8, 2, 2), (128, 128, 8, 1, 2), (64, 128, 16, 2, 2), (128, 128, 16, 1, 4))
#: Tiles of the SGEMM inside the explicit unroll + GEMM, tried on the main layer.
UNROLL_GEMM_CONFIGS = ({"WT_BM": 64, "WT_BN": 128, "WT_BK": 8, "WT_MIN_BLOCKS": 2, "WT_NQ": 2},
                       {"WT_BM": 64, "WT_BN": 256, "WT_BK": 8, "WT_MIN_BLOCKS": 2, "WT_NQ": 4})
#: The layers: (label, N, C, H, W, M, K, pad, stride).  The first is the one the chapter's goal names.
LAYERS = (
    ("resnet 56x56 C64 M64 3x3", 128, 64, 56, 56, 64, 3, 1, 1),
    ("resnet 28x28 C128 M128 3x3", 128, 128, 28, 28, 128, 3, 1, 1),
    ("resnet stem 224x224 C3 M64 7x7/2", 32, 3, 224, 224, 64, 7, 3, 2),
    ("lenet 28x28 C1 M6 5x5", 1024, 1, 28, 28, 6, 5, 0, 1),
)
TOL = 1e-4  # relative Frobenius error allowed in FP32 (sums of up to 4096 products land near 1e-6)
#: Shapes of the layers' products for version 8 (label, M, N, K).
SKINNY_SHAPES = (
    ("L-Softmax logits X W^T, 10 classes", 4096, 10, 512),
    ("L-Softmax weight gradient X^T G, 10 classes", 512, 10, 4096),
    ("L-Softmax input gradient G W, 10 classes", 4096, 512, 10),
    ("MLP forward / input gradient, 4096 x 1024 -> 1024", 4096, 1024, 1024),
    ("MLP weight gradient dY^T X, 4096 x 1024 -> 1024", 1024, 1024, 4096),
    ("square 1024", 1024, 1024, 1024),
)


def sgemm_at(size: int) -> str:
    """The group of the fastest tile beside cuBLAS at ``size``³, outside the ladder's size."""
    return f"sgemm {size}"


# --- what the book reads in the results file -------------------------------------------------
#: The ladder (its last step the search's best tile), every tile of the search, the best tile at twice the size.
SGEMM, SGEMM_SEARCH, SGEMM_TWICE = "sgemm", "sgemm_warptile", sgemm_at(2 * GEMM_SIZE)
IM2COL, CONV = "im2col", "conv"
#: The ladder's rows are named by the version (kernels/gemm/sgemm.py's keys); cuBLAS is the peer.
CUBLAS, NAIVE, COALESCED, WARPTILE = "cublas", "naive", "coalesced", "warptile"
#: How the convolution's rows start, one method each, tried in several tile configurations.
CUDNN, IMPLICIT_GEMM, WINOGRAD, UNROLL_GEMM, DIRECT = "cudnn", "implicit_gemm", "winograd", "unroll_gemm", "direct conv2d"
LAYER_NAMES = tuple(label for label, *_ in LAYERS)
#: The part of the file measured on the layers' skinny products, and each shape's label in it.
SGEMM_SHAPES = "sgemm_shapes"
SHAPE_LABELS = tuple(label for label, *_ in SKINNY_SHAPES)
LSOFTMAX_SHAPES = SHAPE_LABELS[:3]  # the L-Softmax layer's three products

CONTRACT = Contract(
    NAME, groups=(SGEMM, SGEMM_SEARCH, SGEMM_TWICE, IM2COL, CONV),
    rows={SGEMM: (CUBLAS, NAIVE, COALESCED, WARPTILE), SGEMM_TWICE: (CUBLAS, WARPTILE)},
    prefixes={CONV: (CUDNN, IMPLICIT_GEMM, WINOGRAD, UNROLL_GEMM, DIRECT)},
    values={"layer": LAYER_NAMES}, sections=("peaks", SGEMM_SHAPES), entries={SGEMM_SHAPES: SHAPE_LABELS},
)


def rel_error(out, ref) -> float:
    import torch

    out = torch.as_tensor(np.asarray(out), device="cuda", dtype=torch.float64)
    ref = ref.to(torch.float64).reshape(out.shape)
    if not torch.isfinite(out).all():
        return float("inf")
    return float(torch.linalg.norm(out - ref) / torch.linalg.norm(ref))


def timed(fn, slow=False):
    if slow:
        return time_kernel(fn, warmup=1, repeat=5, max_repeat=5)
    return time_kernel(fn, warmup=3, repeat=20, max_repeat=60)


def bench_sgemm(results, rng, size, bandwidth_gbs):
    import torch

    M = N = K = size
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    A_d, B_d, C_d = to_device(A), to_device(B), empty((M, N))
    tA, tB = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
    ref = tA.double() @ tB.double()
    flops = sgemm.flops(M, N, K)
    nbytes = sgemm.min_bytes(M, N, K)
    sizes = {"M": M, "N": N, "K": K}
    cublas = time_torch(lambda: torch.matmul(tA, tB), repeat=30)
    peer_gflops = flops / cublas.median_s / 1e9
    rows = [timed_row(CUBLAS, SGEMM, "peer", cublas.median_ms, nbytes, flops, bandwidth_gbs,
                      min_ms=cublas.min_ms, samples=len(cublas.samples_ms), **sizes, percent_of_cublas=100.0)]

    # A shape that is no multiple of any tile, checked for every version (cheap) before timing.
    m, n, k = 1000, 1030, 777
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    small_ref = torch.from_numpy(a).cuda().double() @ torch.from_numpy(b).cuda().double()

    def one(name, group, launcher, config=None):
        kw = {"config": config} if config else {}
        small_err = rel_error(launcher(a, b, **kw), small_ref)
        C_d.set(np.full((M, N), np.nan, np.float32))
        launcher(A_d, B_d, out=C_d, **kw)
        err = max(small_err, rel_error(C_d.get(), ref))
        timing = timed(launcher(A_d, B_d, out=C_d, prepare_only=True, **kw), slow=name in ("naive", "coalesced"))
        gflops = flops / timing.median_s / 1e9
        return timed_row(name, group, "kernel", timing.median_ms, nbytes, flops, bandwidth_gbs, min_ms=timing.min_ms,
                         samples=len(timing.samples_ms), **sizes, percent_of_cublas=100 * gflops / peer_gflops,
                         rel_error=err, correct=err < TOL, **({"config": config} if config else {}))

    for name, version in versions(sgemm.KERNELS).items():
        if name in (WARPTILE, "splitk"):  # 7: its tile search below; 8: bench_sgemm_shapes
            continue
        rows.append(one(name, SGEMM, version.launcher))
        print(f"  sgemm {name:<14} {rows[-1]['gflops']:9.0f} GFLOP/s  {rows[-1]['percent_of_cublas']:5.1f}% of cuBLAS", flush=True)
    variants = []
    for cfg in WARPTILE_CONFIGS:
        config = dict(zip(WT_KEYS, cfg))
        try:
            r = one(WARPTILE, SGEMM_SEARCH, sgemm.sgemm_warptile, config)
        except Exception as exc:  # noqa: BLE001 - a configuration that does not build is recorded, not fatal
            variants.append(untimed_row(WARPTILE, SGEMM_SEARCH, "kernel", config=config, error=repr(exc)[:300]))
            continue
        variants.append(r)
        print(f"  sgemm warptile {cfg} {r['gflops']:9.0f} GFLOP/s  {r['percent_of_cublas']:5.1f}%", flush=True)
    good = [v for v in variants if v.get("correct")]
    if good:
        best = max(good, key=lambda v: v["gflops"])
        rows.append({**best, "group": SGEMM})
        rows += _sgemm_twice_the_size(2 * size, best["config"], rng, bandwidth_gbs)
    results["results"] += rows + variants


def _sgemm_twice_the_size(n: int, config: dict, rng, bandwidth_gbs) -> list[dict]:
    """The search's best tile at n³ (twice the search's size) beside cuBLAS, in group ``sgemm_at(n)``."""
    import torch

    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    tA, tB = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
    ref = tA.double() @ tB.double()
    A_d, B_d, C_d = to_device(A), to_device(B), empty((n, n))
    flops, nbytes, sizes, group = sgemm.flops(n, n, n), sgemm.min_bytes(n, n, n), {"M": n, "N": n, "K": n}, sgemm_at(n)
    cublas = time_torch(lambda: torch.matmul(tA, tB), repeat=10)
    sgemm.sgemm_warptile(A_d, B_d, out=C_d, config=config)
    err = rel_error(C_d.get(), ref)
    ours = timed(sgemm.sgemm_warptile(A_d, B_d, out=C_d, config=config, prepare_only=True))
    percent = 100 * cublas.median_ms / ours.median_ms
    print(f"  sgemm {n}^3 warptile {percent:5.1f}% of cuBLAS", flush=True)
    return [timed_row(CUBLAS, group, "peer", cublas.median_ms, nbytes, flops, bandwidth_gbs, min_ms=cublas.min_ms,
                      samples=len(cublas.samples_ms), **sizes, percent_of_cublas=100.0),
            timed_row(WARPTILE, group, "kernel", ours.median_ms, nbytes, flops, bandwidth_gbs, min_ms=ours.min_ms,
                      samples=len(ours.samples_ms), **sizes, percent_of_cublas=percent, rel_error=err,
                      correct=err < TOL, config=config)]


SKINNY_SPLITS = (1, 2, 4, 8, 16, 32, 64, 128)


def bench_sgemm_shapes(results, shapes=SKINNY_SHAPES, repeat: int = 20):
    """SGEMM at the shapes the book's layers use: version 7, version 8 (as planned, and its search) and cuBLAS,
    also with A stored transposed (a weight gradient's dY).  Checked against float64 first."""
    import torch

    rng = np.random.default_rng(7)
    out = {"multiprocessors": multiprocessors(), "shapes": []}
    for label, M, N, K in shapes:
        A = rng.standard_normal((M, K), dtype=np.float32)
        B = rng.standard_normal((K, N), dtype=np.float32)
        Ad, Bd, Cd = to_device(A), to_device(B), empty((M, N))
        tA, tB = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
        ref = (tA.double() @ tB.double()).cpu().numpy()
        flops = sgemm.flops(M, N, K)

        def err_of(C):
            return float(np.linalg.norm(C.astype(np.float64) - ref) / np.linalg.norm(ref))

        def timed(launch_fn):
            launch_fn()
            t = time_kernel(launch_fn, repeat=repeat, max_repeat=3 * repeat)
            return {"median_us": t.median_ms * 1e3, "gflops": flops / t.median_s / 1e9}

        cublas = time_torch(lambda: torch.matmul(tA, tB), repeat=repeat)
        peer = {"median_us": cublas.median_ms * 1e3, "gflops": flops / cublas.median_s / 1e9}

        def run(launcher, **kw):
            Cd.set(np.full((M, N), np.nan, np.float32))
            launcher(Ad, Bd, out=Cd, **kw)
            err = err_of(Cd.get())
            if not err < SKINNY_TOL:
                return {"rel_error": err, "correct": False}
            r = timed(launcher(Ad, Bd, out=Cd, prepare_only=True, **kw))
            return {**r, "rel_error": err, "correct": True, "percent_of_cublas": 100 * peer["median_us"] / r["median_us"]}

        v7 = run(sgemm.sgemm_warptile)
        plan = sgemm.sgemm_plan(M, N, K)
        v8 = run(sgemm.sgemm_splitk, plan=plan)
        # The same product with A stored as A^T (K x M), read as it is (WT_A_KM): a weight gradient's layout.
        At = to_device(np.ascontiguousarray(A.T))
        Cd.set(np.full((M, N), np.nan, np.float32))
        sgemm.sgemm_splitk(At, Bd, out=Cd, plan=plan, a_transposed=True)
        err_t = err_of(Cd.get())
        v8_t = {"rel_error": err_t, "correct": err_t < SKINNY_TOL}
        if err_t < SKINNY_TOL:
            v8_t.update(timed(sgemm.sgemm_splitk(At, Bd, out=Cd, plan=plan, a_transposed=True, prepare_only=True)))
            v8_t["percent_of_cublas"] = 100 * peer["median_us"] / v8_t["median_us"]
        tAt = torch.from_numpy(np.ascontiguousarray(A.T)).cuda()
        cublas_t = time_torch(lambda: torch.matmul(tAt.T, tB), repeat=repeat)
        search = []
        for config, c in sgemm.SPLITK_CONFIGS.items():
            k_tiles = -(-K // c["WT_BK"])
            for splits in SKINNY_SPLITS:
                if splits > k_tiles or (splits > 1 and k_tiles // splits < sgemm.MIN_KTILES_PER_SPLIT):
                    continue
                r = run(sgemm.sgemm_splitk, plan={"config": config, "splits": splits})
                search.append({"config": config, "splits": splits, **r})
        good = [s for s in search if s.get("correct")]
        best = min(good, key=lambda s: s["median_us"]) if good else None
        entry = {"label": label, "M": M, "N": N, "K": K, "flops": flops, "cublas": peer, "warptile": v7,
                 "splitk": {**v8, "plan": plan}, "search": search, "best_of_search": best,
                 "splitk_a_transposed": v8_t, "cublas_a_transposed": {"median_us": cublas_t.median_ms * 1e3}}
        out["shapes"].append(entry)
        print(f"{label:<52} cuBLAS {peer['median_us']:8.1f} us | v7 {v7.get('median_us', float('nan')):8.1f} us"
              f" | v8 {plan['config']} x{plan['splits']:<3} {v8.get('median_us', float('nan')):8.1f} us"
              f" ({v8.get('percent_of_cublas', 0):5.1f}% of cuBLAS)"
              + (f" | best {best['config']} x{best['splits']} {best['median_us']:.1f} us" if best else "")
              + f" | A^T given: v8 {v8_t.get('median_us', float('nan')):.1f} us, cuBLAS {cublas_t.median_ms * 1e3:.1f} us",
              flush=True)
    results[SGEMM_SHAPES] = out


SKINNY_TOL = 1e-5  # relative Frobenius error against float64 (K up to 4096)


def bench_im2col(results, rng, bandwidth_gbs):
    import torch

    label, N, C, H, W, M, K, pad, stride = LAYERS[0]
    count = 32
    X = rng.standard_normal((count, C, H, W), dtype=np.float32)
    H_out, W_out = im2col.output_size(H, W, K, pad, stride)
    X_d = to_device(X)
    U_d = empty((count, C * K * K, H_out * W_out))
    ref = im2col.reference(X, K, pad, stride)
    nbytes = im2col.bytes_moved(count, C, H, W, K, pad, stride)
    layer = {"layer": label, "batch": count, "C": C, "H": H, "W": W, "K": K, "pad": pad, "stride": stride}
    versions = []
    for name, launcher in ((rung.key, rung.launcher) for rung in ladder(im2col.KERNELS)):
        U_d.set(np.full(U_d.shape, np.nan, np.float32))
        launcher(X_d, K, pad, stride, out=U_d)
        ok = bool(np.array_equal(U_d.get(), ref))
        timing = timed(launcher(X_d, K, pad, stride, out=U_d, prepare_only=True))
        versions.append(timed_row(name, IM2COL, "kernel", timing.median_ms, nbytes, 0, bandwidth_gbs,
                                  min_ms=timing.min_ms, samples=len(timing.samples_ms), **layer, correct=ok))
        print(f"  im2col {name:<12} {versions[-1]['gbs']:8.0f} GB/s = "
              f"{versions[-1]['percent_of_peak_bandwidth']:5.1f}% of copy bandwidth", flush=True)
    best = max((v for v in versions if v["correct"]), key=lambda v: v["gbs"], default=versions[-1])
    # The peer: a device-to-device copy of as many bytes as the unroll writes (torch's copy kernel).
    src = torch.empty(count * C * K * K * H_out * W_out, device="cuda")
    dst = torch.empty_like(src)
    copy = time_torch(lambda: dst.copy_(src))
    results["results"] += versions + [
        timed_row("torch copy_ of a tensor the size of the unrolled input", IM2COL, "peer", copy.median_ms,
                  2 * src.numel() * 4, 0, bandwidth_gbs, min_ms=copy.min_ms, samples=len(copy.samples_ms), **layer)]
    results["summary"]["im2col"] = {"layer": label, "expansion_ratio": im2col.expansion_ratio(C, H, W, K, pad, stride),
                                    "best": best["name"]}


def cudnn_kernel_names(fn) -> list[str]:
    """Names of the GPU kernels one call of ``fn`` ran (they say which algorithm cuDNN chose)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's notice that it clears events between cycles
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
    names = []
    for evt in prof.events():
        if getattr(evt, "device_type", None) is not None and "CUDA" in str(evt.device_type) and evt.name not in names:
            names.append(evt.name)
    return names[:4]


def _best_config(results, prefix):
    """The configuration of the fastest correct ``prefix`` row on the first (main) layer."""
    main = LAYERS[0][0]
    rows = [r for r in results["results"] if r["group"] == CONV and r["layer"] == main
            and r["name"].startswith(prefix) and r.get("correct")]
    return min(rows, key=lambda r: r["median_ms"])["config"] if rows else None


def bench_conv(results, rng, layer, main: bool, bandwidth_gbs):
    import torch
    import torch.nn.functional as F

    label, N, C, H, W, M, K, pad, stride = layer
    X = rng.standard_normal((N, C, H, W), dtype=np.float32)
    Wt = (rng.standard_normal((M, C, K, K), dtype=np.float32) / np.sqrt(C * K * K)).astype(np.float32)
    H_out = (H + 2 * pad - K) // stride + 1
    W_out = (W + 2 * pad - K) // stride + 1
    tX, tW = torch.from_numpy(X).cuda(), torch.from_numpy(Wt).cuda()
    ref = F.conv2d(tX.double(), tW.double(), padding=pad, stride=stride)
    flops = cg.flops(N, C, H, W, M, K, pad, stride)
    nbytes = cg.min_bytes(N, C, H, W, M, K, pad, stride)
    sizes = {"layer": label, "N": N, "C": C, "H": H, "W": W, "M": M, "K": K, "pad": pad, "stride": stride}
    X_d, W_d, Y_d = to_device(X), to_device(Wt), empty((N, M, H_out, W_out))
    rows = []

    def add(name, kind, timing, err=None, **extra):
        rows.append(timed_row(name, CONV, kind, timing.median_ms, nbytes, flops, bandwidth_gbs, min_ms=timing.min_ms,
                              samples=len(timing.samples_ms), **sizes,
                              **({} if err is None else {"rel_error": err, "correct": err < TOL}), **extra))
        print(f"  conv [{label}] {name:<28} {timing.median_ms * 1e3:9.1f} us {rows[-1]['gflops']:9.0f} GFLOP/s",
              flush=True)

    torch.backends.cudnn.benchmark = False
    conv = lambda: F.conv2d(tX, tW, padding=pad, stride=stride)  # noqa: E731
    add(f"{CUDNN} (default heuristic)", "peer", time_torch(conv), kernels=cudnn_kernel_names(conv))
    torch.backends.cudnn.benchmark = True
    conv()
    add(f"{CUDNN} (benchmark=True)", "peer", time_torch(conv), kernels=cudnn_kernel_names(conv))
    torch.backends.cudnn.benchmark = False

    kw = dict(shape=(N, C, H, W), wshape=(M, C, K, K))
    configs = [dict(zip(IG_KEYS, cfg)) for cfg in IMPLICIT_CONFIGS]
    if not main:
        configs = [_best_config(results, IMPLICIT_GEMM) or configs[0]]
    for config in configs:
        cfg = tuple(config[k] for k in IG_KEYS)
        try:
            Y_d.set(np.full(Y_d.shape, np.nan, np.float32))
            cg.conv2d_implicit_gemm(X_d, W_d, pad, stride, out=Y_d, config=config, **kw)
            err = rel_error(Y_d.get(), ref)
            t = timed(cg.conv2d_implicit_gemm(X_d, W_d, pad, stride, out=Y_d, config=config, prepare_only=True, **kw))
            add(f"{IMPLICIT_GEMM} {cfg}", "kernel", t, err, config=config)
        except Exception as exc:  # noqa: BLE001
            rows.append(untimed_row(f"{IMPLICIT_GEMM} {cfg}", CONV, "kernel", **sizes, error=repr(exc)[:300]))
    if K == 3 and stride == 1:  # Winograd's F(4x4, 3x3)
        for cfg in WINOGRAD_CONFIGS:
            config = dict(zip(WINOGRAD_KEYS, cfg))
            try:
                Y_d.set(np.full(Y_d.shape, np.nan, np.float32))
                cg.conv2d_winograd(X_d, W_d, pad, stride, out=Y_d, config=config, **kw)
                err = rel_error(Y_d.get(), ref)
                t = timed(cg.conv2d_winograd(X_d, W_d, pad, stride, out=Y_d, config=config, prepare_only=True, **kw))
                add(f"{WINOGRAD} {cfg}", "kernel", t, err, config=config,
                    workspace_bytes=4 * cg.winograd_workspace_floats(N, C, H, W, M, pad))
            except Exception as exc:  # noqa: BLE001
                rows.append(untimed_row(f"{WINOGRAD} {cfg}", CONV, "kernel", **sizes, error=repr(exc)[:300]))
    P = H_out * W_out
    chunk = cg.chunk_for(N, C, K, P)
    workspace = empty((chunk, C * K * K, P))
    for config in (UNROLL_GEMM_CONFIGS if main else [_best_config(results, UNROLL_GEMM) or UNROLL_GEMM_CONFIGS[0]]):
        try:
            Y_d.set(np.full(Y_d.shape, np.nan, np.float32))
            cg.conv2d_unroll_gemm(X_d, W_d, pad, stride, out=Y_d, workspace=workspace, chunk=chunk, config=config, **kw)
            err = rel_error(Y_d.get(), ref)
            t = timed(cg.conv2d_unroll_gemm(X_d, W_d, pad, stride, out=Y_d, workspace=workspace, chunk=chunk,
                                            config=config, prepare_only=True, **kw))
            tiles = (config["WT_BM"], config["WT_BN"], config["WT_BK"], config["WT_MIN_BLOCKS"], config["WT_NQ"])
            add(f"{UNROLL_GEMM} {tiles}", "kernel", t, err, chunk=chunk, workspace_bytes=4 * chunk * C * K * K * P,
                config=config)
        except Exception as exc:  # noqa: BLE001
            rows.append(untimed_row(f"{UNROLL_GEMM} {config}", CONV, "kernel", **sizes, error=repr(exc)[:300]))
    del workspace

    # The direct convolution of the CNN chapter (no padding, stride 1): run on the input padded in
    # advance, which gives the same output and the same arithmetic.
    if stride == 1:
        try:
            Xp = np.pad(X, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
            Xp_d, b_d = to_device(Xp), to_device(np.zeros(M, np.float32))
            for version, kernel_name in (("tiled_multimap", "conv2d_forward_tiled_multimap"), ("tiled", "conv2d_forward_tiled")):
                grid, block, shared = conv2d.launch_config(version, N, C, H + 2 * pad, W + 2 * pad, M, K)
                W_grid = conv2d.tile_grid(H_out, W_out)[1]
                kernel = conv2d.module().function(kernel_name)
                prepared = kernel.prepare((Xp_d, W_d, b_d, Y_d, N, C, H + 2 * pad, W + 2 * pad, M, K, W_grid), grid, block, shared)
                Y_d.set(np.full(Y_d.shape, np.nan, np.float32))
                kernel.launch_prepared(prepared)
                err = rel_error(Y_d.get(), ref)
                t = timed(lambda: kernel.launch_prepared(prepared, sync=False))
                add(f"{DIRECT} {version}", "kernel", t, err)
                break
        except Exception as exc:  # noqa: BLE001 - the CNN chapter's kernels may change; record why
            rows.append(untimed_row(DIRECT, CONV, "kernel", **sizes, error=repr(exc)[:300]))
    best_cudnn = min(r["median_ms"] for r in rows if r["kind"] == "peer")
    for r in rows:
        if "median_ms" in r:
            r["percent_of_cudnn"] = 100 * best_cudnn / r["median_ms"]
    results["results"] += rows


def summary(results):
    rows = results["results"]
    print()
    ladder = [r for r in rows if r["group"] == SGEMM]
    print(f"SGEMM {ladder[0]['M'] if ladder else '-'}^3, FP32 (TF32 off)")
    print(f"{'version':<16} {'ms':>9} {'GFLOP/s':>9} {'% cuBLAS':>9}  ok")
    for r in ladder:
        print(f"{r['name']:<16} {r['median_ms']:9.3f} {r['gflops']:9.0f} {r['percent_of_cublas']:9.1f}  {r.get('correct', '')}")
    for v in (r for r in rows if r["group"] == IM2COL and r["kind"] == "kernel"):
        print(f"im2col {v['name']:<12} {v['gbs']:.0f} GB/s, {v['percent_of_peak_bandwidth']:.1f}% of copy bandwidth "
              f"({results['peaks']['bandwidth_gbs']:.0f} GB/s); correct {v['correct']}")
    conv = [r for r in rows if r["group"] == CONV]
    for label in dict.fromkeys(r["layer"] for r in conv):
        here = [r for r in conv if r["layer"] == label]
        print(f"conv {label} (N={here[0]['N']})")
        for r in here:
            if "median_ms" in r:
                print(f"  {r['name']:<30} {r['median_ms'] * 1e3:9.1f} us {r['gflops']:9.0f} GFLOP/s "
                      f"{r['percent_of_cudnn']:6.1f}% of cuDNN  {r.get('correct', '')}")
            else:
                print(f"  {r['name']:<30} failed: {r.get('error', '')[:80]}")


def measure(size: int = GEMM_SIZE, skip=()) -> dict:
    """Run every part on the current GPU and return the results (what the chapter calls on a GPU)."""
    require_gpu_backend()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rng = np.random.default_rng(2024)
    bandwidth = roofline.measure_bandwidth_gbs()
    fp32 = roofline.measure_fp32_gflops()
    print(f"copy bandwidth {bandwidth:.0f} GB/s, FP32 FMA peak {fp32:.0f} GFLOP/s", flush=True)
    results = {"peaks": {"bandwidth_gbs": bandwidth, "fp32_gflops": fp32}, "tf32": False, "summary": {},
               "results": []}
    for part, fn in (("sgemm", lambda: bench_sgemm(results, rng, size, bandwidth)),
                     ("sgemm_shapes", lambda: bench_sgemm_shapes(results)),
                     ("im2col", lambda: bench_im2col(results, rng, bandwidth)),
                     ("conv", lambda: [bench_conv(results, rng, layer, i == 0, bandwidth)
                                       for i, layer in enumerate(LAYERS)])):
        if part in skip:
            continue
        try:
            fn()
        except Exception:  # noqa: BLE001 - keep what was measured; the traceback says what failed
            traceback.print_exc()
            results.setdefault("errors", []).append(f"{part}: {traceback.format_exc()[-500:]}")
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=GEMM_SIZE, help="M = N = K of the SGEMM ladder")
    parser.add_argument("--skip", nargs="*", default=(), choices=("sgemm", "sgemm_shapes", "im2col", "conv"))
    args = parser.parse_args(argv)
    results = measure(args.size, args.skip)
    path = write_results(NAME, results)
    print(f"wrote {path}")
    summary(results)


if __name__ == "__main__":
    main()
