"""A profiler without a GPU, for the book and ``check()``: the emulator's counts of a launch, its occupancy
from nvcc's resource report, and a picture of both.

:func:`profile` runs any code that launches kernels (a launcher of the book, a ``Kernel`` called on
arrays) on the CPU emulator with every launch profiled, and returns one
:class:`~kernels.runtime.emulator.profiling.LaunchProfile` per launch: per source line, the requests
to global memory and the 32-byte sectors they touch, the shared-memory bank conflicts, the branches
that diverge within a warp, and the occupancy that the kernel's registers and shared memory allow on
an H100 (``nvcc -arch=sm_90 -Xptxas -v`` where nvcc is on the PATH)::

    from kernels.tools.profiler import profile, draw_profile
    from kernels.gemm import sgemm
    (p,) = profile(sgemm.sgemm_naive, A, B)     # A, B: small NumPy matrices
    print(p)                                     # the table, with the hints its numbers imply
    draw_profile(p)                              # sectors per request by line

The emulator runs the blocks' threads one after another, so only the first few blocks are profiled
(``blocks=``; 0 profiles the whole grid): the counts per request are those of these blocks.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib

from kernels.runtime import selection
from kernels.runtime.emulator import EmulatorBackend
from kernels.runtime.emulator.profiling import DEFAULT_BLOCKS, LaunchProfile, Occupancy, collecting
from kernels.tools.nvcc_report import compile_report, nvcc_path

__all__ = ["profile", "occupancy", "with_occupancy", "draw_profile", "H100"]

#: An H100's limits per multiprocessor (compute capability 9.0), from CUDA's occupancy calculator.
H100 = {
    "registers": 65536,
    "register_unit": 256,  # registers are allocated per warp in units of 256
    "shared_bytes": 228 * 1024,
    "shared_unit": 128,
    "shared_reserved_per_block": 1024,  # the CUDA runtime keeps 1 KiB of each block's shared memory
    "threads": 2048,
    "warps": 64,
    "blocks": 32,
    "threads_per_block": 1024,
}


def occupancy(registers: int, shared_bytes: int, threads_per_block: int, limits: dict = H100) -> Occupancy:
    """How many blocks of ``threads_per_block`` threads, each thread using ``registers`` registers and the
    block ``shared_bytes`` of shared memory, are resident at once on one multiprocessor, and what limits it."""
    warps = -(-threads_per_block // 32)
    if threads_per_block > limits["threads_per_block"] or threads_per_block < 1:
        return Occupancy(registers, shared_bytes, threads_per_block, 0, "block size", 0, limits["warps"])
    unit = limits["register_unit"]
    per_warp = -(-max(registers, 1) * 32 // unit) * unit
    by = {
        "blocks": limits["blocks"],
        "threads": limits["threads"] // (warps * 32),
        "registers": (limits["registers"] // per_warp) // warps,
    }
    shared = shared_bytes + limits["shared_reserved_per_block"]
    shared = -(-shared // limits["shared_unit"]) * limits["shared_unit"]
    by["shared memory"] = limits["shared_bytes"] // shared
    # on a tie the fixed limits (threads, blocks) are named: fewer registers would not help there
    order = ("threads", "blocks", "shared memory", "registers")
    limited_by = min(by, key=lambda k: (by[k], order.index(k)))
    blocks = by[limited_by]
    return Occupancy(registers, shared_bytes, threads_per_block, blocks, limited_by, blocks * warps, limits["warps"])


@functools.lru_cache(maxsize=64)
def _resources(digest: str, source: str, source_name: str, options: tuple[str, ...], include_dirs: tuple[str, ...]):
    """nvcc's report of every kernel of a source ({kernel: KernelResources}); ``digest`` keys the cache."""
    return {r.kernel: r for r in compile_report(source, source_name, include_dirs=include_dirs, options=options)}


def with_occupancy(profile: LaunchProfile) -> LaunchProfile:
    """``profile`` with its occupancy filled in from nvcc's report of its kernel, or the reason there is none."""
    origin = profile.origin
    if not origin or profile.occupancy is not None:
        return profile
    if nvcc_path() is None:
        profile.occupancy_note = "nvcc not found (the CUDA toolkit reports the registers that decide it)"
        return profile
    source, name, options, include_dirs = origin
    digest = hashlib.sha256(repr((source, name, options, include_dirs)).encode()).hexdigest()
    try:
        found = _resources(digest, source, name, tuple(options), tuple(include_dirs))
    except Exception as exc:  # noqa: BLE001 - the occupancy is extra: its absence is said, never raised
        profile.occupancy_note = f"nvcc could not compile the source for sm_90 ({str(exc).splitlines()[0][:160]})"
        return profile
    resources = found.get(profile.kernel)
    if resources is None:
        profile.occupancy_note = f"nvcc's report names no kernel {profile.kernel}"
        return profile
    profile.occupancy = occupancy(resources.registers, resources.shared_bytes + profile.launch.shared_bytes,
                                  profile.launch.threads_per_block)
    return profile


_emulator: EmulatorBackend | None = None


@contextlib.contextmanager
def on_emulator():
    """This process's launches on the CPU emulator for a while (one emulator, so its builds are reused)."""
    global _emulator
    if selection.current_backend().name == "cpu":
        yield
        return
    if _emulator is None:
        _emulator = EmulatorBackend()
    with selection.using(_emulator):
        yield


def profile(run, *args, blocks: int = DEFAULT_BLOCKS, occupancy: bool = True, **kwargs) -> list[LaunchProfile]:
    """``run(*args, **kwargs)`` on the CPU emulator with its launches profiled (the first ``blocks`` blocks of
    each; 0: the whole grid): one profile per launch, with its occupancy from nvcc unless ``occupancy=False``."""
    with on_emulator(), collecting(blocks) as profiles:
        run(*args, **kwargs)
    return [with_occupancy(p) if occupancy else p for p in profiles]


def _bars(profile: LaunchProfile, space: str):
    rows = [r for r in profile.memory if r.space == space and r.op != "atomic" and r.requests]
    labels = [f"line {r.line or '?'} {r.op}" for r in rows]
    if space == "global":
        return labels, [r.sectors_per_request for r in rows], [r.ideal_sectors_per_request for r in rows]
    return labels, [r.wavefronts_per_request for r in rows], [r.phases / r.requests for r in rows]


def draw_profile(profile: LaunchProfile, fig=None):
    """Sectors per request of each line's global loads and stores, and bank passes (wavefronts) per request
    of its shared ones, each bar beside what a conflict-free, coalesced access would take; None when the
    launch touched no memory."""
    import matplotlib.pyplot as plt

    spaces = [s for s in ("global", "shared") if _bars(profile, s)[0]]
    if not spaces:
        return None
    heights = [len(_bars(profile, s)[0]) for s in spaces]
    if fig is None:
        fig = plt.figure(figsize=(7.5, 0.9 + 0.42 * sum(heights) + 0.5 * len(spaces)))
    axes = fig.subplots(len(spaces), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
    titles = {"global": "global memory: 32-byte sectors per request (black mark: coalesced)",
              "shared": "shared memory: passes through the banks per request (black mark: no conflict)"}
    for ax, space in zip(axes, spaces):
        labels, values, ideal = _bars(profile, space)
        y = range(len(labels))
        worse = [v > 1.5 * max(i, 1e-9) for v, i in zip(values, ideal)]
        ax.barh(list(y), values, color=["tab:red" if w else "tab:blue" for w in worse], alpha=0.85, height=0.6)
        ax.scatter(ideal, list(y), marker="|", s=300, color="black", zorder=3)
        for yi, v in zip(y, values):
            ax.text(v, yi, f" {v:.3g}", va="center", fontsize=9)
        ax.set_yticks(list(y), labels)
        ax.invert_yaxis()
        ax.set_xlim(0, max(max(values), max(ideal), 1) * 1.18)
        ax.set_title(titles[space], fontsize=10, loc="left")
    fig.suptitle(f"{profile.kernel}: {profile.sample_text()} (CPU emulator)", fontsize=10)
    fig.tight_layout()
    return fig
