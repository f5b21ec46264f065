"""Hostile kernel sources, each graded end to end beside its honest twin.

Every attack is an honest SAXPY with one trick added: reading a file at
compile time (an include the pattern check would not see, an assembler
directive) or switching the out-of-bounds checks off for a kernel that writes
out of bounds.  The twin is the same kernel without the trick.  The attack
must be refused at the student's line, score no more than its twin, and
nothing of the file it reached for may appear in its feedback.
"""

from __future__ import annotations

import re

import pytest

from autograder.isolation import grade_submission
from autograder.submission import submission_from_cell

pytestmark = pytest.mark.backend

SECRET = b"hostile source tests"
TOKEN = "INSTRUCTOR-ONLY-7f3a"

HEAD = "%%cuda saxpy block=256\n"
KERNEL = (
    "__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i * incy] = alpha * x[i * incx] + y[i * incy];\n"
    "}\n"
)
#: out of bounds by a little (where the guard region around the buffer catches it)
OOB_KERNEL = KERNEL.replace("y[i * incy] = alpha * x[i * incx] + y[i * incy];\n", "y[i * incy] = alpha * x[i * incx] + y[i * incy];\n    if (i == 0) y[n + 2] = 1.0f;\n")


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("course") / "solutions.txt"
    path.write_text(f"{TOKEN}\n")
    return path


def _include_attacks(secret: str) -> dict[str, tuple[str, int]]:
    """name -> (the lines before the kernel, the cell line the trick is on)."""
    return {
        "digraph_include": (f'%:include "{secret}"\n', 2),
        "macro_built_include": (f'#define STR(x) #x\n#define PATH(x) STR(x)\n#include PATH({secret})\n', 4),
        "include_only_in_the_device_pass": (f'#ifdef __CUDA_ARCH__\n#include "{secret}"\n#endif\n', 3),
        "asm_incbin_pasted": (f'asm(".section .rodata\\n.globl leak\\nleak: .inc" "bin \\"{secret}\\"\\n.previous");\n', 2),
        "asm_incbin_escaped": (f'__asm__("\\x2eincbin \\"{secret}\\"");\n', 2),
        "asm_incbin_raw_string": (f'__asm__(R"s(.incbin "{secret}")s");\n', 2),
        "asm_include": (f'__asm(".include \\"{secret}\\"");\n', 2),
    }


#: name -> (the lines before the kernel, the attribute written before __global__, the cell line of the trick)
SANITIZER_ATTACKS = {
    "attribute_no_sanitize_address": ("", "__attribute__((no_sanitize_address)) ", 2),
    "attribute_no_sanitize": ("", '__attribute__((no_sanitize("address"))) ', 2),
    "cxx_attribute_gnu_no_sanitize": ("", "[[gnu::no_sanitize_address]] ", 2),
    "attribute_built_by_macros": ("#define OFF(x) __attribute__((x))\n#define WHAT no_ ## sanitize_address\n",
                                  "OFF(WHAT) ", 4),
    "pragma_gcc_optimize": ('#pragma GCC optimize("O0")\n', "", 2),
    "pragma_built_by_Pragma": ('_Pragma("GCC push_options")\n', "", 2),
    "pragma_clang": ("#pragma clang attribute push (__attribute__((no_sanitize(\"address\"))), apply_to=function)\n",
                     "", 2),
    "attribute_optimize": ("", '__attribute__((optimize("O0"))) ', 2),
    "asan_interface_unpoison": ('extern "C" void __asan_unpoison_memory_region(const volatile void*, unsigned long);\n',
                                "", 2),
}


def _grade(cell: str, student: str):
    return grade_submission(submission_from_cell(cell), mode="hidden", student_key=SECRET, student_id=student)


@pytest.fixture(scope="module")
def honest_twin():
    result = _grade(HEAD + KERNEL, "twin")
    assert result.status == "passed", result.feedback_text()
    return result


@pytest.mark.parametrize("name", sorted(_include_attacks("x")))
def test_reading_a_file_at_compile_time_is_refused(name, secret_file, honest_twin):
    before, line = _include_attacks(str(secret_file))[name]
    result = _grade(HEAD + before + KERNEL, name)
    # The course folder is not even visible in the sandbox: the compiler finds nothing there, so the
    # trick fails to compile (said at its line) or, in a pass that never includes it, changes nothing.
    assert result.score <= honest_twin.score
    assert TOKEN not in result.feedback_text() + (result.log or "")
    if result.status != "passed":
        assert result.status == "compile_error" and result.score == 0, result.feedback_text()
        assert re.search(rf"(line |\.cu:){line}\b", result.message), result.message


@pytest.mark.parametrize("name", sorted(_include_attacks("x")))
def test_the_source_policy_refuses_a_file_the_compiler_could_read(name, secret_file):
    """Behind the sandbox, the policy itself: the same tricks on a file the compiler does see are refused."""
    from autograder.source_policy import SourceRefused, check_source

    before, line = _include_attacks(str(secret_file))[name]
    try:
        problem = check_source(HEAD + before + KERNEL)
    except SourceRefused as exc:
        problem = str(exc)
    assert re.match(rf"line {line}: ", problem), problem
    assert TOKEN not in problem and str(secret_file.parent) not in problem


@pytest.mark.parametrize("name", sorted(SANITIZER_ATTACKS))
def test_switching_the_out_of_bounds_checks_off_is_refused(name, honest_twin):
    before, attribute, line = SANITIZER_ATTACKS[name]
    result = _grade(HEAD + before + attribute + OOB_KERNEL, name)
    assert result.status == "compile_error", result.feedback_text()
    assert result.score == 0 <= honest_twin.score
    assert re.match(rf"line {line}: ", result.message), result.message


def test_the_out_of_bounds_twin_is_caught_without_the_trick(honest_twin):
    result = _grade(HEAD + OOB_KERNEL, "oob_twin")
    assert result.status != "passed" and result.correctness_score < honest_twin.correctness_score


def test_without_a_preprocessor_nothing_is_compiled(monkeypatch):
    from autograder.source_policy import SourceRefused, check_source

    monkeypatch.setenv("CXX", "/nonexistent/g++")
    with pytest.raises(SourceRefused, match="could not check the source"):
        check_source(KERNEL)
