"""Profiler figures of the SGEMM ladder and of the direct convolution on C3, from Nsight Compute.

What a step of a ladder changes shows in a few hardware counters: how many 32-byte sectors a
warp's global load touches (4 when its 32 floats are consecutive), shared-memory bank conflicts,
the share of the DRAM bandwidth and of the multiprocessors' throughput the kernel reaches, and
the warps resident per multiprocessor (achieved occupancy).  Each profiled kernel runs once, in
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
}

#: ncu's time units, in microseconds (``--print-units base`` reports nanoseconds; the others in case).
TIME_UNITS_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
                 "second": 1e6, "s": 1e6}

PROFILE_TIMEOUT_S = 600  # one kernel's replays; the naive SGEMM's take the longest
SGEMM_SIZE = 2048  # square: large enough that every step fills the GPU, as in the chapter's ladder
C3 = {"N": 64, "C": 6, "H": 14, "W": 14, "M": 16, "K": 5}  # LeNet's second convolution, batch 64


@dataclass(frozen=True)
class Target:
    """One kernel to profile: its CUDA name, the figure it belongs to, and how to run it once."""

    kernel: str
    group: str  # "sgemm" (the ladder) or "conv2d_c3"
    step: str  # the chapter's name for it


def targets() -> list[Target]:
    from kernels import conv2d, sgemm

    ladder = [Target(f"sgemm_{name}", "sgemm", name) for name, _ in sgemm.VERSIONS]
    direct = [Target(conv2d.KERNEL_NAMES[name], "conv2d_c3", name) for name in ("naive", "constant", "tiled")]
    return ladder + direct


def run_once(target: Target) -> None:
    """Launch ``target`` once on its benchmark inputs (the process ncu profiles); the launchers wait for
    the kernel and copy its result back."""
    from kernels import conv2d, sgemm

    rng = np.random.default_rng(0)
    if target.group == "sgemm":
        A = rng.standard_normal((SGEMM_SIZE, SGEMM_SIZE), dtype=np.float32)
        B = rng.standard_normal((SGEMM_SIZE, SGEMM_SIZE), dtype=np.float32)
        sgemm.KERNELS[target.kernel].launcher(A, B)
    else:
        N, C, H, W, M, K = (C3[k] for k in "N C H W M K".split())
        X = rng.standard_normal((N, C, H, W), dtype=np.float32)
        Wf = rng.standard_normal((M, C, K, K), dtype=np.float32)
        conv2d.FORWARDS[target.step](X, Wf, rng.standard_normal(M, dtype=np.float32))


def ncu_command(target: Target) -> list[str]:
    """ncu, profiling the first launch of ``target.kernel`` in a process that runs it once."""
    return ["ncu", "--csv", "--page", "raw", "--print-units", "base", "--kernel-name", f"regex:^{target.kernel}$",
            "--launch-count", "1", "--metrics", ",".join(METRICS.values()),
            sys.executable, "-m", "benchmarks.profiles", "--run-once", target.kernel]


class ProfileError(RuntimeError):
    """ncu ran but gave no figures for the kernel (its own message is kept)."""


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if text in ("", "n/a", "N/A"):
        return None
    return float(text)


def parse_ncu_csv(output: str, kernel: str) -> dict[str, float]:
    """The metrics of ``kernel`` from ncu's CSV, keyed by ncu's metric names, times in microseconds.

    Reads the raw page (one row per kernel, one column per metric, a row of units under the header)
    and the details page (one row per metric: ``Metric Name``, ``Metric Unit``, ``Metric Value``);
    ncu's own lines (``==PROF==``, ``==WARNING==``, ``==ERROR==``) are skipped, and an error of ncu's
    is raised with its text when the kernel has no row."""
    lines = output.splitlines()
    errors = [line for line in lines if line.startswith("==ERROR==")]
    rows = list(csv.reader(io.StringIO("\n".join(line for line in lines if line.startswith('"')))))
    if not rows:
        raise ProfileError(f"ncu printed no figures for {kernel}" + (": " + " ".join(errors) if errors else ""))
    header = rows[0]
    values: dict[str, float] = {}
    units: dict[str, str] = {}
    if "Metric Name" in header:
        name_at, unit_at, value_at = (header.index(k) for k in ("Metric Name", "Metric Unit", "Metric Value"))
        kernel_at = header.index("Kernel Name")
        for r in rows[1:]:
            if len(r) > value_at and _short_name(r[kernel_at]) == kernel:
                number = _number(r[value_at])
                if number is not None:
                    values[r[name_at]], units[r[name_at]] = number, r[unit_at]
    else:
        kernel_at = header.index("Kernel Name")
        unit_row = rows[1] if len(rows) > 1 and not rows[1][kernel_at] else None
        for r in rows[2 if unit_row else 1:]:
            if _short_name(r[kernel_at]) != kernel:
                continue
            for i, name in enumerate(header):
                number = _number(r[i]) if i < len(r) and name in METRICS.values() else None
                if number is not None:
                    values[name], units[name] = number, (unit_row[i] if unit_row else "")
            break
    if not values:
        raise ProfileError(f"ncu gave no figures for {kernel}" + (": " + " ".join(errors) if errors else ""))
    time_metric = METRICS["duration_us"]
    if time_metric in values:
        unit = units.get(time_metric) or "nsecond"
        if unit not in TIME_UNITS_US:
            raise ProfileError(f"{kernel}: unknown time unit {unit!r} for {time_metric}")
        values[time_metric] *= TIME_UNITS_US[unit]
    return values


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


def measure(only: str | None = None, verbose: bool = False) -> dict:
    from benchmarks.common import require_gpu_backend

    require_gpu_backend()
    if shutil.which("ncu") is None:
        sys.exit("profiles need Nsight Compute's ncu on the PATH")
    log = print if verbose else (lambda *args, **kwargs: None)
    chosen = [t for t in targets() if only in (None, t.kernel)]
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
            rows.append(profile_row(target, parse_ncu_csv(done.stdout, target.kernel)))
        except ProfileError as exc:
            rows.append({**failed, "error": f"{exc} (exit {done.returncode}; {done.stderr.strip()[-300:]})"})
        log(rows[-1])
    return {"sgemm_size": SGEMM_SIZE, "conv2d_c3": C3, "metrics": METRICS, "results": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", help="profile one kernel (its CUDA name)")
    parser.add_argument("--run-once", metavar="KERNEL", help=argparse.SUPPRESS)  # the process ncu profiles
    args = parser.parse_args()
    if args.run_once:
        run_once(next(t for t in targets() if t.kernel == args.run_once))
        return
    from benchmarks.common import write_results

    results = measure(args.only, verbose=True)
    if args.only:
        print("(one kernel: not written to the results file)")
        return
    print(f"wrote {write_results('profiles', results)}")


if __name__ == "__main__":
    main()
