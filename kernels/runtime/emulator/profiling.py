"""A profiler without a GPU: what a launch's warps ask of the memory system, counted from the emulator.

The emulator's profiling build (``profiler.h``) records, for the first few blocks of a launch, every
access of a thread to global or shared memory and every branch it takes.  Here the lanes of a warp
are lined up again (the k-th time the lanes of a warp reach one instruction between the same two
barriers is one warp-level instruction) and counted as the hardware counts them:

* global memory: each warp-level load or store is one *request*; its *sectors* are the distinct
  32-byte segments its active lanes touch (32 consecutive floats: 4 sectors; a float4 per lane: 16;
  a stride of 32 floats: 32).  Nsight Compute's ``l1tex__t_requests_pipe_lsu_mem_global_op_ld`` and
  ``l1tex__t_sectors_pipe_lsu_mem_global_op_ld`` count the same (``_op_st`` for stores).
* shared memory: 32 banks of 4-byte words; a request takes as many passes (*wavefronts*) as the
  most distinct words any one bank holds among its lanes (the same word is a broadcast, not a
  conflict).  64-bit and 128-bit accesses are served in 2 and 4 phases (half and quarter warps),
  each counted so.  *Conflicts* are the wavefronts beyond one per phase, as Nsight Compute's
  ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld`` counts them; *ways* is the worst phase's.
* branches: a warp-level branch *diverges* when its active lanes leave it for different places.

The counting is :mod:`.profile_counts`'s; here are what a profile holds, how one is asked for, and
what it says.  Counted per source line; a launch's profile (:class:`LaunchProfile`) is a small table with the
hints its numbers imply.  Profiling is off unless asked for: inside :func:`collecting`, or for every
launch with ``DLK_EMULATOR_PROFILE=1`` (a number: blocks to profile; ``all``: the whole grid), which
prints each launch's table.

The accesses counted are those the source makes, one per element, as g++ compiles it; nvcc's
assembler merges a thread's neighbouring shared-memory words in unrolled code into 64- and 128-bit
accesses, and :func:`.profile_counts.merged_as_nvcc_does` does the same before counting.  What else nvcc does
differently (loads it keeps in registers, loads it repeats) is not seen here.
"""

from __future__ import annotations

import contextlib
import html
import math
import os
import sys
import threading
from dataclasses import dataclass, field

import numpy as np


#: One event of the profiling build (profiler.h's prof::Event): keep the two in step.
EVENT_DTYPE = np.dtype([
    ("address", "<u8"), ("site", "<u4"), ("caller", "<u4"), ("instance", "<u4"), ("epoch", "<u4"),
    ("block", "<u2"), ("thread", "<u2"), ("size", "<u2"), ("kind", "u1"), ("space", "u1"),
])
LOAD, STORE, ATOMIC, BRANCH = 0, 1, 2, 3
GLOBAL, SHARED = 1, 2
OPS = {LOAD: "load", STORE: "store", ATOMIC: "atomic"}
SPACES = {GLOBAL: "global", SHARED: "shared"}

SECTOR_BYTES = 32
BANKS = 32
WARP = 32

#: blocks a launch profiles unless told otherwise (the first ones of the grid, in the order blocks run)
DEFAULT_BLOCKS = 4
ENV_VAR = "DLK_EMULATOR_PROFILE"


@dataclass(frozen=True)
class LaunchShape:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass
class LineCounts:
    """The accesses of one source line to one memory space, of one kind (load, store or atomic)."""

    line: int | None
    code: str
    space: str  # "global" or "shared"
    op: str  # "load", "store" or "atomic"
    requests: int = 0  # warp-level instructions
    lanes: int = 0  # active lanes, summed over the requests
    bytes_per_lane: int = 0  # the access's size (the most common one on the line)
    sectors: int = 0  # global: distinct 32-byte sectors, summed over the requests
    ideal_sectors: int = 0  # global: the sectors the distinct bytes the lanes asked for would fill
    wavefronts: int = 0  # shared: passes through the banks, summed
    phases: int = 0  # shared: phases with an active lane (1 per 32-bit request, 2 per 64-bit, 4 per 128-bit), summed
    max_ways: int = 0  # shared: the most distinct words one bank served in one phase
    stride_bytes: int | None = None  # the most common distance between the addresses of neighbouring lanes

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    @property
    def ideal_sectors_per_request(self) -> float:
        return self.ideal_sectors / self.requests if self.requests else 0.0

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.phases

    @property
    def conflicts_per_request(self) -> float:
        return self.conflicts / self.requests if self.requests else 0.0

    @property
    def wavefronts_per_request(self) -> float:
        return self.wavefronts / self.requests if self.requests else 0.0

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d.update(sectors_per_request=self.sectors_per_request, conflicts=self.conflicts)
        return d


@dataclass
class BranchCounts:
    """The warp-level branches of one place in the code (a branch whose lanes all went one way in every
    profiled block is not counted: it cannot diverge)."""

    line: int | None
    code: str
    branches: int = 0  # warp-level instances
    divergent: int = 0  # instances whose active lanes went different ways

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class Occupancy:
    """Blocks resident per multiprocessor, from the kernel's registers and shared memory (nvcc's report)."""

    registers: int
    shared_bytes: int  # static plus the launch's dynamic shared memory, per block
    threads_per_block: int
    blocks_per_sm: int
    limited_by: str  # "registers", "shared memory", "threads", "blocks" or "block size"
    warps_per_sm: int
    max_warps_per_sm: int

    @property
    def percent(self) -> float:
        return 100.0 * self.warps_per_sm / self.max_warps_per_sm

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["percent"] = self.percent
        return d


@dataclass
class LaunchProfile:
    """The counts of one profiled launch."""

    kernel: str
    launch: LaunchShape
    blocks_profiled: int = 0
    truncated: bool = False
    memory: list[LineCounts] = field(default_factory=list)
    branches: list[BranchCounts] = field(default_factory=list)
    note: str = ""  # why there are no counts, or what limits them
    occupancy: Occupancy | None = None
    occupancy_note: str = ""  # why there is no occupancy ("nvcc not found", ...)
    # what nvcc needs to report the kernel's registers: (source, source name, options, include folders)
    origin: tuple | None = field(default=None, repr=False)
    # which thread of the sample touched which element of which argument (element_accesses.ElementAccesses), where
    # the collector asked for it
    elements: object | None = field(default=None, repr=False)

    # ---- totals, as Nsight Compute reports them --------------------------------------------------
    def total(self, space: str, op: str, attribute: str) -> int:
        return sum(getattr(r, attribute) for r in self.memory if r.space == space and r.op == op)

    def sectors_per_request(self, op: str = "load") -> float | None:
        requests = self.total("global", op, "requests")
        return self.total("global", op, "sectors") / requests if requests else None

    def bank_conflicts(self, op: str = "load") -> int:
        return self.total("shared", op, "wavefronts") - self.total("shared", op, "phases")

    def wavefronts_per_request(self, op: str = "load") -> float | None:
        requests = self.total("shared", op, "requests")
        return self.total("shared", op, "wavefronts") / requests if requests else None

    def summary(self) -> dict:
        """The launch's totals by name (what the ncu comparison records)."""
        out: dict = {"kernel": self.kernel, "blocks_profiled": self.blocks_profiled, "blocks": self.launch.blocks}
        for op in ("load", "store"):
            out[f"global_{op}_requests"] = self.total("global", op, "requests")
            out[f"global_{op}_sectors"] = self.total("global", op, "sectors")
            out[f"sectors_per_{op}_request"] = self.sectors_per_request(op)
            out[f"shared_{op}_requests"] = self.total("shared", op, "requests")
            out[f"shared_{op}_wavefronts"] = self.total("shared", op, "wavefronts")
            out[f"shared_{op}_bank_conflicts"] = self.bank_conflicts(op)
            out[f"shared_{op}_wavefronts_per_request"] = self.wavefronts_per_request(op)
        out["branches"] = sum(b.branches for b in self.branches)
        out["divergent_branches"] = sum(b.divergent for b in self.branches)
        if self.occupancy is not None:
            out["occupancy_percent"] = self.occupancy.percent
        return out

    def as_dict(self) -> dict:
        return {
            "kernel": self.kernel, "grid": list(self.launch.grid), "block": list(self.launch.block),
            "shared_bytes": self.launch.shared_bytes, "blocks_profiled": self.blocks_profiled,
            "truncated": self.truncated, "note": self.note,
            "memory": [r.as_dict() for r in self.memory], "branches": [b.as_dict() for b in self.branches],
            "occupancy": self.occupancy.as_dict() if self.occupancy else None, "occupancy_note": self.occupancy_note,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "LaunchProfile":
        """The profile :meth:`as_dict` wrote (what the grading child sends ``check()``)."""
        launch = LaunchShape(tuple(d["grid"]), tuple(d["block"]), int(d["shared_bytes"]))
        profile = cls(d["kernel"], launch, int(d["blocks_profiled"]), bool(d["truncated"]), note=d.get("note", ""),
                      occupancy_note=d.get("occupancy_note", ""))
        derived = ("sectors_per_request", "conflicts")
        profile.memory = [LineCounts(**{k: v for k, v in r.items() if k not in derived}) for r in d["memory"]]
        profile.branches = [BranchCounts(**b) for b in d["branches"]]
        if d.get("occupancy"):
            profile.occupancy = Occupancy(**{k: v for k, v in d["occupancy"].items() if k != "percent"})
        return profile

    # ---- what a reader sees ----------------------------------------------------------------------
    def sample_text(self) -> str:
        if not self.blocks_profiled:
            return "no block profiled"
        if self.blocks_profiled >= self.launch.blocks:
            n = self.launch.blocks
            return f"the whole grid ({n} block{'s' if n != 1 else ''}) profiled"
        return f"the first {self.blocks_profiled} of {self.launch.blocks} blocks profiled"

    def hints(self) -> list[str]:
        return profile_hints(self)

    def table(self) -> str:
        return profile_table(self)

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        return profile_html(self)


def not_profiled(kernel: str, launch: LaunchShape, why: str) -> LaunchProfile:
    return LaunchProfile(kernel, launch, note=why)


# ---- asking for profiles -----------------------------------------------------------------------------

class Collector:
    """The profiles of the launches made while it is active (:func:`collecting`)."""

    def __init__(self, blocks: int = DEFAULT_BLOCKS, echo: bool = False, elements: bool = False):
        if blocks < 0 or blocks > 0xFFFF:
            raise ValueError(f"blocks must be between 0 (the whole grid) and 65535, got {blocks}")
        self.blocks = int(blocks)  # 0: every block
        self.echo = echo
        self.elements = elements  # also which thread touched which element (a thread map's data)
        self.profiles: list[LaunchProfile] = []

    def add(self, profile: LaunchProfile) -> None:
        self.profiles.append(profile)
        if self.echo:
            print(profile.table(), file=sys.stdout)
            sys.stdout.flush()


_active = threading.local()


def _env_collector() -> Collector | None:
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value in ("", "0", "no", "off", "false"):
        return None
    if value in ("1", "yes", "on", "true"):
        blocks = DEFAULT_BLOCKS
    elif value == "all":
        blocks = 0
    else:
        try:
            blocks = int(value)
        except ValueError:
            blocks = DEFAULT_BLOCKS
    cached = getattr(_active, "env", None)
    if cached is None or cached.blocks != blocks:
        cached = _active.env = Collector(blocks, echo=True)
    cached.profiles.clear()  # nobody collects them: each is printed
    return cached


def requested() -> Collector | None:
    """Where this launch's profile goes, if it is profiled."""
    stack = getattr(_active, "stack", None)
    return stack[-1] if stack else _env_collector()


@contextlib.contextmanager
def collecting(blocks: int = DEFAULT_BLOCKS, elements: bool = False):
    """Profile every launch on the emulator made inside the ``with`` (its first ``blocks`` blocks; 0: all),
    yielding the list the profiles are appended to; ``elements``: each profile also says which thread touched
    which element (:attr:`LaunchProfile.elements`, what a thread map is drawn from)."""
    collector = Collector(blocks, elements=elements)
    stack = getattr(_active, "stack", None)
    if stack is None:
        stack = _active.stack = []
    stack.append(collector)
    try:
        yield collector.profiles
    finally:
        stack.remove(collector)


# ---- what the numbers imply ---------------------------------------------------------------------------

_ELEMENT = {1: "bytes", 2: "halves", 4: "floats", 8: "doubles", 16: "float4s"}


def _elements(stride_bytes: int, size: int) -> str:
    unit = 4 if size <= 4 else size
    n = stride_bytes / unit
    name = _ELEMENT.get(unit, f"{unit}-byte elements")
    count = f"{n:g}" if n != int(n) else f"{int(n)}"
    if unit == 4 and size < 4:
        name = "words"
    return f"{count} {name}" if abs(n) != 1 else f"1 {name[:-1]}"


def _verb(op: str) -> str:
    return {"load": "reads", "store": "writes", "atomic": "updates"}[op]


def _where(row) -> str:
    return f"line {row.line}" if row.line else "code outside your source (a header's function)"


def profile_hints(profile: LaunchProfile) -> list[str]:
    """One sentence per line whose counts show a problem, naming the line and the cause."""
    hints: list[str] = []
    for r in profile.memory:
        if not r.requests:
            continue
        if r.space == "global" and r.op != "atomic":
            per, ideal = r.sectors_per_request, r.ideal_sectors_per_request
            contiguous = r.stride_bytes is not None and 0 < abs(r.stride_bytes) <= r.bytes_per_lane
            if per >= 2 * max(ideal, 1.0) and per >= 4 and not contiguous:
                why = ""
                if r.stride_bytes:
                    why = (f": neighbouring threads of a warp are {_elements(abs(r.stride_bytes), r.bytes_per_lane)} apart "
                           f"({abs(r.stride_bytes)} bytes), so {'each thread' if abs(r.stride_bytes) >= SECTOR_BYTES else 'the warp'} "
                           f"touches {'a sector of its own' if abs(r.stride_bytes) >= SECTOR_BYTES else 'sectors it mostly does not use'}")
                elif r.stride_bytes is None or r.stride_bytes == 0:
                    why = f": the threads of a warp {'read' if r.op == 'load' else 'write'} scattered addresses"
                hints.append(
                    f"{_where(r)} {_verb(r.op)} {per:.3g} sectors of global memory per request where {max(ideal, 1):.3g} would do{why}; "
                    f"let consecutive threads (threadIdx.x) {'read' if r.op == 'load' else 'write'} consecutive elements "
                    f"(coalesced: {ideal:.3g} sectors per request)."
                )
        elif r.space == "shared" and r.max_ways >= 2 and r.conflicts_per_request >= 0.5:
            why = ""
            if r.stride_bytes and r.bytes_per_lane <= 4 and abs(r.stride_bytes) % 128 == 0:
                why = (f": neighbouring threads are {_elements(abs(r.stride_bytes), r.bytes_per_lane)} apart, a multiple of "
                       f"32 words, so they all land in one bank; pad each row by one element (e.g. [32][33] instead of "
                       f"[32][32]) or let threadIdx.x index the last dimension")
            elif r.stride_bytes and r.bytes_per_lane <= 4 and abs(r.stride_bytes) % 4 == 0 \
                    and math.gcd(abs(r.stride_bytes) // 4, BANKS) > 1:
                used = BANKS // math.gcd(abs(r.stride_bytes) // 4, BANKS)
                why = (f": neighbouring threads are {_elements(abs(r.stride_bytes), r.bytes_per_lane)} apart, so the "
                       f"warp uses only {used} of the 32 banks; a stride of an odd number of words spreads it over all 32")
            hints.append(
                f"{_where(r)} {_verb(r.op)} shared memory with {r.max_ways}-way bank conflicts "
                f"({r.wavefronts_per_request:.3g} passes per request instead of {r.phases / r.requests:.3g}){why}."
            )
    warps = max(1, profile.blocks_profiled * -(-profile.launch.threads_per_block // WARP))
    for b in profile.branches:
        # a branch a warp splits at once (``if (lane == 0)``) costs little; one it splits again and again does
        if b.branches and b.divergent / b.branches >= 0.25 and b.divergent >= 2 * warps:
            hints.append(
                f"near line {b.line}, the threads of a warp take different paths in {b.divergent} of {b.branches} "
                f"warp-level branches: a warp runs both paths one after the other, its other lanes idle."
            )
    o = profile.occupancy
    if o is not None and o.percent < 50:
        hints.append(
            f"occupancy {o.percent:.0f}%: {o.blocks_per_sm} block{'s' if o.blocks_per_sm != 1 else ''} of "
            f"{o.threads_per_block} threads {'fit' if o.blocks_per_sm != 1 else 'fits'} on a multiprocessor, "
            f"limited by {o.limited_by} "
            f"({o.registers} registers per thread, {o.shared_bytes} bytes of shared memory per block)."
        )
    return hints


def _per_request(r: LineCounts) -> str:
    if r.space == "global":
        n = r.sectors_per_request
        return f"{n:.3g} sector{'' if n == 1 else 's'} (ideal {r.ideal_sectors_per_request:.3g})"
    ways = f"{r.max_ways}-way" if r.max_ways > 1 else "no conflict"
    n = r.wavefronts_per_request
    return f"{n:.3g} wavefront{'' if n == 1 else 's'} ({ways})"


def _rows(profile: LaunchProfile) -> list[list[str]]:
    rows = []
    for r in profile.memory:
        code = r.code if len(r.code) <= 44 else r.code[:41] + "..."
        rows.append([str(r.line or "-"), code, r.space, r.op, f"{r.bytes_per_lane} B", str(r.requests), _per_request(r)])
    return rows


HEADER = ["line", "code", "memory", "op", "width", "requests", "per request"]


def _head(profile: LaunchProfile) -> str:
    g, b = profile.launch.grid, profile.launch.block
    return (f"profile of {profile.kernel} on the CPU emulator: grid ({g[0]},{g[1]},{g[2]}), block ({b[0]},{b[1]},{b[2]}); "
            f"{profile.sample_text()}")


def _tail(profile: LaunchProfile) -> list[str]:
    lines = []
    if profile.branches:
        lines.append("divergent branches: " + "; ".join(
            f"near line {b.line}: {b.divergent} of {b.branches} warp-level branches" for b in profile.branches))
    else:
        lines.append("divergent branches: none")
    if profile.occupancy is not None:
        o = profile.occupancy
        lines.append(f"occupancy: {o.blocks_per_sm} blocks/SM, {o.warps_per_sm} of {o.max_warps_per_sm} warps "
                     f"({o.percent:.0f}%), limited by {o.limited_by} ({o.registers} registers/thread, "
                     f"{o.shared_bytes} B shared/block; nvcc -arch=sm_90, H100 limits)")
    elif profile.occupancy_note:
        lines.append(f"occupancy: {profile.occupancy_note}")
    return lines


def profile_table(profile: LaunchProfile) -> str:
    """The profile as plain text: a row per line and kind of access, then branches, occupancy and hints."""
    out = [_head(profile)]
    if profile.note:
        out.append(f"  ({profile.note})")
    rows = _rows(profile)
    if rows:
        table = [HEADER] + rows
        widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
        for j, row in enumerate(table):
            out.append("  " + "  ".join(cell.rjust(w) if i in (0, 5) else cell.ljust(w)
                                        for i, (cell, w) in enumerate(zip(row, widths))).rstrip())
            if j == 0:
                out.append("  " + "  ".join("-" * w for w in widths))
    elif not profile.note:
        out.append("  no access to global or shared memory")
    out += ["  " + line for line in _tail(profile)]
    hints = profile.hints()
    if hints:
        out.append("  hints:")
        out += ["  - " + h for h in hints]
    return "\n".join(out)


def profile_html(profile: LaunchProfile) -> str:
    """The profile as an HTML table (what a notebook shows)."""

    def esc(x) -> str:
        return html.escape(str(x))

    parts = [f"<div><p><b>{esc(_head(profile))}</b></p>"]
    if profile.note:
        parts.append(f"<p>{esc(profile.note)}</p>")
    rows = _rows(profile)
    if rows:
        parts.append("<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in HEADER) + "</tr></thead><tbody>")
        for row in rows:
            parts.append("<tr>" + "".join(f"<td><code>{esc(c)}</code></td>" if i == 1 else f"<td>{esc(c)}</td>"
                                          for i, c in enumerate(row)) + "</tr>")
        parts.append("</tbody></table>")
    parts += [f"<p>{esc(line)}</p>" for line in _tail(profile)]
    hints = profile.hints()
    if hints:
        parts.append("<ul>" + "".join(f"<li>{esc(h)}</li>" for h in hints) + "</ul>")
    parts.append("</div>")
    return "".join(parts)
