"""The source check of an exercise that needs 64-bit indices (autograder/exercises/_index_width.py).

Each refused form (an array indexed with an int, an offset of an int added to a pointer, a 32-bit product widened
after the fact) has an honest twin in 64 bits that passes; what is not an index of the kernel's arrays (a literal,
a derived pointer, a __device__ helper, a loop counter) passes too.  The exercise's planted bugs
(tests/planted_bugs/capsule_predict/int_index.edit, product_widened_after_overflow.edit) grade the same through the
grader.
"""

from __future__ import annotations

import pytest

from autograder.exercises import get_exercise
from autograder.exercises._index_width import narrow_indices

HEAD = "__global__ void k(const float* x, float* y, int n, long long m)\n{\n"


def findings(body: str) -> list[tuple[int, str, str]]:
    return narrow_indices(HEAD + body + "\n}\n", "k")


@pytest.mark.parametrize("narrow, wide", [
    ("int i = threadIdx.x; y[i] = x[0];", "long long i = threadIdx.x; y[i] = x[0];"),
    ("int i = threadIdx.x; y[0] = *(x + i);", "size_t i = threadIdx.x; y[0] = *(x + i);"),
    ("int i = n - 1; const float* p = x + i; y[0] = p[0];", "long long i = n - 1; const float* p = x + i; y[0] = p[0];"),
    ("int i = n; y += i; y[0] = 1.0f;", "long long i = n; y += i; y[0] = 1.0f;"),
    ("long long i = blockIdx.x * blockDim.x + threadIdx.x; y[i] = 0.0f;",
     "long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; y[i] = 0.0f;"),
    ("for (long long i = threadIdx.x; i < m; i += gridDim.x * blockDim.x) y[i] = 0.0f;",
     "for (long long i = threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x) y[i] = 0.0f;"),
    ("int i = threadIdx.x; y[0] = __ldg(x + i);", "long long i = threadIdx.x; y[0] = __ldg(x + i);"),
])
def test_a_32_bit_index_is_found_and_its_64_bit_twin_passes(narrow, wide):
    found = findings(narrow)
    assert found and found[0][0] == 3, found  # the body's first line is the source's third
    assert findings(wide) == []


def test_what_is_no_index_of_the_kernels_arrays_passes():
    body = """
    y[0] = x[1];                                   // literal indices
    const float* row = x + (long long)n * 4;       // a pointer derived in 64 bits ...
    float s = 0.0f;
    for (int k = 0; k < n; ++k) s += row[k];       // ... and indexed from there with a small int
    int lanes = 4 * 8;                             // a product of literals
    long long widened = n;                         // widened, but no product
    y[widened] = s + lanes;
    """
    assert findings(body) == []


def test_a_device_helper_is_not_looked_into_and_another_kernel_is_not_checked():
    source = ("__device__ float first(const float* p, int i) { return p[i]; }\n"
              "__global__ void other(float* y, int i) { y[i] = 0.0f; }\n" + HEAD + "y[0] = first(x, n);\n}\n")
    assert narrow_indices(source, "k") == []
    assert narrow_indices(source, "missing") == []


def test_the_capsule_prediction_says_which_line_and_how_to_fix_it():
    check = get_exercise("capsule_predict").source_check
    source = ("__global__ void capsule_predict(const float* u, const float* W, float* u_hat, int batch, int in_caps,\n"
              "    int in_dim, int out_caps, int out_dim, int types)\n{\n"
              "    int e = blockIdx.x * blockDim.x + threadIdx.x;\n    u_hat[e] = u[e] * W[0];\n}\n")
    message = check(source, "capsule_predict")
    assert "line 5 indexes u_hat with a 32-bit int (u_hat [ e ])" in message and "1 more place" in message
    assert "2^31" in message and "long long" in message
    assert check(source.replace("int e =", "long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; //"),
                 "capsule_predict") == ""
