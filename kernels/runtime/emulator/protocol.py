"""Talk to a module's worker process: start it, send requests, read replies, time out.

The worker (``runtime.cpp``) reads requests on one pipe and writes replies on
another; its stdout and stderr (AddressSanitizer reports, crash context) go to
a log file that Python reads when the worker dies.  Every reply is a 64-bit
length followed by that many bytes.
"""

from __future__ import annotations

import os
import select
import signal
import struct
import subprocess
import tempfile
import time
from pathlib import Path

READY = 0x444C4B31  # "DLK1"


class WorkerDied(Exception):
    """The worker ended (crash, sanitizer report) before replying."""

    def __init__(self, returncode: int | None, log: str):
        super().__init__(f"worker ended with status {returncode}")
        self.returncode = returncode
        self.log = log


class WorkerTimeout(Exception):
    """The worker did not reply within the time limit; it has been killed."""

    def __init__(self, seconds: float, log: str):
        super().__init__(f"no reply within {seconds:g} s")
        self.seconds = seconds
        self.log = log


def _asan_options(sandbox: bool) -> str:
    options = [
        "detect_leaks=0", "halt_on_error=1", "abort_on_error=0", "exitcode=23",
        "detect_stack_use_after_return=0", "detect_odr_violation=0", "print_summary=1",
        "redzone=64", "allocator_may_return_null=1", "handle_abort=1", "symbolize=1",
        "color=never", "strip_path_prefix=", "fast_unwind_on_fatal=0",
        # freed buffers need not be kept long (use-after-free is not a kernel bug class): keep workers small
        "quarantine_size_mb=16", "malloc_context_size=4",
    ]
    if sandbox:
        # the sandbox forbids starting llvm-symbolizer; use the built-in symbolizer
        options.append("external_symbolizer_path=")
    return ":".join(options)


class Worker:
    """One running worker process of a module."""

    def __init__(self, executable: Path, sandbox: bool = False):
        self.executable = Path(executable)
        self.sandbox = sandbox
        self.log_file = tempfile.TemporaryFile(prefix="dlk-emulator-", suffix=".log")
        to_worker_r, self._to_worker = os.pipe()
        self._from_worker, from_worker_w = os.pipe()
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = _asan_options(sandbox)
        argv = [str(self.executable), str(to_worker_r), str(from_worker_w)]
        if sandbox:
            argv.append("--sandbox")
        try:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=self.log_file,
                stderr=self.log_file,
                pass_fds=(to_worker_r, from_worker_w),
                env=env,
                close_fds=True,
            )
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        self.sandboxed = None
        self.kernel_count = None

    def handshake(self, timeout: float) -> None:
        reply = self.receive(timeout)
        magic, kernels, sandbox_state = struct.unpack_from("<III", reply)
        if magic != READY:
            raise WorkerDied(self.process.poll(), self.read_log())
        self.kernel_count = kernels
        self.sandboxed = {0: False, 1: True, 2: None}[sandbox_state]

    # ---- log -------------------------------------------------------------
    def log_position(self) -> int:
        return os.fstat(self.log_file.fileno()).st_size

    def read_log(self, start: int = 0) -> str:
        self.log_file.flush()
        self.log_file.seek(start)
        data = self.log_file.read()
        self.log_file.seek(0, os.SEEK_END)
        return data.decode("utf-8", "replace")

    # ---- messages ---------------------------------------------------------
    def send(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._to_worker, view)
                view = view[written:]
        except (BrokenPipeError, OSError):
            self._died()

    def receive(self, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        header = self._read_exact(8, deadline, timeout)
        (length,) = struct.unpack("<Q", header)
        return self._read_exact(length, deadline, timeout)

    def _read_exact(self, n: int, deadline: float, timeout: float) -> bytes:
        chunks = []
        while n > 0:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerTimeout(timeout, self.read_log())
            ready, _, _ = select.select([self._from_worker], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self._from_worker, min(n, 1 << 20))
            if not chunk:
                self._died()
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _died(self):
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.returncode
        raise WorkerDied(code, self.read_log())

    def request(self, data: bytes, timeout: float) -> bytes:
        self.send(data)
        return self.receive(timeout)

    # ---- ending ------------------------------------------------------------
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                os.write(self._to_worker, b"Q")
                self.process.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        for fd in (self._to_worker, self._from_worker):
            try:
                os.close(fd)
            except OSError:
                pass
        self._to_worker = self._from_worker = -1
        try:
            self.log_file.close()
        except OSError:
            pass


def pack_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<I", len(data)) + data


class Reader:
    """Reads the fields of a reply in order."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def u32(self) -> int:
        (v,) = struct.unpack_from("<I", self.data, self.pos)
        self.pos += 4
        return v

    def u64(self) -> int:
        (v,) = struct.unpack_from("<Q", self.data, self.pos)
        self.pos += 8
        return v

    def string(self) -> str:
        n = self.u32()
        text = self.data[self.pos : self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return text

    def raw(self, n: int) -> bytes:
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk
