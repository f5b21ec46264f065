"""Benchmark of the GEMM chapter's tensor-core versions: float32 accuracy from TF32 tensor cores (3xTF32).

    PYTHONPATH=$PWD DLK_BACKEND=gpu python3 -m benchmarks.sgemm_tensor_cores   # -> benchmarks/results/sgemm_tensor_cores.json

At M = N = K = 1024, 4096 and 8192, in one run on one GPU: versions 11 (wgmma fed by the TMA unit) and 10
(wgmma fed by cp.async), both in kernels/gemm/sgemm_hopper.cu and Hopper only, version 9 (kernels/gemm/sgemm.cu,
WMMA), version 7 (the FP32 units' best), cuBLAS FP32 (torch.matmul, TF32
off) and cuBLAS TF32 (torch.matmul with TF32 allowed: faster, and as inaccurate as TF32 is).  Every row
records its time and its error: the largest |C - C64| / (|A| |B|) over the elements, against a float64
product of the same inputs (torch on the GPU).  At 4096 version 10 is also run with a few tile
configurations (the "search" group) and without its float partial sums (H_PROMOTE = 0), to show what they
buy in accuracy, and version 11 with a few of the same.  Times include the split of B into TF32 parts
and version 11's packing of A (kernels of their own).

On a second kind of GPU, ``DLK_RESULTS_TAG=h200`` writes ``sgemm_tensor_cores_h200.json`` beside it
(benchmarks/common.py).
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.common import Contract, require_gpu_backend, timed_row, untimed_row, write_results
from kernels.gemm import sgemm, sgemm_hopper
from kernels.runtime import empty, to_device
from kernels.runtime.timing import time_kernel, time_torch

NAME = "sgemm_tensor_cores"
SIZES = (1024, 4096, 8192)
SEARCH_SIZE = 4096  # the size of the tile searches and of version 10 without its float partial sums
SEARCH = (  # version 10's tile configurations tried at 4096 (sgemm_hopper.cu's H_* defines)
    {"H_WARPGROUPS": 2, "H_STAGES": 4, "H_PROMOTE": 4},
    {"H_WARPGROUPS": 2, "H_STAGES": 4, "H_PROMOTE": 2},
    {"H_WARPGROUPS": 2, "H_STAGES": 4, "H_PROMOTE": 8},
    {"H_WARPGROUPS": 2, "H_STAGES": 4, "H_PROMOTE": 1, "H_INFLIGHT": 0},
    {"H_WARPGROUPS": 2, "H_BK": 16, "H_STAGES": 8, "H_PROMOTE": 8},
    {"H_WARPGROUPS": 3, "H_STAGES": 3, "H_PROMOTE": 1, "H_INFLIGHT": 0},
    {"H_WARPGROUPS": 4, "H_STAGES": 3, "H_PROMOTE": 0},
)

#: Version 11 with its default tiles and with some of version 10's alternatives.
SEARCH_11 = (
    {"H_STAGES": 4, "H_PROMOTE": 4},
    {"H_STAGES": 3, "H_PROMOTE": 4},
    {"H_STAGES": 4, "H_PROMOTE": 8},
    {"H_STAGES": 4, "H_PROMOTE": 0},
)


def square(n: int) -> str:
    """The group of every version and peer at M = N = K = ``n``."""
    return f"square {n}"


# --- what the book reads in the results file -------------------------------------------------
V11 = "version 11: 3xTF32, wgmma fed by TMA"
V10 = "version 10: 3xTF32, wgmma"
V9, V7 = "version 9: 3xTF32, WMMA", "version 7: FP32 warptile"
CUBLAS_FP32, CUBLAS_TF32 = "cuBLAS FP32 (TF32 off)", "cuBLAS TF32"
#: Version 10 without its float partial sums at SEARCH_SIZE, in a group of its own.
NO_PARTIAL_SUMS = f"{square(SEARCH_SIZE)}, no partial sums"
V10_NO_PARTIAL_SUMS = "version 10 without float partial sums (H_PROMOTE=0)"
#: The tile searches of versions 10 and 11 at SEARCH_SIZE.
SEARCH_10_GROUP, SEARCH_11_GROUP = f"search {SEARCH_SIZE}", f"search {SEARCH_SIZE}, version 11"
#: The sizes measured (a list of them).
MEASURED_SIZES = "sizes"

CONTRACT = Contract(
    NAME, groups=(*(square(n) for n in SIZES), NO_PARTIAL_SUMS, SEARCH_10_GROUP, SEARCH_11_GROUP),
    rows={**{square(n): (CUBLAS_FP32, CUBLAS_TF32, V11, V10, V9, V7) for n in SIZES},
          NO_PARTIAL_SUMS: (V10_NO_PARTIAL_SUMS,)},
    sections=(MEASURED_SIZES,),
)


def measure(sizes=SIZES) -> dict:
    require_gpu_backend()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    # versions 10 and 11 run on Hopper GPUs only; elsewhere their rows say so and the rest is measured
    hopper = sgemm_hopper.is_hopper()
    not_hopper = "" if hopper else "versions 10 and 11 (wgmma) need a Hopper GPU (sm_90)"
    rng = np.random.default_rng(11)
    rows = []
    for n in sizes:
        A = rng.standard_normal((n, n), dtype=np.float32)
        B = rng.standard_normal((n, n), dtype=np.float32)
        tA, tB = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
        ref = tA.double() @ tB.double()
        scale = tA.double().abs() @ tB.double().abs()
        flops = sgemm.flops(n, n, n)
        nbytes = sgemm.min_bytes(n, n, n)
        Ad, Bd, Cd = to_device(A), to_device(B), empty((n, n))
        repeat = 10 if n >= 8192 else 20
        group = square(n)
        sizes_ = {"M": n, "N": n, "K": n}

        def error_of(C) -> float:
            c = C if isinstance(C, torch.Tensor) else torch.from_numpy(C).cuda()
            return float(((c.double() - ref).abs() / scale).max())

        out = torch.empty(n, n, device="cuda")
        for allow, name in ((False, CUBLAS_FP32), (True, CUBLAS_TF32)):
            torch.backends.cuda.matmul.allow_tf32 = allow
            err = error_of(torch.matmul(tA, tB))
            t = time_torch(lambda: torch.matmul(tA, tB, out=out), repeat=repeat)
            rows.append(timed_row(name, group, "peer", t.median_ms, nbytes, flops, None, min_ms=t.min_ms,
                                  samples=len(t.samples_ms), max_error=err, **sizes_))
        torch.backends.cuda.matmul.allow_tf32 = False
        cublas_err = rows[-2]["max_error"]

        def ours(name, launcher, group=group, **extra):
            try:
                Cd.set(np.full((n, n), np.nan, np.float32))
                launcher(Ad, Bd, out=Cd)
                err = error_of(Cd.get())
                t = time_kernel(launcher(Ad, Bd, out=Cd, prepare_only=True), repeat=repeat)
            except Exception as exc:  # noqa: BLE001 - recorded as a row that says why
                rows.append(untimed_row(name, group, "kernel", error=str(exc)[:300], **sizes_, **extra))
                return
            rows.append(timed_row(name, group, "kernel", t.median_ms, nbytes, flops, None, min_ms=t.min_ms,
                                  samples=len(t.samples_ms), max_error=err,
                                  error_vs_cublas_fp32=err / cublas_err, correct=bool(err <= 1e-5), **sizes_, **extra))
            print(f"{n}^3 {name:<44} {t.median_ms:8.3f} ms  max error {err:.2e}", flush=True)

        for name, launcher in ((V11, sgemm_hopper.sgemm_tf32x3_tma), (V10, sgemm_hopper.sgemm_tf32x3_wgmma)):
            if hopper:
                ours(name, launcher)
            else:
                rows.append(untimed_row(name, group, "kernel", skipped=not_hopper, **sizes_))
        ours(V9, sgemm.sgemm_tf32x3_wmma)
        ours(V7, sgemm.sgemm_warptile)
        if n == SEARCH_SIZE and hopper:
            ours(V10_NO_PARTIAL_SUMS,
                 lambda *a, **k: sgemm_hopper.sgemm_tf32x3_wgmma(*a, config={"H_PROMOTE": 0}, **k),
                 group=NO_PARTIAL_SUMS)
            for config in SEARCH:
                ours("version 10 " + " ".join(f"{k[2:]}={v}" for k, v in config.items()),
                     lambda *a, config=config, **k: sgemm_hopper.sgemm_tf32x3_wgmma(*a, config=config, **k),
                     group=SEARCH_10_GROUP, config=config)
            for config in SEARCH_11:
                ours("version 11 " + " ".join(f"{k[2:]}={v}" for k, v in config.items()),
                     lambda *a, config=config, **k: sgemm_hopper.sgemm_tf32x3_tma(*a, config=config, **k),
                     group=SEARCH_11_GROUP, config=config)
        for r in rows:
            if r["group"] == group and r["kind"] == "peer":
                print(f"{n}^3 {r['name']:<44} {r['median_ms']:8.3f} ms  max error {r['max_error']:.2e}", flush=True)
    return {"tf32_peer_allowed": "cuBLAS TF32 only", MEASURED_SIZES: list(sizes), "results": rows,
            "default_config": sgemm_hopper.DEFAULT_CONFIG}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=SIZES)
    args = parser.parse_args(argv)
    path = write_results(NAME, measure(tuple(args.sizes)))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
