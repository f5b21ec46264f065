"""What nvcc says each kernel needs: registers, shared memory, stack, spills.

``nvcc -arch=sm_90 -cubin -Xptxas -v`` compiles without a GPU and has the
assembler (ptxas) print, for every kernel, the resources one thread or block
uses.  These numbers decide occupancy (how many blocks fit on a
multiprocessor at once) and reveal register spills (local-memory traffic the
source never asked for)::

    from kernels.tools.nvcc_report import report_topic, as_table
    print(as_table(report_topic("reduction")))
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from kernels import KERNEL_DIR, source_path
from kernels.runtime import kernel_symbols
from kernels.runtime.errors import KernelCompileError
from kernels.runtime.diagnostics import quote_source_lines
from kernels.runtime.gpu import ARCH_SPECIFIC_OPTION, compile_target, nvcc_source

DEFAULT_ARCH = "sm_90"


@dataclass(frozen=True)
class KernelResources:
    """Per-kernel figures from ptxas (bytes unless stated)."""

    kernel: str
    registers: int  # per thread
    shared_bytes: int  # static shared memory per block (dynamic shared memory comes at launch)
    constant_bytes: int  # all cmem banks: kernel parameters live in bank 0
    stack_frame_bytes: int  # per thread, in local memory
    spill_store_bytes: int
    spill_load_bytes: int
    barriers: int

    @property
    def spills(self) -> bool:
        return bool(self.spill_store_bytes or self.spill_load_bytes)


def nvcc_path() -> str | None:
    return shutil.which("nvcc")


def parse_ptxas_log(log: str) -> list[KernelResources]:
    """Read ptxas ``-v`` output into one :class:`KernelResources` per entry function, named as its source
    names it (ptxas names kernels by their C++ mangled names)."""
    results: list[KernelResources] = []
    current: dict | None = None

    def finish():
        if current is not None:
            results.append(KernelResources(**current))

    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            finish()
            current = dict(
                kernel=kernel_symbols.source_name(m.group(1)), registers=0, shared_bytes=0, constant_bytes=0,
                stack_frame_bytes=0, spill_store_bytes=0, spill_load_bytes=0, barriers=0,
            )
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            current["stack_frame_bytes"] = int(m.group(1))
            current["spill_store_bytes"] = int(m.group(2))
            current["spill_load_bytes"] = int(m.group(3))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["registers"] = int(m.group(1))
            b = re.search(r"used (\d+) barriers", line)
            current["barriers"] = int(b.group(1)) if b else 0
            s = re.search(r"(\d+) bytes smem", line)
            current["shared_bytes"] = int(s.group(1)) if s else 0
            current["constant_bytes"] = sum(int(c) for c in re.findall(r"(\d+) bytes cmem\[\d+\]", line))
    finish()
    return results


def compile_report(
    source: str,
    source_name: str = "kernel.cu",
    arch: str = DEFAULT_ARCH,
    include_dirs: tuple[str, ...] = (),
    options: tuple[str, ...] = (),
) -> list[KernelResources]:
    """Compile ``source`` to a cubin for ``arch`` and return what ptxas reports per kernel.

    Raises :class:`KernelCompileError` when it does not compile, and
    ``FileNotFoundError`` when nvcc is not installed.
    """
    nvcc = nvcc_path()
    if nvcc is None:
        raise FileNotFoundError("nvcc is not on the PATH (install the CUDA toolkit to see resource reports)")
    with tempfile.TemporaryDirectory(prefix="nvcc-report-") as tmp:
        cu = Path(tmp) / source_name
        cu.write_text(nvcc_source(source, source_name))
        cmd = [nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o", str(Path(tmp) / "out.cubin"), str(cu)]
        for d in include_dirs:
            cmd[1:1] = [f"-I{d}"]
        cmd[1:1] = list(options)
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        try:
            quoted = quote_source_lines(log, source, source_name)
        except Exception:
            quoted = ""
        raise KernelCompileError(f"{source_name} does not compile for {arch}:\n{quoted or log}", log=log, source_name=source_name)
    return parse_ptxas_log(log)


def report_topic(topic: str, arch: str = DEFAULT_ARCH) -> list[KernelResources]:
    """:func:`compile_report` of ``kernels/<part>/<topic>.cu``, kernels in the order the file defines them."""
    path = source_path(topic)
    source = path.read_text()
    # A topic written for one architecture only (Hopper's wgmma) is compiled as its loader compiles it.
    options = (ARCH_SPECIFIC_OPTION,) if re.search(r"\bDLK_ARCH_SPECIFIC\b", source) else ()
    found = {r.kernel: r for r in compile_report(source, path.name, compile_target(arch, options),
                                                 include_dirs=(str(KERNEL_DIR),), options=options)}
    order = [m.group(1) for m in re.finditer(r"__global__\s+void\s+(\w+)", source)]
    return [found[k] for k in order if k in found] + [r for k, r in found.items() if k not in order]


COLUMNS = (
    ("kernel", "kernel"),
    ("registers", "registers/thread"),
    ("shared_bytes", "static smem (B)"),
    ("constant_bytes", "cmem (B)"),
    ("stack_frame_bytes", "stack (B)"),
    ("spill_store_bytes", "spill st (B)"),
    ("spill_load_bytes", "spill ld (B)"),
)


def as_table(reports: list[KernelResources]) -> str:
    """A plain-text table, one row per kernel."""
    rows = [[label for _, label in COLUMNS]] + [[str(asdict(r)[key]) for key, _ in COLUMNS] for r in reports]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = []
    for j, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
