"""Profiler figures of the SGEMM ladder, of the direct convolution on C3, and of what limits the fastest
SGEMMs at 4096³ beside cuBLAS's, from Nsight Compute (and, for benchmarks/sgemm_bf16.py and benchmarks/attention.py,
the BF16 GEMM ladder and attention's kernels beside the library's, recorded in their own results files).

What a step of a ladder changes shows in a few hardware counters: how many 32-byte sectors a
warp's global load touches (4 when its 32 floats are consecutive), shared-memory bank conflicts,
the share of the DRAM bandwidth and of the multiprocessors' throughput the kernel reaches, and
the warps resident per multiprocessor (achieved occupancy); and for the "limits" group (version 7 on the
FP32 units and versions 10 and 11 on the tensor cores, each beside the cuBLAS kernel it is measured
against) how busy the FMA and tensor pipes are, how many issue slots are used, the L2 throughput and how
often warps wait at a barrier.  Each profiled kernel runs once, in
a process of its own started under ``ncu``, which replays that launch as often as the counters
need (with the caches flushed before each replay) and prints them as CSV; this module reads the
CSV and writes ``benchmarks/results/profiles.json``, which the CNN and convolution-as-GEMM chapters show.

Run on a GPU machine with Nsight Compute's ``ncu`` on the PATH: ``make bench``, or
``DLK_BACKEND=gpu python3 -m benchmarks.profiles`` (``--only sgemm_naive`` for one kernel).
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

from benchmarks import cnn, conv_as_gemm, sgemm_tensor_cores as tensor_cores
from benchmarks.common import Contract, require_gpu_backend, results_path, results_tag, write_results
from kernels.attention import attention, attention_bf16
from kernels.conv import conv2d
from kernels.gemm import sgemm, sgemm_bf16, sgemm_hopper
from kernels.runtime import borrow
from kernels.runtime.versions import versions

#: What is recorded of each kernel: the results file's name -> the ncu metric it is read from.
METRICS = {
    "duration_us": "gpu__time_duration.sum",
    "dram_percent": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_percent": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "global_load_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "global_load_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "global_store_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "global_store_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "shared_load_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "shared_store_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "achieved_occupancy_percent": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers_per_thread": "launch__registers_per_thread",
    "fma_pipe_percent": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "tensor_pipe_percent": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "issue_slots_percent": "sm__inst_issued.avg.pct_of_peak_sustained_active",
    "l2_percent": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "barrier_stall_percent": "smsp__warp_issue_stalled_barrier_per_warp_active.pct",
    "long_scoreboard_stall_percent": "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
    "wait_stall_percent": "smsp__warp_issue_stalled_wait_per_warp_active.pct",
    "sleeping_stall_percent": "smsp__warp_issue_stalled_sleeping_per_warp_active.pct",
    "math_throttle_stall_percent": "smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct",
    "short_scoreboard_stall_percent": "smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct",
    "mio_throttle_stall_percent": "smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct",
    "not_selected_stall_percent": "smsp__warp_issue_stalled_not_selected_per_warp_active.pct",
    "xu_pipe_percent": "sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active",
}

#: ncu's time units, in microseconds (``--print-units base`` reports nanoseconds; the others in case).
TIME_UNITS_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
                 "second": 1e6, "s": 1e6}

PROFILE_TIMEOUT_S = 600  # one kernel's replays; the naive SGEMM's take the longest
SGEMM_SIZE = 2048  # square: large enough that every step fills the GPU, as in the chapter's ladder
LIMITS_SIZE = 4096  # the size of the chapter's goals against cuBLAS
#: Version 7's tile at LIMITS_SIZE: the fastest of the ladder's search there (benchmarks/conv_as_gemm.py's
#: WARPTILE_CONFIGS), read from the same GPU's conv_as_gemm results when there are any; this one (the
#: fastest on the H100 and the H200) when there are none.
LIMITS_WARPTILE = {"WT_BM": 128, "WT_BN": 256, "WT_BK": 8, "WT_MIN_BLOCKS": 1, "WT_GROUP": 4, "WT_NQ": 4}


def limits_warptile() -> dict:
    """The tile the SGEMM ladder's search found fastest on this kind of GPU (its recorded conv_as_gemm run, the
    file of this run's tag), else LIMITS_WARPTILE."""
    import json

    try:
        rows = json.loads(results_path(conv_as_gemm.NAME, results_tag()).read_text())["results"]
        best = next(r for r in rows if r["group"] == conv_as_gemm.SGEMM and r["name"] == conv_as_gemm.WARPTILE
                    and r.get("config"))
        return dict(best["config"])
    except (OSError, ValueError, KeyError, StopIteration):
        return dict(LIMITS_WARPTILE)
C3 = {"N": 64, "C": 6, "H": 14, "W": 14, "M": 16, "K": 5}  # LeNet's second convolution, batch 64

# --- the results file and what the book reads in it ------------------------------------------
NAME = "profiles"
#: The figures: the SGEMM ladder, the direct convolution on C3, what limits the fastest SGEMMs; the BF16 ladder's
#: counters are recorded by benchmarks/sgemm_bf16.py in its own file, as rows of this module's layout.
SGEMM, CONV2D_C3, LIMITS, BF16 = "sgemm", "conv2d_c3", "limits", "bf16"
CUBLAS_BF16_KERNEL = "cublas_bf16"  # the name of cuBLAS's BF16 row (a library's kernel has no name of ours)
#: A row's ``step`` is the chapter's name for its kernel: a version of the ladder (sgemm.py's keys), a version
#: of the direct convolution (conv2d.py's), and in LIMITS the names the tensor-core benchmark gives its rows.
SGEMM_NAIVE, SGEMM_COALESCED, SGEMM_VECTORIZED, SGEMM_WARPTILE = "naive", "coalesced", "vectorized", "warptile"
C3_STEPS = C3_NAIVE, C3_CONSTANT, C3_TILED = cnn.NAIVE, cnn.CONSTANT, cnn.TILED
LIMIT_STEPS = (tensor_cores.V7, tensor_cores.CUBLAS_FP32, tensor_cores.V10, tensor_cores.V11, tensor_cores.CUBLAS_TF32)

CONTRACT = Contract(
    NAME, groups=(SGEMM, CONV2D_C3, LIMITS),
    rows={SGEMM: (SGEMM_NAIVE, SGEMM_COALESCED, SGEMM_VECTORIZED, SGEMM_WARPTILE), CONV2D_C3: C3_STEPS,
          LIMITS: LIMIT_STEPS},
    row_field="step",
)

#: Attention's kernels and SDPA's flash kernels, profiled by benchmarks/attention.py beside its timings and recorded in
#: its own file (its contract lists them): batch 4, 16 heads, N = 4096, no mask, BF16, in each head dimension.  A
#: group per head dimension; each kernel's step, by head dimension.
ATTENTION_SHAPE = (4, 16, 4096)
ATTENTION_HEAD_DIMS = (64, 128)
ATTENTION_GROUPS = {d: f"attention_d{d}" for d in ATTENTION_HEAD_DIMS}
ATTENTION_V3 = {d: f"version 3 (float), d = {d}" for d in ATTENTION_HEAD_DIMS}
ATTENTION_V4 = {d: f"version 4, d = {d}" for d in ATTENTION_HEAD_DIMS}
ATTENTION_SDPA_FORWARD = {d: f"SDPA flash forward, d = {d}" for d in ATTENTION_HEAD_DIMS}
ATTENTION_BACKWARD = {d: f"BF16 backward, d = {d}" for d in ATTENTION_HEAD_DIMS}
ATTENTION_SDPA_BACKWARD = {d: f"SDPA flash backward, d = {d}" for d in ATTENTION_HEAD_DIMS}


@dataclass(frozen=True)
class Target:
    """One kernel to profile: its CUDA name (or, for a library's, how ncu finds it), the figure it
    belongs to, and how to run it once."""

    kernel: str
    group: str  # SGEMM (the ladder), CONV2D_C3, LIMITS, BF16 (the BF16 ladder) or one of ATTENTION_GROUPS
    step: str  # the chapter's name for it
    library: bool = False  # a library's kernel: ncu takes the second launch matching `pattern` (the first warms up)
    pattern: str = "gemm|nvjet"  # a library kernel's name: cuBLAS's are ...gemm... (FP32, TF32) or nvjet_... (BF16)


def targets() -> list[Target]:
    ladder = [Target(version.kernel, SGEMM, name) for name, version in versions(sgemm.KERNELS).items()]
    direct = [Target(conv2d.KERNEL_NAMES[name], CONV2D_C3, name) for name in C3_STEPS]
    limits = [Target("sgemm_warptile", LIMITS, tensor_cores.V7),
              Target("cublas_fp32", LIMITS, tensor_cores.CUBLAS_FP32, library=True),
              Target("sgemm_tf32x3_wgmma", LIMITS, tensor_cores.V10),
              Target("sgemm_tf32x3_tma", LIMITS, tensor_cores.V11),
              Target("cublas_tf32", LIMITS, tensor_cores.CUBLAS_TF32, library=True)]
    bf16 = [Target(kernel, BF16, f"version {number}: {title}") for kernel, number, title in ((r.kernel, r.number, r.title) for r in sgemm_bf16.KERNELS.values())]
    bf16.append(Target(CUBLAS_BF16_KERNEL, BF16, "cuBLAS BF16", library=True))
    attention_targets = [target for d, group in ATTENTION_GROUPS.items() for target in (
        Target("attention_forward_float", group, ATTENTION_V3[d]),
        Target("attention_forward_bf16", group, ATTENTION_V4[d]),
        Target("flash_fwd", group, ATTENTION_SDPA_FORWARD[d], library=True, pattern="flash_fwd"),
        Target("attention_backward_bf16", group, ATTENTION_BACKWARD[d]),
        Target("flash_bwd", group, ATTENTION_SDPA_BACKWARD[d], library=True, pattern="flash_bwd_dq_dk_dv"))]
    return ladder + direct + limits + bf16 + attention_targets


#: The groups a run of this module profiles by default; BF16 is profiled by benchmarks/sgemm_bf16.py, and
#: ATTENTION_GROUPS by benchmarks/attention.py, beside their timings.
DEFAULT_GROUPS = (SGEMM, CONV2D_C3, LIMITS)


def run_once(target: Target) -> None:
    """Launch ``target`` once on its benchmark inputs (the process ncu profiles); the launchers wait for
    the kernel and copy its result back.  A cuBLAS target runs twice: ncu skips the first launch."""
    rng = np.random.default_rng(0)
    if target.group == BF16:
        run_bf16_once(target, rng)
        return
    head_dims = {group: d for d, group in ATTENTION_GROUPS.items()}
    if target.group in head_dims:
        run_attention_once(target, head_dims[target.group])
        return
    if target.group == LIMITS:
        A = rng.standard_normal((LIMITS_SIZE, LIMITS_SIZE), dtype=np.float32)
        B = rng.standard_normal((LIMITS_SIZE, LIMITS_SIZE), dtype=np.float32)
        if target.library:
            import torch

            torch.backends.cuda.matmul.allow_tf32 = target.kernel == "cublas_tf32"
            tA, tB = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
            for _ in range(2):
                torch.matmul(tA, tB)
            torch.cuda.synchronize()
        elif target.kernel == "sgemm_warptile":
            sgemm.sgemm_warptile(A, B, config=limits_warptile())
        else:
            getattr(sgemm_hopper, target.kernel)(A, B)
        return
    if target.group == SGEMM:
        A = rng.standard_normal((SGEMM_SIZE, SGEMM_SIZE), dtype=np.float32)
        B = rng.standard_normal((SGEMM_SIZE, SGEMM_SIZE), dtype=np.float32)
        sgemm.KERNELS[target.kernel].launcher(A, B)
    else:
        N, C, H, W, M, K = (C3[k] for k in "N C H W M K".split())
        X = rng.standard_normal((N, C, H, W), dtype=np.float32)
        Wf = rng.standard_normal((M, C, K, K), dtype=np.float32)
        conv2d.FORWARDS[target.step](X, Wf, rng.standard_normal(M, dtype=np.float32))


def run_bf16_once(target: Target, rng) -> None:
    """The BF16 ladder's kernels at LIMITS_SIZE^3 (C = A B^T; version 16 with a bias and GELU), or cuBLAS on the
    same operands (torch.matmul(A, B.t()), twice: ncu skips the first)."""
    A = sgemm_bf16.bf16(rng.standard_normal((LIMITS_SIZE, LIMITS_SIZE), dtype=np.float32))
    B = sgemm_bf16.bf16(rng.standard_normal((LIMITS_SIZE, LIMITS_SIZE), dtype=np.float32))
    if target.library:
        import torch

        tA, tB = (torch.from_numpy(x.view(np.int16)).cuda().view(torch.bfloat16) for x in (A, B))
        for _ in range(2):
            torch.matmul(tA, tB.t())
        torch.cuda.synchronize()
    elif target.kernel == "sgemm_bf16_fused":
        sgemm_bf16.sgemm_bf16_fused(A, B, sgemm_bf16.bf16(rng.standard_normal(LIMITS_SIZE)))
    else:
        sgemm_bf16.KERNELS[target.kernel].launcher(A, B)


def run_attention_once(target: Target, head_dim: int) -> None:
    """The attention forward and backward at ATTENTION_SHAPE, by the book's BF16 kernels (ncu picks the named one),
    its float forward, or SDPA's flash backend (twice: ncu skips the first launch)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    g = torch.Generator(device="cuda").manual_seed(0)
    if target.kernel == "attention_forward_float":
        q, k, v = (torch.randn((*ATTENTION_SHAPE, head_dim), device="cuda", generator=g) for _ in range(3))
        torch.cuda.synchronize()
        attention.attention_forward(*(borrow(t.data_ptr(), tuple(t.shape), np.float32) for t in (q, k, v)))
        return
    q, k, v, grad = (torch.randn((*ATTENTION_SHAPE, head_dim), device="cuda", generator=g, dtype=torch.bfloat16)
                     for _ in range(4))
    if target.library:
        for _ in range(2):
            qr, kr, vr = (t.clone().requires_grad_(True) for t in (q, k, v))
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                torch.nn.functional.scaled_dot_product_attention(qr, kr, vr).backward(grad)
        torch.cuda.synchronize()
        return
    torch.cuda.synchronize()

    def view(t):
        return borrow(t.data_ptr(), tuple(t.shape), attention_bf16.BF16)

    out, lse = attention_bf16.attention_forward(view(q), view(k), view(v))
    attention_bf16.attention_backward(view(q), view(k), view(v), out, lse, view(grad))


def ncu_command(target: Target, metrics=None, runner: str = "benchmarks.profiles") -> list[str]:
    """ncu, profiling the first launch of ``target.kernel`` in a process that runs it once (for a library's
    target, the second launch of a kernel whose name matches its pattern): ``python -m <runner> --run-once
    group/kernel``, with ``metrics`` (default: METRICS)."""
    chosen = ["--kernel-name", f"regex:{target.pattern}", "--launch-skip", "1"] if target.library else \
        ["--kernel-name", f"regex:^{target.kernel}$"]
    return ["ncu", "--csv", "--page", "raw", "--print-units", "base", *chosen,
            "--launch-count", "1", "--metrics", ",".join(METRICS.values() if metrics is None else metrics),
            sys.executable, "-m", runner, "--run-once", f"{target.group}/{target.kernel}"]


class ProfileError(RuntimeError):
    """ncu ran but gave no figures for the kernel (its own message is kept)."""


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if text in ("", "n/a", "N/A"):
        return None
    return float(text)


def parse_ncu_csv(output: str, kernel: str | None, metrics=None) -> dict[str, float]:
    """The metrics of ``kernel`` (None: of the one kernel profiled, whatever its name) from ncu's CSV,
    keyed by ncu's metric names (those of ``metrics``, default METRICS), times in microseconds.

    Reads the raw page (one row per kernel, one column per metric, a row of units under the header)
    and the details page (one row per metric: ``Metric Name``, ``Metric Unit``, ``Metric Value``);
    ncu's own lines (``==PROF==``, ``==WARNING==``, ``==ERROR==``) are skipped, and an error of ncu's
    is raised with its text when the kernel has no row."""
    errors = [line for line in output.splitlines() if line.startswith("==ERROR==")]
    rows = _csv_rows(output)
    if not rows:
        raise ProfileError(f"ncu printed no figures for {kernel or 'the kernel'}" + (": " + " ".join(errors) if errors else ""))
    header = rows[0]
    wanted = set(METRICS.values() if metrics is None else metrics)
    values: dict[str, float] = {}
    units: dict[str, str] = {}
    if "Metric Name" in header:
        name_at, unit_at, value_at = (header.index(k) for k in ("Metric Name", "Metric Unit", "Metric Value"))
        kernel_at = header.index("Kernel Name")
        for r in rows[1:]:
            if len(r) > value_at and kernel in (None, _short_name(r[kernel_at])):
                number = _number(r[value_at])
                if number is not None:
                    values[r[name_at]], units[r[name_at]] = number, r[unit_at]
    else:
        kernel_at = header.index("Kernel Name")
        unit_row = rows[1] if len(rows) > 1 and not rows[1][kernel_at] else None
        for r in rows[2 if unit_row else 1:]:
            if kernel not in (None, _short_name(r[kernel_at])):
                continue
            for i, name in enumerate(header):
                number = _number(r[i]) if i < len(r) and name in wanted else None
                if number is not None:
                    values[name], units[name] = number, (unit_row[i] if unit_row else "")
            break
    if not values:
        raise ProfileError(f"ncu gave no figures for {kernel or 'the kernel'}" + (": " + " ".join(errors) if errors else ""))
    time_metric = METRICS["duration_us"]
    if time_metric in values:
        unit = units.get(time_metric) or "nsecond"
        if unit not in TIME_UNITS_US:
            raise ProfileError(f"{kernel}: unknown time unit {unit!r} for {time_metric}")
        values[time_metric] *= TIME_UNITS_US[unit]
    return values


def _csv_rows(output: str) -> list[list[str]]:
    """ncu's CSV rows (its quoted lines), without its own ``==PROF==`` and ``==ERROR==`` lines."""
    return list(csv.reader(io.StringIO("\n".join(line for line in output.splitlines() if line.startswith('"')))))


def library_kernel(output: str) -> str | None:
    """The name of the one kernel ncu profiled, from its CSV (a cuBLAS kernel's name says its tile)."""
    rows = _csv_rows(output)
    if not rows or "Kernel Name" not in rows[0]:
        return None
    at = rows[0].index("Kernel Name")
    names = [_short_name(r[at]) for r in rows[1:] if len(r) > at and r[at]]
    return names[0] if names else None


def _short_name(spelled: str) -> str:
    """ncu writes a kernel as its demangled declaration (``sgemm_naive(int, int, ...)``): the name alone."""
    return spelled.split("(")[0].split("<")[0].strip().split(" ")[-1]


def profile_row(target: Target, metrics: dict[str, float]) -> dict:
    """The results file's row of ``target``: the metrics under their names here, and the ratios the
    chapter reads (sectors per request; bank conflicts of loads and stores together)."""
    row = {"name": target.kernel, "group": target.group, "step": target.step}
    for name, metric in METRICS.items():
        if metric in metrics:
            row[name] = metrics[metric]
    for op in ("load", "store"):
        sectors, requests = row.get(f"global_{op}_sectors"), row.get(f"global_{op}_requests")
        if sectors is not None and requests:
            row[f"sectors_per_{op}_request"] = sectors / requests
    conflicts = [row.get(f"shared_{op}_bank_conflicts") for op in ("load", "store")]
    if all(c is not None for c in conflicts):
        row["shared_bank_conflicts"] = sum(conflicts)
    return row


def measure(only: str | None = None, verbose: bool = False, groups=DEFAULT_GROUPS) -> dict:
    require_gpu_backend()
    if shutil.which("ncu") is None:
        sys.exit("profiles need Nsight Compute's ncu on the PATH")
    log = print if verbose else (lambda *args, **kwargs: None)
    chosen = [t for t in targets() if only in (None, t.kernel) and (only is not None or t.group in groups)]
    if not chosen:
        sys.exit(f"no profiled kernel is called {only!r} (known: {', '.join(t.kernel for t in targets())})")
    rows = []
    for target in chosen:
        failed = {"name": target.kernel, "group": target.group, "step": target.step}
        try:
            done = subprocess.run(ncu_command(target), capture_output=True, text=True, timeout=PROFILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            rows.append({**failed, "error": f"ncu did not finish within {PROFILE_TIMEOUT_S} s"})
            log(rows[-1])
            continue
        try:
            rows.append(profile_row(target, parse_ncu_csv(done.stdout, None if target.library else target.kernel)))
            if target.library:
                rows[-1]["library_kernel"] = library_kernel(done.stdout)
        except ProfileError as exc:
            rows.append({**failed, "error": f"{exc} (exit {done.returncode}; {done.stderr.strip()[-300:]})"})
        log(rows[-1])
    return {"sgemm_size": SGEMM_SIZE, "limits_size": LIMITS_SIZE, "limits_warptile": limits_warptile(),
            "conv2d_c3": C3, "metrics": METRICS, "results": rows}


def ncu_benchmark_main(name: str, description: str, measure_kernels, run_once_named) -> None:
    """The command line of a benchmark that profiles kernels under ncu: ``--only KERNEL`` (one kernel, not
    written), ``--run-once GROUP/KERNEL`` (the process ncu profiles: ``run_once_named(key)``), else every
    kernel (``measure_kernels(only, verbose)``) into ``benchmarks/results/<name>.json``."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="profile one kernel (its CUDA name); not written to the results file")
    parser.add_argument("--run-once", metavar="GROUP/KERNEL", help=argparse.SUPPRESS)  # the process ncu profiles
    args = parser.parse_args()
    if args.run_once:
        run_once_named(args.run_once)
        return
    results = measure_kernels(args.only, verbose=True)
    if args.only:
        print("(one kernel: not written to the results file)")
        return
    print(f"wrote {write_results(name, results)}")


def main() -> None:
    # a kernel may be in two groups: the key names both
    ncu_benchmark_main(NAME, __doc__, measure,
                       lambda key: run_once(next(t for t in targets() if f"{t.group}/{t.kernel}" == key)))


if __name__ == "__main__":
    main()
