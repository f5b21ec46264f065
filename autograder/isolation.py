"""Grade one submission in a fresh, sandboxed child process, and the child's side of that.

The parent (the grader, holding the secret) starts ``python -I`` inside the
sandbox (:mod:`autograder.sandbox`: namespaces, a read-only view of the
system, a seccomp filter, all in place before the child's first
instruction), with a scrubbed environment, its working directory a fresh
scratch directory, its own session, and limits on CPU time, file size and
core dumps (and, inside the sandbox, on processes: the child sets
``RLIMIT_NPROC`` after becoming the sandbox's own uid, before any student code
exists); it polls the whole process tree (:mod:`autograder.process_tree`) -- its resident memory, the memfds
it holds and its /dev/shm, its number of processes and threads, and the files
it wrote to its scratch directory and build cache -- and kills it past a
limit, and kills it at a hard wall-clock deadline.  Grading (``mode="hidden"``)
refuses to run where the sandbox cannot start; ``check()`` on a student's own
machine runs without it there (it guards nothing of anyone else's).

What crosses into the child, on its stdin (then closed): the exercise name,
the kernel source text, the launch integers, and the list of cases to run
(shape, seed) -- the seeds derived in the parent from the secret, the
student id and the exercise, so the secret itself never leaves the parent
and nothing about the hidden cases is ever written to a file.

What comes back: the arrays every launch left in its buffers, as files in
the scratch directory, which the parent reads after the sandbox is gone and
judges itself (:mod:`autograder.verdict`: its own references, its own
comparison, its own scoring); and the child's account of each case (hints,
where it stopped) as JSON lines on a pipe, tagged with a random nonce.  That
account can only take points away: a case counts only if the parent's own
comparison passes too.  A line per finished case arrives as the check runs,
so a hang or a crash in the middle still reports where it stopped.

A hung kernel, an illegal address, a compile error, a crash or a huge
allocation costs that exercise only: the parent turns any of them into an
:class:`~autograder.result.ExerciseResult` with a status and a message.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import secrets as _secrets
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import emulator_builds, kernel_images, sandbox
from .case_plan import plan_cases
from .exercise import Exercise, LaunchError
from .result import ExerciseResult, ShapeResult
from .submission import KernelSubmission
from .gpu_turn import GpuTurn
from .process_tree import descendants, kill_group, task_count, tree_memory_bytes, wait_gone, written_bytes
from .timing_policy import TimingSets, timed_shape, times_kernel
from .verdict import judge

REPO_ROOT = Path(__file__).resolve().parent.parent
SECRET_ENV = "DLK_GRADER_SECRET"
#: Environment variables the child may see (besides those set below).
PASS_ENV = (
    "PATH", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
    "DLK_BACKEND", "DLK_GPU_TIMEOUT", "SYSTEMROOT",
)
PASS_ENV_PREFIXES = ("DLK_EMULATOR_",)
#: Resident memory a grading child (with its compiler and emulator worker) may use.
MEMORY_LIMIT_CPU = 4 * 2**30
MEMORY_LIMIT_GPU = 16 * 2**30  # timing holds two large input sets, their float64 references and scales
#: What one grading may write to its scratch directory and its build cache together: the arrays it hands back
#: (the largest exercise's timing-size output is about 220 MiB) and the builds, with room to spare.
SCRATCH_LIMIT = 4 * 2**30
#: Seconds between two measurements of what the grading wrote (a walk of its folders).
SCRATCH_POLL_S = 0.5
LOG_LIMIT = 4000  # characters of captured stdout/stderr kept


# ------------------------------------------------------------------ seeds
def _resolve_secret(secret: bytes | None) -> bytes:
    if secret is not None:
        return secret if isinstance(secret, bytes) else str(secret).encode()
    env = os.environ.get(SECRET_ENV)
    if env:
        return env.encode()
    # No secret held: fresh seeds for this run only (nothing to reproduce them from).
    return _secrets.token_bytes(32)


# ------------------------------------------------------------------ parent
def _build_cache_dir(student_id: str = "") -> str:
    """Where the child caches compiled kernels: one folder per student (emulator builds are
    keyed by a hash of the source and verified on use), so that nothing one student's
    grading leaves in a cache is ever used for another's."""
    who = hashlib.sha256(student_id.encode()).hexdigest()[:20] if student_id else "check"
    return str(_grader_cache() / "students" / who)


def _grader_cache() -> Path:
    return Path(os.environ.get("DLK_CACHE_DIR") or Path.home() / ".cache" / "dlk-grader")


#: Seconds one emulator launch may run unless $DLK_EMULATOR_TIMEOUT says otherwise (the README states it).
EMULATOR_LAUNCH_LIMIT_S = 60.0
#: A launch may use at most this share of the exercise's time limit, so that a hang is
#: reported by the emulator (naming the kernel) before the process is killed.
LAUNCH_SHARE_OF_LIMIT = 0.6


def launch_limit_s(limit: float, variable: str = "DLK_EMULATOR_TIMEOUT", default: float = EMULATOR_LAUNCH_LIMIT_S) -> float:
    """The endless-loop limit in force for one launch in a child whose whole limit is ``limit`` seconds."""
    return max(2.0, min(float(os.environ.get(variable, default)), LAUNCH_SHARE_OF_LIMIT * limit))


def _child_env(tmp: str, backend: str | None, limit: float, cache_dir: str | None = None) -> dict:
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.update({k: v for k, v in os.environ.items() if k.startswith(PASS_ENV_PREFIXES)})
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update({
        "HOME": tmp, "TMPDIR": tmp, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
        "MPLBACKEND": "Agg", "DLK_EMULATOR_SANDBOX": "1", "OMP_NUM_THREADS": "1",
        # Builds are written by the grader's own code in the child, never by a kernel
        # (kernels run under the emulator's sandbox, which forbids writing files).
        "DLK_CACHE_DIR": cache_dir or _build_cache_dir(),
        "DLK_EMULATOR_TIMEOUT": str(launch_limit_s(limit)),
        "DLK_GPU_TIMEOUT": str(launch_limit_s(limit, "DLK_GPU_TIMEOUT", 120.0)),
    })
    if backend:
        env["DLK_BACKEND"] = backend
    return env


def _apply_limits(cpu_s: float, file_bytes: int, processes: int | None = None) -> None:
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


def _base_result(ex: Exercise | None, sub: KernelSubmission, mode: str, status: str, message: str) -> ExerciseResult:
    return ExerciseResult(
        exercise=sub.exercise,
        status=status,
        correctness_max=ex.correctness_points if ex else 0.0,
        speed_max=ex.speed_points if ex else 0.0,
        message=message,
        mode=mode,
        launch=dict(sub.launch),
    )


def grade_submission(
    sub: KernelSubmission,
    mode: str = "hidden",
    secret: bytes | None = None,
    student_id: str = "",
    timeout_s: float | None = None,
    backend: str | None = None,
    memory_limit: int | None = None,
) -> ExerciseResult:
    """Check (and on a GPU, in hidden mode, time) one submission in a fresh child process.

    ``mode="visible"``: the visible shapes with public seeds (what ``check()``
    runs).  ``mode="hidden"``: visible and hidden shapes with seeds derived
    from ``secret`` (or ``$DLK_GRADER_SECRET``, or a fresh random one), and
    speed on a GPU.  ``backend`` forces "gpu" or "cpu" in the child (default:
    ``$DLK_BACKEND``, else the child's own choice).  Never raises for
    anything the submission does.
    """
    from .exercises import all_exercises

    if mode not in ("visible", "hidden"):
        raise ValueError(f"mode must be 'visible' or 'hidden', not {mode!r}")
    ex = all_exercises().get(sub.exercise)
    if ex is None:
        known = ", ".join(sorted(all_exercises()))
        return _base_result(None, sub, mode, "invalid_launch",
                            f"There is no exercise called '{sub.exercise}' (the name after %%cuda). Known exercises: {known}.")
    if sub.parse_error:
        return _base_result(ex, sub, mode, "invalid_launch", f"The %%cuda line could not be read: {sub.parse_error}.")
    try:
        launch = ex.validate_launch(sub.launch)
    except LaunchError as exc:
        return _base_result(ex, sub, mode, "invalid_launch", f"Launch configuration refused: {exc}.")
    if not sub.source.strip():
        magic, what = ("%%tc", "the index notation") if ex.language == "tc" else ("%%cuda", "the kernel")
        return _base_result(ex, sub, mode, "not_written", f"No code was written: the '{magic} {ex.name}' cell is empty. Write {what} {ex.signature} in it.")

    if mode == "hidden":
        sandbox.require()  # grading never runs a submission outside the sandbox (raises, naming the reason)
    secret_bytes = _resolve_secret(secret)
    cases = plan_cases(ex, launch, mode, secret_bytes, student_id)
    limit = float(timeout_s if timeout_s is not None else (ex.time_limit_s if mode == "hidden" else ex.visible_time_limit_s))
    nonce = _secrets.token_hex(16)
    request = {
        "exercise": ex.name,
        "source": sub.source,
        "cell_line": sub.cell_line,
        "launch": launch,
        "mode": mode,
        "cases": cases,
        "nonce": nonce,
        "cache_dir": _build_cache_dir(student_id),
        "cpu_limit_s": limit * 2 + 30,
        "file_limit_bytes": 512 * 2**20,
    }
    started = time.monotonic()
    lock = GpuTurn(mode, backend)
    if memory_limit is None:
        memory_limit = MEMORY_LIMIT_GPU if lock.wants_gpu else MEMORY_LIMIT_CPU
    timing_sets = None
    if mode == "hidden" and times_kernel(ex, lock.wants_gpu, mode):
        # The grader chooses the timing's input sets and draws them itself once the child is timing (a kernel
        # that fails a case is never timed): it checks the output of the last timed call against its own
        # float64 reference of that call's inputs.
        timing_sets = TimingSets.fresh(ex, timed_shape(ex), start=False)
        request["timing_seeds"] = list(timing_sets.seeds)
    # the grader's own kernels, compiled here once for every child (the child loads, never writes, them)
    images = kernel_images.folder_for(ex) if lock.wants_gpu else None
    result = _run_child(ex, sub, request, limit, backend, memory_limit, gpu=lock.wants_gpu, images=images,
                        lock=lock, timing_sets=timing_sets)
    result.elapsed_s = round(time.monotonic() - started, 3)
    return result


def _import_path() -> list[str]:
    """The repository, then the grader's own import path (PyCUDA may come from PYTHONPATH),
    without the current directory: a student's folder must not shadow a module."""
    cwd = os.path.realpath(os.getcwd())
    path = [str(REPO_ROOT)]
    for entry in sys.path:
        if not entry or entry == "." or os.path.realpath(entry) == cwd and os.path.realpath(entry) != str(REPO_ROOT):
            continue
        if entry not in path:
            path.append(entry)
    return path


def _child_command() -> list[str]:
    # -I: no user site, no PYTHONPATH, no current directory on sys.path; the
    # import path is set explicitly from the grader's own.
    bootstrap = (
        "import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
        "from autograder.isolation import child_main; child_main()"
    )
    return [sys.executable, "-I", "-c", bootstrap, json.dumps(_import_path())]


def _run_child(ex: Exercise, sub: KernelSubmission, request: dict, limit: float, backend: str | None, memory_limit: int,
               gpu: bool = False, images: str | None = None, lock: GpuTurn | None = None,
               timing_sets: TimingSets | None = None) -> ExerciseResult:
    nonce = request["nonce"]
    cache_dir = request.pop("cache_dir", None)  # the child's environment says it; the request need not
    with tempfile.TemporaryDirectory(prefix="dlk-grade-") as tmp:
        request["outputs_dir"] = tmp
        read_fd, write_fd = os.pipe()
        request["result_fd"] = write_fd
        child = _child_command()
        pass_fds = [write_fd]
        sandboxed = not sandbox.unavailable_reason()
        launch = None
        env = _child_env(tmp, backend, limit, cache_dir)
        shared = {"DLK_KERNEL_IMAGES": images} if images else {}  # the grader's own builds, lent read-only
        if sandboxed:
            if not gpu:
                # the emulator's runtime, built by this process (only a sandbox keeps the child from writing it)
                prebuilt = emulator_builds.folder(_grader_cache(), env)
                if prebuilt:
                    shared["DLK_EMULATOR_PREBUILT"] = prebuilt
            # Everything the child and the student's code will ever run starts inside this sandbox.
            launch = sandbox.command(child, tmp, writable=[cache_dir or _build_cache_dir()], gpu=gpu,
                                     import_path=_import_path(), readonly=list(shared.values()))
            child = launch.argv
            pass_fds += launch.pass_fds
            request["sandbox_uid"] = launch.drop_to
        env.update(shared)
        lock_fd = lock.open_for_child() if lock is not None else None  # closed here with the others once passed
        if lock_fd is not None:
            request["gpu_lock_fd"] = lock_fd
            pass_fds.append(lock_fd)
        cached_before = written_bytes([cache_dir], 2**62)  # this student's earlier builds are not this grading's
        try:
            proc = subprocess.Popen(
                child,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=tmp,
                env=env,
                pass_fds=tuple(pass_fds),
                start_new_session=True,
            )
        except BaseException:
            if launch is not None:
                launch.abandon()
            raise
        finally:
            for fd in pass_fds:
                os.close(fd)
        if launch is not None:
            launch.pass_fds = ()  # closed just above
            launch.started()  # the sandbox's user mapping, where the grader writes it
        try:
            proc.stdin.write(json.dumps(request, default=_json_default).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass

        events: list[dict] = []
        log = bytearray()
        buffer = b""
        final: dict | None = None
        killed_for = ""
        deadline = time.monotonic() + limit
        waiting_since: float | None = None  # the child waits for its turn on the card (not counted)
        written_at = 0.0  # when what the grading wrote was last measured
        sel = selectors.DefaultSelector()
        sel.register(read_fd, selectors.EVENT_READ, "result")
        sel.register(proc.stdout, selectors.EVENT_READ, "log")
        open_streams = 2
        try:
            while open_streams:
                now = time.monotonic()
                if now > deadline and waiting_since is None:
                    killed_for = "timeout"
                    break
                for key, _ in sel.select(timeout=0.1 if waiting_since is not None else min(0.1, max(0.0, deadline - now))):
                    if key.data == "result":
                        chunk = os.read(read_fd, 65536)
                    else:
                        chunk = os.read(proc.stdout.fileno(), 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        open_streams -= 1
                        continue
                    if key.data == "log":
                        if len(log) < 4 * LOG_LIMIT:
                            log += chunk
                        continue
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        try:
                            msg = json.loads(line)
                        except ValueError:
                            continue
                        if not isinstance(msg, dict) or msg.get("nonce") != nonce:
                            continue  # not from the checker
                        if waiting_since is not None:  # the child has its turn: its time runs again
                            deadline += time.monotonic() - waiting_since
                            waiting_since = None
                        if msg.get("event") == "result":
                            final = msg.get("result")
                        elif timing_sets is not None and msg.get("event") == "stage" and msg.get("stage") == "timing":
                            timing_sets.start()  # drawn beside the child's timing, in time for the verdict
                            events.append(msg)
                        elif (lock_fd is not None and msg.get("event") == "stage"
                              and msg.get("stage") == GpuTurn.WAITING
                              and not any(e.get("stage") == GpuTurn.WAITING for e in events)):
                            waiting_since = time.monotonic()  # once per child, and only where it was given a lock
                            events.append(msg)
                        else:
                            events.append(msg)
                tree = descendants(proc.pid)
                if task_count(tree) >= sandbox.PROCESS_LIMIT:
                    killed_for = "processes"  # at the sandbox's limit: only a fork bomb gets there
                    break
                if tree_memory_bytes(tree) > memory_limit:
                    killed_for = "memory"
                    break
                if time.monotonic() - written_at > SCRATCH_POLL_S:
                    written_at = time.monotonic()
                    if written_bytes([tmp, cache_dir], SCRATCH_LIMIT + cached_before) - cached_before > SCRATCH_LIMIT:
                        killed_for = "files"
                        break
        finally:
            sel.close()
            ended: list[int] = []
            if killed_for or proc.poll() is None:
                if killed_for:
                    ended = kill_group(proc)
                try:
                    proc.wait(timeout=max(1.0, deadline - time.monotonic() + 5) if not killed_for else 10)
                except subprocess.TimeoutExpired:
                    killed_for = killed_for or "timeout"
                    ended = kill_group(proc)
                    proc.wait()
            else:
                # The child closed its pipes; make sure no grandchild lingers in the group.
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            wait_gone(ended)
            os.close(read_fd)
            proc.stdout.close()
        log_text = log.decode(errors="replace")[-LOG_LIMIT:]
        returncode = proc.returncode
        if sandboxed and returncode is not None and 128 < returncode < 128 + 65:
            returncode = 128 - returncode  # bubblewrap reports a child killed by signal N as 128 + N
        if final is None or killed_for:
            return _result_without_report(ex, sub, request, events, killed_for, returncode, log_text, limit,
                                          memory_limit)
        # The sandbox and every process in it are gone: judge from the arrays it left in the scratch directory.
        try:
            reported = ExerciseResult.from_dict(final)
        except (TypeError, ValueError, AttributeError):
            return _result_without_report(ex, sub, request, events, "", returncode, log_text, limit, memory_limit)
        timing_failure = next((e for e in events if e.get("event") == "timing_failure"), None)
        result = judge(ex, request, reported, tmp, speed_allowed=gpu, timing_failure=timing_failure,
                       timing_sets=timing_sets)
    if log_text.strip():
        result.log = (result.log + "\n" if result.log else "") + "output:\n" + log_text
    return result


def _result_without_report(ex, sub, request, events, killed_for, returncode, log_text, limit, memory_limit) -> ExerciseResult:
    shapes = [ShapeResult(**_shape_fields(e["case"])) for e in events if e.get("event") == "case"]
    running = next((e for e in reversed(events) if e.get("event") == "start_case"), None)
    done = len(shapes)
    where = ""
    if running is not None and running.get("index", -1) >= done:
        c = request["cases"][running["index"]]
        where = f" while running {'the visible' if c['visible'] else 'a hidden'} case {ex.shape_label(c['shape'])}"
    stage = next((e.get("stage") for e in reversed(events) if e.get("event") == "stage"), "")
    if stage == "compile" and running is None:
        where = " while compiling"
    elif stage == "timing":
        where = " while timing the kernel"
    if killed_for == "timeout":
        status = "timeout"
        message = (
            f"The check did not finish within {limit:.0f} s{where}, so it was stopped. "
            f"A kernel that never returns usually has a loop whose index does not advance (a grid-stride step of 0, "
            f"a `while` without progress) or a __syncthreads() that some threads of the block never reach."
        )
    elif killed_for == "memory":
        status = "crashed"
        message = f"The check used more than {memory_limit / 2**30:.1f} GiB of memory{where} and was stopped."
    elif killed_for == "files":
        status = "crashed"
        limit_text = f"{SCRATCH_LIMIT / 2**30:g} GiB" if SCRATCH_LIMIT >= 2**30 else f"{SCRATCH_LIMIT / 2**20:g} MiB"
        message = (f"The check wrote more than {limit_text} of files{where} and was stopped. "
                   f"A kernel cell needs no files of its own: remove anything the cell writes to a file.")
    elif killed_for == "processes":
        status = "crashed"
        message = (f"Too many processes: the check reached the limit of {sandbox.PROCESS_LIMIT} processes and threads"
                   f"{where} and was stopped. A kernel cell needs no processes of its own: remove any fork(), "
                   f"system() or thread the cell starts.")
    else:
        status = "crashed"
        if returncode is not None and returncode < 0:
            try:
                sig = signal.Signals(-returncode).name
            except ValueError:
                sig = f"signal {-returncode}"
            how = f"was killed by {sig}"
        else:
            how = f"exited (status {returncode}) without a result"
        message = (
            f"The process checking the kernel {how}{where}. This usually means the kernel wrote far outside its "
            f"buffers (a missing bounds check) and corrupted memory."
        )
    if shapes:
        message += f" {sum(s.passed for s in shapes)} of {len(shapes)} cases finished before that passed."
    result = ExerciseResult(
        exercise=ex.name,
        status=status,
        correctness_max=ex.correctness_points,
        speed_max=ex.speed_points,
        shapes=shapes,
        message=message,
        mode=request["mode"],
        launch=dict(request["launch"]),
        log=log_text,
    )
    return result


def _shape_fields(d: dict) -> dict:
    from dataclasses import fields

    names = {f.name for f in fields(ShapeResult)}
    return {k: v for k, v in d.items() if k in names}


def _json_default(value):
    """NumPy scalars and arrays (from an exercise's shapes or timings) as plain JSON values."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot send {type(value).__name__} to or from the grading process")


# ------------------------------------------------------------------ child
class _Channel:
    """The child's end of the result pipe: one JSON line per message, tagged with the nonce."""

    def __init__(self, fd: int, nonce: str):
        self.fd = fd
        self.nonce = nonce

    def send(self, event: str, **payload) -> None:
        from .result import _clean

        data = json.dumps(_clean({"nonce": self.nonce, "event": event, **payload}), allow_nan=False,
                          default=_json_default).encode() + b"\n"
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]


def _check_request(request: dict, send) -> ExerciseResult:
    """Check the request's submission: index notation is turned into a kernel (tc_grading), a kernel is run as it is."""
    from .exercises import get_exercise

    exercise = get_exercise(request["exercise"])
    if exercise.language == "tc":
        from .tc_grading import run_tc_request

        return run_tc_request(request, exercise, send)
    from .checker import run_request

    return run_request(request, send)


def _not_dumpable() -> None:
    """No process of the same user may read or write this one's memory through /proc (ptrace access):
    the student's code, in the emulator's worker, runs beside it in the sandbox."""
    import ctypes

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


def child_main() -> None:
    """Entry point of the grading child: read the request, check, report, exit."""
    request = json.loads(sys.stdin.buffer.read())
    sys.stdin.close()
    if request.get("sandbox_uid") is not None:
        _become(int(request["sandbox_uid"]))
    _not_dumpable()
    _apply_limits(float(request.get("cpu_limit_s", 300)), int(request.get("file_limit_bytes", 512 * 2**20)),
                  processes=sandbox.PROCESS_LIMIT if "sandbox_uid" in request else None)
    # Move the result pipe to an unpredictable high descriptor, away from the
    # low numbers a kernel's code might guess.
    import fcntl

    fd = fcntl.fcntl(int(request["result_fd"]), fcntl.F_DUPFD_CLOEXEC, 100 + _secrets.randbelow(800))
    os.close(int(request["result_fd"]))
    channel = _Channel(fd, request["nonce"])
    if request.get("gpu_lock_fd") is not None:  # nothing the child starts (nvcc) inherits its turn on the card
        lock_fd = fcntl.fcntl(int(request["gpu_lock_fd"]), fcntl.F_DUPFD_CLOEXEC, 100)
        os.close(int(request["gpu_lock_fd"]))
        request["gpu_lock_fd"] = lock_fd

    try:
        result = _check_request(request, channel.send)
    except BaseException as exc:  # a bug in the grader itself: report it, never a traceback as a score
        import traceback

        result = ExerciseResult(
            exercise=request.get("exercise", ""),
            status="crashed",
            message=f"The grader failed while checking this kernel ({type(exc).__name__}: {exc}). Please tell the instructor.",
            log=traceback.format_exc()[-LOG_LIMIT:],
            mode=request.get("mode", ""),
        )
    channel.send("result", result=result.to_dict())
    sys.stdout.flush()
    os._exit(0)  # no atexit handlers of a possibly broken CUDA context


if __name__ == "__main__":  # python -m autograder.isolation (reads a request on stdin)
    child_main()
