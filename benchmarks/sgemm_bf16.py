"""Benchmark of the BF16 GEMM ladder (versions 12 to 16, kernels/gemm/sgemm_bf16.cu) against cuBLAS and cuBLASLt.

    PYTHONPATH=$PWD DLK_BACKEND=gpu python3 -m benchmarks.sgemm_bf16   # -> benchmarks/results/sgemm_bf16.json

C = A B^T, A (M x K) and B (N x K) BF16, C BF16, float sums, in one run on one GPU: every version beside
cuBLAS BF16 (``torch.matmul(A, B.t())``, the same operands in the same layout) and cuBLASLt with the best of the
algorithms its heuristic proposes (nvmath-python's ``Matmul``: ``plan`` asks cuBLASLt's heuristic for candidate
algorithms, ``autotune`` times each on the operands and keeps the fastest).  Shapes: squares 1024 to 8192, a
transformer MLP's down projection (8192 tokens x 4096 outputs x 14336 inputs) and attention's scores Q K^T for
16 heads of 4096 positions, head sizes 64 and 128 (a batch of 16 products).  Every row records its time and its
error against a float64 product of the same inputs: the largest |C - C64| / (|A| |B|^T) over the elements, and
||C - C64|| / ||C64||.  Version 16 is timed with a bias and GELU at the MLP's up projection (8192 x 14336 x 4096),
against cuBLAS plus PyTorch's bias and GELU and against cuBLASLt's own fused GELU epilogue.  At 4096 and 8192
version 15 also runs with a few other configurations (the "search" groups), and Nsight Compute's counters of every
version and of cuBLAS's kernel at 4096^3 are recorded (``profiles``, through benchmarks/profiles.py) when ``ncu``
is on the PATH.

On a second kind of GPU, ``DLK_RESULTS_TAG=h200`` writes ``sgemm_bf16_h200.json`` beside it (benchmarks/common.py).
"""

from __future__ import annotations

import argparse
import shutil

import numpy as np

from benchmarks import profiles as profiler
from benchmarks.common import Contract, require_gpu_backend, timed_row, untimed_row, write_results
from kernels.gemm import sgemm_bf16
from kernels.runtime import borrow
from kernels.runtime.timing import time_kernel, time_torch

NAME = "sgemm_bf16"
SQUARES = (1024, 2048, 4096, 6144, 8192)
#: (group, batch, M, N, K) of the products beside the squares.
SHAPES = (
    ("MLP down projection", 1, 8192, 4096, 14336),
    ("attention Q K^T, head 64", 16, 4096, 4096, 64),
    ("attention Q K^T, head 128", 16, 4096, 4096, 128),
)
MLP_DOWN, QK_64, QK_128 = (group for group, *_ in SHAPES)
FUSED_SHAPE = ("MLP up projection + bias + GELU", 1, 8192, 14336, 4096)
#: Version 15's configurations tried at 4096^3 and 8192^3 besides its default (sgemm_bf16.cu's defines).
SEARCH = (
    {"S_TMA_STORE": 0, "S_STAGES": 4},
    {"S_TMA_STORE": 0, "S_STAGES": 4, "S_CLUSTER": 1},
    {"S_CLUSTER": 1},
    {"S_GROUP": 4},
    {"S_GROUP": 16},
    {"T_BN": 128, "S_STAGES": 6},
    {"S_BLOCKS": 128},
)
NVMATH_LEAD_US = 3000.0  # nvmath's execute() spends more host time per call than cuBLAS through torch


def square(n: int) -> str:
    """The group of every version and peer at M = N = K = ``n``."""
    return f"square {n}"


def search_group(n: int) -> str:
    """The group of version 15's configurations tried at ``n``³."""
    return f"search {n}"


# --- what the book reads in the results file -------------------------------------------------
CUBLAS = "cuBLAS BF16 (torch.matmul)"
CUBLASLT = "cuBLASLt, best of its heuristic's algorithms (nvmath-python)"
GELU_EPILOGUE = "cuBLASLt with its GELU epilogue (torch._addmm_activation)"
#: A kernel row names its kernel in ``kernel`` (its name is its version's title): the four plain versions in
#: ladder order, and version 16 (the fused epilogue).
LADDER = WMMA, MMA, WGMMA_TMA, WARP_SPECIALIZED = (
    "sgemm_bf16_wmma", "sgemm_bf16_mma", "sgemm_bf16_wgmma_tma", "sgemm_bf16_warp_specialized")
FUSED = "sgemm_bf16_fused"
SEARCH_SIZES = (4096, 8192)  # where version 15's configurations are tried (squares only)
SEARCH_GROUPS = tuple(search_group(n) for n in SEARCH_SIZES)
FUSED_GROUP = FUSED_SHAPE[0]
#: The profiler's rows of the ladder (benchmarks/profiles.py's layout, group BF16), in this file: each named by its
#: kernel, cuBLAS's by the profiler's name for it.
PROFILES = "profiles"
PROFILED_GROUP, CUBLAS_PROFILED = profiler.BF16, profiler.CUBLAS_BF16_KERNEL
_TIMED_GROUPS = (*(square(n) for n in SQUARES), *(group for group, *_ in SHAPES))

CONTRACT = Contract(
    NAME, groups=(*_TIMED_GROUPS, *SEARCH_GROUPS, FUSED_GROUP),
    rows={**{group: (CUBLAS,) for group in _TIMED_GROUPS}, FUSED_GROUP: (GELU_EPILOGUE,)},
    values={"kernel": (*LADDER, FUSED)}, sections=(PROFILES,), entries={PROFILES: (PROFILED_GROUP, *LADDER, FUSED, CUBLAS_PROFILED)},
)


def version_name(kernel: str) -> str:
    number, title = sgemm_bf16.KERNELS[kernel].number, sgemm_bf16.KERNELS[kernel].title
    return f"version {number}: {title}"


def _nvmath_peer(A, Bt, ref_error, timer, repeat):
    """cuBLASLt through nvmath-python: plan (the heuristic's candidates), autotune (time them), time the best.
    Returns (row fields, error) or raises what nvmath raised."""
    import nvmath

    mm = nvmath.linalg.advanced.Matmul(A, Bt)
    mm.plan(preferences=nvmath.linalg.advanced.MatmulPlanPreferences(limit=16))
    candidates = len(mm.algorithms)
    mm.autotune(iterations=5)
    best = mm.algorithms[0]
    chosen = {}
    for field in ("algorithm_id", "tile", "stages", "split_k", "cluster_shape", "cta_swizzling"):
        try:
            chosen[field] = str(getattr(best, field))
        except Exception:  # noqa: BLE001 - a field this cuBLASLt does not report
            pass
    err = ref_error(mm.execute())
    t = timer(lambda: mm.execute(), repeat=repeat, lead_us=NVMATH_LEAD_US)
    return t, err, {"algorithms_tried": candidates, "algorithm": chosen}, mm


def measure(squares=SQUARES, shapes=SHAPES, search=True, profile=True) -> dict:
    require_gpu_backend()
    import torch

    hopper = sgemm_bf16.is_hopper()
    torch.manual_seed(16)
    rows = []
    groups = [(square(n), 1, n, n, n) for n in squares] + list(shapes)
    for group, batch, M, N, K in groups:
        lead = (batch,) if batch > 1 else ()
        A = torch.randn(*lead, M, K, device="cuda").to(torch.bfloat16)
        Bt = torch.randn(*lead, N, K, device="cuda").to(torch.bfloat16)
        ref = A.double() @ Bt.double().transpose(-1, -2)
        scale = A.double().abs() @ Bt.double().abs().transpose(-1, -2)
        ref_norm = float(ref.norm())
        sizes = {"batch": batch, "M": M, "N": N, "K": K}
        flops, nbytes = sgemm_bf16.flops(M, N, K, batch), sgemm_bf16.min_bytes(M, N, K, batch)
        repeat = 10 if flops > 5e11 else 20

        def errors(C) -> dict:
            d = C.double() - ref
            return {"max_error": float((d.abs() / scale).max()), "relative_error": float(d.norm()) / ref_norm,
                    "nan": bool(torch.isnan(C).any())}

        C = torch.empty(*lead, M, N, device="cuda", dtype=torch.bfloat16)
        err = errors(torch.matmul(A, Bt.transpose(-1, -2)))
        t = time_torch(lambda: torch.matmul(A, Bt.transpose(-1, -2), out=C), repeat=repeat)
        rows.append(timed_row(CUBLAS, group, "peer", t.median_ms, nbytes, flops, None, min_ms=t.min_ms,
                              samples=len(t.samples_ms), **err, **sizes))
        cublas_ms = t.median_ms
        try:
            t, err, extra, mm = _nvmath_peer(A, Bt.transpose(-1, -2), errors, time_torch, repeat)
            mm.free()
            rows.append(timed_row(CUBLASLT, group, "peer", t.median_ms, nbytes, flops, None, min_ms=t.min_ms,
                                  samples=len(t.samples_ms), percent_of_cublas=100 * cublas_ms / t.median_ms,
                                  **err, **extra, **sizes))
        except Exception as exc:  # noqa: BLE001 - recorded as a row that says why
            rows.append(untimed_row(CUBLASLT, group, "peer", error=f"{type(exc).__name__}: {str(exc)[:300]}", **sizes))

        Ad, Bd, Cd = (borrow(x.data_ptr(), tuple(x.shape), sgemm_bf16.bfloat16) for x in (A, Bt, C))

        def ours(kernel, name=None, group=group, config=None, **extra):
            name = name or version_name(kernel)
            launcher = sgemm_bf16.KERNELS[kernel].launcher
            kwargs = {} if config is None else {"config": config}
            if kernel != WMMA and not hopper:
                rows.append(untimed_row(name, group, "kernel", skipped="needs a Hopper GPU (sm_90)", **sizes))
                return
            try:
                C.fill_(float("nan"))
                launcher(Ad, Bd, out=Cd, **kwargs)
                err = errors(C)
                t = time_kernel(launcher(Ad, Bd, out=Cd, prepare_only=True, **kwargs), repeat=repeat)
            except Exception as exc:  # noqa: BLE001 - recorded as a row that says why
                rows.append(untimed_row(name, group, "kernel", error=f"{type(exc).__name__}: {str(exc)[:300]}",
                                        **sizes, **extra))
                print(f"{group:<28} {name:<60} failed: {str(exc)[:200]}", flush=True)
                return
            rows.append(timed_row(name, group, "kernel", t.median_ms, nbytes, flops, None, min_ms=t.min_ms,
                                  samples=len(t.samples_ms), kernel=kernel, percent_of_cublas=100 * cublas_ms / t.median_ms,
                                  correct=bool(err["max_error"] <= 2.0 ** -8 and not err["nan"]), **err, **sizes,
                                  **({"config": config} if config else {}), **extra))
            print(f"{group:<28} {name:<60} {t.median_ms:8.3f} ms {flops / t.median_ms / 1e9:7.1f} TFLOP/s "
                  f"{100 * cublas_ms / t.median_ms:6.1f}% of cuBLAS  err {err['max_error']:.1e}", flush=True)

        for kernel in reversed(LADDER):
            ours(kernel)
        if search and hopper and M == N == K and M in SEARCH_SIZES:
            for config in SEARCH:
                label = "version 15 " + " ".join(f"{k}={v}" for k, v in config.items())
                ours(WARP_SPECIALIZED, label, search_group(M), {**sgemm_bf16.DEFAULTS[WARP_SPECIALIZED], **config})
        for r in rows:
            if r["group"] == group and r["kind"] == "peer" and "median_ms" in r:
                print(f"{group:<28} {r['name']:<60} {r['median_ms']:8.3f} ms {r['gflops'] / 1e3:7.1f} TFLOP/s",
                      flush=True)
        del A, Bt, C, ref, scale
        torch.cuda.empty_cache()

    fused = measure_fused(hopper) if FUSED_SHAPE else []
    profiles = None
    if profile and shutil.which("ncu"):
        profiles = profiler.measure(groups=(profiler.BF16,), verbose=True)["results"]
    return {"layout": "C = A B^T, A (M x K) and B (N x K) row-major BF16, C BF16, float sums",
            "squares": list(squares), "results": rows + fused, "defaults": sgemm_bf16.DEFAULTS,
            **({PROFILES: profiles} if profiles is not None else {})}


def gelu_reference(torch, A, Bt, bias) -> tuple:
    """Version 16's product A Bt^T + bias under GELU (tanh form) in float64 on the device, and the error scale
    |A| |Bt|^T + |bias| its errors are measured against."""
    x = A.double() @ Bt.double().t() + bias.double()
    ref = 0.5 * x * (1 + torch.tanh((2 / np.pi) ** 0.5 * (x + 0.044715 * x ** 3)))
    return ref, A.double().abs() @ Bt.double().abs().t() + bias.double().abs()


def measure_fused(hopper: bool) -> list[dict]:
    """Version 16 (bias and GELU in its epilogue) against cuBLAS + PyTorch's bias and GELU, and cuBLASLt's GELU
    epilogue (torch._addmm_activation), at the MLP's up projection."""
    import torch

    group, _, M, N, K = FUSED_SHAPE
    A = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    Bt = torch.randn(N, K, device="cuda").to(torch.bfloat16)
    bias = torch.randn(N, device="cuda").to(torch.bfloat16)
    ref, scale = gelu_reference(torch, A, Bt, bias)
    sizes = {"batch": 1, "M": M, "N": N, "K": K}
    flops, nbytes = sgemm_bf16.flops(M, N, K), sgemm_bf16.min_bytes(M, N, K) + 2 * N

    def errors(C) -> dict:
        d = C.double() - ref
        return {"max_error": float((d.abs() / scale).max()), "relative_error": float(d.norm() / ref.norm())}

    rows = []
    peers = (("cuBLAS + bias + GELU (torch: addmm, then gelu)",
              lambda: torch.nn.functional.gelu(torch.addmm(bias, A, Bt.t()), approximate="tanh")),
             (GELU_EPILOGUE, lambda: torch._addmm_activation(bias, A, Bt.t(), use_gelu=True)))
    baseline = None
    for name, run in peers:
        try:
            err = errors(run())
            t = time_torch(run, repeat=10)
        except Exception as exc:  # noqa: BLE001
            rows.append(untimed_row(name, group, "peer", error=f"{type(exc).__name__}: {str(exc)[:300]}", **sizes))
            continue
        baseline = baseline or t.median_ms
        rows.append(timed_row(name, group, "peer", t.median_ms, nbytes, flops, None, min_ms=t.min_ms,
                              samples=len(t.samples_ms), **err, **sizes))
    name = version_name(FUSED)
    if not hopper:
        return rows + [untimed_row(name, group, "kernel", skipped="needs a Hopper GPU (sm_90)", **sizes)]
    C = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    Ad, Bd, Cd, bd = (borrow(x.data_ptr(), tuple(x.shape), sgemm_bf16.bfloat16) for x in (A, Bt, C, bias))
    try:
        C.fill_(float("nan"))
        sgemm_bf16.sgemm_bf16_fused(Ad, Bd, bd, out=Cd, activation="gelu")
        err = errors(C)
        enqueue = sgemm_bf16.sgemm_bf16_fused(Ad, Bd, bd, out=Cd, activation="gelu", prepare_only=True)
        t = time_kernel(enqueue, repeat=10)
    except Exception as exc:  # noqa: BLE001
        return rows + [untimed_row(name, group, "kernel", error=f"{type(exc).__name__}: {str(exc)[:300]}", **sizes)]
    rows.append(timed_row(name, group, "kernel", t.median_ms, nbytes, flops, None, min_ms=t.min_ms,
                          samples=len(t.samples_ms), kernel=FUSED,
                          percent_of_cublas=100 * baseline / t.median_ms if baseline else None, **err, **sizes))
    print(f"{group:<28} {name:<60} {t.median_ms:8.3f} ms  err {err['max_error']:.1e}", flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--squares", type=int, nargs="*", default=SQUARES)
    parser.add_argument("--no-search", action="store_true", help="leave out version 15's configuration search")
    parser.add_argument("--no-profile", action="store_true", help="leave out Nsight Compute's counters")
    args = parser.parse_args(argv)
    path = write_results(NAME, measure(tuple(args.squares), search=not args.no_search, profile=not args.no_profile))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
