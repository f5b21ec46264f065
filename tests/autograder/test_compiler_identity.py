"""One compiler identity: device code cannot tell the CPU emulator from nvcc by its macros.

Each attack is a kernel that writes the right answer only where a macro says it is not
nvcc (``#ifndef __NVCC__`` and its cousins) and nothing useful where it is: graded without
a GPU it would earn correctness points that a GPU grading takes away.  Each runs beside its
honest twin, the branch nvcc takes written out: on either backend the attack must compute
exactly what its twin computes.  The whole graded cycle of such a notebook (``compiler_tell``
in ``submissions/``) is in test_nbgrader_cycle.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from autograder.feedback import PROVISIONAL
from autograder.result import ExerciseResult
from autograder.source_policy import CONFIGURATIONS, check_source
from kernels.runtime import compile_source
from kernels.runtime.emulator.build import nvcc_defines

pytestmark = pytest.mark.backend

#: (test, what it asks): each selects the "emulator" branch when true.
TELLS = {
    "no_nvcc": "!defined(__NVCC__)",
    "no_cudacc": "!defined(__CUDACC__)",
    "host_pass": "!defined(__CUDA_ARCH__)",
    "old_arch": "defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900",
    "no_arch_list": "!defined(__CUDA_ARCH_LIST__)",
    "no_toolkit_version": "!defined(__CUDACC_VER_MAJOR__) || __CUDACC_VER_MAJOR__ < 12",
    # what the host compiler predefines for the emulator's own options (nvcc's device pass preprocesses without
    # them: no optimisation, no sanitizer, no threads)
    "sanitizer": "defined(__SANITIZE_ADDRESS__)",
    "optimised": "defined(__OPTIMIZE__)",
    "inlining": "!defined(__NO_INLINE__)",
    "threads": "defined(_REENTRANT)",
}


def _kernel(name: str, test: str | None) -> str:
    body = "y[i] = 2.0f * x[i];" if test is None else f"\n#if {test}\n y[i] = 2.0f * x[i];\n#else\n y[i] = 0.0f;\n#endif\n"
    return (f"__global__ void {name}(const float* x, float* y, int n) {{\n"
            f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) {{ {body} }}\n}}\n")


@pytest.fixture(scope="module")
def module(backend):
    source = "".join(_kernel(f"tell_{name}", test) for name, test in TELLS.items())
    source += _kernel("as_nvcc_compiles_it", "0")  # the honest twin: the branch nvcc takes
    return compile_source(source, "tells.cu", backend=backend)


def _run(module, name: str) -> np.ndarray:
    x = np.arange(1, 65, dtype=np.float32)
    y = np.full_like(x, np.nan)
    module.function(name)(x, y, np.int32(x.size), grid=(1, 1, 1), block=(64, 1, 1))
    return y


@pytest.mark.parametrize("name", sorted(TELLS))
def test_a_kernel_that_asks_which_compiler_gets_nvcc_s_answer(module, name):
    twin = _run(module, "as_nvcc_compiles_it")
    assert np.array_equal(twin, np.zeros(64, np.float32))
    assert np.array_equal(_run(module, f"tell_{name}"), twin), f"the test '{TELLS[name]}' tells the backends apart"


@pytest.mark.parametrize("test", ["defined(DLK_EMULATOR)", "CAT(DLK_, EMULATOR)"], ids=["named", "pasted"])
def test_a_kernel_that_asks_for_the_emulator_s_own_macro_is_refused(test):
    """The emulator has one macro of its own, for the book's headers (PTX it cannot run, written as shuffles):
    a graded kernel whose text depends on it, even through a name pasted by a macro, is refused on both backends;
    the twin, the same kernel without the test, is not."""
    prefix = "#define CAT(a, b) a##b\n"
    attack = prefix + _kernel("fill", test)
    assert "compiles differently where DLK_EMULATOR is defined" in check_source(attack)
    assert "line 6" in check_source(attack)  # the student's line the test guards
    assert check_source(prefix + _kernel("fill", None)) == ""


#: Asking whether a header exists: the emulator's folder holds "prelude.h", the toolkit's <cuda/std/cstdint>.
HEADER_QUESTIONS = {
    "by_name": ('', '__has_include("prelude.h")'),
    "next": ('', '__has_include_next(<cuda/std/cstdint>)'),
    "through_a_macro": ('#define EXISTS __has_include\n', 'EXISTS(<cuda/std/cstdint>)'),
    "pasted": ('#define CAT(a, b) a##b\n', 'CAT(__has_, include)("prelude.h")'),
    "spliced": ('', '__has_\\\ninclude("prelude.h")'),
}


@pytest.mark.parametrize("name", sorted(HEADER_QUESTIONS))
def test_a_kernel_that_asks_which_headers_exist_is_refused(name):
    """Each compiler answers ``__has_include`` from its own folders: a kernel that asks is one kernel on the
    emulator and another on a GPU, however it spells the question; the twin (the same kernel with a macro
    pasted, and no question) is compiled."""
    prefix, test = HEADER_QUESTIONS[name]
    problem = check_source(prefix + _kernel("fill", test))
    assert "asks whether a header exists" in problem, problem
    assert problem.startswith("line "), problem
    assert check_source("#define CAT(a, b) a##b\n" + _kernel("CAT(fi, ll)", None)) == ""


def test_the_source_policy_checks_under_the_same_macros_the_emulator_defines():
    assert CONFIGURATIONS[1] == nvcc_defines()
    names = {d[2:].split("=")[0] for d in nvcc_defines()}
    assert {"__NVCC__", "__CUDACC__", "__CUDA_ARCH__", "__CUDACC_VER_MAJOR__"} <= names
    assert dict(d[2:].split("=") for d in nvcc_defines())["__CUDA_ARCH__"] == "900"  # the course's H100/H200


def test_correctness_graded_without_a_gpu_says_it_is_provisional():
    """The emulator's verdict stands until a GPU grading confirms it (the grading record grades it again on the
    first run with a GPU: test_grading_record.py); the correctness text every export and feedback page shows
    says so."""
    graded = ExerciseResult(exercise="saxpy", status="passed", correctness_score=6, correctness_max=6,
                            backend="cpu", device="CPU emulator", provisional=True)
    assert PROVISIONAL in graded.feedback_text()
    assert PROVISIONAL not in ExerciseResult(exercise="saxpy", status="passed", backend="gpu").feedback_text()
    assert ExerciseResult.from_dict(graded.to_dict()).provisional
