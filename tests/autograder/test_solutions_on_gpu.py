"""Every assignment graded end to end on a GPU: the instructor's solution notebook
earns every correctness point with its speed measured against the reference
kernel (this file and ``test_solutions_on_gpu_custom_layers.py``, as
``solutions_on_gpu.SHARES`` divides them), and the released student notebook
(stubs only) earns nothing (``test_solutions_on_gpu_stubs.py``).

The planted-bug corpora of the chapters are graded on the CPU emulator in
``make test``, where a race or an out-of-bounds access is found every time;
on a GPU they may or may not show, so these files grade what a GPU must add:
the timing, the device record and the speed points.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from solutions_on_gpu import ASSIGNMENTS, SHARES, check_solution_earns_every_point_it_can


def test_every_assignment_s_solution_is_graded_by_exactly_one_file():
    graded = [a for assignments in SHARES.values() for a in assignments]
    assert sorted(graded) == ASSIGNMENTS, "add the new assignment to one file's share in solutions_on_gpu.SHARES"
    here = Path(__file__).parent
    for name in SHARES:
        assert f'SHARES["{name}"]' in (here / name).read_text(), name


@pytest.mark.gpu
@pytest.mark.parametrize("assignment", SHARES["test_solutions_on_gpu.py"])
def test_solution_earns_every_point_it_can_on_a_gpu(assignment, tmp_path):
    check_solution_earns_every_point_it_can(assignment, tmp_path)
