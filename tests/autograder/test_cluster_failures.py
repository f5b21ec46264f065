"""The cluster driver's bounded retries, on a one-worker Dask cluster with stand-in gradings (no kernels run).

A grading that kills its worker once is retried and recorded; one that never
returns is stopped at the task's time limit (its worker restarted), retried,
and then recorded as a failure with the reason, never as a result.
"""

from __future__ import annotations

import gc
import os
import time

import pytest

from autograder.class_grading import GradingJob
from autograder.cluster import (CLUSTER_CONFIG, Task, cluster_cards, grading_slots, gradings_per_gpu, local_cluster,
                                run_tasks)
from autograder.result import ExerciseResult
from nbgrader_course import ASSIGNMENT, NOTEBOOK, REPO

pytestmark = pytest.mark.timeout(300)

SOLUTION = (REPO / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text()


def passing(sub, **kwargs) -> ExerciseResult:
    return ExerciseResult(exercise=sub.exercise, status="passed", correctness_score=1.0, correctness_max=1.0,
                          backend="cpu", device="stand-in")


class DiesOnce:
    """Kills the worker process the first time it is called (a marker file remembers), then passes."""

    def __init__(self, marker: str):
        self.marker = marker

    def __call__(self, sub, **kwargs) -> ExerciseResult:
        if not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)
        return passing(sub)


def never_returns(sub, **kwargs) -> ExerciseResult:
    import time

    time.sleep(3600)
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def client():
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set(CLUSTER_CONFIG), LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                                      memory_limit=0, dashboard_address=":0") as cluster, \
            Client(cluster) as c:
        yield c


def _run(client, grade_fn, retries: int, task_timeout: float = 600):
    job = GradingJob(assignment=ASSIGNMENT, student="ada", notebooks={NOTEBOOK: SOLUTION}, student_key="k",
                     grade_fn=grade_fn)
    task = Task(student="ada", job=job)
    results, failures = [], []
    run_tasks(client, [task], record_result=lambda t, outcome: results.append(outcome),
              record_failure=lambda t, reason: failures.append(reason), retries=retries,
              task_timeout=task_timeout, poll_s=0.5)
    return task, results, failures


def _tasks_on_the_scheduler(client, wait_s: float = 10.0) -> list[str]:
    """The keys the scheduler still holds, once it has had ``wait_s`` to forget released ones."""
    end = time.monotonic() + wait_s
    while True:
        keys = client.run_on_scheduler(lambda dask_scheduler: [str(k) for k in dask_scheduler.tasks])
        if not keys or time.monotonic() > end:
            return keys
        time.sleep(0.2)


def test_a_worker_that_dies_is_retried_and_the_result_recorded(client, tmp_path):
    gc.disable()  # the driver itself lets go of what it recorded, not the garbage collector some time later
    try:
        task, results, failures = _run(client, DiesOnce(str(tmp_path / "died")), retries=1)
        # A result left on the cluster would be graded again, on another worker, if its worker died.
        assert _tasks_on_the_scheduler(client) == []
    finally:
        gc.enable()
    assert failures == [] and task.attempts == 2
    (outcome,) = results
    grading = outcome.gradings[NOTEBOOK]
    assert {r.status for r in grading.results.values()} == {"passed"}
    assert set(grading.results) == {"saxpy", "reduce_sum"}


def test_without_retries_a_death_is_a_failure_with_its_reason(client, tmp_path):
    client.wait_for_workers(1, timeout=120)
    task, results, failures = _run(client, DiesOnce(str(tmp_path / "died")), retries=0)
    assert results == [] and task.attempts == 1
    assert failures == ["the worker grading it died (process killed, out of memory or its node lost) (after 1 attempt)"]


def test_a_grading_past_its_time_limit_is_stopped_retried_then_failed(client):
    client.wait_for_workers(1, timeout=120)
    task, results, failures = _run(client, never_returns, retries=1, task_timeout=2)
    assert results == [] and task.attempts == 2
    (reason,) = failures
    assert reason.startswith("it ran past the time limit of 2 s on tcp://") and reason.endswith("(after 2 attempts)")
    client.wait_for_workers(1, timeout=120)  # the worker was restarted and grades again
    assert client.submit(sum, [1, 2], pure=False).result(timeout=60) == 3


class TakesASecond:
    """A grading that takes about a second (half a second per exercise), then passes."""

    def __call__(self, sub, **kwargs) -> ExerciseResult:
        import time

        time.sleep(0.5)
        return passing(sub)


@pytest.fixture(scope="module")
def gpu_client():
    """One worker offering one GPU resource, as a GPU worker of a grading cluster does (no GPU is used)."""
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set(CLUSTER_CONFIG), LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                                      resources={"GPU": 1}, memory_limit=0,
                                                      dashboard_address=":0") as cluster, Client(cluster) as c:
        yield c


def test_a_class_larger_than_its_gpus_waits_its_turn_without_running_into_the_time_limit(gpu_client):
    """Twelve gradings of about a second each on one GPU, each with a limit of 8 s: all are graded, none retried.

    Dask hands a task that asks for a GPU to a worker as soon as it is submitted;
    if the whole class were submitted at once, the last students' clocks would
    run from the start while the others are graded before them, and the time
    limit would stop gradings that never ran late (the margin is wide: a busy
    machine may make one grading slower, not eight times slower).
    """
    tasks = [Task(student=f"s{i}", job=GradingJob(assignment=ASSIGNMENT, student=f"s{i}",
                                                  notebooks={NOTEBOOK: SOLUTION}, student_key="k",
                                                  grade_fn=TakesASecond()), time_limit=8.0) for i in range(12)]
    results, failures = [], []
    run_tasks(gpu_client, iter(tasks), record_result=lambda t, outcome: results.append(outcome.student),
              record_failure=lambda t, reason: failures.append((t.student, reason)), retries=0, poll_s=0.25)
    assert failures == []
    assert sorted(results) == sorted(f"s{i}" for i in range(12))
    assert [t.attempts for t in tasks] == [1] * 12


def test_a_worker_grades_in_the_grader_s_own_environment(monkeypatch):
    """Dask starts workers with malloc trimming and one BLAS thread unless told otherwise; a grading worker is not."""
    from distributed import Client

    tuned = ("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    for name in tuned:
        monkeypatch.delenv(name, raising=False)
    with local_cluster([], cpu_workers=1) as cluster, Client(cluster) as c:
        seen = c.run(lambda: {name: os.environ.get(name) for name in tuned})
    (env,) = seen.values()
    assert env == dict.fromkeys(tuned), env


@pytest.mark.parametrize("gpus, cores, sharing", [(1, 16, 8), (4, 64, 8), (2, 16, 4), (1, 2, 1), (1, 1, 1), (8, 8, 1)])
def test_a_card_is_shared_by_two_cores_worth_of_gradings(gpus, cores, sharing):
    assert gradings_per_gpu(gpus, cores) == sharing


def test_workers_sharing_a_card_each_see_it_alone_and_grade_one_at_a_time():
    """Two gradings share card 0: two worker processes, each with one thread and a GPU resource, card 0 alone visible
    (the grading children then take their turns on it through the card's lock file)."""
    from distributed import Client

    with local_cluster(["0"], cpu_workers=1, per_gpu=2) as cluster, Client(cluster) as c:
        c.wait_for_workers(2, timeout=60)
        seen = c.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        info = c.scheduler_info(n_workers=-1)["workers"].values()
        assert sorted(w["name"] for w in info) == ["gpu-0-0", "gpu-0-1"]
        assert [(w["resources"], w["nthreads"]) for w in info] == [({"GPU": 1}, 1)] * 2
        assert sorted(seen.values()) == ["0", "0"]
        assert grading_slots(c, on_gpus=True) == 2
        assert cluster_cards(c) == 1  # two gradings, one card
