"""Every kernels/<part>/*.cu compiles for sm_90 with nvcc, and no kernel spills registers.

nvcc needs no GPU; without it these tests skip and say so.
"""

from __future__ import annotations

import pytest

from benchmarks.conv_as_gemm import WARPTILE_CONFIGS, WT_KEYS
from kernels import KERNEL_DIR
from kernels.gemm.sgemm import WARPTILE_DEFAULT
from kernels.runtime.errors import KernelCompileError
from kernels.runtime.sources import source_path, topic_sources
from kernels.tools.nvcc_report import as_table, compile_report, nvcc_path, parse_ptxas_log, report_topic

CU_FILES = list(topic_sources().values())
needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not on the PATH: install the CUDA toolkit to check compilation for sm_90")


@needs_nvcc
@pytest.mark.parametrize("path", CU_FILES, ids=[p.name for p in CU_FILES])
def test_compiles_for_sm90_without_spills(path):
    reports = report_topic(path.stem)
    assert reports, f"{path.name}: nvcc reported no kernels"
    spilling = [r for r in reports if r.spills]
    assert not spilling, f"{path.name}: register spills\n{as_table(spilling)}"


@needs_nvcc
def test_reports_shared_memory_and_registers():
    reports = {r.kernel: r for r in report_topic("reduction")}
    assert reports["reduce_sum_warp_shuffle"].shared_bytes == 32 * 4  # its static warp_sums[32]
    assert reports["reduce_sum_shared_tree"].shared_bytes == 0  # dynamic shared memory only
    assert all(r.registers > 0 for r in reports.values())


@needs_nvcc
def test_compile_error_names_the_line():
    source = "__global__ void broken(float* x) {\n    x[0] = undefined_name;\n}\n"
    with pytest.raises(KernelCompileError, match=r"broken.cu:2: error: identifier \"undefined_name\""):
        compile_report(source, "broken.cu")


def test_parses_spills_and_constant_memory():
    log = """ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem, 380 bytes cmem[0], 8 bytes cmem[2]
"""
    (r,) = parse_ptxas_log(log)
    assert (r.kernel, r.registers, r.shared_bytes, r.constant_bytes) == ("k", 255, 4096, 388)
    assert (r.stack_frame_bytes, r.spill_store_bytes, r.spill_load_bytes, r.barriers) == (48, 40, 36, 1)
    assert r.spills


@needs_nvcc
def test_the_tile_the_gemm_page_says_spills_does_and_the_default_does_not():
    """book/sgemm.md says that the grouped 128 x 128 x 16 tile at two blocks per multiprocessor spills, and that the
    file as it builds (its default tile) does not: both are checked here, so the page cannot drift from ptxas."""
    source = source_path("sgemm").read_text()

    def warptile(defines):
        options = tuple(f"-D{name}={value}" for name, value in defines.items())
        reports = compile_report(source, "sgemm.cu", include_dirs=(str(KERNEL_DIR),), options=options)
        return next(r for r in reports if r.kernel == "sgemm_warptile")

    grouped = dict(zip(WT_KEYS, (128, 128, 16, 2, 8, 4)))
    assert tuple(grouped.values()) in WARPTILE_CONFIGS, "the page's spilling tile is no longer in the search"
    assert warptile(grouped).spills
    assert not warptile(WARPTILE_DEFAULT).spills
