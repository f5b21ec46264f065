"""The CPU emulator: runs the book's CUDA C kernels on the CPU, and checks them.

The same source a reader passes to the GPU is compiled by g++ against a
prelude of CUDA built-ins (with AddressSanitizer) into a worker program that
runs one module's kernels in a separate process.  Each block's threads run
as fibers that switch at barriers and warp intrinsics.  On top of running the
kernel, the emulator turns the classic kernel bugs into errors that name the
line: out-of-bounds accesses (:class:`KernelMemoryError`), races and reads of
unwritten shared memory (each launch runs twice, in two thread orders and
with two fill patterns in shared memory: :class:`KernelRaceError`,
:class:`UninitializedSharedMemoryError`), races on global memory (the first
run tracks every access to the argument buffers a kernel may write, see
``global_races.h``: :class:`KernelRaceError` naming both threads), barrier divergence, grid.sync() in a cooperative launch included
(:class:`BarrierDivergenceError`), kernels that run too long
(:class:`KernelTimeoutError`) and crashes (:class:`KernelLaunchError`).

Settings (environment variables, or attributes of :class:`EmulatorBackend`):

* ``DLK_EMULATOR_TIMEOUT`` (``timeout``): seconds a launch may take, default 60; a launch of
  more threads than could run in that time even if each did nothing (:func:`launch_budget`)
  is refused before it starts (:class:`LaunchTooLargeError`);
* ``DLK_EMULATOR_CHECKS=0`` (``checks``): run each launch once, without the
  race and uninitialised-shared-memory checks (faster);
* ``DLK_EMULATOR_SANDBOX=1`` (``sandbox``): run kernels under a seccomp filter
  that forbids starting programs, networking and writing files (grading);
* ``DLK_CACHE_DIR``: where builds are cached (``$DLK_CACHE_DIR/emulator``, default
  ``~/.cache/dlk-emulator``);
* ``DLK_EMULATOR_ASAN=0``: build without AddressSanitizer (faster, but out-of-bounds
  accesses go unreported; the build falls back to this by itself, with a warning,
  where the compiler has no AddressSanitizer);
* ``DLK_EMULATOR_UCONTEXT=1``: switch fibers with the C library's ucontext instead
  of the x86-64 assembly (the path other architectures take; much slower);
* ``DLK_EMULATOR_PROFILE=1`` (a number of blocks, or ``all``): profile every launch and
  print its table (:mod:`.profiling`: sectors per request, bank conflicts, divergent
  branches per source line, counted by a second build of the module, ``profiler.h``).

Modules: :mod:`.rewrite` (source to translation unit), :mod:`.build` (g++ and the
cache), :mod:`.protocol` (the worker process), :mod:`.diagnose` (reports and
comparisons to errors), :mod:`.profiling` and :mod:`.profile_counts` (a launch's memory and
branch counts), :mod:`.element_accesses` (which thread touched which element of which argument);
``prelude.h``, ``runtime.cpp``, ``global_races.h`` and ``profiler.h`` are the C++ side.
"""

from __future__ import annotations

import math
import os
import platform
import struct
import sys
import threading
import weakref

import numpy as np

from ..backend import Backend, CompiledModule, DeviceBuffer, DeviceLimits, Dim3
from ..cooperative import check_co_resident, grid_sync_line
from ..errors import BarrierDivergenceError, KernelError, KernelLaunchError, KernelTimeoutError, LaunchTooLargeError
from ..signature import KernelSignature
from . import build as _build
from . import profiling
from .element_accesses import SharedArray, element_accesses
from .profile_counts import analyse
from .diagnose import (
    BufferInfo,
    SourceInfo,
    count_differences,
    first_difference,
    global_race_error,
    race_error,
    uninitialized_error,
    unwritten_in_both,
    worker_death_error,
)
from .protocol import Reader, Worker, WorkerDied, WorkerTimeout, pack_string
from .rewrite import rewrite
from .unsupported import check_supported

__all__ = ["EmulatorBackend", "EmulatorBuffer", "EmulatorModule"]

DEFAULT_TIMEOUT = 60.0

#: The least time one thread of a launch costs the emulator (s).  A thread that does nothing takes
#: 0.2-0.25 us on one core of a 2026 server (a launch of 1 to 4 million empty threads, one run; the
#: emulator runs a launch on one core); a quarter of that is a floor no machine goes below, so a launch
#: refused for its size could not have finished within the time limit anywhere.
MIN_SECONDS_PER_THREAD = 5e-8


def launch_budget(timeout: float, checks: bool) -> int:
    """The most threads one launch may have: as many as could run within ``timeout`` seconds even if each
    did nothing (a launch with the checks runs twice)."""
    return int(timeout / (MIN_SECONDS_PER_THREAD * (2 if checks else 1)))

_ERROR_KINDS = {1: "assert", 2: "divergence", 3: "trap", 4: "other", 5: "global race"}
PROFILE_FLAG = 0x200  # a launch request's flag: run the profiling build's sample of blocks (profiler.h)


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class EmulatorBuffer(DeviceBuffer):
    """Device memory of the emulator: a host array, sent to the worker at each launch."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        # like fresh GPU memory, not zeros: all bytes 0xFF (NaN for floats, -1 for integers)
        self.array = np.empty(self.shape, self.dtype)
        self.array.view(np.uint8).fill(0xFF)

    def get(self) -> np.ndarray:
        return self.array.copy()

    def set(self, host: np.ndarray) -> None:
        host = np.asarray(host)
        if host.shape != self.shape or host.dtype != self.dtype:
            raise KernelError(f"cannot copy a {host.dtype}{host.shape} array into a {self.dtype}{self.shape} buffer")
        np.copyto(self.array, host)


class EmulatorModule(CompiledModule):
    """One compiled module and its worker process (started on first use)."""

    def __init__(self, backend: "EmulatorBackend", built: _build.Built, source: str, source_name: str,
                 signatures: dict[str, KernelSignature], variables: list[tuple[str, bool]],
                 unit_text: str = "", options: tuple[str, ...] = (), include_dirs: tuple[str, ...] = ()):
        self.backend = backend
        self.executable = built.executable
        self.from_cache = built.from_cache
        self.asan = built.asan
        self.source = source
        self.source_name = source_name
        self.signatures = dict(signatures)
        self.kernel_index = {name: i for i, name in enumerate(signatures)}
        self.variables = dict(variables)
        self.grid_sync_line = grid_sync_line(source)  # uses this_grid(): launched cooperatively
        self._globals: dict[str, bytes] = {}  # set_global values, replayed into a restarted worker
        self._worker: Worker | None = None
        self._lock = threading.Lock()
        self._worker_box: list = [None]
        self._finalizer = weakref.finalize(self, EmulatorModule._close_worker, self._worker_box)
        # the profiling build (profiler.h), built and started when a launch is first profiled
        self._unit_text, self._options, self._include_dirs = unit_text, tuple(options), tuple(include_dirs)
        self._profile_build: _build.Built | None = None
        self._profiler: Worker | None = None
        self._profiler_box: list = [None]
        self._profiler_finalizer = weakref.finalize(self, EmulatorModule._close_worker, self._profiler_box)

    # ---- worker life ------------------------------------------------------------
    @staticmethod
    def _close_worker(box):
        if box[0] is not None:
            box[0].close()
            box[0] = None

    def close(self) -> None:
        """Stop the worker processes (a later launch starts a new one)."""
        self._close_worker(self._worker_box)
        self._worker = None
        self._close_worker(self._profiler_box)
        self._profiler = None

    def _evict(self) -> None:
        """Stop the worker to save processes, keeping its __device__ variables for the next one."""
        with self._lock:
            worker = self._worker
            if worker is None or not worker.alive():
                return
            try:
                for name, writable in self.variables.items():
                    if not writable:
                        continue
                    size = Reader(worker.request(b"G" + pack_string(name) + struct.pack("<Q", 0), self.backend.timeout))
                    size.u32()
                    nbytes = size.u64()
                    reply = Reader(worker.request(b"G" + pack_string(name) + struct.pack("<Q", nbytes), self.backend.timeout))
                    if reply.u32() == 0:
                        reply.u64()
                        self._globals[name] = reply.raw(nbytes)
            except (WorkerDied, WorkerTimeout):
                pass
            self.close()

    def _ensure_worker(self) -> Worker:
        if self._worker is not None and self._worker.alive():
            return self._worker
        self.close()
        worker = Worker(self.executable, sandbox=self.backend.sandbox)
        self._worker = worker
        self._worker_box[0] = worker
        try:
            worker.handshake(timeout=max(30.0, self.backend.timeout))
        except (WorkerDied, WorkerTimeout) as exc:
            self.close()
            raise KernelLaunchError(f"{self.source_name}: the emulator's worker did not start:\n{exc.log[-3000:]}") from None
        self.backend._worker_started(self)
        if self.backend.sandbox and worker.sandboxed is False:
            self.backend._warn_once("sandbox", "the emulator's sandbox (seccomp) could not be installed on this system")
        for name, data in self._globals.items():
            self._set_in_worker(worker, name, data)
        return worker

    def _source_info(self, kernel: str) -> SourceInfo:
        return SourceInfo(kernel, self.source_name, self.source.splitlines())

    # ---- globals ----------------------------------------------------------------
    def _set_in_worker(self, worker: Worker, name: str, data: bytes) -> None:
        reply = Reader(worker.request(b"S" + pack_string(name) + struct.pack("<Q", len(data)) + data, self.backend.timeout))
        status, size = reply.u32(), reply.u64()
        if status == 1:
            known = ", ".join(self.variables) or "none"
            raise KernelError(f"{self.source_name} has no __constant__ or __device__ variable '{name}' (variables: {known})")
        if status == 2:
            raise KernelError(f"'{name}' holds {size} bytes; {len(data)} bytes cannot be copied into it")

    def set_global(self, name: str, host: np.ndarray) -> None:
        data = np.ascontiguousarray(host).tobytes()
        with self._lock:
            try:
                self._set_in_worker(self._ensure_worker(), name, data)
            except (WorkerDied, WorkerTimeout) as exc:
                self.close()
                raise KernelLaunchError(f"{self.source_name}: the emulator's worker failed: {exc}") from None
            self._globals[name] = data

    def get_global(self, name: str, dtype: np.dtype, count: int) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = dtype.itemsize * int(count)
        with self._lock:
            worker = self._ensure_worker()
            try:
                reply = Reader(worker.request(b"G" + pack_string(name) + struct.pack("<Q", nbytes), self.backend.timeout))
            except (WorkerDied, WorkerTimeout) as exc:
                self.close()
                raise KernelLaunchError(f"{self.source_name}: the emulator's worker failed: {exc}") from None
        status, size = reply.u32(), reply.u64()
        if status == 1:
            raise KernelError(f"{self.source_name} has no __constant__ or __device__ variable '{name}'")
        if status == 2:
            raise KernelError(f"'{name}' holds {size} bytes; cannot read {nbytes}")
        return np.frombuffer(reply.raw(nbytes), dtype=dtype).copy()

    # ---- launches -----------------------------------------------------------------
    def launch(self, signature: KernelSignature, args: list, grid: Dim3, block: Dim3, shared_bytes: int,
               stream: int | None = None) -> None:
        # A launch runs to completion before it returns, so the order of any stream holds: ``stream`` is not used.
        with self._lock:
            self._launch(signature, args, grid, block, shared_bytes)

    def _request(self, signature, args, grid, block, shared_bytes, flags: int):
        """The worker's launch request (``flags``: its runs and flags word), and the launch's buffers, what the
        reader calls them, and which the kernel may write."""
        kernel = signature.name
        buffers: list[EmulatorBuffer] = []
        infos: list[BufferInfo] = []
        outputs: list[bool] = []
        params = []
        for param, value in zip(signature.params, args):
            if param.is_pointer:
                if not isinstance(value, EmulatorBuffer):
                    raise KernelError(f"{kernel}: parameter '{param.name}' needs a buffer of the CPU emulator")
                for i, b in enumerate(buffers):
                    if b is value:
                        infos[i].names.append(param.name)
                        outputs[i] = outputs[i] or not param.is_const
                        break
                else:
                    i = len(buffers)
                    buffers.append(value)
                    infos.append(BufferInfo([param.name], value.dtype, value.shape))
                    outputs.append(not param.is_const)
                params.append(struct.pack("<BQ", 0, i))
            elif param.record is not None:
                raw = np.asarray(value).tobytes()  # a struct or vector type by value: its bytes as nvcc lays them out
                params.append(b"\2" + struct.pack("<Q", len(raw)) + raw)
            else:
                raw = np.asarray(value).tobytes()[:8].ljust(8, b"\0")
                params.append(b"\1" + raw)
        request = [
            b"L",
            struct.pack("<I6IQII", self.kernel_index[kernel], *grid, *block, shared_bytes, flags, len(buffers)),
        ]
        for b, out in zip(buffers, outputs):
            data = b.array.tobytes()
            request += [struct.pack("<QBI", len(data), 1 if out else 0, b.dtype.itemsize), data]
        request += [struct.pack("<I", len(params)), *params]
        return b"".join(request), buffers, infos, outputs

    def _launch(self, signature, args, grid, block, shared_bytes) -> None:
        backend = self.backend
        kernel = signature.name
        source = self._source_info(kernel)
        checks = backend.checks
        threads = math.prod(grid) * math.prod(block)
        budget = launch_budget(backend.timeout, checks)
        if threads > budget:
            raise LaunchTooLargeError(
                f"{kernel}: a launch of {threads:,} threads (grid {grid}, block {block}) is more than the CPU "
                f"emulator can run within its limit of {backend.timeout:g} s per launch, which allows at most "
                f"{budget:,} threads{' (it runs each launch twice, for its race checks)' if checks else ''} even if "
                f"each did nothing: launch fewer threads (a smaller shape, or fewer blocks that loop over the data), "
                f"or run it on a GPU."
            )
        cooperative = bool(self.grid_sync_line)
        if cooperative:
            check_co_resident(kernel, self.grid_sync_line, grid, block, backend.co_resident_blocks(block),
                              "the CPU emulator")
        profiled = profiling.requested()
        # the profile runs from the inputs the launch starts from (the launch writes its buffers)
        profile_request = (self._request(signature, args, grid, block, shared_bytes,
                                         1 | PROFILE_FLAG | (profiled.blocks << 16))[0]
                           if profiled and not cooperative else None)
        request, buffers, infos, outputs = self._request(signature, args, grid, block, shared_bytes,
                                                         (2 if checks else 1) | (0x100 if cooperative else 0))
        out_index = [i for i, o in enumerate(outputs) if o]
        try:
            self._run_checked(kernel, source, request, buffers, infos, out_index, grid, block)
        except KernelTimeoutError:
            raise
        except KernelLaunchError:
            # what a wrong kernel touched (past the end of an array, one element from two threads) is what its
            # reader most wants to see: the profile of a launch that failed its checks is kept too
            if profiled:
                profiled.add(self._profile(kernel, profile_request, [buffers[i].nbytes for i in out_index],
                                           infos if profiled.elements else None, grid, block, shared_bytes))
            raise
        if profiled:
            profiled.add(self._profile(kernel, profile_request, [buffers[i].nbytes for i in out_index],
                                       infos if profiled.elements else None, grid, block, shared_bytes))

    def _run_checked(self, kernel: str, source: SourceInfo, request: bytes, buffers: list, infos: list[BufferInfo],
                     out_index: list[int], grid, block) -> None:
        """The launch's checked runs (forward, and reverse with another poison when checks are on): the outputs
        written back into ``buffers``, or the error they found raised."""
        backend = self.backend
        checks = backend.checks

        def read_run(reader: Reader):
            status = reader.u32()
            if status:
                run = reader.string()
                message = reader.string()
                printed = reader.string()
                if printed and not run:
                    sys.stdout.write(printed)
                    sys.stdout.flush()
                if _ERROR_KINDS.get(status) == "global race":
                    raise global_race_error(message, source, infos, str(self.executable), list(self.variables))
                raise self._kernel_error(status, kernel, message, run)
            text = reader.string()
            unwritten = reader.string()
            arrays = []
            for i in out_index:
                b = buffers[i]
                arrays.append(np.frombuffer(reader.raw(b.nbytes), dtype=b.dtype).reshape(b.shape).copy())
            return text, unwritten, arrays

        worker = self._ensure_worker()
        log_start = worker.log_position()
        try:
            reply = Reader(worker.request(request, backend.timeout))
            text_a, unwritten_a, out_a = read_run(reply)
            if text_a:
                sys.stdout.write(text_a)
                sys.stdout.flush()
            self._forward_stderr(worker, log_start)
            log_start = worker.log_position()
            diff = None
            if checks:
                _, _, out_b = read_run(reply)
                diff = first_difference(out_a, out_b)
                if diff is not None:
                    rerun = Reader(worker.request(b"C" + struct.pack("<I", self.kernel_index[kernel]), backend.timeout))
                    _, unwritten_c, out_c = read_run(rerun)
        except KernelLaunchError:
            self._forward_stderr(worker, log_start)
            raise
        except WorkerTimeout as exc:
            self.close()
            raise KernelTimeoutError(
                f"{kernel}: the launch (grid {grid}, block {block}) did not finish within {exc.seconds:g} s and was "
                f"stopped. An endless loop (a loop condition that never becomes false, or threads waiting on a flag "
                f"no thread sets) is the usual cause; on the CPU emulator keep shapes small. The limit is "
                f"DLK_EMULATOR_TIMEOUT (seconds).",
                cuda_error="CUDA_ERROR_LAUNCH_TIMEOUT",
            ) from None
        except WorkerDied as exc:
            self.close()
            log = exc.log[log_start:] if len(exc.log) >= log_start else exc.log
            raise worker_death_error(exc.returncode, log, source, infos, str(self.executable)) from None
        except BaseException:
            # interrupted (Ctrl-C, a stopped notebook cell): the worker may still be running the
            # kernel and its reply would be read by the next request, so stop it
            self.close()
            raise

        for i, arr in zip(out_index, out_a):
            buffers[i].array[...] = arr
        if diff is not None:
            index = out_index[diff.buffer]
            diff.buffer = index
            poison_diff = first_difference(out_a, out_c)
            if poison_diff is not None:
                poison_diff.buffer = out_index[poison_diff.buffer]
                unwritten = unwritten_in_both(unwritten_a, unwritten_c)
                if unwritten:
                    raise uninitialized_error(source, infos, poison_diff, unwritten)
            differing = count_differences(out_a, out_b, out_index.index(index))
            raise race_error(source, infos, diff, differing)

    # ---- profiles -----------------------------------------------------------------
    def _profile_worker(self) -> Worker:
        """The worker of the module's profiling build (built on first use, kept beside the checking one)."""
        if self._profiler is not None and self._profiler.alive():
            return self._profiler
        if self._profile_build is None:
            self._profile_build = _build.build(self._unit_text, self.source, self.source_name, self._options,
                                               self._include_dirs, profile=True)
        worker = Worker(self._profile_build.executable, sandbox=self.backend.sandbox)
        try:
            worker.handshake(timeout=max(30.0, self.backend.timeout))
        except (WorkerDied, WorkerTimeout) as exc:
            worker.close()
            raise KernelLaunchError(f"{self.source_name}: the emulator's profiler did not start:\n{exc.log[-3000:]}") from None
        for name, data in self._globals.items():
            self._set_in_worker(worker, name, data)
        self._profiler = worker
        self._profiler_box[0] = worker
        return worker

    def _profile(self, kernel: str, request: bytes | None, out_bytes: list[int], buffers: list[BufferInfo] | None,
                 grid, block, shared_bytes: int):
        """The counts of one launch from the profiling build, or why there are none (``out_bytes``: the sizes of
        the buffers the reply carries back, skipped; ``buffers``: the launch's, where the profile is to say which
        thread touched which of their elements, else None)."""
        launch = profiling.LaunchShape(tuple(grid), tuple(block), int(shared_bytes))
        if request is None:
            return profiling.not_profiled(kernel, launch, "a cooperative launch (grid.sync()) is not profiled")
        try:
            worker = self._profile_worker()
            for name, data in self._globals.items():
                self._set_in_worker(worker, name, data)
            reply = Reader(worker.request(request, self.backend.timeout))
        except KernelError as exc:  # the profiling build failed: the launch itself went well
            return profiling.not_profiled(kernel, launch, f"the profiling build failed ({str(exc).splitlines()[0]})")
        except (WorkerDied, WorkerTimeout) as exc:
            self._close_worker(self._profiler_box)
            self._profiler = None
            return profiling.not_profiled(kernel, launch, f"the profiling run failed ({exc})")
        if reply.u32():
            reply.string()
            message = reply.string()
            return profiling.not_profiled(kernel, launch, f"the profiling run failed: {message}")
        reply.string()
        reply.string()
        for nbytes in out_bytes:
            reply.raw(nbytes)
        blocks_done, truncated, count = reply.u32(), reply.u32(), reply.u64()
        events = np.frombuffer(reply.raw(count * profiling.EVENT_DTYPE.itemsize), dtype=profiling.EVENT_DTYPE)
        bases = [reply.u64() for _ in range(reply.u32())]
        shared = [SharedArray(reply.u64(), reply.u64(), reply.u64(), reply.string()) for _ in range(reply.u32())]
        profile = analyse(kernel, launch, events, blocks_done, bool(truncated & 1),
                                    str(self._profile_build.executable), self._source_info(kernel),
                                    branches_truncated=bool(truncated & 2))
        profile.origin = (self.source, self.source_name, self._options, self._include_dirs)
        if buffers is not None:
            profile.elements = element_accesses(events, bases, buffers, shared)
        return profile

    def _forward_stderr(self, worker: Worker, start: int) -> None:
        text = worker.read_log(start)
        noise = ("==", "DLK-", "False positive error reports may follow", "For details see https://github.com/google/sanitizers")
        lines = [l for l in text.splitlines() if l and not l.startswith(noise)]
        if lines:
            sys.stderr.write("\n".join(lines) + "\n")

    def _kernel_error(self, status: int, kernel: str, message: str, run: str) -> KernelLaunchError:
        note = f" (while re-running the launch with threads in {run.split('-')[0]} order)" if run else ""
        kind = _ERROR_KINDS.get(status, "other")
        if kind == "divergence":
            return BarrierDivergenceError(f"{kernel}: {message}{note}", cuda_error="CUDA_ERROR_LAUNCH_FAILED")
        if kind == "assert":
            return KernelLaunchError(f"{kernel}: {message}{note}", cuda_error="CUDA_ERROR_ASSERT")
        return KernelLaunchError(f"{kernel}: {message}{note}", cuda_error="CUDA_ERROR_LAUNCH_FAILED")


class EmulatorBackend(Backend):
    """Runs kernels on the CPU emulator (``DLK_BACKEND=cpu``)."""

    name = "cpu"

    def __init__(self, sandbox: bool | None = None, timeout: float | None = None, checks: bool | None = None):
        self.sandbox = _env_flag("DLK_EMULATOR_SANDBOX", False) if sandbox is None else bool(sandbox)
        if timeout is None:
            try:
                timeout = float(os.environ.get("DLK_EMULATOR_TIMEOUT", DEFAULT_TIMEOUT))
            except ValueError:
                raise KernelError("DLK_EMULATOR_TIMEOUT must be a number of seconds") from None
        #: seconds one launch may take before it is stopped (the grader may lower it)
        self.timeout = float(timeout)
        #: run each launch twice (thread orders, poison patterns) to find races and uninitialised reads
        self.checks = _env_flag("DLK_EMULATOR_CHECKS", True) if checks is None else bool(checks)
        self._warned: set[str] = set()
        # modules with a running worker, least recently started first
        self._live: list[weakref.ref] = []

    #: at most this many worker processes run at once; the oldest is stopped (and restarted when used again)
    max_workers = 8

    def _worker_started(self, module: "EmulatorModule") -> None:
        self._live = [r for r in self._live if r() is not None and r() is not module and r()._worker is not None]
        self._live.append(weakref.ref(module))
        while len(self._live) > self.max_workers:
            oldest = self._live.pop(0)()
            if oldest is not None and not oldest._lock.locked():
                oldest._evict()

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            import warnings

            warnings.warn(message, RuntimeWarning, stacklevel=4)

    def compile(self, source, source_name, options, include_dirs, signatures) -> EmulatorModule:
        check_supported(source, source_name)
        unit = rewrite(source, source_name, signatures)
        built = _build.build(unit.text, source, source_name, tuple(options), tuple(include_dirs))
        return EmulatorModule(self, built, source, source_name, signatures, unit.variables,
                              unit.text, tuple(options), tuple(include_dirs))

    def empty(self, shape, dtype) -> EmulatorBuffer:
        return EmulatorBuffer(shape, dtype)

    def synchronize(self) -> None:
        """Launches are synchronous on the emulator: nothing to wait for."""

    #: threads a cooperative launch may hold at once (each a fiber with its own stack)
    max_cooperative_threads = 16384

    def co_resident_blocks(self, block: Dim3) -> int:
        """Blocks of this size resident at once in a cooperative launch: as on an H100 (132 SMs of 2048
        threads, at most 32 blocks each), and at most ``max_cooperative_threads`` threads in all."""
        threads = block[0] * block[1] * block[2]
        return max(1, min(132 * min(32, 2048 // threads), self.max_cooperative_threads // threads))

    def limits(self) -> DeviceLimits:
        # like an sm_90 device: 48 KiB of static shared memory, up to 227 KiB dynamic when opted in
        return DeviceLimits(max_shared_bytes_per_block=48 * 1024, max_shared_bytes_optin=227 * 1024)

    def describe(self) -> dict:
        info = {
            "name": f"CPU emulator on {cpu_model()}",
            "backend": "cpu",
            "cpu": cpu_model(),
            "machine": platform.machine(),
            "cores": os.cpu_count(),
            "checks": self.checks,
            "sandbox": self.sandbox,
            "timeout_s": self.timeout,
        }
        info.update(_build.describe_toolchain())
        return info
