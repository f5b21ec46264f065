"""Grading a class as Dask tasks: one grading per GPU at a time, on one machine or many.

The instructor's process (the driver, :func:`grade_on_cluster`) prepares each
student's job (:meth:`autograder.class_run.ClassRun.job`), submits it as a Dask task
asking for ``resources={"GPU": 1}`` when the cluster has GPU workers (each worker grades one
submission at a time; several workers may share a card, which they time on in turn), and
writes each result into nbgrader's gradebook and the grading record as it
arrives, as the sequential path does (:class:`autograder.class_run.ClassRun`).
Workers only grade (:func:`autograder.class_grading.run_job`): the
isolation of every exercise (a fresh child process with limits, the
student's code never in the worker) is the engine's, unchanged.

A task whose worker dies, whose node disappears or that runs past its time
limit is submitted again, at most ``retries`` more times; then the student is
recorded as a grading failure with the reason (never a score). Every result
is written as soon as it arrives, so a run stopped at any point loses nothing
already graded, and the next run grades only what is missing or changed
(:class:`autograder.grading_record.GradingRecord`).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import nbformat

from .class_grading import GradingJob, JobOutcome, run_job
from .class_run import THIS_PROCESS, ClassRun, entry_line, phases_line
from .course_secret import COURSE_SECRET_ENV
from .grade_cells import graded_exercises
from .nbgrader_bridge import CPU_GRADINGS_ENV, cpu_gradings, usable_cores
from .outcome import GRADED, exception_reason

#: Extra attempts after the first for a task whose worker died or that timed out.
DEFAULT_RETRIES = 2

#: Dask settings of a grading cluster (the README gives them for a scheduler started by hand):
#: a task is given up at the first death of a worker running it (the driver retries, with a
#: reason); a worker holds only the task it runs (so "running" is running, for the time limit).
#: Tasks that ask for a GPU are not queued by the scheduler: ``run_tasks`` bounds them itself.
#: A worker grades in the environment ``autograder grade`` grades in: none of the variables Dask sets
#: for numeric workers before it starts one (``MALLOC_TRIM_THRESHOLD_`` makes every array of the
#: grader's chunked checks a fresh mmap, about a third slower; one BLAS thread).
CLUSTER_CONFIG = {
    "distributed.scheduler.allowed-failures": 0,
    "distributed.scheduler.worker-saturation": 1.0,
    "distributed.nanny.pre-spawn-environ": {},
}


def visible_gpus() -> list[str]:
    """The GPUs a local cluster gives one worker each: $CUDA_VISIBLE_DEVICES, else what nvidia-smi lists.

    None under ``DLK_BACKEND=cpu`` (the emulator grades, whatever the machine has).
    """
    if os.environ.get("DLK_BACKEND", "auto").lower() == "cpu":
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip().isdigit()] if out.returncode == 0 else []


#: The most gradings that share one card on a local cluster (one worker process each).
MAX_GRADINGS_PER_GPU = 8


def gradings_per_gpu(gpus: int, cores: int | None = None) -> int:
    """How many gradings share each card of a local cluster: two of the host's cores per grading (a grading
    overlaps two exercises), at most :data:`MAX_GRADINGS_PER_GPU`, at least one."""
    cores = usable_cores() if cores is None else cores
    return max(1, min(MAX_GRADINGS_PER_GPU, cores // (2 * max(1, gpus))))


def local_cluster(gpus: list[str], cpu_workers: int, per_gpu: int | None = None):
    """``per_gpu`` worker processes per GPU (default :func:`gradings_per_gpu`; that GPU alone visible, resource
    GPU=1), else ``cpu_workers`` emulator workers (each grading as many exercises at once as it has cores of its
    own: ``nbgrader_bridge.cpu_gradings``).

    Each worker runs one grading at a time (one thread). The workers of one card
    share it as the sequential path's exercises do: each grading child compiles,
    draws its inputs and is judged on the host's cores while another has its turn
    on the card, and kernels are checked and timed one grading at a time per card
    (:mod:`autograder.gpu_turn`), so the card is never idle while a grading waits
    for nvcc. A worker that dies is started again by its nanny. The scheduler
    gives up on a task at the first worker death while running it, so that the
    driver's bounded retries (and the reason) are the only ones.
    """
    import logging

    import dask
    from distributed import LocalCluster, Nanny, Scheduler, SpecCluster

    dask.config.set(CLUSTER_CONFIG)
    quiet = {"silence_logs": logging.ERROR}
    # Worker processes start from this process's environment: blank the course secret in theirs
    # (a job carries each student's own key; a worker never needs the course secret).
    no_secret = {COURSE_SECRET_ENV: ""}
    if gpus:
        sharing = per_gpu or gradings_per_gpu(len(gpus))
        workers = {
            f"gpu-{gpu}" + (f"-{slot}" if sharing > 1 else ""): {"cls": Nanny, "options": {
                "nthreads": 1, "resources": {"GPU": 1}, "memory_limit": 0,
                "env": {"CUDA_VISIBLE_DEVICES": gpu, **no_secret}, **quiet}}
            for gpu in gpus for slot in range(sharing)
        }
        scheduler = {"cls": Scheduler, "options": {"dashboard_address": ":0"}}
        return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.ERROR)
    # emulator workers share the host's cores: each grades as many exercises at once as its share
    share = {CPU_GRADINGS_ENV: str(max(1, cpu_gradings() // max(1, cpu_workers)))}
    return LocalCluster(n_workers=cpu_workers, threads_per_worker=1, processes=True, memory_limit=0,
                        dashboard_address=":0", env={**no_secret, **share}, **quiet)


def connect(address: str | None, workers: int | None, per_gpu: int | None = None) -> tuple:
    """A Dask client: to the scheduler at ``address``, else to a local cluster made here (client, cluster or None)."""
    from distributed import Client

    if address:
        try:
            client = Client(address, timeout="30s")
        except (OSError, TimeoutError) as exc:
            raise SystemExit(f"autograder: --cluster {address}: could not reach a Dask scheduler there ({exc})") from None
        return client, None
    gpus = visible_gpus()
    if workers is not None:
        gpus = gpus[:workers]
    cpu_workers = workers or max(1, min(os.cpu_count() or 1, 4))
    cluster = local_cluster(gpus, cpu_workers, per_gpu)
    return Client(cluster), cluster


def _workers(client):
    """What the scheduler knows of each of its workers (resources, threads)."""
    return client.scheduler_info(n_workers=-1).get("workers", {}).values()


def _gpu_workers(client) -> list[str]:
    """The addresses of the workers that offer a GPU resource."""
    return [address for address, w in client.scheduler_info(n_workers=-1).get("workers", {}).items()
            if (w.get("resources") or {}).get("GPU", 0) >= 1]


def cluster_gpus(client) -> int:
    """How many workers offer a GPU resource (workers sharing one card each count)."""
    return len(_gpu_workers(client))


def _card_of_this_worker() -> str:
    """Run on a worker: the card it grades on, as host and visible devices."""
    return f"{socket.gethostname()}:{os.environ.get('CUDA_VISIBLE_DEVICES', 'all')}"


def cluster_cards(client) -> int:
    """How many cards the cluster's GPU workers grade on (workers sharing a card count once)."""
    gpu_workers = _gpu_workers(client)
    if not gpu_workers:
        return 0
    try:
        return len(set(client.run(_card_of_this_worker, workers=gpu_workers).values()))
    except Exception:  # a worker left while asked: count each worker as a card
        return len(gpu_workers)


@dataclass
class Task:
    student: str
    job: GradingJob
    attempts: int = 0
    seconds: float = 0.0
    time_limit: float | None = None  # seconds it may run on a worker (None: run_tasks' task_timeout)
    key: str = ""
    started: float | None = None  # when the scheduler first reported it running (driver clock)


@dataclass
class RunOutcome:
    graded: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # student -> reason
    seconds: float = 0.0


def failure_reason(exc: BaseException) -> str:
    """Why a task ended without a result, in a sentence."""
    name = type(exc).__name__
    if name == "KilledWorker":
        return "the worker grading it died (process killed, out of memory or its node lost)"
    if name == "CancelledError":
        return "the task was cancelled (its worker or the scheduler went away)"
    return f"the grading raised {exception_reason(exc)}"


def grading_slots(client, on_gpus: bool) -> int:
    """How many gradings the cluster runs at once: its GPUs, else its workers' threads (at least one)."""
    workers = _workers(client)
    if on_gpus:
        return max(1, sum(int((w.get("resources") or {}).get("GPU", 0)) for w in workers))
    return max(1, sum(int(w.get("nthreads") or 1) for w in workers))


def run_tasks(client, tasks: Iterable[Task], *, record_result: Callable[[Task, JobOutcome], None],
              record_failure: Callable[[Task, str], None], retries: int, task_timeout: float | None = None,
              on_progress: Callable[[int], None] = lambda failed: None, poll_s: float = 1.0) -> None:
    """Submit ``tasks``, hand each result to ``record_result`` as it arrives; bounded retries, then ``record_failure``.

    ``tasks`` may be a generator: its jobs are made while the cluster grades
    the ones before. Tasks ask for one GPU where the cluster has GPU workers.
    No more tasks are on the cluster than it has slots (GPUs, else threads),
    counted again at every poll so that workers joining later are used:
    Dask gives a task that asks for a resource to a worker the moment it is
    submitted, so a class submitted at once would be dealt out in advance
    (one worker's half may take longer than the other's) and a queued task
    would count as running against its time limit. One more task per slot
    is made ready ahead, so a freed GPU gets its next grading before the
    result of the last one is written.

    A task running longer than its ``time_limit`` (else ``task_timeout``)
    seconds is cancelled and its worker process ended (the only way to stop a
    grading that does not return; the nanny starts a fresh one), then retried.
    """
    from collections import deque

    from distributed import wait

    on_gpus = bool(cluster_gpus(client))
    resources = {"GPU": 1} if on_gpus else None
    source = iter(tasks)
    ready: deque[Task] = deque()  # made, not yet submitted; retries go first
    pending: dict = {}  # future -> Task
    failures = 0

    def submit(task: Task) -> None:
        task.attempts += 1
        task.started = None
        task.key = f"grade-{task.job.assignment}-{task.student}-{task.attempts}-{time.monotonic_ns()}"
        future = client.submit(run_job, task.job, key=task.key, resources=resources, pure=False, retries=0)
        pending[future] = task

    def make_ready(slots: int) -> None:
        while len(ready) < slots:
            task = next(source, None)
            if task is None:
                return
            ready.append(task)

    def fill(slots: int) -> None:
        while ready and len(pending) < slots:
            submit(ready.popleft())

    def give_up_or_retry(task: Task, reason: str) -> None:
        nonlocal failures
        if task.attempts <= retries:
            ready.appendleft(task)
            return
        failures += 1
        record_failure(task, f"{reason} (after {task.attempts} attempt{'s' if task.attempts != 1 else ''})")
        on_progress(failures)

    slots = grading_slots(client, on_gpus)
    make_ready(slots)
    while True:
        fill(slots)
        make_ready(slots)
        if not pending:
            break
        try:
            done, _ = wait(list(pending), timeout=poll_s, return_when="FIRST_COMPLETED")
        except TimeoutError:
            done = set()
        ended = [(future, pending.pop(future)) for future in done]
        fill(slots)  # the freed slots grade the next students while these results are written
        for future, task in ended:
            if future.status == "finished":
                outcome = future.result()
                task.seconds = outcome.seconds
                try:
                    record_result(task, outcome)
                except Exception as exc:  # the recording itself failed: a failure with its reason, never a score
                    failures += 1
                    record_failure(task, f"its grading could not be recorded: {type(exc).__name__}: {exc}")
                on_progress(failures)
            else:
                try:
                    exc = future.exception()
                except BaseException as error:  # a cancelled future raises instead of returning its exception
                    exc = error
                give_up_or_retry(task, failure_reason(exc))
            # Handled: the scheduler forgets it now, not when the garbage collector frees the future (a
            # result it still held would be graded again on another worker if its worker died).
            future.release()
        if pending:
            _stop_overdue(client, pending, task_timeout, give_up_or_retry)
        try:
            slots = grading_slots(client, on_gpus)
        except Exception:  # the scheduler did not answer this time: keep the last count
            pass


def _stop_overdue(client, pending: dict, task_timeout: float | None, give_up_or_retry) -> None:
    """Cancel tasks running past ``task_timeout``, restart their workers, and retry or record them."""
    now = time.monotonic()
    running = {}
    try:
        for worker, keys in client.processing().items():
            for key in keys:
                running[str(key)] = worker
    except Exception:  # the scheduler did not answer this time: look again at the next poll
        return
    for future, task in list(pending.items()):
        worker = running.get(task.key)
        if worker is None:
            continue
        if task.started is None:
            task.started = now
            continue
        limit = task.time_limit or task_timeout
        if limit is None or now - task.started <= limit:
            continue
        try:
            # The worker's process ends; its nanny starts a fresh one, as after any worker death.
            client.run(_end_worker_process, workers=[worker], wait=False)
        except Exception:  # the worker is already gone
            pass
        # Until the scheduler has seen it go, the stuck task holds the worker's one slot, so no
        # other student's grading is sent to a worker about to end.
        _wait_until_gone(client, worker, timeout_s=60)
        del pending[future]
        client.cancel([future], force=True)
        give_up_or_retry(task, f"it ran past the time limit of {limit:g} s on {worker}, which was restarted")


def _wait_until_gone(client, worker: str, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            if worker not in client.scheduler_info(n_workers=-1).get("workers", {}):
                return
        except Exception:  # no answer this time: ask again
            pass
        time.sleep(0.2)


async def _end_worker_process() -> None:
    """Run on a worker (in its event loop, beside the stuck grading): end the process at once.

    A Python thread cannot be stopped, and a graceful restart waits for the
    task it would interrupt; a worker process that exits is replaced by its
    nanny, whatever its task was doing. (A coroutine: Dask runs only those without waiting.)
    """
    os._exit(70)


def default_task_timeout(n_exercises: int, timeout_s: float | None) -> float:
    """A whole submission's time limit: each exercise's own limit, twice, and a minute for the rest."""
    per_exercise = timeout_s if timeout_s is not None else 120.0
    return 2.0 * max(1, n_exercises) * per_exercise + 60.0


def progress_bar(total: int, enabled: bool):
    """A bar on stderr: done/total, rate, ETA and, as a postfix, failures (tqdm)."""
    from tqdm import tqdm

    return tqdm(total=total, unit="grading", file=sys.stderr, disable=not enabled, dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]")



@dataclass
class ClusterRun:
    """What one grading of a class on a cluster did."""

    graded_now: list[str]  # the students it graded (or tried to): missing or changed
    up_to_date: list[str]  # graded before and unchanged: not graded again
    prepared: int  # jobs made and submitted
    seconds: float


def grade_on_cluster(run: ClassRun, students: list[str], *, address: str | None, workers: int | None,
                     retries: int, task_timeout: float | None, regrade: bool, progress: bool,
                     say: Callable[[str], None], per_gpu: int | None = None) -> ClusterRun:
    """Every student of ``students`` missing or changed (every one, ``regrade``), as Dask tasks, on the cluster
    whose scheduler is at ``address`` (else a local cluster of ``workers``, ``per_gpu`` gradings sharing each
    card); each result recorded as it arrives."""
    client, local = connect(address or None, workers, per_gpu)
    try:
        if not _workers(client):
            say("waiting for the cluster's first worker ...")
            client.wait_for_workers(1, timeout=300)
        gpu_workers = cluster_gpus(client)
        where = "a local cluster" if local is not None else f"the cluster at {address}"
        say(f"grading {run.assignment} on {where}: {len(_workers(client))} worker(s), "
            + (f"{gpu_workers} grading on {cluster_cards(client)} GPU(s) (one grading each; kernels checked and "
               f"timed one grading at a time per card)" if gpu_workers
               else "none with a GPU: correctness on the CPU emulator, speed not measured"))
        submitted = {s: run.submission(s) for s in students}
        todo, up_to_date = run.to_grade(students, submitted, bool(gpu_workers), regrade)
        run.settled += up_to_date
        if up_to_date:
            say(f"{len(up_to_date)} of {len(students)} submission(s) were graded before (by `autograder grade`, with "
                f"or without --cluster) and have not changed since, nor has the secret or the time limit: "
                f"they are not graded again; add --regrade to grade every submission again")
        prepared: list[str] = []
        started = time.perf_counter()
        with progress_bar(len(todo), enabled=progress) as bar:

            def line(text: str) -> None:
                bar.write(text, file=sys.stdout)  # above the bar

            def tasks():
                """Each student's job, made as the cluster grades the ones before (a generator)."""
                for student in todo:
                    try:
                        job = run.job(student, submitted[student])
                    except Exception as exc:  # nbgrader refused the notebook (e.g. cell metadata it cannot check)
                        entry = run.failed(student, submitted[student], f"the submission could not be prepared for "
                                           f"grading: {exception_reason(exc)}", worker=THIS_PROCESS)
                        bar.update(1)
                        line(entry_line(student, entry))
                        continue
                    if not job.notebooks:  # nothing to grade: each notebook scores 0, saying why
                        entry = run.record_grading(job, {}, worker=THIS_PROCESS, attempts=1, seconds=0.0)
                        bar.update(1)
                        line(entry_line(student, entry))
                        continue
                    n_exercises = sum(len(graded_exercises(nbformat.reads(text, as_version=4)))
                                      for text in job.notebooks.values())
                    prepared.append(student)
                    yield Task(student=student, job=job,
                               time_limit=task_timeout or default_task_timeout(n_exercises, run.timeout_s))

            def recorded(task: Task, outcome: JobOutcome) -> None:
                entry = run.record_grading(task.job, outcome.gradings, worker=outcome.worker, attempts=task.attempts,
                                           seconds=outcome.seconds)
                bar.update(1)
                line(entry_line(task.student, entry) + (f" on {outcome.worker}" if entry.status == GRADED else ""))
                if run.show_phases and entry.phases:
                    line(phases_line(entry))

            def failed(task: Task, reason: str) -> None:
                entry = run.failed(task.student, task.job.submission, reason, attempts=task.attempts)
                bar.update(1)
                line(entry_line(task.student, entry))

            run_tasks(client, tasks(), record_result=recorded, record_failure=failed, retries=retries,
                      on_progress=lambda n: bar.set_postfix(failed=n))
        seconds = time.perf_counter() - started
    finally:
        client.close()
        if local is not None:
            local.close()
    return ClusterRun(graded_now=todo, up_to_date=up_to_date, prepared=len(prepared), seconds=seconds)
