"""Chapters show one kernel of a .cu file at a time: the excerpt must be exactly that kernel."""

import pytest

from kernels import read_source
from kernels.runtime import parse_kernels
from kernels.tools.source_excerpt import function_source


def test_every_kernel_of_a_file_is_found_whole():
    for topic in ("sgemm", "conv2d", "capsule_prediction", "reduction"):
        kernels = parse_kernels(read_source(topic), f"{topic}.cu", {})
        assert kernels
        for name in kernels:
            excerpt = function_source(topic, name)
            assert f"{name}(" in excerpt
            assert excerpt.count("{") == excerpt.count("}") > 0
            # One kernel only: the next kernel of the file is not dragged along.
            others = [k for k in kernels if k != name and f" {k}(" in excerpt.replace("\n", " ")]
            assert not others, (name, others)


def test_launch_bounds_and_comment_above_are_kept():
    excerpt = function_source("sgemm", "sgemm_warptile")
    assert excerpt.lstrip().startswith(("//", "__global__ void __launch_bounds__"))
    assert "__launch_bounds__(WT_THREADS, WT_MIN_BLOCKS)" in excerpt


def test_unknown_name_is_a_clear_error():
    with pytest.raises(KeyError, match="no function called 'no_such_kernel'"):
        function_source("reduction", "no_such_kernel")
