"""Turn what the worker reports into errors in the reader's terms.

* A dead worker's log holds an AddressSanitizer report (or a crash) and the
  context lines the worker prints as it dies (``DLK-CONTEXT``, ``DLK-BUFFER``,
  ``DLK-SHARED``, ``DLK-DYNAMIC``): which block and thread, and where each
  argument buffer and shared array lives, so that an address becomes
  "argument 'c' at element 100".
* Outputs of the same launch run in two thread orders, or with two poison
  patterns in shared memory, are compared to find races and reads of shared
  memory no thread wrote.
"""

from __future__ import annotations

import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import PurePath

import numpy as np

from ..errors import (
    KernelLaunchError,
    KernelMemoryError,
    KernelRaceError,
    UninitializedSharedMemoryError,
)


@dataclass
class BufferInfo:
    """One argument buffer of a launch, as the reader knows it."""

    names: list[str]  # parameter names it was passed as
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def label(self) -> str:
        return "argument " + " / ".join(f"'{n}'" for n in self.names)

    def describe(self) -> str:
        return f"{int(np.prod(self.shape))} {self.dtype} values"


@dataclass
class SourceInfo:
    kernel: str
    source_name: str
    lines: list[str]

    def quote(self, line: int | None) -> str:
        if line is None:
            return ""
        text = self.lines[line - 1].strip() if 1 <= line <= len(self.lines) else ""
        return f"line {line}: `{text}`" if text else f"line {line}"


_FRAME = re.compile(r"^\s*#(\d+) 0x[0-9a-f]+ in (?P<func>.+?) (?P<file>[^\s]+?):(?P<line>\d+)(?::\d+)?\s*$")
_ASAN = re.compile(r"ERROR: AddressSanitizer: (?P<kind>[\w-]+)(?: on (?:unknown )?address (?P<addr>0x[0-9a-f]+))?")
_ACCESS = re.compile(r"(?P<rw>READ|WRITE) of size (?P<size>\d+) at (?P<addr>0x[0-9a-f]+)")
_SEGV_RW = re.compile(r"caused by a (?P<rw>READ|WRITE) memory access")
_REGION = re.compile(
    r"is located (?P<n>\d+) bytes (?P<dir>to the right of|to the left of|inside of) (?P<size>\d+)-byte region \[(?P<start>0x[0-9a-f]+),"
)
_GLOBAL = re.compile(
    r"is located (?P<n>\d+) bytes (?P<dir>to the right of|to the left of|inside of) global variable '(?P<name>[^']+)'.*?of size (?P<size>\d+)"
)
_STACK_VAR = re.compile(r"\[(?P<lo>\d+), (?P<hi>\d+)\) '(?P<name>[^']+)'(?: \(line (?P<line>\d+)\))? <== Memory access")
_CONTEXT = re.compile(r"^DLK-CONTEXT run=(?P<run>\S+) (?P<where>.+)$", re.M)
_BUFFER = re.compile(r"^DLK-BUFFER (?P<i>\d+) (?P<addr>0x[0-9a-f]+) (?P<bytes>\d+)$", re.M)
_SHARED = re.compile(r"^DLK-SHARED (?P<addr>0x[0-9a-f]+) (?P<bytes>\d+) (?P<elem>\d+) (?P<name>.+)$", re.M)
_DYNAMIC = re.compile(r"^DLK-DYNAMIC (?P<addr>0x[0-9a-f]+) (?P<bytes>\d+) (?P<arena>0x[0-9a-f]+) (?P<arena_bytes>\d+)$", re.M)


def _reader_line(log: str, source: SourceInfo, executable: str | None = None) -> int | None:
    """The first stack frame in the reader's file: from AddressSanitizer's report, or (without
    it) from the return addresses the worker printed as it crashed, through addr2line."""
    want = PurePath(source.source_name).name
    for raw in log.splitlines():
        m = _FRAME.match(raw)
        if m and PurePath(m.group("file")).name == want:
            return int(m.group("line"))
    base = re.search(r"^DLK-BASE (0x[0-9a-f]+)$", log, re.M)
    frames = re.findall(r"^DLK-FRAME (0x[0-9a-f]+)$", log, re.M)
    if executable and base and frames:
        offsets = [hex(int(f, 16) - int(base.group(1), 16)) for f in frames]
        try:
            out = subprocess.run(["addr2line", "-e", executable, *offsets], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        for row in out.splitlines():
            m = re.match(r"^(.*):(\d+)(?: \(discriminator \d+\))?$", row)
            if m and PurePath(m.group(1)).name == want:
                return int(m.group(2))
    return None


def _context(log: str) -> tuple[str, str]:
    m = None
    for m in _CONTEXT.finditer(log):
        pass
    if not m:
        return "", ""
    run = m.group("run")
    note = "" if run == "forward" else f" (while re-running the launch with threads in {run.split('-')[0]} order)"
    return m.group("where"), note


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _locate(addr: int, log: str, buffers: list[BufferInfo]) -> str | None:
    """'argument 'c' (100 float32 values) at element 100' for an address, if it can be placed."""
    region = _REGION.search(log)
    table = {int(m.group("i")): (int(m.group("addr"), 16), int(m.group("bytes"))) for m in _BUFFER.finditer(log)}
    candidates = []
    if region:
        start = int(region.group("start"), 16)
        candidates = [i for i, (a, _) in table.items() if a == start]
    if not candidates:
        # nearest buffer that ends at or before the address (an overrun), else the one after it
        after = [(addr - (a + n), i) for i, (a, n) in table.items() if addr >= a]
        if after:
            candidates = [min(after)[1]]
    for i in candidates:
        if i >= len(buffers):
            continue
        start, nbytes = table[i]
        info = buffers[i]
        offset = addr - start
        item = info.dtype.itemsize
        element = offset // item if offset >= 0 else -((-offset + item - 1) // item)
        return f"{info.label} ({info.describe()}) at element {element}"
    return None


def _locate_shared(addr: int, log: str) -> str | None:
    glob = _GLOBAL.search(log)
    for m in _SHARED.finditer(log):
        start, nbytes, elem = int(m.group("addr"), 16), int(m.group("bytes")), max(1, int(m.group("elem")))
        name = m.group("name")
        if glob and glob.group("name").split("::")[-1] == name or start - 64 <= addr < start + nbytes + 256:
            offset = addr - start
            if name.startswith("extern __shared__"):
                return f"dynamic shared memory ({nbytes} bytes asked for at launch) at byte {offset}"
            return f"shared array '{name}' ({nbytes // elem} elements of {elem} bytes) at element {offset // elem}"
    dyn = _DYNAMIC.search(log)
    if dyn:
        start, nbytes = int(dyn.group("addr"), 16), int(dyn.group("bytes"))
        arena, arena_bytes = int(dyn.group("arena"), 16), int(dyn.group("arena_bytes"))
        if arena <= addr < arena + arena_bytes + 256:
            return (
                f"dynamic shared memory ({nbytes} bytes asked for at launch, the `shared=` argument) "
                f"at byte {addr - start}"
            )
    if glob:
        return f"variable '{glob.group('name')}' ({glob.group('size')} bytes)"
    return None


_SIGNALS = {
    signal.SIGSEGV: "SIGSEGV, an invalid memory access (a wild, null or out-of-range pointer)",
    signal.SIGBUS: "SIGBUS, a misaligned or invalid memory access",
    signal.SIGFPE: "SIGFPE, an arithmetic error such as an integer division by zero",
    signal.SIGILL: "SIGILL, an illegal instruction",
    signal.SIGABRT: "SIGABRT, the program aborted",
    signal.SIGKILL: "SIGKILL, killed (out of memory?)",
}


def worker_death_error(
    returncode: int | None, log: str, source: SourceInfo, buffers: list[BufferInfo], executable: str | None = None
) -> KernelLaunchError:
    """The error for a worker that died during a launch."""
    where, note = _context(log)
    where_text = f", {where}" if where else ""
    line = _reader_line(log, source, executable)
    at = f", {source.quote(line)}" if line else ""
    asan = _ASAN.search(log)
    if asan:
        kind = asan.group("kind")
        access = _ACCESS.search(log)
        if kind in ("SEGV", "BUS") or kind == "unknown-crash" and not access:
            rw = _SEGV_RW.search(log)
            what = f"{rw.group('rw').lower()} of" if rw else "access to"
            addr = asan.group("addr") or "?"
            return KernelLaunchError(
                f"{source.kernel}: the kernel crashed (SIG{kind if kind != 'unknown-crash' else 'SEGV'}: an invalid "
                f"memory {what} address {addr}){at}{where_text}{note}. "
                f"A pointer that points nowhere valid (uninitialised, null, or computed from a wrong index) was used.",
                cuda_error="CUDA_ERROR_ILLEGAL_ADDRESS",
            )
        if kind in ("FPE", "ABRT", "ILL"):
            name = _SIGNALS.get(getattr(signal, "SIG" + kind), "SIG" + kind)
            return KernelLaunchError(
                f"{source.kernel}: the kernel crashed ({name}){at}{where_text}{note}", cuda_error="CUDA_ERROR_LAUNCH_FAILED"
            )
        if kind == "stack-overflow":
            return KernelLaunchError(
                f"{source.kernel}: a thread's stack overflowed{at}{where_text}{note}: deep recursion, or local arrays "
                f"too large (each emulated thread has 64 KiB of stack).",
                cuda_error="CUDA_ERROR_LAUNCH_FAILED",
            )
        if access:
            rw = access.group("rw").lower()
            size = int(access.group("size"))
            addr = int(access.group("addr"), 16)
            target = None
            if kind in ("heap-buffer-overflow", "heap-use-after-free"):
                target = _locate(addr, log, buffers)
            elif kind in ("global-buffer-overflow", "use-after-poison"):
                target = _locate_shared(addr, log)
            elif kind in ("stack-buffer-overflow", "stack-buffer-underflow", "dynamic-stack-buffer-overflow"):
                var = _STACK_VAR.search(log)
                target = f"the thread's local array '{var.group('name')}'" if var else "a local array of the thread"
            if target is None:
                target = f"address {hex(addr)} ({kind})"
            direction = "to" if rw == "write" else "from"
            return KernelMemoryError(
                f"{source.kernel}: out-of-bounds {rw} of {_plural(size, 'byte')} {direction} {target}{at}{where_text}{note}. "
                f"Check the index against the array's size (is a bounds check `if (i < n)` missing or off by one?).",
                cuda_error="CUDA_ERROR_ILLEGAL_ADDRESS",
            )
        summary = next((l for l in log.splitlines() if l.startswith("SUMMARY:")), f"AddressSanitizer: {kind}")
        return KernelMemoryError(f"{source.kernel}: {summary}{at}{where_text}{note}", cuda_error="CUDA_ERROR_ILLEGAL_ADDRESS")
    if returncode is not None and returncode < 0:
        sig = -returncode
        try:
            name = _SIGNALS.get(signal.Signals(sig), signal.Signals(sig).name)
        except ValueError:
            name = f"signal {sig}"
        return KernelLaunchError(
            f"{source.kernel}: the kernel crashed ({name}){at}{where_text}{note}", cuda_error="CUDA_ERROR_LAUNCH_FAILED"
        )
    tail = "\n".join(l for l in log.strip().splitlines()[-15:] if not l.startswith("DLK-"))
    return KernelLaunchError(
        f"{source.kernel}: the emulator's worker ended unexpectedly (status {returncode}){where_text}{note}"
        + (f":\n{tail}" if tail else ""),
        cuda_error="CUDA_ERROR_LAUNCH_FAILED",
    )


# ---- comparing runs ------------------------------------------------------------


@dataclass
class Difference:
    buffer: int
    index: tuple[int, ...]
    first: object
    second: object


def _floating(dtype: np.dtype) -> bool:
    """NumPy's floats, and ml_dtypes' bfloat16 (a 'V' kind to NumPy): values compared as numbers, NaN equal to NaN."""
    return dtype.kind in "fc" or dtype.name == "bfloat16"


def first_difference(a: list[np.ndarray], b: list[np.ndarray]) -> Difference | None:
    """Where two runs' outputs differ: exactly for integers, within float tolerance for floats."""
    for k, (x, y) in enumerate(zip(a, b)):
        if _floating(x.dtype):
            xf = x.astype(np.float64, copy=False).ravel()
            yf = y.astype(np.float64, copy=False).ravel()
            nx, ny = np.isnan(xf), np.isnan(yf)
            finite = np.isfinite(xf) & np.isfinite(yf)
            scale = float(np.max(np.abs(xf[finite]))) if finite.any() else 0.0
            tol = 1e-5 * scale + 1e-4 * np.maximum(np.abs(xf), np.abs(yf))
            with np.errstate(invalid="ignore"):
                bad = (nx != ny) | (finite & (np.abs(xf - yf) > tol)) | (~finite & ~nx & ~ny & (xf != yf))
        else:
            bad = (x != y).ravel()
        hits = np.flatnonzero(bad)
        if hits.size:
            i = int(hits[0])
            return Difference(k, tuple(int(v) for v in np.unravel_index(i, x.shape)), x.ravel()[i], y.ravel()[i])
    return None


def _value(v) -> str:
    return repr(v.item()) if hasattr(v, "item") else repr(v)


def _index_text(index: tuple[int, ...]) -> str:
    return str(index[0]) if len(index) == 1 else "[" + ", ".join(map(str, index)) + "]"


def race_error(source: SourceInfo, buffers: list[BufferInfo], diff: Difference, differing: int) -> KernelRaceError:
    info = buffers[diff.buffer]
    return KernelRaceError(
        f"{source.kernel}: data race: the result depends on the order in which threads run. "
        f"Run with the threads (and blocks) in forward and then in reverse order, {info.label} differs at element "
        f"{_index_text(diff.index)} ({_value(diff.first)} vs {_value(diff.second)}; "
        f"{_plural(differing, 'element')} {'differs' if differing == 1 else 'differ'}). "
        f"Threads read memory that other threads write between the same two barriers: a __syncthreads() is probably "
        f"missing between writing shared memory and reading it (and between reading a tile and overwriting it in the "
        f"next loop step), or threads of different blocks write the same element without an atomic."
    )


def _parse_unwritten(text: str) -> dict[tuple, set[int]]:
    """Worker records of shared elements a block left unwritten -> {(block, name, line, n): {elements}}."""
    records: dict[tuple, set[int]] = {}
    for row in text.splitlines():
        parts = row.split("\t")
        if len(parts) != 6:
            continue
        block, name, line, n, _elem, ranges = parts
        elements: set[int] = set()
        for r in filter(None, ranges.split(",")):
            lo, hi = (int(v) for v in r.split("-"))
            elements.update(range(lo, hi + 1))
        records[(block, name, int(line), int(n))] = elements
    return records


def unwritten_in_both(first: str, second: str) -> str:
    """Shared elements left unwritten under both poison patterns, described; "" if none.

    An element that still holds the fill pattern after the block, under two
    different fill patterns, was never written (a written value cannot equal both).
    """
    a, b = _parse_unwritten(first), _parse_unwritten(second)
    for key, elements in a.items():
        common = sorted(elements & b.get(key, set()))
        if not common:
            continue
        block, name, line, n = key
        spans, start = [], common[0]
        for prev, cur in zip(common, common[1:] + [None]):
            if cur != prev + 1:
                spans.append(str(start) if start == prev else f"{start}-{prev}")
                start = cur
        shown = ", ".join(spans[:6]) + (", ..." if len(spans) > 6 else "")
        what = "dynamic shared memory (bytes" if name.startswith("extern") else f"shared array '{name}'" + (
            f" (line {line}): elements" if line else ": elements")
        if name.startswith("extern"):
            what += ""
            return f"{len(common)} of the {n} bytes of dynamic shared memory were never written in block ({block}): bytes {shown}"
        return f"{what} {shown} of {n} were never written in block ({block})"
    return ""


def uninitialized_error(
    source: SourceInfo, buffers: list[BufferInfo], diff: Difference, unwritten: str
) -> UninitializedSharedMemoryError:
    info = buffers[diff.buffer]
    return UninitializedSharedMemoryError(
        f"{source.kernel}: reads shared memory that no thread of the block wrote: {unwritten}. "
        f"The value of {info.label} at element {_index_text(diff.index)} depends on the garbage shared memory starts "
        f"with ({_value(diff.first)} vs {_value(diff.second)}). Make sure every shared element a thread reads was "
        f"written first, e.g. store 0 for threads past the end of the data instead of skipping the store, load halo "
        f"elements too, and put a __syncthreads() between the stores and the loads."
    )


def count_differences(a: list[np.ndarray], b: list[np.ndarray], buffer: int) -> int:
    x, y = a[buffer].ravel(), b[buffer].ravel()
    if _floating(x.dtype):
        with np.errstate(invalid="ignore"):
            return int(np.count_nonzero(~np.isclose(x.astype(np.float64), y.astype(np.float64), rtol=1e-4, atol=1e-6,
                                                    equal_nan=True)))
    return int(np.count_nonzero(x != y))


# ---- races on global memory (found by the worker as they happen) -------------------


def addresses_lines(executable: str, pcs: list[int], source: SourceInfo) -> dict[int, int | None]:
    """The reader's line of each code address (inlined prelude functions: the reader's caller)."""
    want = PurePath(source.source_name).name
    lines: dict[int, int | None] = {pc: None for pc in pcs}
    try:
        out = subprocess.run(["addr2line", "-a", "-i", "-e", executable, *map(hex, pcs)],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return lines
    current = None
    for row in out.splitlines():
        if row.startswith("0x"):
            current = int(row, 16)
            continue
        m = re.match(r"^(.*):(\d+)(?: \(discriminator \d+\))?$", row)
        if current in lines and lines[current] is None and m and PurePath(m.group(1)).name == want:
            lines[current] = int(m.group(2))
    return lines


_VERBS = {"read": "read", "write": "written", "atomic": "updated atomically"}


#: the worker's buffer number of the k-th __device__ variable: VARIABLE_BASE + k
VARIABLE_BASE = 1000000


def global_race_error(report: str, source: SourceInfo, buffers: list[BufferInfo], executable: str,
                      variables: list[str] | None = None) -> KernelRaceError:
    """The error for a race on global memory: ``GLOBAL-RACE buffer offset`` then (kind, block, thread,
    code address) of the earlier access and of the one that conflicts with it."""
    fields = report.split("\t")
    if len(fields) < 11 or fields[0] != "GLOBAL-RACE":
        return KernelRaceError(f"{source.kernel}: data race on global memory ({report})")
    buffer, offset = int(fields[1]), int(fields[2])
    first = fields[3:7]
    second = fields[7:11]
    second[3] = second[3].split()[0]
    pcs = [int(first[3], 16), int(second[3], 16)]
    lines = addresses_lines(executable, pcs, source)
    info = buffers[buffer] if buffer < len(buffers) else None
    variables = variables or []
    if buffer >= VARIABLE_BASE and buffer - VARIABLE_BASE < len(variables):
        what = f"__device__ variable '{variables[buffer - VARIABLE_BASE]}' at byte {offset}"
    elif info is not None:
        element = offset // info.dtype.itemsize
        index = _index_text(tuple(int(v) for v in np.unravel_index(element, info.shape))) if info.shape else str(element)
        what = f"{info.label} ({info.describe()}) at element {index}"
    else:
        what = f"an argument buffer at byte {offset}"

    def access(fields_, pc) -> str:
        kind, block, thread, _ = fields_
        at = source.quote(lines[pc])
        return f"{_VERBS[kind]} by block ({block}) thread ({thread})" + (f" at {at}" if at else "")

    same_block = first[1] == second[1]
    if same_block:
        cause = ("Both threads are in the same block and no __syncthreads() comes between the two accesses: "
                 "put a barrier between them, or, where several threads add into one element, use atomicAdd.")
    else:
        cause = ("Threads of different blocks run in any order (at the same time on a GPU) and nothing orders them. "
                 "If each element should belong to one thread, the blocks' index ranges overlap (tiles that overlap, "
                 "or a grid-stride loop that steps by blockDim.x instead of blockDim.x * gridDim.x); if threads are "
                 "meant to add into one element (`*out += value`), use atomicAdd, or write one partial result per "
                 "block and add those up in a second launch.")
    return KernelRaceError(
        f"{source.kernel}: data race on global memory: {what} was {access(first, pcs[0])}, then "
        f"{access(second, pcs[1])}, with nothing ordering the two (at least one is a plain, non-atomic write). {cause}"
    )
