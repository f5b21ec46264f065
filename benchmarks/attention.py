"""Benchmark attention: every version against PyTorch, forward and backward, causal and not, in one run on one GPU.

    PYTHONPATH=$PWD DLK_BACKEND=gpu python3 -m benchmarks.attention     # writes benchmarks/results/attention.json

Batch 4, 16 heads, head dimensions 64 and 128, sequence lengths 512 to 16384.  Peers, timed in the same run:
``torch.nn.functional.scaled_dot_product_attention`` with its FlashAttention-2 backend in BF16 (against versions 4
and the BF16 backward), and the naive three-op attention in float32 (``softmax(q k^T / sqrt(d)) v``, TF32 off;
against versions 1, 3 and the float backward).  The float versions and the naive peer are timed up to
``--float-up-to`` (4096, the length of the goals; each is several times slower than BF16 and the naive peer holds
N x N matrices), and a version that needs more memory than the card has free is recorded as skipped, saying how
much it needs.  Before a version is timed at a size, its output is checked against the peer (float versions
against SDPA's memory-efficient float32 kernel, which needs no N x N matrix); a wrong one is recorded and not timed.

Each row has its size's floors: ``floor_ms``, the least bytes (Q, K, V read, O written; the backward also reads O
and dO and writes three gradients) over the copy bandwidth measured now, and ``roof_ms``, the flops (4 N^2 d per
head, half that with the mask; 2.5 times that backward) over the arithmetic peak measured now: the FP32 FMA rate
for float32, a large BF16 ``torch.matmul``'s rate for BF16 (a measured floor of the tensor cores' peak).  Times are
medians of 3 to 15 calls (as many as fit about half a second), each after an L2 flush.

Also recorded: ``softmax``, version 2 against ``torch.softmax`` on the (batch x heads x N) x N scores;
``numerics``, each forward's error against float64 (one head, computed on the GPU in float64) at growing lengths,
SDPA's among them; ``training_step``, a pre-norm transformer block's whole training step in BF16
(``kernels/frameworks/torch_transformer_block.py``) with attention by the op ``dlk::attention`` and by SDPA.
``summary["goals"]`` holds the chapter's goals at N = 4096.  ``configurations``: version 4 and the BF16 backward
in each tile configuration of :data:`CONFIGURATIONS` at N = 4096 beside SDPA (the defaults,
``attention_bf16.DEFAULT_CONFIGS``, are the fastest of them); ``--configurations-only`` measures only those.
``profiles``: Nsight Compute's counters of versions 3, 4, the BF16 backward and SDPA's flash kernels at N = 4096
(``benchmarks/profiles.py``, where ``ncu`` is on the PATH).  Every module is built first, nvcc's runs side by
side.  The whole run, profiles included, takes under three minutes on an H100.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np

from benchmarks import profiles as profiler
from benchmarks.common import Contract, require_gpu_backend, timed_row, untimed_row, write_results
from kernels import KERNEL_DIR
from kernels.attention import attention as fp32
from kernels.attention import attention_bf16 as bf16
from kernels.frameworks import torch_transformer_block as tb
from kernels.runtime import borrow, current_backend
from kernels.runtime.gpu import IMAGES_VARIABLE, store_image
from kernels.runtime.signature import parse_kernels
from kernels.runtime.sources import source_path
from kernels.runtime.timing import time_kernel, time_torch
from kernels.tools.roofline import measure_peaks, peaks_as_dict

SEQS = (512, 1024, 2048, 4096, 8192, 16384)
HEAD_DIMS = (64, 128)
BATCH, HEADS = 4, 16
FLOAT_UP_TO = 4096
NUMERICS_SEQS = (1024, 4096, 16384)
GOAL_SEQ = 4096
#: The chapter's goals: forward and backward time of SDPA-flash over ours, unfused float over fused float, and
#: the fused float forward's time over its own bound (``summary["goals"]`` names each by its key).
FORWARD_VS_SDPA, BACKWARD_VS_SDPA, FUSED_VS_UNFUSED_FLOAT, FLOAT_TIMES_BOUND = (
    "forward_vs_sdpa", "backward_vs_sdpa", "fused_vs_unfused_float", "float_times_bound")
GOALS = {FORWARD_VS_SDPA: 0.9, BACKWARD_VS_SDPA: 0.7, FUSED_VS_UNFUSED_FLOAT: 10.0, FLOAT_TIMES_BOUND: 1.5}
#: Tile configurations of the BF16 kernels (attention_bf16.cu's BF_* defines), each a forward and a backward
#: tiling, timed at GOAL_SEQ: the default first (attention_bf16.DEFAULT_CONFIGS, the fastest of a wider search), then
#: the first tiling the kernels were written with (64-row blocks of 4 warps, 64-key tiles) and the runners-up: 4 or
#: 8 warps, 32 to 128 keys per forward tile, one or two 16-row query tiles per warp, O's rescale skipped or not;
#: 64 or 128 keys per backward block, 32 to 128 queries per backward tile.
FIRST_TILING = {"BF_WARPS": 4, "BF_BN": 64, "BF_M_TILES": 1, "BF_RESCALE_SKIP": 0, "BF_BWD_WARPS": 4, "BF_BWD_BQ": 64}
CONFIGURATIONS = {
    64: [bf16.DEFAULT_CONFIGS[64], FIRST_TILING,
         {"BF_WARPS": 8, "BF_BN": 64, "BF_M_TILES": 1, "BF_MIN_BLOCKS": 2, "BF_RESCALE_SKIP": 0,
          "BF_BWD_WARPS": 4, "BF_BWD_BQ": 32},
         {"BF_WARPS": 4, "BF_BN": 64, "BF_M_TILES": 2, "BF_RESCALE_SKIP": 1, "BF_BWD_WARPS": 4, "BF_BWD_BQ": 128},
         {"BF_WARPS": 8, "BF_BN": 128, "BF_M_TILES": 1, "BF_MIN_BLOCKS": 2, "BF_RESCALE_SKIP": 1,
          "BF_BWD_WARPS": 8, "BF_BWD_BQ": 64}],
    128: [bf16.DEFAULT_CONFIGS[128], FIRST_TILING,
          {"BF_WARPS": 4, "BF_BN": 32, "BF_M_TILES": 2, "BF_RESCALE_SKIP": 1, "BF_BWD_WARPS": 4, "BF_BWD_BQ": 32},
          {"BF_WARPS": 4, "BF_BN": 64, "BF_M_TILES": 2, "BF_RESCALE_SKIP": 0, "BF_BWD_WARPS": 8, "BF_BWD_BQ": 32},
          {"BF_WARPS": 8, "BF_BN": 32, "BF_M_TILES": 2, "BF_RESCALE_SKIP": 1, "BF_BWD_WARPS": 4, "BF_BWD_BQ": 64}],
}
MEMORY_MARGIN = 0.85          # of the free memory a version may ask for
BUDGET_S = 0.5                # time spent timing one row, about

# --- the results file and what the book reads in it ------------------------------------------
NAME = "attention"
#: The file ``--configurations-only`` writes: the tile configurations alone, a search the book does not read.
CONFIGURATIONS_NAME = "attention_configurations"
FORWARD, BACKWARD, SOFTMAX, TRAINING_STEP = "forward", "backward", "softmax", "training_step"
#: A row's ``dtype``: what the book shows apart (the float versions against the naive peer, BF16 against SDPA).
FLOAT32, BF16 = "float32", "bf16"
#: Each forward's error against float64 at growing lengths, SDPA's among them.
NUMERICS = "numerics"
V1, V3, V4 = "v1 unfused float32", "v3 fused float32", "v4 fused bf16"
V5F, V5B = "v5 backward float32", "v5 backward bf16"
SDPA, SDPA_F32, NAIVE = "torch sdpa flash bf16", "torch sdpa efficient float32", "torch naive float32"
#: Version 4 and the BF16 backward in each tile configuration of CONFIGURATIONS, beside SDPA: rows of the FORWARD
#: and BACKWARD groups, each with its ``config``.
TILINGS = "configurations"
#: Nsight Compute's counters (benchmarks/profiles.py's rows, named by their ``step``), where ncu is on the PATH: a
#: group per head dimension, each kernel's step by head dimension.
PROFILES = "profiles"
PROFILED_GROUPS = profiler.ATTENTION_GROUPS
PROFILED_V3, PROFILED_V4, PROFILED_SDPA_FORWARD = (profiler.ATTENTION_V3, profiler.ATTENTION_V4,
                                                   profiler.ATTENTION_SDPA_FORWARD)
PROFILED_BACKWARD, PROFILED_SDPA_BACKWARD = profiler.ATTENTION_BACKWARD, profiler.ATTENTION_SDPA_BACKWARD
_PROFILED_STEPS = tuple(step for steps in (PROFILED_V3, PROFILED_V4, PROFILED_SDPA_FORWARD, PROFILED_BACKWARD,
                                           PROFILED_SDPA_BACKWARD) for step in steps.values())

CONTRACT = Contract(
    NAME, groups=(FORWARD, BACKWARD, SOFTMAX, TRAINING_STEP),
    rows={FORWARD: (V1, V3, V4, SDPA, NAIVE), BACKWARD: (V5F, V5B, SDPA, NAIVE)},
    values={"dtype": (FLOAT32, BF16)}, sections=("summary", NUMERICS, TILINGS, PROFILES),
    entries={"summary": tuple(GOALS), TILINGS: (FORWARD, BACKWARD, V4, V5B),
             PROFILES: (*PROFILED_GROUPS.values(), *_PROFILED_STEPS)},
)


def _timed(fn, torch_peer: bool):
    """Median time of ``fn()`` (which only queues work): a warm-up call, then as many as fit BUDGET_S (3 to 15)."""
    import torch

    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = time.perf_counter() - start
    repeat = int(min(15, max(3, BUDGET_S / max(once, 1e-6))))
    if torch_peer:
        return time_torch(fn, warmup=1, repeat=repeat)
    return time_kernel(fn, warmup=1, repeat=repeat, max_repeat=repeat)


def max_error(got, expected) -> float:
    """max |got - expected| / max(1, max |expected|), in float64, on the GPU."""
    got, expected = got.double(), expected.double()
    return float((got - expected).abs().max().item() / max(1.0, expected.abs().max().item()))


def _view(t):
    """A torch tensor (BF16 or float32) as a device buffer of the runtime: its memory, no copy."""
    dtype = np.dtype(ml_dtypes.bfloat16) if str(t.dtype) == "torch.bfloat16" else np.dtype(np.float32)
    return borrow(t.data_ptr(), tuple(t.shape), dtype)


def naive_attention(q, k, v, causal: bool):
    """The three products as PyTorch writes them: S, its softmax P (both N x N per head), O = P V."""
    import torch

    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def sdpa(q, k, v, causal: bool, backend):
    import torch
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(backend):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


class _Sweep:
    """The rows of one run, and the figures each row is set against."""

    def __init__(self, peaks, bf16_gflops: float):
        self.peaks, self.bf16_gflops, self.rows = peaks, bf16_gflops, []

    def sizes(self, shape: dict) -> dict:
        return {"batch": shape["batch"], "heads": shape["heads"], "seq": shape["seq"], "head_dim": shape["head_dim"],
                "causal": bool(shape["causal"])}

    def add(self, name, group, kind, timing, shape, nbytes, flops, dtype, version=None, **extra):
        floor_ms = nbytes / (self.peaks.bandwidth_gbs * 1e9) * 1e3
        roof_ms = flops / ((self.bf16_gflops if dtype == BF16 else self.peaks.fp32_gflops) * 1e9) * 1e3
        row = timed_row(name, group, kind, timing.median_ms, nbytes, flops, self.peaks.bandwidth_gbs,
                        min_ms=timing.min_ms, samples=len(timing.samples_ms), **self.sizes(shape), dtype=dtype,
                        version=version, floor_ms=floor_ms, roof_ms=roof_ms,
                        times_bound=timing.median_ms / max(floor_ms, roof_ms), **extra)
        self.rows.append(row)
        return row

    def skip(self, name, group, kind, shape, why: str, **extra):
        self.rows.append(untimed_row(name, group, kind, **self.sizes(shape), **extra, skipped=why))

    def wrong(self, name, group, kind, shape, error: float, tol: float):
        self.rows.append(untimed_row(name, group, kind, **self.sizes(shape),
                                     error=f"max error {error:.3g} against the peer is over {tol:.3g}: not timed"))


def _fits(nbytes: float) -> tuple[bool, str]:
    import torch

    free, _ = torch.cuda.mem_get_info()
    return nbytes <= MEMORY_MARGIN * free, f"needs {nbytes / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"


def _entry(sweep: _Sweep, name: str, group: str, kind: str, shape: dict, dtype: str, nbytes: float, flops: float,
           run, check=None, tol: float = 0.0, version=None, peer: dict | None = None, **extra) -> dict | None:
    """One row: ``check()`` (the output's error against the reference, after running it once) within ``tol``,
    then ``run`` (which only queues the work) timed.  A failure is recorded in the row, and the run goes on."""
    try:
        if check is not None:
            error = check()
            if not error <= tol:
                sweep.wrong(name, group, kind, shape, error, tol)
                return None
            extra["error_vs_peer"] = error
        row = sweep.add(name, group, kind, _timed(run, kind == "peer"), shape, nbytes, flops, dtype, version=version,
                        **extra)
        if peer is not None:
            row["speedup_vs_peer"] = peer["median_ms"] / row["median_ms"]
        return row
    except Exception as exc:  # noqa: BLE001 - one failing row must not lose the others
        sweep.rows.append(untimed_row(name, group, kind, **sweep.sizes(shape), error=f"{type(exc).__name__}: {exc}"[:400]))
        return None


def _measure_bf16(sweep: _Sweep, shape: dict, q, k, v, grad, configs=(None,)) -> None:
    """Version 4 and the BF16 backward against SDPA's flash kernel, in each tile configuration of ``configs``
    (None: the default of the head dimension; another's rows record it as ``config``)."""
    import torch
    from torch.nn.attention import SDPBackend

    batch, heads, n, d = (shape[key] for key in ("batch", "heads", "seq", "head_dim"))
    causal = bool(shape["causal"])
    fwd_bytes, bwd_bytes = fp32.forward_bytes(shape, 2), fp32.backward_bytes(shape, 2)
    fwd_flops, bwd_flops = fp32.forward_flops(shape), fp32.backward_flops(shape)
    qb, kb, vb, gb = (t.bfloat16() for t in (q, k, v, grad))
    out, lse = torch.empty_like(qb), torch.empty((batch, heads, n), device="cuda")
    qr, kr, vr = (t.clone().requires_grad_(True) for t in (qb, kb, vb))
    peer_out = sdpa(qr, kr, vr, causal, SDPBackend.FLASH_ATTENTION)
    grads = tuple(torch.empty_like(qb) for _ in range(3))
    workspace = (torch.empty((batch * heads, n), device="cuda"), torch.empty((batch * heads, n, d), device="cuda"))
    torch.cuda.synchronize()
    forward_peer = _entry(sweep, SDPA, FORWARD, "peer", shape, BF16, fwd_bytes, fwd_flops,
                          lambda: sdpa(qb, kb, vb, causal, SDPBackend.FLASH_ATTENTION))
    backward_peer = _entry(sweep, SDPA, BACKWARD, "peer", shape, BF16, bwd_bytes, bwd_flops,
                           lambda: torch.autograd.grad(peer_out, (qr, kr, vr), gb, retain_graph=True))

    for config in configs:
        extra = {} if config is None else {"config": dict(config)}

        def forward(sync=True, config=config):
            return bf16.attention_forward(_view(qb), _view(kb), _view(vb), causal, out=_view(out), lse=_view(lse),
                                          config=config, sync=sync)

        def forward_error():
            forward()
            return max_error(out, sdpa(qb, kb, vb, causal, SDPBackend.FLASH_ATTENTION))

        def backward(sync=True, config=config):
            return bf16.attention_backward(_view(qb), _view(kb), _view(vb), _view(out), _view(lse), _view(gb), causal,
                                           out=tuple(_view(t) for t in grads),
                                           workspace=tuple(_view(t) for t in workspace), config=config, sync=sync)

        def backward_error():
            forward()
            backward()
            expected = torch.autograd.grad(peer_out, (qr, kr, vr), gb, retain_graph=True)
            return max(max_error(a, b) for a, b in zip(grads, expected))

        _entry(sweep, V4, FORWARD, "kernel", shape, BF16, fwd_bytes, fwd_flops, lambda: forward(sync=False),
               check=forward_error, tol=2e-2, version=4, peer=forward_peer, **extra)
        _entry(sweep, V5B, BACKWARD, "kernel", shape, BF16, bwd_bytes, bwd_flops, lambda: backward(sync=False),
               check=backward_error, tol=5e-2, version=5, peer=backward_peer, **extra)


def _measure_float(sweep: _Sweep, shape: dict, q, k, v, grad) -> None:
    """Versions 1, 3 and the float backward against the naive three products, checked against SDPA's float32
    memory-efficient kernel (which needs no N x N matrix)."""
    import torch
    from torch.nn.attention import SDPBackend

    batch, heads, n = (shape[key] for key in ("batch", "heads", "seq"))
    causal = bool(shape["causal"])
    fwd_bytes, bwd_bytes = fp32.forward_bytes(shape), fp32.backward_bytes(shape)
    fwd_flops, bwd_flops = fp32.forward_flops(shape), fp32.backward_flops(shape)
    reference = sdpa(q, k, v, causal, SDPBackend.EFFICIENT_ATTENTION)
    out, lse = torch.empty_like(q), torch.empty((batch, heads, n), device="cuda")

    naive_fwd = naive_bwd = None
    fits, why = _fits(4.0 * 3 * batch * heads * n * n)   # S, P and the gradient's N x N, at least
    if fits:
        naive_fwd = _entry(sweep, NAIVE, FORWARD, "peer", shape, FLOAT32, fwd_bytes, fwd_flops,
                           lambda: naive_attention(q, k, v, causal))
        qr, kr, vr = (t.clone().requires_grad_(True) for t in (q, k, v))
        naive_out = naive_attention(qr, kr, vr, causal)
        naive_bwd = _entry(sweep, NAIVE, BACKWARD, "peer", shape, FLOAT32, bwd_bytes, bwd_flops,
                           lambda: torch.autograd.grad(naive_out, (qr, kr, vr), grad, retain_graph=True))
        del qr, kr, vr, naive_out
        gc.collect()
        torch.cuda.empty_cache()
    else:
        sweep.skip(NAIVE, FORWARD, "peer", shape, why)
        sweep.skip(NAIVE, BACKWARD, "peer", shape, why)

    fits, why = _fits(fp32.unfused_bytes_needed(shape))
    if fits:
        workspace = fp32.unfused_workspace(shape)

        def unfused(sync=True):
            return fp32.attention_unfused(_view(q), _view(k), _view(v), causal, out=_view(out), workspace=workspace,
                                          sync=sync)

        def unfused_error():
            unfused()
            return max_error(out, reference)

        _entry(sweep, V1, FORWARD, "kernel", shape, FLOAT32, fwd_bytes, fwd_flops, lambda: unfused(sync=False),
               check=unfused_error, tol=1e-4, version=1, peer=naive_fwd, n_by_n_bytes=fp32.unfused_bytes_needed(shape))
        del workspace
        gc.collect()
    else:
        sweep.skip(V1, FORWARD, "kernel", shape, why)

    def forward(sync=True):
        return fp32.attention_forward(_view(q), _view(k), _view(v), causal, out=_view(out), lse=_view(lse), sync=sync)

    def forward_error():
        forward()
        return max_error(out, reference)

    _entry(sweep, V3, FORWARD, "kernel", shape, FLOAT32, fwd_bytes, fwd_flops, lambda: forward(sync=False),
           check=forward_error, tol=1e-4, version=3, peer=naive_fwd)

    grads = tuple(torch.empty_like(q) for _ in range(3))
    Dvec = torch.empty((batch * heads, n), device="cuda")

    def backward(sync=True):
        return fp32.attention_backward(_view(q), _view(k), _view(v), _view(out), _view(lse), _view(grad), causal,
                                       out=tuple(_view(t) for t in grads), workspace=_view(Dvec), sync=sync)

    def backward_error():
        forward()
        backward()
        qr, kr, vr = (t.clone().requires_grad_(True) for t in (q, k, v))
        expected = torch.autograd.grad(sdpa(qr, kr, vr, causal, SDPBackend.EFFICIENT_ATTENTION), (qr, kr, vr), grad)
        return max(max_error(a, b) for a, b in zip(grads, expected))

    _entry(sweep, V5F, BACKWARD, "kernel", shape, FLOAT32, bwd_bytes, bwd_flops, lambda: backward(sync=False),
           check=backward_error, tol=1e-3, version=5, peer=naive_bwd)


def _measure_size(sweep: _Sweep, shape: dict, with_float: bool) -> None:
    """Every version and peer at one (N, d, causal); the float ones only if ``with_float``."""
    import torch

    dims = tuple(shape[key] for key in ("batch", "heads", "seq", "head_dim"))
    g = torch.Generator(device="cuda").manual_seed(shape["seq"] + shape["head_dim"])
    q, k, v, grad = (torch.randn(dims, device="cuda", generator=g) for _ in range(4))
    _measure_bf16(sweep, shape, q, k, v, grad)
    gc.collect()
    torch.cuda.empty_cache()
    if with_float:
        _measure_float(sweep, shape, q, k, v, grad)


def measure_softmax(sweep: _Sweep, seqs, batch: int, heads: int) -> None:
    """Version 2 against torch.softmax on every row of the scores, (batch x heads x N) rows of N."""
    import torch

    record = fp32.KERNELS["attention_online_softmax"]
    for n in seqs:
        rows = batch * heads * n
        sizes = {"batch": batch, "heads": heads, "seq": n, "head_dim": None, "causal": False}
        fits, why = _fits(8.0 * rows * n)
        if not fits:
            sweep.skip("v2 online softmax", SOFTMAX, "kernel", sizes, why)
            continue
        S = torch.randn(rows, n, device="cuda") * 4
        P, lse = torch.empty_like(S), torch.empty(rows, device="cuda")
        torch.cuda.synchronize()

        def online(sync=True):
            return fp32.online_softmax(_view(S), out=_view(P), lse=_view(lse), sync=sync)

        def online_error():
            online()
            return max_error(P, torch.softmax(S, dim=-1))

        nbytes, flops = record.bytes({"rows": rows, "cols": n}), record.flops({"rows": rows, "cols": n})
        peer = _entry(sweep, "torch softmax float32", SOFTMAX, "peer", sizes, FLOAT32, nbytes, flops,
                      lambda: torch.softmax(S, dim=-1))
        _entry(sweep, "v2 online softmax", SOFTMAX, "kernel", sizes, FLOAT32, nbytes, flops,
               lambda: online(sync=False), check=online_error, tol=1e-5, version=2, peer=peer)
        del S, P, lse
        torch.cuda.empty_cache()


def measure_numerics(seqs, head_dims) -> list[dict]:
    """Each forward's error against float64 on the same (BF16-rounded, for BF16) inputs: one head, non-causal."""
    import torch
    from torch.nn.attention import SDPBackend

    table = []
    for d in head_dims:
        for n in seqs:
            g = torch.Generator(device="cuda").manual_seed(7 * n + d)
            q, k, v = (torch.randn((1, 1, n, d), device="cuda", generator=g) for _ in range(3))
            qb, kb, vb = (t.bfloat16() for t in (q, k, v))
            exact = naive_attention(q.double(), k.double(), v.double(), False)
            exact_bf16 = naive_attention(qb.double(), kb.double(), vb.double(), False)
            out, lse = torch.empty_like(q), torch.empty((1, 1, n), device="cuda")
            outb = torch.empty_like(qb)
            torch.cuda.synchronize()
            fp32.attention_forward(_view(q), _view(k), _view(v), out=_view(out), lse=_view(lse))
            errors = {V3: max_error(out, exact)}
            fp32.attention_unfused(_view(q), _view(k), _view(v), out=_view(out))
            errors[V1] = max_error(out, exact)
            bf16.attention_forward(_view(qb), _view(kb), _view(vb), out=_view(outb), lse=_view(lse))
            errors[V4] = max_error(outb, exact_bf16)
            errors[SDPA] = max_error(sdpa(qb, kb, vb, False, SDPBackend.FLASH_ATTENTION), exact_bf16)
            errors[SDPA_F32] = max_error(sdpa(q, k, v, False, SDPBackend.EFFICIENT_ATTENTION), exact)
            errors[NAIVE] = max_error(naive_attention(q, k, v, False), exact)
            errors["torch naive bf16"] = max_error(naive_attention(qb, kb, vb, False), exact_bf16)
            table.append({"seq": n, "head_dim": d, "errors": errors})
            del exact, exact_bf16
            torch.cuda.empty_cache()
    return table


def measure_training_step(seq: int = 2048, batch: int = 4, dim: int = 1024, heads: int = 16) -> tuple[list[dict], dict]:
    """A transformer block's training step in BF16, attention by the op and by SDPA, from the same weights."""
    import torch

    g = torch.Generator().manual_seed(3)
    x = torch.randn(batch, seq, dim, generator=g).to(device="cuda", dtype=torch.bfloat16)
    target = torch.randn(batch, seq, dim, generator=g).cuda()
    losses, rows = {}, []
    for name, attention in tb.ATTENTIONS.items():
        weights = tb.make_weights(dim, 4 * dim, device="cuda", dtype=torch.bfloat16, seed=4)
        losses[name] = tb.training_step(weights, x, target, heads, attention, learning_rate=0.0).item()
        timing = _timed(lambda: tb.training_step(weights, x, target, heads, attention, learning_rate=0.0), True)
        rows.append(timed_row(f"training step, attention by {name}", TRAINING_STEP,
                              "kernel" if name.startswith("dlk::") else "peer", timing.median_ms, None, None, None,
                              min_ms=timing.min_ms, samples=len(timing.samples_ms), batch=batch, seq=seq, dim=dim,
                              heads=heads, dtype=BF16, causal=True, loss=losses[name]))
    ours, peer = rows
    agree = abs(losses["dlk::attention"] - losses["torch sdpa (flash)"]) <= 1e-2 * abs(losses["torch sdpa (flash)"])
    return rows, {"training_step_speedup_vs_sdpa": peer["median_ms"] / ours["median_ms"], "training_step_losses_agree": agree}


def goals(rows: list[dict], head_dims) -> list[dict]:
    """The goals at GOAL_SEQ, per head dimension and mask: each ratio and whether it is met."""
    def ms(name, group, d, causal):
        return next((r["median_ms"] for r in rows if r["name"] == name and r["group"] == group and r["seq"] == GOAL_SEQ
                     and r["head_dim"] == d and r["causal"] == causal and "median_ms" in r), None)

    def bound(name, d, causal):
        return next((r["times_bound"] for r in rows if r["name"] == name and r["group"] == FORWARD
                     and r["seq"] == GOAL_SEQ and r["head_dim"] == d and r["causal"] == causal and "median_ms" in r), None)

    found = []
    for d in head_dims:
        for causal in (False, True):
            pairs = {FORWARD_VS_SDPA: (ms(SDPA, FORWARD, d, causal), ms(V4, FORWARD, d, causal)),
                     BACKWARD_VS_SDPA: (ms(SDPA, BACKWARD, d, causal), ms(V5B, BACKWARD, d, causal)),
                     FUSED_VS_UNFUSED_FLOAT: (ms(V1, FORWARD, d, causal), ms(V3, FORWARD, d, causal))}
            for goal, (theirs, ours) in pairs.items():
                if theirs is not None and ours is not None:
                    found.append({"goal": goal, "head_dim": d, "causal": causal, "ratio": theirs / ours,
                                  "target": GOALS[goal], "met": theirs / ours >= GOALS[goal]})
            times = bound(V3, d, causal)
            if times is not None:
                found.append({"goal": FLOAT_TIMES_BOUND, "head_dim": d, "causal": causal, "ratio": times,
                              "target": GOALS[FLOAT_TIMES_BOUND], "met": times <= GOALS[FLOAT_TIMES_BOUND]})
    return found


def measure_configurations(sweep: _Sweep, head_dims, batch: int, heads: int, seq: int = GOAL_SEQ) -> None:
    """Every configuration of CONFIGURATIONS at ``seq``, causal and not, beside SDPA (rows with ``config``)."""
    import torch

    for d in head_dims:
        for causal in (False, True):
            shape = {"batch": batch, "heads": heads, "seq": seq, "head_dim": d, "causal": int(causal)}
            g = torch.Generator(device="cuda").manual_seed(seq + d + 1)
            q, k, v, grad = (torch.randn((batch, heads, seq, d), device="cuda", generator=g) for _ in range(4))
            _measure_bf16(sweep, shape, q, k, v, grad, configs=CONFIGURATIONS.get(d, ()))
            del q, k, v, grad
            gc.collect()
            torch.cuda.empty_cache()


def build_modules(head_dims, configurations: bool) -> None:
    """Compile every module the run loads (the float file and the BF16 file per head dimension, and each tile
    configuration's BF16 build) at once, nvcc's runs side by side, into a folder of kernel images that the GPU
    backend takes them from (``$DLK_KERNEL_IMAGES``, the grader's mechanism) instead of compiling each when first
    launched, one after another.  A build that fails here is compiled (and its error reported) at its launch."""
    builds = [(fp32.TOPIC, fp32.defines(d)) for d in sorted({*head_dims, fp32.RECORDED_HEAD_DIM})]
    for d in head_dims:
        configs = [None, *(CONFIGURATIONS.get(d, ()) if configurations else ())]
        builds += [(bf16.TOPIC, bf16.defines(d, config)) for config in configs]
    folder = os.environ.get(IMAGES_VARIABLE) or tempfile.mkdtemp(prefix="dlk-attention-images-")
    os.environ[IMAGES_VARIABLE] = folder
    arch = current_backend().arch

    def build(topic, defines):
        path = source_path(topic)
        source, frozen = path.read_text(), {k: str(v) for k, v in sorted(defines.items())}
        options = tuple(f"-D{k}={v}" for k, v in frozen.items())   # as load_topic -> compile_source orders them
        try:
            store_image(folder, source, path.name, options, (str(KERNEL_DIR),), parse_kernels(source, path.name, frozen),
                        arch)
        except Exception:  # noqa: BLE001 - compiled again, with its message, where it is launched
            pass

    with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
        list(pool.map(lambda b: build(*b), builds))


def bf16_matmul_gflops(n: int = 8192) -> float:
    """A large BF16 torch.matmul's rate (GFLOP/s): what the tensor cores do for cuBLAS on this card."""
    import torch

    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    timing = time_torch(lambda: a @ b, warmup=2, repeat=10)
    return 2.0 * n ** 3 / timing.median_s / 1e9


def measure(seqs=SEQS, head_dims=HEAD_DIMS, batch: int = BATCH, heads: int = HEADS, float_up_to: int = FLOAT_UP_TO,
            numerics_seqs=NUMERICS_SEQS, training_step: bool = True, configurations: bool = True,
            configurations_only: bool = False, profile: bool = True) -> dict:
    require_gpu_backend()
    import torch

    build_modules(head_dims, configurations or configurations_only)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    peaks = measure_peaks()
    sweep = _Sweep(peaks, bf16_matmul_gflops())
    tiles = _Sweep(peaks, sweep.bf16_gflops)
    if configurations or configurations_only:
        measure_configurations(tiles, head_dims, batch, heads)
    if configurations_only:
        return {"peaks": peaks_as_dict(peaks), TILINGS: tiles.rows,
                "summary": {"bf16_matmul_gflops": sweep.bf16_gflops}, "results": []}
    for d in head_dims:
        for causal in (False, True):
            for n in seqs:
                shape = {"batch": batch, "heads": heads, "seq": n, "head_dim": d, "causal": int(causal)}
                try:
                    _measure_size(sweep, shape, with_float=n <= float_up_to)
                except Exception as exc:  # noqa: BLE001 - the inputs of this size could not be made (memory)
                    sweep.rows.append(untimed_row("every version", FORWARD, "kernel", **sweep.sizes(shape),
                                                  error=f"{type(exc).__name__}: {exc}"[:400]))
                gc.collect()
                torch.cuda.empty_cache()
    measure_softmax(sweep, [n for n in seqs if n <= float_up_to], batch, heads)
    summary = {"goals": goals(sweep.rows, head_dims), "bf16_matmul_gflops": sweep.bf16_gflops}
    result = {"peaks": peaks_as_dict(peaks), "sizes": {"batch": batch, "heads": heads, "seqs": list(seqs),
                                                        "head_dims": list(head_dims), "float_up_to": float_up_to}}
    try:
        result[NUMERICS] = measure_numerics(numerics_seqs, head_dims)
    except Exception as exc:  # noqa: BLE001 - the timings above are kept
        summary["numerics_error"] = f"{type(exc).__name__}: {exc}"[:400]
    if training_step:
        try:
            step_rows, step_summary = measure_training_step()
            sweep.rows += step_rows
            summary.update(step_summary)
        except Exception as exc:  # noqa: BLE001
            summary["training_step_error"] = f"{type(exc).__name__}: {exc}"[:400]
    result.update({"summary": summary, "results": sweep.rows, TILINGS: tiles.rows})
    if profile and shutil.which("ncu"):
        groups = tuple(PROFILED_GROUPS[d] for d in head_dims if d in PROFILED_GROUPS)
        result[PROFILES] = profiler.measure(groups=groups, verbose=True)["results"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", type=int, nargs="+", default=list(SEQS))
    parser.add_argument("--head-dims", type=int, nargs="+", default=list(HEAD_DIMS))
    parser.add_argument("--float-up-to", type=int, default=FLOAT_UP_TO,
                        help="time the float versions and the naive float peer up to this sequence length")
    parser.add_argument("--no-training-step", action="store_true")
    parser.add_argument("--no-configurations", action="store_true", help="time only the default tile configurations")
    parser.add_argument("--no-profiles", action="store_true", help="skip Nsight Compute's counters (ncu)")
    parser.add_argument("--configurations-only", action="store_true",
                        help="time only the tile configurations at N = 4096 (written to attention_configurations.json)")
    args = parser.parse_args()
    data = measure(tuple(args.seqs), tuple(args.head_dims), float_up_to=args.float_up_to,
                   training_step=not args.no_training_step, configurations=not args.no_configurations,
                   configurations_only=args.configurations_only, profile=not args.no_profiles)
    path = write_results(CONFIGURATIONS_NAME if args.configurations_only else NAME, data)
    print(f"results written to {path}")
    print_configurations(data.get(TILINGS, []))
    for r in data.get(PROFILES, []):
        print(f"ncu {r['step']:<32} " + " ".join(f"{key} {r[key]:.1f}" for key in PROFILED if key in r)
              + (f" error {r['error']}" if "error" in r else ""))
    print(f"{'name':<30} {'group':<9} {'d':>4} {'causal':>6} {'N':>6} {'ms':>9} {'TFLOP/s':>8} {'x bound':>8} {'vs peer':>8}")
    for r in data["results"]:
        if r["group"] in (FORWARD, BACKWARD) and "median_ms" in r:
            print(f"{r['name']:<30} {r['group']:<9} {r['head_dim']:>4} {str(r['causal']):>6} {r['seq']:>6} "
                  f"{r['median_ms']:>9.3f} {r['gflops'] / 1e3:>8.1f} {r['times_bound']:>8.2f} "
                  f"{r.get('speedup_vs_peer', float('nan')):>8.2f}")
        elif "skipped" in r or "error" in r:
            print(f"{r['name']:<30} {r['group']:<9} N={r.get('seq')}: {r.get('skipped') or r.get('error')}")
    for goal in data["summary"].get("goals", []):
        print(f"goal {goal['goal']} d={goal['head_dim']} causal={goal['causal']}: {goal['ratio']:.2f} "
              f"(target {goal['target']}) {'met' if goal['met'] else 'NOT met'}")
    for key in ("numerics_error", "training_step_error"):
        if key in data["summary"]:
            print(f"{key}: {data['summary'][key]}")
    for entry in data.get(NUMERICS, []):
        print(f"numerics N={entry['seq']} d={entry['head_dim']}: "
              + ", ".join(f"{k} {v:.2e}" for k, v in entry["errors"].items()))


#: The profiler's figures the summary prints (benchmarks/profiles.py's METRICS).
PROFILED = ("duration_us", "tensor_pipe_percent", "issue_slots_percent", "xu_pipe_percent", "registers_per_thread",
            "achieved_occupancy_percent", "barrier_stall_percent", "short_scoreboard_stall_percent",
            "mio_throttle_stall_percent", "long_scoreboard_stall_percent", "math_throttle_stall_percent",
            "wait_stall_percent", "not_selected_stall_percent", "l2_percent", "dram_percent")


def print_configurations(rows: list[dict]) -> None:
    for r in rows:
        what = f"{r['name']:<18} {r['group']:<9} d={r['head_dim']:<4} causal={str(r['causal']):<5}"
        config = " ".join(f"{k[3:]}={v}" for k, v in r.get("config", {}).items())
        if "median_ms" in r:
            print(f"{what} {r['median_ms']:8.3f} ms {r['gflops'] / 1e3:6.1f} TFLOP/s "
                  f"{r.get('speedup_vs_peer', float('nan')):5.2f}x  {config}")
        else:
            print(f"{what} {r.get('error') or r.get('skipped')}  {config}")


if __name__ == "__main__":
    main()
