"""Launching on a stream the runtime did not create (``kernels/runtime/streams.py``), and queueing
launches without waiting for each (``kernels/runtime/queueing.py``), without a GPU.

A framework's op queues the book's kernels on the framework's current stream.  Here a fake backend
records what reaches it, and the GPU backend's module is driven with a fake CUDA driver library: a
launch inside ``launching_on(handle)`` must reach ``cuLaunchKernel`` with that handle and the
borrowed memory's addresses, and a launch outside it must not carry a stream at all.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

from kernels.runtime import KernelError, compile_source, current_stream, launching_on, queued
from kernels.runtime.backend import Backend, CompiledModule, DeviceBuffer, DeviceLimits

SOURCE = r"""
__global__ void scale(const float* __restrict__ x, float* y, int n, float alpha) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i];
}
"""


class Buffer(DeviceBuffer):
    def __init__(self, shape, dtype=np.float32, ptr=0):
        self.shape, self.dtype, self.ptr = tuple(shape), np.dtype(dtype), ptr

    def get(self):
        return np.zeros(self.shape, self.dtype)

    def set(self, host):
        pass


class RecordingModule(CompiledModule):
    def __init__(self, backend):
        self.backend = backend

    def launch(self, signature, args, grid, block, shared_bytes, **options):
        self.backend.launches.append((signature.name, options, self.backend.active))

    def set_global(self, name, host):
        pass

    def get_global(self, name, dtype, count):
        return np.zeros(count, dtype)


class RecordingBackend(Backend):
    """Records each launch with the keywords it got and whether the backend was activated then."""

    name = "recording"

    def __init__(self):
        self.launches = []
        self.active = 0

    def activated(self):
        backend = self

        class Active:
            def __enter__(self):
                backend.active += 1

            def __exit__(self, *exc):
                backend.active -= 1

        return Active()

    def compile(self, source, source_name, options, include_dirs, signatures):
        return RecordingModule(self)

    def empty(self, shape, dtype):
        return Buffer(shape, dtype)

    def synchronize(self):
        pass

    def limits(self):
        return DeviceLimits()

    def describe(self):
        return {"backend": "recording", "name": "recording device"}


def test_launches_inside_launching_on_carry_the_stream_and_others_none():
    backend = RecordingBackend()
    scale = compile_source(SOURCE, backend=backend).function("scale")
    x, y = Buffer((8,)), Buffer((8,))
    scale(x, y, 8, 2.0, grid=1, block=8, sync=False)
    with launching_on(0xBEEF, backend=backend):
        assert current_stream() == 0xBEEF
        scale(x, y, 8, 2.0, grid=1, block=8, sync=False)
        with launching_on(0, backend=backend):  # nested: the legacy default stream, then back
            scale(x, y, 8, 2.0, grid=1, block=8, sync=False)
        scale(x, y, 8, 2.0, grid=1, block=8, sync=False)
    assert current_stream() is None
    scale(x, y, 8, 2.0, grid=1, block=8, sync=False)
    assert backend.launches == [("scale", {}, 0), ("scale", {"stream": 0xBEEF}, 1), ("scale", {"stream": 0}, 2),
                                ("scale", {"stream": 0xBEEF}, 1), ("scale", {}, 0)]


class WaitRecordingBackend(RecordingBackend):
    """Records launches and waits in the order they happen."""

    def __init__(self):
        super().__init__()
        self.events = []
        self.launches = self  # RecordingModule appends its launches here

    def append(self, launch):
        self.events.append(launch[0])

    def synchronize(self):
        self.events.append("wait")

    def to_device(self, host):
        return Buffer(host.shape, host.dtype)


def test_launches_inside_queued_wait_once_at_the_end():
    backend = WaitRecordingBackend()
    scale = compile_source(SOURCE, backend=backend).function("scale")
    x, y = Buffer((8,)), Buffer((8,))
    scale(x, y, 8, 2.0, grid=1, block=8)
    with queued(backend=backend):
        for _ in range(3):
            scale(x, y, 8, 2.0, grid=1, block=8)
        assert backend.events == ["scale", "wait", "scale", "scale", "scale"]
        scale(x, np.zeros(8, np.float32), 8, 2.0, grid=1, block=8)  # a result copied back to NumPy must wait
        assert backend.events[-2:] == ["scale", "wait"]
    assert backend.events[-3:] == ["scale", "wait", "wait"]
    scale(x, y, 8, 2.0, grid=1, block=8)
    assert backend.events[-2:] == ["scale", "wait"]


def test_an_error_inside_queued_is_not_hidden_by_the_wait():
    backend = WaitRecordingBackend()
    scale = compile_source(SOURCE, backend=backend).function("scale")
    with pytest.raises(ValueError, match="raised in the block"):
        with queued(backend=backend):
            scale(Buffer((8,)), Buffer((8,)), 8, 2.0, grid=1, block=8)
            raise ValueError("raised in the block")
    assert backend.events == ["scale"]
    scale(Buffer((8,)), Buffer((8,)), 8, 2.0, grid=1, block=8)  # and launches wait again after it
    assert backend.events == ["scale", "scale", "wait"]


def test_the_stream_belongs_to_the_thread_that_named_it():
    """A framework runs ops on several threads (torch's backward runs on a thread per device)."""
    seen = {}

    def other_thread():
        seen["other"] = current_stream()
        with launching_on(7, backend=RecordingBackend()):
            seen["other inside"] = current_stream()

    with launching_on(5, backend=RecordingBackend()):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        seen["this"] = current_stream()
    assert seen == {"other": None, "other inside": 7, "this": 5}


@pytest.mark.parametrize("handle", [-1, 1.5, "0x10", None, True])
def test_launching_on_takes_only_a_raw_stream_handle(handle):
    with pytest.raises(TypeError, match=r"stream must be a raw stream handle \(an int >= 0"):
        with launching_on(handle, backend=RecordingBackend()):
            pass


def test_only_the_gpu_backend_borrows_memory_it_did_not_allocate():
    from kernels.runtime import borrow

    with pytest.raises(KernelError, match=r"the recording backend cannot use device memory it did not allocate"):
        borrow(0x1000, (4,), backend=RecordingBackend())


class FakeDriver:
    """The few entry points of libcuda a stream launch uses, recording what they are given."""

    def __init__(self):
        self.loaded, self.launches = [], []

    def cuModuleLoadData(self, handle, image):
        self.loaded.append(bytes(image))
        handle._obj.value = 0x10
        return 0

    def cuModuleGetFunction(self, function, module, name):
        function._obj.value = 0x20
        return 0

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        sizes = (8, 8, 4, 4)  # const float*, float*, int, float
        self.launches.append(((gx, gy, gz, bx, by, bz, shared), stream,
                              [ctypes.string_at(params[i], n) for i, n in enumerate(sizes)]))
        return 0


class PyCudaModule:
    """PyCUDA's module, as far as a launch on its own default stream uses it."""

    def __init__(self):
        self.calls = []

    def get_function(self, name):
        return PyCudaFunction(name, self.calls)


class PyCudaFunction:
    """A PyCUDA function: called with its arguments, or prepared with their struct format and called so."""

    def __init__(self, name, calls):
        self.name, self.calls, self.arg_format = name, calls, None

    def __call__(self, *args, **kwargs):
        self.calls.append((self.name, args, kwargs))

    def prepare(self, arg_format):
        self.arg_format = arg_format
        return self

    def prepared_call(self, grid, block, *args, shared_size=0):
        self.calls.append((f"{self.name} [{self.arg_format}]", args, {"grid": grid, "block": block, "shared": shared_size}))


class FakeGPUBackend(RecordingBackend):
    name = "gpu"

    def __init__(self):
        super().__init__()
        self.last_kernel = None
        self.pycuda_module = PyCudaModule()

    def compile(self, source, source_name, options, include_dirs, signatures):
        from kernels.runtime.gpu import GPUModule

        return GPUModule(self, self.pycuda_module, source_name, cubin=lambda: b"the cubin")

    def limits(self):
        return DeviceLimits(max_shared_bytes_per_block=48 * 1024)


def test_the_gpu_backend_queues_a_stream_launch_on_the_handle_through_the_driver(monkeypatch):
    """PyCUDA launches only on its own streams, so a framework's stream goes to cuLaunchKernel as it is."""
    from kernels.runtime import gpu_cooperative
    from kernels.runtime.gpu import BorrowedBuffer

    driver = FakeDriver()
    monkeypatch.setattr(gpu_cooperative, "driver_library", lambda: driver)
    backend = FakeGPUBackend()
    scale = compile_source(SOURCE, backend=backend).function("scale")
    x, y = BorrowedBuffer(0xA000, (8,), np.float32), BorrowedBuffer(0xB000, (8,), np.float32)
    arguments = [(0xA000).to_bytes(8, "little"), (0xB000).to_bytes(8, "little"), np.int32(8).tobytes(),
                 np.float32(2.0).tobytes()]

    with launching_on(0x5EED, backend=backend):
        scale(x, y, 8, 2.0, grid=2, block=4, sync=False)
        scale(x, y, 8, 2.0, grid=2, block=4, sync=False)
    assert driver.loaded == [b"the cubin"]  # loaded through the driver once, from the module's own cubin
    assert driver.launches == [((2, 1, 1, 4, 1, 1, 0), 0x5EED, arguments)] * 2
    assert backend.pycuda_module.calls == []

    with launching_on(0, backend=backend):  # the legacy default stream: PyCUDA's own launch does it
        scale(x, y, 8, 2.0, grid=2, block=4, sync=False)
    scale(x, y, 8, 2.0, grid=2, block=4, sync=False)
    assert len(driver.launches) == 2 and len(backend.pycuda_module.calls) == 2
    name, args, kwargs = backend.pycuda_module.calls[0]
    # pointers and plain numbers: packed by the kernel's own format (PyCUDA's prepared call)
    assert name == "scale [PPif]" and [int(a) for a in args[:2]] == [0xA000, 0xB000]
    assert args[2:] == (8, 2.0) and (args[2].dtype, args[3].dtype) == (np.int32, np.float32)
    assert kwargs == {"grid": (2, 1, 1), "block": (4, 1, 1), "shared": 0}
