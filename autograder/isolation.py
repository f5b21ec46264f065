"""Grade one submission in a fresh, sandboxed child process: the grader's side of it.

The parent (the grader, holding the student's key) starts ``python -I`` inside the
sandbox (:mod:`autograder.sandbox`: namespaces, a read-only view of the
system, a seccomp filter, all in place before the child's first
instruction), in a cgroup of its own where one can be made
(:mod:`autograder.grading_cgroup`), with a scrubbed environment, its working
directory a fresh tmpfs of its own (:mod:`autograder.scratch_space`) and its
own session; the child
(:mod:`autograder.grading_child`) sets its limits on CPU time, file size and
core dumps (and, inside the sandbox, on processes: ``RLIMIT_NPROC`` after
becoming the sandbox's own uid) before any student code exists.  The parent
polls the whole process tree (:mod:`autograder.process_tree`) -- its resident memory, the memfds
and pipes it holds, its /dev/shm and its scratch space, its number of processes
and threads, the inodes it made -- and kills it past a limit, or when the
kernel killed a task of its cgroup at ``memory.max``, and at a hard
wall-clock deadline.  Grading (``mode="hidden"``)
refuses to run where the sandbox cannot start; ``check()`` on a student's own
machine runs without it there (it guards nothing of anyone else's).

What crosses into the child, on its stdin (a line, then closed once the child
is ready and the grader holds its scratch space): the exercise name, the kernel
source text, the launch integers, and the list of cases to run (shape, seed) --
the seeds derived in the parent from the student's key, the student id, the
exercise and the submission (:mod:`autograder.case_plan`), so the key itself
never leaves the parent and nothing about the hidden cases is ever written to a
file.

What comes back: the arrays every launch left in its buffers, as files in
its scratch space, which the parent reads after the sandbox is gone and
judges itself (:mod:`autograder.verdict`: its own references, its own
comparison, its own scoring); and the child's account of each case (hints,
where it stopped) as JSON lines on a pipe, tagged with a random nonce.  That
account can only take points away: a case counts only if the parent's own
comparison passes too.  A line per finished case arrives as the check runs,
so a hang or a crash in the middle still reports where it stopped.

A hung kernel, an illegal address, a compile error, a crash or a huge
allocation costs that exercise only: the parent turns any of them into an
:class:`~autograder.result.ExerciseResult` with a status and a message.  A
failure of the grader's own (its scratch space that cannot be written though
the submission did not fill it, its code failing in the child, a sandbox that
never became ready, a full disk) raises
:class:`~autograder.infrastructure.InfrastructureError`: never a score.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path

from . import emulator_builds, kernel_images, sandbox
from .case_plan import case_label, plan_cases, submission_digest
from .course_secret import course_secret_of_this_run
from .exercise import Exercise, LaunchError
from .exercises import all_exercises
from .gpu_turn import GpuTurn
from .grading_cgroup import GradingCgroup, entering_command
from .phase_times import CHILD_IMPORTS, GRADER_BUILDS, SANDBOX_END, SANDBOX_START, VERDICT, PhaseTimes, reported_phases
from .infrastructure import InfrastructureError, disk_failure, is_disk_failure
from .process_tree import descendants, kill_group, task_count, tree_memory_bytes, wait_gone
from .scratch_space import GradingScratch
from .result import ExerciseResult, ShapeResult, json_default
from .submission import KernelSubmission
from .timing_policy import TimingSets, timed_shape, times_kernel
from .verdict import conceal_hidden, judge

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Environment variables the child may see (besides those set below).
PASS_ENV = (
    "PATH", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
    "DLK_BACKEND", "DLK_GPU_TIMEOUT", "SYSTEMROOT",
)
PASS_ENV_PREFIXES = ("DLK_EMULATOR_",)
PROFILE_ENV = "DLK_EMULATOR_PROFILE"  # kernels.runtime.emulator.profiling.ENV_VAR: not passed on
#: Resident memory a grading child (with its compiler and emulator worker) may use.
MEMORY_LIMIT_CPU = 4 * 2**30
MEMORY_LIMIT_GPU = 16 * 2**30  # timing holds two large input sets, their float64 references and scales
#: Seconds between two measurements of what the grading wrote and of the memory its tmpfs holds.
SCRATCH_POLL_S = 0.5
#: Tasks a grading's cgroup may hold besides the sandbox's process limit (bubblewrap's own processes).
CGROUP_TASKS_BESIDE = 8
#: Descriptors each process of a grading on the emulator may hold (RLIMIT_NOFILE): an honest grading needs a few
#: dozen; it bounds how many pipes a submission can fill where no cgroup counts their buffers.
OPEN_FILES_LIMIT = 256
LOG_LIMIT = 4000  # characters of captured stdout/stderr kept

#: Seconds one emulator launch may run unless $DLK_EMULATOR_TIMEOUT says otherwise (the README states it).
EMULATOR_LAUNCH_LIMIT_S = 60.0
#: A launch may use at most this share of the exercise's time limit, so that a hang is
#: reported by the emulator (naming the kernel) before the process is killed.
LAUNCH_SHARE_OF_LIMIT = 0.6

#: Why a child was stopped when the grader itself was interrupted (Ctrl-C): no verdict, no result.
INTERRUPTED = "interrupted"
#: Set while the grading process is being interrupted: every child still running ends at once.
_stop_children = threading.Event()


class GradingInterrupted(Exception):
    """The grader was interrupted while this exercise was graded: its child was ended, and there is no result."""


def stop_running_gradings() -> None:
    """End every grading child of this process now (the grader is interrupted); each such grading raises
    :class:`GradingInterrupted`.  :func:`allow_gradings` lets the next ones run."""
    _stop_children.set()


def allow_gradings() -> None:
    _stop_children.clear()


# ------------------------------------------------------------------ one grading
def grade_submission(
    sub: KernelSubmission,
    mode: str = "hidden",
    student_key: bytes | str | None = None,
    student_id: str = "",
    timeout_s: float | None = None,
    backend: str | None = None,
    memory_limit: int | None = None,
    profile: bool = False,
) -> ExerciseResult:
    """Check (and on a GPU, in hidden mode, time) one submission in a fresh child process.

    ``mode="visible"``: the visible shapes with public seeds (what ``check()``
    runs).  ``mode="hidden"``: visible and hidden shapes with seeds derived
    from ``student_key`` (:func:`autograder.course_secret.student_key`; without one,
    :func:`~autograder.course_secret.course_secret_of_this_run`), and
    speed on a GPU.  ``backend`` forces "gpu" or "cpu" in the child (default:
    ``$DLK_BACKEND``, else the child's own choice).  ``profile``: in visible mode on
    the emulator, profile the kernel on its largest visible case
    (:mod:`autograder.kernel_profile`).  Never raises for anything the submission does.
    """
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
    cases = plan_cases(ex, launch, mode, _key_bytes(student_key), student_id, submission_digest(sub.source, launch))
    limit = float(timeout_s if timeout_s is not None else (ex.time_limit_s if mode == "hidden" else ex.visible_time_limit_s))
    request = {
        "exercise": ex.name,
        "source": sub.source,
        "cell_line": sub.cell_line,
        "launch": launch,
        "mode": mode,
        "cases": cases,
        "nonce": secrets.token_hex(16),
        "cpu_limit_s": limit * 2 + 30,
        "file_limit_bytes": 512 * 2**20,
        "profile": bool(profile) and mode == "visible",
    }
    started = time.monotonic()
    lock = GpuTurn(mode, backend)
    if memory_limit is None:
        memory_limit = MEMORY_LIMIT_GPU if lock.wants_gpu else MEMORY_LIMIT_CPU
    if not lock.wants_gpu:
        request["open_files_limit"] = OPEN_FILES_LIMIT
    timing_sets = None
    if mode == "hidden" and times_kernel(ex, lock.wants_gpu, mode):
        # The grader chooses the timing's input sets and draws them itself once the child is timing (a kernel
        # that fails a case is never timed): it checks the output of the last timed call against its own
        # float64 reference of that call's inputs.
        timing_sets = TimingSets.fresh(ex, timed_shape(ex), start=False)
        request["timing_seeds"] = list(timing_sets.seeds)
    phases = PhaseTimes()
    try:
        # the grader's own kernels, compiled here once for every child (the child loads, never writes, them)
        with phases.phase(GRADER_BUILDS):
            images = kernel_images.folder_for(ex, _grader_cache()) if lock.wants_gpu else None
        result = _run_child(ex, request, limit, backend, memory_limit, gpu=lock.wants_gpu, images=images,
                            lock=lock, timing_sets=timing_sets, cache_dir=_check_cache_dir(mode), phases=phases)
    except OSError as exc:
        if is_disk_failure(exc):
            raise disk_failure(exc, "the grading's files (its scratch folder, or the grader's builds)") from exc
        raise
    # What the emulator decided stands until a GPU confirms it: nvcc and the card may differ from it.
    result.provisional = mode == "hidden" and not lock.wants_gpu
    result.elapsed_s = round(time.monotonic() - started, 3)
    result.phases = phases.to_dict()
    return result


def _key_bytes(student_key: bytes | str | None) -> bytes:
    """The key the hidden seeds derive from, as bytes (none given: the course secret of this run)."""
    if student_key is None:
        student_key = course_secret_of_this_run()
    return student_key if isinstance(student_key, bytes) else str(student_key).encode()


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


# ------------------------------------------------------------------ the child's surroundings
def _check_cache_dir(mode: str) -> str | None:
    """Where ``check()`` keeps a student's builds from one check to the next (on their own machine); a
    grading keeps none: its builds live in its scratch space and go with it (:mod:`autograder.scratch_space`)."""
    return str(_grader_cache() / "check") if mode == "visible" else None


def _grader_cache() -> Path:
    return Path(os.environ.get("DLK_CACHE_DIR") or Path.home() / ".cache" / "dlk-grader")


def launch_limit_s(limit: float, variable: str = "DLK_EMULATOR_TIMEOUT", default: float = EMULATOR_LAUNCH_LIMIT_S) -> float:
    """The endless-loop limit in force for one launch in a child whose whole limit is ``limit`` seconds."""
    return max(2.0, min(float(os.environ.get(variable, default)), LAUNCH_SHARE_OF_LIMIT * limit))


def _child_env(tmp: str, backend: str | None, limit: float, cache_dir: str | None = None) -> dict:
    """The child's environment: the grader's own few variables, its home and temporary folder in its
    scratch space, and its build cache there too unless ``cache_dir`` names one (``check()``'s)."""
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.update({k: v for k, v in os.environ.items() if k.startswith(PASS_ENV_PREFIXES)})
    env.pop(PROFILE_ENV, None)  # the child profiles what its request asks (check()'s one launch), never every launch
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update({
        "HOME": tmp, "TMPDIR": tmp, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
        "MPLBACKEND": "Agg", "DLK_EMULATOR_SANDBOX": "1", "OMP_NUM_THREADS": "1",
        # Builds are written by the grader's own code in the child, never by a kernel
        # (kernels run under the emulator's sandbox, which forbids writing files).
        "DLK_CACHE_DIR": cache_dir or os.path.join(tmp, "builds"),
        "DLK_EMULATOR_TIMEOUT": str(launch_limit_s(limit)),
        "DLK_GPU_TIMEOUT": str(launch_limit_s(limit, "DLK_GPU_TIMEOUT", 120.0)),
    })
    if backend:
        env["DLK_BACKEND"] = backend
    return env


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
        "import sys, json, time; started = time.perf_counter(); sys.path[:] = json.loads(sys.argv[1]); "
        "from autograder.grading_child import child_main; child_main(started)"
    )
    return [sys.executable, "-I", "-c", bootstrap, json.dumps(_import_path())]


# ------------------------------------------------------------------ running the child
def _run_child(ex: Exercise, request: dict, limit: float, backend: str | None, memory_limit: int,
               gpu: bool = False, images: str | None = None, lock: GpuTurn | None = None,
               timing_sets: TimingSets | None = None, cache_dir: str | None = None,
               phases: PhaseTimes | None = None) -> ExerciseResult:
    """Run the grading child on ``request`` in a fresh scratch space (and cgroup, where one can be made), then
    judge what it left there; the scratch space, the cgroup and every process are gone when this returns.
    ``phases`` is told where the time went: the grader's own phases and those the child reported."""
    phases = phases if phases is not None else PhaseTimes()
    started, builds_before = time.perf_counter(), phases.seconds.get(GRADER_BUILDS, 0.0)
    scratch = GradingScratch(sandboxed=not sandbox.unavailable_reason())
    group = GradingCgroup.create(memory_limit, sandbox.PROCESS_LIMIT + CGROUP_TASKS_BESIDE) if scratch.sandboxed else None
    child = None
    try:
        child = _start_child(request, scratch, cache_dir, limit, backend, gpu, images, lock, group, phases)
        watch = _ChildWatch(request["nonce"], limit, timing_sets, child.gpu_turn_given,
                            on_ready=lambda: _let_it_go(child, scratch))
        try:
            watch.follow(child, memory_limit, scratch, group)
        except BaseException:  # Ctrl-C in this thread: the child goes now, not at its time limit
            watch.killed_for = watch.killed_for or INTERRUPTED
            raise
        finally:
            followed = time.perf_counter() - started
            with phases.phase(SANDBOX_END):
                _end_child(child, watch, group)
        builds = phases.seconds.get(GRADER_BUILDS, 0.0) - builds_before
        _add_child_phases(phases, watch, (watch.ready_at or started) - started - builds, followed - builds)
        if watch.killed_for == INTERRUPTED:
            raise GradingInterrupted(f"the grading of {ex.name} was interrupted")
        if watch.not_started:
            raise InfrastructureError(watch.not_started)
        with phases.phase(VERDICT):
            return _judged(ex, request, child, watch, scratch, limit, memory_limit, gpu, timing_sets)
    finally:
        with phases.phase(SANDBOX_END):
            if child is not None and child.launch is not None:
                child.launch.release()
            if group is not None:
                group.remove()
            scratch.close()


def _add_child_phases(phases: PhaseTimes, watch: "_ChildWatch", until_ready: float, lifetime: float) -> None:
    """The child's reported phases, and the sandbox's start: ``until_ready`` seconds (from the scratch space's
    making to the child's "ready", the grader's builds left out) less the child's own imports.  A report that
    does not fit the times the grader saw -- imports longer than the start, or the rest longer than the
    child lived after it (``lifetime``, the grader's builds left out) -- is not the child's own account: it is
    dropped, so that a grading's phases never add up to more than its wall time."""
    reported = reported_phases((watch.final or {}).get("phases")) if isinstance(watch.final, dict) else {}
    imports = reported.get(CHILD_IMPORTS, 0.0)
    rounding = 0.001 * (len(reported) + 1)  # the child rounds each phase to the millisecond
    if imports > until_ready + rounding or sum(reported.values()) - imports > lifetime - until_ready + rounding:
        reported = {}
    phases.merge(reported)
    phases.add(SANDBOX_START, until_ready - reported.get(CHILD_IMPORTS, 0.0))


@dataclass
class _Child:
    """A grading child, started."""

    proc: subprocess.Popen
    result_fd: int  # the grader's end of the result pipe
    sandboxed: bool
    gpu_turn_given: bool  # it was given the lock of its turn on the card
    launch: sandbox.Launch | None = None  # its sandbox (the ids it runs as are leased until it is gone)

    def returncode(self) -> int | None:
        code = self.proc.returncode
        if self.sandboxed and code is not None and 128 < code < 128 + 65:
            return 128 - code  # bubblewrap reports a child killed by signal N as 128 + N
        return code


def _start_child(request: dict, scratch: GradingScratch, cache_dir: str | None, limit: float, backend: str | None,
                 gpu: bool, images: str | None, lock: GpuTurn | None, group: GradingCgroup | None,
                 phases: PhaseTimes) -> _Child:
    """Start the child (inside the sandbox wherever it can start) and write ``request`` to its stdin, which stays
    open until the child says it is ready and the grader holds its scratch space (:func:`_let_it_go`)."""
    read_fd, write_fd = os.pipe()
    request["outputs_dir"] = scratch.host_dir  # the child's working directory: inside the sandbox, its tmpfs
    request["result_fd"] = write_fd
    argv = _child_command()
    pass_fds = [write_fd]
    launch = None
    env = _child_env(scratch.host_dir, backend, limit, cache_dir)
    shared = {"DLK_KERNEL_IMAGES": images} if images else {}  # the grader's own builds, lent read-only
    if scratch.sandboxed:
        if not gpu:
            # the emulator's runtime, built by this process (only a sandbox keeps the child from writing it)
            with phases.phase(GRADER_BUILDS):
                prebuilt = emulator_builds.folder(_grader_cache(), env, profile=bool(request.get("profile")))
            if prebuilt:
                shared["DLK_EMULATOR_PREBUILT"] = prebuilt
        # Everything the child and the student's code will ever run starts inside this sandbox.
        launch = sandbox.command(argv, scratch.host_dir, writable=[cache_dir] if cache_dir else [], gpu=gpu,
                                 import_path=_import_path(), readonly=list(shared.values()),
                                 scratch_bytes=scratch.limit_bytes)
        argv = entering_command(launch.argv, group)
        pass_fds += launch.pass_fds
        request["sandbox_uid"] = launch.drop_to
    env.update(shared)
    lock_fd = lock.open_for_child() if lock is not None else None  # closed here with the others once passed
    if lock_fd is not None:
        request["gpu_lock_fd"] = lock_fd
        pass_fds.append(lock_fd)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                cwd=scratch.host_dir, env=env, pass_fds=tuple(pass_fds), start_new_session=True)
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
        proc.stdin.write(json.dumps(request, default=json_default).encode() + b"\n")
        proc.stdin.flush()
    except BrokenPipeError:
        pass
    return _Child(proc, read_fd, launch is not None, lock_fd is not None, launch)


def _let_it_go(child: _Child, scratch: GradingScratch) -> str:
    """The child is ready (nothing of the submission exists yet): take hold of its scratch space, then close
    its stdin, which it waits on.  '' when done, else why the grading cannot go on (the grader's failure)."""
    attached = scratch.attach(child.proc.pid)
    try:
        child.proc.stdin.close()
    except BrokenPipeError:
        pass
    if not attached and child.proc.poll() is None:
        return "the grader could not open the grading's scratch space in its sandbox"
    return ""


class _ChildWatch:
    """What the grader learns while its child runs: the child's messages and output, and why it was stopped."""

    def __init__(self, nonce: str, limit: float, timing_sets: TimingSets | None, gpu_turn_given: bool,
                 on_ready=lambda: ""):
        self.nonce = nonce
        self.timing_sets = timing_sets
        self.gpu_turn_given = gpu_turn_given
        self.on_ready = on_ready
        self.ready = False
        self.ready_at: float | None = None  # time.perf_counter() when the child said it was ready
        self.events: list[dict] = []
        self.log = bytearray()
        self.final: dict | None = None  # the child's result, once it sends one
        self.killed_for = ""  # "timeout", "memory", "files" or "processes" once stopped for it
        self.grader_failed = ""  # the grader's own failure inside the child (or in taking its scratch space)
        self.failure_cause = "grader"  # whose it may be: "grader", "disk" or "files" (grading_child.failure_cause)
        self.deadline = time.monotonic() + limit
        self.waiting_since: float | None = None  # the child waits for its turn on the card (not counted)
        self._unread = b""  # the start of a message line not yet complete
        self._measured_at = 0.0  # when what the grading wrote was last measured

    @property
    def not_started(self) -> str:
        """Why the grading's own set-up failed before any of the submission could run ('' when it did not)."""
        if self.ready or self.final is not None:
            return ""
        text = self.log.decode(errors="replace").strip()[-LOG_LIMIT:]
        return "the grading child did not start" + (f" ({self.killed_for})" if self.killed_for else "") + (
            f": {text}" if text else "")

    def follow(self, child: _Child, memory_limit: int, scratch: GradingScratch, group: GradingCgroup | None) -> None:
        """Read the child's pipes until it closes them, or until it passes a limit (``killed_for`` then says which)."""
        sel = selectors.DefaultSelector()
        sel.register(child.result_fd, selectors.EVENT_READ, "result")
        sel.register(child.proc.stdout, selectors.EVENT_READ, "log")
        open_streams = 2
        try:
            while open_streams:
                if _stop_children.is_set():
                    self.killed_for = INTERRUPTED
                    break
                now = time.monotonic()
                if now > self.deadline and self.waiting_since is None:
                    self.killed_for = "timeout"
                    break
                wait_s = 0.1 if self.waiting_since is not None else min(0.1, max(0.0, self.deadline - now))
                for key, _ in sel.select(timeout=wait_s):
                    fd = child.result_fd if key.data == "result" else child.proc.stdout.fileno()
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        open_streams -= 1
                    elif key.data == "log":
                        if len(self.log) < 4 * LOG_LIMIT:
                            self.log += chunk
                    else:
                        self._read_messages(chunk)
                if self.grader_failed:
                    break
                self.killed_for = self._limit_passed(child, memory_limit, scratch, group)
                if self.killed_for:
                    break
        finally:
            sel.close()

    def _read_messages(self, chunk: bytes) -> None:
        self._unread += chunk
        while b"\n" in self._unread:
            line, self._unread = self._unread.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("nonce") == self.nonce:  # else not from the checker
                self._take(msg)

    def _take(self, msg: dict) -> None:
        if self.waiting_since is not None:  # the child has its turn: its time runs again
            self.deadline += time.monotonic() - self.waiting_since
            self.waiting_since = None
        event, stage = msg.get("event"), msg.get("stage")
        if event == "ready":
            if not self.ready:
                self.ready, self.ready_at = True, time.perf_counter()
                self.grader_failed = self.on_ready()
            return
        if event == "result":
            self.final = msg.get("result")
            return
        if event == "grader_failure":
            self.grader_failed = str(msg.get("reason", "")) or "the grading child failed"
            self.failure_cause = str(msg.get("cause", "grader"))
            return
        if self.timing_sets is not None and event == "stage" and stage == "timing":
            self.timing_sets.start()  # drawn beside the child's timing, in time for the verdict
        elif (self.gpu_turn_given and event == "stage" and stage == GpuTurn.WAITING
              and not any(e.get("stage") == GpuTurn.WAITING for e in self.events)):
            self.waiting_since = time.monotonic()  # once per child, and only where it was given a lock
        self.events.append(msg)

    def _limit_passed(self, child: _Child, memory_limit: int, scratch: GradingScratch,
                      group: GradingCgroup | None) -> str:
        """The limit the child's process tree has passed ("processes", "memory", "files"), else ""."""
        tree = descendants(child.proc.pid)
        if task_count(tree) >= sandbox.PROCESS_LIMIT:
            return "processes"  # at the sandbox's limit: only a fork bomb gets there
        if group is not None and group.out_of_memory():
            return "memory"  # the kernel counted it (memory.max)
        if time.monotonic() - self._measured_at > SCRATCH_POLL_S:
            self._measured_at = time.monotonic()
            if scratch.over_limit():
                return "files"
            if tree_memory_bytes(tree) + scratch.in_memory_bytes() > memory_limit:
                return "memory"
        elif tree_memory_bytes(tree) > memory_limit:
            return "memory"
        return ""


def _end_child(child: _Child, watch: _ChildWatch, group: GradingCgroup | None = None) -> None:
    """The child and every process it started are gone when this returns; its pipes are closed."""
    proc = child.proc
    ended: list[int] = []
    if watch.killed_for or watch.grader_failed or proc.poll() is None:
        if watch.killed_for or watch.grader_failed:
            ended = kill_group(proc)
        try:
            stopped = watch.killed_for or watch.grader_failed
            proc.wait(timeout=max(1.0, watch.deadline - time.monotonic() + 5) if not stopped else 10)
        except subprocess.TimeoutExpired:
            watch.killed_for = watch.killed_for or "timeout"
            ended = kill_group(proc)
            proc.wait()
    else:
        # The child closed its pipes; make sure no grandchild lingers in the group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if group is not None:
        if not watch.killed_for and group.out_of_memory():
            watch.killed_for = "memory"  # the kernel ended it at memory.max
        group.kill()
    wait_gone(ended)
    os.close(child.result_fd)
    proc.stdout.close()
    if not proc.stdin.closed:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass


def _judged(ex: Exercise, request: dict, child: _Child, watch: _ChildWatch, scratch: GradingScratch, limit: float,
            memory_limit: int, gpu: bool, timing_sets: TimingSets | None) -> ExerciseResult:
    """The verdict on what the child reported and left in ``scratch`` (the sandbox and its processes are gone).

    Raises :class:`InfrastructureError` where the grader itself failed: in the child (a failure of its own code,
    a write to a scratch space the submission had not filled) or in taking hold of the scratch space."""
    log_text = watch.log.decode(errors="replace")[-LOG_LIMIT:]
    if watch.grader_failed and not watch.killed_for:
        if watch.failure_cause == "files":
            watch.killed_for = "tampered"  # the submission's code changed the grading's own files
        elif watch.failure_cause == "disk" and scratch.full():
            watch.killed_for = "files"  # the submission filled the space the grader's own files needed
        else:
            raise InfrastructureError(watch.grader_failed)
    if watch.final is None and not watch.killed_for and scratch.full():
        watch.killed_for = "files"  # it ended without a result, its scratch space full: the kernel refused a write
    if not watch.killed_for and scratch.over_limit():
        watch.killed_for = "files"  # past the limit since the last count (a count every SCRATCH_POLL_S): counted at the end
    if watch.final is None or watch.killed_for:
        return _result_without_report(ex, request, watch, child.returncode(), log_text, limit, memory_limit,
                                      scratch.limit_text())
    try:
        reported = ExerciseResult.from_dict(watch.final)
    except (TypeError, ValueError, AttributeError):
        return _result_without_report(ex, request, watch, child.returncode(), log_text, limit, memory_limit,
                                      scratch.limit_text())
    timing_failure = next((e for e in watch.events if e.get("event") == "timing_failure"), None)
    result = judge(ex, request, reported, scratch.path, speed_allowed=gpu, timing_failure=timing_failure,
                   timing_sets=timing_sets)
    if log_text.strip():
        result.log = (result.log + "\n" if result.log else "") + "output:\n" + log_text
    return result


# ------------------------------------------------------------------ a child that sent no result
def _result_without_report(ex: Exercise, request: dict, watch: _ChildWatch, returncode: int | None, log_text: str,
                           limit: float, memory_limit: int, scratch_limits: str) -> ExerciseResult:
    shapes = conceal_hidden([ShapeResult(**_shape_fields(e["case"])) for e in watch.events if e.get("event") == "case"],
                            dict(request["launch"]))
    status, message = _why_it_stopped(watch.killed_for, returncode, limit, memory_limit, scratch_limits,
                                      _where_it_stopped(ex, request, watch.events, len(shapes)))
    if shapes:
        message += f" {sum(s.passed for s in shapes)} of {len(shapes)} cases finished before that passed."
    return ExerciseResult(
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


def _where_it_stopped(ex: Exercise, request: dict, events: list[dict], done: int) -> str:
    """" while running ... case ...", " while compiling", " while timing the kernel" or ""."""
    running = next((e for e in reversed(events) if e.get("event") == "start_case"), None)
    where = ""
    if running is not None and running.get("index", -1) >= done:
        c = request["cases"][running["index"]]
        where = f" while running {'the visible case ' if c['visible'] else ''}{case_label(ex, c)}"
    stage = next((e.get("stage") for e in reversed(events) if e.get("event") == "stage"), "")
    if stage == "compile" and running is None:
        where = " while compiling"
    elif stage == "timing":
        where = " while timing the kernel"
    return where


def _why_it_stopped(killed_for: str, returncode: int | None, limit: float, memory_limit: int, scratch_limits: str,
                    where: str) -> tuple[str, str]:
    """(status, message) of a child stopped for ``killed_for``, or that ended (``returncode``) without a result."""
    if killed_for == "timeout":
        return "timeout", (
            f"The check did not finish within {limit:.0f} s{where}, so it was stopped. "
            f"A kernel that never returns usually has a loop whose index does not advance (a grid-stride step of 0, "
            f"a `while` without progress) or a __syncthreads() that some threads of the block never reach."
        )
    if killed_for == "memory":
        return "crashed", f"The check used more than {memory_limit / 2**30:.1f} GiB of memory{where} and was stopped."
    if killed_for == "files":
        return "crashed", (f"The check wrote more than it may ({scratch_limits}){where} and was stopped. A kernel "
                           f"cell needs no files of its own: remove anything the cell writes to a file.")
    if killed_for == "tampered":
        return "crashed", (f"The grading's own files were changed while it ran{where} (by code of the cell, which "
                           f"runs beside it), so nothing it handed back can be trusted. A kernel cell needs no files: "
                           f"remove anything the cell does to files.")
    if killed_for == "processes":
        return "crashed", (f"Too many processes: the check reached the limit of {sandbox.PROCESS_LIMIT} processes "
                           f"and threads{where} and was stopped. A kernel cell needs no processes of its own: "
                           f"remove any fork(), system() or thread the cell starts.")
    if returncode is not None and returncode < 0:
        try:
            sig = signal.Signals(-returncode).name
        except ValueError:
            sig = f"signal {-returncode}"
        how = f"was killed by {sig}"
    else:
        how = f"exited (status {returncode}) without a result"
    return "crashed", (
        f"The process checking the kernel {how}{where}. This usually means the kernel wrote far outside its "
        f"buffers (a missing bounds check) and corrupted memory."
    )


def _shape_fields(d: dict) -> dict:
    names = {f.name for f in fields(ShapeResult)}
    return {k: v for k, v in d.items() if k in names}
