"""Chapters show one kernel of a .cu file at a time: the excerpt must be exactly that kernel, and a kernel's
section (its record's ``source``) the kernel with what was written for it, found by its name."""

import pytest

from kernels import read_source
from kernels.runtime import parse_kernels
from kernels.runtime.sources import kernel_section, section
from kernels.tools.source_excerpt import function_source


def test_every_kernel_of_a_file_is_found_whole():
    for topic in ("sgemm", "conv2d", "capsule_prediction", "reduction"):
        kernels = parse_kernels(read_source(topic), f"{topic}.cu", {})
        assert kernels
        for name in kernels:
            excerpt = function_source(topic, name)
            assert f"{name}(" in excerpt
            assert excerpt.count("{") == excerpt.count("}") > 0
            # One kernel only: the next kernel of the file is not dragged along.
            others = [k for k in kernels if k != name and f" {k}(" in excerpt.replace("\n", " ")]
            assert not others, (name, others)


def test_launch_bounds_and_comment_above_are_kept():
    excerpt = function_source("sgemm", "sgemm_warptile")
    assert excerpt.lstrip().startswith(("//", "__global__ void __launch_bounds__"))
    assert "__launch_bounds__(WT_THREADS, WT_MIN_BLOCKS)" in excerpt


def test_unknown_name_is_a_clear_error():
    with pytest.raises(KeyError, match="no function called 'no_such_kernel'"):
        function_source("reduction", "no_such_kernel")


# --------------------------------------------------------------------------- a kernel's section (what its record shows)

SOURCE = """// demo.cu -- the file's opening comment, which no section carries.
//
// Versions: 1. first, 2. second.
#include "cuda_helpers.cuh"

#define WIDTH 4

// 1. The first kernel.
__global__ void first(float* x) { x[0] = WIDTH; }

// A helper the second kernel is written with.
__device__ float twice(float v) {
    return 2 * v;
}

// 2. The second kernel.
__global__ void __launch_bounds__(256)
second(float* x) {
    x[0] = twice(x[0]);
}
// ----------------------------------------------------------------
// Helpers of the kernels below: a section of their own.
__device__ float half(float v) { return v / 2; }
// ----------------------------------------------------------------
// 3. After a separator.
__global__ void third(float* x) { x[0] = half(x[0]); }
"""


def test_a_section_runs_from_the_kernel_before_to_the_kernel():
    first = section(SOURCE, "first")
    assert first.startswith("#define WIDTH 4") and first.endswith("x[0] = WIDTH; }")
    assert "opening comment" not in first and "#include" not in first
    second = section(SOURCE, "second")
    assert second.startswith("// A helper the second kernel") and "__device__ float twice" in second
    assert second.endswith("x[0] = twice(x[0]);\n}") and "first" not in second


def test_separators_bound_sections_and_a_helper_shows_the_section_it_lies_in():
    assert section(SOURCE, "half") == ("// Helpers of the kernels below: a section of their own.\n"
                                       "__device__ float half(float v) { return v / 2; }")
    assert section(SOURCE, "third") == "// 3. After a separator.\n__global__ void third(float* x) { x[0] = half(x[0]); }"
    assert section(SOURCE, "twice") == section(SOURCE, "second")


def test_a_section_is_found_by_name_not_by_its_number():
    renumbered = SOURCE.replace("// 2. The second kernel.", "// The second kernel, unnumbered.")
    assert section(renumbered, "second") == section(SOURCE, "second").replace(
        "// 2. The second kernel.", "// The second kernel, unnumbered.")
    with pytest.raises(KeyError, match="no function called 'fourth'"):
        section(SOURCE, "fourth")


def test_the_book_s_kernels_sections():
    sgemm = kernel_section("sgemm", "sgemm_shared_tiled")
    assert sgemm.startswith("// 3. Shared-memory tiles") and "#define TILE 32" in sgemm
    helpers = kernel_section("sgemm", "load_row4")
    assert "__global__" not in helpers and "store_row4" in helpers and "unpack4" in helpers
    shuffle = kernel_section("reduction", "reduce_sum_warp_shuffle")
    assert "__device__ float warp_reduce_sum" in shuffle and "reduce_sum_shared_tree" not in shuffle
    assert kernel_section("reduction", "reduce_sum_atomic").startswith("// 1. One atomicAdd per element.")
    with pytest.raises(KeyError, match="kernels/basics/reduction.cu has no function called 'reduce_sum_none'"):
        kernel_section("reduction", "reduce_sum_none")
