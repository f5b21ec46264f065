"""Every assignment's released notebook (stubs only) graded on a GPU earns nothing: a file of its own so
that ``make test-gpu`` grades them beside the solutions (``test_solutions_on_gpu*.py``).
"""

from __future__ import annotations

import pytest

from solutions_on_gpu import ASSIGNMENTS, check_released_stubs_earn_nothing

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_released_stubs_earn_nothing_on_a_gpu(assignment, tmp_path):
    check_released_stubs_earn_nothing(assignment, tmp_path)
