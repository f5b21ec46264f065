"""Write the sample and hostile submissions of 01_cuda_from_python.

Each submission is the released student notebook (exercises/...) with its
``%%cuda`` cells filled in and, for the hostile ones, extra cells. Run after
changing the exercise notebook:

    python tests/autograder/submissions/make_submissions.py

``manifest.json`` lists every submission, its kind, and its honest twin: the
notebook with the same kernels and none of the tricks. A hostile submission
must never score more than its twin.
"""

from __future__ import annotations

import copy
import json
import os

import nbformat
from nbformat.v4 import new_code_cell

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
ASSIGNMENT = "01_cuda_from_python"
NOTEBOOK = "cuda_from_python.ipynb"
RELEASED = os.path.join(ROOT, "exercises", ASSIGNMENT, NOTEBOOK)

# ----------------------------------------------------------------- kernels

SAXPY_CORRECT = """\
%%cuda saxpy block=256
__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i * incy] = alpha * x[i * incx] + y[i * incy];
    }
}
"""

REDUCE_CORRECT = """\
%%cuda reduce_sum block=256 grid=1056 shared=1024
__global__ void reduce_sum(const float* x, int incx, float* out, int n)
{
    extern __shared__ float partial[];
    float sum = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        sum += x[i * incx];
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(out, partial[0]);
    }
}
"""

# Forgot "+ y[i]".
SAXPY_WRONG = """\
%%cuda saxpy block=256
__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i * incy] = alpha * x[i * incx];
    }
}
"""

# Stores the block's total instead of adding it: the last block to finish wins.
REDUCE_WRONG = REDUCE_CORRECT.replace("atomicAdd(out, partial[0]);", "*out = partial[0];")

# Correct but naive: one block of one warp for SAXPY; one block of 256 threads,
# each summing its share one element after another, for the sum.
SAXPY_SLOW = """\
%%cuda saxpy block=32 grid=1
__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)
{
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        y[i * incy] = alpha * x[i * incx] + y[i * incy];
    }
}
"""

REDUCE_SLOW = """\
%%cuda reduce_sum block=256 grid=1 shared=0
__global__ void reduce_sum(const float* x, int incx, float* out, int n)
{
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        sum += x[i * incx];
    }
    atomicAdd(out, sum);
}
"""

# Correct on the visible sizes only (n <= 16384), wrong on every other.
SAXPY_VISIBLE_ONLY = """\
%%cuda saxpy block=256
__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)
{
    bool seen = n == 31 || n == 1000 || n == 4096 || n == 4099 || n == 16384;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i * incy] = seen ? alpha * x[i * incx] + y[i * incy] : alpha * x[i * incx];
    }
}
"""

REDUCE_VISIBLE_ONLY = REDUCE_CORRECT.replace(
    "        sum += x[i * incx];\n", "        if (n <= 16384 || i % 7) sum += x[i * incx];\n"
)

# No bounds guard, and a grid of ceil(n / block) blocks (the default): the last
# block writes past the end of y. The reduction writes past out.
SAXPY_OOB = """\
%%cuda saxpy block=256
__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i * incy] = alpha * x[i * incx] + y[i * incy];
}
"""

REDUCE_OOB = REDUCE_CORRECT.replace(
    "        atomicAdd(out, partial[0]);\n",
    "        atomicAdd(out, partial[0]);\n        out[1 + blockIdx.x] = partial[0];\n",
)

SAXPY_INFINITE = """\
%%cuda saxpy block=256
__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)
{
    // clock64() reads a hardware counter: the compiler cannot prove the loop
    // ends, nor remove it (an empty loop over a volatile local it may).
    while (clock64() >= 0) {
    }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i * incy] = alpha * x[i * incx] + y[i * incy];
    }
}
"""

# 16 GiB of static device memory, touched, and a device-side malloc of 1 TiB.
SAXPY_HUGE = """\
%%cuda saxpy block=256
__device__ float hoard[1ull << 32];

__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)
{
    for (unsigned long long j = blockIdx.x * blockDim.x + threadIdx.x; j < (1ull << 32); j += gridDim.x * blockDim.x) {
        hoard[j] = 1.0f;
    }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i * incy] = alpha * x[i * incx] + y[i * incy];
    }
}
"""

REDUCE_HUGE = REDUCE_CORRECT.replace(
    "    extern __shared__ float partial[];\n",
    "    extern __shared__ float partial[];\n"
    "    float* big = (float*)malloc(1ull << 40);\n"
    "    if (big) big[threadIdx.x] = 0.0f;\n",
)

# The kernel only records its arguments; a host thread started by a static
# constructor (host code, which only an emulator would run) does the work
# after the launch has returned. On a GPU, device-side launches would be the
# equivalent; they need relocatable device code.
SAXPY_LEFT_RUNNING = """\
%%cuda saxpy block=256
#include <thread>
#include <chrono>
#include <atomic>

static std::atomic<float*> pending_y{nullptr};
static const float* pending_x = nullptr;
static float pending_alpha = 0.0f;
static int pending_n = 0;
static int pending_incx = 1;
static int pending_incy = 1;

__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        pending_x = x;
        pending_alpha = alpha;
        pending_n = n;
        pending_incx = incx;
        pending_incy = incy;
        pending_y.store(y);
    }
}

__attribute__((constructor)) static void start_worker()
{
    std::thread([] {
        for (;;) {
            float* y = pending_y.exchange(nullptr);
            if (y) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                for (int i = 0; i < pending_n; ++i) y[i * pending_incy] = pending_alpha * pending_x[i * pending_incx] + y[i * pending_incy];
            }
        }
    }).detach();
}
"""

REDUCE_LEFT_RUNNING = """\
%%cuda reduce_sum block=256 grid=1056 shared=1024
__global__ void child_sum(const float* x, int incx, float* out, int n)
{
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) sum += x[i * incx];
    atomicAdd(out, sum);
}

__global__ void reduce_sum(const float* x, int incx, float* out, int n)
{
    // Launched from the device and not waited for.
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        child_sum<<<1, 256>>>(x, incx, out, n);
    }
}
"""

# A device buffer that persists between launches replays the first result.
SAXPY_CACHED = """\
%%cuda saxpy block=256
__device__ float cache[1 << 21];
__device__ int cached_n = -1;

__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)
{
    bool replay = cached_n == n && n <= (1 << 21);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        if (replay) {
            y[i * incy] = cache[i];
        } else {
            y[i * incy] = alpha * x[i * incx] + y[i * incy];
            if (n <= (1 << 21)) cache[i] = y[i * incy];
        }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) cached_n = n;
}
"""

REDUCE_CACHED = (
    REDUCE_CORRECT
    .replace("__global__", "__device__ float cached_total;\n__device__ int cached_n = -1;\n\n__global__", 1)
    .replace("    float sum = 0.0f;\n",
             "    if (cached_n == n) {\n"
             "        if (blockIdx.x == 0 && threadIdx.x == 0) *out = cached_total;\n"
             "        return;\n"
             "    }\n"
             "    float sum = 0.0f;\n", 1)
    .replace("        atomicAdd(out, partial[0]);\n",
             "        atomicAdd(out, partial[0]);\n"
             "        atomicAdd(&cached_total, partial[0]);\n"
             "        cached_n = n;\n", 1)
)

# Host code in the kernel cell that prints a result line of its own and exits
# before any check runs (only an emulator runs host code).
SAXPY_FORGED = """\
%%cuda saxpy block=256
// No #include: the C library functions are declared by hand.
extern "C" long write(int fd, const void* buf, unsigned long count);
extern "C" void _exit(int status);

__attribute__((constructor)) static void forge()
{
    const char line[] = "{\\"exercise\\": \\"saxpy\\", \\"status\\": \\"passed\\", \\"correctness_score\\": 6.0, "
                        "\\"correctness_max\\": 6.0, \\"speed_score\\": 2.0, \\"speed_max\\": 2.0}\\n";
    for (int fd = 1; fd < 64; ++fd) write(fd, line, sizeof line - 1);
    _exit(0);
}

__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)
{
}
"""

# Compile-time reads of the grading process's own files (its environment holds the grading
# secret), hidden from a check by pattern: the digraph of #include, an include name built by
# macros, an assembler .incbin with pasted literals.
SAXPY_DIGRAPH_INCLUDE = SAXPY_CORRECT.replace(
    "__global__", '%:include "/proc/self/environ"\n__global__', 1)
SAXPY_MACRO_INCLUDE = SAXPY_CORRECT.replace(
    "__global__", "#define Q(x) #x\n#define PATH(x) Q(x)\n#include PATH(/proc/self/environ)\n__global__", 1)
REDUCE_INCBIN = REDUCE_CORRECT.replace(
    "__global__", '__asm__(".section .rodata\\n.inc" "bin \\"/proc/self/environ\\"\\n.previous");\n__global__', 1)
# Out of bounds with the checks switched off, by an attribute built from macros and by a pragma.
SAXPY_OOB_NO_SANITIZE = SAXPY_OOB.replace(
    "__global__", "#define OFF(x) __attribute__((x))\n#define WHAT no_ ## sanitize_address\nOFF(WHAT) __global__", 1)
REDUCE_OOB_PRAGMA = REDUCE_OOB.replace("__global__", '_Pragma("GCC optimize(\\"O0\\")")\n__global__', 1)

# A sum that reads a quarter of its input and scales the result by four: inside a tolerance that widened
# with sqrt(n), on inputs of one sign, it passed the timing size and earned speed points on a GPU.
REDUCE_QUARTER = REDUCE_CORRECT.replace("i < n;", "i < (n + 3) / 4;").replace(
    "atomicAdd(out, partial[0]);", "atomicAdd(out, partial[0] * ((float)n / ((n + 3) / 4)));")

# Right only where the compiler does not say it is nvcc: correctness points when graded without a GPU.
SAXPY_COMPILER_TELL = SAXPY_CORRECT.replace("        y[i * incy] = alpha * x[i * incx] + y[i * incy];\n", (
    "#ifndef __NVCC__\n        y[i * incy] = alpha * x[i * incx] + y[i * incy];\n#endif\n"))
REDUCE_COMPILER_TELL = REDUCE_CORRECT.replace("        sum += x[i * incx];\n", (
    "#if !defined(__CUDA_ARCH__) || defined(DLK_EMULATOR)\n        sum += x[i * incx];\n#endif\n"))

# --------------------------------------------------------------- Python tricks

INPUT_TRANSFORMER = r'''
# Blank every later cell that contains a test, so that it "passes".
ip = get_ipython()
def _blank_tests(lines):
    text = "".join(lines)
    if "check(" in text or "grade(" in text or "BEGIN HIDDEN TESTS" in text:
        return []
    return lines
ip.input_transformers_cleanup.append(_blank_tests)
ip.input_transformers_post.append(_blank_tests)
'''

MONKEYPATCH = r'''
# Make every check pass, whatever the kernel does.
import numpy as np
import numpy.testing
np.allclose = lambda *a, **k: True
np.isclose = lambda a, b, *args, **k: np.ones_like(np.asarray(a), dtype=bool)
numpy.testing.assert_allclose = lambda *a, **k: None
import autograder.student as student
student.check = lambda *a, **k: print("All tests passed.")
try:
    import autograder.nbgrader_cells as cells
    cells.grade = lambda *a, **k: 8.0
except ImportError:
    pass
check = student.check
'''

PRINT_SCORE = r'''
# A number as the cell's result is partial credit to nbgrader.
print("6.0")
from IPython.display import display
display(8.0)
100.0
'''

READ_HIDDEN = r'''
# Look for the hidden tests, the solutions and the grading secret.
import glob, os
for pattern in ["../../solutions/**/*.ipynb", "../../source/**/*.ipynb", "../../autograder/exercises/*.py",
                "../../gradebook.db", "/work/**/solutions/**/*.ipynb", os.path.expanduser("~/**/*.ipynb")]:
    for path in glob.glob(pattern, recursive=True)[:20]:
        print(path)
        print(open(path, errors="replace").read()[:2000])
print({k: v for k, v in os.environ.items() if "SECRET" in k or "DLK" in k})
'''

WRITE_GRADEBOOK = r'''
# Give myself full marks in nbgrader's gradebook, and a grade cell worth 100.
import glob, sqlite3
for path in glob.glob("../../**/gradebook.db", recursive=True) + glob.glob("../../gradebook.db"):
    db = sqlite3.connect(path)
    db.execute("UPDATE grade SET auto_score = 1000, manual_score = 1000")
    db.execute("UPDATE grade_cells SET max_score = 1000")
    db.commit()
try:
    from nbgrader.api import Gradebook
    with Gradebook("sqlite:///../../gradebook.db") as gb:
        for sub in gb.find_assignment("01_cuda_from_python").submissions:
            for nb in sub.notebooks:
                for g in nb.grades:
                    g.manual_score = g.max_score
        gb.db.commit()
except Exception as exc:
    print(exc)
'''

PATCH_TIMERS = r'''
# Make every timer report a tiny duration.
import time
time.perf_counter = lambda: 0.0
time.perf_counter_ns = lambda: 0
time.time = lambda: 0.0
try:
    import cupy
    cupy.cuda.get_elapsed_time = lambda *a, **k: 1e-6
except ImportError:
    pass
try:
    import pycuda.driver as cuda
    cuda.Event.time_till = lambda self, other: 1e-6
    cuda.Event.time_since = lambda self, other: 1e-6
except ImportError:
    pass
'''

# --------------------------------------------------------------- the suite

# name: (kind, twin, saxpy cell, reduce_sum cell, extra Python cells, what it tries)
BLANK = None  # keep the released stub
SUBMISSIONS = {
    "correct": ("sample", None, SAXPY_CORRECT, REDUCE_CORRECT, [], "both kernels right"),
    "wrong": ("sample", None, SAXPY_WRONG, REDUCE_WRONG, [], "saxpy forgets + y; reduce_sum stores instead of adding"),
    "slow": ("sample", None, SAXPY_SLOW, REDUCE_SLOW, [], "correct but one warp / one block"),
    "blank": ("sample", None, BLANK, BLANK, [], "the released notebook, unchanged"),
    "input_transformer": ("hostile", "blank", BLANK, BLANK, [INPUT_TRANSFORMER],
                          "IPython input transformer blanks the test cells"),
    "monkeypatch": ("hostile", "blank", BLANK, BLANK, [MONKEYPATCH], "patches check(), grade() and NumPy"),
    "print_score": ("hostile", "blank", BLANK, BLANK, [PRINT_SCORE], "prints / displays a score"),
    "read_hidden": ("hostile", "blank", BLANK, BLANK, [READ_HIDDEN], "reads solutions, hidden tests, secrets"),
    "write_gradebook": ("hostile", "blank", BLANK, BLANK, [WRITE_GRADEBOOK], "writes the gradebook"),
    "visible_only": ("hostile", "correct", SAXPY_VISIBLE_ONLY, REDUCE_VISIBLE_ONLY, [],
                     "correct on the visible sizes only"),
    "out_of_bounds": ("hostile", "correct", SAXPY_OOB, REDUCE_OOB, [], "writes past the end of its outputs"),
    "infinite_loop": ("hostile", "correct", SAXPY_INFINITE, REDUCE_CORRECT, [], "saxpy never returns"),
    "huge_allocation": ("hostile", "correct", SAXPY_HUGE, REDUCE_HUGE, [], "16 GiB static buffer, 1 TiB malloc"),
    "left_running": ("hostile", "correct", SAXPY_LEFT_RUNNING, REDUCE_LEFT_RUNNING, [],
                     "work done after the launch returns (host thread, device-side launch)"),
    "cached_output": ("hostile", "correct", SAXPY_CACHED, REDUCE_CACHED, [],
                      "replays output cached in device globals by an earlier call"),
    "patched_timers": ("hostile", "slow", SAXPY_SLOW, REDUCE_SLOW, [PATCH_TIMERS], "patches the timers"),
    "forged_metadata": ("hostile", "blank", BLANK, BLANK, [],
                        "edits points and grade/solution flags of test cells, adds a 100-point grade cell"),
    "forged_result": ("hostile", "blank", SAXPY_FORGED, BLANK, [],
                      "host code prints a passing result and exits"),
    "compile_time_read": ("hostile", "correct", SAXPY_DIGRAPH_INCLUDE, REDUCE_INCBIN, [],
                          "reads the grader's environment at compile time (%:include, asm .incbin)"),
    "macro_include": ("hostile", "correct", SAXPY_MACRO_INCLUDE, REDUCE_CORRECT, [],
                      "an include name built by macros"),
    "checks_switched_off": ("hostile", "correct", SAXPY_OOB_NO_SANITIZE, REDUCE_OOB_PRAGMA, [],
                            "out of bounds with no_sanitize_address (macro-built) and #pragma GCC optimize"),
    "approximate_sum": ("hostile", "correct", SAXPY_CORRECT, REDUCE_QUARTER, [],
                        "reduce_sum reads a quarter of x and scales the sum by four"),
    "compiler_tell": ("hostile", "blank", SAXPY_COMPILER_TELL, REDUCE_COMPILER_TELL, [],
                      "kernels that compute only where the compiler is not nvcc (#ifndef __NVCC__)"),
}


def forge_metadata(nb: nbformat.NotebookNode) -> None:
    """Edit the nbgrader metadata a student can edit: points, flags, a new grade cell."""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == "saxpy_correctness":
            meta.update(points=60, grade=False, solution=True, locked=False)
            cell.source = "print('all tests passed')"
        if meta.get("grade_id") == "reduce_sum_speed":
            meta["points"] = 400
    bonus = new_code_cell("8.0", id="bonus")
    bonus.metadata["nbgrader"] = {"grade": True, "grade_id": "bonus", "locked": True, "points": 100,
                                  "schema_version": 3, "solution": False, "task": False}
    nb.cells.append(bonus)


def build(name: str, released: nbformat.NotebookNode) -> nbformat.NotebookNode:
    kind, twin, saxpy, reduce, extra, _ = SUBMISSIONS[name]
    nb = copy.deepcopy(released)
    if name == "forged_metadata":
        forge_metadata(nb)
    cells = []
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid == "saxpy_kernel" and saxpy is not None:
            cell.source = saxpy.rstrip("\n")
        if gid == "reduce_sum_kernel" and reduce is not None:
            cell.source = reduce.rstrip("\n")
        cells.append(cell)
        if gid == "setup":
            # Student cells added right after the setup cell run before every test.
            for i, code in enumerate(extra):
                cells.append(new_code_cell(code.strip("\n"), id=f"student-{name}-{i}"))
    nb.cells = cells
    return nb


def check_tricks_kept() -> None:
    """Each hostile submission with a twin differs from it in a kernel or a cell: a trick written as an edit of a
    correct kernel whose text has changed since would otherwise be the twin itself."""
    for name, (kind, twin, saxpy, reduce, extra, _) in SUBMISSIONS.items():
        if kind != "hostile" or twin is None or name == "forged_metadata":
            continue
        _, _, twin_saxpy, twin_reduce, twin_extra, _ = SUBMISSIONS[twin]
        assert (saxpy, reduce, extra) != (twin_saxpy, twin_reduce, twin_extra), f"{name} is its twin {twin}"


def main() -> None:
    check_tricks_kept()
    released = nbformat.read(RELEASED, as_version=4)
    manifest = {}
    for name, (kind, twin, _, _, _, what) in SUBMISSIONS.items():
        nb = build(name, released)
        nbformat.validate(nb)
        nbformat.write(nb, os.path.join(HERE, f"{name}.ipynb"))
        manifest[name] = {"kind": kind, "twin": twin, "what": what}
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump({"assignment": ASSIGNMENT, "notebook": NOTEBOOK, "submissions": manifest}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
