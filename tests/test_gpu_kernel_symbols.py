"""On the GPU backend kernels are found in nvcc's image by their source names, whatever their linkage.

The source is compiled as written (no ``extern "C"``), so nvcc names each kernel by its C++ mangled
name; the runtime takes that name from clang's front end and finds it among the image's entry
functions, or, where nvcc names it otherwise (an anonymous namespace), demangles the entries, with or
without a demangler on the PATH (nvcc from PyPI ships no ``cu++filt``, and a GPU machine may have no
binutils ``c++filt``).  Needs only nvcc (no GPU): the image is compiled here and its symbols read.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import pytest

from kernels.runtime import gpu
from kernels.runtime.kernel_symbols import demangle, entry_functions, kernel_symbols, source_name
from kernels.runtime.signature import parse_kernels, template_instance

# Every way a kernel's name reaches the image: C++ linkage, extern "C", internal linkage, namespaces
# (named, nested, inline, anonymous), explicit instantiations (arguments written or deduced, and one the
# runtime also asks for), a template asked for by name only, and a __device__ function that shares a
# kernel's name and is kept out of line.
SOURCE = r"""
#pragma once
template <typename T>
__global__ void fill(T* x, T value, int n) { if (threadIdx.x < n) x[threadIdx.x] = value; }
template __global__ void fill<float>(float* x, float value, int n);
template __global__ void fill(double*, double, int);

template <typename T, int BLOCK = 64>
__global__ void scale(const T* x, T* y, T s, int n) { int i = blockIdx.x * BLOCK + threadIdx.x; if (i < n) y[i] = s * x[i]; }

__global__ void plain(float* x) { x[0] = 1.0f; }
extern "C" __global__ void c_linkage(float* x) { x[0] = 2.0f; }
extern "C" {
__global__ void c_block(int* x) { x[0] = 3; }
}
static __global__ void internal(float* x) { x[0] = 4.0f; }
namespace nn { namespace ops {
__global__ void nested(float* x) { x[0] = 5.0f; }
} }
namespace v2 { inline namespace abi {
__global__ void in_inline(float* x) { x[0] = 6.0f; }
} }
namespace {
__global__ void anonymous(float* x) { x[0] = 7.0f; }
}
__device__ __noinline__ float relu(float v) { return v > 0.0f ? v : 0.0f; }
__global__ void relu(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] = relu(x[threadIdx.x]); }
"""
INSTANCES = ["fill<float>", "fill<double>", "scale<float>", "scale<double, 128>"]
PLAIN = ["plain", "c_linkage", "c_block", "internal", "nested", "in_inline", "anonymous", "relu"]


def _signatures(source: str, instances: list[str]) -> dict:
    signatures = parse_kernels(source, "k.cu")
    for request in instances:
        instance = template_instance(source, request, "k.cu")
        signatures[instance.name] = instance
    return signatures


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> tuple[dict, bytes]:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    signatures = _signatures(SOURCE, INSTANCES)
    text, _, _ = gpu._image_source(SOURCE, "k.cu", signatures)
    folder = tmp_path_factory.mktemp("symbols")
    (folder / "k.cu").write_text(text)
    subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", "k.cubin", "k.cu"], cwd=folder, check=True, capture_output=True)
    return signatures, (folder / "k.cubin").read_bytes()


def test_every_kernel_is_found_by_its_source_name(image):
    signatures, cubin = image
    found = kernel_symbols(cubin, signatures.values())
    assert set(found) == set(PLAIN) | {"fill<float>", "fill<double>", "scale<float, 64>", "scale<double, 128>"}, found
    assert len(set(found.values())) == len(found)  # no two kernels share an entry
    assert found["c_linkage"] == "c_linkage" and found["c_block"] == "c_block"
    assert found["nested"] == "_ZN2nn3ops6nestedEPf" and found["fill<double>"] == "_Z4fillIdEvPT_S0_i"
    for name, symbol in found.items():
        assert source_name(symbol).replace(" ", "") == name.replace(" ", ""), (name, symbol)


def test_the_device_function_that_shares_a_kernels_name_is_not_an_entry(image):
    signatures, cubin = image
    entries = entry_functions(cubin)
    assert kernel_symbols(cubin, [signatures["relu"]])["relu"] == "_Z4reluPfi"
    assert not any(name.startswith("_Z4reluf") for name in entries)  # relu(float) is a function, not a kernel


@pytest.mark.parametrize("demangler", ["a demangler on the PATH", "no demangler on the PATH"])
def test_kernels_are_found_by_demangling_where_the_front_end_has_no_name(image, demangler, monkeypatch):
    """A signature made by hand carries no mangled name: the image's entries are demangled and matched by
    qualified name and template arguments (``64`` and nvcc's ``64u`` alike)."""
    signatures, cubin = image
    if demangler.startswith("no"):
        monkeypatch.setattr(shutil, "which", lambda _name: None)
    elif not (shutil.which("cu++filt") or shutil.which("c++filt")):
        pytest.skip("neither cu++filt nor c++filt is installed")
    unnamed = [dataclasses.replace(s, symbol="") for s in signatures.values()]
    assert kernel_symbols(cubin, unnamed) == kernel_symbols(cubin, signatures.values())


def test_a_kernel_the_image_does_not_hold_is_left_out(image):
    signatures, cubin = image
    missing = dataclasses.replace(signatures["plain"], name="absent", symbol="_Z6absentPf")
    assert "absent" not in kernel_symbols(cubin, [missing])


def test_a_kernel_the_loaded_module_lacks_is_named_in_one_sentence():
    from kernels.runtime import KernelNotFoundError
    from kernels.runtime.gpu_cooperative import DriverError

    class Loaded:  # the driver's answer for a name the image does not hold
        def get_function(self, name):
            raise DriverError(f"finding kernel {name}", "CUDA_ERROR_NOT_FOUND")

    module = gpu.GPUModule(None, Loaded(), "k.cu", {"plain": "_Z5plainPf"})
    with pytest.raises(KernelNotFoundError, match=r"^k.cu: nvcc's image has no kernel 'other' \(kernels found in it: plain\)$"):
        module.kernel_function("other")


def test_the_runtime_demangles_a_kernel_name():
    assert demangle("_Z5scaleIfLi128EEvPKT_PS0_S0_i") == "void scale<float, 128>(float const*, float*, float, int)"
    assert demangle("not_mangled") == "not_mangled"
    assert source_name("_ZN2nn3ops6nestedEPf") == "nested"
    assert source_name("_Z5scaleIfLi128EEvPKT_PS0_S0_i") == "scale<float, 128>"
    assert source_name("c_linkage") == "c_linkage"


# ---- on a GPU: each of them loads and runs by its source name (make test-gpu) ----------------------------------

LAUNCHES = {  # kernel -> (arguments after the output array, the output's dtype, what it holds after one thread ran)
    "plain": ((), "float32", 1.0), "c_linkage": ((), "float32", 2.0), "c_block": ((), "int32", 3),
    "internal": ((), "float32", 4.0), "nested": ((), "float32", 5.0), "in_inline": ((), "float32", 6.0),
    "anonymous": ((), "float32", 7.0), "fill<float>": ((8.5, 1), "float32", 8.5), "fill<double>": ((9.5, 1), "float64", 9.5),
}


@pytest.fixture(scope="module")
def gpu_module():
    from kernels.runtime import compile_source, selection

    backend = selection.current_backend()  # the session's: a new one would leave its fixtures' backend behind
    assert backend.name == "gpu", "make test-gpu runs with DLK_BACKEND=gpu"
    return compile_source(SOURCE, "linkage.cu", backend=backend)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(LAUNCHES))
def test_every_kind_of_kernel_runs_on_the_gpu_by_its_source_name(gpu_module, name):
    import numpy as np

    arguments, dtype, expected = LAUNCHES[name]
    out = np.zeros(1, dtype)
    gpu_module.function(name)(out, *arguments, grid=1, block=1)
    assert out[0] == expected


@pytest.mark.gpu
def test_template_instances_and_the_kernel_sharing_a_device_functions_name_run_on_the_gpu(gpu_module):
    import numpy as np

    x = np.linspace(-1, 1, 100).astype(np.float32)
    y = np.zeros_like(x)
    gpu_module.function("scale<float>")(x, y, 3.0, 100, grid=2, block=64)
    np.testing.assert_allclose(y, 3 * x)
    xd, yd = x.astype(np.float64), np.zeros(100)
    gpu_module.function("scale<double, 128>")(xd, yd, -2.0, 100, grid=1, block=128)
    np.testing.assert_allclose(yd, -2 * xd)
    r = x.copy()
    gpu_module.function("relu")(r, 32, grid=1, block=32)
    np.testing.assert_array_equal(r[:32], np.maximum(x[:32], 0))
