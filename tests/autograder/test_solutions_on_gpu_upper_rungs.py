"""The upper rungs' solution notebooks (the GEMM ladder's, attention's) graded on a GPU
(``solutions_on_gpu.SHARES``): a file of its own so that ``make test-gpu`` grades them beside the others.
"""

from __future__ import annotations

import pytest

from solutions_on_gpu import SHARES, check_solution_earns_every_point_it_can

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("assignment", SHARES["test_solutions_on_gpu_upper_rungs.py"])
def test_solution_earns_every_point_it_can_on_a_gpu(assignment, tmp_path):
    check_solution_earns_every_point_it_can(assignment, tmp_path)
