"""The one place the book and the grader measure a GPU: events, L2 flush, busy wait, poisoning, peaks.

:func:`measurement` gives the :class:`GpuMeasurement` of the current GPU backend
(or of the backend it is given); on the CPU emulator it raises
:class:`~kernels.runtime.errors.NoGPUError`, since the emulator checks results
but says nothing about speed.  Everything here enqueues on a stream the
caller names (``None``: the default stream), so that the book's timing
(:mod:`kernels.runtime.timing`) and the grader's alternation of two kernels
(``autograder.timing_policy``) use the same primitives:

* :meth:`~GpuMeasurement.elapsed_ms`: one call between two events;
* :meth:`~GpuMeasurement.flush_l2`: write a buffer twice the size of L2, so no
  input is still cached from the call before;
* :meth:`~GpuMeasurement.busy_wait`: keep the GPU busy while Python enqueues
  the start event and the launch, so that the host's overhead is not timed;
* :meth:`~GpuMeasurement.poison_shared_memory`: NaN in every SM's shared
  memory, so a kernel that reads shared memory it never wrote reads NaN;
* :meth:`~GpuMeasurement.peak_bandwidth` and :meth:`~GpuMeasurement.peak_fp32`:
  the device's limits a time is compared with;
* :meth:`~GpuMeasurement.blend` and :meth:`~GpuMeasurement.count_mismatches`:
  a fresh input set for every timed call, and its output checked against the
  reference kernel's on the device (see :mod:`kernels.runtime.input_blend`);
* device buffers, copies and raw kernel handles for callers (the grader) that
  manage their own buffers.

PyCUDA is imported when a measurement is made, so this module imports
anywhere.
"""

from __future__ import annotations

import subprocess

import numpy as np

from . import cuda_errors, selection
from .errors import KernelError, NoGPUError
from .input_blend import CUDA_SOURCE as BLEND_SOURCE
from .module import compile_source

#: A generous peak FP32 rate per SM per clock (flops): 128 FMA lanes x 2, doubled for safety.
FLOPS_PER_SM_CLOCK = 512

# Python needs tens of microseconds to enqueue a launch.  Recording the start
# event while the GPU is idle would time that host overhead, not the kernel:
# so the GPU is first kept busy for longer than it takes Python to enqueue
# the start event and the launch, and the start event runs after this wait.
SPIN_SOURCE = r"""
__global__ void gpu_busy_wait(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""

POISON_SOURCE = r"""
extern "C" __global__ void dlk_poison_shared(int words) {
    extern __shared__ float s[];
    volatile float* v = s;
    for (int i = threadIdx.x; i < words; i += blockDim.x) v[i] = __int_as_float(0x7fc00000);
}"""


class GpuMeasurement:
    """Measuring primitives of one GPU backend (made once per backend, see :func:`measurement`)."""

    def __init__(self, backend):
        import pycuda.driver as cuda

        self.cuda = cuda
        self.backend = backend
        self.info = backend.describe()
        self.l2_bytes = int(self.info.get("l2_bytes") or 64 * 2**20)
        self._flush_buffer = None
        self._spin = None
        self._poison = None
        self._blend = None

    # ------------------------------------------------------------------ timing one call
    def stream(self):
        """A new stream (the grader times on a stream of its own)."""
        return self.cuda.Stream()

    def flush_l2(self, stream=None) -> None:
        """Evict L2 by writing a buffer twice its size (enqueued on ``stream``)."""
        if self._flush_buffer is None:
            self._flush_buffer = self.cuda.mem_alloc(2 * self.l2_bytes)
        if stream is None:
            self.cuda.memset_d32(self._flush_buffer, 0, 2 * self.l2_bytes // 4)
        else:
            self.cuda.memset_d32_async(self._flush_buffer, 0, 2 * self.l2_bytes // 4, stream)

    def busy_wait(self, microseconds: float = 200.0) -> None:
        """Enqueue a one-thread kernel that keeps the GPU busy for ``microseconds``."""
        if self._spin is None:
            clock_mhz = self.info.get("clock_mhz") or 2000.0
            self._spin = (compile_source(SPIN_SOURCE, "gpu_busy_wait.cu", backend=self.backend).function("gpu_busy_wait"),
                          clock_mhz)
        kernel, clock_mhz = self._spin
        kernel(int(microseconds * clock_mhz), grid=1, block=1, sync=False)

    def elapsed_ms(self, enqueue, stream=None) -> float:
        """Milliseconds between an event before ``enqueue()`` and one after it, both on ``stream``."""
        start, end = self.cuda.Event(), self.cuda.Event()
        start.record(stream)
        enqueue()
        end.record(stream)
        end.synchronize()
        return start.time_till(end)

    def synchronize(self) -> None:
        """Wait for everything on the device, every stream (surfaces a failure of queued work)."""
        self.cuda.Context.synchronize()

    # ------------------------------------------------------------------ shared memory
    def poison_shared_memory(self) -> None:
        """Write NaN into as much shared memory of every SM as a block can hold (best effort)."""
        cuda = self.cuda
        if self._poison is None:
            module = compile_source(POISON_SOURCE, "poison_shared.cu", backend=self.backend)
            function = module.compiled.kernel_function("dlk_poison_shared")
            shared = int(self.backend.limits().max_shared_bytes_optin)
            function.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
            sms = int(self.info.get("multiprocessors") or 1)
            self._poison = (module, function, shared, sms)
        _, function, shared, sms = self._poison
        function(np.int32(shared // 4), grid=(sms * 2, 1, 1), block=(256, 1, 1), shared=shared)
        cuda.Context.synchronize()

    # ------------------------------------------------------------------ limits
    def peak_bandwidth(self, stream=None) -> tuple[float, float]:
        """(peak bytes/s for a floor: the larger of the specification and a copy, the copy's bytes/s).

        The copy is a 512 MiB device-to-device ``memcpy``, best of five, bytes read plus written.
        """
        cuda = self.cuda
        nbytes = 512 * 2**20
        a, b = cuda.mem_alloc(nbytes), cuda.mem_alloc(nbytes)
        best = 0.0
        for _ in range(5):
            ms = self.elapsed_ms(lambda: cuda.memcpy_dtod_async(b, a, nbytes, stream), stream)
            if ms > 0:
                best = max(best, 2 * nbytes / (ms / 1e3))
        a.free()
        b.free()
        theoretical = 2 * self.info.get("memory_clock_mhz", 0) * 1e6 * self.info.get("memory_bus_bits", 0) / 8
        return max(best, theoretical), best

    def peak_fp32(self) -> float:
        """A generous FP32 rate (flops/s) from the specification: SMs x clock x :data:`FLOPS_PER_SM_CLOCK`."""
        return float(self.info.get("multiprocessors", 1)) * float(self.info.get("clock_mhz", 1)) * 1e6 * FLOPS_PER_SM_CLOCK

    def clocks(self) -> str:
        """The clocks, temperature and power as nvidia-smi reports them now, or the specification's clocks."""
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw",
                 "--format=csv,noheader"],
                capture_output=True, text=True, timeout=10,
            )
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip().splitlines()[0]
        except Exception:  # noqa: BLE001 - no nvidia-smi: the specification's clocks instead
            pass
        return f"sm {self.info.get('clock_mhz')} MHz, memory {self.info.get('memory_clock_mhz')} MHz (max)"

    # ------------------------------------------------------------------ raw buffers and kernels
    def allocate(self, nbytes: int):
        return self.cuda.mem_alloc(max(1, int(nbytes)))

    def to_device(self, host: np.ndarray):
        # as bytes: PyCUDA copies through the buffer protocol, which NumPy refuses for dtypes such as bfloat16
        return self.cuda.to_device(np.ascontiguousarray(host).reshape(-1).view(np.uint8))

    def copy_on_device(self, dst, src, nbytes: int, stream=None) -> None:
        self.cuda.memcpy_dtod_async(dst, src, int(nbytes), stream)

    def copy_to_host(self, host: np.ndarray, src) -> None:
        """Fill the C-contiguous ``host`` from ``src`` (through its bytes, as :meth:`to_device`)."""
        self.cuda.memcpy_dtoh(host.reshape(-1).view(np.uint8), src)

    # ------------------------------------------------------------------ fresh inputs (see input_blend)
    def _blend_functions(self):
        if self._blend is None:
            module = compile_source(BLEND_SOURCE, "input_blend.cu", backend=self.backend)
            self._blend = (module.compiled.kernel_function("dlk_blend"),
                           module.compiled.kernel_function("dlk_count_mismatches"), self.cuda.mem_alloc(8))
        return self._blend

    def _grid_for(self, n: int) -> tuple[int, int, int]:
        return (max(1, min((int(n) + 255) // 256, 8 * int(self.info.get("multiprocessors") or 1))), 1, 1)

    def blend(self, dst, a, b, n: int, itemsize: int, seed: int, stream=None) -> None:
        """Enqueue ``dst = blend(a, b)`` of ``n`` elements of ``itemsize`` bytes (see :mod:`.input_blend`)."""
        if n == 0:
            return
        blend, _, _ = self._blend_functions()
        blend(dst, a, b, np.uint32(n), np.int32(itemsize), np.uint32(seed & 0xFFFFFFFF),
              grid=self._grid_for(n), block=(256, 1, 1), stream=stream)

    def count_mismatches(self, got, want, n: int, rtol: float, atol: float, scale,
                         stream=None) -> tuple[int, int]:
        """(count, first index) of float32 elements where ``got`` and ``want`` disagree beyond the bound
        ``atol + rtol * (|want| + scale[i])`` (``scale``: a device buffer of ``n`` float32 error scales; NaN
        agrees only with NaN); waits for the answer."""
        if n == 0:
            return 0, -1
        _, compare, counts = self._blend_functions()
        self.cuda.memcpy_htod(counts, np.array([0, 0xFFFFFFFF], np.uint32))
        compare(got, want, np.uint32(n), np.float32(rtol), np.float32(atol), scale, counts,
                grid=self._grid_for(n), block=(256, 1, 1), stream=stream)
        host = np.empty(2, np.uint32)
        if stream is not None:
            stream.synchronize()
        self.cuda.memcpy_dtoh(host, counts)
        return int(host[0]), (int(host[1]) if host[0] else -1)

    def raw_kernel(self, module, name: str, shared: int = 0):
        """The PyCUDA function of ``module``'s kernel ``name``, allowed ``shared`` bytes of dynamic shared memory.

        Called as ``f(*args, grid=..., block=..., shared=..., stream=...)`` with
        device pointers and NumPy scalars: no checks, no copies (what timing needs).
        """
        line = getattr(module.compiled, "grid_sync_line", 0)
        if line:
            raise KernelError(f"{name}: its module uses grid.sync() (this_grid(), line {line}), which needs a cooperative "
                              f"launch; the raw timing launcher makes ordinary launches only, so time it through "
                              f"module.function(...) instead")
        function = module.compiled.kernel_function(name)
        if shared > self.backend.limits().max_shared_bytes_per_block:
            function.set_attribute(self.cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, int(shared))
        return function

    @property
    def error(self) -> type:
        """The exception a failing CUDA call raises (see :meth:`launch_error`)."""
        return self.cuda.Error

    def launch_error(self, exc: BaseException, kernel: str):
        """The runtime's :class:`~kernels.runtime.errors.KernelLaunchError` for a CUDA error of ``kernel``."""
        return cuda_errors.launch_error(exc, kernel)


_measurements: dict[int, GpuMeasurement] = {}


def measurement(backend=None) -> GpuMeasurement:
    """The :class:`GpuMeasurement` of ``backend`` (default: the current one); NoGPUError on the emulator."""
    backend = backend or selection.current_backend()
    if backend.name != "gpu":
        raise NoGPUError("timing needs a real GPU; kernels are running on the CPU emulator, which checks results but "
                         "says nothing about speed")
    key = id(backend)
    if key not in _measurements:
        _measurements[key] = GpuMeasurement(backend)
    return _measurements[key]
