"""``autograder grade --cluster`` on GPUs: the first two assignments' sample classes through a one-GPU worker,
and a class shared by two GPU workers when two GPUs are visible (``make test-gpu``).

The other assignments' sample classes are graded by the ``test_cluster_on_gpu_*`` files beside this one
(``cluster_on_gpu.SHARES``), so that ``make test-gpu`` grades them in parallel processes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cluster_on_gpu import (ASSIGNMENTS, SHARES, check_sample_class_on_one_gpu, grades_a_class_on_gpu, record,
                            run, sample_class, visible_gpus_for_grading)
from nbgrader_course import gradebook_grades


def test_every_assignment_s_sample_class_is_graded_by_exactly_one_file():
    graded = [a for assignments in SHARES.values() for a in assignments]
    assert sorted(graded) == ASSIGNMENTS, "add the new assignment to one file's share in cluster_on_gpu.SHARES"
    here = Path(__file__).parent
    assert all((here / name).is_file() for name in SHARES)
    for name in SHARES:
        assert f'SHARES["{name}"]' in (here / name).read_text(), name


@pytest.mark.parametrize("assignment", SHARES["test_cluster_on_gpu.py"])
@grades_a_class_on_gpu
def test_sample_class_through_the_cluster_on_one_gpu(assignment, tmp_path):
    check_sample_class_on_one_gpu(assignment, tmp_path)


@grades_a_class_on_gpu
def test_one_class_on_two_gpus_agrees_with_the_sequential_path(tmp_path):
    gpus = visible_gpus_for_grading()
    if len(gpus) < 2:
        pytest.skip(f"needs two visible GPUs ({len(gpus)} here)")
    assignment = "01_cuda_from_python"
    seq_course, kinds = sample_class(tmp_path / "seq", assignment, solved=4, stubs=2)
    run(seq_course, "grade", assignment, "--timeout", "300", gpus=gpus[0])
    course, _ = sample_class(tmp_path / "two", assignment, solved=4, stubs=2)
    out = run(course, "grade", assignment, "--cluster", "--timeout", "300", "--no-progress", gpus=",".join(gpus[:2]))
    assert re.search(r"(\d+) worker\(s\), \1 grading on 2 GPU\(s\)", out), out
    entries = record(course, assignment)
    assert all(e["status"] == "graded" for e in entries.values())
    used = {re.search(r"GPU (\S+)$", e["worker"]).group(1) for e in entries.values()}
    assert used == set(gpus[:2]), used  # both cards graded
    ours, theirs = gradebook_grades(course), gradebook_grades(seq_course)
    for student in kinds:  # correctness is the same everywhere; speed is measured on each card
        for cell, grade in ours[student].items():
            if cell.endswith("_correctness"):
                assert grade == theirs[student][cell], (student, cell)
