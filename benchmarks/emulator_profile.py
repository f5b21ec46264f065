"""The emulator's profiler beside Nsight Compute, on the book's own ladders: every SGEMM version (1-9) and
every reduction version (1-4), at a size the emulator runs in seconds.

For each version, one launch on the GPU under ``ncu`` (in a process of its own, as
``benchmarks/profiles.py`` does it) and the same launch, on the same inputs, profiled on the CPU
emulator (:func:`kernels.tools.profiler.profile`), recorded side by side in
``benchmarks/results/emulator_profile.json``:

* global memory: requests and 32-byte sectors of loads and of stores
  (``l1tex__t_requests_pipe_lsu_mem_global_op_ld`` / ``_st``, ``l1tex__t_sectors_...``);
* shared memory: instructions (``smsp__inst_executed_op_shared_ld`` / ``_st``), the passes they took
  through the banks (``smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ld`` / ``_st``) and the
  bank conflicts: ncu's count per instruction (``smsp__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ld``
  / ``_st``) where this ncu has it, and its L1 counter (``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld``
  / ``_st``), which also counts a few conflicts between the instructions of different warps;
* divergent branches and occupancy, for information.

The emulator profiles the first :data:`BLOCKS` blocks of a launch; its totals are scaled to the grid,
which is exact here (every block of these launches does the same work: full tiles, a grid-stride
loop over a multiple of the grid).  :func:`agreement` says whether the two agree: sectors per request
of loads and of stores, and the bank conflicts of loads and stores together, within 10 %
(conflicts below 1 % of the shared-memory instructions on both sides count as none).

Run on a GPU machine with ``ncu`` on the PATH (and g++, for the emulator)::

    DLK_BACKEND=gpu python3 -m benchmarks.emulator_profile            # writes the results file
    DLK_BACKEND=gpu python3 -m benchmarks.emulator_profile --only sgemm_naive
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

from benchmarks.common import require_gpu_backend
from benchmarks.profiles import (PROFILE_TIMEOUT_S, ProfileError, Target, ncu_benchmark_main, ncu_command,
                                parse_ncu_csv)
from kernels.basics import reduction
from kernels.gemm import sgemm
from kernels.tools.profiler import profile

SGEMM_SIZE = 128  # M = N = K: whole tiles for every version, a few seconds per version on the emulator
SPLITK_SHAPE = (128, 16, 256)  # version 8's record: a skinny product (its 128 x 16 tile), K split in two
SPLITK_PLAN = {"config": "128x16", "splits": 2}
REDUCTION_N = 1 << 18
REDUCTION_GRID = 32  # blocks of every reduction version (a grid-stride loop covers the rest)
BLOCKS = 4  # blocks the emulator profiles per launch
TOLERANCE = 0.10
NO_CONFLICTS = 0.01  # conflicts per shared-memory instruction below which a count is none

#: What is read from ncu: the results file's name -> the metric.
METRICS = {
    "global_load_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "global_load_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "global_store_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "global_store_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "shared_load_requests": "smsp__inst_executed_op_shared_ld.sum",
    "shared_store_requests": "smsp__inst_executed_op_shared_st.sum",
    "shared_load_wavefronts": "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "shared_store_wavefronts": "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "shared_load_bank_conflicts_l1": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "shared_store_bank_conflicts_l1": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
}
#: Read where this ncu knows them (a run asks for them first, and again without them if ncu refuses).
OPTIONAL_METRICS = {
    "shared_load_bank_conflicts": "smsp__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "shared_store_bank_conflicts": "smsp__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "branch_targets": "smsp__sass_branch_targets.sum",
    "divergent_branch_targets": "smsp__sass_branch_targets_threads_divergent.sum",
    "registers_per_thread": "launch__registers_per_thread",
    "achieved_occupancy_percent": "sm__warps_active.avg.pct_of_peak_sustained_active",
}


@dataclass(frozen=True)
class Version:
    """One rung of a ladder: its kernel, group ("sgemm" or "reduction"), number and title."""

    kernel: str
    group: str
    number: int
    title: str

    @property
    def target(self) -> Target:
        return Target(self.kernel, self.group, f"version {self.number}")


def ladder() -> list[Version]:
    found = []
    for module, group in ((sgemm, "sgemm"), (reduction, "reduction")):
        found += [Version(r.kernel, group, r.number, r.title) for r in module.KERNELS.values() if r.number]
    return sorted(found, key=lambda v: (v.group != "sgemm", v.number))


def run_once(version: Version) -> None:
    """Launch ``version`` once on its inputs (on the current backend): the launch both sides count."""
    rng = np.random.default_rng(0)
    if version.group == "reduction":
        x = rng.standard_normal(REDUCTION_N, dtype=np.float32)
        reduction.KERNELS[version.kernel].launcher(x, grid=REDUCTION_GRID)
        return
    M, N, K = SPLITK_SHAPE if version.kernel == "sgemm_splitk" else (SGEMM_SIZE,) * 3
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    if version.kernel == "sgemm_splitk":
        sgemm.sgemm_splitk(A, B, plan=SPLITK_PLAN)  # the plan the record describes, on either machine
    else:
        sgemm.KERNELS[version.kernel].launcher(A, B)


def emulator_counts(version: Version) -> dict:
    """The emulator's counts of ``version``'s launch: its first BLOCKS blocks, totals scaled to the grid."""
    profiles = [p for p in profile(run_once, version, blocks=BLOCKS) if p.kernel == version.kernel]
    if not profiles:
        return {"error": f"no launch of {version.kernel} was profiled"}
    p = profiles[0]
    if not p.blocks_profiled or p.truncated:  # no counts, or a last block counted in part: the scale would lie
        return {"error": p.note or "no block was profiled"}
    scale = p.launch.blocks / p.blocks_profiled
    out = {"blocks": p.launch.blocks, "blocks_profiled": p.blocks_profiled, "note": p.note}
    for space, op in (("global", "load"), ("global", "store"), ("shared", "load"), ("shared", "store")):
        out[f"{space}_{op}_requests"] = p.total(space, op, "requests") * scale
        if space == "global":
            out[f"{space}_{op}_sectors"] = p.total(space, op, "sectors") * scale
        else:
            out[f"{space}_{op}_wavefronts"] = p.total(space, op, "wavefronts") * scale
            out[f"{space}_{op}_bank_conflicts"] = p.bank_conflicts(op) * scale
    out["divergent_branches"] = sum(b.divergent for b in p.branches) * scale
    if p.occupancy is not None:
        out["occupancy_percent"] = p.occupancy.percent
        out["registers_per_thread"] = p.occupancy.registers
    return out


def ncu_counts(version: Version) -> dict:
    """ncu's counts of ``version``'s launch (the optional metrics where this ncu has them)."""
    last = ""
    for metrics in ({**METRICS, **OPTIONAL_METRICS}, METRICS):
        try:
            done = subprocess.run(ncu_command(version.target, metrics.values(), "benchmarks.emulator_profile"),
                                  capture_output=True, text=True, timeout=PROFILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return {"error": f"ncu did not finish within {PROFILE_TIMEOUT_S} s"}
        try:
            values = parse_ncu_csv(done.stdout, version.kernel, metrics.values())
        except ProfileError as exc:
            last = f"{exc} (exit {done.returncode}; {done.stderr.strip()[-300:]})"
            continue
        return {name: values[metric] for name, metric in metrics.items() if metric in values}
    return {"error": last}


def per_request(counts: dict, what: str, op: str) -> float | None:
    requests = counts.get(f"global_{op}_requests")
    return counts[f"global_{op}_{what}"] / requests if requests else None


def conflicts(counts: dict) -> float | None:
    """Bank conflicts of shared loads and stores together: ncu's per-instruction count where it has it,
    its L1 counter otherwise; the emulator's own."""
    total = 0.0
    for op in ("load", "store"):
        value = counts.get(f"shared_{op}_bank_conflicts", counts.get(f"shared_{op}_bank_conflicts_l1"))
        if value is None:
            return None
        total += value
    return total


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(abs(a), abs(b))


def agreement(emulator: dict, ncu: dict) -> dict:
    """Whether each compared figure agrees: {"sectors_per_load_request": bool, ..., "bank_conflicts": bool};
    a figure neither side has (no global stores, say) is left out, one side alone disagrees."""
    verdict = {}
    for op in ("load", "store"):
        ours, theirs = per_request(emulator, "sectors", op), per_request(ncu, "sectors", op)
        if ours is None and theirs is None:
            continue
        verdict[f"sectors_per_{op}_request"] = ours is not None and theirs is not None and _close(ours, theirs)
    ours, theirs = conflicts(emulator), conflicts(ncu)
    if ours is not None and theirs is not None:
        instructions = max(sum(ncu.get(f"shared_{op}_requests", 0) for op in ("load", "store")), 1)
        none_either = max(ours, theirs) <= NO_CONFLICTS * instructions
        verdict["bank_conflicts"] = none_either or _close(ours, theirs)
    return verdict


def measure(only: str | None = None, verbose: bool = False) -> dict:
    require_gpu_backend()
    if shutil.which("ncu") is None:
        sys.exit("this comparison needs Nsight Compute's ncu on the PATH")
    log = print if verbose else (lambda *args, **kwargs: None)
    chosen = [v for v in ladder() if only in (None, v.kernel)]
    if not chosen:
        sys.exit(f"no version is called {only!r} (known: {', '.join(v.kernel for v in ladder())})")
    rows = []
    for version in chosen:
        row = {"name": version.kernel, "group": version.group, "number": version.number, "title": version.title}
        try:
            row["emulator"] = emulator_counts(version)
        except Exception as exc:  # noqa: BLE001 - recorded, and the run goes on
            row["emulator"] = {"error": f"{type(exc).__name__}: {exc}"}
        row["ncu"] = ncu_counts(version)
        if "error" not in row["emulator"] and "error" not in row["ncu"]:
            row["agrees"] = agreement(row["emulator"], row["ncu"])
        rows.append(row)
        log(row)
    return {"sgemm_size": SGEMM_SIZE, "splitk_shape": list(SPLITK_SHAPE), "splitk_plan": SPLITK_PLAN,
            "reduction_n": REDUCTION_N, "reduction_grid": REDUCTION_GRID, "emulator_blocks": BLOCKS,
            "tolerance": TOLERANCE, "no_conflicts_below": NO_CONFLICTS,
            "metrics": {**METRICS, **OPTIONAL_METRICS}, "results": rows}


def main() -> None:
    ncu_benchmark_main("emulator_profile", __doc__, measure,
                       lambda key: run_once(next(v for v in ladder() if f"{v.group}/{v.kernel}" == key)))


if __name__ == "__main__":
    main()
