"""The runtime's front end: signature parsing, argument and launch checks, copies.

Everything here runs without a GPU or the emulator: a fake backend records
launches instead of running them, so these tests also show that bad
arguments are refused *before* anything reaches a device.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kernels.runtime import (
    KernelArgumentError,
    KernelCompileError,
    KernelNotFoundError,
    LaunchConfigError,
    compile_source,
    parse_kernels,
)
from kernels.runtime import selection
from kernels.runtime.backend import Backend, CompiledModule, DeviceBuffer, DeviceLimits
from kernels.runtime.signature import template_instance


class FakeBuffer(DeviceBuffer):
    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.data = np.zeros(self.shape, self.dtype)

    def get(self):
        return self.data.copy()

    def set(self, host):
        self.data[...] = host


class FakeModule(CompiledModule):
    def __init__(self, backend, on_launch):
        self.backend = backend
        self.on_launch = on_launch

    def launch(self, signature, args, grid, block, shared_bytes):
        self.backend.launches.append((signature.name, list(args), grid, block, shared_bytes))
        if self.on_launch:
            self.on_launch(signature, args)

    def set_global(self, name, host):
        self.backend.globals[name] = host.copy()

    def get_global(self, name, dtype, count):
        return self.backend.globals[name].view(dtype)[:count]


class FakeBackend(Backend):
    """Compiles nothing; records each launch; ``on_launch`` may write to the buffers."""

    name = "fake"

    def __init__(self, on_launch=None, multiprocessors=2):
        self.launches = []
        self.globals = {}
        self.on_launch = on_launch
        self.multiprocessors = multiprocessors

    def compile(self, source, source_name, options, include_dirs, signatures):
        return FakeModule(self, self.on_launch)

    def empty(self, shape, dtype):
        return FakeBuffer(shape, dtype)

    def synchronize(self):
        pass

    def limits(self):
        return DeviceLimits(max_shared_bytes_optin=100 * 1024)

    def describe(self):
        return {"backend": "fake", "name": "fake device", "multiprocessors": self.multiprocessors}


SOURCE = r"""
#define real float
__global__ void scale(const float* __restrict__ x, float* y, int n, float alpha) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i];
}
__global__ void __launch_bounds__(256) vec4(const float4* src, float4* dst, int n4) {}
__global__ void with_macro(real* data, unsigned int count, int64_t big) {}
"""


@pytest.fixture
def fake():
    return FakeBackend()


@pytest.fixture
def module(fake):
    return compile_source(SOURCE, "frontend.cu", backend=fake)


def launch_scale(module, *args, grid=1, block=32, **kw):
    module.function("scale")(*args, grid=grid, block=block, **kw)


# --- argument checks: each refused before any launch --------------------------------------


def test_wrong_argument_count_names_the_declaration(module, fake):
    x = np.ones(8, np.float32)
    with pytest.raises(KernelArgumentError, match=r"takes 4 arguments, 3 given(.|\n)*scale\(const float\* x"):
        launch_scale(module, x, x.copy(), 8)
    assert fake.launches == []


def test_wrong_dtype_suggests_a_conversion(module, fake):
    with pytest.raises(KernelArgumentError, match=r"float32 data, got float64.*astype\(np.float32\)"):
        launch_scale(module, np.ones(8), np.ones(8, np.float32), 8, 2.0)
    assert fake.launches == []


def test_non_contiguous_array_is_refused(module, fake):
    x = np.ones((8, 8), np.float32).T
    with pytest.raises(KernelArgumentError, match="not C-contiguous"):
        launch_scale(module, x, np.ones(64, np.float32), 64, 2.0)
    assert fake.launches == []


def test_read_only_array_for_an_output_is_refused(module):
    y = np.ones(8, np.float32)
    y.setflags(write=False)
    with pytest.raises(KernelArgumentError, match="read-only"):
        launch_scale(module, np.ones(8, np.float32), y, 8, 2.0)


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_integer_scalar_out_of_range(module, fake, value):
    x = np.ones(8, np.float32)
    with pytest.raises(KernelArgumentError, match=r"does not fit parameter 'int n'"):
        launch_scale(module, x, x.copy(), value, 2.0)
    assert fake.launches == []


def test_fractional_value_for_integer_parameter(module):
    x = np.ones(8, np.float32)
    with pytest.raises(KernelArgumentError, match="is an integer"):
        launch_scale(module, x, x.copy(), 8.5, 2.0)


def test_array_for_a_scalar_parameter(module):
    x = np.ones(8, np.float32)
    with pytest.raises(KernelArgumentError, match="is a scalar, but an array was passed"):
        launch_scale(module, x, x.copy(), x, 2.0)


def test_non_array_for_a_pointer_parameter(module):
    with pytest.raises(KernelArgumentError, match="is a pointer"):
        launch_scale(module, [1.0, 2.0], np.ones(2, np.float32), 2, 2.0)


def test_vector_type_needs_a_multiple_of_its_lanes(module, fake):
    with pytest.raises(KernelArgumentError, match="4 values per element"):
        module.function("vec4")(np.ones(6, np.float32), np.ones(8, np.float32), 2, grid=1, block=32)
    assert fake.launches == []


def test_device_buffer_of_the_wrong_dtype(module, fake):
    bad = fake.empty((8,), np.int32)
    with pytest.raises(KernelArgumentError, match="float32 data, got int32"):
        launch_scale(module, bad, np.ones(8, np.float32), 8, 2.0)


def test_unknown_kernel_lists_the_defined_ones(module):
    with pytest.raises(KernelNotFoundError, match="scale, vec4, with_macro"):
        module.function("scal")


# --- launch configuration checks -----------------------------------------------------------


@pytest.mark.parametrize(
    "grid, block, shared, message",
    [
        (1, 1025, 0, "1025 threads; a block holds at most 1024"),
        (1, (32, 32, 2), 0, "2048 threads"),
        (1, (1, 1, 65), 0, r"block.z = 65 is over the limit of 64"),
        (0, 32, 0, r"grid.x = 0: every dimension must be at least 1"),
        ((1, 70000), 32, 0, r"grid.y = 70000 is over the limit of 65535"),
        (2.0, 32, 0, "grid must be an int or a tuple"),
        ((2, 1.5), 32, 0, "grid.y must be an integer"),
        ((1, 1, 1, 1), 32, 0, "1 to 3 dimensions"),
        (1, 32, -4, "shared memory must be a byte count >= 0"),
        (1, 32, 200 * 1024, "204800 bytes of dynamic shared memory"),
    ],
)
def test_bad_launch_configuration_is_refused(module, fake, grid, block, shared, message):
    x = np.ones(8, np.float32)
    with pytest.raises(LaunchConfigError, match=message):
        launch_scale(module, x, x.copy(), 8, 2.0, grid=grid, block=block, shared=shared)
    assert fake.launches == []


def test_launch_passes_converted_values(module, fake):
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, np.float32)
    launch_scale(module, x, y, 8, 2, grid=(2,), block=(4, 1))
    name, args, grid, block, shared = fake.launches[0]
    assert (name, grid, block, shared) == ("scale", (2, 1, 1), (4, 1, 1), 0)
    assert isinstance(args[0], DeviceBuffer) and isinstance(args[1], DeviceBuffer)
    assert type(args[2]) is np.int32 and type(args[3]) is np.float32 and args[3] == 2.0


def test_outputs_are_copied_back_and_inputs_are_not():
    def fake_scale(signature, args):
        x, y, n, alpha = args
        y.data[:n] = alpha * x.data[:n]
        x.data[:] = -1  # a kernel scribbling on its const input must not reach the caller

    fake = FakeBackend(on_launch=fake_scale)
    module = compile_source(SOURCE, "frontend.cu", backend=fake)
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, np.float32)
    launch_scale(module, x, y, 8, 3.0)
    np.testing.assert_array_equal(y, 3 * np.arange(8))
    np.testing.assert_array_equal(x, np.arange(8))


# --- signature parsing -----------------------------------------------------------------------


def test_parses_qualifiers_launch_bounds_macros_and_vector_types():
    sigs = parse_kernels(SOURCE, "frontend.cu")
    assert list(sigs) == ["scale", "vec4", "with_macro"]
    x, y, n, alpha = sigs["scale"].params
    assert (x.c_type, x.is_pointer, x.is_const, x.dtype) == ("float", True, True, np.float32)
    assert (y.is_pointer, y.is_const) == (True, False)
    assert (n.is_pointer, n.dtype, alpha.dtype) == (False, np.int32, np.float32)
    src, dst, n4 = sigs["vec4"].params
    assert (src.c_type, src.lanes, src.dtype, src.is_const, dst.is_const) == ("float4", 4, np.float32, True, False)
    data, count, big = sigs["with_macro"].params
    assert (data.dtype, data.is_pointer) == (np.float32, True)
    assert (count.dtype, big.dtype) == (np.uint32, np.int64)
    assert sigs["vec4"].line == 7


@pytest.mark.parametrize(
    "source, names",
    [
        ('extern "C" {\n__global__ void k(float* x) {}\n}', ["k"]),
        ("__global__ void proto(float* x);\n__global__ void k(float* x) {}", ["k"]),
        ("template <int N>\n__global__ void t(float* x) {}\n__global__ void k(float x[]) {}", ["k"]),
        ("// __global__ void commented(float* x) {}\n/* __global__ void c2(int n) {} */\n__global__ void k(void) {}", ["k"]),
        ("__global__ static void k(const double* __restrict x, unsigned long long n) {}", ["k"]),
    ],
)
def test_which_functions_are_kernels(source, names):
    assert list(parse_kernels(source)) == names


def test_defines_name_types():
    sigs = parse_kernels("__global__ void k(T* x, int n) {}", defines={"T": "double"})
    assert sigs["k"].params[0].dtype == np.float64


@pytest.mark.parametrize(
    "source, message",
    [
        ("__global__ void k(float& x) {}", "non-const reference"),
        ("__global__ void k(float** x) {}", "pointer to a pointer"),
        ("__global__ void k(cudaTextureObject_t t) {}", "type 'cudaTextureObject_t'"),
        ("__global__ void k(float) {}", "needs a name"),
        ("__global__ void k(float* x) {}\n__global__ void k(float* y) {}", "defined twice"),
    ],
)
def test_signatures_the_runtime_cannot_pass(source, message):
    with pytest.raises(KernelCompileError, match=message):
        parse_kernels(source, "bad.cu")


# --- the chapter-1 launchers check their inputs and choose launch configurations ---------------


@pytest.fixture
def fake_current():
    """Make a fake backend the process's current one (launchers use the current backend)."""
    saved = selection._current
    fake = FakeBackend(multiprocessors=2)
    selection._current = fake
    yield fake
    selection._current = saved


def test_launchers_choose_grids_for_n(fake_current):
    from kernels.basics import vector_add

    a = np.ones(1000, np.float32)
    vector_add.vector_add_one_thread_per_element(a, a, block=256)
    vector_add.vector_add_grid_stride(a, a, block=128)
    vector_add.vector_add_grid_stride(np.ones(100_000, np.float32), np.ones(100_000, np.float32), block=256)
    (_, args1, grid1, block1, _), (_, _, grid2, block2, _), (_, _, grid3, _, _) = fake_current.launches
    assert (grid1, block1) == ((4, 1, 1), (256, 1, 1))  # ceil(1000 / 256) blocks
    assert (grid2, block2) == ((8, 1, 1), (128, 1, 1))  # no more blocks than n needs
    assert grid3 == (2 * 2048 // 256, 1, 1)  # one full wave of the (fake) device, not n / 256
    assert args1[3] == 1000


def test_launchers_refuse_inputs_they_cannot_handle(fake_current):
    from kernels.basics import device_copy, reduction, saxpy, vector_add

    with pytest.raises(ValueError, match="different sizes"):
        vector_add.vector_add_grid_stride(np.ones(10, np.float32), np.ones(11, np.float32))
    with pytest.raises(ValueError, match="different sizes"):
        saxpy.saxpy_grid_stride(2.0, np.ones(10, np.float32), np.ones(11, np.float32))
    with pytest.raises(ValueError, match="multiple of 4"):
        device_copy.copy_grid_stride_float4(np.ones(10, np.float32))
    with pytest.raises(ValueError, match="power of two"):
        reduction.reduce_sum_shared_tree(np.ones(10, np.float32), block=96)
    with pytest.raises(ValueError, match="multiple of 32"):
        reduction.reduce_sum_warp_shuffle(np.ones(10, np.float32), block=48)
    assert fake_current.launches == []


def test_reduction_launchers_zero_the_output_and_size_shared_memory(fake_current):
    from kernels.basics import reduction

    seen = []
    fake_current.on_launch = lambda sig, args: seen.append(args[1].get().copy())
    out = np.full(1, 123.0, np.float32)
    reduction.reduce_sum_shared_tree(np.ones(1000, np.float32), out=out, block=128)
    assert seen[0][0] == 0.0  # zeroed before the launch, since kernels atomicAdd into it
    assert fake_current.launches[-1][4] == 128 * 4  # dynamic shared memory: one float per thread


def test_half_bfloat16_and_type_aliases_are_understood():
    import ml_dtypes

    sigs = parse_kernels(
        "typedef float Dtype;\nusing index_t = int;\n"
        "__global__ void k(const half* a, __nv_bfloat16* b, const __half2* c, Dtype s, index_t n,"
        " const __grid_constant__ float g) {}"
    )
    a, b, c, s, n, g = sigs["k"].params
    assert a.dtype == np.float16 and a.is_const and b.dtype == np.dtype(ml_dtypes.bfloat16)
    assert c.dtype == np.float16 and c.lanes == 2
    assert s.dtype == np.float32 and n.dtype == np.int32 and g.dtype == np.float32


def test_kernels_made_by_a_function_like_macro_are_found_at_the_line_that_makes_them():
    source = (
        "#define MAKE(NAME, T) \\\n"
        "__global__ void NAME(const T* x, T* y, int n) { \\\n"
        "    int i = threadIdx.x; if (i < n) y[i] = x[i]; }\n"
        "MAKE(copy_f, float)\n"
        "MAKE(copy_d, double)\n"
    )
    sigs = parse_kernels(source)
    assert sigs["copy_f"].params[0].dtype == np.float32 and sigs["copy_d"].params[1].dtype == np.float64
    assert sigs["copy_f"].line == 4 and sigs["copy_d"].line == 5


# --- structs and vector types by value --------------------------------------------------------

STRUCTS = (Path(__file__).resolve().parent / "cuda_corpus" / "structs.cu")


@pytest.mark.parametrize(
    "kernel, value, message",
    [
        ("affine", (1.0,), r"affine: parameter 'Affine a' has 2 fields \(scale, shift\); 1 values given"),
        ("affine", {"scale": 1.0, "shfit": 2.0}, r"'shfit' is not one of them"),
        ("affine", 3.0, r"parameter 'Affine a' is a struct: pass a tuple or dict"),
        ("index_map", (4, 2**40), r"does not fit field 'y' of parameter 'int2 shape'"),
        ("index_map", (4, 2.5), r"field 'y' of parameter 'int2 shape' is an integer"),
        ("add_bias4", np.ones(4, np.float32), r"parameter 'float4 bias' is a vector taken by value; pass a tuple"),
        ("conv1d_taps", ((1.0, 2.0), 1), r"field 'w' of parameter 'Taps taps' is an array of 5 values"),
        ("clip_normalize", (1, (0, 1, 2, "x"), 1e-3, (0, 0, 0)),
         r"field 'w' of field 'clip' of parameter 'LayerParams p' needs a number, got str"),
    ],
)
def test_a_struct_argument_that_does_not_fit_is_refused_naming_it(fake, kernel, value, message):
    module = compile_source(STRUCTS.read_text(), "structs.cu", backend=fake)
    sig = module.function(kernel).signature
    args = [value if p.record is not None else (np.ones(64, p.dtype) if p.is_pointer else 1) for p in sig.params]
    with pytest.raises(KernelArgumentError, match=message):
        module.function(kernel)(*args, grid=1, block=32)
    assert fake.launches == []


def test_struct_arguments_are_packed_at_the_offsets_clang_gives(fake):
    module = compile_source(STRUCTS.read_text(), "structs.cu", backend=fake)
    layer = module.function("clip_normalize").signature.params[2]
    assert (layer.record.itemsize, layer.align) == (64, 16)
    assert [layer.record.fields[f][1] for f in ("relu", "clip", "eps", "pad")] == [0, 16, 32, 40]
    module.function("clip_normalize")(np.ones(4, np.float32), np.ones(4, np.float32),
                                      (1, (0, 1, 2, 3), 0.5, (4, 5, 6)), 4, grid=1, block=32)
    packed = fake.launches[-1][1][2]
    assert packed.dtype == layer.record and packed["clip"]["w"] == 3 and packed["pad"]["z"] == 6


def test_gpu_parameter_block_places_each_argument_at_its_alignment():
    from kernels.runtime.gpu import argument_block

    sig = parse_kernels(STRUCTS.read_text())["add_bias4"]  # (float4* data, float4 bias, int n4)
    bias = np.array((1, 2, 3, 4), sig.params[1].record)[()]
    block = argument_block(sig.params, [0x1000, bias, np.int32(7)])
    assert len(block) == 36 and block[16:32] == np.float32([1, 2, 3, 4]).tobytes() and block[32:] == b"\7\0\0\0"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_struct_layouts_match_nvcc(tmp_path):
    """Every struct parameter of the corpus: size and field offsets as read by clang, asserted to nvcc."""
    source = STRUCTS.read_text()
    checks = ["#include <cstddef>", "#include <tuple>", "#include <type_traits>", "using namespace nn;",
              "template <int I, class F> struct arg_of;",
              "template <int I, class... A> struct arg_of<I, void (*)(A...)> {",
              "  using type = std::remove_cv_t<std::remove_reference_t<std::tuple_element_t<I, std::tuple<A...>>>>; };"]
    count = 0
    for name, sig in parse_kernels(source).items():
        for i, p in enumerate(sig.params):
            if p.record is None:
                continue
            t = f"{name}_{i}_t"
            checks.append(f"using {t} = arg_of<{i}, decltype(&{name})>::type;")
            checks.append(f'static_assert(sizeof({t}) == {p.record.itemsize}, "{name} {p.name} size");')
            for field, (_, offset) in p.record.fields.items():
                checks.append(f'static_assert(offsetof({t}, {field}) == {offset}, "{name} {p.name}.{field}");')
                count += 1
    (tmp_path / "layouts.cu").write_text(source + "\n" + "\n".join(checks) + "\n")
    result = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-cubin", "-o", "/dev/null", str(tmp_path / "layouts.cu")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert count >= 25


def test_the_front_end_resolves_types_as_cpp_does():
    sigs = parse_kernels(
        "namespace geo { struct Box { float lo[2]; float hi[2]; }; }\n"
        "using BoxT = geo::Box;\n"
        "typedef const float* ConstFloatPtr;\n"
        "#define REAL double\n"
        "template <typename T> struct Pair { T a, b; };\n"
        "__global__ void k(ConstFloatPtr x, BoxT b, const REAL& r, Pair<int> p, unsigned long long n) {}\n"
    )
    x, b, r, p, n = sigs["k"].params
    assert (x.is_pointer, x.is_const, x.dtype) == (True, True, np.float32)
    assert (b.c_type, b.record.itemsize, b.record.fields["hi"][1]) == ("Box", 16, 8)
    assert (r.is_reference, r.dtype, r.record) == (True, np.float64, None)
    assert (p.c_type, p.record.names, p.record.itemsize) == ("Pair<int>", ("a", "b"), 8)
    assert (n.dtype, n.is_pointer) == (np.uint64, False)
    assert sigs["k"].line == 6


# A template kernel whose body uses what the front end's prelude does not declare (cooperative groups),
# made concrete by explicit instantiations (one with its arguments deduced), as SDK samples write them.
INSTANTIATED = """#include <cooperative_groups.h>
namespace cg = cooperative_groups;
template <class T, unsigned BLOCK>
__global__ void reduce_tiles(const T* in, T* out, unsigned int n) {
    cg::thread_block cta = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(cta);
    T sum = 0;
    for (unsigned i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += BLOCK * gridDim.x) sum += in[i];
    sum = cg::reduce(tile, sum, cg::plus<T>());
    if (tile.thread_rank() == 0) atomicAdd(out, sum);
    cg::sync(cta);
}
template __global__ void reduce_tiles<float, 128>(const float*, float*, unsigned int);
template __global__ void reduce_tiles(const int*, int*, unsigned int);
"""


@pytest.mark.parametrize("request_, params, symbol", [
    ("reduce_tiles<float, 128>", ("const float* in", "float* out", "unsigned int n"), "_Z12reduce_tilesIfLj128EEvPKT_PS0_j"),
    ("reduce_tiles<int, 64>", ("const int* in", "int* out", "unsigned int n"), "_Z12reduce_tilesIiLj64EEvPKT_PS0_j"),
])
def test_a_template_kernel_is_instantiated_whatever_its_body_uses(request_, params, symbol):
    """clang instantiates the declaration only: the body's names, which the front end does not know, and the
    reader's explicit instantiations (which instantiate the body) do not stop it, as they do not stop nvcc."""
    instance = template_instance(INSTANTIATED, request_, "reduce.cu")
    assert instance.name == request_ and tuple(p.describe() for p in instance.params) == params
    assert instance.symbol == symbol and instance.line == 3


def test_an_instantiation_clang_refuses_is_named_with_clangs_reason():
    source = "template <typename T>\n__global__ void scale(T* x, T s) { x[0] *= s; }\n"
    with pytest.raises(KernelCompileError, match=r"k.cu:1: scale<3> is not an instantiation of scale: "
                                                 r"reference to overloaded function could not be resolved"):
        template_instance(source, "scale<3>", "k.cu")  # the source ends with a newline: its reason is on the next line


def test_signatures_carry_the_names_kernels_have_in_a_compiled_module():
    sigs = parse_kernels('namespace nn { __global__ void relu(float* x, int n) {} }\n'
                         'extern "C" __global__ void plain(const double* x) {}\n'
                         '__global__ void half_scale(__half* x, __nv_bfloat16 s, size_t n) {}\n')
    assert sigs["relu"].symbol == "_ZN2nn4reluEPfi" and sigs["plain"].symbol == "plain"
    assert sigs["half_scale"].symbol == "_Z10half_scaleP6__half13__nv_bfloat16m"


def test_the_front_end_reads_no_file_but_the_source(tmp_path):
    """Reading signatures must not read the files a source names (a grader would echo them back)."""
    secret = tmp_path / "secret.h"
    secret.write_text("int leaked_name;\n")
    plain = f'#include "{secret}"\n__global__ void k(float* x) {{}}\n'
    assert list(parse_kernels(plain)) == ["k"]  # blanked: never opened
    split = f'#\\\ninclude "{secret}"\n__global__ void k(float* x) {{}}\n'
    with pytest.raises(KernelCompileError, match=r"h.cu:2: an #include split over lines"):
        parse_kernels(split, "h.cu")


def test_a_cooperative_launch_hands_the_driver_each_argument_by_address(monkeypatch):
    """The GPU's cooperative launch (ctypes into libcuda): kernelParams[i] points at argument i's bytes."""
    import ctypes

    from kernels.runtime import gpu_cooperative

    seen = {}

    class FakeDriver:
        def cuLaunchCooperativeKernel(self, handle, gx, gy, gz, bx, by, bz, shared, stream, params):
            seen["dims"] = (gx, gy, gz, bx, by, bz, shared)
            seen["args"] = [ctypes.string_at(params[i], n) for i, n in enumerate((8, 16, 4))]
            return 0

    monkeypatch.setattr(gpu_cooperative, "driver_library", lambda: FakeDriver())
    from kernels.runtime.gpu import argument_bytes

    sig = parse_kernels(STRUCTS.read_text())["add_bias4"]  # (float4* data, float4 bias, int n4)
    bias = np.array((1, 2, 3, 4), sig.params[1].record)[()]
    arguments = [argument_bytes(p, v) for p, v in zip(sig.params, [0xABC0, bias, np.int32(9)])]
    gpu_cooperative.DriverFunction(ctypes.c_void_p(1), "add_bias4").launch((4, 1, 1), (64, 1, 1), 0, arguments)
    assert seen["dims"] == (4, 1, 1, 64, 1, 1, 0)
    assert seen["args"] == [(0xABC0).to_bytes(8, "little"), np.float32([1, 2, 3, 4]).tobytes(), b"\x09\0\0\0"]


def test_a_cooperative_grid_that_cannot_be_resident_is_refused_in_one_sentence():
    from kernels.runtime.cooperative import check_co_resident, grid_sync_line

    assert grid_sync_line("// this_grid() in a comment\n__global__ void k() {\n  auto g = cg::this_grid();\n}\n") == 3
    check_co_resident("k", 3, (264, 1, 1), (256, 1, 1), 264, "the H100")
    with pytest.raises(LaunchConfigError, match=r"^k: the grid of 265 blocks of 256 threads cannot be resident at once on "
                                                r"the H100, which grid.sync\(\) \(this_grid\(\), line 3\) needs: launch at "
                                                r"most 264 blocks"):
        check_co_resident("k", 3, (265, 1, 1), (256, 1, 1), 264, "the H100")


def test_only_pointers_and_plain_numbers_go_packed_by_one_format():
    """The GPU's quick launch path packs a kernel's arguments by one struct format; a struct or vector
    by value, a const T& (an address of a copy) and a 16-bit float (which PyCUDA's packing does not
    take) go the general way, laid out by the runtime itself."""
    from kernels.runtime.gpu import packed_format

    sigs = parse_kernels(
        "#include <cuda_fp16.h>\n"
        "struct Pair { int a; float b; };\n"
        "__global__ void plain(const float* x, float* y, int n, double s, unsigned char c) {}\n"
        "__global__ void by_value(float4 v, float* y) {}\n"
        "__global__ void by_struct(Pair p, float* y) {}\n"
        "__global__ void by_reference(const int& n, float* y) {}\n"
        "__global__ void in_half(__half h, __half* y) {}\n",
        "formats.cu")
    assert packed_format(sigs["plain"]) == "PPidB"
    assert [packed_format(sigs[name]) for name in ("by_value", "by_struct", "by_reference", "in_half")] == [None] * 4
