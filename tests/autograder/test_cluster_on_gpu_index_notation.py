"""``autograder grade --cluster`` on one GPU: the sample classes of the index-notation and attention assignments
(``make test-gpu``).

A file of its own so that ``make test-gpu`` grades it beside the other ``test_cluster_on_gpu*`` files.
"""

from __future__ import annotations

import pytest

from cluster_on_gpu import SHARES, check_sample_class_on_one_gpu, grades_a_class_on_gpu


@pytest.mark.parametrize("assignment", SHARES["test_cluster_on_gpu_index_notation.py"])
@grades_a_class_on_gpu
def test_sample_class_through_the_cluster_on_one_gpu(assignment, tmp_path):
    check_sample_class_on_one_gpu(assignment, tmp_path)
