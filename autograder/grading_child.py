"""The grading child: what runs inside the sandbox, beside the student's code.

The grader (:mod:`autograder.isolation`) starts ``python -I`` in the sandbox
(:mod:`autograder.sandbox`) and runs :func:`child_main`, which

1. reads the request (exercise, kernel source, launch integers, cases) from
   stdin, which is then closed;
2. moves the result pipe, and the lock of its turn on the GPU, to descriptors
   nothing it starts inherits and no kernel can guess;
3. gives up what the sandbox's setup needed: becomes the sandbox's own uid
   (no capability left), forbids other processes of that uid to read or write
   its memory, and sets its limits (core dumps, CPU time, file size, open
   descriptors without a GPU and, in the sandbox, processes) before any
   student code exists; then says it is ready and waits until the grader
   holds its scratch space (:mod:`autograder.scratch_space`);
4. checks the submission: a kernel as it is (:mod:`autograder.checker`), index
   notation by generating the kernel first (:mod:`autograder.tc_grading`);
5. reports on the pipe as JSON lines tagged with the request's nonce, a line
   per finished case as it runs and the result last, and exits without
   running any exit handler of a possibly broken CUDA context.

Nothing it reports is taken on trust: the grader judges the arrays the child
left in its scratch directory itself (:mod:`autograder.verdict`).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import resource
import secrets
import sys
import time
import traceback
from pathlib import Path

from . import sandbox
from .checker import run_request
from .infrastructure import is_disk_failure
from .exercises import get_exercise
from .phase_times import CHILD_IMPORTS, PhaseTimes
from .result import ExerciseResult, json_default, json_safe
from .tc_grading import run_tc_request

#: Characters of a traceback kept in the result of a grading the grader itself failed.
TRACEBACK_LIMIT = 4000
#: Where the result pipe and the GPU lock are moved: a random descriptor at or above this.
HIGH_DESCRIPTOR = 100


class ResultChannel:
    """The child's end of the result pipe: one JSON line per message, tagged with the nonce."""

    def __init__(self, fd: int, nonce: str):
        self.fd = fd
        self.nonce = nonce

    def send(self, event: str, **payload) -> None:
        data = json.dumps(json_safe({"nonce": self.nonce, "event": event, **payload}), allow_nan=False,
                          default=json_default).encode() + b"\n"
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]


def child_main(started: float | None = None) -> None:
    """Entry point of the grading child: read the request, confine itself, say it is ready and wait until the
    grader holds its scratch space, check, report, exit.  ``started``: ``time.perf_counter()`` when the
    interpreter began importing the grader (the phases of the result count its imports from then)."""
    phases = PhaseTimes()
    if started is not None:
        phases.add(CHILD_IMPORTS, time.perf_counter() - started)
    request = read_request()
    # moved first: the limit on open descriptors set next leaves descriptors above it alone, but makes no new one
    channel = ResultChannel(_moved_high(int(request["result_fd"]), randomly=True), request["nonce"])
    if request.get("gpu_lock_fd") is not None:  # nothing the child starts (nvcc) inherits its turn on the card
        request["gpu_lock_fd"] = _moved_high(int(request["gpu_lock_fd"]))
    confine(request)
    channel.send("ready")
    wait_for_the_grader()
    try:
        result = check_request(request, channel.send, phases)
    except BaseException as exc:  # the grader's own code failed: the grader decides whose failure it is
        channel.send("grader_failure", cause=failure_cause(exc),
                     reason=f"the grader failed while checking this kernel ({type(exc).__name__}: {exc})")
        result = grader_failure(request, exc)
    result.phases = phases.to_dict()
    channel.send("result", result=result.to_dict())
    sys.stdout.flush()
    os._exit(0)  # no atexit handlers of a possibly broken CUDA context


def read_request() -> dict:
    """The request the grader wrote on stdin, one line of JSON (stdin stays open: see :func:`wait_for_the_grader`)."""
    return json.loads(sys.stdin.buffer.readline())


def wait_for_the_grader() -> None:
    """Until the grader closes stdin: it has then taken hold of this grading's scratch space
    (:mod:`autograder.scratch_space`), before anything of the submission runs."""
    sys.stdin.buffer.read()
    sys.stdin.close()


def confine(request: dict) -> None:
    """Before anything of the submission: the sandbox's uid, memory no other process may read, the limits."""
    in_sandbox = "sandbox_uid" in request
    if request.get("sandbox_uid") is not None:
        _become(int(request["sandbox_uid"]))
    _not_dumpable()
    apply_limits(float(request.get("cpu_limit_s", 300)), int(request.get("file_limit_bytes", 512 * 2**20)),
                 processes=sandbox.PROCESS_LIMIT if in_sandbox else None,
                 open_files=request.get("open_files_limit"))


def check_request(request: dict, send, phases: PhaseTimes | None = None) -> ExerciseResult:
    """Check the request's submission: index notation is turned into a kernel (tc_grading), a kernel is run as it is;
    ``phases`` is told where the time went."""
    exercise = get_exercise(request["exercise"])
    if exercise.language == "tc":
        return run_tc_request(request, exercise, send)
    return run_request(request, send, phases)


def grader_failure(request: dict, exc: BaseException) -> ExerciseResult:
    """The result of a check the grader itself failed: no points, and the instructor is asked to look."""
    return ExerciseResult(
        exercise=request.get("exercise", ""),
        status="crashed",
        message=f"The grader failed while checking this kernel ({type(exc).__name__}: {exc}). Please tell the instructor.",
        log=traceback.format_exc()[-TRACEBACK_LIMIT:],
        mode=request.get("mode", ""),
    )


def failure_cause(exc: BaseException) -> str:
    """Whose a failure of the grader's code in the child may be: "disk" (a write found no room: the submission's
    if it filled its scratch space, else the machine's), "files" (a file of the grading's was not what the grader
    left there: only the submission's code, running beside it, can change them) or "grader" (its own bug)."""
    if isinstance(exc, OSError):
        return "disk" if is_disk_failure(exc) else "files"
    return "grader"


def apply_limits(cpu_s: float, file_bytes: int, processes: int | None = None, open_files: int | None = None) -> None:
    """Limits of the grading child, set by the child itself first thing (inherited by the
    compiler and the emulator's worker).  Not a preexec_fn: that is unsafe in a threaded
    parent such as a notebook kernel.

    ``processes`` (``RLIMIT_NPROC``) is set only inside the sandbox, where it counts the
    sandbox's own processes and threads: outside it the limit would count every process of
    the user, and before the sandbox's user namespace exists it would be recorded as the
    limit of all of them."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if processes is not None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        limit = processes if hard == resource.RLIM_INFINITY else min(processes, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    cpu = int(cpu_s) + 5
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard == resource.RLIM_INFINITY or hard > cpu + 5:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    if open_files is not None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = int(open_files) if hard == resource.RLIM_INFINITY else min(int(open_files), hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def _moved_high(fd: int, randomly: bool = False) -> int:
    """``fd`` moved to a descriptor closed on exec, at or above :data:`HIGH_DESCRIPTOR` (``randomly``: an
    unpredictable one, away from the low numbers a kernel's code might guess); the old one is closed."""
    lowest = HIGH_DESCRIPTOR + (secrets.randbelow(800) if randomly else 0)
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, lowest)
    os.close(fd)
    return moved


def _not_dumpable() -> None:
    """No process of the same user may read or write this one's memory through /proc (ptrace access):
    the student's code, in the emulator's worker, runs beside it in the sandbox."""
    PR_SET_DUMPABLE = 4
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _become(uid: int) -> None:
    """Inside the sandbox, before anything else: become ``uid`` (no longer the machine's root), which
    drops the last capabilities; refuse to go on if any is left."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    caps = [line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
            if line.startswith(("CapEff:", "CapPrm:", "CapAmb:"))]
    if os.getresuid() != (uid, uid, uid) or any(int(c, 16) for c in caps):
        raise SystemExit("the grading child could not give up its privileges; nothing was run")


if __name__ == "__main__":  # python -m autograder.grading_child (reads a request on stdin)
    child_main()
