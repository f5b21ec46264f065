"""Benchmark of the chapter "Index notation": generated kernels (naive, and autotuned) against the
book's hand-written kernels and the library doing the same job, measured in the same run.

    DLK_BACKEND=gpu python3 -m benchmarks.index_notation   # -> benchmarks/results/index_notation.json

Workloads (comprehensions from kernels/index_notation/examples.py):

* mv at 4096 x 4096 and with few long rows (64 x 131072): against the MLP chapter's matrix-vector
  kernel (fc_forward_matvec, which also adds a bias) and cuBLAS gemv (torch.mv);
* matmul at 4096^3: against the GEMM chapter's best (sgemm_warptile) and cuBLAS (torch.matmul, TF32 off);
* fcrelu at 4096 x 1024 -> 1024: against the MLP chapter's tiled layer (fc_forward_tiled, bias, no ReLU)
  and torch (addmm + relu);
* conv2d on LeNet's C3 (6 -> 16 maps, 14 x 14, 5 x 5, batch 1024) and on a 56 x 56, 64 -> 64, 3 x 3 layer
  (batch 32, no padding, as the comprehension has none): against the CNN chapter's register-tiled
  kernel, the GEMM chapter's implicit GEMM and cuDNN (TF32 off);
* maxpool2x2 at 128 x 64 x 56 x 56: against the pooling kernel of the CNN chapter and torch.

Every generated kernel is autotuned for its shape (the search is recorded), checked against a float64
result, then timed with CUDA events (warm-up, L2 flush before each call, median).  The book's
launchers that have no enqueue-only form are timed through their ordinary (synchronising) call; the
few microseconds that adds matter only for the smallest rows.  ``--quick`` tries fewer candidates
(what the chapter uses when it measures live on a GPU).

The results file has the layout of every benchmark (``benchmarks/common.py``): a row per kernel or
peer in ``results``, grouped by workload (``group`` its label, ``comprehension`` the example it runs), ``source``
saying whether a kernel was generated or written by hand; and ``autotune``, each workload's search.
"""

from __future__ import annotations

import argparse
import tempfile
import traceback
from pathlib import Path

import numpy as np

from benchmarks.common import Contract, require_gpu_backend, timed_row, untimed_row, write_results
from kernels.conv import conv2d, conv2d_gemm, pooling
from kernels.dense import fully_connected
from kernels.gemm import sgemm
from kernels.index_notation import NAIVE as naive_schedule, compile_tc, examples as E
from kernels.index_notation.autotune import autotune
from kernels.runtime import empty, to_device
from kernels.runtime.timing import time_kernel, time_torch

NAME = "index_notation"
TOL = 1e-4

# --- what the book reads in the results file -------------------------------------------------
#: The workloads, each a group of rows (:func:`workloads` labels them so).
WORKLOADS = ("mv 4096x4096", "mv 64x131072", "matmul 4096^3", "fcrelu 4096x1024->1024", "conv2d LeNet C3 N=1024",
             "conv2d 56x56 C64 3x3 N=32", "maxpool2x2 128x64x56x56")
#: Where a kernel row's kernel comes from (its ``source``): the compiler, or a chapter's hand-written kernels.
GENERATED, HANDWRITTEN = "generated", "handwritten"
NAIVE, AUTOTUNED = f"{GENERATED}, naive", f"{GENERATED}, autotuned"
#: Each workload's autotuner search.
AUTOTUNE = "autotune"

CONTRACT = Contract(NAME, groups=WORKLOADS, rows={w: (NAIVE, AUTOTUNED) for w in WORKLOADS},
                    values={"source": (GENERATED, HANDWRITTEN)}, sections=(AUTOTUNE,))


def _timed(fn, slow=False):
    if slow:
        return time_kernel(fn, warmup=1, repeat=5, max_repeat=5)
    return time_kernel(fn, warmup=3, repeat=20, max_repeat=60)


def _rel_error(out, ref64) -> float:
    out = np.asarray(out, np.float64)
    if out.shape != ref64.shape or not np.isfinite(out).all():
        return float("inf")
    return float(np.linalg.norm(out - ref64) / max(np.linalg.norm(ref64), 1e-300))


class Workload:
    """One comprehension at one shape, with its peers."""

    def __init__(self, name, label, text, args, reference, flops, nbytes):
        self.name, self.label, self.text, self.args = name, label, text, args
        self.reference, self.flops, self.nbytes = reference, flops, nbytes
        self.rows: list[dict] = []

    def add(self, name, source, timing=None, err=None, error=None, **extra):
        """A row of the workload's group; ``source`` is "generated", "handwritten" or "peer" (a library)."""
        kind = "peer" if source == "peer" else "kernel"
        fields = {"comprehension": self.name, "source": source, **extra,
                  **({} if err is None else {"rel_error": err, "correct": err < TOL})}
        if timing is None:
            row = untimed_row(name, self.label, kind, **fields, error=(error or "not timed")[-400:])
        else:
            row = timed_row(name, self.label, kind, timing.median_ms, self.nbytes, self.flops, None,
                            min_ms=timing.min_ms, samples=len(timing.samples_ms), **fields)
        self.rows.append(row)
        shown = f"{row['median_ms'] * 1e3:10.1f} us" if "median_ms" in row else f"failed: {str(error)[:80]}"
        print(f"  {self.label:<34} {name:<36} {shown}", flush=True)


def bench_generated(w: Workload, limit: int, cache: Path) -> dict:
    ref = w.reference()
    dev = [to_device(a) if isinstance(a, np.ndarray) else a for a in w.args]
    search = autotune(w.text, w.args, limit=limit, cache=cache, use_cache=False)
    for label, sched in ((NAIVE, naive_schedule), (AUTOTUNED, search.best)):
        tc = compile_tc(w.text, sched)
        try:
            err = _rel_error(tc(*w.args), ref)
            timing = _timed(tc(*dev, prepare_only=True), slow=sched.naive)
            w.add(label, GENERATED, timing, err, schedule=sched.as_dict(), describe=sched.describe())
        except Exception:  # noqa: BLE001 - recorded, the other rows still run
            w.add(label, GENERATED, error=traceback.format_exc())
    return {"name": w.name, "label": w.label, **search.as_dict()}


def bench_peer(w: Workload, name: str, source: str, run, enqueue, slow=False):
    """``run()`` returns the output (checked); ``enqueue`` is what is timed."""
    try:
        err = _rel_error(run(), w.reference())
        w.add(name, source, _timed(enqueue, slow), err)
    except Exception:  # noqa: BLE001
        w.add(name, source, error=traceback.format_exc())


def _torch_peer(w: Workload, name: str, fn):
    try:
        out = fn()
        err = _rel_error(out.double().cpu().numpy(), w.reference())
        w.add(name, "peer", time_torch(fn, repeat=30), err)
    except Exception:  # noqa: BLE001
        w.add(name, "peer", error=traceback.format_exc())


def workloads(rng):
    f = lambda shape, mean=0.0: (mean + rng.standard_normal(shape)).astype(np.float32)  # noqa: E731
    out = []
    for M, K in ((4096, 4096), (64, 131072)):
        A, x = f((M, K)), f(K)
        out.append(Workload("mv", f"mv {M}x{K}", E.MV, (A, x), lambda A=A, x=x: A.astype(np.float64) @ x,
                            2.0 * M * K, 4.0 * (M * K + K + M)))
    n = 4096
    A, B = f((n, n)), f((n, n))
    out.append(Workload("matmul", f"matmul {n}^3", E.MATMUL, (A, B), None, 2.0 * n ** 3, 12.0 * n * n))
    Bt, Mi, N = 4096, 1024, 1024
    X, W1, b1 = f((Bt, Mi)), f((N, Mi)) / 32, f(N)
    out.append(Workload("fcrelu", f"fcrelu {Bt}x{Mi}->{N}", E.FCRELU, (X, W1, b1),
                        lambda X=X, W1=W1, b1=b1: np.maximum(X.astype(np.float64) @ W1.astype(np.float64).T + b1, 0),
                        2.0 * Bt * Mi * N, 4.0 * (Bt * Mi + N * Mi + N + Bt * N)))
    for label, (Nb, C, H, Wd, M, Kf) in (("LeNet C3", (1024, 6, 14, 14, 16, 5)), ("56x56 C64 3x3", (32, 64, 56, 56, 64, 3))):
        Xc, Wc = f((Nb, C, H, Wd)), f((M, C, Kf, Kf)) / (C * Kf)
        Ho, Wo = H - Kf + 1, Wd - Kf + 1
        out.append(Workload("conv2d", f"conv2d {label} N={Nb}", E.CONV2D, (Xc, Wc), None,
                            2.0 * Nb * M * Ho * Wo * C * Kf * Kf, 4.0 * (Xc.size + Wc.size + Nb * M * Ho * Wo)))
    Xp = f((128, 64, 56, 56))
    out.append(Workload("maxpool2x2", "maxpool2x2 128x64x56x56", E.MAXPOOL2X2, (Xp,), None,
                        float(Xp.size), 4.0 * Xp.size * 1.25))
    return out


def _torch_reference(w: Workload):
    """float64 results on the GPU (torch), for the workloads too large for NumPy loops."""
    import torch

    t = [torch.from_numpy(a).cuda().double() if isinstance(a, np.ndarray) else a for a in w.args]
    if w.name == "matmul":
        r = t[0] @ t[1]
    elif w.name == "conv2d":
        r = torch.nn.functional.conv2d(t[0], t[1])
    elif w.name == "maxpool2x2":
        r = torch.nn.functional.max_pool2d(t[0], 2)
    return r.cpu().numpy()


def bench_peers(w: Workload):
    import torch

    dev = [to_device(a) if isinstance(a, np.ndarray) else a for a in w.args]
    tens = [torch.from_numpy(a).cuda() if isinstance(a, np.ndarray) else a for a in w.args]
    if w.name == "mv":
        A, x = w.args
        zero = np.zeros(A.shape[0], np.float32)
        b_d, y_d = to_device(zero), empty(A.shape[0])
        bench_peer(w, "fc_forward_matvec (MLP chapter, + bias 0)", HANDWRITTEN,
                   lambda: fully_connected.forward_matvec(A, zero, x),
                   lambda: fully_connected.forward_matvec(dev[0], b_d, dev[1], out=y_d))
        _torch_peer(w, "cuBLAS gemv (torch.mv)", lambda: torch.mv(tens[0], tens[1]))
    elif w.name == "matmul":
        A, B = w.args
        C_d = empty((A.shape[0], B.shape[1]))
        bench_peer(w, "sgemm_warptile (GEMM chapter's best)", HANDWRITTEN, lambda: sgemm.sgemm_warptile(A, B),
                   sgemm.sgemm_warptile(dev[0], dev[1], out=C_d, prepare_only=True))
        _torch_peer(w, "cuBLAS (torch.matmul)", lambda: torch.matmul(tens[0], tens[1]))
    elif w.name == "fcrelu":
        X, W1, b1 = w.args
        Y_d = empty((X.shape[0], W1.shape[0]))
        ref = w.reference
        w.reference = lambda: X.astype(np.float64) @ W1.astype(np.float64).T + b1  # the kernel has no ReLU
        bench_peer(w, "fc_forward_tiled (MLP chapter; no ReLU)", HANDWRITTEN,
                   lambda: fully_connected.forward_tiled(X, W1, b1),
                   lambda: fully_connected.forward_tiled(dev[0], dev[1], dev[2], out=Y_d))
        w.reference = ref
        _torch_peer(w, "torch relu(addmm)", lambda: torch.relu(torch.addmm(tens[2], tens[0], tens[1].t())))
    elif w.name == "conv2d":
        X, Wc = w.args
        zero = np.zeros(Wc.shape[0], np.float32)
        b_d = to_device(zero)
        N, C, H, Wd = X.shape
        M, _, K, _ = Wc.shape
        Y_d = empty((N, M, H - K + 1, Wd - K + 1))
        bench_peer(w, "conv2d_forward_register_tiled (CNN chapter)", HANDWRITTEN,
                   lambda: conv2d.forward_register_tiled(X, Wc, zero),
                   lambda: conv2d.forward_register_tiled(dev[0], dev[1], b_d, out=Y_d))
        bench_peer(w, "implicit GEMM (GEMM chapter)", HANDWRITTEN, lambda: conv2d_gemm.conv2d_implicit_gemm(X, Wc),
                   conv2d_gemm.conv2d_implicit_gemm(dev[0], dev[1], out=Y_d, prepare_only=True))
        _torch_peer(w, "cuDNN (torch conv2d)", lambda: torch.nn.functional.conv2d(tens[0], tens[1]))
    elif w.name == "maxpool2x2":
        (X,) = w.args
        N, C, H, Wd = X.shape
        Y_d = empty((N, C, H // 2, Wd // 2))
        bench_peer(w, "max_pool_forward (CNN chapter)", HANDWRITTEN, lambda: pooling.max_pool(X, 2),
                   lambda: pooling.max_pool(dev[0], 2, out=Y_d))
        _torch_peer(w, "torch max_pool2d", lambda: torch.nn.functional.max_pool2d(tens[0], 2))


def measure(quick: bool = False, only=()) -> dict:
    """Every workload on the current GPU (what the chapter calls when it runs on a GPU)."""
    require_gpu_backend()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rng = np.random.default_rng(2018)
    limit = 12 if quick else 48
    cache = Path(tempfile.mkdtemp()) / "tc_autotune.json"
    results = {"tf32": False, "autotune_candidates": limit, "results": [], AUTOTUNE: []}
    for w in workloads(rng):
        if only and w.name not in only:
            continue
        try:
            if w.reference is None:
                ref = _torch_reference(w)
                w.reference = lambda ref=ref: ref
            results[AUTOTUNE].append(bench_generated(w, limit, cache))
            bench_peers(w)
        except Exception:  # noqa: BLE001 - keep what was measured
            traceback.print_exc()
            results.setdefault("errors", []).append(f"{w.label}: {traceback.format_exc()[-500:]}")
        results["results"] += w.rows
    return results


def summary(results):
    rows = results["results"]
    for group in dict.fromkeys(r["group"] for r in rows):
        timed = [r for r in rows if r["group"] == group and r.get("median_ms")]
        hand = [r for r in timed if r["source"] == HANDWRITTEN]
        peer = [r for r in timed if r["kind"] == "peer"]
        best = next((r for r in timed if r["name"] == AUTOTUNED), None)
        if not best:
            print(f"{group:<34} no autotuned kernel")
            continue
        line = f"{group:<34} generated {best['median_ms'] * 1e3:9.1f} us"
        if hand:
            h = min(hand, key=lambda r: r["median_ms"])
            line += f"  {best['median_ms'] / h['median_ms']:5.2f}x the hand-written time"
        if peer:
            line += f"  {100 * peer[0]['median_ms'] / best['median_ms']:5.1f}% of the library's speed"
        print(line)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="12 autotuning candidates per workload instead of 48")
    parser.add_argument("--only", nargs="*", default=(), choices=("mv", "matmul", "fcrelu", "conv2d", "maxpool2x2"))
    args = parser.parse_args(argv)
    results = measure(args.quick, args.only)
    path = write_results(NAME, results)
    print(f"wrote {path}")
    summary(results)


if __name__ == "__main__":
    main()
