"""SGEMM at the shapes the book's layers use: version 7, version 8 (tiles for the shape, split-K) and cuBLAS.

    PYTHONPATH=$PWD DLK_BACKEND=gpu python3 -m benchmarks.sgemm_shapes     # -> benchmarks/results/sgemm_shapes.json

For each shape (the L-Softmax layer's three products at 10 classes, the MLP chapter's dense layer at
4096 x 1024 -> 1024, and 1024^3), in one run on one GPU:

* version 7 (``sgemm_warptile``, 128 x 128 tiles, the whole of K per block);
* version 8 with the schedule ``sgemm_plan`` picks for the shape;
* version 8 with every tile of ``SPLITK_CONFIGS`` and K split 1, 2, 4, ... ways (the search that the
  plan's rule is checked against);
* cuBLAS (``torch.matmul`` on the same row-major operands, TF32 off);
* version 8 and cuBLAS with A stored transposed (K x M), as a weight gradient's dY is.

Every kernel is first checked against a float64 product (torch on the GPU).  Times are CUDA-event
medians with L2 flushed before each call (kernels/runtime/timing.py).
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.common import require_gpu_backend, write_results

NAME = "sgemm_shapes"
#: (label, M, N, K)
SHAPES = (
    ("L-Softmax logits X W^T, 10 classes", 4096, 10, 512),
    ("L-Softmax weight gradient X^T G, 10 classes", 512, 10, 4096),
    ("L-Softmax input gradient G W, 10 classes", 4096, 512, 10),
    ("MLP forward / input gradient, 4096 x 1024 -> 1024", 4096, 1024, 1024),
    ("MLP weight gradient dY^T X, 4096 x 1024 -> 1024", 1024, 1024, 4096),
    ("square 1024", 1024, 1024, 1024),
)
SPLITS = (1, 2, 4, 8, 16, 32, 64, 128)
TOL = 1e-5  # relative Frobenius error against float64


def measure(shapes=SHAPES, repeat: int = 20) -> dict:
    """Validate, then time version 7, version 8 (plan and search) and cuBLAS at every shape."""
    require_gpu_backend()
    import torch

    from kernels import sgemm
    from kernels.runtime import empty, to_device
    from kernels.runtime.loader import multiprocessors
    from kernels.runtime.timing import time_kernel, time_torch

    torch.backends.cuda.matmul.allow_tf32 = False
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
            if not err < TOL:
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
        v8_t = {"rel_error": err_t, "correct": err_t < TOL}
        if err_t < TOL:
            v8_t.update(timed(sgemm.sgemm_splitk(At, Bd, out=Cd, plan=plan, a_transposed=True, prepare_only=True)))
            v8_t["percent_of_cublas"] = 100 * peer["median_us"] / v8_t["median_us"]
        tAt = torch.from_numpy(np.ascontiguousarray(A.T)).cuda()
        cublas_t = time_torch(lambda: torch.matmul(tAt.T, tB), repeat=repeat)
        search = []
        for config, c in sgemm.SPLITK_CONFIGS.items():
            k_tiles = -(-K // c["WT_BK"])
            for splits in SPLITS:
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
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    data = measure(repeat=args.repeat)
    path = write_results(NAME, data)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
