"""The order ``make test-gpu`` starts its test files in (``--heavy-first``, see ``conftest.py``)."""

#: The GPU suite's longest files, longest first (summed test time under ``make test-gpu`` on an H100: each of
#: their tests grades submissions or a class in sandboxed child processes, 40 to 240 s a file).
#: ``make test-gpu`` starts them first (``--heavy-first``, with pytest-xdist's own ordering, by number of
#: tests, turned off): ordered by test count, a file of two two-minute tests came last and the other
#: processes waited for it.  A file missing here only runs later; ``test_suite_order.py`` checks the paths.
HEAVY_FIRST = (
    "tests/autograder/test_engine_kernels.py",
    "tests/autograder/test_sandbox_attacks.py",
    "tests/autograder/test_solutions_on_gpu.py",
    "tests/autograder/test_nbgrader_cycle.py",
    "tests/autograder/test_cluster_on_gpu_convolution.py",
    "tests/autograder/test_solutions_on_gpu_custom_layers.py",
    "tests/autograder/test_cluster_on_gpu.py",
    "tests/autograder/test_cluster_on_gpu_custom_layers.py",
    "tests/autograder/test_solutions_on_gpu_stubs.py",
    "tests/test_conv2d_backward.py",
    "tests/test_sgemm.py",
    "tests/autograder/test_build_cache.py",
)
